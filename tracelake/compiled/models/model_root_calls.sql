

with calls as (
    select * from "warehouse"."main"."module_calls"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

ancestors as (
    select * from "warehouse"."intermediate"."int_module_call_ancestors"
    where distance > 0 and trace_id in ('@@NEW_TRACE_IDS@@')
),

under_a_module as (
    -- calls with an enclosing call that is not a wrapper: parts of a model, not a model
    select distinct ancestors.trace_id, ancestors.module_call_id
    from ancestors
    inner join calls as outer_calls
        on ancestors.trace_id = outer_calls.trace_id
        and ancestors.ancestor_call_id = outer_calls.module_call_id
    where not regexp_matches(outer_calls.module_class, '^(DistributedDataParallel|FullyShardedDataParallel|DataParallel|OptimizedModule)$|Wrapper$')
),

root_calls as (
    select calls.*
    from calls
    left join under_a_module
        on calls.trace_id = under_a_module.trace_id
        and calls.module_call_id = under_a_module.module_call_id
    where under_a_module.module_call_id is null
        and not regexp_matches(calls.module_class, '^(DistributedDataParallel|FullyShardedDataParallel|DataParallel|OptimizedModule)$|Wrapper$')
        and not regexp_matches(calls.module_class, '^(Sequential|ModuleList|ModuleDict)$')
),

final as (
    select
        module_call_key,
        trace_id,
        module_call_id,
        module_class,
        module_instance,
        depth,
        module_chain,
        ts_us,
        end_us,
        kernel_count,
        kernel_time_us
    from root_calls
)

select * from final
