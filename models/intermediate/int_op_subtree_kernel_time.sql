{#- Per cpu op: the busy time (interval union) of every linked GPU event launched anywhere in
    its subtree — TraceLens' `total_subtree_kernel_time`, and the kernel time of modelled ops. -#}
{{ config(materialized='incremental') }}
{#- Materialized per new trace: the launchers, the unified op table and the roofline sheets all
    read it. #}

with kernels as (
    select * from {{ ref('kernels') }}
    where is_linked and enclosing_cpu_op_id is not null and {{ is_new_trace() }}
),

ancestors as (
    select * from {{ ref('int_cpu_op_ancestors') }}
    where {{ is_new_trace() }}
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
    {{ merge_intervals('subtree_intervals', ['trace_id', 'op_id']) }}
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
