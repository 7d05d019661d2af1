// servesim attention kernels: FP8-KV MLA decode, variant 11 (issue 12, fp8kv3): the BF16 kernel's
// "seesaw" (mla_seesaw_rs.cuh, mla_decode variant 12) over 16-bit KV stages that the two consumer
// warpgroups fill themselves from the FP8 cache (656 B per token, mla_fp8.cuh).
// Not a standalone header: compiled in mla_fp8_ss.cu only.
//
// Block = (64-head group, work item), 256 threads = two warpgroups, 1 CTA/SM. Shared memory as the
// BF16 seesaw: Q [64 x 576] (72 KB: NoPE part FP16 x 2^-k, RoPE block BF16, as variant 6), two
// 16-bit stages of one 64-token tile each (FP16 latent column blocks 0-7, BF16 RoPE block 8), the
// scale / max exchange rows and 18 mbarriers (one per stage and column block). Tiles in pairs (K0 =
// tile 2i in stage 0, K1 = tile 2i+1 in stage 1); warpgroup 0 owns O[:, 0:256] and S0 = Q K0^T,
// warpgroup 1 owns O[:, 256:512] and S1 = Q K1^T; the online softmax is split over the pair as in
// the BF16 seesaw (WG0: m0', c0, P0, O_L = c0 O_L + P0 V0L; WG1: m1', c1, P1, O_R = c0 c1 O_R +
// P1 V1R + (c1 P0) V0R; WG0: O_L = c1 O_L + P1 V1L), so one warpgroup's softmax runs while the
// other's GEMMs use the tensor core. All GEMMs on the latent are FP16 (E4M3 -> FP16 exact, scale
// by one HMUL2 per pair: variant 6's conversion), the RoPE k-steps of S BF16.
//
// What replaces the TMA page loads: each column block of a stage is refilled by the warpgroup that
// released it, at the point where the BF16 seesaw issued its TMA load (the same release order):
//   K0 blocks 0-3  by warpgroup 0 after P0 V0L        K1 blocks 0-3 + 8 by warpgroup 0 after P1 V1L
//   K1 blocks 4-7  by warpgroup 1 after P1 V1R        K0 blocks 4-8     by warpgroup 1 after c1 P0 V0R
// The 16-B loads of a refill (fp8k::ShareH chunk maps: 8 E4M3 chunks + 2 scale pairs, + 4 RoPE
// chunks) are issued right at the release by default (kEarly 0); issuing them earlier and holding
// them in registers (kEarly masks below) was slower in every measured form (fp8kv3 calls 2 and 4:
// ptxas spills 88-640 B at 255 registers, and even the spill-free mask 1 took 1.04x the time); the
// conversion and st.shared follow the loads. Each of the 128 threads then
// fences (generic -> async proxy) and arrives on the block's mbarrier (count 128); the S GEMMs
// wait per block exactly as on the TMA barriers. Rows past the context are written as zeros (no
// tail zeroing). Thread 0 prefetches the tiles pf ahead into L2 (cp.async.bulk.prefetch).
#pragma once
#include "attention/mla_fp8_impl.cuh"
#include "attention/wg_store.cuh"

