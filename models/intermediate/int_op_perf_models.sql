{#- FLOPs and bytes per modelled cpu op instance (TraceLens perf models, reference §8):
    GEMM (mm, addmm, bmm, baddbmm, _scaled_mm), SDPA forward (flash / efficient / cuDNN,
    flash_attn), convolution forward, unary and binary elementwise, reduce, layer / batch
    normalization forward, group / instance norm forward, layer-norm / group-norm / RMSNorm backward and
    aten::_fused_rms_norm (issue 26), SageAttention's quantized attention, and the serving ops (issue 14): RMSNorm and fused add + RMSNorm,
    rotary embedding, gated activations (silu_and_mul), KV-cache writes, inference (paged)
    attention from the enclosing step annotation, and fused MoE. Shapes come from `Input Dims`, dtypes from `Input type`. -#}
{{ config(materialized='incremental') }}
{#- Materialized per new trace: op_perf_instances (at ingest) and the roofline sheets (read by every
    analysis) both need it, and parsing the JSON shapes is the costly part of either. #}

with host_ops as (
    select * from {{ ref('int_host_ops_merged') }}
    where category = 'cpu_op' and in_tree and {{ is_new_trace() }}
),

op_categories as (
    select * from {{ ref('op_categories') }}
    where has_perf_model
),

trace_files as (
    select trace_id, world_size from {{ ref('stg_trace__files') }}
),

dtypes as (
    select * from {{ ref('dtypes') }}
),

step_annotations as (
    select * from {{ ref('int_serving_step_annotations') }}
    where has_attention_aggregates and {{ is_new_trace() }}
),

model_configs as (
    select * from {{ ref('model_configs') }}
    where num_experts is not null
),

op_kernel_precisions as (
    -- the narrowest precision a kernel name shows for the op that launched it (fp4 / fp8 MoE weights)
    select
        trace_id,
        cpu_op_id as op_id,
        case
            when bool_or(kernel_precision = 'fp4') then 'fp4'
            when bool_or(kernel_precision = 'fp8') then 'fp8'
        end as kernel_weight_precision
    from {{ ref('kernels') }}
    where is_linked and cpu_op_id is not null and kernel_precision in ('fp4', 'fp8') and {{ is_new_trace() }}
    group by all
),

parsed as (
    select
        host_ops.trace_id,
        host_ops.event_idx as op_id,
        host_ops.name,
        host_ops.ts_us,
        host_ops.end_us,
        op_categories.perf_family,
        {{ json_shapes('host_ops.input_dims') }} as dims,
        {{ json_strings('host_ops.input_type') }} as types,
        {{ json_strings('host_ops.concrete_inputs') }} as concrete
    from host_ops
    inner join op_categories on host_ops.name = op_categories.op_name
),

gemm_shapes as (
    select
        *,
        case name
            when 'aten::mm' then dims[1]
            when 'aten::addmm' then dims[2]
            when 'aten::bmm' then dims[1]
            when 'aten::baddbmm' then dims[2]
            when 'aten::_scaled_mm' then dims[1]
            -- serving GEMM wrappers take the weight as [N, K] (nn.Linear layout)
            when 'aiter::gemm_a16w16' then dims[1]
            when 'vllm::rocm_unquantized_gemm' then dims[1]
        end as a_shape,
        case name
            when 'aten::mm' then dims[2]
            when 'aten::addmm' then dims[3]
            when 'aten::bmm' then dims[2]
            when 'aten::baddbmm' then dims[3]
            when 'aten::_scaled_mm' then dims[2]
            when 'aiter::gemm_a16w16' then [dims[2][2], dims[2][1]]
            when 'vllm::rocm_unquantized_gemm' then [dims[2][2], dims[2][1]]
        end as b_shape,
        case name
            when 'aten::addmm' then types[2]
            when 'aten::baddbmm' then types[2]
            else types[1]
        end as a_type,
        case name
            when 'aten::addmm' then types[3]
            when 'aten::baddbmm' then types[3]
            else types[2]
        end as b_type,
        case name
            when 'aten::addmm' then true
            when 'aten::baddbmm' then true
            when 'aten::_scaled_mm' then len(dims) >= 5 and len(dims[5]) > 0
            when 'aiter::gemm_a16w16' then len(dims) >= 3 and len(dims[3]) > 0
            when 'vllm::rocm_unquantized_gemm' then len(dims) >= 3 and len(dims[3]) > 0
            else false
        end as has_bias
    from parsed
    where perf_family = 'GEMM'
),

gemm_dims as (
    select
        *,
        case when len(a_shape) = 3 then a_shape[1] else 1 end as batch,
        a_shape[len(a_shape) - 1] as m,
        a_shape[len(a_shape)] as k,
        b_shape[len(b_shape)] as n
    from gemm_shapes
),

gemm as (
    select
        gemm_dims.trace_id,
        gemm_dims.op_id,
        batch * (2.0 * m * n * k + case when has_bias then m * n else 0 end) as flops,
        batch * (
            m * k * a_bytes.bytes_per_element
            + k * n * a_bytes.bytes_per_element
            + m * n * case
                when name = 'aten::_scaled_mm' and a_bytes.bytes_per_element = 1 then 2
                else a_bytes.bytes_per_element
            end
            + case when has_bias then n * a_bytes.bytes_per_element else 0 end
        )::double as bytes,
        'matrix' as maf_type,
        a_bytes.precision,
        {{ json_object_of([
            ('B', 'batch'), ('M', 'm'), ('N', 'n'), ('K', 'k'), ('bias', 'has_bias'),
            ('dtype_A_B', "[a_type, b_type]")
        ]) }} as perf_params
    from gemm_dims
    left join dtypes as a_bytes on lower(gemm_dims.a_type) = a_bytes.dtype_name
),

sdpa_shapes as (
    select
        *,
        name like 'flash_attn::%' as is_bnhd,
        case
            when name = 'aten::_scaled_dot_product_flash_attention' then concrete[5]
            when name like 'aten::_scaled_dot_product_%' then concrete[7]
            else concrete[6]
        end as causal_text,
        case
            when name like 'flash_attn::%' then concrete[4]
            else concrete[4]
        end as dropout_text
    from parsed
    where perf_family = 'SDPA'
),

sdpa_dims as (
    select
        *,
        dims[1][1] as b,
        case when is_bnhd then dims[1][3] else dims[1][2] end as h_q,
        case when is_bnhd then dims[1][2] else dims[1][3] end as n_q,
        dims[1][4] as d_qk,
        case when is_bnhd then dims[2][3] else dims[2][2] end as h_kv,
        case when is_bnhd then dims[2][2] else dims[2][3] end as n_kv,
        dims[3][4] as d_v,
        lower(coalesce(causal_text, '')) = 'true' as is_causal
    from sdpa_shapes
),

sdpa as (
    select
        sdpa_dims.trace_id,
        sdpa_dims.op_id,
        b * h_q * (2.0 * n_q * n_kv * d_qk + 2.0 * n_q * n_kv * d_v) / case when is_causal then 2 else 1 end as flops,
        -- TraceLens' base SDPA models count 2 bytes per element whatever the dtype
        (b * n_q * h_q * d_qk + b * n_kv * h_kv * d_qk + b * n_kv * h_kv * d_v + b * n_q * h_q * d_v) * 2.0 as bytes,
        'matrix' as maf_type,
        q_dtype.precision,
        {{ json_object_of([
            ('B', 'b'), ('N_Q', 'n_q'), ('H_Q', 'h_q'), ('N_KV', 'n_kv'), ('H_KV', 'h_kv'),
            ('d_h_qk', 'd_qk'), ('d_h_v', 'd_v'), ('causal', 'is_causal'), ('dtype_A_B', 'types[1]')
        ]) }} as perf_params
    from sdpa_dims
    left join dtypes as q_dtype on lower(sdpa_dims.types[1]) = q_dtype.dtype_name
),

conv_args as (
    select
        *,
        len(dims[1]) - 2 as spatial_dims,
        len(dims[3]) > 0 as has_bias,
        lower(coalesce(concrete[7], '')) = 'true' as is_transposed,
        {{ json_ints('nullif(concrete[4], \'\')') }} as stride_given,
        {{ json_ints('nullif(concrete[5], \'\')') }} as padding_given,
        {{ json_ints('nullif(concrete[6], \'\')') }} as dilation_given,
        {{ json_ints('nullif(concrete[8], \'\')') }} as output_padding_given
    from parsed
    where perf_family = 'CONV' and name = 'aten::convolution'
),

conv_params as (
    select
        *,
        list_transform(range(1, spatial_dims + 1), lambda i: coalesce(case when len(stride_given) = 1 then stride_given[1] else stride_given[i] end, 1)) as stride,
        list_transform(range(1, spatial_dims + 1), lambda i: coalesce(case when len(padding_given) = 1 then padding_given[1] else padding_given[i] end, 0)) as padding,
        list_transform(range(1, spatial_dims + 1), lambda i: coalesce(case when len(dilation_given) = 1 then dilation_given[1] else dilation_given[i] end, 1)) as dilation,
        list_transform(range(1, spatial_dims + 1), lambda i: coalesce(case when len(output_padding_given) = 1 then output_padding_given[1] else output_padding_given[i] end, 0)) as output_padding
    from conv_args
),

conv_shapes as (
    select
        *,
        list_concat(
            [dims[1][1], case when is_transposed then dims[2][2] else dims[2][1] end],
            list_transform(range(1, spatial_dims + 1), lambda i:
                case
                    when is_transposed then (dims[1][2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (dims[2][2 + i] - 1) + output_padding[i] + 1
                    else floor((dims[1][2 + i] + 2 * padding[i] - dilation[i] * (dims[2][2 + i] - 1) - 1) / stride[i] + 1)::bigint
                end)
        ) as out_shape
    from conv_params
),

conv as (
    select
        conv_shapes.trace_id,
        conv_shapes.op_id,
        2.0 * {{ list_prod('dims[2][2:]') }}
            * case when is_transposed then {{ list_prod('dims[1]') }} else {{ list_prod('out_shape') }} end
            + case when has_bias then {{ list_prod('out_shape') }} else 0 end as flops,
        (
            {{ list_prod('dims[1]') }} + {{ list_prod('dims[2]') }}
            + case when has_bias then out_shape[2] else 0 end
            + {{ list_prod('out_shape') }}
        ) * x_dtype.bytes_per_element * 1.0 as bytes,
        'matrix' as maf_type,
        x_dtype.precision,
        {{ json_object_of([
            ('input_shape', 'dims[1]'), ('filter_shape', 'dims[2]'), ('output_shape', 'out_shape'),
            ('bias', 'has_bias'), ('stride', 'stride'), ('padding', 'padding'), ('dilation', 'dilation'),
            ('transposed', 'is_transposed'), ('dtype_input_weight', '[types[1], types[2]]')
        ]) }} as perf_params
    from conv_shapes
    left join dtypes as x_dtype on lower(conv_shapes.types[1]) = x_dtype.dtype_name
    where types[1] = types[2]
),

conv_backward_args as (
    -- aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
    -- dilation, transposed, output_padding, groups, output_mask): input and weight gradients
    -- are each a convolution as large as the forward one; output_mask[2] asks for the bias
    select
        *,
        concrete[11] as output_mask_text
    from parsed
    where name = 'aten::convolution_backward'
),

conv_backward as (
    select
        conv_backward_args.trace_id,
        conv_backward_args.op_id,
        2.0 * (2.0 * {{ list_prod('dims[3][2:]') }} * {{ list_prod('dims[1]') }})
            + case when output_mask_text like '%True]' then {{ list_prod('dims[1]') }} else 0 end as flops,
        (
            2.0 * ({{ list_prod('dims[2]') }} + {{ list_prod('dims[3]') }} + {{ list_prod('dims[1]') }})
            + case when output_mask_text like '%True]' then {{ list_prod('dims[1]') }} + dims[1][2] else 0 end
        ) * x_dtype.bytes_per_element as bytes,
        'matrix' as maf_type,
        x_dtype.precision,
        {{ json_object_of([
            ('input_shape', 'dims[2]'), ('filter_shape', 'dims[3]'), ('grad_output_shape', 'dims[1]'),
            ('bias', "output_mask_text like '%True]'"), ('dtype_input_weight', '[types[2], types[3]]')
        ]) }} as perf_params
    from conv_backward_args
    left join dtypes as x_dtype on lower(conv_backward_args.types[2]) = x_dtype.dtype_name
),

unary_elementwise as (
    select
        parsed.trace_id,
        parsed.op_id,
        {{ list_prod('dims[1]') }} * 1.0 as flops,
        {{ list_prod('dims[1]') }} * (in_dtype.bytes_per_element + coalesce(out_dtype.bytes_per_element, in_dtype.bytes_per_element)) * 1.0 as bytes,
        'vector' as maf_type,
        in_dtype.precision,
        {{ json_object_of([('op_shape', 'dims[1]'), ('dtype_in_out', '[types[1], coalesce(nullif(types[2], \'\'), types[1])]')]) }} as perf_params
    from parsed
    left join dtypes as in_dtype on lower(parsed.types[1]) = in_dtype.dtype_name
    left join dtypes as out_dtype on len(parsed.dims) >= 2 and len(parsed.dims[2]) > 0 and lower(parsed.types[2]) = out_dtype.dtype_name
    where perf_family = 'UnaryElementwise' and name not like 'aten::upsample_nearest%' and name not like '%_and_mul'
),

upsample_shapes as (
    -- aten::upsample_nearest{1,2,3}d(input, output_size, scales): the output keeps the input's
    -- leading dims and takes the last 1-3 from output_size (Concrete Inputs[1], reference §8.5)
    select
        *,
        {{ json_ints("nullif(concrete[2], '')") }} as output_size
    from parsed
    where perf_family = 'UnaryElementwise' and name like 'aten::upsample_nearest%'
),

upsample_nearest as (
    select
        upsample_shapes.trace_id,
        upsample_shapes.op_id,
        {{ list_prod('out_shape') }} * 1.0 as flops,
        ({{ list_prod('dims[1]') }} + {{ list_prod('out_shape') }}) * in_dtype.bytes_per_element * 1.0 as bytes,
        'vector' as maf_type,
        in_dtype.precision,
        {{ json_object_of([('op_shape', 'out_shape'), ('dtype_in_out', '[types[1], types[1]]'),
                           ('input_shape', 'dims[1]'), ('output_shape', 'out_shape')]) }} as perf_params
    from (
        select *, list_concat(dims[1][1:len(dims[1]) - len(output_size)], output_size) as out_shape
        from upsample_shapes
        where len(output_size) between 1 and len(dims[1])
    ) as upsample_shapes
    left join dtypes as in_dtype on lower(upsample_shapes.types[1]) = in_dtype.dtype_name
),

binary_shapes as (
    select
        *,
        greatest(len(dims[1]), len(coalesce(dims[2], []))) as out_rank
    from parsed
    where perf_family = 'BinaryElementwise'
),

binary_broadcast as (
    select
        *,
        list_transform(range(1, out_rank + 1), lambda i: greatest(
            case when i + len(dims[1]) - out_rank >= 1 then dims[1][i + len(dims[1]) - out_rank] else 1 end,
            case when i + len(coalesce(dims[2], [])) - out_rank >= 1 then dims[2][i + len(dims[2]) - out_rank] else 1 end
        )) as out_shape
    from binary_shapes
),

binary_elementwise as (
    select
        binary_broadcast.trace_id,
        binary_broadcast.op_id,
        {{ list_prod('out_shape') }} * 1.0 as flops,
        (
            {{ list_prod('dims[1]') }} * in1_dtype.bytes_per_element
            + {{ list_prod('coalesce(dims[2], [])') }} * in2_dtype.bytes_per_element
            + {{ list_prod('out_shape') }} * case
                when len(dims) >= 3 and len(dims[3]) > 0 then out_dtype.bytes_per_element
                when len(dims[1]) > 0 and len(coalesce(dims[2], [])) > 0 then greatest(in1_dtype.bytes_per_element, in2_dtype.bytes_per_element)
                else in1_dtype.bytes_per_element
            end
        ) * 1.0 as bytes,
        'vector' as maf_type,
        in1_dtype.precision,
        {{ json_object_of([('shape_in1', 'dims[1]'), ('shape_in2', 'dims[2]'), ('dtype_in1_in2_out', '[types[1], types[2], types[3]]')]) }} as perf_params
    from binary_broadcast
    left join dtypes as in1_dtype on lower(binary_broadcast.types[1]) = in1_dtype.dtype_name
    left join dtypes as in2_dtype on lower(binary_broadcast.types[2]) = in2_dtype.dtype_name
    left join dtypes as out_dtype on lower(binary_broadcast.types[3]) = out_dtype.dtype_name
),

reduction as (
    select
        parsed.trace_id,
        parsed.op_id,
        {{ list_prod('dims[1]') }} * 1.0 as flops,
        -- TraceLens cannot parse dim from the string Concrete Inputs, so output is 1 element
        -- except for cumulative ops, whose output is as large as the input
        (
            {{ list_prod('dims[1]') }}
            + case when name in ('aten::cumsum', 'aten::cumprod') then {{ list_prod('dims[1]') }} else 1 end
        ) * in_dtype.bytes_per_element * 1.0 as bytes,
        'vector' as maf_type,
        in_dtype.precision,
        {{ json_object_of([('num_input_elems', list_prod('dims[1]')), ('dtype_in_out', '[types[1], types[1]]'), ('reduce_type', 'name')]) }} as perf_params
    from parsed
    left join dtypes as in_dtype on lower(parsed.types[1]) = in_dtype.dtype_name
    where perf_family = 'Reduce'
),

norm_sizes as (
    select
        *,
        {{ list_prod('dims[1]') }} as elements,
        case
            when name like '%layer_norm' then {{ list_prod(json_ints('concrete[2]')) }}
            else dims[1][2]
        end as channels
    from parsed
    where perf_family = 'Normalization' and name not like '%_backward' and name not like '%rms_norm%'
),

normalization as (
    select
        norm_sizes.trace_id,
        norm_sizes.op_id,
        -- training statistics (3N), scale/shift (2N), per-channel params and invstd (3C + 3C);
        -- TraceLens reads affine/bias/training as always true for these ops (reference §14.19)
        (3.0 * channels + 3.0 * elements + 3.0 * channels + 2.0 * elements) as flops,
        (2.0 * elements + 6.0 * channels) * in_dtype.bytes_per_element as bytes,
        'vector' as maf_type,
        in_dtype.precision,
        {{ json_object_of([('op_shape', 'dims[1]'), ('num_channels', 'channels'), ('dtype_in_out', '[types[1], types[1]]'), ('is_training', 'true')]) }} as perf_params
    from norm_sizes
    left join dtypes as in_dtype on lower(norm_sizes.types[1]) = in_dtype.dtype_name
),

batch_norm_backward_args as (
    -- native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
    -- save_invstd, train, eps, output_mask); TraceLens reads `train` with bool(), so any
    -- non-empty text means training, and takes weight and bias as present (reference §14.19)
    select
        *,
        {{ list_prod('dims[1]') }} as elements,
        dims[1][2] as channels,
        coalesce(concrete[8], '') <> '' as is_training,
        coalesce(concrete[10], '[True') like '[True%' as wants_input_grad
    from parsed
    where perf_family = 'Normalization' and name like '%batch_norm_backward'
),

batch_norm_backward as (
    select
        batch_norm_backward_args.trace_id,
        batch_norm_backward_args.op_id,
        channels * (
            case when is_training then 0 else 3 end
            + 4.0 * elements / channels
            + case
                when wants_input_grad and is_training then 5.0 * elements / channels
                when not wants_input_grad then 2.0 * elements / channels
                else 0
            end
        ) as flops,
        (
            elements
            + elements * case when wants_input_grad and is_training then 2 else 1 end
            + case when is_training then channels else 0 end
            + channels
            + case when is_training then 2 * channels else 0 end
        ) * in_dtype.bytes_per_element * 1.0 as bytes,
        'vector' as maf_type,
        in_dtype.precision,
        {{ json_object_of([('op_shape', 'dims[1]'), ('num_channels', 'channels'), ('dtype_in_out', '[types[1], types[2]]'), ('is_training', 'is_training')]) }} as perf_params
    from batch_norm_backward_args
    left join dtypes as in_dtype on lower(batch_norm_backward_args.types[1]) = in_dtype.dtype_name
),

norm_backward_args as (
    -- layer norm: native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight,
    -- bias, output_mask); group norm: native_group_norm_backward(grad_out, input, mean, rstd, weight,
    -- N, C, HxW, group, output_mask); RMSNorm: _fused_rms_norm_backward(grad_out, input,
    -- normalized_shape, rstd, weight, output_mask) (ATen native_functions.yaml). Instance norm has no
    -- backward op of its own: ATen runs it as batch norm over [1, N·C, ...], whose backward is modelled.
    select
        *,
        {{ list_prod('dims[1]') }} as elements,
        case
            when name like '%group_norm_backward' then dims[2][2]
            else {{ list_prod(json_ints("nullif(concrete[3], '')")) }}
        end as channels,
        case
            when name like '%layer_norm_backward' then len(dims) >= 6 and len(dims[6]) > 0
            else len(dims) >= 5 and len(dims[5]) > 0
        end as is_affine,
        case
            when name like '%layer_norm_backward' then len(dims) >= 7 and len(dims[7]) > 0
            -- group norm's backward takes no bias; nn.GroupNorm's affine form has one (its gradient is
            -- output_mask[3]); RMSNorm has none
            when name like '%group_norm_backward' then coalesce(concrete[10], '') like '%True]'
            else false
        end as has_bias,
        coalesce(case
            when name like '%layer_norm_backward' then concrete[8]
            when name like '%group_norm_backward' then concrete[10]
            else concrete[6]
        end, '[True') like '[True%' as wants_input_grad
    from parsed
    where perf_family = 'Normalization'
        and (name like '%layer_norm_backward' or name like '%group_norm_backward' or name like '%rms_norm_backward')
),

