// servesim attention kernels: MLA decode on Hopper, variant 4 ("seesaw"), and namespace wgs: its
// shared-memory layout and the S / P V GEMM, tail and softmax helpers that variants 5 and 10-12
// (mla_seesaw_early.cuh, mla_seesaw_rs.cuh) also use.
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
// MLA decode on Hopper, variant 4 ("seesaw", issue 12; the two-warpgroup schedule FlashMLA's
// 2025-04 deep-dive describes, written here on the helpers of hopper.cuh). Block = (64-head group,
// work item), 256 threads. Tiles are taken in pairs (K0 = tile 2i in stage 0, K1 = tile 2i+1 in
// stage 1, one 64-token page each, 9 column blocks of 64 x 64 with one mbarrier per block).
// Warpgroup 0 owns O[:, 0:256] and computes S0 = Q K0^T, warpgroup 1 owns O[:, 256:512] and
// computes S1 = Q K1^T, concurrently. Online softmax split over the pair (m = running max):
//   WG0: m0' = max(m, rowmax S0), c0 = 2^(m - m0'), P0 = 2^(S0 - m0'); O_L = c0 O_L + P0 V0L
//   WG1: m1' = max(m0', rowmax S1), c1 = 2^(m0' - m1'), P1 = 2^(S1 - m1');
//        O_R = c0 c1 O_R + P1 V1R + (c1 P0) V0R
//   WG0: O_L = c1 O_L + P1 V1L
// so each warpgroup's softmax runs while the other's GEMMs use the tensor cores. P0 / P1 (bf16,
// 64 x 64) are written over column block 8 (the RoPE part, read only by S) of their own stage.
// Stage release is per half: K0 blocks 0-3 go back to TMA after P0 V0L (WG0), blocks 4-8 after
// c1P0 V0R (WG1); K1 blocks 0-3 and 8 after P1 V1L (WG0), blocks 4-7 after P1 V1R (WG1); the next
// pair's S GEMMs wait per column block, so they start while the rest of their page is in flight.
// Shared memory: Q 72 KB + 2 stages x 72 KB + scale / max exchange rows + 18 mbarriers.
// ---------------------------------------------------------------------------------------------
namespace wgs {
constexpr int kTile = 64 * 576 * 2;  // 73728 B
constexpr int kOffK = kTile;         // Q in [0, kTile), stage st at kOffK + st * kTile
constexpr int kOffF = 3 * kTile;     // floats: sc0[64], m0[64], sc1[64], m1[64], lL[64], lR[64]
constexpr int kOffBar = kOffF + 6 * 64 * 4;
constexpr int kSmem = kOffBar + 22 * 8 + 1024;  // + slack for 1024-B alignment (22 barriers: kept from the removed variant 6)
static_assert(kSmem <= 232448, "shared memory per block");

using sm90::mbar_wait_uniform;  // hopper.cuh

// S (+)= Q[:, 64 cb .. ] K[:, 64 cb ..]^T over column blocks [B0, B1) of stage `st`, each block
// waited on its own mbarrier (parity `par`); the first wgmma of block 0 overwrites S.
// FIRST: the column block whose first wgmma overwrites S (the first one issued); kW: that wgmma
// does not read S at all (write-only operands, so S's old registers are dead before it).
template <int B0, int B1, int FIRST = 0, bool kW = false>
__device__ __forceinline__ void s_gemm(float (&s)[32], uint32_t sq, uint32_t kv, uint64_t* bars, uint32_t par) {
  using namespace sm90;
#pragma unroll
  for (int cb = B0; cb < B1; ++cb) {
    mbar_wait_uniform(&bars[cb], par);
    wg_fence();  // as CUTLASS's mainloops: an explicit fence after each wait (else ptxas injects one)
#pragma unroll
    for (int k4 = 0; k4 < 4; ++k4) {
      const uint32_t off = cb * 8192 + k4 * 32;
      if (kW && cb == FIRST && k4 == 0)
        wgmma_m64n64k16_ss_w(s, sw128_desc(sq + off, 16, 1024), sw128_desc(kv + off, 16, 1024));
      else
        wgmma_m64n64k16_ss(s, sw128_desc(sq + off, 16, 1024), sw128_desc(kv + off, 16, 1024), (cb != FIRST || k4 > 0) ? 1 : 0);
    }
  }
}
// O_half (+)= P V_half: P [64 x 64] bf16 at column block 8 of the stage, V = column blocks [4h, 4h+4).
__device__ __forceinline__ void pv_gemm(float (&o)[128], uint32_t kv, int h) {
  using namespace sm90;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    wgmma_m64n256k16_ss_tb(o, sw128_desc(kv + 8 * 8192 + kk * 32, 16, 1024), sw128_desc(kv + h * 4 * 8192 + kk * 2048, 8192, 1024), 1);
}
// Rows [valid, 64) of column blocks [c0, c1) of a stage -> 0 (a page tail past the context may hold
// NaN; P is 0 there but 0 * NaN is not), by the 128 threads of one warpgroup.
__device__ __forceinline__ void zero_tail(uint8_t* stage, int valid, int c0, int c1, int tw) {
  const int nb = c1 - c0;
  for (int u = tw; u < (64 - valid) * 8 * nb; u += 128) {
    const int r = valid + u / (8 * nb), rem = u % (8 * nb);
    *reinterpret_cast<uint4*>(stage + (c0 + rem / 8) * 8192 + r * 128 + (rem % 8) * 16) = make_uint4(0, 0, 0, 0);
  }
}
// bf16(f * s) -> the swizzled P tile (K-major A operand) at `sp`, rows rA / rB of this thread.
__device__ __forceinline__ void store_p(uint8_t* sp, const float (&s)[32], float fA, float fB, int rA, int rB, int t4) {
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    *reinterpret_cast<uint32_t*>(sp + rA * 128 + ((jj ^ (rA & 7)) << 4) + 4 * t4) = pack_bf16(s[4 * jj] * fA, s[4 * jj + 1] * fA);
    *reinterpret_cast<uint32_t*>(sp + rB * 128 + ((jj ^ (rB & 7)) << 4) + 4 * t4) = pack_bf16(s[4 * jj + 2] * fB, s[4 * jj + 3] * fB);
  }
}
// Masked, log2-scaled S -> P = 2^(S - m_new) in place; returns the row maxima of this tile through
// mxA / mxB (reduced over the quad) and the partial row sums through sumA / sumB.
__device__ __forceinline__ void tile_max(float (&s)[32], int valid, float sl2, int t4, float& mxA, float& mxB) {
  mxA = kNegInf;
  mxB = kNegInf;
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
}
__device__ __forceinline__ void tile_exp(float (&s)[32], float mnA, float mnB, float& sumA, float& sumB) {
  sumA = 0.f;
  sumB = 0.f;
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    s[4 * jj] = fast_exp2(s[4 * jj] - mnA);
    s[4 * jj + 1] = fast_exp2(s[4 * jj + 1] - mnA);
    s[4 * jj + 2] = fast_exp2(s[4 * jj + 2] - mnB);
    s[4 * jj + 3] = fast_exp2(s[4 * jj + 3] - mnB);
    sumA += s[4 * jj] + s[4 * jj + 1];
    sumB += s[4 * jj + 2] + s[4 * jj + 3];
  }
}
}  // namespace wgs

