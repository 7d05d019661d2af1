// servesim attention kernels: DeepSeek V4 attention on Hopper, v4_attn variant 2 (wgmma; rows
// gathered by index from the FP8 pool of 584-B rows, dequantised to BF16 in shared memory):
// q [nq, H, 512] bf16, K = V = 512, H % 64 == 0.
// Part of mqa.cu's translation unit, not a standalone header: mqa.cu includes the kernel parts in
// their original order after defining kLog2e / kNegInf (one unit keeps the code cicc / ptxas
// generate for every kernel exactly as before the file was split; see mqa.cu).
#pragma once
#include "attention/hopper.cuh"
#include "attention/mqa.cuh"
#include "attention/wg_store.cuh"

namespace servesim::attn {
namespace {

// ---------------------------------------------------------------------------------------------
// V4 attention on Hopper (issue 12; the port of mla_decode_wgmma_kernel to gathered FP8 rows).
// Block = (64-head group, work item), 256 threads = two warpgroups. Shared memory (1024-B aligned):
// Q [64 x 512] bf16 (64 KB, swizzled, loaded once), one BF16 KV tile [64 x 512] (64 KB, swizzled),
// two raw stages of 64 gathered 584-B rows (cp.async 8-B copies, zero-filled for index -1), P
// [64 x 64] bf16, flags, alpha / m / l. Per 64-row tile j: all threads gather tile j+1 into the
// other raw stage, wait for tile j, dequantise it (E4M3 x UE8M0 -> BF16, RoPE part copied) into the
// KV tile; warpgroup 0 computes S = Q K^T (32 x wgmma m64n64k16), masks rows with index -1, online
// softmax, P; both warpgroups rescale and O[:, 256 wg ..] += P V (4 x wgmma m64n256k16, V = K).
// ---------------------------------------------------------------------------------------------
namespace v4k {
constexpr int kQ = 64 * 512 * 2;              // 65536
constexpr int kOffKV = kQ;
constexpr int kOffRaw = kOffKV + 64 * 512 * 2;  // 131072
constexpr int kRaw = 64 * kV4RowBytes;         // 37376
constexpr int kOffP = kOffRaw + 2 * kRaw;      // 205824 (1024-aligned)
constexpr int kOffF = kOffP + 64 * 64 * 2;     // alpha[64], m[64], l[64]
constexpr int kOffFlag = kOffF + 1024;         // [2][64] int
constexpr int kSmem = kOffFlag + 512 + 1024;   // + slack for 1024-B alignment
static_assert(kOffP % 1024 == 0, "P tile alignment");
static_assert(kSmem <= 232448, "shared memory per block");
}  // namespace v4k

__global__ void __launch_bounds__(256, 1) v4_attn_wgmma_kernel(MqaArgs a, const int4* __restrict__ work) {
  using namespace sm90;
  using namespace v4k;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  const uint32_t sb = saddr(smem);
  uint8_t* sKV = smem + kOffKV;
  uint8_t* sRaw = smem + kOffRaw;
  uint8_t* sP = smem + kOffP;
  float* sAlpha = reinterpret_cast<float*>(smem + kOffF);
  float* sM = sAlpha + 64;
  float* sL = sM + 64;
  int* sFlag = reinterpret_cast<int*>(smem + kOffFlag);

  const int4 wk = work[blockIdx.y];
  const int qi = wk.x, rb = wk.y, re = wk.z, slot = wk.w;
  const int head0 = blockIdx.x * 64, H = a.H;
  const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const int rA = 16 * w4 + g, rB = rA + 8;
  const int ntiles = (re - rb + 63) / 64;
  const int* idx = a.indices + static_cast<size_t>(qi) * a.idx_ld;

  auto gather = [&](int j, int st) {
    constexpr int CH = kV4RowBytes / 8;  // 73
    uint8_t* dst = sRaw + st * kRaw;
    const int r0 = rb + 64 * j;
    for (int u = tid; u < 64 * CH; u += 256) {
      const int row = u / CH, ch = u - row * CH;
      const int r = r0 + row;
      const int id = r < re ? __ldg(idx + r) : -1;
      const bool ok = id >= 0;
      cp_async8(dst + row * kV4RowBytes + ch * 8, a.pool + static_cast<size_t>(ok ? id : 0) * kV4RowBytes + ch * 8, ok);
      if (ch == 0) sFlag[st * 64 + row] = ok;
    }
  };
  {  // Q tile (padded heads read as zeros), swizzled
    const bf16* qsrc = a.q + (static_cast<size_t>(qi) * H + head0) * 512;
    for (int u = tid; u < 64 * 64; u += 256) {
      const int r = u >> 6, ch = u & 63;
      const bool ok = head0 + r < H;
      cp_async16(smem + (ch >> 3) * 8192 + r * 128 + (((ch & 7) ^ (r & 7)) << 4),
                 qsrc + static_cast<size_t>(ok ? r : 0) * 512 + ch * 8, ok);
    }
  }
  if (ntiles > 0) gather(0, 0);
  cp_async_commit();

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float m0 = kNegInf, m1 = kNegInf, l0 = 0.f, l1 = 0.f;
  const float sl2 = a.sm_scale * kLog2e;

  for (int j = 0; j < ntiles; ++j) {
    const int st = j & 1;
    if (j + 1 < ntiles) gather(j + 1, st ^ 1);  // raw stage st^1 was dequantised in iteration j-1
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();  // tile j's raw rows and flags (and Q) are in; the KV tile is free (end of j-1)
    {
      const uint8_t* rs = sRaw + st * kRaw;
      for (int u = tid; u < 64 * 64; u += 256) {
        const int row = u >> 6, c = u & 63;
        const uint8_t* rr = rs + row * kV4RowBytes;
        uint4 v;
        if (c < 56) {
          const uint2 x = *reinterpret_cast<const uint2*>(rr + c * 8);
          const float sc = ue8m0_to_float(rr[kV4Nope + 2 * kV4Rope + (c >> 3)]);
          const float2 f0 = e4m3x2_to_float2(static_cast<uint16_t>(x.x & 0xffff));
          const float2 f1 = e4m3x2_to_float2(static_cast<uint16_t>(x.x >> 16));
          const float2 f2 = e4m3x2_to_float2(static_cast<uint16_t>(x.y & 0xffff));
          const float2 f3 = e4m3x2_to_float2(static_cast<uint16_t>(x.y >> 16));
          v.x = pack_bf16(f0.x * sc, f0.y * sc);
          v.y = pack_bf16(f1.x * sc, f1.y * sc);
          v.z = pack_bf16(f2.x * sc, f2.y * sc);
          v.w = pack_bf16(f3.x * sc, f3.y * sc);
        } else {
          const uint2 v0 = *reinterpret_cast<const uint2*>(rr + kV4Nope + (c - 56) * 16);
          const uint2 v1 = *reinterpret_cast<const uint2*>(rr + kV4Nope + (c - 56) * 16 + 8);
          v = make_uint4(v0.x, v0.y, v1.x, v1.y);
        }
        *reinterpret_cast<uint4*>(sKV + (c >> 3) * 8192 + row * 128 + (((c & 7) ^ (row & 7)) << 4)) = v;
      }
    }
    fence_proxy_async();
    __syncthreads();
    const uint32_t kv = sb + kOffKV;
    float alA, alB;
    if (wg == 0) {
      float s[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) s[i] = 0.f;
      fence_regs(s);
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < 32; ++ks) {
        const uint32_t off = (ks >> 2) * 8192 + (ks & 3) * 32;
        wgmma_m64n64k16_ss(s, sw128_desc(sb + off, 16, 1024), sw128_desc(kv + off, 16, 1024), ks > 0);
      }
      wg_commit();
      wg_wait<0>();
      fence_regs(s);
      float mxA = kNegInf, mxB = kNegInf;
#pragma unroll
      for (int jj = 0; jj < 8; ++jj)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const bool v = sFlag[st * 64 + 8 * jj + 2 * t4 + e] != 0;
          s[4 * jj + e] = v ? s[4 * jj + e] * sl2 : kNegInf;
          s[4 * jj + 2 + e] = v ? s[4 * jj + 2 + e] * sl2 : kNegInf;
          mxA = fmaxf(mxA, s[4 * jj + e]);
          mxB = fmaxf(mxB, s[4 * jj + 2 + e]);
        }
      mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
      mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
      mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
      mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
      const float mnA = fmaxf(m0, mxA), mnB = fmaxf(m1, mxB);
      // a tile of only -1 rows keeps m = -inf: its p are exp2(-inf - -inf) -> guard with the max
      const float bA = mnA == kNegInf ? 0.f : mnA, bB = mnB == kNegInf ? 0.f : mnB;
      alA = (m0 == kNegInf) ? 0.f : fast_exp2(m0 - mnA);
      alB = (m1 == kNegInf) ? 0.f : fast_exp2(m1 - mnB);
      float sumA = 0.f, sumB = 0.f;
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        const float p0 = fast_exp2(s[4 * jj] - bA), p1 = fast_exp2(s[4 * jj + 1] - bA);
        const float p2 = fast_exp2(s[4 * jj + 2] - bB), p3 = fast_exp2(s[4 * jj + 3] - bB);
        sumA += p0 + p1;
        sumB += p2 + p3;
        *reinterpret_cast<uint32_t*>(sP + rA * 128 + ((jj ^ (rA & 7)) << 4) + 4 * t4) = pack_bf16(p0, p1);
        *reinterpret_cast<uint32_t*>(sP + rB * 128 + ((jj ^ (rB & 7)) << 4) + 4 * t4) = pack_bf16(p2, p3);
      }
      l0 = l0 * alA + sumA;
      l1 = l1 * alB + sumB;
      m0 = mnA;
      m1 = mnB;
      if (t4 == 0) {
        sAlpha[rA] = alA;
        sAlpha[rB] = alB;
      }
      fence_proxy_async();
      named_bar_sync(1, 256);
    } else {
      named_bar_sync(1, 256);
      alA = sAlpha[rA];
      alB = sAlpha[rB];
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      o[4 * i] *= alA;
      o[4 * i + 1] *= alA;
      o[4 * i + 2] *= alB;
      o[4 * i + 3] *= alB;
    }
    fence_regs(o);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      wgmma_m64n256k16_ss_tb(o, sw128_desc(sb + kOffP + kk * 32, 16, 1024),
                             sw128_desc(kv + wg * 4 * 8192 + kk * 2048, 8192, 1024), 1);
    wg_commit();
    wg_wait<0>();
    fence_regs(o);
    named_bar_sync(2, 256);  // both halves of P V done: the KV tile, P and alpha may be overwritten
  }
  cp_async_wait<0>();

  if (wg == 0) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    if (t4 == 0) {
      sM[rA] = m0; sM[rB] = m1;
      sL[rA] = l0; sL[rB] = l1;
    }
  }
  __syncthreads();
  m0 = sM[rA]; m1 = sM[rB];
  l0 = sL[rA]; l1 = sL[rB];
  wg_store::store_rows(a, o, m0, m1, l0, l1, head0, H, rA, rB, wg, t4, qi, slot);
}

}  // namespace
}  // namespace servesim::attn
