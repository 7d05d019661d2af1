// servesim attention kernels: internals shared by the FP8-KV MLA decode kernels (mla_fp8.cu:
// variant 4, the default; mla_fp8_ws.cu: variant 5). Not a public header: shared-memory layout
// constants, the E4M3 -> BF16 conversion and the per-thread chunk maps of a 64-token tile.
#pragma once
#include "attention/hopper.cuh"
#include "attention/mla_fp8.cuh"

#include <cmath>
#include <cstring>

namespace servesim::attn::fp8k {
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -INFINITY;

constexpr int kTile = 64 * 576 * 2;  // 73728 B: one 64-token BF16 tile
constexpr int kOffKV = kTile;        // Q occupies [0, kTile)
constexpr int kOffP = 3 * kTile;
constexpr int kOffF = kOffP + 64 * 64 * 2;  // alpha[64], m[64], l[64]
constexpr int kSmem = kOffF + 1024 + 1024;  // + slack for 1024-B alignment
static_assert(kSmem <= 232448, "shared memory per block");
// A 64-token tile in 16-B chunks: 2048 E4M3 chunks (n: kq = n & 3, token r = (n >> 2) & 63,
// column block kg = n >> 8, i.e. chunk k = 4 kg + kq of the token), 512 RoPE chunks (m: kq = m & 7,
// r = m >> 3). A warp's 32 chunks then cover 8 (4) tokens x 4 (8) chunks: 8 x 64 B (4 x 128 B)
// of global memory and every 16-B bank group of the swizzled rows once per 4 lanes (no conflicts).
constexpr int kNopeChunks = 2048, kRopeChunks = 512;

__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
}
__device__ __forceinline__ void sts128(uint32_t addr, const uint4& v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ uint32_t e4m3x2_scaled_bf16x2(uint16_t two, float sc) {
  uint32_t h;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h) : "h"(two));
  __half2 hh;
  memcpy(&hh, &h, 4);
  const float2 f = __half22float2(hh);
  return pack_bf16(f.x * sc, f.y * sc);
}
// 4 E4M3 values x scale -> 4 BF16 values (the 16-bit halves taken by mov, no shifts).
__device__ __forceinline__ void convert4(uint32_t x, float sc, uint32_t& lo, uint32_t& hi) {
  uint16_t a, b;
  asm("mov.b32 {%0, %1}, %2;\n" : "=h"(a), "=h"(b) : "r"(x));
  lo = e4m3x2_scaled_bf16x2(a, sc);
  hi = e4m3x2_scaled_bf16x2(b, sc);
}
// 16 E4M3 values x scale -> 16 BF16 values (two 16-B chunks).
__device__ __forceinline__ void convert16(const uint4& v, float sc, uint4& lo, uint4& hi) {
  convert4(v.x, sc, lo.x, lo.y);
  convert4(v.y, sc, lo.z, lo.w);
  convert4(v.z, sc, hi.x, hi.y);
  convert4(v.w, sc, hi.z, hi.w);
}
// One warpgroup's share of a tile: E4M3 chunks n = 1024 W + 128 u + t (u < 8, t = thread in the
// warpgroup), i.e. column blocks kg = 4 W + u/2, tokens r = t/4 + 32 (u % 2), chunk t % 4 of the
// block's 4 per token; with ROPE also RoPE chunks m = 128 u + t (u < 4): tokens t/8 + 16 u, chunk
// t % 8. Every address is a per-thread base plus a compile-time offset; the swizzle (r % 8) is
// the same for all of a thread's chunks.
// The RoPE block of a tile (BF16, copied as is; Share and ShareH with ROPE): thread t's chunks
// m = 128 u + t (u < 4), tokens t/8 + 16 u, chunk t % 8; rows past `valid` load as zeros. T: the
// shared-memory address of the BF16 tile (its RoPE block follows the 8 column blocks of 8192 B).
__device__ __forceinline__ void load_rope(uint4 (&rope)[4], const uint8_t* base, int valid, int t) {
  const int q0 = t >> 3;
  const uint8_t* gr = base + q0 * kMlaFp8TokenBytes + kMlaFp8RopeOff + 16 * (t & 7);
#pragma unroll
  for (int u = 0; u < 4; ++u)
    rope[u] = q0 + 16 * u < valid ? __ldg(reinterpret_cast<const uint4*>(gr + 16 * u * kMlaFp8TokenBytes)) : make_uint4(0, 0, 0, 0);
}
__device__ __forceinline__ void store_rope(const uint4 (&rope)[4], uint32_t T, int t) {
  const int q0 = t >> 3;
  const uint32_t dr = T + 8 * 8192 + q0 * 128 + (((t & 7) ^ (q0 & 7)) << 4);
#pragma unroll
  for (int u = 0; u < 4; ++u) sts128(dr + u * 2048, rope[u]);
}

