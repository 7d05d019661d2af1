// servesim attention kernels: FP8-KV MLA decode variant 12 (variant 11's seesaw on 32-token tiles,
// refilled from a bulk-copy FP8 staging ring; the kernel and its description in mla_fp8_ring.cuh).
// Launched by mla_decode_fp8 (mla_fp8.cu) when mla_decode_fp8_set_variant(12) is set.
#include "attention/mla_fp8_ring.cuh"

namespace servesim::attn {

void launch_mla_fp8_ring(const MqaArgs& a, const uint8_t* cache_fp8, const MqaPlan& plan, int pf, cudaStream_t s) {
  static bool attr = false;
  if (!attr) {
    SS_CUDA(cudaFuncSetAttribute(fp8ring::mla_decode_fp8_ring_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, fp8ring::kSmem));
    attr = true;
  }
  fp8ring::mla_decode_fp8_ring_kernel<<<dim3((a.H + 63) / 64, plan.n_work), 256, fp8ring::kSmem, s>>>(a, cache_fp8, plan.work.p, pf);
  SS_LAUNCH_CHECK();
}

}  // namespace servesim::attn
