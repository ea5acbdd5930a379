

with runs as (
    select * from "warehouse"."main"."runs"
),

traces as (
    select * from "warehouse"."main"."traces"
),

phases as (
    select * from "warehouse"."main"."phases"
),

category_time as (
    select * from "warehouse"."main"."trace_category_kernel_time"
),

serving_phases as (
    -- a serving trace's phases: a decode run is never compared with a prefill + decode run
    select trace_id, string_agg(distinct phase, '+' order by phase) as phase
    from phases
    where phase in ('prefill', 'decode', 'mixed', 'denoise')
    group by trace_id
),

capture_traces as (
    -- listed by a replay trace, or tagged as a capture (its batch size / mode) at ingest
    select unnest(string_split(tags['graph_capture_traces'], ',')) as trace_id
    from runs
    where tags['graph_capture_traces'] <> ''
    union
    select trace_id
    from runs
    where tags['graph_capture_batch_size'] is not null or tags['graph_capture_mode'] is not null
),

trace_kernel_time as (
    select trace_id, sum(kernel_time_ms) as kernel_time_ms
    from category_time
    group by trace_id
),

labelled as (
    select
        runs.*,
        -- untagged: the job of a rank (docs/jobs.md), else the file name less a rank number (rank0 /
        -- rank_1 / rank-2 are one model)
        coalesce(runs.model, runs.tags['job'], regexp_replace(regexp_replace(runs.file_name, '(\.json)?(\.gz)?$', ''),
                                                              '[_.-]?rank[_-]?\d+', '')) as group_model,
        case when runs.model is not null then 'tag' when runs.tags['job'] is not null then 'job' else 'file name' end
            as model_source,
        runs.tags['job'] as job_id,
        serving_phases.phase,
        traces.rank,
        traces.world_size,
        traces.source_path,
        runs.total_time_ms is not null as has_gpu_timeline,
        -- the ranks of one job, untagged, share the folder their traces were written to
        runs.run is null and traces.rank is not null and traces.source_path <> '' as is_job_rank,
        trace_kernel_time.kernel_time_ms as category_kernel_time_ms
    from runs
    inner join traces on traces.trace_id = runs.trace_id
    left join serving_phases on serving_phases.trace_id = runs.trace_id
    left join trace_kernel_time on trace_kernel_time.trace_id = runs.trace_id
    where runs.trace_id not in (select capture_traces.trace_id from capture_traces)
),

grouped as (
    select
        *,
        group_model || ' | ' || coalesce(nullif(mode, ''), 'unknown') || ' | ' || coalesce(nullif(platform, ''), 'unknown')
            || case when phase <> '' then ' | ' || phase else '' end as group_key,
        coalesce(nullif(platform, ''), 'unknown') as group_platform,
        case
            when run is not null then 'run ' || run
            when job_id is not null then 'job ' || job_id
            when is_job_rank then 'job ' || case when contains(source_path, '/') then regexp_replace(source_path, '/[^/]*$', '') else '.' end
            else 'trace ' || trace_id
        end as run_identity,
        case
            when run is not null then run
            when job_id is not null then job_id
            when is_job_rank then coalesce(nullif(regexp_extract(source_path, '([^/]*)/[^/]*$', 1), ''), 'job')
            else strftime(ingested_at, '%m-%d %H:%M:%S')
        end as run_label
    from labelled
),

ordered as (
    select
        *,
        row_number() over (
            order by group_key, run is null, list_transform(
        regexp_extract_all(run, '\d+|\D+'),
        lambda part: case
            when regexp_full_match(part, '\d+')
                then {'is_text': false, 'digit_count': length(ltrim(part, '0')), 'text': ltrim(part, '0')}
            else {'is_text': true, 'digit_count': 0, 'text': lower(part)}
        end
    ), ingested_at, coalesce(rank, -1), trace_id
        ) as trace_position
    from grouped
),

placed as (
    select
        *,
        min(trace_position) over (partition by group_key, run_identity) as run_position
    from ordered
),

final as (
    select
        trace_id,
        file_name,
        ingested_at,
        group_model as model,
        model_source,
        run,
        commit,
        mode,
        mode_source,
        platform,
        group_platform,
        phase,
        device_name,
        rank,
        world_size,
        source_path,
        tags,
        quality_verdict,
        total_time_ms,
        computation_time_ms,
        exposed_comm_time_ms,
        exposed_memcpy_time_ms,
        idle_time_ms,
        computation_time_percent,
        exposed_comm_time_percent,
        exposed_memcpy_time_percent,
        idle_time_percent,
        profiler_step_count,
        median_step_kernel_time_ms,
        group_key,
        -- an integer, as the dashboard has always keyed its runs (the hash order of its aggregates follows the type)
        dense_rank() over (partition by group_key order by run_position)::integer as run_index,
        run_label,
        -- the traces of one run are told apart by their rank, else (a shared run tag) their file name
        run_label || case
            when rank is not null then ' · rank ' || rank
            when count(*) over (partition by group_key, run_identity) > 1 then ' · ' || file_name
            else ''
        end as trace_label,
        count(*) over (partition by group_key, run_identity) as run_trace_count,
        count(*) filter (where has_gpu_timeline) over (partition by group_key, run_identity) as run_gpu_trace_count,
        has_gpu_timeline,
        case when has_gpu_timeline then coalesce(category_kernel_time_ms, 0.0) else 0.0 end as kernel_time_ms,
        run_position,
        trace_position
    from placed
)

select * from final
