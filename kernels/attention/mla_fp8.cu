// servesim attention kernels: MLA absorbed decode over the paged FP8 latent cache (mla_fp8.cuh).
//
// Block = (64-head group, work item of the plan), 256 threads = two warpgroups, 1 CTA/SM.
// Shared memory (1024-B aligned, operand tiles in the 128-B swizzled wgmma layout of hopper.cuh):
// Q [64 x 576] bf16 (72 KB, cp.async once, padded heads zero), two BF16 KV tiles [64 x 576]
// (72 KB each), P [64 x 64] bf16, per-row alpha / m / l. There is no raw FP8 staging buffer: a
// 64-token tile is 41,984 contiguous bytes of one page (page_size % 64 == 0 and every work item
// starts at a multiple of 64), read with 16-B loads straight into registers.
//
// Pipeline per 64-token tile j (tile j in KV buffer j%2, tile j+1 already dequantised in the other).
// Warpgroup w owns the column blocks its own P V reads (w = 0: V columns 0-255; w = 1: 256-511 and
// the RoPE block), loads tile j+2's 16-B chunks of them into registers at the top of iteration j,
// and stores them, dequantised (E4M3 -> fp32 x scale -> BF16), as soon as its own P V(j) is done:
//   warpgroup 0: [loads] softmax of S(j) (issued in iteration j-1) -> P, alpha -> barrier 1 ->
//                rescale O, P V(j) on blocks 0-3, S(j+1) on the other buffer (async) -> wait for
//                P V(j) only -> dequantise + store blocks 0-3 of tile j+2 (S(j+1) still running)
//                -> wait S(j+1) -> barrier 2 (warpgroup 1's P V(j) done) -> softmax(j+1) ...
//   warpgroup 1: [loads] barrier 1 -> rescale O, P V(j) on blocks 4-7 -> wait -> arrive barrier 2
//                -> dequantise + store blocks 4-8 of tile j+2 -> barrier 1 of tile j+1
// Thread 0 prefetches tile j+4 into L2 (cp.async.bulk.prefetch). Rows past the context in the last
// tile are stored as zeros (never read: a NaN there would reach O as 0 x NaN).
// mla_decode_fp8_kernel<true> is variant 6, the default since the FP8-KV second pass (NOTES.md): the same pipeline
// with the GEMMs in FP16 (E4M3 -> FP16 exact, one cvt per pair, scale by one HMUL2 per pair; Q's
// NoPE part converted once per CTA with a power-of-2 factor, P FP16, the RoPE block BF16), 3.6 us per
// tile at H=64, 512 x 4K (2.7% faster than variant 4 over the table, more accurate). <false> is
// variant 4 (E4M3 -> fp32 x scale -> BF16; 3.7-3.8 us per tile). Earlier versions (NOTES.md): v1
// (8854a6d) 5.7 us per tile, v2 (7fb203d) 4.2, v3 (528c521) 4.0; the BF16 kernel 2.8-2.9 us.
// Variants 7-10 (da4c335, 732ef02; not kept, NOTES.md FP8-KV second pass) were no faster than 6.
// Variant 5 (mla_decode_fp8_ws_kernel below): a third, producer warpgroup dequantises every tile
// while the two consumers run softmax and GEMMs; correct but 5.3 us per tile (load-latency-bound
// with 56 registers per producer thread).
#include "attention/mla_fp8_impl.cuh"

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <type_traits>

