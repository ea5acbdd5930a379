"""Kernel taxonomy seed (seeds/kernel_taxonomy.csv) on real kernel names from the test traces.

Each case is an exact kernel / memcpy / memset name found in tests/data/traces with the
(kernel_type, kernel_category, library, kernel_precision) the first matching rule must give it.
"""

from __future__ import annotations

import pytest

KERNEL_TYPES = {
    "gemm", "attention", "elementwise", "reduce", "norm", "softmax", "conv", "moe", "copy", "fill",
    "collective", "embedding", "index", "sort", "rope", "quant", "triton_fused", "other",
}
CATEGORIES = {
    "GEMM", "SDPA", "elementwise", "reduce", "NORM", "CONV", "MoE", "triton", "comm", "memcpy", "memset", "other",
}
LIBRARIES = {
    "cuBLAS", "cuBLASLt", "CUTLASS", "cuDNN", "hipBLASLt", "Tensile", "CK", "aiter", "MIOpen", "flash-attn",
    "PyTorch", "Triton", "NCCL", "RCCL", "runtime", "vLLM", "SGLang", "FlashInfer", "unknown",
}
PRECISIONS = {"bf16", "fp16", "fp32", "tf32", "fp8", "fp4", "int8"}

# (name, kernel_type, kernel_category, library, kernel_precision) -- H100 / B200 traces
CUDA_CASES = [
    ('fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext', 'attention', 'SDPA', 'FlashInfer', 'fp8'),
    ('fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvSlidingOrChunkedCausalP16VarSeqQ128Kv128PersistentContext', 'attention', 'SDPA', 'FlashInfer', 'fp8'),
    ('void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, false, false, false, false, true, false>(pytorch_flash::Flash_fwd_params)', 'attention', 'SDPA', 'flash-attn', 'bf16'),
    ('ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)', 'collective', 'comm', 'NCCL', None),
    ('void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)', 'collective', 'comm', 'PyTorch', None),
    ('void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 4, 64, 64>(at::native::(anonymous namespace)::OpaqueType<2u>*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 64, 64>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)', 'copy', 'other', 'PyTorch', None),
    ('void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1})', 'copy', 'elementwise', 'PyTorch', None),
    ('void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1}, std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1}, std::array<char*, 2ul>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)', 'copy', 'elementwise', 'PyTorch', None),
    ('Memcpy DtoD (Device -> Device)', 'copy', 'memcpy', 'runtime', None),
    ('Memcpy DtoH (Device -> Pinned)', 'copy', 'memcpy', 'runtime', None),
    ('Memcpy HtoD (Pageable -> Device)', 'copy', 'memcpy', 'runtime', None),
    ('Memcpy HtoD (Pinned -> Device)', 'copy', 'memcpy', 'runtime', None),
    ('void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1>(__nv_bfloat16 const*, __nv_bfloat16 const*, unsigned char*, unsigned char*, long const*, long, long, long, long, long, int, int, int, float const*, float const*)', 'copy', 'SDPA', 'vLLM', None),
    ('void (anonymous namespace)::elementwise_kernel_with_index<int, at::native::arange_cuda_out(c10::Scalar const&, c10::Scalar const&, c10::Scalar const&, at::Tensor&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1}>(int, at::native::arange_cuda_out(c10::Scalar const&, c10::Scalar const&, c10::Scalar const&, at::Tensor&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1}, function_traits<at::native::arange_cuda_out(c10::Scalar const&, c10::Scalar const&, c10::Scalar const&, at::Tensor&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1}>::result_type*)', 'elementwise', 'elementwise', 'PyTorch', None),
    ('void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16, bool)#1}>(at::TensorIteratorBase&, at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16, bool)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16, bool)#1}>(at::TensorIteratorBase&, at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16, bool)#1} const&)::{lambda(int)#1})', 'elementwise', 'elementwise', 'PyTorch', None),
    ('void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#6}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#6}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)', 'elementwise', 'elementwise', 'PyTorch', None),
    ('void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)', 'elementwise', 'elementwise', 'PyTorch', None),
    ('void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)', 'elementwise', 'elementwise', 'PyTorch', None),
    ('void at::native::vectorized_elementwise_kernel<8, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul> >(int, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul>)', 'fill', 'elementwise', 'PyTorch', None),
    ('Memset (Device)', 'fill', 'memset', 'runtime', None),
    ('void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::Params)', 'gemm', 'GEMM', 'CUTLASS', 'fp32'),
    ('void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2>(cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2::Params)', 'gemm', 'GEMM', 'CUTLASS', 'bf16'),
    ('void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)', 'gemm', 'GEMM', 'CUTLASS', 'bf16'),
    ('sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas', 'gemm', 'GEMM', 'cuBLAS', 'bf16'),
    ('sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas', 'gemm', 'GEMM', 'cuBLAS', 'bf16'),
    ('nvjet_tst_144x128_64x6_2x1_v_bz_bias_TNN', 'gemm', 'GEMM', 'cuBLASLt', 'bf16'),
    ('nvjet_tst_192x8_64x8_4x1_v_bz_TNT', 'gemm', 'GEMM', 'cuBLASLt', 'bf16'),
    ('void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)', 'index', 'other', 'PyTorch', None),
    ('void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::index_kernel_impl<at::native::OpaqueType<2> >(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_kernel_impl<at::native::OpaqueType<2> >(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1} const&, bool)::{lambda(int)#1}>(long, at::native::gpu_index_kernel<at::native::index_kernel_impl<at::native::OpaqueType<2> >(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_kernel_impl<at::native::OpaqueType<2> >(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1} const&, bool)::{lambda(int)#1})', 'index', 'other', 'PyTorch', None),
    ('void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int, long, long, long, long, bool)', 'index', 'other', 'PyTorch', None),
    ('_copy_page_indices_kernel', 'index', 'other', 'Triton', None),
    ('bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_schedP2x1x2x3_biasM_bN_tmaOpt_clmp_dynBatch_sm100f', 'moe', 'MoE', 'FlashInfer', 'fp4'),
    ('bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_schedP2x1x2x3_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f', 'moe', 'MoE', 'FlashInfer', 'fp4'),
    ('void moe::dev::finalize::finalizeKernelVecLoad<moe::dev::finalize::KernelParams<cutlass::bfloat16_t, cutlass::bfloat16_t, 4, true> >(moe::dev::finalize::KernelParams<cutlass::bfloat16_t, cutlass::bfloat16_t, 4, true>)', 'moe', 'MoE', 'FlashInfer', None),
    ('void moe::dev::routing::routingIndicesHistogramKernel<moe::dev::routing::routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, true> >(moe::dev::routing::routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, true>)', 'moe', 'MoE', 'FlashInfer', None),
    ('void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)', 'norm', 'NORM', 'PyTorch', None),
    ('std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*, c10::BFloat16 const*, float, int, int)', 'norm', 'NORM', 'vLLM', None),
    ('void vllm::rms_norm_kernel<c10::BFloat16, 8, 2>(c10::BFloat16*, c10::BFloat16 const*, long, long, long, long, long, c10::BFloat16 const*, float, int, int)', 'norm', 'NORM', 'vLLM', None),
    ('void tensorrt_llm::kernels::quantize_with_block_size<(tensorrt_llm::BlockScaleQuantizationType)2, __nv_bfloat16, 32, true>(int, int, int, int, __nv_bfloat16 const*, float const*, unsigned int*, unsigned int*, flashinfer::QuantizationSFLayout)', 'quant', 'elementwise', 'FlashInfer', None),
    ('void vllm::scaled_fp8_quant_kernel_strided<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*, c10::BFloat16 const*, float const*, int, long, long)', 'quant', 'elementwise', 'vLLM', 'fp8'),
    ('void at::native::reduce_kernel<512, 1, at::native::ReduceOp<bool, at::native::func_wrapper_t<bool, at::native::and_kernel_cuda(at::TensorIterator&)::{lambda()#1}::operator()() const::{lambda()#12}::operator()() const::{lambda(bool, bool)#1}>, unsigned int, bool, 4> >(at::native::ReduceOp<bool, at::native::func_wrapper_t<bool, at::native::and_kernel_cuda(at::TensorIterator&)::{lambda()#1}::operator()() const::{lambda()#12}::operator()() const::{lambda(bool, bool)#1}>, unsigned int, bool, 4>)', 'reduce', 'reduce', 'PyTorch', None),
    ('void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)', 'reduce', 'reduce', 'PyTorch', None),
    ('void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, int, long, long, long, int, int, int)', 'rope', 'elementwise', 'vLLM', None),
    ('triton_poi_fused_add_bitwise_and_bitwise_not_bitwise_or_ge_lt_mul_sub_0', 'triton_fused', 'triton', 'Triton', None),
]

