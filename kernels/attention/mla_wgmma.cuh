// servesim attention kernels: MLA decode on Hopper, variant 0 (wgmma, TMA page loads):
// q_lat [B, H, 576] bf16 over the paged BF16 latent cache, heads in groups of 64.
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
// MLA decode on Hopper (variant 0). Block = (64-head group, work item), 256 threads = two
// warpgroups. Shared memory (1024-B aligned, all operand tiles in the 128-B swizzled layout of
// hopper.cuh): Q [64 x 576] (72 KB, loaded once), two 64-token KV stages (72 KB each: one page,
// 9 TMA boxes of 64 x 64), P [64 x 64] bf16 (8 KB), per-row scale / final m, l.
// Per 64-token tile j: warpgroup 0 computes S = Q K^T (36 x wgmma m64n64k16), masks, runs the
// online softmax, writes P and the rescale factors; then both warpgroups rescale and accumulate
// O[:, 256*wg .. +256] += P V (4 x wgmma m64n256k16, V = the first 512 columns of the same tile,
// read N-major from the same smem). After both are done, thread 0 refills the stage with tile j+2.
// ---------------------------------------------------------------------------------------------
namespace wgk {
constexpr int kTile = 64 * 576 * 2;  // 73728 B: one 64-token page of the latent cache
constexpr int kOffKV = kTile;        // Q occupies [0, kTile)
constexpr int kOffP = 3 * kTile;
constexpr int kOffF = kOffP + 64 * 64 * 2;  // alpha[64], m[64], l[64]
constexpr int kOffBar = kOffF + 1024;
constexpr int kSmem = kOffBar + 64 + 1024;  // + slack for 1024-B alignment
static_assert(kSmem <= 232448, "shared memory per block");
}  // namespace wgk

__global__ void __launch_bounds__(256, 1)
    mla_decode_wgmma_kernel(const __grid_constant__ CUtensorMap tmap, MqaArgs a, const int4* __restrict__ work) {
  using namespace sm90;
  using namespace wgk;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  const uint32_t sb = saddr(smem);
  uint8_t* sKV = smem + kOffKV;
  uint8_t* sP = smem + kOffP;
  float* sAlpha = reinterpret_cast<float*>(smem + kOffF);
  float* sM = sAlpha + 64;
  float* sL = sM + 64;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kOffBar);

  const int4 wk = work[blockIdx.y];
  const int qi = wk.x, rb = wk.y, re = wk.z, slot = wk.w;
  const int head0 = blockIdx.x * 64, H = a.H;
  const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const int rA = 16 * w4 + g, rB = rA + 8;
  const int ntiles = (re - rb + 63) / 64;
  const int* bt = a.block_table + static_cast<size_t>(qi) * a.max_pages;
  const int ps = a.page_size;

  auto issue = [&](int j, int st) {
    const int tok = rb + 64 * j;
    const int row = bt[tok / ps] * ps + tok % ps;
    mbar_expect_tx(&full[st], kTile);
#pragma unroll
    for (int cb = 0; cb < 9; ++cb) tma_load_2d(sKV + st * kTile + cb * 8192, &tmap, &full[st], cb * 64, row);
  };
  if (tid == 0) {
    mbar_init(&full[0], 1);
    mbar_init(&full[1], 1);
    mbar_fence_init();
  }
  __syncthreads();
  if (tid == 0) {
    if (ntiles > 0) issue(0, 0);
    if (ntiles > 1) issue(1, 1);
  }
  {  // Q tile (padded heads read as zeros), swizzled like the TMA tiles
    const bf16* qsrc = a.q + (static_cast<size_t>(qi) * H + head0) * 576;
    for (int u = tid; u < 64 * 72; u += 256) {
      const int r = u / 72, ch = u % 72;
      const bool ok = head0 + r < H;
      cp_async16(smem + (ch >> 3) * 8192 + r * 128 + (((ch & 7) ^ (r & 7)) << 4),
                 qsrc + static_cast<size_t>(ok ? r : 0) * 576 + ch * 8, ok);
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
  }

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float m0 = kNegInf, m1 = kNegInf, l0 = 0.f, l1 = 0.f;
  const float sl2 = a.sm_scale * kLog2e;

  for (int j = 0; j < ntiles; ++j) {
    const int st = j & 1;
    const uint32_t kv = sb + kOffKV + st * kTile;
    const int valid = min(64, re - rb - 64 * j);
    mbar_wait(&full[st], (j >> 1) & 1);
    if (valid < 64) {  // rows past the context: zeros (P is 0 there, but 0 * NaN would not be)
      for (int u = tid; u < (64 - valid) * 72; u += 256) {
        const int r = valid + u / 72, rem = u % 72;
        *reinterpret_cast<uint4*>(sKV + st * kTile + (rem >> 3) * 8192 + r * 128 + (rem & 7) * 16) = make_uint4(0, 0, 0, 0);
      }
      fence_proxy_async();
      named_bar_sync(3, 256);
    }
    float alA, alB;
    if (wg == 0) {
      float s[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) s[i] = 0.f;
      fence_regs(s);
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < 36; ++ks) {
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
          const bool v = 8 * jj + 2 * t4 + e < valid;
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
      alA = (m0 == kNegInf) ? 0.f : fast_exp2(m0 - mnA);
      alB = (m1 == kNegInf) ? 0.f : fast_exp2(m1 - mnB);
      float sumA = 0.f, sumB = 0.f;
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        const float p0 = fast_exp2(s[4 * jj] - mnA), p1 = fast_exp2(s[4 * jj + 1] - mnA);
        const float p2 = fast_exp2(s[4 * jj + 2] - mnB), p3 = fast_exp2(s[4 * jj + 3] - mnB);
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
    named_bar_sync(2, 256);  // both halves of P V done: the stage, P and alpha may be overwritten
    if (tid == 0 && j + 2 < ntiles) issue(j + 2, st);
  }

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
