{#- The steps each op signature already runs in one kernel (a norm with its residual add, a gated
    activation, a norm with its quantization): the fused_op_patterns rules matched on the op's name
    (on its kernels' names for a synthetic op, a kernel no cpu op names). The compute agents advise
    fusing only what an op does not fuse. -#}
{{ config(materialized='view') }}

with op_perf as (
    select * from {{ ref('op_perf') }}
),

op_signature_kernels as (
    select * from {{ ref('op_signature_kernels') }}
),

fused_op_patterns as (
    select * from {{ ref('fused_op_patterns') }}
),

signature_names as (
    select trace_id, platform, signature_key, name as matched_name
    from op_perf
    union
    -- a kernel's name speaks only for an op the trace does not name (a graph-replayed kernel):
    -- libraries share one kernel template between their fused and plain ops (aiter's
    -- add_rmsnorm_quant_kernel runs aiter::rmsnorm too), so a named op's own name decides
    select k.trace_id, k.platform, k.signature_key, k.kernel_name as matched_name
    from op_signature_kernels as k
    inner join op_perf as o
        on o.signature_key = k.signature_key
    where o.name like '%(Synthetic Op)'
),

matched_steps as (
    select
        n.trace_id,
        n.platform,
        n.signature_key,
        p.fused_step,
        min(p.rule_order) as rule_order
    from signature_names as n
    inner join fused_op_patterns as p
        on {{ regex_search('n.matched_name', 'p.pattern') }}
    group by n.trace_id, n.platform, n.signature_key, p.fused_step
),

final as (
    select
        trace_id,
        platform,
        signature_key,
        fused_step,
        rule_order
    from matched_steps
)

select * from final
