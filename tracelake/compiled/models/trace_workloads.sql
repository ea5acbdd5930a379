

with run_groups as (
    select * from "warehouse"."main"."run_groups"
),

root_calls as (
    select * from "warehouse"."main"."model_root_calls"
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
