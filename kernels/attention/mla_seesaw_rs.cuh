// servesim attention kernels: MLA decode on Hopper, variants 10-12: the seesaw of variant 4
// (mla_seesaw.cuh) with each warpgroup's own P taken from registers (RS wgmma); 11 / 12 also gate
// S1 behind S0 and use the cheaper softmax. The RS-only wgs helpers are here.
// Part of mqa.cu's translation unit, not a standalone header: mqa.cu includes the kernel parts in
// their original order after defining kLog2e / kNegInf (one unit keeps the code cicc / ptxas
// generate for every kernel exactly as before the file was split; see mqa.cu).
#pragma once
#include "attention/hopper.cuh"
#include "attention/mqa.cuh"
#include "attention/wg_store.cuh"
#include "attention/mla_seesaw.cuh"

namespace servesim::attn {
namespace {

// ---------------------------------------------------------------------------------------------
// MLA decode, variant 10 (issue 12, tenth session): the seesaw of variant 4 with S1 over K1's column
// blocks 4-7, 0-3, 8 (the order of their refills; the removed variant 7) and each warpgroup's
// own P taken from registers (RS wgmma, as FlashMLA): P0 V0L and P1 V1R read the bf16 P fragments
// packed from the softmax registers, so softmax 0 -> P0 V0L and softmax 1 -> P1 V1R no longer go
// through a shared-memory store, a proxy fence and two named barriers; warpgroup 0 stores only
// c1 P0 (for warpgroup 1's c1 P0 V0R, scaled from the packed bf16 P0: one more bf16 rounding) and
// warpgroup 1 stores P1 (for warpgroup 0's P1 V1L) after issuing P1 V1R. 16 KB less shared-memory
// reads and one 8-KB store less per pair. Partial-page tails are zeroed before the first PV of the
// warpgroup that reads them (no wgmma in flight there). Same plan, smem and stage release as 4/7.
// ---------------------------------------------------------------------------------------------
namespace wgs {
// O_half (+)= P V_half with P from registers (p[16]: bf16x2, p[2 jj] = row rA cols 8 jj + 2 t4 .. +1,
// p[2 jj + 1] = row rB; the k16 step kk uses p[4 kk .. 4 kk + 3], the wgmma A-fragment order).
__device__ __forceinline__ void pv_gemm_rs(float (&o)[128], const uint32_t (&p)[16], uint32_t kv, int h) {
  using namespace sm90;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint32_t af[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
    wgmma_m64n256k16_rs_tb(o, af, sw128_desc(kv + h * 4 * 8192 + kk * 2048, 8192, 1024), 1);
  }
}
__device__ __forceinline__ void pack_p(uint32_t (&p)[16], const float (&s)[32]) {
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    p[2 * jj] = pack_bf16(s[4 * jj], s[4 * jj + 1]);
    p[2 * jj + 1] = pack_bf16(s[4 * jj + 2], s[4 * jj + 3]);
  }
}
__device__ __forceinline__ uint32_t scale_bf16x2(uint32_t v, float f) {
  __nv_bfloat162 h;
  memcpy(&h, &v, 4);
  const float2 x = __bfloat1622float2(h);
  return pack_bf16(x.x * f, x.y * f);
}
// packed P (times fA / fB per row) -> the swizzled P tile at `sp`
__device__ __forceinline__ void store_p_packed(uint8_t* sp, const uint32_t (&p)[16], float fA, float fB, bool scale, int rA, int rB,
                                               int t4) {
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    *reinterpret_cast<uint32_t*>(sp + rA * 128 + ((jj ^ (rA & 7)) << 4) + 4 * t4) = scale ? scale_bf16x2(p[2 * jj], fA) : p[2 * jj];
    *reinterpret_cast<uint32_t*>(sp + rB * 128 + ((jj ^ (rB & 7)) << 4) + 4 * t4) = scale ? scale_bf16x2(p[2 * jj + 1], fB) : p[2 * jj + 1];
  }
}
// Variants 11 / 12: row maxima of the raw S (masked only for a partial tile, a warp-uniform branch),
// returned already log2-scaled (sl2 > 0, so max(S) sl2 = max(S sl2)); S itself stays unscaled.
__device__ __forceinline__ void tile_max_raw(float (&s)[32], int valid, float sl2, int t4, float& mxA, float& mxB) {
  if (valid < 64) {
#pragma unroll
    for (int jj = 0; jj < 8; ++jj)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool v = 8 * jj + 2 * t4 + e < valid;
        s[4 * jj + e] = v ? s[4 * jj + e] : kNegInf;
        s[4 * jj + 2 + e] = v ? s[4 * jj + 2 + e] : kNegInf;
      }
  }
  mxA = kNegInf;
  mxB = kNegInf;
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    mxA = fmaxf(mxA, fmaxf(s[4 * jj], s[4 * jj + 1]));
    mxB = fmaxf(mxB, fmaxf(s[4 * jj + 2], s[4 * jj + 3]));
  }
  mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
  mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
  mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
  mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
  mxA *= sl2;
  mxB *= sl2;
}
// P = 2^(S sl2 - m_new): one FFMA + one ex2 per element (variants 4-10: FMUL in tile_max, FADD here).
__device__ __forceinline__ void tile_exp_fma(float (&s)[32], float sl2, float mnA, float mnB, float& sumA, float& sumB) {
  sumA = 0.f;
  sumB = 0.f;
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    s[4 * jj] = fast_exp2(fmaf(s[4 * jj], sl2, -mnA));
    s[4 * jj + 1] = fast_exp2(fmaf(s[4 * jj + 1], sl2, -mnA));
    s[4 * jj + 2] = fast_exp2(fmaf(s[4 * jj + 2], sl2, -mnB));
    s[4 * jj + 3] = fast_exp2(fmaf(s[4 * jj + 3], sl2, -mnB));
    sumA += s[4 * jj] + s[4 * jj + 1];
    sumB += s[4 * jj + 2] + s[4 * jj + 3];
  }
}
// o[rows A] *= fA, o[rows B] *= fB; kSkip: not at all when every factor of the warp is exactly 1 (the
// running max did not move: multiplying by 1 is the identity, so the result is bit-identical). No
// wgmma may have o in flight here.
template <bool kSkip>
__device__ __forceinline__ void scale_o(float (&o)[128], float fA, float fB) {
  if (kSkip && __all_sync(0xffffffffu, fA == 1.f && fB == 1.f)) return;
#pragma unroll
  for (int q = 0; q < 32; ++q) {
    o[4 * q] *= fA; o[4 * q + 1] *= fA; o[4 * q + 2] *= fB; o[4 * q + 3] *= fB;
  }
}
}  // namespace wgs