norm_backward as (
    -- TraceLens' generic Normalization backward (reference tracelens_core.md §8.7), training (these
    -- norms always use the batch statistics): flops 4N + 5N with the input gradient (2N without);
    -- bytes grad_out N + input N (and grad_input N), the saved statistics C, the weight C, and the
    -- weight (and bias) gradients C each
    select
        norm_backward_args.trace_id,
        norm_backward_args.op_id,
        4.0 * elements + case when wants_input_grad then 5.0 else 2.0 end * elements as flops,
        (
            elements
            + elements * case when wants_input_grad then 2 else 1 end
            + channels
            + case when is_affine then channels * case when has_bias then 3 else 2 end else 0 end
        ) * in_dtype.bytes_per_element * 1.0 as bytes,
        'vector' as maf_type,
        in_dtype.precision,
        {{ json_object_of([('op_shape', 'dims[1]'), ('num_channels', 'channels'), ('dtype_in_out', '[types[1], types[2]]'),
                           ('is_affine', 'is_affine'), ('has_bias', 'has_bias'), ('input_grad', 'wants_input_grad'),
                           ('is_training', 'true')]) }} as perf_params
    from norm_backward_args
    left join dtypes as in_dtype on lower(norm_backward_args.types[1]) = in_dtype.dtype_name
),

