{#- Evidence for the attainable share of an op: for each op signature on the platform its trace
    ran on, the other trace of the warehouse where the same op (name, input shapes and dtypes) ran
    closest to the same platform's roofline, when it ran faster than here. The compute agents
    measure the op's gap to it ("best observed") instead of the default attainable share. -#}
{{ config(materialized='view', meta={'reads_other_traces': true}) }}

with op_perf as (
    select * from {{ ref('op_perf') }}
),

traces as (
    select * from {{ ref('traces') }}
),

measured as (
    -- a share above 100 % of the roofline is a measurement anomaly, not evidence of what is attainable
    select trace_id, platform, signature_key, name, input_dims, input_type, pct_roofline_mean
    from op_perf
    where is_trace_platform and has_perf_model and pct_roofline_mean is not null and pct_roofline_mean <= 100.0
),

faster_elsewhere as (
    select
        here.trace_id,
        here.platform,
        here.signature_key,
        here.pct_roofline_mean as efficiency_percent,
        there.trace_id as best_trace_id,
        there.pct_roofline_mean as best_efficiency_percent,
        row_number() over (
            partition by here.signature_key
            order by there.pct_roofline_mean desc, there.trace_id
        ) as rank_in_signature
    from measured as here
    inner join measured as there
        on there.platform = here.platform
        and there.name = here.name
        and there.input_dims = here.input_dims
        and there.input_type = here.input_type
        and there.trace_id <> here.trace_id
        and there.pct_roofline_mean > here.pct_roofline_mean
),

final as (
    select
        f.trace_id,
        f.platform,
        f.signature_key,
        f.efficiency_percent,
        f.best_trace_id,
        t.file_name as best_trace_name,
        f.best_efficiency_percent
    from faster_elsewhere as f
    inner join traces as t
        on t.trace_id = f.best_trace_id
    where f.rank_in_signature = 1
)

select * from final
