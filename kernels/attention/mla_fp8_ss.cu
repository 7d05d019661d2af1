// servesim attention kernels: FP8-KV MLA decode variant 11 (the seesaw over thread-filled 16-bit
// stages; the kernel and its description in mla_fp8_seesaw.cuh). Launched by mla_decode_fp8
// (mla_fp8.cu) when mla_decode_fp8_set_variant(11) is set. SERVESIM_MLA_FP8_EARLY (experiments):
// the kernel's kEarly mask, one of 0 (the default: every refill loads at its release; the
// fastest in fp8kv3 call 4), 1, 3, 5, 9, 15, 16, 17, 32, 33; 64 (fp8kv4): 0 with the shared-memory pointers kept in
// the shared address space (ld/st.shared instead of generic for the exchange rows and P stores).
#include "attention/mla_fp8_seesaw.cuh"

#include <cstdlib>
#include <stdexcept>

namespace servesim::attn {

namespace {
template <int E>
void launch_e(const MqaArgs& a, const uint8_t* cache_fp8, const MqaPlan& plan, int pf, cudaStream_t s) {
  static bool attr = false;
  if (!attr) {
    SS_CUDA(cudaFuncSetAttribute(fp8ss::mla_decode_fp8_seesaw_kernel<E>, cudaFuncAttributeMaxDynamicSharedMemorySize, fp8ss::kSmem));
    attr = true;
  }
  fp8ss::mla_decode_fp8_seesaw_kernel<E><<<dim3((a.H + 63) / 64, plan.n_work), 256, fp8ss::kSmem, s>>>(a, cache_fp8, plan.work.p, pf);
  SS_LAUNCH_CHECK();
}
}  // namespace

void launch_mla_fp8_seesaw(const MqaArgs& a, const uint8_t* cache_fp8, const MqaPlan& plan, int pf, cudaStream_t s) {
  static const int early = [] {
    const char* e = std::getenv("SERVESIM_MLA_FP8_EARLY");
    return e ? std::atoi(e) : 0;
  }();
  switch (early) {
    case 1: launch_e<1>(a, cache_fp8, plan, pf, s); break;
    case 3: launch_e<3>(a, cache_fp8, plan, pf, s); break;
    case 5: launch_e<5>(a, cache_fp8, plan, pf, s); break;
    case 9: launch_e<9>(a, cache_fp8, plan, pf, s); break;
    case 15: launch_e<15>(a, cache_fp8, plan, pf, s); break;
    case 17: launch_e<17>(a, cache_fp8, plan, pf, s); break;
    case 33: launch_e<33>(a, cache_fp8, plan, pf, s); break;
    case 0: launch_e<0>(a, cache_fp8, plan, pf, s); break;
    case 16: launch_e<16>(a, cache_fp8, plan, pf, s); break;
    case 32: launch_e<32>(a, cache_fp8, plan, pf, s); break;
    case 64: launch_e<64>(a, cache_fp8, plan, pf, s); break;  // kEarly 0 with shared-space pointers (fp8kv4)
    default: throw std::invalid_argument("SERVESIM_MLA_FP8_EARLY: 0, 1, 3, 5, 9, 15, 16, 17, 32, 33 or 64");
  }
}

}  // namespace servesim::attn