# (name, kernel_type, kernel_category, library, kernel_precision) -- MI210 / MI300X traces
ROCM_CASES = [
    ('attn_fwd', 'attention', 'SDPA', 'Triton', None),
    ('kernel_unified_attention_2d', 'attention', 'SDPA', 'Triton', None),
    ('kernel_unified_attention_3d', 'attention', 'SDPA', 'Triton', None),
    ('reduce_segments', 'attention', 'SDPA', 'Triton', None),
    ('void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCacheDataType)0, 1, 128, 256, false, 4, 1, ck_tile::ComposedAttention<0u, false> >(__hip_bfloat16 const*, __hip_bfloat16 const*, __hip_bfloat16 const*, float, int const*, int const*, int const*, float const*, int, int, int, int, float*, float*, __hip_bfloat16*, float, float, float const*, float const*, float const*, ck_tile::ComposedAttention<0u, false> const*)', 'attention', 'SDPA', 'aiter', 'bf16'),
    ('void paged_attention_ll4mi_reduce_kernel<__hip_bfloat16, __hip_bfloat16, 128, 128, 256, 3, false>(__hip_bfloat16*, float const*, float const*, __hip_bfloat16 const*, int const*, int const*, int, int, float const*)', 'attention', 'SDPA', 'aiter', 'bf16'),
    ('ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)', 'collective', 'comm', 'RCCL', None),
    ('_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle_v3INS_28GridwiseGemm_xdl_cshuffle_v3INS_13tensor_layout4gemm8RowMajorENS6_11ColumnMajorES7_ttfttNS0_12element_wise11PassThroughESA_SA_LNS1_18GemmSpecializationE7ELi128ELi16ELi32ELi64ELi8ELi8ELi16ELi16ELi1ELi1ENS_8SequenceIJLi8ELi16ELi1EEEENSC_IJLi1ELi0ELi2EEEESE_Li2ELi8ELi8ELb0ELi0ESD_SE_SE_Li2ELi8ELi8ELb0ELi0ELi1ELi1ENSC_IJLi1ELi16ELi1ELi8EEEELi4ELNS_26BlockGemmPipelineSchedulerE1ELNS_24BlockGemmPipelineVersionE0EttLb0ELb0EEENS_16TensorDescriptorINS_5TupleIJNS_5EmbedINSK_IJiiiiEEESM_Lb0EEENS_11PassThroughIiEENS_3PadIiiiLb0EEESR_SP_SP_NSL_INSK_IJiiEEESS_Lb0EEEST_SP_NS_23Merge_v2_magic_divisionINSK_IJiiiEEEEESW_NS_8RightPadIiiLb0EEESY_NS_7UnMergeISS_Lb0EEESP_EEENSK_IJNSC_IJLi0EEEENSC_IJLi1EEEENSC_IJLi2EEEENSC_IJLi3EEEENSC_IJLi4EEEENSC_IJLi5EEEENSC_IJLi6EEEENSC_IJLi7EEEENSC_IJLi8EEEENSC_IJLi9ELi11ELi13EEEENSC_IJLi10ELi12ELi14EEEENSC_IJLi15EEEENSC_IJLi16EEEENSC_IJLi18EEEENSC_IJLi17EEEEEEENSK_IJNSC_IJLi1ELi2ELi3ELi4EEEES17_S18_S19_S1A_NSC_IJLi9EEEENSC_IJLi10ELi11EEEENSC_IJLi12ELi13EEEENSC_IJLi14EEEES1D_S1E_S1G_S1F_NSC_IJLi19ELi20EEEENSC_IJLi21EEEEEEENSC_IJLi19ELi21ELi20EEEElEENSJ_INSK_IJS10_SY_SY_S10_SP_EEENSK_IJS12_S13_S14_S16_S15_EEENSK_IJNSC_IJLi1ELi2EEEES15_S16_NSC_IJLi5ELi6EEEES19_EEENSC_IJLi5ELi7ELi6EEEElEENSJ_INSK_IJST_SY_SY_NSZ_INSK_IJiNS_17integral_constantIiLi16EEEEEELb0EEENSZ_INSK_IJiNS1Z_IiLi32EEEEEELb0EEEEEENSK_IJS12_S13_S14_S15_S16_EEENSK_IJS1U_S15_S16_S1V_NSC_IJLi7ELi8EEEEEEENSC_IJLi5ELi6ELi7ELi8EEEElEENS1_30ComputePtrOffsetOfStridedBatchILi1ELi1ELi0EvEELb1ELNS_25InMemoryDataOperationEnumE0ELi2ELNS_10TailNumberE10EEEvNT_8ArgumentET0_T1_T2_T3_S2L_i', 'conv', 'CONV', 'CK', None),
    ('_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle_v3INS_28GridwiseGemm_xdl_cshuffle_v3INS_13tensor_layout4gemm8RowMajorENS6_11ColumnMajorES7_ttfttNS0_12element_wise11PassThroughESA_SA_LNS1_18GemmSpecializationE7ELi256ELi64ELi64ELi64ELi8ELi8ELi32ELi32ELi1ELi1ENS_8SequenceIJLi8ELi32ELi1EEEENSC_IJLi1ELi0ELi2EEEESE_Li2ELi8ELi8ELb0ELi0ESD_SE_SE_Li2ELi8ELi8ELb0ELi0ELi1ELi1ENSC_IJLi1ELi32ELi1ELi8EEEELi8ELNS_26BlockGemmPipelineSchedulerE0ELNS_24BlockGemmPipelineVersionE2EttLb0ELb0EEENS_16TensorDescriptorINS_5TupleIJNS_5EmbedINSK_IJiiiiEEESM_Lb0EEENS_11PassThroughIiEENS_3PadIiiiLb0EEESR_SP_SP_NSL_INSK_IJiiEEESS_Lb0EEEST_SP_NS_23Merge_v2_magic_divisionINSK_IJiiiEEEEESW_NS_8RightPadIiiLb0EEESY_NS_7UnMergeISS_Lb0EEESP_EEENSK_IJNSC_IJLi0EEEENSC_IJLi1EEEENSC_IJLi2EEEENSC_IJLi3EEEENSC_IJLi4EEEENSC_IJLi5EEEENSC_IJLi6EEEENSC_IJLi7EEEENSC_IJLi8EEEENSC_IJLi9ELi11ELi13EEEENSC_IJLi10ELi12ELi14EEEENSC_IJLi15EEEENSC_IJLi16EEEENSC_IJLi18EEEENSC_IJLi17EEEEEEENSK_IJNSC_IJLi1ELi2ELi3ELi4EEEES17_S18_S19_S1A_NSC_IJLi9EEEENSC_IJLi10ELi11EEEENSC_IJLi12ELi13EEEENSC_IJLi14EEEES1D_S1E_S1G_S1F_NSC_IJLi19ELi20EEEENSC_IJLi21EEEEEEENSC_IJLi19ELi21ELi20EEEElEENSJ_INSK_IJS10_SY_SY_S10_SP_EEENSK_IJS12_S13_S14_S16_S15_EEENSK_IJNSC_IJLi1ELi2EEEES15_S16_NSC_IJLi5ELi6EEEES19_EEENSC_IJLi5ELi7ELi6EEEElEENSJ_INSK_IJST_SY_SY_NSZ_INSK_IJiNS_17integral_constantIiLi64EEEEEELb0EEES22_EEENSK_IJS12_S13_S14_S15_S16_EEENSK_IJS1U_S15_S16_S1V_NSC_IJLi7ELi8EEEEEEENSC_IJLi5ELi6ELi7ELi8EEEElEENS1_30ComputePtrOffsetOfStridedBatchILi1ELi1ELi0EvEELb1ELNS_25InMemoryDataOperationEnumE0ELi1ELNS_10TailNumberE10EEEvNT_8ArgumentET0_T1_T2_T3_S2I_i', 'conv', 'CONV', 'CK', None),
    ('_ZN2ck16tensor_operation6device12_GLOBAL__N_149kernel_grouped_conv_fwd_multiple_abd_xdl_cshuffleINS_34GridwiseGemmMultipleD_xdl_cshuffleItttftNS_5TupleIJEEEtNS0_12element_wise11PassThroughES8_S8_LNS_25InMemoryDataOperationEnumE0ELi1ELi256ELi128ELi64ELi32ELi8ELi8ELi32ELi32ELi2ELi1ENS_8SequenceIJLi4ELi64ELi1EEEENSA_IJLi1ELi0ELi2EEEESC_Li2ELi8ELi8ELb0ELi1ESB_SC_SC_Li2ELi8ELi8ELb0ELi1ELi1ELi1ENSA_IJLi1ELi32ELi1ELi8EEEELi8ELNS_13LoopSchedulerE0ELNS_15PipelineVersionE0EtEEPKtSI_S6_tS8_S8_S8_NS_16TensorDescriptorINS5_IJNS_5EmbedINS5_IJiiiiEEESL_Lb0EEENS_11PassThroughIiEENS_3PadIiiiLb0EEESQ_SO_SO_NSK_INS5_IJiiEEESR_Lb0EEESS_SO_NS_23Merge_v2_magic_divisionINS5_IJiiiEEEEESV_NS_8RightPadIiiLb0EEESX_NS_7UnMergeINS5_IJiNS_17integral_constantIiLi8EEEEEELb0EEESO_EEENS5_IJNSA_IJLi0EEEENSA_IJLi1EEEENSA_IJLi2EEEENSA_IJLi3EEEENSA_IJLi4EEEENSA_IJLi5EEEENSA_IJLi6EEEENSA_IJLi7EEEENSA_IJLi8EEEENSA_IJLi9ELi11ELi13EEEENSA_IJLi10ELi12ELi14EEEENSA_IJLi15EEEENSA_IJLi16EEEENSA_IJLi18EEEENSA_IJLi17EEEEEEENS5_IJNSA_IJLi1ELi2ELi3ELi4EEEES19_S1A_S1B_S1C_NSA_IJLi9EEEENSA_IJLi10ELi11EEEENSA_IJLi12ELi13EEEENSA_IJLi14EEEES1F_S1G_S1I_S1H_NSA_IJLi19ELi20EEEENSA_IJLi21EEEEEEENSA_IJLi19ELi21ELi20EEEElEENSJ_INS5_IJNSY_ISR_Lb0EEESX_SX_S12_SO_EEENS5_IJS14_S15_S16_S18_S17_EEENS5_IJNSA_IJLi1ELi2EEEES17_S18_NSA_IJLi5ELi6EEEES1B_EEENSA_IJLi5ELi7ELi6EEEElEES6_NSJ_INS5_IJSS_SX_SX_NSY_INS5_IJiNSZ_IiLi128EEEEEELb0EEENSY_INS5_IJiNSZ_IiLi64EEEEEELb0EEEEEENS5_IJS14_S15_S16_S17_S18_EEENS5_IJS1X_S17_S18_S1Y_NSA_IJLi7ELi8EEEEEEENSA_IJLi5ELi6ELi7ELi8EEEElEENS_31BlockToCTileMap_M00_N0_M01AdaptILi128ELi64ENSJ_INS5_IJSS_SX_SX_EEENS5_IJS14_S15_S16_EEENS5_IJS1X_S17_S18_EEENSA_IJLi3ELi4EEEElEEEENS1_30ComputePtrOffsetOfStridedBatchILi1ELi1ELi0EvEES2M_Lb1ELb0ELb0EEEvT0_T1_T2_PT3_T4_T5_T6_T7_T8_T9_T10_T11_T12_T13_', 'conv', 'CONV', 'CK', None),
    ('_ZN2ck16tensor_operation6device37kernel_batched_gemm_xdlops_bwd_weightINS_47GridwiseGemm_bk0mk1_bk0nk1_mn_xdlops_bwd_weightILi64EttftLNS_25InMemoryDataOperationEnumE1ENS_16TensorDescriptorINS_5TupleIJNS_5EmbedINS6_IJiiEEENS6_IJiNS_17integral_constantIiLi1EEEEEELb0EEENS_8RightPadIiiLb0EEENS_11PassThroughIiEENS_7UnMergeINS6_IJiiiEEELb0EEESG_SG_SG_SE_SG_EEENS6_IJNS_8SequenceIJLi0EEEENSL_IJLi1EEEENSL_IJLi2EEEENSL_IJLi3EEEENSL_IJLi4EEEENSL_IJLi5EEEENSL_IJLi6EEEENSL_IJLi8EEEENSL_IJLi7EEEEEEENS6_IJNSL_IJLi1ELi2EEEESP_SQ_NSL_IJLi5ELi6ELi7EEEEST_NSL_IJLi9EEEENSL_IJLi10EEEENSL_IJLi11EEEENSL_IJLi12EEEEEEENSL_IJLi9ELi10ELi11ELi12EEEElEENS5_INS6_IJNS7_INS6_IJiiiiEEES15_Lb0EEESG_NS_3PadIiiiLb0EEES18_SG_SG_NS7_IS8_S8_Lb0EEES19_SG_NS_23Merge_v2_magic_divisionISI_EES1B_SE_SG_SJ_SG_SG_SG_SE_SG_EEENS6_IJSM_SN_SO_SP_SQ_SR_SS_SU_ST_NSL_IJLi10ELi12ELi14EEEENSL_IJLi9ELi11ELi13EEEENSL_IJLi16EEEENSL_IJLi15EEEENSL_IJLi17EEEENSL_IJLi18EEEENSL_IJLi19EEEENSL_IJLi20EEEENSL_IJLi22EEEENSL_IJLi21EEEEEEENS6_IJNSL_IJLi1ELi2ELi3ELi4EEEESR_SS_SU_ST_SY_NSL_IJLi10ELi11EEEENSL_IJLi12ELi13EEEENSL_IJLi14EEEES1G_S1F_S1H_S1I_NSL_IJLi19ELi20ELi21EEEES1L_NSL_IJLi23EEEENSL_IJLi24EEEENSL_IJLi25EEEENSL_IJLi26EEEEEEENSL_IJLi23ELi24ELi25ELi26EEEElEENS5_INS6_IJSC_SE_SE_EEENS6_IJSM_SN_SO_EEENS6_IJSW_SP_SQ_EEENSL_IJLi3ELi4EEEElEENS0_12element_wise11PassThroughES26_S26_Li64ELi32ELi4ELi32ELi32ELi8ELi2ELi1ENSL_IJLi1ELi4ELi8ELi2EEEENSL_IJLi0ELi3ELi1ELi2EEEENSL_IJLi0ELi2ELi1ELi3EEEELi2ELi8ELi4ELb0ELb1ELi8ELi8ELi4ENSL_IJLi1ELi4ELi4ELi4EEEES28_S29_Li2ELi8ELi2ELb0ELb1ELi8ELi4ELi4ELi1ELi1ELi8ENSL_IJLi1ELi16ELi1ELi4EEEELb1ELb1ELi1ELNS_15PipelineVersionE0EttEEtttS26_S26_S26_S14_S1Z_NS5_INS6_IJSC_SE_SE_NSH_INS6_IJiNS9_IiLi64EEEEEELb0EEENSH_INS6_IJiNS9_IiLi32EEEEEELb0EEEEEENS6_IJSM_SN_SO_SP_SQ_EEENS6_IJSW_SP_SQ_NSL_IJLi5ELi6EEEENSL_IJLi7ELi8EEEEEEENSL_IJLi5ELi6ELi7ELi8EEEElEENS_38BlockToCTileMap_KSplit_M00_N00_M01_N01ILi64ELi32ES24_Lb0EEENS1_30ComputePtrOffsetOfStridedBatchILi1ELi1ELi0EvEELb1EEEvPKT0_PKT1_PT2_T3_T4_T5_iT6_T7_T8_T9_T10_', 'conv', 'CONV', 'CK', None),
    ('igemm_bwd_gtcx2_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x1x2_1x4x1x64_mh_gkgs', 'conv', 'CONV', 'MIOpen', 'bf16'),
    ('igemm_fwd_gtcx2_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x2x1_1x4x1x64_gkgs', 'conv', 'CONV', 'MIOpen', 'bf16'),
    ('igemm_fwd_gtcx2_nhwc_bf16_bx0_ex1_bt256x64x8_wt64x16x4_ws1x1_wr2x2_ta1x1x8x1_1x8x1x32_tb1x1x2x1_1x8x1x32_me', 'conv', 'CONV', 'MIOpen', 'bf16'),
    ('igemm_wrw_gtcx2_nhwc_bf16_bx0_ex1_bt128x128x16_wt32x32x8_ws1x1_wr2x2_ta1x4x1x2_1x4x1x64_tb1x4x1x2_1x4x1x64_gkgs', 'conv', 'CONV', 'MIOpen', 'bf16'),
    ('SubTensorOpWithCastTensor1d', 'copy', 'CONV', 'MIOpen', None),
    ('batched_transpose_16x32_half', 'copy', 'CONV', 'MIOpen', None),
    ('batched_transpose_16x64_pack_1x4_ediv_1x2_half', 'copy', 'CONV', 'MIOpen', None),
    ('transpose_CNHW2NCHW_V2_2D_WG_off64', 'copy', 'CONV', 'MIOpen', None),
    ('transpose_NCHW2CNHW_V2_2D_WG_off64', 'copy', 'CONV', 'MIOpen', None),
    ('void at::native::elementwise_kernel<512, 1, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1})', 'copy', 'elementwise', 'PyTorch', None),
    ('void at::native::elementwise_kernel_manual_unroll<128, 4, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#3}::operator()() const::{lambda(int)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#3}::operator()() const::{lambda(int)#1} const&)::{lambda(int, bool)#1}>(int, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#3}::operator()() const::{lambda(int)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#3}::operator()() const::{lambda(int)#1} const&)::{lambda(int, bool)#1})', 'copy', 'elementwise', 'PyTorch', None),
    ('void at::native::elementwise_kernel_manual_unroll<128, 8, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int, bool)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int, bool)#1})', 'copy', 'elementwise', 'PyTorch', None),
    ('void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul>)', 'copy', 'elementwise', 'PyTorch', None),
    ('void (anonymous namespace)::store_kvcache<2048l, 4, false, long>((anonymous namespace)::StoreKVCacheParams)', 'copy', 'SDPA', 'SGLang', None),
    ('Memcpy DtoH (Device -> Host)', 'copy', 'memcpy', 'runtime', None),
    ('void vllm::reshape_and_cache_flash_kernel<__hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCacheDataType)0>(__hip_bfloat16 const*, __hip_bfloat16 const*, __hip_bfloat16*, __hip_bfloat16*, long const*, long, long, long, long, long, int, int, int, float const*, float const*, int)', 'copy', 'SDPA', 'vLLM', None),
    ('void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<c10::BFloat16, 2, 2, 0>, std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<c10::BFloat16, 2, 2, 0>, std::plus<float>, float)', 'elementwise', 'elementwise', 'PyTorch', None),
    ('void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::CopyFunctor<int, long, 2, 1, 1>, at::native::Copy<int, long> >(at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::CopyFunctor<int, long, 2, 1, 1>, at::native::Copy<int, long>)', 'elementwise', 'elementwise', 'PyTorch', None),
    ('void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<long>, std::array<char*, 2ul> >(int, at::native::CUDAFunctorOnSelf_add<long>, std::array<char*, 2ul>)', 'elementwise', 'elementwise', 'PyTorch', None),
    ('void at::native::vectorized_elementwise_kernel<8, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#6}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#6}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)', 'elementwise', 'elementwise', 'PyTorch', None),
    ('void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)', 'elementwise', 'elementwise', 'PyTorch', None),
    ('_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_S5_EEEEvPS3_PS4_i', 'elementwise', 'elementwise', 'SGLang', None),
    ('void (anonymous namespace)::clamp_position_kernel<long>(long*, long const*, unsigned long)', 'elementwise', 'elementwise', 'SGLang', None),
    ('SubTensorOpWithScalar1d', 'fill', 'CONV', 'MIOpen', None),
    ('Cijk_Ailk_Bjlk_BBS_BH_MT32x32x64_MI16x16x16x1_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM1_AF1EM1_AMAS3_ASE_ASGT3128_ASLT_ASM_ASAE01_ASCE01_ASEM1_AAC0_BL1_BS1_CLR1_DTLA0_DTLB0_DTVA0_DTVB0_DVO0_ETSP_EPS1_ELFLR0_EMLL0_FSSC10_FL0_GLVWA2_GLVWB2_GRCGA1_GRCGB1_GRPM1_GRVW2_GSU1_GSUASB_GLS1_ISA942_IU1_K1_KLA_LBSPPA256_LBSPPB256_LPA32_LPB16_LDL1_LRVW4_LWPMn1_LDW0_FMA_MIAV1_MDA2_MO40_MMFSC_MKFGSU256_NTA0_NTB0_NTC0_NTD0_NEPBS16_NLCA1_NLCB1_ONLL1_OPLV0_PK0_PAP0_PGR2_PLR3_PKA0_SIA3_SLW1_SS1_SU0_SUM0_SUS0_SCIUI1_SPO0_SRVW0_SSO4_SVW2_SNLL0_TSGRA0_TSGRB0_TT2_16_TLDS0_UMLDSA0_UMLDSB0_U64SL1_USFGROn1_VAW1_VSn1_VW2_VWB1_VFLRP1_WSGRA1_WSGRB0_WS64_WG16_8_2_WGM16', 'gemm', 'GEMM', 'Tensile', 'bf16'),
    ('Cijk_Ailk_Bljk_BBS_BH_MT64x64x64_MI16x16x16x1_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM1_AF1EM1_AMAS3_ASE_ASGT_ASLT_ASM_ASAE01_ASCE01_ASEM1_AAC0_BL1_BS1_CLR0_DTLA0_DTLB0_DTVA0_DTVB0_DVO0_ETSP_EPS1_ELFLR4_EMLL0_FSSC10_FL0_GLVWA2_GLVWB2_GRCGA1_GRCGB1_GRPM1_GRVWn1_GSU1_GSUASB_GLS1_ISA942_IU1_K1_KLA_LBSPPA512_LBSPPB256_LPA32_LPB4_LDL1_LRVW4_LWPMn1_LDW0_FMA_MIAV0_MDA2_MO40_MMFSC_MKFGSU256_NTA0_NTB0_NTC2_NTD2_NEPBS0_NLCA1_NLCB1_ONLL1_OPLV0_PK0_PAP0_PGR2_PLR1_PKA0_SIA3_SLW1_SS1_SU64_SUM0_SUS512_SCIUI1_SPO1_SRVW0_SSO4_SVW2_SNLL0_TSGRA0_TSGRB0_TT2_32_TLDS1_UMLDSA0_UMLDSB1_U64SL1_USFGROn1_VAW1_VSn1_VW2_VWB2_VFLRP1_WSGRA0_WSGRB0_WS64_WG32_8_1_WGMn16', 'gemm', 'GEMM', 'Tensile', 'bf16'),
    ('Cijk_Ailk_Bjlk_BBS_BH_Bias_HAS_SAV_UserArgs_MT128x64x32_MI32x32x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSUAMB_GLS0_ISA90a_IU1_K1_LBSPPA0_LBSPPB0_LBSPPM0_LPA0_LPB0_LPM0_LRVW4_LWPMn1_MIAV0_MIWT2_1_MO40_NTn1_NTA0_NTB0_NTC0_NTD0_NTM0_NEPBS2_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO1_SRVW0_SSO0_SVW1_SK0_SKXCCM0_TLDS0_ULSGRO0_USL1_UIOFGRO0_USFGROn1_VSn1_VWA2_VWB1_WSGRA0_WSGRB0_WS64_WG64_4_1', 'gemm', 'GEMM', 'hipBLASLt', 'bf16'),
    ('Cijk_Ailk_Bjlk_BBS_BH_Bias_HAS_SAV_UserArgs_MT64x32x64_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSUAMB_GLS0_ISA942_IU1_K1_LBSPPA512_LBSPPB256_LBSPPM0_LPA32_LPB16_LPM0_LRVW4_LWPMn1_MIAV0_MIWT2_1_MO40_NTn1_NTA0_NTB0_NTC0_NTD4_NTM0_NEPBS16_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW0_SSO0_SVW2_SK0_SKXCCM0_TLDS0_ULSGRO0_USL1_UIOFGRO0_USFGROn1_VSn1_VWA2_VWB1_WSGRA0_WSGRB0_WS64_WG32_8_1', 'gemm', 'GEMM', 'hipBLASLt', 'bf16'),
    ('Cijk_Ailk_Bljk_S_B_Bias_HA_S_SAV_UserArgs_MT16x16x128_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA2_GRVWB2_GSUAMB_GLS0_ISA942_IU1_K1_LBSPPA256_LBSPPB512_LBSPPM0_LPA16_LPB8_LPM0_LRVW4_LWPMn1_MIAV0_MIWT1_1_MO40_NTn1_NTA4_NTB0_NTC0_NTD4_NTM0_NEPBS16_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW0_SSO0_SVW1_SK0_SKXCCM0_TLDS1_ULSGRO0_USL1_UIOFGRO0_USFGROn1_VSn1_VWA1_VWB1_WSGRA0_WSGRB0_WS64_WG16_4_4', 'gemm', 'GEMM', 'hipBLASLt', 'fp32'),
    ('Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_DTLA0_DTLB0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSUAMBSK_GLS0_ISA942_IU1_K1_LDSTI0_LBSPPA1024_LBSPPB256_LBSPPM0_LPA16_LPB16_LPM0_LRVW8_LWPMn1_MIAV0_MIWT8_6_MO40_NTn1_NTA0_NTB0_NTC0_NTD4_NTM0_NEPBS16_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW0_SSO0_SVW8_SK0_SKFTR0_SKXCCM0_TLDS1_ULSGRO0_USL1_UIOFGRO0_USFGROn1_VSn1_VWA8_VWB2_WSGRA0_WSGRB0_WS64_WG32_8_1', 'gemm', 'GEMM', 'hipBLASLt', 'bf16'),
    ('Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT128x224x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSUAMB_GLS0_ISA942_IU1_K1_LBSPPA512_LBSPPB128_LBSPPM0_LPA16_LPB16_LPM0_LRVW8_LWPMn1_MIAV0_MIWT4_7_MO40_NTn1_NTA0_NTB0_NTC0_NTD0_NTM0_NEPBS16_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW0_SSO0_SVW4_SK0_SKXCCM0_TLDS1_ULSGRO0_USL1_UIOFGRO0_USFGROn1_VSn1_VWA4_VWB1_WSGRA0_WSGRB0_WS64_WG32_8_1', 'gemm', 'GEMM', 'hipBLASLt', 'bf16'),
    ('create_flashinfer_kv_indices_triton', 'index', 'other', 'Triton', None),
    ('_combined_routing_compute', 'moe', 'MoE', 'Triton', None),
    ('_combined_routing_memset', 'moe', 'MoE', 'Triton', None),
    ('_finalize_matmul_scatter_bf16', 'moe', 'MoE', 'Triton', None),
    ('_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1', 'moe', 'MoE', 'Triton', 'fp4'),
    ('_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu', 'moe', 'MoE', 'Triton', 'fp4'),
    ('_sum_bitmatrix_rows', 'moe', 'MoE', 'Triton', None),
    ('_topk_forward', 'moe', 'MoE', 'Triton', None),
    ('_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27Rmsnorm2dFwdPipelineProblemIDF16bDF16bfDF16bDF16bDF16bffNS_19Generic2dBlockShapeINS_8sequenceIJLi1ELi3072EEEENS5_IJLi1ELi128EEEENS5_IJLi1ELi8EEEEEENS_18Rmsnorm2dFwdTraitsILb1ELb0ELb0ELb0ELNS_21Rmsnorm2dFusedAddEnumE0ELNS_23Rmsnorm2dFusedQuantEnumE0ELNS_22Rmsnorm2dSensitiveEnumE0EEEEENS_33Rmsnorm2dFwdPipelineDefaultPolicyEEENS_17Default2DEpilogueINS_24Default2DEpilogueProblemIfDF16bLb0ELb1ELb0EEEvEEEEJNSM_5KargsEEEEvDpT1_', 'norm', 'NORM', 'CK', 'bf16'),
    ('void at::native::(anonymous namespace)::unrolled_elementwise_kernel_for_multi_outputs<3, at::native::(anonymous namespace)::batch_norm_update_stats_and_invert(at::Tensor const&, at::Tensor const&, at::Tensor const&, at::Tensor const&, double, double, long)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(float, float, c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 7ul>, TrivialOffsetCalculator<4, unsigned int>, TrivialOffsetCalculator<3, unsigned int> >(int, at::native::(anonymous namespace)::batch_norm_update_stats_and_invert(at::Tensor const&, at::Tensor const&, at::Tensor const&, at::Tensor const&, double, double, long)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(float, float, c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 7ul>, TrivialOffsetCalculator<4, unsigned int>, TrivialOffsetCalculator<3, unsigned int>)', 'norm', 'NORM', 'PyTorch', None),
    ('void at::native::batch_norm_backward_kernel<c10::BFloat16, c10::BFloat16, float, int>(at::GenericPackedTensorAccessor<c10::BFloat16 const, 3ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16 const, 3ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16, 3ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16 const, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16 const, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16 const, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<float const, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<float const, 1ul, at::DefaultPtrTraits, int>, bool, float)', 'norm', 'NORM', 'PyTorch', None),
    ('void at::native::batch_norm_collect_statistics_kernel<at::native::Var, c10::BFloat16, c10::BFloat16, float, int>(at::GenericPackedTensorAccessor<c10::BFloat16 const, 3ul, at::RestrictPtrTraits, int>, float, float, at::GenericPackedTensorAccessor<float, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<float, 1ul, at::RestrictPtrTraits, int>)', 'norm', 'NORM', 'PyTorch', None),
    ('void at::native::batch_norm_transform_input_kernel<c10::BFloat16, c10::BFloat16, float, true, int>(at::GenericPackedTensorAccessor<c10::BFloat16 const, 3ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16, 3ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<std::conditional<true, float, c10::BFloat16>::type, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<std::conditional<true, float, c10::BFloat16>::type, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16 const, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16 const, 1ul, at::RestrictPtrTraits, int>, float)', 'norm', 'NORM', 'PyTorch', None),
    ('_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib', 'norm', 'NORM', 'aiter', 'bf16'),
    ('void at::native::(anonymous namespace)::max_pool_backward_nchw<c10::BFloat16, float>(c10::BFloat16 const*, long const*, int, long, long, long, int, int, int, int, int, int, int, int, int, int, c10::BFloat16*)', 'reduce', 'reduce', 'PyTorch', None),
    ('void at::native::(anonymous namespace)::max_pool_forward_nchw<c10::BFloat16>(int, c10::BFloat16 const*, long, long, long, int, int, int, int, int, int, int, int, int, int, c10::BFloat16*, long*)', 'reduce', 'reduce', 'PyTorch', None),
    ('void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4, 8> >(at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4, 8>)', 'reduce', 'reduce', 'PyTorch', None),
    ('void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4, 4>)', 'reduce', 'reduce', 'PyTorch', None),
    ('void rocprim::ROCPRIM_400200_NS::detail::trampoline_kernel<rocprim::ROCPRIM_400200_NS::detail::wrapped_scan_config<rocprim::ROCPRIM_400200_NS::default_config, long>, (rocprim::ROCPRIM_400200_NS::detail::target_arch)942, rocprim::ROCPRIM_400200_NS::detail::scan_impl<(rocprim::ROCPRIM_400200_NS::detail::lookback_scan_determinism)0, false, false, rocprim::ROCPRIM_400200_NS::default_config, long const*, long*, long, std::plus<long>, long>(void*, unsigned long&, long const*, long*, long, unsigned long, std::plus<long>, ihipStream_t*, bool)::{lambda(auto:1, auto:2)#1}::operator()<std::integral_constant<bool, false>, std::integral_constant<bool, true> >(std::integral_constant<bool, false>, std::integral_constant<bool, true>) const::{lambda(auto:1)#2}, rocprim::ROCPRIM_400200_NS::detail::default_config_selector>(rocprim::ROCPRIM_400200_NS::detail::scan_impl<(rocprim::ROCPRIM_400200_NS::detail::lookback_scan_determinism)0, false, false, rocprim::ROCPRIM_400200_NS::default_config, long const*, long*, long, std::plus<long>, long>(void*, unsigned long&, long const*, long*, long, unsigned long, std::plus<long>, ihipStream_t*, bool)::{lambda(auto:1, auto:2)#1}::operator()<std::integral_constant<bool, false>, std::integral_constant<bool, true> >(std::integral_constant<bool, false>, std::integral_constant<bool, true>) const::{lambda(auto:1)#2})', 'reduce', 'reduce', 'PyTorch', None),
    ('void rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, int, long, long, long, int, int, int)', 'rope', 'elementwise', 'SGLang', None),
    ('triton_poi_fused_0', 'triton_fused', 'triton', 'Triton', None),
    ('triton_poi_fused__unsafe_view_mul_silu_2', 'triton_fused', 'triton', 'Triton', None),
    ('triton_red_fused__unsafe_view_add_mean_mul_pow_rsqrt_1', 'triton_fused', 'triton', 'Triton', None),
]