namespace servesim::attn::fp8ss {
using namespace fp8k;
constexpr int kTile = 64 * 576 * 2;  // 73728 B
constexpr int kOffK = kTile;         // Q in [0, kTile), stage st at kOffK + st * kTile
constexpr int kOffF = 3 * kTile;     // floats: sc0[64], m0[64], sc1[64], m1[64], lL[64], lR[64]
constexpr int kOffBar = kOffF + 6 * 64 * 4;
constexpr int kSmem = kOffBar + 18 * 8 + 1024;  // + slack for 1024-B alignment
static_assert(kSmem <= 232448, "shared memory per block");

__device__ __forceinline__ void wgmma_m64n256k16_rs_tb_f16(float (&d)[128], const uint32_t (&a)[4], uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, {%128,%129,%130,%131}, %132, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
// S = Q K^T, one FP16 k-step, write-only accumulator (S's old registers are dead before it).
__device__ __forceinline__ void wgmma_m64n64k16_ss_f16_w(float (&d)[32], uint64_t da, uint64_t db) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, 0, 1, 1, 0, 0;\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]), "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31])
      : "l"(da), "l"(db));
}
// S (+)= Q K^T over column blocks [B0, B1) of a stage, each block waited on its mbarrier (parity
// par); FP16 k-steps on blocks 0-7, BF16 on the RoPE block 8; the first k-step of block FIRST (< 8)
// overwrites S and does not read it.
template <int B0, int B1, int FIRST>
__device__ __forceinline__ void s_gemm(float (&s)[32], uint32_t sq, uint32_t kv, uint64_t* bars, uint32_t par) {
  using namespace sm90;
#pragma unroll
  for (int cb = B0; cb < B1; ++cb) {
    mbar_wait_uniform(&bars[cb], par);
    wg_fence();
#pragma unroll
    for (int k4 = 0; k4 < 4; ++k4) {
      const uint32_t off = cb * 8192 + k4 * 32;
      const int acc = (cb != FIRST || k4 > 0) ? 1 : 0;
      if (cb < 8 && !acc)
        wgmma_m64n64k16_ss_f16_w(s, sw128_desc(sq + off, 16, 1024), sw128_desc(kv + off, 16, 1024));
      else if (cb < 8)
        wgmma_m64n64k16_ss_f16(s, sw128_desc(sq + off, 16, 1024), sw128_desc(kv + off, 16, 1024), acc);
      else
        wgmma_m64n64k16_ss(s, sw128_desc(sq + off, 16, 1024), sw128_desc(kv + off, 16, 1024), acc);
    }
  }
}
// O_half (+)= P V_half, P (f16) from registers: p[4 kk .. 4 kk + 3] is the A fragment of k-step kk.
__device__ __forceinline__ void pv_gemm_rs(float (&o)[128], const uint32_t (&p)[16], uint32_t kv, int h) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint32_t af[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
    wgmma_m64n256k16_rs_tb_f16(o, af, sm90::sw128_desc(kv + h * 4 * 8192 + kk * 2048, 8192, 1024), 1);
  }
}
// O_half (+)= P V_half, P [64 x 64] f16 over column block 8 of the stage.
__device__ __forceinline__ void pv_gemm_ss(float (&o)[128], uint32_t kv, int h) {
  using namespace sm90;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    wgmma_m64n256k16_ss_tb_f16(o, sw128_desc(kv + 8 * 8192 + kk * 32, 16, 1024), sw128_desc(kv + h * 4 * 8192 + kk * 2048, 8192, 1024), 1);
}
__device__ __forceinline__ void pack_p(uint32_t (&p)[16], const float (&s)[32]) {
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    p[2 * jj] = pack_f16(s[4 * jj], s[4 * jj + 1]);
    p[2 * jj + 1] = pack_f16(s[4 * jj + 2], s[4 * jj + 3]);
  }
}
__device__ __forceinline__ uint32_t scale_f16x2(uint32_t v, float f) {
  __half2 h;
  memcpy(&h, &v, 4);
  const float2 x = __half22float2(h);
  return pack_f16(x.x * f, x.y * f);
}
// packed P (times fA / fB per row when scale) -> the swizzled P tile at sp (rows rA / rB).
__device__ __forceinline__ void store_p(uint8_t* sp, const uint32_t (&p)[16], float fA, float fB, bool scale, int rA, int rB, int t4) {
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    *reinterpret_cast<uint32_t*>(sp + rA * 128 + ((jj ^ (rA & 7)) << 4) + 4 * t4) = scale ? scale_f16x2(p[2 * jj], fA) : p[2 * jj];
    *reinterpret_cast<uint32_t*>(sp + rB * 128 + ((jj ^ (rB & 7)) << 4) + 4 * t4) = scale ? scale_f16x2(p[2 * jj + 1], fB) : p[2 * jj + 1];
  }
}
// Row maxima of the raw S (masked only in a partial tile), returned log2-scaled (sl2 > 0).
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
// P = 2^(S sl2 - m_new): one FFMA + one ex2 per element.
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
// o[rows A] *= fA, o[rows B] *= fB; skipped when every factor of the warp is exactly 1.
__device__ __forceinline__ void scale_o(float (&o)[128], float fA, float fB) {
  if (__all_sync(0xffffffffu, fA == 1.f && fB == 1.f)) return;
#pragma unroll
  for (int q = 0; q < 32; ++q) {
    o[4 * q] *= fA; o[4 * q + 1] *= fA; o[4 * q + 2] *= fB; o[4 * q + 3] *= fB;
  }
}
// A refill's second half: dequantise + store the loaded chunks into the stage at T, make them
// visible to the async proxy and arrive on the column blocks' mbarriers (count 128 = one warpgroup).
template <int W, bool ROPE>
__device__ __forceinline__ void fill_store(const ShareH<W, ROPE>& f, uint32_t T, int tw, uint64_t* bars) {
  f.store(T, tw);
  sm90::fence_proxy_async();
#pragma unroll
  for (int cb = 4 * W; cb < 4 * W + 4; ++cb) sm90::mbar_arrive(&bars[cb]);
  if constexpr (ROPE) sm90::mbar_arrive(&bars[8]);
}