fused_rms_norm as (
    -- aten::_fused_rms_norm(input, normalized_shape, weight, eps): TraceLens' RMSNorm model (reference
    -- tracelens_core.md §8.7): (N/C)·(2C + 2) + N·(2 with a weight, else 1) FLOPs; read x, write y, read
    -- the C weights
    select
        trace_id,
        op_id,
        elements / channels * (2.0 * channels + 2) + elements * case when is_affine then 2.0 else 1.0 end as flops,
        (2.0 * elements + case when is_affine then channels else 0 end) * x_dtype.bytes_per_element as bytes,
        'vector' as maf_type,
        x_dtype.precision,
        {{ json_object_of([('op_shape', 'dims[1]'), ('num_channels', 'channels'), ('is_affine', 'is_affine'),
                           ('dtype_in_out', '[types[1], types[1]]')]) }} as perf_params
    from (
        select
            *,
            {{ list_prod('dims[1]') }} as elements,
            {{ list_prod(json_ints("nullif(concrete[2], '')")) }} as channels,
            len(dims) >= 3 and len(dims[3]) > 0 as is_affine
        from parsed
        where perf_family = 'Normalization' and name like '%fused_rms_norm'
    ) as rms_sizes
    left join dtypes as x_dtype on lower(rms_sizes.types[1]) = x_dtype.dtype_name
),

