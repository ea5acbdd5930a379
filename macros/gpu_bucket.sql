{#- TraceLens' GPU timeline buckets. Order matters: memcpy first (incl. the ROCm 7.1 legacy copy
    kernels), legacy fill kernels are compute, then collectives by name, then everything else
    (memset included) is computation. -#}
{% macro gpu_bucket(category_column, name_column) -%}
    case
        when {{ category_column }} = 'gpu_memcpy' then 'memcpy'
        when {{ category_column }} = 'kernel'
            and {{ regex_search(name_column, "'^(MEMORY_COPY_(HOST_TO_DEVICE|DEVICE_TO_HOST|DEVICE_TO_DEVICE)|__amd_rocclr_copyBuffer(Rect)?(Aligned)?(\\.kd)?)$'") }}
            then 'memcpy'
        when {{ category_column }} = 'kernel'
            and {{ regex_search(name_column, "'^__amd_rocclr_fillBuffer(Aligned)?(\\.kd)?$'") }}
            then 'computation'
        when {{ regex_search('lower(' ~ name_column ~ ')', "'nccl|rccl|cross_device_reduce'") }}
            then 'communication'
        else 'computation'
    end
{%- endmacro %}
