// servesim attention kernels: FP8-KV MLA decode variant 11 (the seesaw over thread-filled 16-bit
// stages; the kernel and its description in mla_fp8_seesaw.cuh). Launched by mla_decode_fp8
// (mla_fp8.cu) when mla_decode_fp8_set_variant(11) is set.
#include "attention/mla_fp8_seesaw.cuh"

namespace servesim::attn {

void launch_mla_fp8_seesaw(const MqaArgs& a, const uint8_t* cache_fp8, const MqaPlan& plan, int pf, cudaStream_t s) {
  static bool attr = false;
  if (!attr) {
    SS_CUDA(cudaFuncSetAttribute(fp8ss::mla_decode_fp8_seesaw_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, fp8ss::kSmem));
    attr = true;
  }
  fp8ss::mla_decode_fp8_seesaw_kernel<<<dim3((a.H + 63) / 64, plan.n_work), 256, fp8ss::kSmem, s>>>(a, cache_fp8, plan.work.p, pf);
  SS_LAUNCH_CHECK();
}

}  // namespace servesim::attn