def _case_id(runtime: str, index: int, case: tuple) -> str:
    return f"{runtime}-{index:02d}-{case[0][:40]}"


CASES = [
    pytest.param(*case, id=_case_id("cuda", i, case)) for i, case in enumerate(CUDA_CASES)
] + [
    pytest.param(*case, id=_case_id("rocm", i, case)) for i, case in enumerate(ROCM_CASES)
]


@pytest.mark.parametrize(("name", "kernel_type", "category", "library", "precision"), CASES)
def test_real_kernel_name_is_classified(db, name, kernel_type, category, library, precision) -> None:
    row = db.execute(
        "select kernel_type, kernel_category, library, kernel_precision from kernels where name = ? limit 1",
        [name],
    ).fetchone()
    assert row is not None, f"not in the test traces: {name[:120]}"
    assert row == (kernel_type, category, library, precision)


def test_cases_cover_both_runtimes_and_every_family() -> None:
    assert len(CUDA_CASES) >= 25 and len(ROCM_CASES) >= 25
    categories = {case[2] for case in CUDA_CASES + ROCM_CASES}
    assert {"GEMM", "SDPA", "comm", "triton", "memcpy", "memset", "MoE", "CONV", "NORM"} <= categories


def test_cases_are_distinct_names() -> None:
    names = [case[0] for case in CUDA_CASES + ROCM_CASES]
    assert len(names) == len(set(names))


