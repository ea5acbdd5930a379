

with perf_models as (
    select * from "warehouse"."intermediate"."int_op_perf_models"
),

host_ops as (
    select * from "warehouse"."intermediate"."int_host_ops_merged"
),

op_categories as (
    select * from "warehouse"."main"."op_categories"
),

subtree_time as (
    select * from "warehouse"."intermediate"."int_op_subtree_kernel_time"
),

thread_labels as (
    select * from "warehouse"."intermediate"."int_thread_labels"
),

final as (
    select
        perf_models.trace_id || ':' || perf_models.op_id as roofline_op_key,
        perf_models.trace_id,
        perf_models.op_id,
        host_ops.name,
        case
            when op_categories.perf_family in ('GEMM', 'UnaryElementwise', 'BinaryElementwise', 'Normalization')
                then op_categories.perf_family
            else op_categories.perf_family || case when op_categories.category like '%_bwd' then '_bwd' else '_fwd' end
        end as sheet,
        op_categories.category as op_category,
        thread_labels.process_name,
        thread_labels.process_label,
        thread_labels.thread_name,
        host_ops.input_dims,
        host_ops.input_type,
        host_ops.input_strides,
        host_ops.concrete_inputs,
        perf_models.perf_params,
        perf_models.flops,
        perf_models.bytes,
        perf_models.compute_spec,
        true as has_perf_model,
        host_ops.dur_us as duration_us,
        host_ops.module_chain,
        coalesce(subtree_time.subtree_kernel_time_us, 0) as kernel_time_us,
        coalesce(subtree_time.subtree_kernel_count, 0) as kernel_count,
        -- TraceLens' --group_by_num_kernels splits a signature by the kernels it launched
        coalesce(subtree_time.subtree_kernel_count, 0)::varchar as num_kernels
    from perf_models
    inner join host_ops
        on perf_models.trace_id = host_ops.trace_id
        and perf_models.op_id = host_ops.event_idx
    inner join op_categories on host_ops.name = op_categories.op_name
    left join subtree_time
        on perf_models.trace_id = subtree_time.trace_id
        and perf_models.op_id = subtree_time.op_id
    left join thread_labels
        on host_ops.trace_id = thread_labels.trace_id
        and host_ops.pid = thread_labels.pid
        and host_ops.tid = thread_labels.tid
)

select * from final
