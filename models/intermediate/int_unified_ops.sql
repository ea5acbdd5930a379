{#- The ops of TraceLens' unified perf table (reference §6.1), one row per op instance:
    1. the top-most op with a TraceLens perf model that has GPU work in its subtree;
    2. otherwise the leaf cpu op that launched the kernels (through the runtime API);
    3. any linked GPU event still uncovered becomes a synthetic op
       "<parent>-><kernel> (Synthetic Op)" (graph replays, driver-API launches).
    Collective kernels are left out, as in TraceLens' default. -#}
{{ config(materialized='incremental') }}
{#- Materialized per new trace, apart from op_perf_instances that joins it with the perf models:
    one query for both held both working sets at once (+30 MB peak RSS on a 55 MB trace). #}

with host_ops as (
    select * from {{ ref('stg_trace__host_ops') }}
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

launchers as (
    select * from {{ ref('int_kernel_launchers') }}
    where {{ is_new_trace() }}
),

op_categories as (
    select * from {{ ref('op_categories') }}
),

modelled_candidates as (
    -- ops TraceLens has a perf model for: registry ops with a sheet family, and compiled
    -- Inductor kernels (triton_poi/red/per_*), whose model TraceLens matches by name
    select host_ops.trace_id, host_ops.event_idx as op_id
    from host_ops
    left join op_categories on host_ops.name = op_categories.op_name
    inner join subtree_time
        on host_ops.trace_id = subtree_time.trace_id
        and host_ops.event_idx = subtree_time.op_id
    where host_ops.category = 'cpu_op'
        and host_ops.in_tree
        and (
            coalesce(op_categories.perf_family, '') <> ''
            or {{ regex_search('host_ops.name', "'^triton_(poi|red|per)_'") }}
        )
),

modelled_ancestors as (
    select ancestors.trace_id, ancestors.op_id, ancestors.ancestor_op_id, ancestors.distance
    from ancestors
    inner join modelled_candidates
        on ancestors.trace_id = modelled_candidates.trace_id
        and ancestors.ancestor_op_id = modelled_candidates.op_id
),

collected_modelled as (
    select modelled_candidates.trace_id, modelled_candidates.op_id
    from modelled_candidates
    where not exists (
        select 1 from modelled_ancestors
        where modelled_ancestors.trace_id = modelled_candidates.trace_id
            and modelled_ancestors.op_id = modelled_candidates.op_id
            and modelled_ancestors.distance > 0
    )
),

leaf_candidates as (
    -- ops that launch kernels themselves through the runtime API, have no modelled op with
    -- GPU work below them (TraceLens recurses into those instead) and are not inside a
    -- collected modelled op
    select launchers.trace_id, launchers.launcher_event_idx as op_id
    from launchers
    where launchers.is_cpu_op
        -- TraceLens' leaf test walks runtime-API calls only: an op whose kernels all go
        -- through the driver API (cuLaunchKernel) is not a leaf (reference §14.22)
        and launchers.launched_through_runtime_api
        and not exists (
            select 1 from modelled_ancestors
            where modelled_ancestors.trace_id = launchers.trace_id
                and modelled_ancestors.op_id = launchers.launcher_event_idx
        )
        and not exists (
            select 1 from ancestors
            inner join modelled_candidates
                on ancestors.trace_id = modelled_candidates.trace_id
                and ancestors.op_id = modelled_candidates.op_id
            where ancestors.trace_id = launchers.trace_id
                and ancestors.ancestor_op_id = launchers.launcher_event_idx
                and ancestors.distance > 0
        )
),

leaf_ancestry as (
    select ancestors.trace_id, ancestors.op_id, ancestors.ancestor_op_id, ancestors.distance
    from ancestors
    inner join leaf_candidates
        on ancestors.trace_id = leaf_candidates.trace_id
        and ancestors.ancestor_op_id = leaf_candidates.op_id
),

collected_leaves as (
    select leaf_candidates.trace_id, leaf_candidates.op_id
    from leaf_candidates
    where not exists (
        select 1 from leaf_ancestry
        where leaf_ancestry.trace_id = leaf_candidates.trace_id
            and leaf_ancestry.op_id = leaf_candidates.op_id
            and leaf_ancestry.distance > 0
    )
),

op_rows as (
    select trace_id, op_id, true as is_modelled_op from collected_modelled
    union all
    select trace_id, op_id, false as is_modelled_op from collected_leaves
),

covered_kernels as (
    select distinct kernels.trace_id, kernels.event_idx as kernel_idx
    from kernels
    inner join ancestors
        on kernels.trace_id = ancestors.trace_id
        and kernels.enclosing_cpu_op_id = ancestors.op_id
    inner join op_rows
        on ancestors.trace_id = op_rows.trace_id
        and ancestors.ancestor_op_id = op_rows.op_id
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
        {{ op_category('op_categories.category', 'host_ops.name', 'first_kernels.first_kernel_name') }} as op_category,
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
),

synthetic as (
    select
        kernels.trace_id,
        kernels.trace_id || ':k' || kernels.event_idx as unified_op_key,
        kernels.cpu_op_id as op_id,
        coalesce(parent_op.name, kernels.launch_name) || '->' || kernels.name || ' (Synthetic Op)' as name,
        true as is_synthetic,
        false as is_modelled_op,
        {{ op_category('null', "coalesce(parent_op.name, kernels.launch_name) || '->' || kernels.name", 'kernels.name') }} as op_category,
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
