

with kernels as (
    select * from "warehouse"."main"."kernels"
    where is_linked and not is_comm
),

launchers as (
    select * from "warehouse"."intermediate"."int_kernel_launchers"
),

op_categories as (
    select * from "warehouse"."main"."op_categories"
),

compiled_categories as (
    select category as kernel_category, compiled_op_category from "warehouse"."main"."agent_categories"
    where category_kind = 'kernel' and coalesce(compiled_op_category, '') <> ''
),

compiled_region_launchers as (
    select launchers.trace_id, launchers.launcher_event_idx, launchers.name, launchers.is_backward
    from launchers
    left join op_categories on launchers.name = op_categories.op_name
    where op_categories.category is null
        and regexp_matches(launchers.name, '^(Torch-Compiled Region|CompiledFunction|## Call CompiledFxGraph|TorchDynamo)')
),

final as (
    select
        kernels.trace_id,
        kernels.event_idx as kernel_event_idx,
        kernels.launcher_event_idx,
        kernels.ts_us,
        kernels.end_us,
        kernels.dur_us,
        case
            when compiled_region_launchers.launcher_event_idx is null then launchers.op_category
            else coalesce(
                case
        when regexp_matches(coalesce(compiled_region_launchers.name, ''), '^(Torch-Compiled Region|CompiledFunction|## Call CompiledFxGraph|TorchDynamo)')
            and compiled_categories.compiled_op_category is not null
            then case when compiled_region_launchers.is_backward then replace(compiled_categories.compiled_op_category, '_fwd', '_bwd')
                      else compiled_categories.compiled_op_category end
    end,
                case
        when null is not null then null
        when compiled_region_launchers.name like 'triton%' then 'triton'
        when compiled_region_launchers.name like 'record_param_comms%' then 'record_param_comms'
        when kernels.name like 'void at::native%' and kernels.name like '%elementwise%' then 'elementwise'
        when kernels.name like 'void at::native%' and kernels.name like '%reduce%' then 'reduce'
        when kernels.name like 'void at::native%' and kernels.name like '%multi_tensor_apply%' then 'multi_tensor_apply'
        else 'other'
    end
            )
        end as op_category,
        compiled_region_launchers.launcher_event_idx is not null as is_compiled_region_kernel
    from kernels
    inner join launchers
        on kernels.trace_id = launchers.trace_id
        and kernels.launcher_event_idx = launchers.launcher_event_idx
    left join compiled_region_launchers
        on kernels.trace_id = compiled_region_launchers.trace_id
        and kernels.launcher_event_idx = compiled_region_launchers.launcher_event_idx
    left join compiled_categories on kernels.kernel_category = compiled_categories.kernel_category
)

select * from final
