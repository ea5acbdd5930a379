{#- Per trace: the engine that runs it (xDiT, SGLang, vLLM, diffusers), named from the trace's own
    host events by the first rule of seeds/serving_engine_rules.csv that matches one of them (python
    frames of the engine's package, its op namespace, its module classes, its step annotations),
    with how many events match that rule and one of them. Kernel libraries name no engine. -#}
{{ config(materialized='incremental') }}

with host_events as (
    -- every event, not host_ops: the python frames that name a package are only here
    select * from {{ ref('stg_trace__events') }}
    where {{ is_new_trace() }} and category in ('python_function', 'cpu_op', 'user_annotation')
),

host_names as (
    -- a name recurs in every step: each distinct one is matched once, not once an event
    select trace_id, category, name, count(*) as event_count
    from host_events
    group by trace_id, category, name
),

rules as (
    select * from {{ ref('serving_engine_rules') }}
),

engines as (
    select * from {{ ref('serving_engines') }}
),

matching_names as (
    select host_names.trace_id, rules.rule_order, rules.engine, host_names.name, host_names.event_count
    from host_names
    inner join rules
        on host_names.category = rules.category
        and {{ regex_search('host_names.name', 'rules.name_pattern') }}
),

rule_matches as (
    select trace_id, rule_order, engine, sum(event_count)::bigint as event_count, min(name) as example
    from matching_names
    group by trace_id, rule_order, engine
),

first_rules as (
    select *, row_number() over (partition by trace_id order by rule_order) as rule_rank
    from rule_matches
),

final as (
    select
        first_rules.trace_id,
        first_rules.engine as serving_engine,
        first_rules.event_count as engine_event_count,
        first_rules.example as engine_evidence,
        nullif(engines.graph_mode, '') as engine_graph_mode
    from first_rules
    left join engines on first_rules.engine = engines.engine
    where first_rules.rule_rank = 1
)

select * from final