// (Variants 6-9, the tenth session's experiments on this kernel -- 2-CTA multicast, the S1 block order
// 4-7, 0-3, 8, an L2 prefetch, block-table entries loaded a pair ahead -- were removed in the eleventh
// session; their code is in git history before that session's commit, their numbers in NOTES.md.)
__global__ void __launch_bounds__(256, 1)
    mla_decode_seesaw_kernel(const __grid_constant__ CUtensorMap tmap, MqaArgs a, const int4* __restrict__ work, int pf) {
  using namespace sm90;
  using namespace wgs;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  const uint32_t sb = saddr(smem);
  float* sSc0 = reinterpret_cast<float*>(smem + kOffF);
  float* sM0 = sSc0 + 64;
  float* sSc1 = sM0 + 64;
  float* sM1 = sSc1 + 64;
  float* sLL = sM1 + 64;
  float* sLR = sLL + 64;
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + kOffBar);  // [stage * 9 + column block]

  const int4 wk = work[blockIdx.y];
  const int qi = wk.x, rb = wk.y, re = wk.z, slot = wk.w;
  const int head0 = blockIdx.x * 64, H = a.H;
  const int tid = threadIdx.x, wg = tid >> 7, tw = tid & 127, lane = tid & 31, w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const int rA = 16 * w4 + g, rB = rA + 8;
  const int ntiles = (re - rb + 63) / 64;
  const int npairs = (ntiles + 1) / 2;
  const int* bt = a.block_table + static_cast<size_t>(qi) * a.max_pages;
  const int ps = a.page_size;
  uint8_t* stg[2] = {smem + kOffK, smem + kOffK + kTile};
  const uint32_t kv0 = sb + kOffK, kv1 = sb + kOffK + kTile;

  // TMA of tile j's column blocks [c0, c1) into stage st (one thread)
  auto issue = [&](int j, int st, int c0, int c1) {
    if (pf < 0 && j >= 2) {  // diagnostic (SERVESIM_MLA_NOLOAD=1): no page reload, the
      for (int cb = c0; cb < c1; ++cb) mbar_arrive(&bar[st * 9 + cb]);  // stage keeps tile 0 / 1
      return;
    }
    const int tok = rb + 64 * j;
    const int row = bt[tok / ps] * ps + tok % ps;
    for (int cb = c0; cb < c1; ++cb) {
      mbar_expect_tx(&bar[st * 9 + cb], 8192);
      tma_load_2d(stg[st] + cb * 8192, &tmap, &bar[st * 9 + cb], cb * 64, row);
    }
  };
  if (tid == 0) {
    for (int i = 0; i < 18; ++i) mbar_init(&bar[i], 1);
    mbar_fence_init();
  }
  __syncthreads();
  if (tid == 0) {
    if (ntiles > 0) issue(0, 0, 0, 9);
    if (ntiles > 1) issue(1, 1, 0, 9);
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
  float s[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) s[i] = 0.f;
  float mA = kNegInf, mB = kNegInf, lA = 0.f, lB = 0.f;
  const float sl2 = a.sm_scale * kLog2e;

  if (wg == 0) {
    // ---------------- warpgroup 0: S0, softmax 0, O_L ----------------
    if (ntiles > 0) {
      fence_regs(s);
      wg_fence();
      s_gemm<0, 9>(s, sb, kv0, bar, 0);
      wg_commit();
      wg_wait<0>();
      fence_regs(s);
    }
    for (int i = 0; i < npairs; ++i) {
      const int j0 = 2 * i, j1 = j0 + 1;
      const bool have1 = j1 < ntiles, next0 = j0 + 2 < ntiles, next1 = j1 + 2 < ntiles;
      const uint32_t par = i & 1;
      const int valid0 = min(64, re - rb - 64 * j0);
      float mxA, mxB, sumA, sumB;
      tile_max(s, valid0, sl2, t4, mxA, mxB);
      const float mnA = fmaxf(mA, mxA), mnB = fmaxf(mB, mxB);
      const float c0A = (mA == kNegInf) ? 0.f : fast_exp2(mA - mnA), c0B = (mB == kNegInf) ? 0.f : fast_exp2(mB - mnB);
      tile_exp(s, mnA, mnB, sumA, sumB);
      lA = lA * c0A + sumA;
      lB = lB * c0B + sumB;
      if (t4 == 0) {
        sSc0[rA] = c0A; sSc0[rB] = c0B;
        sM0[rA] = mnA; sM0[rB] = mnB;
      }
      named_bar_sync(5, 128);  // every warp's S0 wgmma has read column block 8
      store_p(stg[0] + 8 * 8192, s, 1.f, 1.f, rA, rB, t4);
      if (valid0 < 64) zero_tail(stg[0], valid0, 0, 4, tw);
      fence_proxy_async();
      named_bar_sync(5, 128);
      named_bar_arrive(1, 256);  // c0 and m0' ready for warpgroup 1
#pragma unroll
      for (int q = 0; q < 32; ++q) {
        o[4 * q] *= c0A; o[4 * q + 1] *= c0A; o[4 * q + 2] *= c0B; o[4 * q + 3] *= c0B;
      }
      fence_regs(o);
      wg_fence();
      pv_gemm(o, kv0, 0);
      wg_commit();
      wg_wait<0>();
      fence_regs(o);
      named_bar_sync(5, 128);  // P0 V0L done in every warp: K0 blocks 0-3 are free
      if (tw == 0 && next0) issue(j0 + 2, 0, 0, 4);
      named_bar_sync(2, 256);  // c1, m1' and P1 from warpgroup 1
      const float c1A = sSc1[rA], c1B = sSc1[rB];
      mA = sM1[rA];
      mB = sM1[rB];
      lA *= c1A;
      lB *= c1B;
      store_p(stg[0] + 8 * 8192, s, c1A, c1B, rA, rB, t4);  // c1 P0 over P0 (P0 V0L has completed)
      fence_proxy_async();
      named_bar_arrive(3, 256);  // c1 P0 ready for warpgroup 1
#pragma unroll
      for (int q = 0; q < 32; ++q) {
        o[4 * q] *= c1A; o[4 * q + 1] *= c1A; o[4 * q + 2] *= c1B; o[4 * q + 3] *= c1B;
      }
      // after warpgroup 1 has issued c1 P0 V0R (as FlashMLA's rO1sP0sV0RIssued): its completion
      // releases K0 blocks 4-8 and starts the next S1, so it should not queue behind P1 V1L + S0
      named_bar_sync(4, 256);
      if (have1) {
#pragma unroll
        for (int cb = 0; cb < 4; ++cb) mbar_wait_uniform(&bar[9 + cb], par);
        const int valid1 = min(64, re - rb - 64 * j1);
        if (valid1 < 64) {
          zero_tail(stg[1], valid1, 0, 4, tw);
          fence_proxy_async();
          named_bar_sync(5, 128);
        }
        fence_regs(o);
        wg_fence();
        pv_gemm(o, kv1, 0);
        wg_commit();
      }
      if (next0) {
        fence_regs(s);
        wg_fence();
        s_gemm<0, 4>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
        wg_wait<1>();  // P1 V1L done: K1 blocks 0-3 and 8 are free
        named_bar_sync(5, 128);
        if (tw == 0 && next1) {
          issue(j1 + 2, 1, 0, 4);
          issue(j1 + 2, 1, 8, 9);
        }
        s_gemm<4, 9>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
      }
      wg_wait<0>();
      fence_regs(o);
      fence_regs(s);
    }
  } else {
    // ---------------- warpgroup 1: S1, softmax 1, O_R ----------------
    for (int i = 0; i < npairs; ++i) {
      const int j0 = 2 * i, j1 = j0 + 1;
      const bool have1 = j1 < ntiles, next0 = j0 + 2 < ntiles, next1 = j1 + 2 < ntiles;
      const uint32_t par = i & 1;
      // S1 (its K1 blocks were loaded after the previous pair's P1 V1 / at the start); issued and
      // waited inside one branch: wgmma accumulators in flight across a loop edge or a data-dependent
      // branch make ptxas serialise every wgmma of the kernel (C7518)
      if (have1) {
        fence_regs(s);
        wg_fence();
        s_gemm<0, 9>(s, sb, kv1, bar + 9, par);
        wg_commit();
        wg_wait<0>();
        fence_regs(s);
      }
      named_bar_sync(1, 256);  // c0, m0' from warpgroup 0
      const float c0A = sSc0[rA], c0B = sSc0[rB], m0A = sM0[rA], m0B = sM0[rB];
      float c1A = 1.f, c1B = 1.f, sumA = 0.f, sumB = 0.f;
      const int valid1 = have1 ? min(64, re - rb - 64 * j1) : 0;
      if (have1) {
        float mxA, mxB;
        tile_max(s, valid1, sl2, t4, mxA, mxB);
        mA = fmaxf(m0A, mxA);
        mB = fmaxf(m0B, mxB);
        c1A = (m0A == kNegInf) ? 0.f : fast_exp2(m0A - mA);
        c1B = (m0B == kNegInf) ? 0.f : fast_exp2(m0B - mB);
        tile_exp(s, mA, mB, sumA, sumB);
        named_bar_sync(6, 128);  // every warp's S1 wgmma has read column block 8
        store_p(stg[1] + 8 * 8192, s, 1.f, 1.f, rA, rB, t4);
        if (valid1 < 64) zero_tail(stg[1], valid1, 4, 8, tw);
      } else {
        mA = m0A;
        mB = m0B;
      }
      lA = lA * (c0A * c1A) + sumA;
      lB = lB * (c0B * c1B) + sumB;
      if (t4 == 0) {
        sSc1[rA] = c1A; sSc1[rB] = c1B;
        sM1[rA] = mA; sM1[rB] = mB;
      }
      // K0 blocks 4-7 (V0R): loaded long ago (S0 waited on them) and S0 is complete (barrier 1), so a
      // partial page's tail is zeroed here, before any wgmma of this warpgroup is in flight (a
      // divergent loop with in-flight accumulators makes ptxas serialise the kernel's wgmmas, C7518)
#pragma unroll
      for (int cb = 4; cb < 9; ++cb) mbar_wait_uniform(&bar[cb], par);
      const int valid0 = min(64, re - rb - 64 * j0);
      if (valid0 < 64) zero_tail(stg[0], valid0, 4, 8, tw);
      fence_proxy_async();
      named_bar_arrive(2, 256);  // c1, m1', P1 ready for warpgroup 0
      named_bar_sync(6, 128);    // P1 (and the zeroed tail) written by every warp of this warpgroup
      const float fA = c0A * c1A, fB = c0B * c1B;
#pragma unroll
      for (int q = 0; q < 32; ++q) {
        o[4 * q] *= fA; o[4 * q + 1] *= fA; o[4 * q + 2] *= fB; o[4 * q + 3] *= fB;
      }
      fence_regs(o);
      if (have1) {
        wg_fence();
        pv_gemm(o, kv1, 1);
        wg_commit();
      }
      named_bar_sync(3, 256);  // c1 P0 from warpgroup 0
      wg_fence();
      pv_gemm(o, kv0, 1);
      wg_commit();
      named_bar_arrive(4, 256);  // c1 P0 V0R issued: warpgroup 0 may queue P1 V1L and the next S0 behind it
      if (have1) {
        wg_wait<1>();  // P1 V1R done: K1 blocks 4-7 are free
        named_bar_sync(6, 128);
        if (tw == 0 && next1) issue(j1 + 2, 1, 4, 8);
      }
      wg_wait<0>();  // c1 P0 V0R done: K0 blocks 4-8 are free
      fence_regs(o);
      named_bar_sync(6, 128);
      if (tw == 0 && next0) issue(j0 + 2, 0, 4, 9);
    }
  }

  // l = l_L (warpgroup 0's partial sums) + l_R (warpgroup 1's); m is the same in both
  lA += __shfl_xor_sync(0xffffffffu, lA, 1);
  lA += __shfl_xor_sync(0xffffffffu, lA, 2);
  lB += __shfl_xor_sync(0xffffffffu, lB, 1);
  lB += __shfl_xor_sync(0xffffffffu, lB, 2);
  if (t4 == 0) {
    (wg == 0 ? sLL : sLR)[rA] = lA;
    (wg == 0 ? sLL : sLR)[rB] = lB;
  }
  __syncthreads();
  const float m0 = mA, m1 = mB;
  const float l0 = sLL[rA] + sLR[rA], l1 = sLL[rB] + sLR[rB];
  wg_store::store_rows(a, o, m0, m1, l0, l1, head0, H, rA, rB, wg, t4, qi, slot);
}

}  // namespace
}  // namespace servesim::attn
