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

first_match as (
    select
        name,
        {{ kernel_rule_case('name') }} as rule_order
    from kernel_names
),

final as (
    select
        first_match.name,
        rules.rule_order,
        rules.kernel_type,
        rules.category,
        rules.library,
        rules.is_comm,
        rules.precision
    from first_match
    inner join rules on first_match.rule_order = rules.rule_order
)

select * from final
