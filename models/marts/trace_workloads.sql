{#- One row per trace: the workload it ran, the key `tracelake compare` pairs a baseline's traces
    with a candidate's on (like with like). In order: the `model` tag (the user said so); else the
    identified model, the classes of the trace's outermost models (model_root_calls, the calls model
    identification names the model from; a pipeline's components joined with '+'); else the
    dashboard's run-group model (run_groups: the job tag, else the file name less a rank number). A view. -#}
{{ config(materialized='view') }}

with run_groups as (
    select * from {{ ref('run_groups') }}
),

root_calls as (
    select * from {{ ref('model_root_calls') }}
),

identified_models as (
    select trace_id, string_agg(distinct module_class, '+' order by module_class) as model_classes
    from root_calls
    group by trace_id
),

final as (
    select
        run_groups.trace_id,
        run_groups.file_name,
        case
            when run_groups.model_source = 'tag' then run_groups.model
            when identified_models.model_classes is not null then identified_models.model_classes
            else run_groups.model
        end as workload,
        case
            when run_groups.model_source = 'tag' then 'model tag'
            when identified_models.model_classes is not null then 'identified model'
            else run_groups.model_source
        end as workload_source,
        run_groups.mode,
        run_groups.platform,
        run_groups.device_name
    from run_groups
    left join identified_models on identified_models.trace_id = run_groups.trace_id
)

select * from final
