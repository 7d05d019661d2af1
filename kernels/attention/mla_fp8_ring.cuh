// servesim attention kernels: FP8-KV MLA decode, variant 12 (issue 12, helper fp8kv4): variant 11's
// seesaw (mla_fp8_seesaw.cuh) on 32-token tiles, its refills converted from an FP8 staging ring
// that the bulk-copy engine fills (cp.async.bulk, one 20,992-B copy per 32-token tile) instead of
// from the threads' own 16-B global loads. Not a standalone header: compiled in mla_fp8_ring.cu only.
//
// Why 32-token tiles: variant 11's Q (72 KB) + two 64-token 16-bit stages (2 x 72 KB) leave 8.5 KB of
// the 227 KB, no room for an FP8 ring. With 32-token stages (2 x 36 KB) the layout is
//   Q [64 x 576] 73,728 B | stage 0, stage 1: 9 column blocks of 32 rows x 128 B (36,864 B each) |
//   sP0, sP1: the exchanged P tiles [64 x 32] f16 in 128-B swizzled rows (8 KB each; in variant 11 P
//   went over column block 8 of a stage, 4 KB here, too small for a 64-row sw128 tile) |
//   FP8 ring: 3 slots of one 32-token tile as in the cache (32 x 656 = 20,992 B) | float exchange
//   rows | 18 stage mbarriers + 3 "full" (count 1 + tx bytes) + 3 "empty" (count 256) = 228,544 B.
// Tile t (32 tokens, contiguous in its 64-multiple page) goes to ring slot t % 3. A whole warp (warp 0
// of warpgroup 1, lane 0 issuing) is the producer at points where the slot's last reader is known
// to be done, so its "empty" wait never blocks in practice:
//   tiles 0, 1, 2 at the start, 3 once tiles 0 and 1 are converted (before the main loop);
//   tile 2i+4 after S1 of pair i (S1 waited on every column block of tile 2i+1, whose refills
//   arrived on the slot's "empty" barrier before their stage barriers);
//   tile 2i+5 after warpgroup 1's last refill of pair i (tile 2i+2, whose other part warpgroup 0
//   converted before barrier 3).
// The refills are variant 11's, same release points and owners (K0 0-3 by warpgroup 0 after P0 V0L,
// K1 0-3 + 8 by warpgroup 0 after P1 V1L, K1 4-7 by warpgroup 1 after P1 V1R, K0 4-8 by warpgroup 1
// after c1 P0 V0R), now: wait on the slot's "full" barrier, ld.shared (4 16-B E4M3 chunks + one 8-B
// scale pair + 2 RoPE chunks per thread), the warpgroup's release barrier, E4M3 -> FP16 x scale
// (variant 6's conversion), st.shared into the swizzled 16-bit stage, arrive on the slot's "empty"
// barrier, fence.proxy.async, arrive on the column blocks' mbarriers. Rows past the context are
// written as zeros (the ring slot holds stale rows there: only valid rows are copied).
// The GEMMs: S = Q K^T m64n32 (FP16 k-steps on blocks 0-7, BF16 on RoPE block 8), O_half += P V_half
// m64n256 with K = 32 (two k-steps), P from registers (P0 V0L, P1 V1R) or from sP0 / sP1 (c1 P0 V0R,
// P1 V1L). The softmax split over a pair is variant 11's (twice as many passes per token).
#pragma once
#include "attention/mla_fp8_seesaw.cuh"

