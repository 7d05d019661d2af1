// servesim attention kernels: MLA decode on Hopper, variant 13 (issue 12, twenty-fourth session, helper
// mla128c): variant 12 (mla_seesaw_rs.cuh, kGate 2) with P0 in its own 8-KB shared-memory buffer sP0
// instead of over K0's column block 8, and warpgroup 1's P0 V0R moved ahead of softmax 1.
// Part of mqa.cu's translation unit, not a standalone header (see mqa.cu).
#pragma once
#include "attention/hopper.cuh"
#include "attention/mqa.cuh"
#include "attention/wg_store.cuh"
#include "attention/mla_seesaw.cuh"
#include "attention/mla_seesaw_rs.cuh"

namespace servesim::attn {
namespace {

// ---------------------------------------------------------------------------------------------
// Variant 13 ("release K0 4-8 earlier", item (b) of the eleventh session's NOTES section). In variant 12
// warpgroup 0 stores c1 P0 over K0's block 8 after it has c1 from warpgroup 1 (softmax 1), warpgroup 1
// issues c1 P0 V0R only after that store, behind P1 V1R, and K0 blocks 4-8 go back to TMA only after
// c1 P0 V0R completes -- the next S0 waits on them. Here:
//   - P0 (unscaled, the bf16 fragments P0 V0L reads) goes to a separate 8-KB buffer sP0 (the 8.3 KB left
//     under the 227-KB limit by variant 12's layout: no Q RoPE block in registers needed), stored by
//     warpgroup 0 right after it issued P0 V0L and published with c0 / m0' (barrier 1);
//   - K0's block 8 (RoPE, read only by S0) goes back to TMA with blocks 0-3, after P0 V0L;
//   - warpgroup 1 computes O_R = c1 (c0 O_R + P0 V0R) + P1 V1R (was c0 c1 O_R + P1 V1R + (c1 P0) V0R):
//     P0 V0R is issued as soon as S1 is complete and barrier 1 passed, so it runs on the tensor pipe while
//     softmax 1 runs, and K0 blocks 4-7 go back to TMA right after softmax 1 (before P1 V1R is issued);
//   - barrier 3 (c1 P0 stored) is gone; the next S0 takes K0 blocks 0-3, 8, 4-7.
// One bf16 rounding less than 12 (P0 V0R reads the P0 that P0 V0L reads; c1 is applied in fp32 to O).
// Smem: variant 12's layout with sP0 at 3 x 72 KB (1024-B aligned) and the float rows / barriers after it.
// Measured (NOTES.md, twenty-fourth session): correct, memcheck-clean, but 0.905x variant 12 at the H=128
// median (same run): warpgroup 1 waits for P0 V0R -- queued behind P0 V0L on the tensor pipe -- before it may
// rescale O_R by c1 and issue P1 V1R, so P1 (barrier 4) and with it P1 V1L and the next S0 come later
// (barrier stalls 1.48 -> 2.28 per issue); the earlier K0 refills cut long-scoreboard stalls 1.28 -> 1.04.
// ---------------------------------------------------------------------------------------------
namespace wgs {
constexpr int kOffP0 = 3 * kTile;
constexpr int kOffFSp = kOffP0 + 8192;
constexpr int kOffBarSp = kOffFSp + 6 * 64 * 4;
constexpr int kSmemSp = kOffBarSp + 18 * 8 + 1024;
static_assert(kSmemSp <= 232448, "shared memory per block (variant 13)");
// O_half (+)= P V_half with P [64 x 64] bf16 (swizzled, K-major) at shared address sp.
__device__ __forceinline__ void pv_gemm_at(float (&o)[128], uint32_t sp, uint32_t kv, int h) {
  using namespace sm90;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    wgmma_m64n256k16_ss_tb(o, sw128_desc(sp + kk * 32, 16, 1024), sw128_desc(kv + h * 4 * 8192 + kk * 2048, 8192, 1024), 1);
}
// bf16(P) -> the swizzled P tile at `sp` (the same bf16 values pack_p gives).
__device__ __forceinline__ void store_p_plain(uint8_t* sp, const float (&s)[32], int rA, int rB, int t4) {
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    *reinterpret_cast<uint32_t*>(sp + rA * 128 + ((jj ^ (rA & 7)) << 4) + 4 * t4) = pack_bf16(s[4 * jj], s[4 * jj + 1]);
    *reinterpret_cast<uint32_t*>(sp + rB * 128 + ((jj ^ (rB & 7)) << 4) + 4 * t4) = pack_bf16(s[4 * jj + 2], s[4 * jj + 3]);
  }
}
// Softmax 1 of variant 13 runs while P0 V0R (accumulator o) is in flight: ptxas serialises the wgmmas
// (C7515) if registers that are some wgmma's accumulator (s) are written meanwhile, so these read s only.
// Row maxima of the raw S over the valid columns, log2-scaled (as tile_max_raw, without masking s in place).
__device__ __forceinline__ void tile_max_ro(const float (&s)[32], int valid, float sl2, int t4, float& mxA, float& mxB) {
  mxA = kNegInf;
  mxB = kNegInf;
  if (valid < 64) {
#pragma unroll
    for (int jj = 0; jj < 8; ++jj)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool v = 8 * jj + 2 * t4 + e < valid;
        mxA = fmaxf(mxA, v ? s[4 * jj + e] : kNegInf);
        mxB = fmaxf(mxB, v ? s[4 * jj + 2 + e] : kNegInf);
      }
  } else {
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      mxA = fmaxf(mxA, fmaxf(s[4 * jj], s[4 * jj + 1]));
      mxB = fmaxf(mxB, fmaxf(s[4 * jj + 2], s[4 * jj + 3]));
    }
  }
  mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
  mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
  mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
  mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
  mxA *= sl2;
  mxB *= sl2;
}
// P = 2^(S sl2 - m) (0 past `valid`) packed to bf16 straight into p (pack_p's layout); row sums in fp32.
__device__ __forceinline__ void tile_exp_pack(uint32_t (&p)[16], const float (&s)[32], int valid, float sl2, int t4, float mnA, float mnB,
                                              float& sumA, float& sumB) {
  sumA = 0.f;
  sumB = 0.f;
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    float e0 = fast_exp2(fmaf(s[4 * jj], sl2, -mnA)), e1 = fast_exp2(fmaf(s[4 * jj + 1], sl2, -mnA));
    float e2 = fast_exp2(fmaf(s[4 * jj + 2], sl2, -mnB)), e3 = fast_exp2(fmaf(s[4 * jj + 3], sl2, -mnB));
    if (valid < 64) {
      const bool v0 = 8 * jj + 2 * t4 < valid, v1 = 8 * jj + 2 * t4 + 1 < valid;
      e0 = v0 ? e0 : 0.f; e2 = v0 ? e2 : 0.f;
      e1 = v1 ? e1 : 0.f; e3 = v1 ? e3 : 0.f;
    }
    sumA += e0 + e1;
    sumB += e2 + e3;
    p[2 * jj] = pack_bf16(e0, e1);
    p[2 * jj + 1] = pack_bf16(e2, e3);
  }
}
}  // namespace wgs

