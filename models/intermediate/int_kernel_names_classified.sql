{#- Each distinct GPU kernel name with the first kernel_taxonomy rule that matches it. -#}
with gpu_ops as (
    select * from {{ ref('stg_trace__gpu_ops') }}
),

rules as (
    select * from {{ ref('kernel_taxonomy') }}
),

kernel_names as (
    select distinct name from gpu_ops
),

matches as (
    select
        kernel_names.name,
        rules.rule_order,
        rules.kernel_type,
        rules.category,
        rules.library,
        rules.is_comm,
        rules.precision
    from kernel_names
    inner join rules on {{ regex_search('kernel_names.name', 'rules.pattern') }}
),

first_match as (
    select
        name,
        min(rule_order) as rule_order
    from matches
    group by name
),

final as (
    select matches.*
    from matches
    inner join first_match
        on matches.name = first_match.name
        and matches.rule_order = first_match.rule_order
)

select * from final