template <int W, bool ROPE>
struct Share {
  static constexpr int kN = 8, kR = ROPE ? 4 : 0;
  uint4 raw[kN];
  float sc[kN];
  uint4 rope[kR > 0 ? kR : 1];
  __device__ __forceinline__ void load(const uint8_t* base, int valid, int t) {
    const int r0 = t >> 2;
    const uint8_t* g = base + r0 * kMlaFp8TokenBytes;
#pragma unroll
    for (int u = 0; u < kN; ++u) {
      const int kg = 4 * W + (u >> 1), half = u & 1;
      const uint8_t* tok = g + half * 32 * kMlaFp8TokenBytes;
      if (r0 + 32 * half < valid) {
        raw[u] = __ldg(reinterpret_cast<const uint4*>(tok + 64 * kg + 16 * (t & 3)));
        sc[u] = __ldg(reinterpret_cast<const float*>(tok + kMlaFp8ScaleOff + 4 * (kg >> 1)));
      } else {
        raw[u] = make_uint4(0, 0, 0, 0);
        sc[u] = 0.f;
      }
    }
    if constexpr (ROPE) load_rope(rope, base, valid, t);
  }
  // T: shared-memory address of the BF16 tile.
  __device__ __forceinline__ void store(uint32_t T, int t) const {
    const int r0 = t >> 2, c = 2 * (t & 3);
    const uint32_t d = T + r0 * 128, s0 = (c ^ (r0 & 7)) << 4, s1 = ((c + 1) ^ (r0 & 7)) << 4;
#pragma unroll
    for (int u = 0; u < kN; ++u) {
      const int kg = 4 * W + (u >> 1), half = u & 1;
      uint4 lo, hi;
      convert16(raw[u], sc[u], lo, hi);
      sts128(d + kg * 8192 + half * 4096 + s0, lo);
      sts128(d + kg * 8192 + half * 4096 + s1, hi);
    }
    if constexpr (ROPE) store_rope(rope, T, t);
  }
};
// Warpgroup w dequantises the column blocks its own P V reads (w = 0: blocks 0-3; w = 1: 4-7 and
// the RoPE block 8): once its P V(j) is done it may overwrite them with tile j+2 without waiting.
using Share0 = Share<0, false>;
using Share1 = Share<1, true>;
static_assert(2 * 128 * 8 == kNopeChunks && 128 * 4 == kRopeChunks, "shares cover a tile");

