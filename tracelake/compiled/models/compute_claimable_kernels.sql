

with op_perf_kernels as (
    select * from "warehouse"."main"."op_perf_kernels"
),

agent_categories as (
    select * from "warehouse"."main"."agent_categories"
),

op_owning_agents as (
    select distinct agent
    from agent_categories
    where category_kind = 'op'
),

system_kernel_categories as (
    select kernel_owners.category
    from agent_categories as kernel_owners
    left join op_owning_agents
        on kernel_owners.agent = op_owning_agents.agent
    where kernel_owners.category_kind = 'kernel' and op_owning_agents.agent is null
),

final as (
    select
        op_perf_kernels.signature_key,
        op_perf_kernels.trace_id,
        op_perf_kernels.platform,
        op_perf_kernels.unified_op_key,
        op_perf_kernels.event_idx,
        op_perf_kernels.dur_us,
        op_perf_kernels.kernel_category
    from op_perf_kernels
    where op_perf_kernels.kernel_category is not null
        and op_perf_kernels.kernel_category not in (select category from system_kernel_categories)
)

select * from final
