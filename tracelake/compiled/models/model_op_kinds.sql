

with traces as (
    select trace_id from "warehouse"."main"."traces"
),

cpu_ops as (
    select trace_id, name from "warehouse"."main"."cpu_ops"
),

op_kinds as (
    select
        trace_id,
        count(*) as cpu_ops,
        count(*) filter (where name in ('aten::convolution', 'aten::conv2d', 'aten::conv1d', 'aten::conv3d')) as conv_ops,
        count(*) filter (where name like '%scaled_dot_product%' or name like '%flash_attention%' or name like '%attention%') as attention_ops,
        count(*) filter (where name in ('aten::bmm', 'aten::baddbmm')) as bmm_ops,
        count(*) filter (where name in ('aten::softmax', 'aten::_softmax', 'aten::_safe_softmax')) as softmax_ops,
        count(*) filter (where name in ('aten::lstm', 'aten::gru', 'aten::rnn_tanh', 'aten::_cudnn_rnn', 'aten::miopen_rnn')) as rnn_ops,
        count(*) filter (where name = 'aten::embedding_bag' or name like 'fbgemm::%') as sparse_embedding_ops,
        count(*) filter (where lower(name) like '%moe%' or lower(name) like '%expert%') as moe_ops,
        count(*) filter (where name like 'Torch-Compiled Region%') as compiled_regions
    from cpu_ops
    group by trace_id
),

final as (
    select
        traces.trace_id,
        coalesce(op_kinds.cpu_ops, 0) as cpu_ops,
        coalesce(op_kinds.conv_ops, 0) as conv_ops,
        coalesce(op_kinds.attention_ops, 0) as attention_ops,
        coalesce(op_kinds.bmm_ops, 0) as bmm_ops,
        coalesce(op_kinds.softmax_ops, 0) as softmax_ops,
        coalesce(op_kinds.rnn_ops, 0) as rnn_ops,
        coalesce(op_kinds.sparse_embedding_ops, 0) as sparse_embedding_ops,
        coalesce(op_kinds.moe_ops, 0) as moe_ops,
        coalesce(op_kinds.compiled_regions, 0) as compiled_regions
    from traces
    left join op_kinds on traces.trace_id = op_kinds.trace_id
)

select * from final