// ---- variant 6: the GEMMs in FP16 (E4M3 -> FP16 is exact and one instruction per pair) ----
// An E4M3 pair becomes an f16x2 by one cvt (F2FP unpack) and takes its scale by one HMUL2
// (mul.rn.f16x2): 1 instruction per value instead of ~3 (unpack, 2 x f16 -> f32, 2 x FMUL, BF16
// pack per pair). The NoPE part of Q and P are then FP16 too (Q converted once per CTA, with a
// power-of-2 factor that keeps it inside the FP16 range); the RoPE block stays BF16 (its own
// wgmma.bf16 steps accumulate into the same fp32 S). Range: dequantised latent values must be
// FP16-representable (|v| < 65504; values below 2^-14 keep absolute precision 2^-24).
__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ uint32_t e4m3x2_scaled_f16x2(uint16_t two, uint32_t sc2) {
  uint32_t h, r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h) : "h"(two));
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(r) : "r"(h), "r"(sc2));
  return r;
}
__device__ __forceinline__ void convert16h(const uint4& v, uint32_t sc2, uint4& lo, uint4& hi) {
  uint16_t a, b;
  asm("mov.b32 {%0, %1}, %2;\n" : "=h"(a), "=h"(b) : "r"(v.x));
  lo.x = e4m3x2_scaled_f16x2(a, sc2); lo.y = e4m3x2_scaled_f16x2(b, sc2);
  asm("mov.b32 {%0, %1}, %2;\n" : "=h"(a), "=h"(b) : "r"(v.y));
  lo.z = e4m3x2_scaled_f16x2(a, sc2); lo.w = e4m3x2_scaled_f16x2(b, sc2);
  asm("mov.b32 {%0, %1}, %2;\n" : "=h"(a), "=h"(b) : "r"(v.z));
  hi.x = e4m3x2_scaled_f16x2(a, sc2); hi.y = e4m3x2_scaled_f16x2(b, sc2);
  asm("mov.b32 {%0, %1}, %2;\n" : "=h"(a), "=h"(b) : "r"(v.w));
  hi.z = e4m3x2_scaled_f16x2(a, sc2); hi.w = e4m3x2_scaled_f16x2(b, sc2);
}
// The same chunk map as Share; the 4 distinct scales of a thread's chunks (2 column-block pairs x
// 2 tokens) come in 2 8-B loads, converted to f16x2 once per tile.
template <int W, bool ROPE>
struct ShareH {
  static constexpr int kN = 8, kR = ROPE ? 4 : 0;
  uint4 raw[kN];
  float2 sc[2];  // token r0 + 32 half: scales 2W, 2W + 1
  uint4 rope[kR > 0 ? kR : 1];
  __device__ __forceinline__ void load(const uint8_t* base, int valid, int t) {
    const int r0 = t >> 2;
    const uint8_t* g = base + r0 * kMlaFp8TokenBytes;
#pragma unroll
    for (int half = 0; half < 2; ++half)
      sc[half] = r0 + 32 * half < valid
                     ? __ldg(reinterpret_cast<const float2*>(g + half * 32 * kMlaFp8TokenBytes + kMlaFp8ScaleOff + 8 * W))
                     : make_float2(0.f, 0.f);
#pragma unroll
    for (int u = 0; u < kN; ++u) {
      const int kg = 4 * W + (u >> 1), half = u & 1;
      const uint8_t* tok = g + half * 32 * kMlaFp8TokenBytes;
      raw[u] = r0 + 32 * half < valid ? __ldg(reinterpret_cast<const uint4*>(tok + 64 * kg + 16 * (t & 3)))
                                      : make_uint4(0, 0, 0, 0);
    }
    if constexpr (ROPE) load_rope(rope, base, valid, t);
  }
  __device__ __forceinline__ void store(uint32_t T, int t) const {
    const int r0 = t >> 2, c = 2 * (t & 3);
    const uint32_t d = T + r0 * 128, s0 = (c ^ (r0 & 7)) << 4, s1 = ((c + 1) ^ (r0 & 7)) << 4;
    uint32_t h[2][2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      h[half][0] = pack_f16(sc[half].x, sc[half].x);
      h[half][1] = pack_f16(sc[half].y, sc[half].y);
    }
#pragma unroll
    for (int u = 0; u < kN; ++u) {
      const int kg = 4 * W + (u >> 1), half = u & 1;
      uint4 lo, hi;
      convert16h(raw[u], h[half][u >> 2], lo, hi);
      sts128(d + kg * 8192 + half * 4096 + s0, lo);
      sts128(d + kg * 8192 + half * 4096 + s1, hi);
    }
    if constexpr (ROPE) store_rope(rope, T, t);
  }
};
using ShareH0 = ShareH<0, false>;
using ShareH1 = ShareH<1, true>;

// wgmma with FP16 operands (same shapes and layouts as hopper.cuh's BF16 ones).
__device__ __forceinline__ void wgmma_m64n64k16_ss_f16(float (&d)[32], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_m64n256k16_ss_tb_f16(float (&d)[128], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, 0, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db), "r"(scale_d));
}

}  // namespace servesim::attn::fp8k