namespace servesim::attn {

// variant 5 (mla_fp8_ws.cu)
void launch_mla_fp8_ws(const MqaArgs& a, const uint8_t* cache_fp8, const MqaPlan& plan, cudaStream_t s);
// variant 11 (mla_fp8_ss.cu / mla_fp8_seesaw.cuh)
void launch_mla_fp8_seesaw(const MqaArgs& a, const uint8_t* cache_fp8, const MqaPlan& plan, int pf, cudaStream_t s);
// variant 12 (mla_fp8_ring.cu / mla_fp8_ring.cuh): variant 11 on 32-token tiles from a bulk-copy FP8 ring
void launch_mla_fp8_ring(const MqaArgs& a, const uint8_t* cache_fp8, const MqaPlan& plan, int pf, cudaStream_t s);

namespace {
using namespace fp8k;
// SH (variant 13, fp8kv4 experiment): the 1024-B alignment by pointer arithmetic on the shared array, so the
// compiler keeps the shared address space (ld/st.shared instead of generic ld/st for the softmax rows and P)
template <bool F16, bool SH = false>
__global__ void __launch_bounds__(256, 1)
    mla_decode_fp8_kernel(MqaArgs a, const uint8_t* __restrict__ cache, const int4* __restrict__ work, int pf) {
  using namespace sm90;
  using S0 = std::conditional_t<F16, ShareH0, Share0>;
  using S1 = std::conditional_t<F16, ShareH1, Share1>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = SH ? smem_raw + ((1024u - (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) & 1023u)) & 1023u)
                     : reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  const uint32_t sb = saddr(smem);
  uint8_t* sP = smem + kOffP;
  float* sAlpha = reinterpret_cast<float*>(smem + kOffF);
  float* sM = sAlpha + 64;
  float* sL = sM + 64;

  const int4 wk = work[blockIdx.y];
  const int qi = wk.x, rb = wk.y, re = wk.z, slot = wk.w;
  const int head0 = blockIdx.x * 64, H = a.H;
  const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const int rA = 16 * w4 + g, rB = rA + 8;
  const int ntiles = (re - rb + 63) / 64;
  const int* bt = a.block_table + static_cast<size_t>(qi) * a.max_pages;
  const int ps = a.page_size;
  auto tile_base = [&](int j) {
    const int tok = rb + 64 * j;
    const long row = static_cast<long>(bt[tok / ps]) * ps + tok % ps;
    return cache + row * kMlaFp8TokenBytes;
  };
  auto tile_valid = [&](int j) { return min(64, re - rb - 64 * j); };

