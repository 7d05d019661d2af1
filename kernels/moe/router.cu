// MoE routers: K3 sigmoid + correction bias top-16 of 896, DSV4 sqrt(softplus) top-6 of 384/256,
// DSV4 hash routing. One warp per token; logits are fp32 [T, E] from the gate GEMM.
#include "moe/moe.cuh"
#include "moe/device_util.cuh"
#include "common/cuda_check.cuh"

#include <cmath>
#include <stdexcept>

namespace servesim::kernels::moe {

namespace {

__device__ __forceinline__ float score_of(ScoreFn fn, float x) {
  if (fn == ScoreFn::kSigmoid) return 1.f / (1.f + expf(-x));
  const float sp = fmaxf(x, 0.f) + log1pf(expf(-fabsf(x)));  // softplus, overflow-safe
  return sqrtf(sp);
}

/// VPL = values per lane (E <= 32*VPL); expert e lives in lane e % 32, slot e / 32.
template <int VPL>
__global__ void topk_kernel(ScoreFn fn, const float* __restrict__ logits, const float* __restrict__ bias, int T,
                            int E, int k, float route_scale, int* __restrict__ ids, float* __restrict__ weights) {
  const int lane = threadIdx.x & 31;
  const int t = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (t >= T) return;
  const float* lg = logits + static_cast<size_t>(t) * E;
  float sc[VPL], sel[VPL];
#pragma unroll
  for (int i = 0; i < VPL; ++i) {
    const int e = lane + 32 * i;
    if (e < E) {
      sc[i] = score_of(fn, lg[e]);
      sel[i] = sc[i] + (bias ? bias[e] : 0.f);
    } else {
      sc[i] = 0.f;
      sel[i] = -INFINITY;
    }
  }
  int my_id = -1;
  float my_score = 0.f;
  for (int r = 0; r < k; ++r) {
    float best = -INFINITY;
    int bi = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < VPL; ++i)
      if (sel[i] > best) { best = sel[i]; bi = lane + 32 * i; }  // ascending ids: ties keep the lower
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ov > best || (ov == best && oi < bi)) { best = ov; bi = oi; }
    }
    const int wl = bi & 31, ws = bi >> 5;
    float s_here = 0.f;
#pragma unroll
    for (int i = 0; i < VPL; ++i)
      if (i == ws) {
        s_here = sc[i];
        if (lane == wl) sel[i] = -INFINITY;
      }
    const float s_win = __shfl_sync(0xffffffffu, s_here, wl);
    if (lane == r) { my_id = bi; my_score = s_win; }
  }
  const float sum = warp_sum(lane < k ? my_score : 0.f);
  if (lane < k) {
    ids[static_cast<size_t>(t) * k + lane] = my_id;
    weights[static_cast<size_t>(t) * k + lane] = my_score / sum * route_scale;
  }
}

__global__ void hash_kernel(const float* __restrict__ logits, const int* __restrict__ token_ids,
                            const int* __restrict__ tid2eid, int T, int E, int k, float route_scale,
                            int* __restrict__ ids, float* __restrict__ weights) {
  const int lane = threadIdx.x & 31;
  const int t = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (t >= T) return;
  int id = 0;
  float s = 0.f;
  if (lane < k) {
    id = tid2eid[static_cast<size_t>(token_ids[t]) * k + lane];
    s = score_of(ScoreFn::kSqrtSoftplus, logits[static_cast<size_t>(t) * E + id]);
  }
  const float sum = warp_sum(s);
  if (lane < k) {
    ids[static_cast<size_t>(t) * k + lane] = id;
    weights[static_cast<size_t>(t) * k + lane] = s / sum * route_scale;
  }
}

}  // namespace

void router_topk(ScoreFn fn, const float* logits, const float* bias, int T, int E, int k, float route_scale,
                 int* ids, float* weights, cudaStream_t stream) {
  if (k < 1 || k > 32 || E < k || E > 1024) throw std::invalid_argument("router_topk: need 1 <= k <= 32, k <= E <= 1024");
  if (T <= 0) return;
  const int warps = 8, blocks = (T + warps - 1) / warps;
  const int vpl = (E + 31) / 32;
#define SS_TOPK(V) topk_kernel<V><<<blocks, 32 * warps, 0, stream>>>(fn, logits, bias, T, E, k, route_scale, ids, weights)
  if (vpl <= 4) SS_TOPK(4);
  else if (vpl <= 8) SS_TOPK(8);
  else if (vpl <= 12) SS_TOPK(12);
  else if (vpl <= 16) SS_TOPK(16);
  else if (vpl <= 28) SS_TOPK(28);
  else SS_TOPK(32);
#undef SS_TOPK
  SS_LAUNCH_CHECK();
}

void router_hash(const float* logits, const int* token_ids, const int* tid2eid, int T, int E, int k,
                 float route_scale, int* ids, float* weights, cudaStream_t stream) {
  if (k < 1 || k > 32) throw std::invalid_argument("router_hash: need 1 <= k <= 32");
  if (T <= 0) return;
  const int warps = 8;
  hash_kernel<<<(T + warps - 1) / warps, 32 * warps, 0, stream>>>(logits, token_ids, tid2eid, T, E, k, route_scale,
                                                                 ids, weights);
  SS_LAUNCH_CHECK();
}

}  // namespace servesim::kernels::moe
