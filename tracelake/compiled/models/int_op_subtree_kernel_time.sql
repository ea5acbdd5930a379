

with kernels as (
    select * from "warehouse"."main"."kernels"
    where is_linked and enclosing_cpu_op_id is not null and trace_id in ('@@NEW_TRACE_IDS@@')
),

ancestors as (
    select * from "warehouse"."intermediate"."int_cpu_op_ancestors"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

subtree_intervals as (
    select
        kernels.trace_id,
        ancestors.ancestor_op_id as op_id,
        kernels.ts_us as start_us,
        kernels.end_us,
        kernels.is_comm
    from kernels
    inner join ancestors
        on kernels.trace_id = ancestors.trace_id
        and kernels.enclosing_cpu_op_id = ancestors.op_id
),

merged_intervals as (
    select
        trace_id, op_id,
        min(start_us) as merged_start_us,
        max(end_us) as merged_end_us
    from (
        select
            *,
            sum(starts_group) over (
                partition by trace_id, op_id
                order by start_us, end_us
                rows between unbounded preceding and current row
            ) as merged_group_id
        from (
            select
                *,
                case
                    when max(end_us) over (
                        partition by trace_id, op_id
                        order by start_us, end_us
                        rows between unbounded preceding and 1 preceding
                    ) >= start_us then 0
                    else 1
                end as starts_group
            from subtree_intervals
        ) as flagged
    ) as grouped
    group by trace_id, op_id, merged_group_id
),

kernel_counts as (
    select
        trace_id,
        op_id,
        count(*) as subtree_kernel_count,
        count(*) filter (where is_comm) as subtree_comm_kernel_count
    from subtree_intervals
    group by trace_id, op_id
),

busy_time as (
    select
        trace_id,
        op_id,
        sum(merged_end_us - merged_start_us) as subtree_kernel_time_us
    from merged_intervals
    group by trace_id, op_id
),

final as (
    select
        busy_time.trace_id,
        busy_time.op_id,
        busy_time.subtree_kernel_time_us,
        kernel_counts.subtree_kernel_count,
        kernel_counts.subtree_comm_kernel_count
    from busy_time
    inner join kernel_counts
        on busy_time.trace_id = kernel_counts.trace_id
        and busy_time.op_id = kernel_counts.op_id
)

select * from final