  if (tid == 0)
    for (int j = 0; j < min(pf, ntiles); ++j) prefetch_l2(tile_base(j), (tile_valid(j) * kMlaFp8TokenBytes + 15) & ~15);
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
  for (int j = 0; j < min(2, ntiles); ++j) {  // tiles 0 and 1: both warpgroups, their shares
    if (wg == 1) {
      S1 sh;
      sh.load(tile_base(j), tile_valid(j), tid - 128);
      sh.store(sb + kOffKV + j * kTile, tid - 128);
    } else {
      S0 sh;
      sh.load(tile_base(j), tile_valid(j), tid);
      sh.store(sb + kOffKV + j * kTile, tid);
    }
  }
  cp_async_wait<0>();
  float qk = 1.f;  // variant 6: S is computed with Q x 2^-k (FP16 range); qk = 2^k
  if constexpr (F16) {
    __syncthreads();
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
    if (lane == 0) sL[tid >> 5] = amax;
    __syncthreads();
    amax = sL[0];
#pragma unroll
    for (int i = 1; i < 8; ++i) amax = fmaxf(amax, sL[i]);
    int e = 0;
    frexpf(amax, &e);  // amax < 2^e (0 for amax == 0)
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
  float m0 = kNegInf, m1 = kNegInf, l0 = 0.f, l1 = 0.f;
  const float sl2 = a.sm_scale * kLog2e * qk;
  // warpgroup 0: S = Q K(j)^T, async (the caller fences s and issues wgmma.fence first: a non-wgmma
  // write of an accumulator inside a pipeline stage would serialise the wgmmas)
  auto issue_s = [&](int j) {
    const uint32_t kv = sb + kOffKV + (j & 1) * kTile;
#pragma unroll
    for (int ks = 0; ks < 36; ++ks) {
      const uint32_t off = (ks >> 2) * 8192 + (ks & 3) * 32;
      if (F16 && ks < 32)
        wgmma_m64n64k16_ss_f16(s, sw128_desc(sb + off, 16, 1024), sw128_desc(kv + off, 16, 1024), ks > 0);
      else
        wgmma_m64n64k16_ss(s, sw128_desc(sb + off, 16, 1024), sw128_desc(kv + off, 16, 1024), ks > 0);
    }
    wg_commit();
  };
  if (wg == 0 && ntiles > 0) {
    fence_regs(s);
    wg_fence();
    issue_s(0);
    wg_wait<0>();
    fence_regs(s);
  }

  // The two warpgroups run separate loops; per tile j they meet at barrier 1 (warpgroup 0 wrote P,
  // alpha; warpgroup 1 stored its part of tile j+1) and warpgroup 1 signals barrier 2 (its P V(j)
  // is done: P and alpha may be overwritten). Warpgroup 0's last tile is peeled so that S(j+1) is
  // never issued on a divergent path (ptxas would serialise the wgmmas).
  if (wg == 0) {
    auto body = [&](int j, auto has_next) {
      const int st = j & 1;
      const uint32_t kv = sb + kOffKV + st * kTile;
      const int valid = tile_valid(j);
      const bool more = j + 2 < ntiles;
      if (tid == 0 && j + pf < ntiles) prefetch_l2(tile_base(j + pf), (tile_valid(j + pf) * kMlaFp8TokenBytes + 15) & ~15);
      S0 sh;  // tile j+2, column blocks 0-3: loads in flight during the softmax and the GEMMs
      if (more) sh.load(tile_base(j + 2), tile_valid(j + 2), tid);
      if (j > 0) named_bar_sync(2, 256);  // warpgroup 1's P V(j-1) is done: P and alpha are free
      float mxA = kNegInf, mxB = kNegInf;
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
      const float mnA = fmaxf(m0, mxA), mnB = fmaxf(m1, mxB);
      const float alA = (m0 == kNegInf) ? 0.f : fast_exp2(m0 - mnA);
      const float alB = (m1 == kNegInf) ? 0.f : fast_exp2(m1 - mnB);
      float sumA = 0.f, sumB = 0.f;
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        const float p0 = fast_exp2(s[4 * jj] - mnA), p1 = fast_exp2(s[4 * jj + 1] - mnA);
        const float p2 = fast_exp2(s[4 * jj + 2] - mnB), p3 = fast_exp2(s[4 * jj + 3] - mnB);
        sumA += p0 + p1;
        sumB += p2 + p3;
        *reinterpret_cast<uint32_t*>(sP + rA * 128 + ((jj ^ (rA & 7)) << 4) + 4 * t4) = F16 ? pack_f16(p0, p1) : pack_bf16(p0, p1);
        *reinterpret_cast<uint32_t*>(sP + rB * 128 + ((jj ^ (rB & 7)) << 4) + 4 * t4) = F16 ? pack_f16(p2, p3) : pack_bf16(p2, p3);
      }
      l0 = l0 * alA + sumA;
      l1 = l1 * alB + sumB;
      m0 = mnA;
      m1 = mnB;
      if (t4 == 0) {
        sAlpha[rA] = alA;
        sAlpha[rB] = alB;
      }
      fence_proxy_async();  // P -> the async proxy
      named_bar_sync(1, 256);
      if (__any_sync(0xffffffffu, alA != 1.f || alB != 1.f)) {  // skipped while no row maximum moved
#pragma unroll
        for (int i = 0; i < 32; ++i) {
          o[4 * i] *= alA;
          o[4 * i + 1] *= alA;
          o[4 * i + 2] *= alB;
          o[4 * i + 3] *= alB;
        }
      }
      fence_regs(o);
      fence_regs(s);
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if constexpr (F16)
          wgmma_m64n256k16_ss_tb_f16(o, sw128_desc(sb + kOffP + kk * 32, 16, 1024), sw128_desc(kv + kk * 2048, 8192, 1024), 1);
        else
          wgmma_m64n256k16_ss_tb(o, sw128_desc(sb + kOffP + kk * 32, 16, 1024), sw128_desc(kv + kk * 2048, 8192, 1024), 1);
      }
      wg_commit();
      if constexpr (decltype(has_next)::value) {
        issue_s(j + 1);
        wg_wait<1>();  // own P V(j) done (S(j+1) still on the tensor core): column blocks 0-3 are free
      } else {
        wg_wait<0>();
      }
      fence_regs(o);
      if (more) {
        sh.store(kv, tid);
        fence_proxy_async();  // read by S(j+2), issued after the next barrier 1
      }
      wg_wait<0>();
      fence_regs(s);
    };
    for (int j = 0; j + 1 < ntiles; ++j) body(j, std::true_type{});
    if (ntiles > 0) body(ntiles - 1, std::false_type{});
  } else {
    for (int j = 0; j < ntiles; ++j) {
      const int st = j & 1;
      const uint32_t kv = sb + kOffKV + st * kTile;
      const bool more = j + 2 < ntiles;
      S1 sh;  // tile j+2, column blocks 4-8: loads in flight while waiting for P
      if (more) sh.load(tile_base(j + 2), tile_valid(j + 2), tid - 128);
      named_bar_sync(1, 256);
      const float alA = sAlpha[rA], alB = sAlpha[rB];
      if (__any_sync(0xffffffffu, alA != 1.f || alB != 1.f)) {  // skipped while no row maximum moved
#pragma unroll
        for (int i = 0; i < 32; ++i) {
          o[4 * i] *= alA;
          o[4 * i + 1] *= alA;
          o[4 * i + 2] *= alB;
          o[4 * i + 3] *= alB;
        }
      }
      fence_regs(o);
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if constexpr (F16)
          wgmma_m64n256k16_ss_tb_f16(o, sw128_desc(sb + kOffP + kk * 32, 16, 1024),
                                     sw128_desc(kv + 4 * 8192 + kk * 2048, 8192, 1024), 1);
        else
          wgmma_m64n256k16_ss_tb(o, sw128_desc(sb + kOffP + kk * 32, 16, 1024),
                                 sw128_desc(kv + 4 * 8192 + kk * 2048, 8192, 1024), 1);
      }
      wg_commit();
      wg_wait<0>();
      fence_regs(o);
      if (j + 1 < ntiles) named_bar_arrive(2, 256);  // P V(j) done: P and alpha may be overwritten
      if (more) {
        sh.store(kv, tid - 128);  // column blocks 4-7 (only this P V read them) and 8 (S(j) is done)
        fence_proxy_async();
      }
    }
  }
  if (wg == 0) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    if (t4 == 0) {
      sM[rA] = m0; sM[rB] = m1;
      sL[rA] = l0; sL[rB] = l1;
    }
  }
  __syncthreads();
  m0 = sM[rA]; m1 = sM[rB];
  l0 = sL[rA]; l1 = sL[rB];
  const int hA = head0 + rA, hB = head0 + rB;
  const bool okA = hA < H, okB = hB < H;
  const int c0 = wg * 256 + 2 * t4;
  if (slot < 0) {
    const float fA = l0 > 0.f ? 1.f / l0 : 0.f, fB = l1 > 0.f ? 1.f / l1 : 0.f;
    bf16* oA = a.out + (static_cast<size_t>(qi) * H + hA) * 512 + c0;
    bf16* oB = a.out + (static_cast<size_t>(qi) * H + hB) * 512 + c0;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      if (okA) *reinterpret_cast<uint32_t*>(oA + 8 * i) = pack_bf16(o[4 * i] * fA, o[4 * i + 1] * fA);
      if (okB) *reinterpret_cast<uint32_t*>(oB + 8 * i) = pack_bf16(o[4 * i + 2] * fB, o[4 * i + 3] * fB);
    }
    if (a.lse && wg == 0 && t4 == 0) {
      if (okA) a.lse[static_cast<size_t>(qi) * H + hA] = l0 > 0.f ? (m0 + log2f(l0)) / kLog2e : kNegInf;
      if (okB) a.lse[static_cast<size_t>(qi) * H + hB] = l1 > 0.f ? (m1 + log2f(l1)) / kLog2e : kNegInf;
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

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}
__global__ void fill_mla_fp8_kernel(uint8_t* p, size_t tokens, uint64_t seed) {
  const size_t n = tokens * (kMlaFp8TokenBytes / 4);  // 32-bit words
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int w = static_cast<int>(i % (kMlaFp8TokenBytes / 4));
    const uint64_t h = mix64(i * 0x9E3779B97F4A7C15ULL + seed);
    uint32_t out;
    if (w < 128) {  // 4 E4M3 values in [-448, 448]
      out = 0;
      for (int b = 0; b < 4; ++b) {
        const float u = static_cast<float>((h >> (16 * b)) & 0xffff) * (1.f / 65536.f);
        __nv_fp8_e4m3 f((2.f * u - 1.f) * 448.f);
        out |= static_cast<uint32_t>(f.__x) << (8 * b);
      }
    } else if (w < 132) {  // fp32 scale 2^-10 .. 2^-6 times [1, 2)
      const float u = static_cast<float>(h >> 40) * (1.f / 16777216.f);
      out = __float_as_uint(ldexpf(1.f + u, -10 + static_cast<int>((h >> 8) & 3)));
    } else {  // two BF16 RoPE values in [-1, 1]
      const float u0 = static_cast<float>(h & 0xffff) * (1.f / 65536.f), u1 = static_cast<float>((h >> 16) & 0xffff) * (1.f / 65536.f);
      out = pack_bf16(2.f * u0 - 1.f, 2.f * u1 - 1.f);
    }
    reinterpret_cast<uint32_t*>(p)[i] = out;
  }
}
}  // namespace