def test_unknown_kernel_time_is_below_two_percent(db) -> None:
    total, unknown = db.execute(
        "select sum(dur_us), coalesce(sum(dur_us) filter (where kernel_type = 'unknown'), 0) from kernels"
    ).fetchone()
    assert total > 0
    assert unknown / total < 0.02, db.execute(
        "select distinct name from kernels where kernel_type = 'unknown' limit 20"
    ).fetchall()


def test_every_trace_has_under_two_percent_unknown_kernel_time(db) -> None:
    rows = db.execute(
        "select trace_id, sum(dur_us) filter (where kernel_type = 'unknown') / sum(dur_us) as share "
        "from kernels group by trace_id having share >= 0.02"
    ).fetchall()
    assert rows == []


def test_seed_uses_the_documented_vocabulary(db) -> None:
    rules = db.execute(
        "select rule_order, kernel_type, category, library, is_comm, precision from kernel_taxonomy"
    ).fetchall()
    assert len(rules) > 100
    for rule_order, kernel_type, category, library, is_comm, precision in rules:
        assert kernel_type in KERNEL_TYPES, rule_order
        assert category in CATEGORIES, rule_order
        assert library in LIBRARIES, rule_order
        assert precision in (None, "") or precision in PRECISIONS, rule_order
        assert is_comm == (kernel_type == "collective") == (category == "comm"), rule_order


def test_seed_patterns_compile_and_are_unique(db) -> None:
    patterns = [p for (p,) in db.execute("select pattern from kernel_taxonomy").fetchall()]
    assert len(patterns) == len(set(patterns))
    for pattern in patterns:
        db.execute("select regexp_matches('x', ?)", [pattern]).fetchone()


def test_nccl_and_rccl_kernels_are_communication(db) -> None:
    rows = db.execute(
        "select distinct name, kernel_type, kernel_category, gpu_bucket from kernels "
        "where regexp_matches(lower(name), 'nccl|rccl')"
    ).fetchall()
    assert len(rows) >= 2  # the B200 AllGather and the MI300X resnet RCCL kernel
    assert all(row[1:] == ("collective", "comm", "communication") for row in rows), rows


def test_memcpy_and_memset_events_take_runtime_rules(db) -> None:
    rows = db.execute(
        "select category, kernel_type, kernel_category, library, count(*) from kernels "
        "where category in ('gpu_memcpy', 'gpu_memset') group by all order by 1"
    ).fetchall()
    assert [row[:4] for row in rows] == [
        ("gpu_memcpy", "copy", "memcpy", "runtime"),
        ("gpu_memset", "fill", "memset", "runtime"),
    ]
