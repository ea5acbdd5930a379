{#- One row per (job, trace): the traces whose `job` tag names a job (tracelake/jobs.py writes
    the membership tags, docs/jobs.md), with the rank, node and clock base of each. A tag the
    trace lacks falls back to the trace itself: the rank and world size of `distributedInfo`, the
    node from `deviceProperties` (rank // GPUs on the node). A view. -#}
{{ config(materialized='view') }}

with trace_files as (
    select * from {{ ref('stg_trace__files') }}
),

model_updates as (
    select trace_id from {{ ref('trace_model_updates') }}
),

trace_platforms as (
    select trace_id, platform, is_detected from {{ ref('int_trace_platforms') }}
),

members as (
    -- traces whose models are up to date (as `traces` lists them), read without its counts
    select
        trace_files.trace_id,
        trace_files.file_name,
        trace_files.tags,
        trace_files.tags['job'] as job_id,
        coalesce(try_cast(trace_files.tags['job_rank'] as integer), trace_files.rank) as rank,
        case
            when trace_files.tags['job_rank'] is not null then coalesce(trace_files.tags['job_rank_source'], 'tag')
            when trace_files.rank is not null then 'distributedInfo'
        end as rank_source,
        coalesce(try_cast(trace_files.tags['job_world_size'] as integer), trace_files.world_size) as world_size,
        trace_files.device_count,
        trace_platforms.platform,
        case when trace_platforms.is_detected then 'trace device' else 'assumed' end as platform_source,
        trace_files.device_name,
        trace_files.ts_base_us,
        -- Kineto writes ts relative to baseTimeNanoseconds (system clock floored to 3-month
        -- intervals, per process); 2023 traces have none and write epoch us
        try_cast(json_extract_string(trace_files.trace_metadata, '$.baseTimeNanoseconds') as hugeint)
            as base_time_ns
    from trace_files
    inner join model_updates on trace_files.trace_id = model_updates.trace_id
    left join trace_platforms on trace_files.trace_id = trace_platforms.trace_id
    where trace_files.tags['job'] is not null
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
        platform_source,
        device_name,
        (ts_base_us + coalesce(base_time_ns // 1000, 0))::bigint as base_time_us,
        base_time_ns is not null as has_base_time
    from members
)

select * from final
