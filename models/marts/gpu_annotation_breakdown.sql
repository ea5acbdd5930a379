{#- Per trace and GPU user annotation name (`gpu_user_annotation` events: the GPU span of a
    `record_function` range), how often it ran and its GPU time: total, mean, min, max, standard
    deviation, as HTA's get_gpu_user_annotation_breakdown (every name kept; nested annotations each
    count their own span, so shares can sum past 100). A view. -#}
{{ config(materialized='view') }}

with annotations as (
    select trace_id, name, dur_us from {{ ref('stg_trace__events') }}
    where category = 'gpu_user_annotation' and dur_us is not null
),

gpu_span as (
    select trace_id, max(end_us) - min(ts_us) as gpu_span_us from {{ ref('kernels') }}
    group by trace_id
),

final as (
    select
        annotations.trace_id,
        annotations.name,
        count(*) as annotation_count,
        sum(annotations.dur_us) as total_us,
        avg(annotations.dur_us) as mean_us,
        min(annotations.dur_us) as min_us,
        max(annotations.dur_us) as max_us,
        stddev_samp(annotations.dur_us) as std_us,
        100.0 * sum(annotations.dur_us) / nullif(any_value(gpu_span.gpu_span_us), 0) as gpu_span_percent
    from annotations
    left join gpu_span on annotations.trace_id = gpu_span.trace_id
    group by annotations.trace_id, annotations.name
)

select * from final