rms_norm_sizes as (
    -- every RMSNorm entry op's first input is the normalized tensor [rows, C] (aiter::rmsnorm /
    -- _C::rms_norm write into it, aiter::rms_norm reads it); fused add+RMSNorm ops also read the
    -- residual and write the updated residual back (`add` in the name)
    select
        *,
        {{ list_prod('dims[1]') }} as elements,
        dims[1][len(dims[1])] as channels,
        name like '%add%' as adds_residual
    from parsed
    where perf_family = 'RMSNorm'
),

rms_norm as (
    -- TraceLens' RMSNorm_fwd sheet on the serving captures (aiter::rmsnorm, aiter::add_rmsnorm,
    -- aiter::rmsnorm2d_fwd_with_add_ck): 4 FLOPs per element (square, sum, normalize, weight) plus
    -- 2 per row (mean, rsqrt), one more per element for the residual add; bytes read x (and the
    -- residual), write y (and the new residual), read the C weights once
    select
        rms_norm_sizes.trace_id,
        rms_norm_sizes.op_id,
        (case when adds_residual then 5.0 else 4.0 end) * elements + 2.0 * elements / channels as flops,
        ((case when adds_residual then 4.0 else 2.0 end) * elements + channels) * x_dtype.bytes_per_element as bytes,
        'vector' as maf_type,
        x_dtype.precision,
        {{ json_object_of([('op_shape', 'dims[1]'), ('num_channels', 'channels'), ('fused_residual_add', 'adds_residual'),
                           ('dtype_in_out', '[types[1], types[1]]')]) }} as perf_params
    from rms_norm_sizes
    left join dtypes as x_dtype on lower(rms_norm_sizes.types[1]) = x_dtype.dtype_name
),

