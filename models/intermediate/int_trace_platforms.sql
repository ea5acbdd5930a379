{#- The platform each trace ran on, detected from its device name. When no pattern matches (no
    device named, or one the seed does not know) the roofline is assumed, by the runtime the trace
    ran on: var `default_platform_cuda` for a CUDA trace, var `default_platform_rocm` for a ROCm
    one, var `default_platform` when neither is known (flagged so the report can warn). The runtime
    is the trace's version keys (trace_files.runtime), else its runtime calls (`hip*` on ROCm,
    `cuda*` / `cu*` on CUDA, whose category ingest names cuda_runtime on both). Matched once per
    trace when it is modelled: every cross-trace view reads it through `traces`, and a regex per
    trace and platform at each query would grow with the warehouse. -#}
{{ config(materialized='incremental') }}

with trace_files as (
    select * from {{ ref('stg_trace__files') }}
    where {{ is_new_trace() }}
),

runtime_calls as (
    select trace_id, name from {{ ref('stg_trace__events') }}
    where {{ is_new_trace() }} and category in ('cuda_runtime', 'cuda_driver')
),

platforms as (
    select * from {{ ref('platforms') }}
),

matches as (
    select
        trace_files.trace_id,
        platforms.platform,
        row_number() over (partition by trace_files.trace_id order by platforms.detect_priority) as match_rank
    from trace_files
    inner join platforms on {{ regex_search('trace_files.device_name', 'platforms.device_name_pattern') }}
),

call_runtimes as (
    select
        trace_id,
        case
            when count(*) filter (where name like 'hip%') > count(*) filter (where name like 'cu%') then 'rocm'
            when count(*) filter (where name like 'cu%') > 0 then 'cuda'
        end as runtime
    from runtime_calls
    group by trace_id
),

trace_runtimes as (
    select
        trace_files.trace_id,
        coalesce(trace_files.runtime, call_runtimes.runtime) as runtime
    from trace_files
    left join call_runtimes on trace_files.trace_id = call_runtimes.trace_id
),

final as (
    select
        trace_files.trace_id,
        coalesce(
            matches.platform,
            case trace_runtimes.runtime
                when 'cuda' then '{{ var("default_platform_cuda") }}'
                when 'rocm' then '{{ var("default_platform_rocm") }}'
                else '{{ var("default_platform") }}'
            end
        ) as platform,
        matches.platform is not null as is_detected,
        -- whose default an assumed platform is; null for a detected one
        case when matches.platform is null then trace_runtimes.runtime end as assumed_for_runtime
    from trace_files
    left join trace_runtimes on trace_files.trace_id = trace_runtimes.trace_id
    left join matches
        on trace_files.trace_id = matches.trace_id
        and matches.match_rank = 1
)

select * from final