// kEarly (bit mask; 0 = the default, mla_fp8_ss.cu): which refills have their 16-B loads issued before
// the release (else right at it):
// 1 = K0 0-3 at the top of the pair (warpgroup 0), 2 = K1 0-3 + 8 after warpgroup 0's c1 P0 store,
// 4 = K1 4-7 at the top of the pair (warpgroup 1), 8 = K0 4-8 after warpgroup 1's P1 store. Early loads
// hide the load latency but hold 36-52 more registers (ptxas spills for 2, 4, 8 at 255 registers).
// 16 = K1 0-3 + 8 loaded right after barrier 4 (through P1 V1L), stored before S0 is issued (all of S0
// after the refill); 32 = K0 4-8 loaded right after warpgroup 1's K1 4-7 refill (through the rest of c1 P0 V0R).
template <int kEarly>
__global__ void __launch_bounds__(256, 1)
    mla_decode_fp8_seesaw_kernel(MqaArgs a, const uint8_t* __restrict__ cache, const int4* __restrict__ work, int pf) {
  using namespace sm90;
  extern __shared__ uint8_t smem_raw[];
  // kEarly bit 64 (fp8kv4): the 1024-B alignment by pointer arithmetic on the shared array, so the exchange
  // rows and P stores compile to ld/st.shared instead of generic ld/st (the integer cast loses the space)
  uint8_t* smem = (kEarly & 64) ? smem_raw + ((1024u - (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) & 1023u)) & 1023u)
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
  uint8_t* stg0 = smem + kOffK;
  uint8_t* stg1 = smem + kOffK + kTile;
  const uint32_t kv0 = sb + kOffK, kv1 = sb + kOffK + kTile;
  auto tile_base = [&](int j) {
    const int tok = rb + 64 * j;
    const long row = static_cast<long>(bt[tok / ps]) * ps + tok % ps;
    return cache + row * kMlaFp8TokenBytes;
  };
  auto tile_valid = [&](int j) { return min(64, re - rb - 64 * j); };
  auto prefetch = [&](int j) {
    if (j < ntiles) prefetch_l2(tile_base(j), (tile_valid(j) * kMlaFp8TokenBytes + 15) & ~15);
  };

  if (tid == 0) {
    for (int i = 0; i < 18; ++i) mbar_init(&bar[i], 128);
    mbar_fence_init();
    for (int j = 0; j < pf; ++j) prefetch(j);
  }
  __syncthreads();
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
  // tiles 0 and 1, each column block by the warpgroup that refills it later
  if (wg == 0) {
    ShareH<0, false> fa;
    ShareH<0, true> fb;
    if (ntiles > 0) fa.load(tile_base(0), tile_valid(0), tw);
    if (ntiles > 1) fb.load(tile_base(1), tile_valid(1), tw);
    if (ntiles > 0) fill_store(fa, kv0, tw, bar);
    if (ntiles > 1) fill_store(fb, kv1, tw, bar + 9);
  } else {
    ShareH<1, true> fd;
    ShareH<1, false> fc;
    if (ntiles > 0) fd.load(tile_base(0), tile_valid(0), tw);
    if (ntiles > 1) fc.load(tile_base(1), tile_valid(1), tw);
    if (ntiles > 0) fill_store(fd, kv0, tw, bar);
    if (ntiles > 1) fill_store(fc, kv1, tw, bar + 9);
  }
  cp_async_wait<0>();
  __syncthreads();
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
  float s[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) s[i] = 0.f;
  uint32_t p[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) p[i] = 0u;
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
        prefetch(j0 + pf);
        prefetch(j1 + pf);
      }
      ShareH<0, false> fa;  // K0 blocks 0-3 of tile j0+2
      if (kEarly & 1)
        if (next0) fa.load(tile_base(j0 + 2), tile_valid(j0 + 2), tw);
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
      wg_wait<0>();
      fence_regs(o);
      if (next0) {
        if (!(kEarly & 1)) fa.load(tile_base(j0 + 2), tile_valid(j0 + 2), tw);
        named_bar_sync(5, 128);  // P0 V0L done in every warp: K0 0-3 free
        fill_store(fa, kv0, tw, bar);
      }
      named_bar_sync(2, 256);  // c1, m1' from warpgroup 1
      const float c1A = sSc1[rA], c1B = sSc1[rB];
      mA = sM1[rA];
      mB = sM1[rB];
      lA *= c1A;
      lB *= c1B;
      store_p(stg0 + 8 * 8192, p, c1A, c1B, true, rA, rB, t4);  // c1 P0 over block 8 (S0 read it)
      fence_proxy_async();
      named_bar_arrive(3, 256);  // c1 P0 ready for warpgroup 1
      ShareH<0, true> fb;  // K1 blocks 0-3 + 8 of tile j1+2
      if (kEarly & 2)
        if (next1) fb.load(tile_base(j1 + 2), tile_valid(j1 + 2), tw);
      scale_o(o, c1A, c1B);
      named_bar_sync(4, 256);  // warpgroup 1 stored P1 and issued c1 P0 V0R
      if (kEarly & 16)
        if (next1) fb.load(tile_base(j1 + 2), tile_valid(j1 + 2), tw);  // in flight through P1 V1L
      if (have1) {
#pragma unroll
        for (int cb = 0; cb < 4; ++cb) mbar_wait_uniform(&bar[9 + cb], par);
        fence_regs(o);
        wg_fence();
        pv_gemm_ss(o, kv1, 0);  // P1 V1L, P1 from shared memory
        wg_commit();
      }
      if ((kEarly & 16) && next0) {  // K1 0-3 + 8 refilled before S0 is issued (s dead while fb is held)
        wg_wait<0>();  // P1 V1L done
        if (next1) {
          named_bar_sync(5, 128);
          fill_store(fb, kv1, tw, bar + 9);
        }
        wg_fence();
        s_gemm<0, 4, 0>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
        named_bar_arrive(7, 256);
        s_gemm<4, 9, 0>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
      } else if (next0) {
        wg_fence();
        s_gemm<0, 4, 0>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
        named_bar_arrive(7, 256);  // S0 blocks 0-3 issued: warpgroup 1 may issue S1
        wg_wait<1>();              // P1 V1L done: K1 blocks 0-3 and 8 are free
        if (next1) {
          if (!(kEarly & 18)) fb.load(tile_base(j1 + 2), tile_valid(j1 + 2), tw);
          named_bar_sync(5, 128);
          fill_store(fb, kv1, tw, bar + 9);
        }
        s_gemm<4, 9, 0>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
      }
      wg_wait<0>();
      fence_regs(o);
      fence_regs(s);
    }
  } else {
    // ---------------- warpgroup 1: S1, softmax 1, O_R; refills K1 4-7 and K0 4-8 ----------------
    for (int i = 0; i < npairs; ++i) {
      const int j0 = 2 * i, j1 = j0 + 1;
      const bool have1 = j1 < ntiles, next0 = j0 + 2 < ntiles, next1 = j1 + 2 < ntiles;
      const uint32_t par = i & 1;
      ShareH<1, false> fc;  // K1 blocks 4-7 of tile j1+2
      if (kEarly & 4)
        if (next1) fc.load(tile_base(j1 + 2), tile_valid(j1 + 2), tw);
      named_bar_sync(7, 256);  // S0 of this pair issued first (one arrival per pair)
      if (have1) {  // S1 over K1 blocks 4-7, 0-3, 8
        wg_fence();
        s_gemm<4, 8, 4>(s, sb, kv1, bar + 9, par);
        s_gemm<0, 4, 4>(s, sb, kv1, bar + 9, par);
        s_gemm<8, 9, 4>(s, sb, kv1, bar + 9, par);
        wg_commit();
        wg_wait<0>();
        fence_regs(s);
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
        named_bar_sync(6, 128);  // every warp's S1 has read column block 8
        store_p(stg1 + 8 * 8192, p, 1.f, 1.f, false, rA, rB, t4);  // P1 for warpgroup 0's P1 V1L
        fence_proxy_async();
      }
      ShareH<1, true> fd;  // K0 blocks 4-8 of tile j0+2
      if (kEarly & 8)
        if (next0) fd.load(tile_base(j0 + 2), tile_valid(j0 + 2), tw);
      named_bar_sync(3, 256);  // c1 P0 from warpgroup 0
      wg_fence();
      pv_gemm_ss(o, kv0, 1);  // c1 P0 V0R
      wg_commit();
      named_bar_arrive(4, 256);  // P1 stored, c1 P0 V0R issued
      if (have1) {
        wg_wait<1>();  // P1 V1R done: K1 blocks 4-7 are free
        if (next1) {
          if (!(kEarly & 4)) fc.load(tile_base(j1 + 2), tile_valid(j1 + 2), tw);
          named_bar_sync(6, 128);
          fill_store(fc, kv1, tw, bar + 9);
        }
      }
      if (kEarly & 32)
        if (next0) fd.load(tile_base(j0 + 2), tile_valid(j0 + 2), tw);  // in flight through the rest of c1 P0 V0R
      wg_wait<0>();  // c1 P0 V0R done: K0 blocks 4-8 are free
      fence_regs(o);
      if (next0) {
        if (!(kEarly & 40)) fd.load(tile_base(j0 + 2), tile_valid(j0 + 2), tw);
        named_bar_sync(6, 128);
        fill_store(fd, kv0, tw, bar);
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

}  // namespace servesim::attn::fp8ss