rotary_sizes as (
    -- rotary_embedding(positions, query [T, Hq*d], key [T, Hkv*d], head_size, cos_sin_cache, is_neox)
    -- (vLLM _C / SGLang sgl_kernel signature): query and key are rotated in place
    select
        *,
        -- the key is optional (None: no dims), and the product over no dims would count 1 element
        {{ list_prod('dims[2]') }} + case when len(dims) >= 3 and len(dims[3]) > 0 then {{ list_prod('dims[3]') }} else 0 end
            as elements
    from parsed
    where perf_family = 'RoPE'
),

rotary as (
    -- each rotated element is x·cos − y·sin (RoFormer, Su et al. 2021, eq. 34): 3 FLOPs; bytes read
    -- and write q and k (cos/sin cache reads not counted), as in TraceLens' RoPE_fwd sheet
    select
        rotary_sizes.trace_id,
        rotary_sizes.op_id,
        3.0 * elements as flops,
        2.0 * elements * q_dtype.bytes_per_element as bytes,
        'vector' as maf_type,
        q_dtype.precision,
        {{ json_object_of([('num_elements', 'elements'), ('query_shape', 'dims[2]'), ('key_shape', 'dims[3]'),
                           ('dtype_in_out', '[types[2], types[2]]')]) }} as perf_params
    from rotary_sizes
    left join dtypes as q_dtype on lower(rotary_sizes.types[2]) = q_dtype.dtype_name
),

