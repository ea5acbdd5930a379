

with trace_files as (
    select * from "warehouse"."staging"."stg_trace__files"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

runtime_calls as (
    select trace_id, name from "warehouse"."staging"."stg_trace__events"
    where trace_id in ('@@NEW_TRACE_IDS@@') and category in ('cuda_runtime', 'cuda_driver')
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
                when 'cuda' then 'H100'
                when 'rocm' then 'MI300X'
                else 'MI300X'
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