// kGate (issue 12, eleventh session): 0 = variant 10. 1 = variant 11: warpgroup 1 issues S1 only
//   after warpgroup 0 has issued all of S0 (named barrier 7), so that S0 completes first on the
//   tensor pipe and softmax 0 runs while S1 computes (in variant 10 S0 and S1 interleave and end
//   together, and the pipe idles through softmax 0); plus the cheaper softmax (raw-S max, one FFMA
//   per exponential, masking only in a partial tile) and O rescales skipped when a warp's factors
//   are all 1. 2 = variant 12: the same, with barrier 7 passed after S0's column blocks 0-3 only
//   (S1 interleaves with S0 4-8 as in variant 10). Measured (NOTES.md, eleventh session): 12 is 1.06x
//   variant 10 at the 128-head median and the table's kernel; 11 loses at 512 x 4K (S1 then also
//   waits for K0 4-8, the blocks refilled last).
// kSh (smemfix, issue 12): the 1024-B alignment by pointer arithmetic on the __shared__ array instead of a
//   uintptr_t round trip, so the compiler keeps the shared address space and the softmax-row / P / O
//   accesses through smem compile to ld/st.shared (LDS/STS) instead of generic ld/st (LD/ST); pure codegen,
//   same algorithm. Variant 12 launches <2, true> unless SERVESIM_MLA_SMEM_GENERIC=1 (the old form, kept
//   for same-run comparison); variants 10 / 11 keep the old form.
template <int kGate, bool kSh = false>
__global__ void __launch_bounds__(256, 1)
    mla_decode_seesaw_rs_kernel(const __grid_constant__ CUtensorMap tmap, MqaArgs a, const int4* __restrict__ work) {
  constexpr bool kNew = kGate > 0;
  using namespace sm90;
  using namespace wgs;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = kSh ? smem_raw + ((1024u - (saddr(smem_raw) & 1023u)) & 1023u)
                      : reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
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
    // ---------------- warpgroup 0: S0, softmax 0, O_L ----------------
    if (ntiles > 0) {
      wg_fence();
      s_gemm<0, 9, 0, true>(s, sb, kv0, bar, 0);
      wg_commit();
      if constexpr (kNew) named_bar_arrive(7, 256);  // S0 issued: warpgroup 1 may issue S1
      wg_wait<0>();
      fence_regs(s);
    }
    for (int i = 0; i < npairs; ++i) {
      const int j0 = 2 * i, j1 = j0 + 1;
      const bool have1 = j1 < ntiles, next0 = j0 + 2 < ntiles, next1 = j1 + 2 < ntiles;
      const uint32_t par = i & 1;
      const int valid0 = min(64, re - rb - 64 * j0);
      float mxA, mxB, sumA, sumB;
      if constexpr (kNew) tile_max_raw(s, valid0, sl2, t4, mxA, mxB);
      else tile_max(s, valid0, sl2, t4, mxA, mxB);
      const float mnA = fmaxf(mA, mxA), mnB = fmaxf(mB, mxB);
      const float c0A = (mA == kNegInf) ? 0.f : fast_exp2(mA - mnA), c0B = (mB == kNegInf) ? 0.f : fast_exp2(mB - mnB);
      if constexpr (kNew) tile_exp_fma(s, sl2, mnA, mnB, sumA, sumB);
      else tile_exp(s, mnA, mnB, sumA, sumB);
      lA = lA * c0A + sumA;
      lB = lB * c0B + sumB;
      if (t4 == 0) {
        sSc0[rA] = c0A; sSc0[rB] = c0B;
        sM0[rA] = mnA; sM0[rB] = mnB;
      }
      pack_p(p, s);  // s is dead until the next S0 (its first wgmma does not read it)
      if (valid0 < 64) {  // V0L rows past the context (may hold NaN) -> 0 before P0 V0L reads them
        zero_tail(stg[0], valid0, 0, 4, tw);
        fence_proxy_async();
        named_bar_sync(5, 128);
      }
      named_bar_arrive(1, 256);  // c0 and m0' ready for warpgroup 1
      scale_o<kNew>(o, c0A, c0B);
      fence_regs(o);
      wg_fence();
      pv_gemm_rs(o, p, kv0, 0);  // P0 V0L, P0 from registers
      wg_commit();
      wg_wait<0>();
      fence_regs(o);
      named_bar_sync(5, 128);  // P0 V0L done in every warp (and every warp's S0 read block 8): K0 0-3 free
      if (tw == 0 && next0) issue(j0 + 2, 0, 0, 4);
      named_bar_sync(2, 256);  // c1, m1' from warpgroup 1
      const float c1A = sSc1[rA], c1B = sSc1[rB];
      mA = sM1[rA];
      mB = sM1[rB];
      lA *= c1A;
      lB *= c1B;
      store_p_packed(stg[0] + 8 * 8192, p, c1A, c1B, true, rA, rB, t4);  // c1 P0 over block 8 (S0 read it)
      fence_proxy_async();
      named_bar_arrive(3, 256);  // c1 P0 ready for warpgroup 1
      scale_o<kNew>(o, c1A, c1B);
      named_bar_sync(4, 256);  // warpgroup 1 stored P1 and issued c1 P0 V0R
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
        pv_gemm(o, kv1, 0);  // P1 V1L, P1 from shared memory
        wg_commit();
      }
      if (next0) {
        wg_fence();
        s_gemm<0, 4, 0, true>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
        if constexpr (kGate == 2) named_bar_arrive(7, 256);  // S0 blocks 0-3 issued: warpgroup 1 may issue S1
        wg_wait<1>();  // P1 V1L done: K1 blocks 0-3 and 8 are free
        named_bar_sync(5, 128);
        if (tw == 0 && next1) {
          issue(j1 + 2, 1, 0, 4);
          issue(j1 + 2, 1, 8, 9);
        }
        s_gemm<4, 9>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
        if constexpr (kGate == 1) named_bar_arrive(7, 256);  // all of S0 issued: warpgroup 1 may issue S1
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
      if constexpr (kNew) named_bar_sync(7, 256);  // S0 of this pair issued first (one arrival per pair)
      if (have1) {  // S1 over K1 blocks 4-7, 0-3, 8 (the order of their refills)
        wg_fence();
        s_gemm<4, 8, 4, true>(s, sb, kv1, bar + 9, par);
        s_gemm<0, 4, 4>(s, sb, kv1, bar + 9, par);
        s_gemm<8, 9, 4>(s, sb, kv1, bar + 9, par);
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
        if constexpr (kNew) tile_max_raw(s, valid1, sl2, t4, mxA, mxB);
        else tile_max(s, valid1, sl2, t4, mxA, mxB);
        mA = fmaxf(m0A, mxA);
        mB = fmaxf(m0B, mxB);
        c1A = (m0A == kNegInf) ? 0.f : fast_exp2(m0A - mA);
        c1B = (m0B == kNegInf) ? 0.f : fast_exp2(m0B - mB);
        if constexpr (kNew) tile_exp_fma(s, sl2, mA, mB, sumA, sumB);
        else tile_exp(s, mA, mB, sumA, sumB);
        pack_p(p, s);
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
      named_bar_arrive(2, 256);  // c1, m1' ready for warpgroup 0 (P1 follows before barrier 4)
      // V0R / V1R rows past the context -> 0 before any wgmma of this warpgroup is in flight (K0 4-8
      // landed long ago: S0 waited on them, and S0 is complete: barrier 1)
#pragma unroll
      for (int cb = 4; cb < 9; ++cb) mbar_wait_uniform(&bar[cb], par);
      const int valid0 = min(64, re - rb - 64 * j0);
      if (valid0 < 64 || (have1 && valid1 < 64)) {
        if (valid0 < 64) zero_tail(stg[0], valid0, 4, 8, tw);
        if (have1 && valid1 < 64) zero_tail(stg[1], valid1, 4, 8, tw);
        fence_proxy_async();
        named_bar_sync(6, 128);
      }
      const float fA = c0A * c1A, fB = c0B * c1B;
      scale_o<kNew>(o, fA, fB);
      fence_regs(o);
      if (have1) {
        wg_fence();
        pv_gemm_rs(o, p, kv1, 1);  // P1 V1R, P1 from registers
        wg_commit();
        named_bar_sync(6, 128);  // every warp's S1 wgmma has read column block 8
        store_p_packed(stg[1] + 8 * 8192, p, 1.f, 1.f, false, rA, rB, t4);  // P1 for warpgroup 0's P1 V1L
        fence_proxy_async();
      }
      named_bar_sync(3, 256);  // c1 P0 from warpgroup 0
      wg_fence();
      pv_gemm(o, kv0, 1);  // c1 P0 V0R
      wg_commit();
      named_bar_arrive(4, 256);  // P1 stored, c1 P0 V0R issued: warpgroup 0 may issue P1 V1L and the next S0
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