gated_activation as (
    -- silu_and_mul(out [T, d], input [T, 2d]): out = silu(x[:, :d]) * x[:, d:]; 5 FLOPs per output
    -- element (silu = x / (1 + exp(-x)): negate, exp, add, divide; then the gate multiply), as in
    -- TraceLens' UnaryElementwise sheet; bytes read the input and write the output
    select
        parsed.trace_id,
        parsed.op_id,
        5.0 * {{ list_prod('dims[1]') }} as flops,
        ({{ list_prod('dims[1]') }} + {{ list_prod('dims[2]') }}) * out_dtype.bytes_per_element * 1.0 as bytes,
        'vector' as maf_type,
        out_dtype.precision,
        {{ json_object_of([('op_shape', 'dims[1]'), ('input_shape', 'dims[2]'), ('dtype_in_out', '[types[2], types[1]]')]) }} as perf_params
    from parsed
    left join dtypes as out_dtype on lower(parsed.types[1]) = out_dtype.dtype_name
    where perf_family = 'UnaryElementwise' and name like '%_and_mul'
),

kv_cache_write as (
    -- reshape_and_cache_flash / store_cache(key, value, key_cache, value_cache, slots, ...): reads the
    -- step's new K and V and writes them into the cache (TraceLens' store_cache row: 4·n·bpe)
    select
        parsed.trace_id,
        parsed.op_id,
        0.0 as flops,
        ({{ list_prod('dims[1]') }} + {{ list_prod('dims[2]') }}) * (k_dtype.bytes_per_element + cache_dtype.bytes_per_element) * 1.0 as bytes,
        'vector' as maf_type,
        k_dtype.precision,
        {{ json_object_of([('op_shape', 'dims[1]'), ('nelems', list_prod('dims[1]')), ('dtype', 'types[1]'), ('dtype_cache', 'types[3]')]) }} as perf_params
    from parsed
    left join dtypes as k_dtype on lower(parsed.types[1]) = k_dtype.dtype_name
    left join dtypes as cache_dtype on lower(parsed.types[3]) = cache_dtype.dtype_name
    where perf_family = 'InferenceAttention' and (name like '%reshape_and_cache%' or name like '%store_cache')
),

inference_attention_heads as (
    -- vLLM unified_attention_with_output(q [T, Hq, d], k [T, Hkv, d], v [T, Hkv, dv], out, ...);
    -- SGLang paged_attention_ragged(q [T, Hq, d], workspace, out, k_cache [slots, 1, Hkv, d], v_cache, ...)
    select
        *,
        dims[1][2] as h_q,
        dims[1][3] as d_qk,
        -- aiter::mha_batch_prefill(q [T, Hq, d], k_cache [.., Hkv, d], v_cache [.., Hkv, dv], ...): the
        -- caches' last two dims are heads and head dim, as TraceLens' aiter_mha_batch_prefill reads them
        case
            when name like 'sglang_profiler::%' then dims[4][3]
            when name = 'aiter::mha_batch_prefill' then dims[2][len(dims[2]) - 1]
            else dims[2][2]
        end as h_kv,
        case
            when name like 'sglang_profiler::%' then dims[5][4]
            when name = 'aiter::mha_batch_prefill' then dims[3][len(dims[3])]
            else dims[3][3]
        end as d_v
    from parsed
    where perf_family = 'InferenceAttention' and name not like '%reshape_and_cache%' and name not like '%store_cache'
),

inference_attention_steps as (
    -- the tightest step annotation with attention aggregates that encloses the op in time
    select
        inference_attention_heads.*,
        step_annotations.event_idx as step_event_idx,
        step_annotations.c_sq, step_annotations.c_sk, step_annotations.c_sqsq, step_annotations.c_sqsk,
        step_annotations.g_sq, step_annotations.g_sk, step_annotations.g_sqsq, step_annotations.g_sqsk,
        row_number() over (
            partition by inference_attention_heads.trace_id, inference_attention_heads.op_id
            order by step_annotations.ts_us desc, step_annotations.event_idx desc
        ) as tightness_rank
    from inference_attention_heads
    inner join step_annotations
        on inference_attention_heads.trace_id = step_annotations.trace_id
        and step_annotations.ts_us <= inference_attention_heads.ts_us
        and inference_attention_heads.end_us <= step_annotations.end_us
),