namespace servesim::attn::fp8ring {
using namespace fp8k;
using fp8ss::scale_o;
constexpr int kT = 32;                            // tokens per tile
constexpr int kQ = 64 * 576 * 2;                  // 73,728 B
constexpr int kBlk = kT * 128;                    // 4,096 B: one column block of a stage
constexpr int kStage = 9 * kBlk;                  // 36,864 B
constexpr int kOffK = kQ;                         // stage st at kOffK + st * kStage
constexpr int kOffP = kOffK + 2 * kStage;         // sP0, sP1 (8,192 B each)
constexpr int kSlot = kT * kMlaFp8TokenBytes;     // 20,992 B
constexpr int kRing = 3;
constexpr int kOffR = kOffP + 2 * 8192;           // FP8 ring
constexpr int kOffF = kOffR + kRing * kSlot;      // floats: sc0, m0, sc1, m1, lL, lR (64 each)
constexpr int kOffBar = kOffF + 6 * 64 * 4;
constexpr int kNBar = 18 + 2 * kRing;
constexpr int kSmem = kOffBar + kNBar * 8 + 1024;  // + slack for 1024-B alignment
static_assert(kSmem <= 232448, "shared memory per block");
static_assert(kOffK % 1024 == 0 && kStage % 1024 == 0 && kOffP % 1024 == 0 && kOffR % 16 == 0 && kSlot % 16 == 0, "alignment");

__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(sm90::saddr(bar))
               : "memory");
}
__device__ __forceinline__ void wgmma_m64n32k16_ss_f16(float (&d)[16], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(da), "l"(db), "r"(scale_d));
}
// write-only accumulator (S's old registers are dead before the first k-step)
__device__ __forceinline__ void wgmma_m64n32k16_ss_f16_w(float (&d)[16], uint64_t da, uint64_t db) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, 0, 1, 1, 0, 0;\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15])
      : "l"(da), "l"(db));
}
// S (+)= Q K^T over column blocks [B0, B1) of a 32-token stage, each block waited on its mbarrier.
template <int B0, int B1, int FIRST>
__device__ __forceinline__ void s_gemm(float (&s)[16], uint32_t sq, uint32_t kv, uint64_t* bars, uint32_t par) {
  using namespace sm90;
#pragma unroll
  for (int cb = B0; cb < B1; ++cb) {
    mbar_wait_uniform(&bars[cb], par);
    wg_fence();
#pragma unroll
    for (int k4 = 0; k4 < 4; ++k4) {
      const uint64_t dq = sw128_desc(sq + cb * 8192 + k4 * 32, 16, 1024), dk = sw128_desc(kv + cb * kBlk + k4 * 32, 16, 1024);
      const int acc = (cb != FIRST || k4 > 0) ? 1 : 0;
      if (cb < 8 && !acc)
        wgmma_m64n32k16_ss_f16_w(s, dq, dk);
      else if (cb < 8)
        wgmma_m64n32k16_ss_f16(s, dq, dk, acc);
      else
        wgmma_m64n32k16_ss(s, dq, dk, acc);
    }
  }
}
// O_half (+)= P V_half (K = 32), P from registers: p[4 kk .. 4 kk + 3] is the A fragment of k-step kk.
__device__ __forceinline__ void pv_gemm_rs(float (&o)[128], const uint32_t (&p)[8], uint32_t kv, int h) {
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
    const uint32_t af[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
    fp8ss::wgmma_m64n256k16_rs_tb_f16(o, af, sm90::sw128_desc(kv + h * 4 * kBlk + kk * 2048, kBlk, 1024), 1);
  }
}
// O_half (+)= P V_half, P [64 x 32] f16 from sp (128-B swizzled rows, first 64 B used).
__device__ __forceinline__ void pv_gemm_ss(float (&o)[128], uint32_t sp, uint32_t kv, int h) {
  using namespace sm90;
#pragma unroll
  for (int kk = 0; kk < 2; ++kk)
    wgmma_m64n256k16_ss_tb_f16(o, sw128_desc(sp + kk * 32, 16, 1024), sw128_desc(kv + h * 4 * kBlk + kk * 2048, kBlk, 1024), 1);
}
__device__ __forceinline__ void pack_p(uint32_t (&p)[8], const float (&s)[16]) {
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) {
    p[2 * jj] = pack_f16(s[4 * jj], s[4 * jj + 1]);
    p[2 * jj + 1] = pack_f16(s[4 * jj + 2], s[4 * jj + 3]);
  }
}
__device__ __forceinline__ void store_p(uint8_t* sp, const uint32_t (&p)[8], float fA, float fB, bool scale, int rA, int rB, int t4) {
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) {
    *reinterpret_cast<uint32_t*>(sp + rA * 128 + ((jj ^ (rA & 7)) << 4) + 4 * t4) = scale ? fp8ss::scale_f16x2(p[2 * jj], fA) : p[2 * jj];
    *reinterpret_cast<uint32_t*>(sp + rB * 128 + ((jj ^ (rB & 7)) << 4) + 4 * t4) = scale ? fp8ss::scale_f16x2(p[2 * jj + 1], fB) : p[2 * jj + 1];
  }
}
__device__ __forceinline__ void tile_max_raw(float (&s)[16], int valid, float sl2, int t4, float& mxA, float& mxB) {
  if (valid < kT) {
#pragma unroll
    for (int jj = 0; jj < 4; ++jj)
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
  for (int jj = 0; jj < 4; ++jj) {
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
__device__ __forceinline__ void tile_exp_fma(float (&s)[16], float sl2, float mnA, float mnB, float& sumA, float& sumB) {
  sumA = 0.f;
  sumB = 0.f;
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) {
    s[4 * jj] = fast_exp2(fmaf(s[4 * jj], sl2, -mnA));
    s[4 * jj + 1] = fast_exp2(fmaf(s[4 * jj + 1], sl2, -mnA));
    s[4 * jj + 2] = fast_exp2(fmaf(s[4 * jj + 2], sl2, -mnB));
    s[4 * jj + 3] = fast_exp2(fmaf(s[4 * jj + 3], sl2, -mnB));
    sumA += s[4 * jj] + s[4 * jj + 1];
    sumB += s[4 * jj + 2] + s[4 * jj + 3];
  }
}
__device__ __forceinline__ uint4 lds128(uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a) : "memory");
  return v;
}
__device__ __forceinline__ float2 lds64f(uint32_t a) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(a) : "memory");
  return v;
}
// One warpgroup's share of a 32-token tile, read from its FP8 ring slot: thread t takes token t/4,
// E4M3 chunk t % 4 of column blocks 4W .. 4W + 3 (their scales 2W, 2W + 1: one 8-B load), and with
// ROPE the RoPE chunks (t/8 + 16 u, chunk t % 8), u < 2. Rows at or past `valid` become zeros.
template <int W, bool ROPE>
struct Refill {
  uint4 raw[4];
  float2 sc;
  uint4 rope[ROPE ? 2 : 1];
  // slot: shared-memory address of the tile in the ring (explicit ld.shared: a generic load of the
  // ring is an LD through the long-scoreboard path, fp8kv4 call 1)
  __device__ __forceinline__ void load(uint32_t slot, int valid, int t) {
    const int r = t >> 2;
    const uint32_t tok = slot + r * kMlaFp8TokenBytes;
    const bool ok = r < valid;
    sc = ok ? lds64f(tok + kMlaFp8ScaleOff + 8 * W) : make_float2(0.f, 0.f);
#pragma unroll
    for (int u = 0; u < 4; ++u) raw[u] = ok ? lds128(tok + 64 * (4 * W + u) + 16 * (t & 3)) : make_uint4(0, 0, 0, 0);
    if constexpr (ROPE) {
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int q = (t >> 3) + 16 * u;
        rope[u] = q < valid ? lds128(slot + q * kMlaFp8TokenBytes + kMlaFp8RopeOff + 16 * (t & 7)) : make_uint4(0, 0, 0, 0);
      }
    }
  }
  // T: shared-memory address of the 32-token 16-bit stage.
  __device__ __forceinline__ void store(uint32_t T, int t) const {
    const int r = t >> 2, c = 2 * (t & 3);
    const uint32_t d = T + r * 128, s0 = (c ^ (r & 7)) << 4, s1 = ((c + 1) ^ (r & 7)) << 4;
    const uint32_t h0 = pack_f16(sc.x, sc.x), h1 = pack_f16(sc.y, sc.y);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      uint4 lo, hi;
      convert16h(raw[u], u < 2 ? h0 : h1, lo, hi);
      sts128(d + (4 * W + u) * kBlk + s0, lo);
      sts128(d + (4 * W + u) * kBlk + s1, hi);
    }
    if constexpr (ROPE) {
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int q = (t >> 3) + 16 * u;
        sts128(T + 8 * kBlk + q * 128 + (((t & 7) ^ (q & 7)) << 4), rope[u]);
      }
    }
  }
};
// The refill's second half: convert + store, release the ring slot, publish the column blocks.
template <int W, bool ROPE>
__device__ __forceinline__ void fill_store(const Refill<W, ROPE>& f, uint32_t T, int tw, uint64_t* bars, uint64_t* empty) {
  f.store(T, tw);
  sm90::mbar_arrive(empty);  // this thread's reads of the slot are done (their values are stored)
  sm90::fence_proxy_async();
#pragma unroll
  for (int cb = 4 * W; cb < 4 * W + 4; ++cb) sm90::mbar_arrive(&bars[cb]);
  if constexpr (ROPE) sm90::mbar_arrive(&bars[8]);
}

