

with cpu_ops as (
    select trace_id, event_idx, name
    from "warehouse"."intermediate"."int_host_ops_merged"
    where category = 'cpu_op' and in_tree and trace_id in ('@@NEW_TRACE_IDS@@')
),

ancestors as (
    select * from "warehouse"."intermediate"."int_cpu_op_ancestors"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

subtree_time as (
    select * from "warehouse"."intermediate"."int_op_subtree_kernel_time"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

launchers as (
    select * from "warehouse"."intermediate"."int_kernel_launchers"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

op_categories as (
    select * from "warehouse"."main"."op_categories"
),
modelled_candidates as (
    -- ops TraceLens has a perf model for: registry ops with a sheet family, and compiled
    -- Inductor kernels (triton_poi/red/per_*), whose model TraceLens matches by name
    select cpu_ops.trace_id, cpu_ops.event_idx as op_id
    from cpu_ops
    left join op_categories on cpu_ops.name = op_categories.op_name
    inner join subtree_time
        on cpu_ops.trace_id = subtree_time.trace_id
        and cpu_ops.event_idx = subtree_time.op_id
    where coalesce(op_categories.perf_family, '') <> ''
        or regexp_matches(cpu_ops.name, '^triton_(poi|red|per)_')
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
        -- a compiled region launching kernels itself is no op row: its kernels become synthetic
        -- ops under their own categories (int_unified_ops), as in the category summaries
        and not (launchers.name not in (select op_name from op_categories)
                 and regexp_matches(launchers.name, '^(Torch-Compiled Region|CompiledFunction|## Call CompiledFxGraph|TorchDynamo)'))
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

final as (
    select trace_id, op_id, true as is_modelled_op from collected_modelled
    union all
    select trace_id, op_id, false as is_modelled_op from collected_leaves
)

select * from final
