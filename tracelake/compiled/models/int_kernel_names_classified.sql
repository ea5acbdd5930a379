with gpu_ops as (
    select * from "warehouse"."staging"."stg_trace__gpu_ops"
),

rules as (
    select * from "warehouse"."main"."kernel_taxonomy"
),

kernel_names as (
    select distinct name from gpu_ops
),

first_match as (
    select
        name,
        case
        when regexp_matches(name, '^Memcpy ') then 10
        when regexp_matches(name, '^Memset ') then 20
        when regexp_matches(name, '(?i)^\[(CUDA|HIP) memcpy') then 30
        when regexp_matches(name, '(?i)^\[(CUDA|HIP) memset') then 40
        when regexp_matches(name, '^(__amd_rocclr_copy(Buffer|Image)|MEMORY_COPY_)') then 50
        when regexp_matches(name, '^__amd_rocclr_fill(Buffer|Image)') then 60
        when regexp_matches(name, '^__amd_rocclr_') then 70
        when regexp_matches(name, '(?i)rccl|msccl') then 100
        when regexp_matches(name, '^ncclDevKernel_Generic') then 110
        when regexp_matches(name, '(?i)nccl') then 120
        when regexp_matches(name, 'sglang::cross_device_reduce') then 130
        when regexp_matches(name, 'cross_device_reduce') then 140
        when regexp_matches(name, '(multimem|one_shot|two_shot)_all_reduce') then 150
        when regexp_matches(name, '(?i)(all_?reduce|all_?gather|reduce_?scatter|all_?to_?all)_?kernel') then 160
        when regexp_matches(name, '^fmhaSm\d+\w*QkvE4m3') then 200
        when regexp_matches(name, '^fmhaSm\d+\w*QkvBfloat16') then 210
        when regexp_matches(name, '^fmhaSm\d+\w*QkvFp16') then 220
        when regexp_matches(name, '^fmhaSm\d+') then 230
        when regexp_matches(name, '(^|::|\s)flash_(fwd|bwd)\w*<.*bfloat16') then 240
        when regexp_matches(name, '(^|::|\s)flash_(fwd|bwd)\w*<.*half_t') then 250
        when regexp_matches(name, '(^|::|\s)flash_(fwd|bwd)|(^|[^a-z])flash::') then 260
        when regexp_matches(name, 'fmha_cutlass[FB]|fmha_\w*AttentionKernel|attention_kernel_batched') then 270
        when regexp_matches(name, '(?i)cudnn.*(sdpa|fmha|attn|attention|flash)') then 280
        when regexp_matches(name, 'paged_attention_ll4mi_\w*<[^>]*bfloat16') then 300
        when regexp_matches(name, 'paged_attention_ll4mi_') then 310
        when regexp_matches(name, '(?i)aiter.*(fmha|mha_|paged_attention|pa_fwd|pa_ragged|attn)') then 320
        when regexp_matches(name, '(?i)^fmha_(fwd|bwd)\w*_bf16') then 330
        when regexp_matches(name, '(?i)^fmha_(fwd|bwd)\w*_fp16') then 340
        when regexp_matches(name, '(?i)^fmha_(fwd|bwd)|ck_tile.*Fmha') then 350
        when regexp_matches(name, 'vllm::paged_attention|paged_attention_v[12]_kernel|vllm::\w*attention_kernel') then 360
        when regexp_matches(name, 'flashinfer::\w*(Attention|Prefill|Decode|MergeState|VariableLengthMerge)') then 370
        when regexp_matches(name, '^_?attn_(fwd|bwd)|^_?bwd_(preprocess|kernel_dk_dv|kernel_dq)') then 380
        when regexp_matches(name, '^kernel_unified_attention_|^reduce_segments$|^_fwd_(grouped_)?kernel_stage\d|^_fwd_kernel$') then 390
        when regexp_matches(name, '^sage_(fwd|quant)') then 395
        when regexp_matches(name, '(?i)^triton_tem_\w*(flex_attention|flex_decoding|sdpa|attention)') then 400
        when regexp_matches(name, 'reshape_and_cache|concat_and_cache_mla') then 410
        when regexp_matches(name, 'store_kvcache|StoreKVCacheParams') then 420
        when regexp_matches(name, '^bmm_\w*E2m1\w*_sm\d+') then 500
        when regexp_matches(name, '^bmm_\w*E4m3\w*_sm\d+') then 510
        when regexp_matches(name, 'moe::dev::|tensorrt_llm::kernels::\w*[Mm]oe') then 520
        when regexp_matches(name, '^_p?_?matmul_ogs_\w*mxfp4') then 530
        when regexp_matches(name, '^_p?_?matmul_ogs_\w*(fp8|f8)') then 540
        when regexp_matches(name, '^_p?_?matmul_ogs_\w*bf16xbf16xbf16') then 550
        when regexp_matches(name, '^_p?_?matmul_ogs_') then 560
        when regexp_matches(name, '^_(combined_routing_compute|combined_routing_memset|finalize_matmul_scatter|sum_bitmatrix_rows|topk_forward|topk_backward|routing_|compute_expt_data|expt_data_|bitmatrix_)') then 570
        when regexp_matches(name, '^fused_moe_kernel|^_fused_moe') then 580
        when regexp_matches(name, '(?i)aiter.*moe|^fmoe_|ck_moe|moe_sorting') then 590
        when regexp_matches(name, 'vllm::\w*(moe|topk)|moe_align_block_size|topkGatingSoftmax|moe_sum_kernel|count_and_sort_expert') then 600
        when regexp_matches(name, '(sgl_kernel|sglang::)\w*moe') then 610
        when regexp_matches(name, 'scaled_fp8_quant|dynamic_per_token_scaled_fp8_quant|vllm::\w*fp8_quant') then 620
        when regexp_matches(name, 'vllm::\w*(quant|fp4|int8)') then 630
        when regexp_matches(name, '(?i)(_ZN5aiter|aiter::).*(rms_?norm|layer_?norm).*(DF16b|bfloat16|bf16)') then 700
        when regexp_matches(name, '(?i)(_ZN5aiter|aiter::).*(rms_?norm|layer_?norm)') then 710
        when regexp_matches(name, '(?i)ck_tile.*(rms|layer)norm2d\w*DF16b') then 720
        when regexp_matches(name, '(?i)ck_tile.*(rms|layer)norm2d') then 730
        when regexp_matches(name, '(?i)vllm::\w*(rms_norm|layer_norm|layernorm)') then 740
        when regexp_matches(name, 'flashinfer::norm|flashinfer::\w*RMSNorm') then 750
        when regexp_matches(name, '(?i)(sgl_hip|sgl_kernel|sglang::).*(rms_?norm|layer_?norm)') then 760
        when regexp_matches(name, '(?i)^miopen\w*(BatchNorm|LayerNorm|GroupNorm|bn_)') then 770
        when regexp_matches(name, '(?i)cudnn::bn_|bn_fw_(tr|inf)_|bn_bw_') then 780
        when regexp_matches(name, 'at::native::.*(batch_norm|BatchNorm|group_norm|GroupNorm|layer_norm|LayerNorm|rms_norm|RMSNorm|RowwiseMoments|ComputeGammaBeta|GammaBetaBackward|ComputeInternalGradients|instance_norm)') then 790
        when regexp_matches(name, 'tensorrt_llm::kernels::\w*[Qq]uantiz|flashinfer::\w*[Qq]uantiz|fp4_quantize|mxfp8_quantize') then 800
        when regexp_matches(name, '(?i)aiter.*(quant|fp8|fp4)') then 810
        when regexp_matches(name, '(?i)^triton_tem_\w*(mm|addmm|bmm|gemm)') then 820
        when regexp_matches(name, '^_?(scaled_mm|matmul)_kernel|^_?w8a8_block_fp8_matmul') then 830
        when regexp_matches(name, '^triton_(poi|red|per|for|tem)_') then 900
        when regexp_matches(name, '^triton_') then 910
        when regexp_matches(name, '^create_flashinfer_kv_indices_triton|^_copy_page_indices_kernel|^create_\w*_indices_triton') then 920
        when regexp_matches(name, '_xmma_(fprop|dgrad|wgrad)|(?i)cudnn|implicit_convolve_sgemm|explicit_convolve_sgemm|conv2d_grouped_direct_kernel|fft2d_[rc]2[rc]|dgrad_engine|wgrad_alg\d') then 1000
        when regexp_matches(name, 'nchwToNhwcKernel|nhwcToNchwKernel|nchwAddPaddingKernel') then 1010
        when regexp_matches(name, '^sm\d+a?_xmma_gemm_bf16') then 1100
        when regexp_matches(name, '^sm\d+a?_xmma_gemm_f16') then 1110
        when regexp_matches(name, '^sm\d+a?_xmma_gemm_(e4m3|e5m2|f8)') then 1120
        when regexp_matches(name, '^sm\d+a?_xmma_gemm_\w*tf32') then 1130
        when regexp_matches(name, '^sm\d+a?_xmma_gemm_f32') then 1140
        when regexp_matches(name, '^(maxwell|volta|turing|ampere|ada|hopper|blackwell)_\w*(bf16\w*gemm|gemm\w*bf16)') then 1150
        when regexp_matches(name, '^(maxwell|volta|turing|ampere|ada|hopper|blackwell)_\w*(fp16\w*gemm|h\d+gemm|hgemm)') then 1160
        when regexp_matches(name, '^(maxwell|volta|turing|ampere|ada|hopper|blackwell)_\w*(tf32|s1688gemm)') then 1170
        when regexp_matches(name, '^(maxwell|volta|turing|ampere|ada|hopper|blackwell)_\w*sgemm') then 1180
        when regexp_matches(name, '^(maxwell|volta|turing|ampere|ada|hopper|blackwell)_\w*(gemm|gemv)') then 1190
        when regexp_matches(name, '^sm\d+a?_xmma_') then 1200
        when regexp_matches(name, '^nvjet_tst') then 1210
        when regexp_matches(name, '^nvjet_hsh') then 1220
        when regexp_matches(name, '^nvjet_sss') then 1230
        when regexp_matches(name, '^nvjet_(q|e4m3|e5m2)') then 1240
        when regexp_matches(name, '^nvjet_') then 1250
        when regexp_matches(name, '(?i)cublasLt|splitKreduce_kernel') then 1260
        when regexp_matches(name, '(?i)cublas|gemmSN_[TN]N_kernel|gemmk1_kernel|gemv2[TN]_kernel|gemvx::kernel|^void gemv') then 1270
        when regexp_matches(name, '(?i)cutlass\w*_sgemm') then 1300
        when regexp_matches(name, '(?i)cutlass\w*_bf16\w*gemm|cutlass\w*gemm\w*_bf16|cutlass3x\w*_bf16') then 1310
        when regexp_matches(name, '(?i)cutlass\w*_(f16|fp16|h16816|h1688)\w*gemm|cutlass\w*gemm\w*_f16|cutlass3x\w*_f16') then 1320
        when regexp_matches(name, '(?i)cutlass\w*_tf32\w*gemm|cutlass\w*_s1688gemm|cutlass3x\w*_tf32') then 1330
        when regexp_matches(name, '(?i)cutlass\w*_(e4m3|e5m2|f8)') then 1340
        when regexp_matches(name, 'cutlass::Kernel|cutlass_\d+_|cutlass3x_|cutlass::gemm::|cutlass::device_kernel|GemmUniversal') then 1350
        when regexp_matches(name, '^bmm_\w+_sm\d+|^gemm_\w+_sm\d+[af]?$') then 1360
        when regexp_matches(name, '^(Custom_)?Cijk_A[a-z]+_B[a-z]+_(F8|B8)') then 1400
        when regexp_matches(name, '^(Custom_)?Cijk_A[a-z]+_B[a-z]+_B[A-Z_].*_UserArgs_') then 1410
        when regexp_matches(name, '^(Custom_)?Cijk_A[a-z]+_B[a-z]+_H[A-Z_].*_UserArgs_') then 1420
        when regexp_matches(name, '^(Custom_)?Cijk_A[a-z]+_B[a-z]+_S[A-Z_].*_UserArgs_') then 1430
        when regexp_matches(name, '^(Custom_)?Cijk_A[a-z]+_B[a-z]+_X[A-Z_].*_UserArgs_') then 1440
        when regexp_matches(name, '^(Custom_)?Cijk_A[a-z]+_B[a-z]+_I8.*_UserArgs_') then 1450
        when regexp_matches(name, '^Custom_Cijk_|^Cijk_.*_UserArgs_|(?i)hipblaslt') then 1460
        when regexp_matches(name, '^Cijk_A[a-z]+_B[a-z]+_B[A-Z_]') then 1470
        when regexp_matches(name, '^Cijk_A[a-z]+_B[a-z]+_H[A-Z_]') then 1480
        when regexp_matches(name, '^Cijk_A[a-z]+_B[a-z]+_S[A-Z_]') then 1490
        when regexp_matches(name, '^Cijk_A[a-z]+_B[a-z]+_(I8|4xi8)') then 1500
        when regexp_matches(name, '^Cijk?_') then 1510
        when regexp_matches(name, '(_ZN2ck|(^|[^A-Za-z_])ck::|_ZN7ck_tile|(^|[^A-Za-z_])ck_tile::).*(conv|Conv|bwd_weight|bwd_data)') then 1600
        when regexp_matches(name, '(_ZN2ck|(^|[^A-Za-z_])ck::|_ZN7ck_tile|(^|[^A-Za-z_])ck_tile::).*(gemm|Gemm|GEMM)') then 1610
        when regexp_matches(name, '_ZN2ck|(^|[^A-Za-z_])ck::|_ZN7ck_tile|(^|[^A-Za-z_])ck_tile::') then 1620
        when regexp_matches(name, '(?i)aiter.*(gemm|bpreshuffle|matmul)') then 1630
        when regexp_matches(name, '(?i)aiter.*(rope|rotary)') then 1640
        when regexp_matches(name, '(?i)aiter.*(act_and_mul|silu|gelu|swiglu)') then 1650
        when regexp_matches(name, '_ZN5aiter|aiter::|^aiter_') then 1660
        when regexp_matches(name, '(?i)^igemm_\w*_(bf16|bfp16)_') then 1700
        when regexp_matches(name, '(?i)^igemm_\w*_(fp16|f16)_') then 1710
        when regexp_matches(name, '(?i)^igemm_\w*_(fp32|f32)_') then 1720
        when regexp_matches(name, '(?i)^igemm_|naive_conv|^gridwise_convolution|^miopen\w*conv|^gcnAsmConv|^sp3AsmConv|^Im2Col|^Col2Im') then 1730
        when regexp_matches(name, '^batched_transpose_|^transpose_(NCHW2CNHW|CNHW2NCHW|NCHW2NHWC|NHWC2NCHW)|^general_4d_reorder') then 1740
        when regexp_matches(name, '^SubTensorOpWithScalar|^ScaleTensor|^SetTensor') then 1750
        when regexp_matches(name, '^SubTensorOpWith|^CastTensor|^CopyTensor') then 1760
        when regexp_matches(name, '^Op[1-5]dTensorGeneric|^OpTensor') then 1770
        when regexp_matches(name, '(?i)^miopen') then 1780
        when regexp_matches(name, 'vllm::\w*rotary') then 1800
        when regexp_matches(name, '(sgl_kernel|sgl_hip|sglang::)\w*rotary|^void rotary_embedding_kernel<') then 1810
        when regexp_matches(name, 'flashinfer::\w*([Rr]ope|Rotary)') then 1820
        when regexp_matches(name, '(?i)(sgl_hip|sgl_kernel|sglang::).*(act_and_mul|silu|gelu)') then 1900
        when regexp_matches(name, 'clamp_position_kernel|resolve_future_token_ids_kernel') then 1910
        when regexp_matches(name, 'sgl_hip|sgl_kernel|sglang::') then 1920
        when regexp_matches(name, '(?i)vllm::\w*(act_and_mul|silu|gelu|swiglu)') then 1930
        when regexp_matches(name, 'vllm::') then 1940
        when regexp_matches(name, 'flashinfer::\w*(Sampling|TopK|TopP|MinP)') then 1950
        when regexp_matches(name, 'flashinfer::') then 1960
        when regexp_matches(name, 'multi_tensor_apply_kernel') then 2000
        when regexp_matches(name, 'softmax_warp_(forward|backward)|cunn_SoftMax|at::native::.*([Ss]oft[Mm]ax)') then 2010
        when regexp_matches(name, 'at::native::.*([Ee]mbedding|renorm_kernel)') then 2020
        when regexp_matches(name, 'at::native::.*(indexSelect|index_select|index_elementwise_kernel|gather_kernel|scatter|index_put|indexing_backward|index_add|indexFunc|take_kernel|put_kernel|masked_scatter|nonzero|index_copy|index_fill)') then 2030
        when regexp_matches(name, 'CatArrayBatchedCopy') then 2040
        when regexp_matches(name, 'at::native::.*([Ss]ort|[Tt]op[Kk])|(?i)radix_?sort|onesweep|segmented_?sort|merge_?sort') then 2050
        when regexp_matches(name, 'at::native::.*(scan|cumsum|cumprod)|(?i)DeviceScan|(rocprim|cub)::.*scan') then 2060
        when regexp_matches(name, '(?i)(rocprim|cub)::.*reduce') then 2070
        when regexp_matches(name, '(?i)(^|[^a-z])(rocprim|hipcub|cub)::') then 2080
        when regexp_matches(name, 'at::native::.*(max_pool|avg_pool|adaptive_max_pool|adaptive_avg_pool|MaxPool|AvgPool|adaptivemaxpool|adaptiveaveragepool|atomicadaptiveaveragepool)') then 2090
        when regexp_matches(name, 'at::native::.*(reduce_kernel|ReduceOp)|cunn_ClassNLLCriterion|nll_loss_(forward|backward)') then 2100
        when regexp_matches(name, 'at::native::.*(direct_copy_kernel|_copy_kernel_cuda|copy_device_to_device|CopyFunctor)') then 2110
        when regexp_matches(name, 'at::native::.*(FillFunctor|fill_kernel_cuda)') then 2120
        when regexp_matches(name, 'elementwise_kernel_with_index|at::native::.*(elementwise_kernel|Functor|_kernel_cuda|_kernel_impl|dropout|distribution)|at::native::\w+_kernel') then 2130
        when regexp_matches(name, 'at::native::|at::cuda::|c10::') then 2140
        when regexp_matches(name, '(?i)gemm|gemv|matmul') then 9000
        when regexp_matches(name, '(?i)convolution|conv2d|conv3d|conv_fwd|conv_bwd') then 9010
        when regexp_matches(name, '(?i)attention|flash_attn|_attn_') then 9020
        when regexp_matches(name, '(?i)softmax') then 9030
        when regexp_matches(name, '(?i)(rms|layer|batch|group)_?norm') then 9040
        when regexp_matches(name, '(?i)rotary|_rope_|rope_kernel') then 9050
        when regexp_matches(name, '(?i)quantiz|_quant_|quant_kernel') then 9060
        when regexp_matches(name, '(?i)memcpy|copyBuffer') then 9070
        when regexp_matches(name, '(?i)memset|fillBuffer') then 9080
        when regexp_matches(name, '(?i)elementwise') then 9090
        when regexp_matches(name, '(?i)reduce') then 9100
    end as rule_order
    from kernel_names
),

final as (
    select
        first_match.name,
        rules.rule_order,
        rules.kernel_type,
        rules.category,
        rules.library,
        rules.is_comm,
        rules.precision
    from first_match
    inner join rules on first_match.rule_order = rules.rule_order
)

select * from final
