// servesim attention kernels: K3 gated-MLA prefill in MHA mode (model-facts.md 2.2): a chunk of N
// new tokens attends causally to a cached prefix of P tokens plus itself. K and V are the kv_b
// up-projections of the latents (one GEMM, timed in dense_proj_k3_mla), so the attention core is
// standard MHA with d_qk = 192 (128 nope + 64 un-rotated) and d_v = 128, 96 heads.
//   q   [N, H, 192] bf16          k [P+N, H, 192] bf16       v [P+N, H, 128] bf16
//   out [N, H, 128] bf16; query i (absolute position P+i) sees keys 0..P+i. scale 1/sqrt(192).
// FLOPs (causal, counted as executed work): 2*H*N*(P + (N+1)/2)*(192+128).
// Errors: std::invalid_argument on bad sizes.
#pragma once
#include "attention/attn_common.cuh"

namespace servesim::attn {

struct MhaPrefillArgs {
  const bf16 *q = nullptr, *k = nullptr, *v = nullptr;
  bf16* out = nullptr;
  int N = 0, P = 0, H = 0;
  float sm_scale = 0.07216878364870322f;  // 1/sqrt(192)
};
/// variant 0: 64 query rows per block (4 warps), 1: 128 query rows per block (8 warps) (both
/// mma.sync, FlashAttention-2 style); 2-4: sm_90a wgmma + TMA, 128 query rows x 128-key tiles, a
/// producer warpgroup and two consumer warpgroups (mla_prefill_wg.cu; need 16-byte aligned q/k/v):
/// 2 = GEMMs and softmax in sequence, 3 = softmax of S_j overlapping P_{j-1} V_{j-1} (FA3's
/// intra-warpgroup overlap), 4 = 3 plus the ping-pong of the two consumer warpgroups.
void mla_prefill(const MhaPrefillArgs& a, cudaStream_t s = 0, int variant = 4);  // 4: the default (issue 12)
void mla_prefill_wgmma(const MhaPrefillArgs& a, cudaStream_t s, int mode);  // mode = variant - 2
/// Table name of a variant: "bm64", "bm128", "wgmma_tma_bm128_bn128", "..._overlap", "..._pingpong".
const char* mla_prefill_variant_name(int variant);

}  // namespace servesim::attn