inference_attention as (
    -- TraceLens InferenceAttention (reference tracelens_core.md §13.2): prefill FLOPs over Σ N_Q·N_KV
    -- minus the causal self-triangle Σ N_Q², decode FLOPs over Σ N_Q·N_KV; bytes: Q, O and the step's
    -- new K/V once per query token, the cached K/V once per cached token (KV in the Q dtype)
    select
        inference_attention_steps.trace_id,
        inference_attention_steps.op_id,
        h_q * (2.0 * c_sqsk * d_qk + 2.0 * c_sqsk * d_v) - h_q * (1.0 * c_sqsq * d_qk + 1.0 * c_sqsq * d_v)
            + h_q * (2.0 * g_sqsk * d_qk + 2.0 * g_sqsk * d_v) as flops,
        (
            (c_sq + g_sq) * (1.0 * h_q * d_qk + h_q * d_v + h_kv * d_qk + h_kv * d_v)
            + ((c_sk - c_sq) + (g_sk - g_sq)) * 1.0 * h_kv * (d_qk + d_v)
        ) * q_dtype.bytes_per_element as bytes,
        'matrix' as maf_type,
        q_dtype.precision,
        {{ json_object_of([
            ('H_Q', 'h_q'), ('H_KV', 'h_kv'), ('d_h_qk', 'd_qk'), ('d_h_v', 'd_v'),
            ('c_sq', 'c_sq'), ('c_sk', 'c_sk'), ('c_sqsq', 'c_sqsq'), ('c_sqsk', 'c_sqsk'),
            ('g_sq', 'g_sq'), ('g_sk', 'g_sk'), ('g_sqsq', 'g_sqsq'), ('g_sqsk', 'g_sqsk'),
            ('step_annotation_event_idx', 'step_event_idx'), ('dtype_Q', 'types[1]')
        ]) }} as perf_params
    from inference_attention_steps
    left join dtypes as q_dtype on lower(inference_attention_steps.types[1]) = q_dtype.dtype_name
    where tightness_rank = 1
),

sage_shapes as (
    -- SageAttention's quantized attention ops, qk_int8_sv_{f8,f16}_accum_*_attn(q, k, v, o, q_scale,
    -- k_scale, [v_scale,] tensor_layout, is_causal, ...) (thu-ml/SageAttention, csrc qattn bindings):
    -- int8 Q and K, fp8 / fp16 V, tensor_layout 0 = NHD [B, N, H, D], 1 = HND [B, H, N, D]
    select
        *,
        coalesce(concrete[case when name like '%sv_f8%' then 8 else 7 end], '0') = '1' as is_hnd,
        lower(coalesce(concrete[case when name like '%sv_f8%' then 9 else 8 end], '0')) in ('1', 'true') as is_causal
    from parsed
    where perf_family = 'SageAttention'
),

sage_attention as (
    -- the attention FLOPs of TraceLens' SDPA model (QK^T and PV, halved when causal); bytes read the
    -- quantized Q, K, V at their own widths and write O; the matrix work runs in Q's int8
    select
        sage_shapes.trace_id,
        sage_shapes.op_id,
        b * h_q * (2.0 * n_q * n_kv * d_qk + 2.0 * n_q * n_kv * d_v) / case when is_causal then 2 else 1 end as flops,
        (
            b * n_q * h_q * d_qk * q_dtype.bytes_per_element + b * n_kv * h_kv * d_qk * q_dtype.bytes_per_element
            + b * n_kv * h_kv * d_v * v_dtype.bytes_per_element + b * n_q * h_q * d_v * o_dtype.bytes_per_element
        ) * 1.0 as bytes,
        'matrix' as maf_type,
        q_dtype.precision,
        {{ json_object_of([
            ('B', 'b'), ('N_Q', 'n_q'), ('H_Q', 'h_q'), ('N_KV', 'n_kv'), ('H_KV', 'h_kv'),
            ('d_h_qk', 'd_qk'), ('d_h_v', 'd_v'), ('causal', 'is_causal'), ('dtype_Q_K_V_O', '[types[1], types[2], types[3], types[4]]')
        ]) }} as perf_params
    from (
        select
            *,
            dims[1][1] as b,
            case when is_hnd then dims[1][2] else dims[1][3] end as h_q,
            case when is_hnd then dims[1][3] else dims[1][2] end as n_q,
            dims[1][4] as d_qk,
            case when is_hnd then dims[2][2] else dims[2][3] end as h_kv,
            case when is_hnd then dims[2][3] else dims[2][2] end as n_kv,
            dims[3][4] as d_v
        from sage_shapes
    ) as sage_shapes
    left join dtypes as q_dtype on lower(sage_shapes.types[1]) = q_dtype.dtype_name
    left join dtypes as v_dtype on lower(sage_shapes.types[3]) = v_dtype.dtype_name
    left join dtypes as o_dtype on lower(sage_shapes.types[4]) = o_dtype.dtype_name
),

