{#- Per trace: how many host ops run a backward pass, the evidence `runs` uses to call an
    untagged trace training or inference. -#}
{{ config(materialized='incremental') }}

with host_ops as (
    select * from {{ ref('stg_trace__host_ops') }}
    where {{ is_new_trace() }} and category = 'cpu_op'
),

final as (
    select
        trace_id,
        count(*) filter (where name like 'autograd::engine::evaluate_function:%') as backward_op_count
    from host_ops
    group by trace_id
)

select * from final
