// servesim attention kernels: MLA decode on Hopper, variant 15 (issue 12, twenty-fourth session, helper
// mla128d): variant 13 (mla_seesaw_sp.cuh: P0 in its own buffer sP0, P0 V0R ahead of softmax 1) with P1 V1R
// chained right behind P0 V0R without waiting for it: lazy rescaling (a row's running max moves only when a
// tile's max exceeds it by more than kLazyTau = 8 in log2 units, so P <= 2^8 and c0 / c1 are exactly 1 on
// most tiles), one warpgroup-wide bar.red.or vote per pair (barrier 8) whether any row of warpgroup 1 moved
// (only then wait for P0 V0R and rescale O_R by c1 before P1 V1R), P1 stored and barrier 4 arrived right
// after P1 V1R is issued, K0 blocks 4-7 refilled after P0 V0R completes, and barrier 3 reused as "sP0 free"
// (warpgroup 0 waits on it before storing the next P0). Item 1 of mla128c's "What is left".
// Part of mqa.cu's translation unit, not a standalone header (see mqa.cu).
#pragma once
#include "attention/hopper.cuh"
#include "attention/mqa.cuh"
#include "attention/wg_store.cuh"
#include "attention/mla_seesaw.cuh"
#include "attention/mla_seesaw_rs.cuh"
#include "attention/mla_seesaw_sp.cuh"

namespace servesim::attn {
namespace {

namespace wgs {
constexpr float kLazyTau = 8.f;
// bar.red.or over `n` threads of named barrier `id`: true in every participating thread when any passed v.
__device__ __forceinline__ bool named_bar_or(int id, int n, bool v) {
  uint32_t r;
  asm volatile(
      "{\n .reg .pred pi, po;\n setp.ne.u32 pi, %1, 0;\n bar.red.or.pred po, %2, %3, pi;\n selp.u32 %0, 1, 0, po;\n}\n"
      : "=r"(r)
      : "r"(static_cast<uint32_t>(v)), "r"(id), "r"(n)
      : "memory");
  return r != 0;
}
}  // namespace wgs

__global__ void __launch_bounds__(256, 1)
    mla_decode_seesaw_lz_kernel(const __grid_constant__ CUtensorMap tmap, MqaArgs a, const int4* __restrict__ work) {
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
      // lazy max: keep the running max unless the tile's exceeds it by > kLazyTau (then c0 == 1 exactly)
      const bool upA = mxA > mA + kLazyTau, upB = mxB > mB + kLazyTau;
      const float mnA = upA ? mxA : mA, mnB = upB ? mxB : mB;
      const float c0A = !upA ? 1.f : (mA == kNegInf) ? 0.f : fast_exp2(mA - mnA);
      const float c0B = !upB ? 1.f : (mB == kNegInf) ? 0.f : fast_exp2(mB - mnB);
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
      // P0 (the same bf16 values, from s: p is in flight) for warpgroup 1's P0 V0R. sP0 is free once warpgroup 1
      // has completed the previous pair's P0 V0R (barrier 3; variant 13: implied by barrier 4).
      if (i > 0) named_bar_sync(3, 256);
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
      named_bar_sync(4, 256);  // warpgroup 1 stored P1 (its P0 V0R may still run: sP0 is released by barrier 3)
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
    // ---------------- warpgroup 1: S1, P0 V0R (under softmax 1), P1 V1R chained behind it ----------------
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
      wg_wait<0>();  // S1 complete before o is scaled by c0 (as variant 13)
      fence_regs(s);
      named_bar_sync(1, 256);  // c0, m0' and P0 (sP0) from warpgroup 0; every warp of this warpgroup finished S1
      const float c0A = sSc0[rA], c0B = sSc0[rB], m0A = sM0[rA], m0B = sM0[rB];
      // V0R / V1R rows past the context -> 0 (K0 4-7 landed: S0 waited on them and is complete, barrier 1; not
      // block 8: warpgroup 0 may already have refilled it; K1 4-7: S1 waited on them and is complete)
#pragma unroll
      for (int cb = 4; cb < 8; ++cb) mbar_wait_uniform(&bar[cb], par);
      const int valid0 = min(64, re - rb - 64 * j0);
      const int valid1 = have1 ? min(64, re - rb - 64 * j1) : 0;
      if (valid0 < 64 || (have1 && valid1 < 64)) {
        if (valid0 < 64) zero_tail(stg[0], valid0, 4, 8, tw);
        if (have1 && valid1 < 64) zero_tail(stg[1], valid1, 4, 8, tw);
        fence_proxy_async();
        named_bar_sync(6, 128);
      }
      scale_o<true>(o, c0A, c0B);  // no wgmma of this warpgroup has o in flight
      fence_regs(o);
      wg_fence();
      pv_gemm_at(o, p0addr, kv0, 1);  // P0 V0R: runs while softmax 1 runs
      wg_commit();
      float c1A = 1.f, c1B = 1.f, sumA = 0.f, sumB = 0.f;
      bool up = false;
      if (have1) {  // softmax 1 (lazy max) while P0 V0R runs on the tensor pipe
        float mxA, mxB;
        tile_max_ro(s, valid1, sl2, t4, mxA, mxB);
        const bool upA = mxA > m0A + kLazyTau, upB = mxB > m0B + kLazyTau;
        mA = upA ? mxA : m0A;
        mB = upB ? mxB : m0B;
        c1A = !upA ? 1.f : (m0A == kNegInf) ? 0.f : fast_exp2(m0A - mA);
        c1B = !upB ? 1.f : (m0B == kNegInf) ? 0.f : fast_exp2(m0B - mB);
        up = upA || upB;
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
      // warpgroup-uniform: does any row of this warpgroup rescale (c1 != 1)? Then O_R must be complete (P0 V0R
      // retired) before it is scaled; else P1 V1R goes onto the pipe right behind P0 V0R with no wait.
      // (__any_sync over the already uniform vote: a warp-uniform condition ptxas can see, as scale_o's __all_sync)
      if (__any_sync(0xffffffffu, named_bar_or(8, 128, up))) {
        wg_wait<0>();
        fence_regs(o);
        scale_o<true>(o, c1A, c1B);
        fence_regs(o);
      }
      if (have1) {
        wg_fence();
        pv_gemm_rs(o, p, kv1, 1);  // P1 V1R, P1 from registers
        wg_commit();
        store_p_packed(stg[1] + 8 * 8192, p, 1.f, 1.f, false, rA, rB, t4);  // P1 for warpgroup 0's P1 V1L
        fence_proxy_async();
      } else {
        wg_commit();  // an empty group: wg_wait<1> below then still means P0 V0R done
      }
      named_bar_arrive(4, 256);  // P1 stored: warpgroup 0 may issue P1 V1L and the next S0
      wg_wait<1>();  // P0 V0R done: K0 blocks 4-7 and sP0 are free
      named_bar_sync(6, 128);
      if (tw == 0 && next0) issue(j0 + 2, 0, 4, 8);
      if (next0) named_bar_arrive(3, 256);  // sP0 free for warpgroup 0's next P0 (one arrival per later pair)
      wg_wait<0>();  // P1 V1R done: K1 blocks 4-7 are free
      fence_regs(o);
      named_bar_sync(6, 128);
      if (tw == 0 && next1) issue(j1 + 2, 1, 4, 8);
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