moe_shapes as (
    -- vllm::moe_forward(hidden_states [M, K], router_logits [M, E], ...): the shapes give the tokens,
    -- the hidden width the experts see (padded) and the expert count; topk and the expert width are
    -- not in the trace, so they come from the model_configs checkpoint with E experts whose hidden
    -- size is K or pads to K
    select
        parsed.*,
        dims[1][1] as m,
        dims[1][2] as k,
        dims[2][2] as num_experts,
        model_configs.checkpoint,
        model_configs.experts_per_token as topk,
        model_configs.hidden_size,
        model_configs.moe_intermediate_size,
        count(model_configs.checkpoint) over (partition by parsed.trace_id, parsed.op_id) as matching_checkpoints
    from parsed
    inner join model_configs
        on dims[2][2] = model_configs.num_experts
        and (dims[1][2] = model_configs.hidden_size
             or dims[1][2] = ceil(model_configs.hidden_size / {{ var('moe_weight_pad_multiple') }}) * {{ var('moe_weight_pad_multiple') }})
    where perf_family = 'MoE_fused'
),

moe_params as (
    select
        moe_shapes.*,
        -- each rank holds 1/TP of every expert's width (vLLM shards fused-MoE weights by tensor
        -- parallelism); TP is taken as the trace's world size (distributedInfo), 1 when it names none.
        -- The per-rank width is padded like the hidden width (vLLM's MXFP4 MoE; TraceLens: inter_dim
        -- 3072 for gpt-oss' 2880 on the single-GPU vLLM decode capture)
        coalesce(trace_files.world_size, 1) as tensor_parallel,
        case when k = hidden_size then moe_intermediate_size / coalesce(trace_files.world_size, 1)
             else ceil(moe_intermediate_size / coalesce(trace_files.world_size, 1) / {{ var('moe_weight_pad_multiple') }})
                  * {{ var('moe_weight_pad_multiple') }}
        end as n,
        num_experts * (1 - pow((num_experts - topk) * 1.0 / num_experts, m)) as expected_active_experts,
        coalesce(op_kernel_precisions.kernel_weight_precision, in_dtype.precision) as weight_precision,
        op_kernel_precisions.kernel_weight_precision is not null as weight_precision_from_kernels,
        -- an FP4 (e2m1) value is half a byte, FP8 one byte; otherwise the weights have the input dtype
        case coalesce(op_kernel_precisions.kernel_weight_precision, in_dtype.precision)
            when 'fp4' then 0.5 when 'fp8' then 1.0 else in_dtype.bytes_per_element
        end as weight_bytes_per_element,
        in_dtype.bytes_per_element as act_bytes_per_element
    from moe_shapes
    left join trace_files on moe_shapes.trace_id = trace_files.trace_id
    left join op_kernel_precisions
        on moe_shapes.trace_id = op_kernel_precisions.trace_id and moe_shapes.op_id = op_kernel_precisions.op_id
    left join dtypes as in_dtype on lower(moe_shapes.types[1]) = in_dtype.dtype_name
    where matching_checkpoints = 1
),

moe_fused as (
    -- TraceLens MoE_fused (reference tracelens_core.md §8.8), gated (SwiGLU experts): FC1 2·M·K·2N·topk,
    -- FC2 2·M·N·K·topk, top-k weighted sum M·K·(2·topk − 1); bytes: input and output M·K, the FC1 (2N·K)
    -- and FC2 (N·K) weights of E·(1 − ((E − topk)/E)^M) expected active experts (uniform routing)
    select
        moe_params.trace_id,
        moe_params.op_id,
        2.0 * m * k * n * topk * 2 + 2.0 * m * k * n * topk + 1.0 * m * k * (2 * topk - 1) as flops,
        2.0 * m * k * act_bytes_per_element + expected_active_experts * 3.0 * k * n * weight_bytes_per_element as bytes,
        'matrix' as maf_type,
        weight_precision as precision,
        {{ json_object_of([
            ('num_tokens', 'm'), ('hidden_dim', 'k'), ('inter_dim', 'n'), ('num_experts', 'num_experts'),
            ('topk', 'topk'), ('gated', 'true'), ('expected_active_experts', 'expected_active_experts'),
            ('input_dtype', 'types[1]'), ('weight_precision', 'weight_precision'),
            ('weight_precision_source', "case when weight_precision_from_kernels then 'kernel names' else 'input dtype (no kernel shows it)' end"),
            ('topk_inter_dim_source', "'model_configs: ' || checkpoint"),
            ('tensor_parallel', 'tensor_parallel'),
            ('tensor_parallel_source', "case when tensor_parallel > 1 then 'world size (distributedInfo)' else 'single GPU (no distributedInfo world size)' end")
        ]) }} as perf_params
    from moe_params
),

all_models as (
    select * from gemm
    union all select * from sdpa
    union all select * from conv
    union all select * from conv_backward
    union all select * from unary_elementwise
    union all select * from upsample_nearest
    union all select * from binary_elementwise
    union all select * from reduction
    union all select * from normalization
    union all select * from batch_norm_backward
    union all select * from norm_backward
    union all select * from fused_rms_norm
    union all select * from sage_attention
    union all select * from rms_norm
    union all select * from rotary
    union all select * from gated_activation
    union all select * from kv_cache_write
    union all select * from inference_attention
    union all select * from moe_fused
),

final as (
    select
        all_models.trace_id,
        all_models.op_id,
        all_models.flops,
        all_models.bytes,
        all_models.maf_type,
        all_models.precision,
        all_models.maf_type || '_' || all_models.precision as compute_spec,
        all_models.perf_params
    from all_models
)

select * from final
