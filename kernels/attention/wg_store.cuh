// servesim attention kernels: the last step shared by the wgmma decode kernels of 64-head groups
// (mla_decode_wgmma_kernel, mla_decode_wgmma4_kernel, the seesaw kernels and v4_attn_wgmma_kernel, compiled in
// mqa.cu from mla_wgmma.cuh, mla_wgmma4.cuh, mla_seesaw*.cuh and v4_attn_wgmma.cuh; v4_attn_ws_kernel in dsv4.cu's
// part dsv4_attn_ws.cuh):
// one consumer thread's two output rows (rA, rB of the CTA's group) normalised and stored.
#pragma once
#include "attention/mqa.cuh"

#include <cmath>
#include <cstddef>

namespace servesim::attn::wg_store {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -INFINITY;

/// o: the thread's accumulator of the m64n256 P·V fragments of its warpgroup wg (columns
/// wg·256 + 8i + 2·t4, +1; rows rA at o[4i], o[4i+1] and rB at o[4i+2], o[4i+3]); m0/m1, l0/l1: the
/// rows' running max (log2 units) and sum, already reduced over the quad. slot < 0: the whole key
/// list of query qi was this CTA's: the attention sink (a.sink, natural-log units; null for MLA) joins the
/// normaliser, BF16 out[qi, head, 512] and lse (natural log) are written. slot >= 0: one split,
/// FP32 o_part[slot, head, 512] and lse_part (log2) for mla_combine. Heads >= H are not written.
__device__ __forceinline__ void store_rows(const MqaArgs& a, const float (&o)[128], float m0, float m1, float l0, float l1, int head0,
                                           int H, int rA, int rB, int wg, int t4, int qi, int slot) {
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

/// store_rows through shared memory (issue 12, fifteenth session, helper v4e; v4_attn_ws_kernel's EP form):
/// the same values, but each thread first writes its fragments into `stage` (slot < 0: BF16 rows of
/// 1024 B, 64 KB; slot >= 0: FP32 rows of 2048 B, 128 KB; 16-B chunk k of row r at ((k ^ (r & 7)) << 4):
/// conflict-free), the 256 consumer threads meet at named barrier bar_id, then thread ctid (0..255)
/// stores 16-B chunks, 64 consecutive threads per 1024-B row (coalesced STG.128 instead of 32-bit /
/// 64-bit stores with a 1-KB row stride between lanes). stage must be free (no wgmma still reading it).
__device__ __forceinline__ void store_rows_staged(const MqaArgs& a, const float (&o)[128], float m0, float m1, float l0, float l1,
                                                  int head0, int H, int rA, int rB, int wg, int t4, int qi, int slot,
                                                  uint8_t* stage, int ctid, int bar_id) {
  const int hA = head0 + rA, hB = head0 + rB;
  const bool okA = hA < H, okB = hB < H;
  const int nrow = H - head0 < 64 ? H - head0 : 64;
  if (slot < 0) {
    const float sA = (a.sink && okA) ? a.sink[hA] * kLog2e : kNegInf;
    const float sB = (a.sink && okB) ? a.sink[hB] * kLog2e : kNegInf;
    const float MA = fmaxf(m0, sA), MB = fmaxf(m1, sB);
    const float wA = (m0 == kNegInf) ? 0.f : exp2f(m0 - MA), wB = (m1 == kNegInf) ? 0.f : exp2f(m1 - MB);
    const float dA = l0 * wA + (sA == kNegInf ? 0.f : exp2f(sA - MA));
    const float dB = l1 * wB + (sB == kNegInf ? 0.f : exp2f(sB - MB));
    const float fA = dA > 0.f ? wA / dA : 0.f, fB = dB > 0.f ? wB / dB : 0.f;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int k = wg * 32 + i;
      *reinterpret_cast<uint32_t*>(stage + rA * 1024 + ((k ^ (rA & 7)) << 4) + 4 * t4) = pack_bf16(o[4 * i] * fA, o[4 * i + 1] * fA);
      *reinterpret_cast<uint32_t*>(stage + rB * 1024 + ((k ^ (rB & 7)) << 4) + 4 * t4) = pack_bf16(o[4 * i + 2] * fB, o[4 * i + 3] * fB);
    }
    if (a.lse && wg == 0 && t4 == 0) {
      if (okA) a.lse[static_cast<size_t>(qi) * H + hA] = dA > 0.f ? (MA + log2f(dA)) / kLog2e : kNegInf;
      if (okB) a.lse[static_cast<size_t>(qi) * H + hB] = dB > 0.f ? (MB + log2f(dB)) / kLog2e : kNegInf;
    }
    asm volatile("bar.sync %0, 256;\n" ::"r"(bar_id) : "memory");
    bf16* out = a.out + (static_cast<size_t>(qi) * H + head0) * 512;
#pragma unroll 4
    for (int n = 0; n < 16; ++n) {
      const int u = ctid + 256 * n, r = u >> 6, k = u & 63;
      if (r < nrow)
        *reinterpret_cast<uint4*>(out + static_cast<size_t>(r) * 512 + 8 * k) =
            *reinterpret_cast<const uint4*>(stage + r * 1024 + ((k ^ (r & 7)) << 4));
    }
  } else {
    const float fA = l0 > 0.f ? 1.f / l0 : 0.f, fB = l1 > 0.f ? 1.f / l1 : 0.f;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int k = wg * 64 + 2 * i + (t4 >> 1), h = (t4 & 1) * 8;
      *reinterpret_cast<float2*>(stage + rA * 2048 + ((k ^ (rA & 7)) << 4) + h) = make_float2(o[4 * i] * fA, o[4 * i + 1] * fA);
      *reinterpret_cast<float2*>(stage + rB * 2048 + ((k ^ (rB & 7)) << 4) + h) = make_float2(o[4 * i + 2] * fB, o[4 * i + 3] * fB);
    }
    if (wg == 0 && t4 == 0) {
      if (okA) a.lse_part[static_cast<size_t>(slot) * H + hA] = l0 > 0.f ? m0 + log2f(l0) : kNegInf;
      if (okB) a.lse_part[static_cast<size_t>(slot) * H + hB] = l1 > 0.f ? m1 + log2f(l1) : kNegInf;
    }
    asm volatile("bar.sync %0, 256;\n" ::"r"(bar_id) : "memory");
    float* out = a.o_part + (static_cast<size_t>(slot) * H + head0) * 512;
#pragma unroll 4
    for (int n = 0; n < 32; ++n) {
      const int u = ctid + 256 * n, r = u >> 7, k = u & 127;
      if (r < nrow)
        *reinterpret_cast<float4*>(out + static_cast<size_t>(r) * 512 + 4 * k) =
            *reinterpret_cast<const float4*>(stage + r * 2048 + ((k ^ (r & 7)) << 4));
    }
  }
}

}  // namespace servesim::attn::wg_store