__global__ void __launch_bounds__(256, 1)
    mla_decode_seesaw_sp_kernel(const __grid_constant__ CUtensorMap tmap, MqaArgs a, const int4* __restrict__ work) {
  using namespace sm90;
  using namespace wgs;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  const uint32_t sb = saddr(smem);
  uint8_t* sP0 = smem + kOffP0;
  const uint32_t p0addr = sb + kOffP0;
  float* sSc0 = reinterpret_cast<float*>(smem + kOffFSp);
  float* sM0 = sSc0 + 64;
  float* sSc1 = sM0 + 64;
  float* sM1 = sSc1 + 64;
  float* sLL = sM1 + 64;
  float* sLR = sLL + 64;
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + kOffBarSp);  // [stage * 9 + column block]

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
  (void)lane;

  auto issue = [&](int j, int st, int c0, int c1) {
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
  uint32_t p[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) p[i] = 0u;
  float mA = kNegInf, mB = kNegInf, lA = 0.f, lB = 0.f;
  const float sl2 = a.sm_scale * kLog2e;

  if (wg == 0) {
    // ---------------- warpgroup 0: S0, softmax 0, P0 -> sP0, O_L ----------------
    if (ntiles > 0) {
      wg_fence();
      s_gemm<0, 9, 0, true>(s, sb, kv0, bar, 0);
      wg_commit();
      named_bar_arrive(7, 256);  // S0 issued: warpgroup 1 may issue S1
      wg_wait<0>();
      fence_regs(s);
    }
    for (int i = 0; i < npairs; ++i) {
      const int j0 = 2 * i, j1 = j0 + 1;
      const bool have1 = j1 < ntiles, next0 = j0 + 2 < ntiles, next1 = j1 + 2 < ntiles;
      const uint32_t par = i & 1;
      const int valid0 = min(64, re - rb - 64 * j0);
      float mxA, mxB, sumA, sumB;
      tile_max_raw(s, valid0, sl2, t4, mxA, mxB);
      const float mnA = fmaxf(mA, mxA), mnB = fmaxf(mB, mxB);
      const float c0A = (mA == kNegInf) ? 0.f : fast_exp2(mA - mnA), c0B = (mB == kNegInf) ? 0.f : fast_exp2(mB - mnB);
      tile_exp_fma(s, sl2, mnA, mnB, sumA, sumB);
      lA = lA * c0A + sumA;
      lB = lB * c0B + sumB;
      if (t4 == 0) {
        sSc0[rA] = c0A; sSc0[rB] = c0B;
        sM0[rA] = mnA; sM0[rB] = mnB;
      }
      pack_p(p, s);
      if (valid0 < 64) {  // V0L rows past the context (may hold NaN) -> 0 before P0 V0L reads them
        zero_tail(stg[0], valid0, 0, 4, tw);
        fence_proxy_async();
        named_bar_sync(5, 128);
      }
      scale_o<true>(o, c0A, c0B);
      fence_regs(o);
      wg_fence();
      pv_gemm_rs(o, p, kv0, 0);  // P0 V0L, P0 from registers
      wg_commit();
      // P0 (the same bf16 values, from s: p is in flight) for warpgroup 1's P0 V0R. sP0 is free: warpgroup 1
      // finished the previous pair's P0 V0R before it arrived on barrier 4, which this warpgroup passed.
      store_p_plain(sP0, s, rA, rB, t4);
      fence_proxy_async();
      named_bar_arrive(1, 256);  // c0, m0' and P0 ready for warpgroup 1
      wg_wait<0>();
      fence_regs(o);
      named_bar_sync(5, 128);  // P0 V0L done in every warp (and every warp's S0 read block 8): K0 0-3 and 8 free
      if (tw == 0 && next0) {
        issue(j0 + 2, 0, 0, 4);
        issue(j0 + 2, 0, 8, 9);
      }
      named_bar_sync(2, 256);  // c1, m1' from warpgroup 1
      const float c1A = sSc1[rA], c1B = sSc1[rB];
      mA = sM1[rA];
      mB = sM1[rB];
      lA *= c1A;
      lB *= c1B;
      scale_o<true>(o, c1A, c1B);
      named_bar_sync(4, 256);  // warpgroup 1 stored P1 (and its P0 V0R is complete: sP0 free)
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
        pv_gemm(o, kv1, 0);  // P1 V1L, P1 from shared memory (over K1's block 8)
        wg_commit();
      }
      if (next0) {
        wg_fence();
        s_gemm<0, 4, 0, true>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
        named_bar_arrive(7, 256);  // S0 blocks 0-3 issued: warpgroup 1 may issue S1
        wg_wait<1>();  // P1 V1L done: K1 blocks 0-3 and 8 are free
        named_bar_sync(5, 128);
        if (tw == 0 && next1) {
          issue(j1 + 2, 1, 0, 4);
          issue(j1 + 2, 1, 8, 9);
        }
        s_gemm<8, 9>(s, sb, kv0, bar, par ^ 1);  // block 8 was refilled with 0-3, 4-7 after softmax 1
        s_gemm<4, 8>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
      }
      wg_wait<0>();
      fence_regs(o);
      fence_regs(s);
    }
  } else {
    // ---------------- warpgroup 1: S1, P0 V0R (under softmax 1), softmax 1, O_R ----------------
    for (int i = 0; i < npairs; ++i) {
      const int j0 = 2 * i, j1 = j0 + 1;
      const bool have1 = j1 < ntiles, next0 = j0 + 2 < ntiles, next1 = j1 + 2 < ntiles;
      const uint32_t par = i & 1;
      named_bar_sync(7, 256);  // S0 of this pair issued first (one arrival per pair)
      if (have1) {  // S1 over K1 blocks 4-7, 0-3, 8 (the order of their refills)
        wg_fence();
        s_gemm<4, 8, 4, true>(s, sb, kv1, bar + 9, par);
        s_gemm<0, 4, 4>(s, sb, kv1, bar + 9, par);
        s_gemm<8, 9, 4>(s, sb, kv1, bar + 9, par);
        wg_commit();
      }
      // S1 complete before o is scaled by c0 (ptxas serialises the wgmmas if o is written while any wgmma
      // of the warpgroup is in flight, C7515); S1 runs beside S0's blocks 4-8 and ends before softmax 0 does
      wg_wait<0>();
      fence_regs(s);
      named_bar_sync(1, 256);  // c0, m0' and P0 (sP0) from warpgroup 0
      const float c0A = sSc0[rA], c0B = sSc0[rB], m0A = sM0[rA], m0B = sM0[rB];
      // V0R rows past the context -> 0 (K0 4-7 landed: S0 waited on them and is complete, barrier 1; not
      // block 8: warpgroup 0 may already have refilled it, so its barrier's phase is not this pair's)
#pragma unroll
      for (int cb = 4; cb < 8; ++cb) mbar_wait_uniform(&bar[cb], par);
      const int valid0 = min(64, re - rb - 64 * j0);
      if (valid0 < 64) {
        zero_tail(stg[0], valid0, 4, 8, tw);
        fence_proxy_async();
        named_bar_sync(6, 128);
      }
      scale_o<true>(o, c0A, c0B);  // no wgmma of this warpgroup has o in flight (S1 writes s)
      fence_regs(o);
      wg_fence();
      pv_gemm_at(o, p0addr, kv0, 1);  // P0 V0R: runs while softmax 1 runs
      wg_commit();
      float c1A = 1.f, c1B = 1.f, sumA = 0.f, sumB = 0.f;
      const int valid1 = have1 ? min(64, re - rb - 64 * j1) : 0;
      if (have1) {  // softmax 1 while P0 V0R runs on the tensor pipe
        float mxA, mxB;
        tile_max_ro(s, valid1, sl2, t4, mxA, mxB);
        mA = fmaxf(m0A, mxA);
        mB = fmaxf(m0B, mxB);
        c1A = (m0A == kNegInf) ? 0.f : fast_exp2(m0A - mA);
        c1B = (m0B == kNegInf) ? 0.f : fast_exp2(m0B - mB);
        tile_exp_pack(p, s, valid1, sl2, t4, mA, mB, sumA, sumB);
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
      named_bar_arrive(2, 256);  // c1, m1' ready for warpgroup 0
      wg_wait<0>();  // P0 V0R done: K0 blocks 4-7 and sP0 are free
      fence_regs(o);
      named_bar_sync(6, 128);  // ... in every warp (and every warp's S1 is complete: block 8 of K1 is free for P1)
      if (tw == 0 && next0) issue(j0 + 2, 0, 4, 8);
      scale_o<true>(o, c1A, c1B);
      if (have1) {
        if (valid1 < 64) {  // V1R rows past the context -> 0 (S1 is complete)
          zero_tail(stg[1], valid1, 4, 8, tw);
          fence_proxy_async();
          named_bar_sync(6, 128);
        }
        fence_regs(o);
        wg_fence();
        pv_gemm_rs(o, p, kv1, 1);  // P1 V1R, P1 from registers
        wg_commit();
        store_p_packed(stg[1] + 8 * 8192, p, 1.f, 1.f, false, rA, rB, t4);  // P1 for warpgroup 0's P1 V1L
        fence_proxy_async();
      }
      named_bar_arrive(4, 256);  // P1 stored, P0 V0R done: warpgroup 0 may issue P1 V1L and store the next P0
      wg_wait<0>();  // P1 V1R done: K1 blocks 4-7 are free (unconditional: ptxas then sees o retired on every path)
      fence_regs(o);
      if (have1) {
        named_bar_sync(6, 128);
        if (tw == 0 && next1) issue(j1 + 2, 1, 4, 8);
      }
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
