

with kernels as (
    select * from "warehouse"."main"."kernels"
    where is_linked and not is_comm and trace_id in ('@@NEW_TRACE_IDS@@')
),

host_ops as (
    select * from "warehouse"."intermediate"."int_host_ops_merged"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

op_categories as (
    select * from "warehouse"."main"."op_categories"
),

subtree_time as (
    select * from "warehouse"."intermediate"."int_op_subtree_kernel_time"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

thread_labels as (
    select * from "warehouse"."intermediate"."int_thread_labels"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

compiled_categories as (
    select category as kernel_category, compiled_op_category from "warehouse"."main"."agent_categories"
    where category_kind = 'kernel' and coalesce(compiled_op_category, '') <> ''
),

dominant_kernel_categories as (
    -- the kernel category holding most of each launcher's kernel time
    select trace_id, launcher_event_idx, arg_max(kernel_category, category_time_us) as kernel_category
    from (
        select trace_id, launcher_event_idx, kernel_category, sum(dur_us) as category_time_us
        from kernels
        group by all
    )
    group by trace_id, launcher_event_idx
),

launcher_intervals as (
    select trace_id, launcher_event_idx, ts_us as start_us, end_us from kernels
),

merged_intervals as (
    select
        trace_id, launcher_event_idx,
        min(start_us) as merged_start_us,
        max(end_us) as merged_end_us
    from (
        select
            *,
            sum(starts_group) over (
                partition by trace_id, launcher_event_idx
                order by start_us, end_us
                rows between unbounded preceding and current row
            ) as merged_group_id
        from (
            select
                *,
                case
                    when max(end_us) over (
                        partition by trace_id, launcher_event_idx
                        order by start_us, end_us
                        rows between unbounded preceding and 1 preceding
                    ) >= start_us then 0
                    else 1
                end as starts_group
            from launcher_intervals
        ) as flagged
    ) as grouped
    group by trace_id, launcher_event_idx, merged_group_id
),

direct_time as (
    select
        trace_id,
        launcher_event_idx,
        sum(merged_end_us - merged_start_us) as direct_kernel_time_us
    from merged_intervals
    group by trace_id, launcher_event_idx
),

kernel_lists as (
    select
        trace_id,
        launcher_event_idx,
        count(*) as kernel_count,
        arg_min(name, (ts_us, event_idx)) as first_kernel_name,
        list(name order by ts_us, event_idx) as kernel_names,
        list(dur_us order by ts_us, event_idx) as kernel_durations_us,
        list(stream order by ts_us, event_idx) as kernel_streams,
        bool_or(launch_category = 'cuda_runtime') as launched_through_runtime_api
    from kernels
    group by trace_id, launcher_event_idx
),

final as (
    select
        direct_time.trace_id,
        direct_time.launcher_event_idx,
        host_ops.name,
        host_ops.category = 'cpu_op' as is_cpu_op,
        -- a compiled region that launches kernels itself (no aten op between): its kernels' category
        coalesce(
            case when op_categories.category is null then
                case
        when regexp_matches(coalesce(host_ops.name, ''), '^(Torch-Compiled Region|CompiledFunction|## Call CompiledFxGraph|TorchDynamo)')
            and compiled_categories.compiled_op_category is not null
            then case when host_ops.is_backward then replace(compiled_categories.compiled_op_category, '_fwd', '_bwd')
                      else compiled_categories.compiled_op_category end
    end
            end,
            case
        when op_categories.category is not null then op_categories.category
        when host_ops.name like 'triton%' then 'triton'
        when host_ops.name like 'record_param_comms%' then 'record_param_comms'
        when kernel_lists.first_kernel_name like 'void at::native%' and kernel_lists.first_kernel_name like '%elementwise%' then 'elementwise'
        when kernel_lists.first_kernel_name like 'void at::native%' and kernel_lists.first_kernel_name like '%reduce%' then 'reduce'
        when kernel_lists.first_kernel_name like 'void at::native%' and kernel_lists.first_kernel_name like '%multi_tensor_apply%' then 'multi_tensor_apply'
        else 'other'
    end
        ) as op_category,
        host_ops.ts_us,
        host_ops.dur_us,
        host_ops.pid,
        host_ops.tid,
        thread_labels.process_name,
        thread_labels.process_label,
        thread_labels.thread_name,
        host_ops.external_id,
        host_ops.input_dims,
        host_ops.input_type,
        host_ops.input_strides,
        host_ops.concrete_inputs,
        host_ops.module_chain,
        host_ops.is_backward,
        direct_time.direct_kernel_time_us,
        coalesce(subtree_time.subtree_kernel_time_us, direct_time.direct_kernel_time_us) as subtree_kernel_time_us,
        kernel_lists.kernel_count,
        kernel_lists.first_kernel_name,
        kernel_lists.kernel_names,
        kernel_lists.kernel_durations_us,
        kernel_lists.kernel_streams,
        kernel_lists.launched_through_runtime_api
    from direct_time
    inner join kernel_lists
        on direct_time.trace_id = kernel_lists.trace_id
        and direct_time.launcher_event_idx = kernel_lists.launcher_event_idx
    inner join host_ops
        on direct_time.trace_id = host_ops.trace_id
        and direct_time.launcher_event_idx = host_ops.event_idx
    left join op_categories on host_ops.name = op_categories.op_name
    left join dominant_kernel_categories
        on direct_time.trace_id = dominant_kernel_categories.trace_id
        and direct_time.launcher_event_idx = dominant_kernel_categories.launcher_event_idx
    left join compiled_categories on dominant_kernel_categories.kernel_category = compiled_categories.kernel_category
    left join subtree_time
        on direct_time.trace_id = subtree_time.trace_id
        and direct_time.launcher_event_idx = subtree_time.op_id
    left join thread_labels
        on host_ops.trace_id = thread_labels.trace_id
        and host_ops.pid = thread_labels.pid
        and host_ops.tid = thread_labels.tid
)

select * from final
