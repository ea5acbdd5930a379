{#- One row per trace: the facts about the workload that decide which advice applies (a rotary
    embedding is present, the model is already compiled, the step is a serving engine's). A
    finding's sentence is written only when its fact holds. -#}
{{ config(materialized='view') }}

with traces as (
    select trace_id from {{ ref('traces') }}
),

rotary_names as (
    -- names that show a rotary position embedding: module classes first (the best example), then
    -- kernels, then cpu ops
    select trace_id, module_class as name, 1 as source_rank from {{ ref('module_calls') }}
    where {{ regex_search('lower(module_class)', "'" ~ var('rotary_name_pattern') ~ "'") }}
    union all
    select trace_id, name, 2 as source_rank from {{ ref('kernels') }}
    where {{ regex_search('lower(name)', "'" ~ var('rotary_name_pattern') ~ "'") }}
    union all
    select trace_id, name, 3 as source_rank from {{ ref('cpu_ops') }}
    where {{ regex_search('lower(name)', "'" ~ var('rotary_name_pattern') ~ "'") }}
),

rotary as (
    select trace_id, arg_min(name, (source_rank, name)) as example
    from rotary_names
    group by trace_id
),


compiled_kernels as (
    select trace_id, count(*) as kernel_count, sum(dur_us) as time_us
    from {{ ref('kernels') }}
    where kernel_category = 'triton'
    group by trace_id
),

region_ops as (
    select trace_id, op_id from {{ ref('cpu_ops') }}
    where {{ regex_search('name', "'" ~ var('compiled_region_pattern') ~ "'") }}
),

compiled_regions as (
    select trace_id, count(*) as region_count
    from region_ops
    group by trace_id
),

ancestors as (
    select * from {{ ref('cpu_op_ancestors') }}
),

region_subtrees as (
    {{ candidate_subtrees('ancestors', 'region_ops') }}
),

compiled_launchers as (
    -- cpu ops inside a compiled region (the region itself included)
    select distinct trace_id, op_id from region_subtrees
),

compiled_time as (
    -- GPU time of kernels a compiled region launched, or that Triton generated
    select
        kernels.trace_id,
        sum(kernels.dur_us) filter (where compiled_launchers.op_id is not null or kernels.kernel_category = 'triton')
            / nullif(sum(kernels.dur_us), 0) as compiled_gpu_time_share
    from {{ ref('kernels') }} as kernels
    left join compiled_launchers
        on kernels.trace_id = compiled_launchers.trace_id
        and kernels.cpu_op_id = compiled_launchers.op_id
    where kernels.is_linked and kernels.gpu_bucket = 'computation'
    group by kernels.trace_id
),

passes as (
    select trace_id, serving_engine_op_count, serving_engine_op_example from {{ ref('int_trace_passes') }}
),

engines as (
    select trace_id, serving_engine, engine_evidence, engine_graph_mode from {{ ref('int_trace_engines') }}
),

window_edges as (
    -- idle at the profile window's edges (gpu_idle_gaps.gap_class): before the first and after the
    -- last GPU work of the steps, outside the workload
    select trace_id, count(*) as gap_count, sum(duration_us) as idle_us
    from {{ ref('gpu_idle_gaps') }}
    where gap_class = 'window_edge'
    group by trace_id
),

timelines as (
    select trace_id, total_time_ms from {{ ref('gpu_timeline') }}
),

final as (
    select
        traces.trace_id,
        rotary.trace_id is not null as has_rotary,
        rotary.example as rotary_example,
        coalesce(compiled_regions.region_count, 0) as compiled_region_count,
        coalesce(compiled_kernels.kernel_count, 0) as compiled_kernel_count,
        coalesce(compiled_kernels.time_us, 0) as compiled_kernel_time_us,
        coalesce(compiled_time.compiled_gpu_time_share, 0) as compiled_gpu_time_share,
        coalesce(compiled_time.compiled_gpu_time_share, 0) >= {{ var('min_compiled_gpu_time_share') }} as is_compiled,
        coalesce(passes.serving_engine_op_count, 0) as serving_engine_op_count,
        passes.serving_engine_op_example,
        engines.serving_engine,
        engines.engine_evidence as serving_engine_evidence,
        engines.engine_graph_mode as serving_engine_graph_mode,
        coalesce(window_edges.gap_count, 0) as window_edge_gap_count,
        coalesce(window_edges.idle_us, 0) as window_edge_idle_us,
        timelines.total_time_ms - coalesce(window_edges.idle_us, 0) / 1000.0 as analysis_window_ms
    from traces
    left join rotary on rotary.trace_id = traces.trace_id
    left join compiled_regions on compiled_regions.trace_id = traces.trace_id
    left join compiled_kernels on compiled_kernels.trace_id = traces.trace_id
    left join compiled_time on compiled_time.trace_id = traces.trace_id
    left join passes on passes.trace_id = traces.trace_id
    left join engines on engines.trace_id = traces.trace_id
    left join window_edges on window_edges.trace_id = traces.trace_id
    left join timelines on timelines.trace_id = traces.trace_id
)

select * from final
