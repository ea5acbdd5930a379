{#- One row per op signature (name, category, thread, input shapes/types/strides/concrete
    inputs) and platform: kernel-time statistics, FLOPs, bytes and the roofline (TraceLens
    unified_perf_summary). Every platform in seeds/platforms.csv is listed;
    `is_trace_platform` marks the one the trace ran on. Grouped once per trace when it is modelled
    (a view would re-group every instance of every trace at each cross-trace query). -#}
{{ config(materialized='incremental') }}

with instances as (
    select *, unified_op_key as instance_key from {{ ref('op_perf_instances') }}
    where {{ is_new_trace() }}
),

final as (
    {{ roofline_by_signature('instances', op_signature_columns()) }}
)

select * from final
