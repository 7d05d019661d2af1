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
    if constexpr (ROPE) {
      const int q0 = t >> 3;
      const uint8_t* gr = base + q0 * kMlaFp8TokenBytes + kMlaFp8RopeOff + 16 * (t & 7);
#pragma unroll
      for (int u = 0; u < kR; ++u)
        rope[u] = q0 + 16 * u < valid ? __ldg(reinterpret_cast<const uint4*>(gr + 16 * u * kMlaFp8TokenBytes))
                                      : make_uint4(0, 0, 0, 0);
    }
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
    if constexpr (ROPE) {
      const int q0 = t >> 3;
      const uint32_t dr = T + 8 * 8192 + q0 * 128 + (((t & 7) ^ (q0 & 7)) << 4);
#pragma unroll
      for (int u = 0; u < kR; ++u) sts128(dr + u * 2048, rope[u]);
    }
  }
};
// Warpgroup w dequantises the column blocks its own P V reads (w = 0: blocks 0-3; w = 1: 4-7 and
// the RoPE block 8): once its P V(j) is done it may overwrite them with tile j+2 without waiting.
using Share0 = Share<0, false>;
using Share1 = Share<1, true>;
static_assert(2 * 128 * 8 == kNopeChunks && 128 * 4 == kRopeChunks, "shares cover a tile");


}  // namespace servesim::attn::fp8k
