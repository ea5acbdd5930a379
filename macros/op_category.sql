{#- TraceLens' categorize_torch_op: the registry (op_categories seed), then name patterns,
    then the first kernel's name when it is a PyTorch native kernel, else `other`. -#}
{% macro op_category(registry_category, op_name, first_kernel_name) -%}
    case
        when {{ registry_category }} is not null then {{ registry_category }}
        when {{ op_name }} like 'triton%' then 'triton'
        when {{ op_name }} like 'record_param_comms%' then 'record_param_comms'
        when {{ first_kernel_name }} like 'void at::native%' and {{ first_kernel_name }} like '%elementwise%' then 'elementwise'
        when {{ first_kernel_name }} like 'void at::native%' and {{ first_kernel_name }} like '%reduce%' then 'reduce'
        when {{ first_kernel_name }} like 'void at::native%' and {{ first_kernel_name }} like '%multi_tensor_apply%' then 'multi_tensor_apply'
        else 'other'
    end
{%- endmacro %}

{#- The op category of a compiled region (var compiled_region_pattern) that launches kernels
    itself: the `compiled_op_category` (agent_categories seed) of its kernels' category, `_bwd` for
    a backward region; null for any other op, or kernels the seed gives no op category. -#}
{% macro compiled_region_category(op_name, is_backward, compiled_op_category) -%}
    case
        when regexp_matches(coalesce({{ op_name }}, ''), '{{ var("compiled_region_pattern") }}')
            and {{ compiled_op_category }} is not null
            then case when {{ is_backward }} then replace({{ compiled_op_category }}, '_fwd', '_bwd')
                      else {{ compiled_op_category }} end
    end
{%- endmacro %}
