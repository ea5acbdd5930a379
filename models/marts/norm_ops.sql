{#- The normalization ops of op_perf, on each trace's own platform. A view for users' SQL. -#}
{{ config(materialized='view') }}

with op_perf as (
    select * from {{ ref('op_perf') }}
),

final as (
    select *
    from op_perf
    where is_trace_platform and op_category in ('NORM_fwd', 'NORM_bwd', 'RMSNorm')
)

select * from final
