

with traces as (
    select * from "warehouse"."main"."traces"
),

trace_files as (
    select trace_id, trace_metadata from "warehouse"."staging"."stg_trace__files"
),

members as (
    select
        traces.trace_id,
        traces.file_name,
        traces.tags,
        traces.tags['job'] as job_id,
        coalesce(try_cast(traces.tags['job_rank'] as integer), traces.rank) as rank,
        case
            when traces.tags['job_rank'] is not null then coalesce(traces.tags['job_rank_source'], 'tag')
            when traces.rank is not null then 'distributedInfo'
        end as rank_source,
        coalesce(try_cast(traces.tags['job_world_size'] as integer), traces.world_size) as world_size,
        traces.device_count,
        traces.platform,
        traces.ts_base_us,
        -- Kineto writes ts relative to baseTimeNanoseconds (system clock floored to 3-month
        -- intervals, per process); 2023 traces have none and write epoch us
        try_cast(json_extract_string(trace_files.trace_metadata, '$.baseTimeNanoseconds') as hugeint)
            as base_time_ns
    from traces
    left join trace_files on traces.trace_id = trace_files.trace_id
    where traces.tags['job'] is not null
),

final as (
    select
        job_id,
        trace_id,
        file_name,
        rank,
        world_size,
        rank_source,
        coalesce(
            try_cast(tags['job_node'] as integer),
            case when device_count > 0 then rank // device_count else 0 end
        ) as node_id,
        case
            when tags['job_node'] is not null then coalesce(tags['job_node_source'], 'tag')
            when device_count > 0 then 'deviceProperties'
            else 'single_node'
        end as node_source,
        tags['job_host'] as host,
        platform,
        (ts_base_us + coalesce(base_time_ns // 1000, 0))::bigint as base_time_us,
        base_time_ns is not null as has_base_time
    from members
)

select * from final