namespace {
int g_fp8_variant = 6;
}
void mla_decode_fp8_set_variant(int v) {
  if (v != 4 && v != 5 && v != 6 && v != 11 && v != 12 && v != 13)
    throw std::invalid_argument("mla_decode_fp8_set_variant: variants are 4, 5, 6, 11, 12 and 13");
  g_fp8_variant = v;
}
const char* mla_decode_fp8_config() {
  return g_fp8_variant == 5    ? "wgmma_fp8kv_ws_m64_tn64"
         : g_fp8_variant == 6  ? "wgmma_fp8kv_f16_m64_tn64"
         : g_fp8_variant == 11 ? "wgmma_fp8kv_f16_seesaw_m64_tn64"
         : g_fp8_variant == 12 ? "wgmma_fp8kv_f16_seesaw_ring_m64_tn32"
         : g_fp8_variant == 13 ? "wgmma_fp8kv_f16_shsp_m64_tn64"
                               : "wgmma_fp8kv_m64_tn64";
}

void mla_decode_fp8(const MqaArgs& a, const uint8_t* cache_fp8, const MqaPlan& plan, cudaStream_t s) {
  if (a.H <= 0) throw std::invalid_argument("mla_decode_fp8: head count must be positive");
  if (!a.q || !a.out || !cache_fp8 || !a.block_table) throw std::invalid_argument("mla_decode_fp8: q, out, cache and block_table are required");
  if (a.page_size <= 0 || a.page_size % 64 != 0) throw std::invalid_argument("mla_decode_fp8: page_size must be a positive multiple of 64");
  if (reinterpret_cast<uintptr_t>(cache_fp8) % 16 != 0) throw std::invalid_argument("mla_decode_fp8: cache must be 16-B aligned");
  if (plan.n_slots > 0 && (!a.o_part || !a.lse_part)) throw std::invalid_argument("mla_decode_fp8: split plan needs o_part/lse_part");
  if (plan.nq != a.nq) throw std::invalid_argument("mla_decode_fp8: plan built for another query count");
  if (a.sink) throw std::invalid_argument("mla_decode_fp8: MLA has no attention sink (sink must be null)");
  // L2 prefetch distance in tiles (4; SERVESIM_MLA_FP8_PF overrides it for experiments)
  // (variant 11: 3 unless overridden -- 2-3% faster than 4 at the 12 reference points, fp8kv3 calls 3 and 5)
  static const int pf_env = [] {
    const char* e = std::getenv("SERVESIM_MLA_FP8_PF");
    return e ? std::max(1, std::atoi(e)) : 0;
  }();
  // (variant 12: in 64-token pages beyond its ring, 3 unless overridden)
  const int pf = pf_env > 0 ? pf_env : g_fp8_variant == 11 || g_fp8_variant == 12 ? 3 : 4;
  static bool attr = false;
  if (!attr) {
    SS_CUDA(cudaFuncSetAttribute(mla_decode_fp8_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    SS_CUDA(cudaFuncSetAttribute(mla_decode_fp8_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    SS_CUDA(cudaFuncSetAttribute(mla_decode_fp8_kernel<true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    attr = true;
  }
  if (plan.n_work > 0) {
    if (g_fp8_variant == 5) {
      launch_mla_fp8_ws(a, cache_fp8, plan, s);
    } else if (g_fp8_variant == 11) {
      launch_mla_fp8_seesaw(a, cache_fp8, plan, pf, s);
    } else if (g_fp8_variant == 12) {
      launch_mla_fp8_ring(a, cache_fp8, plan, pf, s);
    } else if (g_fp8_variant == 13) {
      mla_decode_fp8_kernel<true, true><<<dim3((a.H + 63) / 64, plan.n_work), 256, kSmem, s>>>(a, cache_fp8, plan.work.p, pf);
      SS_LAUNCH_CHECK();
    } else if (g_fp8_variant == 6) {
      mla_decode_fp8_kernel<true><<<dim3((a.H + 63) / 64, plan.n_work), 256, kSmem, s>>>(a, cache_fp8, plan.work.p, pf);
      SS_LAUNCH_CHECK();
    } else {
      mla_decode_fp8_kernel<false><<<dim3((a.H + 63) / 64, plan.n_work), 256, kSmem, s>>>(a, cache_fp8, plan.work.p, pf);
      SS_LAUNCH_CHECK();
    }
  }
  mla_combine(a, plan, s);
}

void mla_fp8_quantize_host(const float* lat, uint8_t* out) {
  for (int b = 0; b < 512 / kMlaFp8Group; ++b) {
    float amax = 0.f;
    for (int i = 0; i < kMlaFp8Group; ++i) amax = std::max(amax, std::fabs(lat[b * kMlaFp8Group + i]));
    const float sc = amax > 0.f ? amax / 448.f : 1.f;
    std::memcpy(out + kMlaFp8ScaleOff + 4 * b, &sc, 4);
    for (int i = 0; i < kMlaFp8Group; ++i) out[b * kMlaFp8Group + i] = float_to_e4m3_host(lat[b * kMlaFp8Group + i] / sc);
  }
  for (int i = 0; i < 64; ++i) {
    const bf16 h = float_to_bf16_host(lat[512 + i]);
    std::memcpy(out + kMlaFp8RopeOff + 2 * i, &h, 2);
  }
}
void mla_fp8_dequant_host(const uint8_t* tok, double* out) {
  for (int i = 0; i < 512; ++i) {
    float sc;
    std::memcpy(&sc, tok + kMlaFp8ScaleOff + 4 * (i / kMlaFp8Group), 4);
    out[i] = static_cast<double>(e4m3_to_float_host(tok[i])) * static_cast<double>(sc);
  }
  for (int i = 0; i < 64; ++i) {
    bf16 h;
    std::memcpy(&h, tok + kMlaFp8RopeOff + 2 * i, 2);
    out[512 + i] = bf16_to_float_host(h);
  }
}
void fill_mla_fp8_cache(uint8_t* p, size_t tokens, uint64_t seed, cudaStream_t s) {
  if (tokens == 0) return;
  fill_mla_fp8_kernel<<<1024, 256, 0, s>>>(p, tokens, seed);
  SS_LAUNCH_CHECK();
}

}  // namespace servesim::attn
