{#- The ops of TraceLens' unified perf table (reference §6.1), one row per op instance:
    1.-2. the op rows of int_unified_op_rows (top-most modelled ops with GPU work, then leaf
    launchers), with their host columns, kernel time and category;
    3. any linked GPU event still uncovered becomes a synthetic op
       "<parent>-><kernel> (Synthetic Op)" (graph replays, driver-API launches).
    Collective kernels are left out, as in TraceLens' default. -#}
{{ config(materialized='incremental') }}
{#- Materialized per new trace, apart from op_perf_instances that joins it with the perf models:
    one query for both held both working sets at once (+30 MB peak RSS on a 55 MB trace). #}

with host_ops as (
    select * from {{ ref('int_host_ops_merged') }}
    where {{ is_new_trace() }}
),

kernels as (
    select * from {{ ref('kernels') }}
    where is_linked and not is_comm and {{ is_new_trace() }}
),

ancestors as (
    select * from {{ ref('int_cpu_op_ancestors') }}
    where {{ is_new_trace() }}
),

subtree_time as (
    select * from {{ ref('int_op_subtree_kernel_time') }}
    where {{ is_new_trace() }}
),

op_rows as (
    select * from {{ ref('int_unified_op_rows') }}
    where {{ is_new_trace() }}
),

op_categories as (
    select * from {{ ref('op_categories') }}
),

launchers as (
    select trace_id, launcher_event_idx, op_category from {{ ref('int_kernel_launchers') }}
    where {{ is_new_trace() }}
),

compiled_categories as (
    select category as kernel_category, compiled_op_category from {{ ref('agent_categories') }}
    where category_kind = 'kernel' and coalesce(compiled_op_category, '') <> ''
),

ops_under_op_rows as materialized (
    -- every cpu op in an op row's subtree. Joined on its own: with op_rows read from a table that
    -- holds only a small trace's rows until this update commits, DuckDB's join order put op_rows
    -- x kernels (trace_id only, 53M rows) first when the three were joined in one step.
    {{ candidate_subtrees('ancestors', 'op_rows') }}
),

covered_kernels as (
    select distinct kernels.trace_id, kernels.event_idx as kernel_idx
    from kernels
    inner join ops_under_op_rows
        on kernels.trace_id = ops_under_op_rows.trace_id
        and kernels.enclosing_cpu_op_id = ops_under_op_rows.op_id
),

first_kernels as (
    -- the kernel TraceLens' categorizer looks at: the op's own first launched kernel (file
    -- order of the launch calls), else the first one in its subtree
    select
        kernels.trace_id,
        ancestors.ancestor_op_id as op_id,
        arg_min(
            kernels.name,
            (kernels.launcher_event_idx <> ancestors.ancestor_op_id, kernels.launch_event_idx, kernels.ts_us)
        ) as first_kernel_name,
        count(*) as kernel_count
    from kernels
    inner join ancestors
        on kernels.trace_id = ancestors.trace_id
        and kernels.enclosing_cpu_op_id = ancestors.op_id
    group by kernels.trace_id, ancestors.ancestor_op_id
),

ops as (
    select
        op_rows.trace_id,
        op_rows.trace_id || ':' || op_rows.op_id as unified_op_key,
        op_rows.op_id,
        host_ops.name,
        false as is_synthetic,
        op_rows.is_modelled_op,
        case
            -- a compiled region launching kernels itself: the category int_kernel_launchers gave it
            when op_categories.category is null and regexp_matches(host_ops.name, '{{ var("compiled_region_pattern") }}')
                and launchers.op_category is not null then launchers.op_category
            else {{ op_category('op_categories.category', 'host_ops.name', 'first_kernels.first_kernel_name') }}
        end as op_category,
        host_ops.pid,
        host_ops.tid,
        host_ops.dur_us as duration_us,
        host_ops.input_dims,
        host_ops.input_type,
        host_ops.input_strides,
        host_ops.concrete_inputs,
        host_ops.module_chain,
        subtree_time.subtree_kernel_time_us as kernel_time_us,
        first_kernels.kernel_count
    from op_rows
    inner join host_ops
        on op_rows.trace_id = host_ops.trace_id
        and op_rows.op_id = host_ops.event_idx
    inner join subtree_time
        on op_rows.trace_id = subtree_time.trace_id
        and op_rows.op_id = subtree_time.op_id
    left join first_kernels
        on op_rows.trace_id = first_kernels.trace_id
        and op_rows.op_id = first_kernels.op_id
    left join op_categories on host_ops.name = op_categories.op_name
    left join launchers
        on op_rows.trace_id = launchers.trace_id
        and op_rows.op_id = launchers.launcher_event_idx
),

synthetic as (
    select
        kernels.trace_id,
        kernels.trace_id || ':k' || kernels.event_idx as unified_op_key,
        kernels.cpu_op_id as op_id,
        coalesce(parent_op.name, kernels.launch_name) || '->' || kernels.name || ' (Synthetic Op)' as name,
        true as is_synthetic,
        false as is_modelled_op,
        -- a kernel a compiled region launched itself takes its own kernel category's op category
        coalesce(
            {{ compiled_region_category('parent_op.name', 'parent_op.is_backward', 'compiled_categories.compiled_op_category') }},
            {{ op_category('null', "coalesce(parent_op.name, kernels.launch_name) || '->' || kernels.name", 'kernels.name') }}
        ) as op_category,
        coalesce(parent_op.pid, launch.pid) as pid,
        coalesce(parent_op.tid, launch.tid) as tid,
        coalesce(parent_op.dur_us, launch.dur_us) as duration_us,
        parent_op.input_dims,
        parent_op.input_type,
        parent_op.input_strides,
        parent_op.concrete_inputs,
        parent_op.module_chain,
        kernels.dur_us as kernel_time_us,
        1 as kernel_count
    from kernels
    left join host_ops as parent_op
        on kernels.trace_id = parent_op.trace_id
        and coalesce(kernels.cpu_op_id, kernels.enclosing_cpu_op_id) = parent_op.event_idx
    left join host_ops as launch
        on kernels.trace_id = launch.trace_id
        and kernels.launch_event_idx = launch.event_idx
    left join compiled_categories on kernels.kernel_category = compiled_categories.kernel_category
    where not exists (
        select 1 from covered_kernels
        where covered_kernels.trace_id = kernels.trace_id
            and covered_kernels.kernel_idx = kernels.event_idx
    )
),

final as (
    select * from ops
    union all
    select * from synthetic
)

select * from final
