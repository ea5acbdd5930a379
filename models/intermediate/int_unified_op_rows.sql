{#- The cpu ops that become rows of TraceLens' unified perf table (reference §6.1), one row each:
    1. the top-most op with a TraceLens perf model that has GPU work in its subtree;
    2. otherwise the leaf cpu op that launched the kernels (through the runtime API).
    int_unified_ops adds their columns and the synthetic ops. -#}
{{ config(materialized='incremental') }}
{#- Its own query, apart from int_unified_ops: DuckDB holds every hash table of a query until the
    query ends (a few MB each, however few the rows), and as one query the two held ~35 MB more
    peak RSS on a 55 MB trace (bench/analyze.py). #}

with cpu_ops as (
    select trace_id, event_idx, name
    from {{ ref('int_host_ops_merged') }}
    where category = 'cpu_op' and in_tree and {{ is_new_trace() }}
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
    select cpu_ops.trace_id, cpu_ops.event_idx as op_id
    from cpu_ops
    left join op_categories on cpu_ops.name = op_categories.op_name
    inner join subtree_time
        on cpu_ops.trace_id = subtree_time.trace_id
        and cpu_ops.event_idx = subtree_time.op_id
    where coalesce(op_categories.perf_family, '') <> ''
        or {{ regex_search('cpu_ops.name', "'^triton_(poi|red|per)_'") }}
),

modelled_ancestors as (
    {{ candidate_subtrees('ancestors', 'modelled_candidates') }}
),

collected_modelled as (
    {{ outermost_candidates('modelled_candidates', 'modelled_ancestors') }}
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
                 and regexp_matches(launchers.name, '{{ var("compiled_region_pattern") }}'))
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
    {{ candidate_subtrees('ancestors', 'leaf_candidates') }}
),

collected_leaves as (
    {{ outermost_candidates('leaf_candidates', 'leaf_ancestry') }}
),

final as (
    select trace_id, op_id, true as is_modelled_op from collected_modelled
    union all
    select trace_id, op_id, false as is_modelled_op from collected_leaves
)

select * from final
