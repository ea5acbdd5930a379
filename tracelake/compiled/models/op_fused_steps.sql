

with op_perf as (
    select * from "warehouse"."main"."op_perf"
),

op_signature_kernels as (
    select * from "warehouse"."main"."op_signature_kernels"
),

fused_op_patterns as (
    select * from "warehouse"."main"."fused_op_patterns"
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
        on regexp_matches(n.matched_name, p.pattern)
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
