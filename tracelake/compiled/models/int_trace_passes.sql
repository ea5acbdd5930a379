

with host_ops as (
    select * from "warehouse"."intermediate"."int_host_ops_merged"
    where trace_id in ('@@NEW_TRACE_IDS@@') and category in ('cpu_op', 'cuda_runtime', 'cuda_driver')
),

serving_engine_ops as (
    -- ops that only serving engines (vLLM, SGLang, aiter kernels, paged-KV cache ops) run
    select trace_id, name
    from host_ops
    where category = 'cpu_op'
        and (name like 'vllm::%' or name like 'sglang%' or name like '%sglang::%' or name like 'aiter::%'
             or name like '_C_cache_ops::%')
),

final as (
    select
        host_ops.trace_id,
        count(*) filter (
            where host_ops.category = 'cpu_op' and host_ops.name like 'autograd::engine::evaluate_function:%'
        ) as backward_op_count,
        count(*) filter (
            where host_ops.category <> 'cpu_op' and host_ops.name in ('cudaGraphLaunch','hipGraphLaunch')
        ) as graph_launch_count,
        (select count(*) from serving_engine_ops where serving_engine_ops.trace_id = host_ops.trace_id)
            as serving_engine_op_count,
        (select min(name) from serving_engine_ops where serving_engine_ops.trace_id = host_ops.trace_id)
            as serving_engine_op_example
    from host_ops
    group by host_ops.trace_id
)

select * from final
