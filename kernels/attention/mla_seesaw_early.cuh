// servesim attention kernels: MLA decode on Hopper, variant 5: the seesaw of variant 4
// (mla_seesaw.cuh) with the P0 V0 products taken early.
// Part of mqa.cu's translation unit, not a standalone header: mqa.cu includes the kernel parts in
// their original order after defining kLog2e / kNegInf (one unit keeps the code cicc / ptxas
// generate for every kernel exactly as before the file was split; see mqa.cu).
#pragma once
#include "attention/hopper.cuh"
#include "attention/mqa.cuh"
#include "attention/mla_seesaw.cuh"

namespace servesim::attn {
namespace {

// ---------------------------------------------------------------------------------------------
// MLA decode, variant 5 (issue 12): the seesaw of variant 4 with the P0 V0 products taken early.
// O_R = c1 (c0 O_R + P0 V0R) + P1 V1R and O_L = c1 (c0 O_L + P0 V0L) + P1 V1L: both halves of
// P0 V0 need only P0 and c0, so warpgroup 1 issues P0 V0R right after warpgroup 0's softmax and
// runs its own softmax while P0 V0L / P0 V0R are on the tensor pipe; K0 is then released right after
// P0 V0 (early in the pair: blocks 0-3 by warpgroup 0, 4-8 by warpgroup 1 once both products are
// done), so the next S0's page has half a pair to arrive (variant 4 released K0 blocks 4-8 only
// after c1 P0 V0R at the end of the pair; ncu showed the next S0 waiting on them). K1 as in
// variant 4, with block 8 (P1) released by warpgroup 1 after both P1 V1 products.
// Named barriers: 1 P0/c0/m0' ready (WG0 -> WG1), 2 P1/c1/m1' ready (WG1 -> WG0), 3 P0 V0L done,
// 4 P1 V1L done (WG0 -> WG1), 5 / 6 warpgroup-local.
// ---------------------------------------------------------------------------------------------
__global__ void __launch_bounds__(256, 1)
    mla_decode_seesaw2_kernel(const __grid_constant__ CUtensorMap tmap, MqaArgs a, const int4* __restrict__ work) {
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
  {
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
      if (valid0 < 64) zero_tail(stg[0], valid0, 0, 8, tw);  // both V halves (warpgroup 1 reads 4-7 after barrier 1)
      fence_proxy_async();
      named_bar_sync(5, 128);
      named_bar_arrive(1, 256);  // P0, c0, m0' ready
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
      named_bar_sync(5, 128);    // P0 V0L done in every warp
      named_bar_arrive(3, 256);  // -> warpgroup 1 may reload K0 blocks 4-8 once its P0 V0R is done
      if (tw == 0 && next0) issue(j0 + 2, 0, 0, 4);
      named_bar_sync(2, 256);  // P1, c1, m1' from warpgroup 1
      const float c1A = sSc1[rA], c1B = sSc1[rB];
      mA = sM1[rA];
      mB = sM1[rB];
      lA *= c1A;
      lB *= c1B;
#pragma unroll
      for (int q = 0; q < 32; ++q) {
        o[4 * q] *= c1A; o[4 * q + 1] *= c1A; o[4 * q + 2] *= c1B; o[4 * q + 3] *= c1B;
      }
      fence_regs(o);
      if (have1) {
#pragma unroll
        for (int cb = 0; cb < 4; ++cb) mbar_wait_uniform(&bar[9 + cb], par);
        wg_fence();
        pv_gemm(o, kv1, 0);
        wg_commit();
      }
      if (next0) {
        fence_regs(s);
        wg_fence();
        s_gemm<0, 4>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
        wg_wait<1>();  // P1 V1L done: K1 blocks 0-3 are free
        named_bar_sync(5, 128);
        named_bar_arrive(4, 256);
        if (tw == 0 && next1) issue(j1 + 2, 1, 0, 4);
        s_gemm<4, 9>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
        wg_wait<0>();
      } else {
        wg_wait<0>();
        named_bar_sync(5, 128);
        named_bar_arrive(4, 256);
      }
      fence_regs(o);
      fence_regs(s);
    }
  } else {
    // ---------------- warpgroup 1: S1, P0 V0R, softmax 1, P1 V1R ----------------
    for (int i = 0; i < npairs; ++i) {
      const int j0 = 2 * i, j1 = j0 + 1;
      const bool have1 = j1 < ntiles, next0 = j0 + 2 < ntiles, next1 = j1 + 2 < ntiles;
      const uint32_t par = i & 1;
      if (have1) {
        fence_regs(s);
        wg_fence();
        s_gemm<0, 9>(s, sb, kv1, bar + 9, par);
        wg_commit();
        wg_wait<0>();
        fence_regs(s);
      }
#pragma unroll
      for (int cb = 4; cb < 8; ++cb) mbar_wait_uniform(&bar[cb], par);
      named_bar_sync(1, 256);  // P0, c0, m0' from warpgroup 0 (and K0's tail zeroed)
      const float c0A = sSc0[rA], c0B = sSc0[rB], m0A = sM0[rA], m0B = sM0[rB];
#pragma unroll
      for (int q = 0; q < 32; ++q) {
        o[4 * q] *= c0A; o[4 * q + 1] *= c0A; o[4 * q + 2] *= c0B; o[4 * q + 3] *= c0B;
      }
      fence_regs(o);
      wg_fence();
      pv_gemm(o, kv0, 1);  // O_R = c0 O_R + P0 V0R, overlapping this warpgroup's softmax below
      wg_commit();
      float c1A = 1.f, c1B = 1.f, sumA = 0.f, sumB = 0.f;
      mA = m0A;
      mB = m0B;
      if (have1) {
        const int valid1 = min(64, re - rb - 64 * j1);
        float mxA, mxB;
        tile_max(s, valid1, sl2, t4, mxA, mxB);
        mA = fmaxf(m0A, mxA);
        mB = fmaxf(m0B, mxB);
        c1A = fast_exp2(m0A - mA);
        c1B = fast_exp2(m0B - mB);
        tile_exp(s, mA, mB, sumA, sumB);
        named_bar_sync(6, 128);  // every warp's S1 wgmma has read column block 8
        store_p(stg[1] + 8 * 8192, s, 1.f, 1.f, rA, rB, t4);
        if (valid1 < 64) zero_tail(stg[1], valid1, 0, 8, tw);
      }
      lA = lA * (c0A * c1A) + sumA;
      lB = lB * (c0B * c1B) + sumB;
      if (t4 == 0) {
        sSc1[rA] = c1A; sSc1[rB] = c1B;
        sM1[rA] = mA; sM1[rB] = mB;
      }
      fence_proxy_async();
      wg_wait<0>();  // P0 V0R done
      fence_regs(o);
      named_bar_sync(6, 128);    // P1 written and P0 V0R done in every warp of this warpgroup
      named_bar_sync(3, 256);    // P0 V0L done too: K0 blocks 4-8 (V0R and P0) are free
      if (tw == 0 && next0) issue(j0 + 2, 0, 4, 9);
      named_bar_arrive(2, 256);  // P1, c1, m1' ready
#pragma unroll
      for (int q = 0; q < 32; ++q) {
        o[4 * q] *= c1A; o[4 * q + 1] *= c1A; o[4 * q + 2] *= c1B; o[4 * q + 3] *= c1B;
      }
      fence_regs(o);
      if (have1) {
        wg_fence();
        pv_gemm(o, kv1, 1);
        wg_commit();
      }
      wg_wait<0>();
      fence_regs(o);
      named_bar_sync(4, 256);  // P1 V1L done (warpgroup 0)
      named_bar_sync(6, 128);  // P1 V1R done in every warp: K1 blocks 4-8 are free
      if (tw == 0 && next1) issue(j1 + 2, 1, 4, 9);
    }
  }

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
  const int hA = head0 + rA, hB = head0 + rB;
  const bool okA = hA < H, okB = hB < H;
  const int c0 = wg * 256 + 2 * t4;
  if (slot < 0) {
    const float sA = (a.sink && okA) ? a.sink[hA] * kLog2e : kNegInf;
    const float sB = (a.sink && okB) ? a.sink[hB] * kLog2e : kNegInf;
    const float MA = fmaxf(m0, sA), MB = fmaxf(m1, sB);
    const float wA = (m0 == kNegInf) ? 0.f : exp2f(m0 - MA), wB = (m1 == kNegInf) ? 0.f : exp2f(m1 - MB);
    const float dA = l0 * wA + (sA == kNegInf ? 0.f : exp2f(sA - MA));
    const float dB = l1 * wB + (sB == kNegInf ? 0.f : exp2f(sB - MB));
    const float fA = dA > 0.f ? wA / dA : 0.f, fB = dB > 0.f ? wB / dB : 0.f;
    bf16* oA = a.out + (static_cast<size_t>(qi) * H + hA) * 512 + c0;
    bf16* oB = a.out + (static_cast<size_t>(qi) * H + hB) * 512 + c0;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      if (okA) *reinterpret_cast<uint32_t*>(oA + 8 * i) = pack_bf16(o[4 * i] * fA, o[4 * i + 1] * fA);
      if (okB) *reinterpret_cast<uint32_t*>(oB + 8 * i) = pack_bf16(o[4 * i + 2] * fB, o[4 * i + 3] * fB);
    }
    if (a.lse && wg == 0 && t4 == 0) {
      if (okA) a.lse[static_cast<size_t>(qi) * H + hA] = dA > 0.f ? (MA + log2f(dA)) / kLog2e : kNegInf;
      if (okB) a.lse[static_cast<size_t>(qi) * H + hB] = dB > 0.f ? (MB + log2f(dB)) / kLog2e : kNegInf;
    }
  } else {
    const float fA = l0 > 0.f ? 1.f / l0 : 0.f, fB = l1 > 0.f ? 1.f / l1 : 0.f;
    float* oA = a.o_part + (static_cast<size_t>(slot) * H + hA) * 512 + c0;
    float* oB = a.o_part + (static_cast<size_t>(slot) * H + hB) * 512 + c0;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      if (okA) *reinterpret_cast<float2*>(oA + 8 * i) = make_float2(o[4 * i] * fA, o[4 * i + 1] * fA);
      if (okB) *reinterpret_cast<float2*>(oB + 8 * i) = make_float2(o[4 * i + 2] * fB, o[4 * i + 3] * fB);
    }
    if (wg == 0 && t4 == 0) {
      if (okA) a.lse_part[static_cast<size_t>(slot) * H + hA] = l0 > 0.f ? m0 + log2f(l0) : kNegInf;
      if (okB) a.lse_part[static_cast<size_t>(slot) * H + hB] = l1 > 0.f ? m1 + log2f(l1) : kNegInf;
    }
  }
}

}  // namespace
}  // namespace servesim::attn
