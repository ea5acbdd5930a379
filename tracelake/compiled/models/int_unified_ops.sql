

with host_ops as (
    select * from "warehouse"."intermediate"."int_host_ops_merged"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

kernels as (
    select * from "warehouse"."main"."kernels"
    where is_linked and not is_comm and trace_id in ('@@NEW_TRACE_IDS@@')
),

ancestors as (
    select * from "warehouse"."intermediate"."int_cpu_op_ancestors"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

subtree_time as (
    select * from "warehouse"."intermediate"."int_op_subtree_kernel_time"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

op_rows as (
    select * from "warehouse"."intermediate"."int_unified_op_rows"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

op_categories as (
    select * from "warehouse"."main"."op_categories"
),

launchers as (
    select trace_id, launcher_event_idx, op_category from "warehouse"."intermediate"."int_kernel_launchers"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

compiled_categories as (
    select category as kernel_category, compiled_op_category from "warehouse"."main"."agent_categories"
    where category_kind = 'kernel' and coalesce(compiled_op_category, '') <> ''
),

ops_under_op_rows as materialized (
    -- every cpu op in an op row's subtree. Joined on its own: with op_rows read from a table that
    -- holds only a small trace's rows until this update commits, DuckDB's join order put op_rows
    -- x kernels (trace_id only, 53M rows) first when the three were joined in one step.
    select ancestors.trace_id, ancestors.op_id, ancestors.ancestor_op_id, ancestors.distance
    from ancestors
    inner join op_rows
        on ancestors.trace_id = op_rows.trace_id
        and ancestors.ancestor_op_id = op_rows.op_id
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
            when op_categories.category is null and regexp_matches(host_ops.name, '^(Torch-Compiled Region|CompiledFunction|## Call CompiledFxGraph|TorchDynamo)')
                and launchers.op_category is not null then launchers.op_category
            else case
        when op_categories.category is not null then op_categories.category
        when host_ops.name like 'triton%' then 'triton'
        when host_ops.name like 'record_param_comms%' then 'record_param_comms'
        when first_kernels.first_kernel_name like 'void at::native%' and first_kernels.first_kernel_name like '%elementwise%' then 'elementwise'
        when first_kernels.first_kernel_name like 'void at::native%' and first_kernels.first_kernel_name like '%reduce%' then 'reduce'
        when first_kernels.first_kernel_name like 'void at::native%' and first_kernels.first_kernel_name like '%multi_tensor_apply%' then 'multi_tensor_apply'
        else 'other'
    end
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
            case
        when regexp_matches(coalesce(parent_op.name, ''), '^(Torch-Compiled Region|CompiledFunction|## Call CompiledFxGraph|TorchDynamo)')
            and compiled_categories.compiled_op_category is not null
            then case when parent_op.is_backward then replace(compiled_categories.compiled_op_category, '_fwd', '_bwd')
                      else compiled_categories.compiled_op_category end
    end,
            case
        when null is not null then null
        when coalesce(parent_op.name, kernels.launch_name) || '->' || kernels.name like 'triton%' then 'triton'
        when coalesce(parent_op.name, kernels.launch_name) || '->' || kernels.name like 'record_param_comms%' then 'record_param_comms'
        when kernels.name like 'void at::native%' and kernels.name like '%elementwise%' then 'elementwise'
        when kernels.name like 'void at::native%' and kernels.name like '%reduce%' then 'reduce'
        when kernels.name like 'void at::native%' and kernels.name like '%multi_tensor_apply%' then 'multi_tensor_apply'
        else 'other'
    end
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
