{#- The platform each trace ran on, detected from its device name; MI300X when no pattern
    matches (the seed's default, flagged so the report can warn). Matched once per trace when it is
    modelled: every cross-trace view reads it through `traces`, and a regex per trace and platform
    at each query would grow with the warehouse. -#}
{{ config(materialized='incremental') }}

with trace_files as (
    select * from {{ ref('stg_trace__files') }}
    where {{ is_new_trace() }}
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

final as (
    select
        trace_files.trace_id,
        coalesce(matches.platform, '{{ var("default_platform") }}') as platform,
        matches.platform is not null as is_detected
    from trace_files
    left join matches
        on trace_files.trace_id = matches.trace_id
        and matches.match_rank = 1
)

select * from final