__global__ void __launch_bounds__(256, 1)
    mla_decode_fp8_ring_kernel(MqaArgs a, const uint8_t* __restrict__ cache, const int4* __restrict__ work, int pf) {
  using namespace sm90;
  extern __shared__ uint8_t smem_raw[];
  // 1024-B aligned by pointer arithmetic on the shared array (not through an integer cast), so the
  // compiler keeps the shared address space: the exchange rows and P stores are ld/st.shared, not generic
  uint8_t* smem = smem_raw + ((1024u - (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) & 1023u)) & 1023u);
  const uint32_t sb = saddr(smem);
  float* sSc0 = reinterpret_cast<float*>(smem + kOffF);
  float* sM0 = sSc0 + 64;
  float* sSc1 = sM0 + 64;
  float* sM1 = sSc1 + 64;
  float* sLL = sM1 + 64;
  float* sLR = sLL + 64;
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + kOffBar);  // [stage * 9 + column block]
  uint64_t* full = bar + 18;
  uint64_t* empty = full + kRing;

  const int4 wk = work[blockIdx.y];
  const int qi = wk.x, rb = wk.y, re = wk.z, slot = wk.w;
  const int head0 = blockIdx.x * 64, H = a.H;
  const int tid = threadIdx.x, wg = tid >> 7, tw = tid & 127, lane = tid & 31, w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const int rA = 16 * w4 + g, rB = rA + 8;
  const int ntiles = (re - rb + kT - 1) / kT;
  const int npairs = (ntiles + 1) / 2;
  const int* bt = a.block_table + static_cast<size_t>(qi) * a.max_pages;
  const int ps = a.page_size;
  const int pft = 2 * pf;  // L2 prefetch distance in 32-token tiles (pf is in 64-token pages)
  uint8_t* sP0 = smem + kOffP;
  uint8_t* sP1 = smem + kOffP + 8192;
  const uint32_t kv0 = sb + kOffK, kv1 = sb + kOffK + kStage, sp0 = sb + kOffP, sp1 = sp0 + 8192;
  auto tile_base = [&](int j) {
    const int tok = rb + kT * j;
    const long row = static_cast<long>(bt[tok / ps]) * ps + tok % ps;
    return cache + row * kMlaFp8TokenBytes;
  };
  auto tile_valid = [&](int j) { return min(kT, re - rb - kT * j); };
  auto prefetch = [&](int j) {
    if (j < ntiles) prefetch_l2(tile_base(j), tile_valid(j) * kMlaFp8TokenBytes);
  };
  // producer, called by a whole warp: tile t into ring slot t % 3 once its previous tile is released
  auto issue = [&](int t) {
    if (t < ntiles) {
      const int r = t % kRing, k = t / kRing;
      if (k > 0) mbar_wait_uniform(&empty[r], (k - 1) & 1);
      if (lane == 0) {
        const uint32_t bytes = tile_valid(t) * kMlaFp8TokenBytes;
        mbar_expect_tx(&full[r], bytes);
        bulk_g2s(sb + kOffR + r * kSlot, tile_base(t), bytes, &full[r]);
      }
      __syncwarp();
    }
  };
  // a warpgroup's wait for tile t in the ring; returns the slot's shared-memory address
  auto ring_wait = [&](int t) {
    mbar_wait_uniform(&full[t % kRing], (t / kRing) & 1);
    return sb + kOffR + (t % kRing) * kSlot;
  };

  if (tid == 0) {
    for (int i = 0; i < 18; ++i) mbar_init(&bar[i], 128);
    for (int r = 0; r < kRing; ++r) {
      mbar_init(&full[r], 1);
      mbar_init(&empty[r], 256);
    }
    mbar_fence_init();
  }
  __syncthreads();
  if (tid < 32) {
    issue(0);
    issue(1);
    issue(2);
    if (lane == 0)
      for (int j = 3; j < pft + 3; ++j) prefetch(j);
  }
  {  // Q tile (padded heads read as zeros), swizzled
    const bf16* qsrc = a.q + (static_cast<size_t>(qi) * H + head0) * 576;
    for (int u = tid; u < 64 * 72; u += 256) {
      const int r = u / 72, ch = u % 72;
      const bool ok = head0 + r < H;
      cp_async16(smem + (ch >> 3) * 8192 + r * 128 + (((ch & 7) ^ (r & 7)) << 4),
                 qsrc + static_cast<size_t>(ok ? r : 0) * 576 + ch * 8, ok);
    }
    cp_async_commit();
  }
  // tiles 0 and 1 into the stages, each column block by the warpgroup that refills it later
  if (wg == 0) {
    if (ntiles > 0) {
      Refill<0, false> fa;
      fa.load(ring_wait(0), tile_valid(0), tw);
      fill_store(fa, kv0, tw, bar, &empty[0]);
    }
    if (ntiles > 1) {
      Refill<0, true> fb;
      fb.load(ring_wait(1), tile_valid(1), tw);
      fill_store(fb, kv1, tw, bar + 9, &empty[1]);
    }
  } else {
    if (ntiles > 0) {
      Refill<1, true> fd;
      fd.load(ring_wait(0), tile_valid(0), tw);
      fill_store(fd, kv0, tw, bar, &empty[0]);
    }
    if (ntiles > 1) {
      Refill<1, false> fc;
      fc.load(ring_wait(1), tile_valid(1), tw);
      fill_store(fc, kv1, tw, bar + 9, &empty[1]);
    }
  }
  cp_async_wait<0>();
  __syncthreads();
  if (tid < 32) issue(3);  // slot 0: tile 0 released by all 256 threads before the barrier
  float qk;  // S is computed with Q x 2^-k (the FP16 range; variant 6's factor); qk = 2^k
  {
    float amax = 0.f;
    for (int u = tid; u < 64 * 72; u += 256) {
      const uint4 v = reinterpret_cast<const uint4*>(smem)[u];
      const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
        amax = fmaxf(amax, fmaxf(fabsf(__uint_as_float(w[i] << 16)), fabsf(__uint_as_float(w[i] & 0xffff0000u))));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if (lane == 0) sLL[tid >> 5] = amax;
    __syncthreads();
    amax = sLL[0];
#pragma unroll
    for (int i = 1; i < 8; ++i) amax = fmaxf(amax, sLL[i]);
    int e = 0;
    frexpf(amax, &e);
    const int k = e > 15 ? e - 15 : 0;
    qk = ldexpf(1.f, k);
    const float qm = ldexpf(1.f, -k);
    for (int u = tid; u < 64 * 72; u += 256) {
      uint4 v = reinterpret_cast<const uint4*>(smem)[u];
      uint32_t w[4] = {v.x, v.y, v.z, v.w};
      if (u < 64 * 64) {  // NoPE blocks 0-7 -> FP16
#pragma unroll
        for (int i = 0; i < 4; ++i) w[i] = pack_f16(__uint_as_float(w[i] << 16) * qm, __uint_as_float(w[i] & 0xffff0000u) * qm);
      } else if (k > 0) {  // RoPE block stays BF16, x 2^-k
#pragma unroll
        for (int i = 0; i < 4; ++i) w[i] = pack_bf16(__uint_as_float(w[i] << 16) * qm, __uint_as_float(w[i] & 0xffff0000u) * qm);
      }
      reinterpret_cast<uint4*>(smem)[u] = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
  fence_proxy_async();
  __syncthreads();

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float s[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) s[i] = 0.f;
  uint32_t p[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) p[i] = 0u;
  float mA = kNegInf, mB = kNegInf, lA = 0.f, lB = 0.f;
  const float sl2 = a.sm_scale * kLog2e * qk;

  if (wg == 0) {
    // ---------------- warpgroup 0: S0, softmax 0, O_L; refills K0 0-3 and K1 0-3 + 8 ----------------
    if (ntiles > 0) {
      fence_regs(s);
      wg_fence();
      s_gemm<0, 9, 0>(s, sb, kv0, bar, 0);
      wg_commit();
      named_bar_arrive(7, 256);  // S0 issued: warpgroup 1 may issue S1
      wg_wait<0>();
      fence_regs(s);
    }
    for (int i = 0; i < npairs; ++i) {
      const int j0 = 2 * i, j1 = j0 + 1;
      const bool have1 = j1 < ntiles, next0 = j0 + 2 < ntiles, next1 = j1 + 2 < ntiles;
      const uint32_t par = i & 1;
      if (tw == 0) {
        prefetch(j0 + 3 + pft);
        prefetch(j1 + 3 + pft);
      }
      const int valid0 = tile_valid(j0);
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
      named_bar_arrive(1, 256);  // c0 and m0' ready for warpgroup 1
      scale_o(o, c0A, c0B);
      fence_regs(o);
      wg_fence();
      pv_gemm_rs(o, p, kv0, 0);  // P0 V0L, P0 from registers
      wg_commit();
      Refill<0, false> fa;  // K0 blocks 0-3 of tile j0+2: slot reads in flight through P0 V0L
      if (next0) fa.load(ring_wait(j0 + 2), tile_valid(j0 + 2), tw);
      wg_wait<0>();
      fence_regs(o);
      if (next0) {
        named_bar_sync(5, 128);  // P0 V0L done in every warp: K0 0-3 free
        fill_store(fa, kv0, tw, bar, &empty[(j0 + 2) % kRing]);
      }
      named_bar_sync(2, 256);  // c1, m1' from warpgroup 1
      const float c1A = sSc1[rA], c1B = sSc1[rB];
      mA = sM1[rA];
      mB = sM1[rB];
      lA *= c1A;
      lB *= c1B;
      store_p(sP0, p, c1A, c1B, true, rA, rB, t4);  // c1 P0 for warpgroup 1's c1 P0 V0R
      fence_proxy_async();
      named_bar_arrive(3, 256);  // c1 P0 ready for warpgroup 1
      scale_o(o, c1A, c1B);
      named_bar_sync(4, 256);  // warpgroup 1 stored P1 and issued c1 P0 V0R
      if (have1) {
#pragma unroll
        for (int cb = 0; cb < 4; ++cb) mbar_wait_uniform(&bar[9 + cb], par);
        fence_regs(o);
        wg_fence();
        pv_gemm_ss(o, sp1, kv1, 0);  // P1 V1L, P1 from sP1
        wg_commit();
      }
      if (next0) {
        wg_fence();
        s_gemm<0, 4, 0>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
        named_bar_arrive(7, 256);  // S0 blocks 0-3 issued: warpgroup 1 may issue S1
        if (next1) {
          Refill<0, true> fb;  // K1 blocks 0-3 + 8 of tile j1+2
          fb.load(ring_wait(j1 + 2), tile_valid(j1 + 2), tw);
          wg_wait<1>();  // P1 V1L done: K1 blocks 0-3 and 8 are free
          named_bar_sync(5, 128);
          fill_store(fb, kv1, tw, bar + 9, &empty[(j1 + 2) % kRing]);
        }
        s_gemm<4, 9, 0>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
      }
      wg_wait<0>();
      fence_regs(o);
      fence_regs(s);
    }
  } else {
    // ---------------- warpgroup 1: S1, softmax 1, O_R; refills K1 4-7 and K0 4-8; the producer warp ----------------
    for (int i = 0; i < npairs; ++i) {
      const int j0 = 2 * i, j1 = j0 + 1;
      const bool have1 = j1 < ntiles, next0 = j0 + 2 < ntiles, next1 = j1 + 2 < ntiles;
      const uint32_t par = i & 1;
      named_bar_sync(7, 256);  // S0 of this pair issued first (one arrival per pair)
      if (have1) {  // S1 over K1 blocks 4-7, 0-3, 8
        wg_fence();
        s_gemm<4, 8, 4>(s, sb, kv1, bar + 9, par);
        s_gemm<0, 4, 4>(s, sb, kv1, bar + 9, par);
        s_gemm<8, 9, 4>(s, sb, kv1, bar + 9, par);
        wg_commit();
        wg_wait<0>();
        fence_regs(s);
        if (w4 == 0) issue(j1 + 3);  // tile j1's slot: every refill of tile j1 arrived before its stage barriers
      }
      named_bar_sync(1, 256);  // c0, m0' from warpgroup 0
      const float c0A = sSc0[rA], c0B = sSc0[rB], m0A = sM0[rA], m0B = sM0[rB];
      float c1A = 1.f, c1B = 1.f, sumA = 0.f, sumB = 0.f;
      if (have1) {
        float mxA, mxB;
        tile_max_raw(s, tile_valid(j1), sl2, t4, mxA, mxB);
        mA = fmaxf(m0A, mxA);
        mB = fmaxf(m0B, mxB);
        c1A = (m0A == kNegInf) ? 0.f : fast_exp2(m0A - mA);
        c1B = (m0B == kNegInf) ? 0.f : fast_exp2(m0B - mB);
        tile_exp_fma(s, sl2, mA, mB, sumA, sumB);
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
#pragma unroll
      for (int cb = 4; cb < 9; ++cb) mbar_wait_uniform(&bar[cb], par);  // K0 4-8 (S0 waited on them too)
      scale_o(o, c0A * c1A, c0B * c1B);
      fence_regs(o);
      if (have1) {
        wg_fence();
        pv_gemm_rs(o, p, kv1, 1);  // P1 V1R, P1 from registers
        wg_commit();
        store_p(sP1, p, 1.f, 1.f, false, rA, rB, t4);  // P1 for warpgroup 0's P1 V1L
        fence_proxy_async();
      }
      named_bar_sync(3, 256);  // c1 P0 from warpgroup 0
      wg_fence();
      pv_gemm_ss(o, sp0, kv0, 1);  // c1 P0 V0R
      wg_commit();
      named_bar_arrive(4, 256);  // P1 stored, c1 P0 V0R issued
      if (have1 && next1) {
        Refill<1, false> fc;  // K1 blocks 4-7 of tile j1+2
        fc.load(ring_wait(j1 + 2), tile_valid(j1 + 2), tw);
        wg_wait<1>();  // P1 V1R done: K1 blocks 4-7 are free
        named_bar_sync(6, 128);
        fill_store(fc, kv1, tw, bar + 9, &empty[(j1 + 2) % kRing]);
      }
      if (next0) {
        Refill<1, true> fd;  // K0 blocks 4-8 of tile j0+2
        fd.load(ring_wait(j0 + 2), tile_valid(j0 + 2), tw);
        wg_wait<0>();  // c1 P0 V0R done: K0 blocks 4-8 are free
        fence_regs(o);
        named_bar_sync(6, 128);
        fill_store(fd, kv0, tw, bar, &empty[(j0 + 2) % kRing]);
        if (w4 == 0) issue(j0 + 5);  // tile j0+2's slot (warpgroup 0 released its part before barrier 3)
      } else {
        wg_wait<0>();
        fence_regs(o);
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
  const float l0 = sLL[rA] + sLR[rA], l1 = sLL[rB] + sLR[rB];
  wg_store::store_rows(a, o, mA, mB, l0, l1, head0, H, rA, rB, wg, t4, qi, slot);
}

}  // namespace servesim::attn::fp8ring
