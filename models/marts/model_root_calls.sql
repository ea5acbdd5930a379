{#- One row per call of a trace's outermost models: the nn.Module calls with no enclosing call but
    wrappers (module_wrapper_class_pattern: data parallel, torch.compile's OptimizedModule, engine
    wrappers), themselves neither a wrapper nor a container. Model identification names the trace's
    models from them by where the GPU time goes; the phases mart counts the busiest one's calls per
    step (a diffusion request's denoising steps are its transformer's calls). -#}
{{ config(materialized='incremental') }}

with calls as (
    select * from {{ ref('module_calls') }}
    where {{ is_new_trace() }}
),

ancestors as (
    select * from {{ ref('int_module_call_ancestors') }}
    where distance > 0 and {{ is_new_trace() }}
),

under_a_module as (
    -- calls with an enclosing call that is not a wrapper: parts of a model, not a model
    select distinct ancestors.trace_id, ancestors.module_call_id
    from ancestors
    inner join calls as outer_calls
        on ancestors.trace_id = outer_calls.trace_id
        and ancestors.ancestor_call_id = outer_calls.module_call_id
    where not {{ regex_search('outer_calls.module_class', "'" ~ var('module_wrapper_class_pattern') ~ "'") }}
),

root_calls as (
    select calls.*
    from calls
    left join under_a_module
        on calls.trace_id = under_a_module.trace_id
        and calls.module_call_id = under_a_module.module_call_id
    where under_a_module.module_call_id is null
        and not {{ regex_search('calls.module_class', "'" ~ var('module_wrapper_class_pattern') ~ "'") }}
        and not {{ regex_search('calls.module_class', "'" ~ var('module_container_class_pattern') ~ "'") }}
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
