

with trace_files as (
    select * from "warehouse"."staging"."stg_trace__files"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

platforms as (
    select * from "warehouse"."main"."platforms"
),

matches as (
    select
        trace_files.trace_id,
        platforms.platform,
        row_number() over (partition by trace_files.trace_id order by platforms.detect_priority) as match_rank
    from trace_files
    inner join platforms on regexp_matches(trace_files.device_name, platforms.device_name_pattern)
),

final as (
    select
        trace_files.trace_id,
        coalesce(matches.platform, 'MI300X') as platform,
        matches.platform is not null as is_detected
    from trace_files
    left join matches
        on trace_files.trace_id = matches.trace_id
        and matches.match_rank = 1
)

select * from final
