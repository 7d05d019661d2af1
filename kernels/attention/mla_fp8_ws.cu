// servesim attention kernels: FP8-KV MLA decode, variant 5 (mla_fp8.cuh; slower than the default
// variant 4, kept for the record and tested). 384 threads: warpgroups 0 and 1 are variant 4's
// consumers without the dequantisation (setmaxnreg 224); warpgroup 2 (setmaxnreg 56) dequantises
// every tile j into buffer j % 2 once both consumers' P V(j-2) are done (named barriers 3/4,
// "empty", 384 threads) and signals warpgroup 0 (barriers 5/6, "full", 256 threads).
// Measured (NOTES.md): correct, 1.17x variant 4's time; the producer is load-latency-bound.
#include "attention/mla_fp8_impl.cuh"

#include <type_traits>

namespace servesim::attn {
namespace {
using namespace fp8k;
// Producer (v5): a quarter b of a tile's E4M3 chunks per thread t: u = 4 b .. 4 b + 3 of the 16
// chunks n = 128 u + t (column block u / 2, tokens t/4 + 32 (u % 2)), loaded into registers and
// stored dequantised; two quarters in flight.
struct Quarter {
  uint4 raw[4];
  float sc[4];
  __device__ __forceinline__ void load(const uint8_t* base, int valid, int t, int b) {
    const int r0 = t >> 2;
    const uint8_t* g = base + r0 * kMlaFp8TokenBytes;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int u = 4 * b + i, kg = u >> 1, half = u & 1;
      const uint8_t* tok = g + half * 32 * kMlaFp8TokenBytes;
      if (r0 + 32 * half < valid) {
        raw[i] = __ldg(reinterpret_cast<const uint4*>(tok + 64 * kg + 16 * (t & 3)));
        sc[i] = __ldg(reinterpret_cast<const float*>(tok + kMlaFp8ScaleOff + 4 * (kg >> 1)));
      } else {
        raw[i] = make_uint4(0, 0, 0, 0);
        sc[i] = 0.f;
      }
    }
  }
  __device__ __forceinline__ void store(uint32_t T, int t, int b) const {
    const int r0 = t >> 2, c = 2 * (t & 3);
    const uint32_t d = T + r0 * 128, s0 = (c ^ (r0 & 7)) << 4, s1 = ((c + 1) ^ (r0 & 7)) << 4;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int u = 4 * b + i, kg = u >> 1, half = u & 1;
      uint4 lo, hi;
      convert16(raw[i], sc[i], lo, hi);
      sts128(d + kg * 8192 + half * 4096 + s0, lo);
      sts128(d + kg * 8192 + half * 4096 + s1, hi);
    }
  }
};

__global__ void __launch_bounds__(384, 1)
    mla_decode_fp8_ws_kernel(MqaArgs a, const uint8_t* __restrict__ cache, const int4* __restrict__ work) {
  using namespace sm90;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
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

  if (tid == 256)
    for (int j = 0; j < min(4, ntiles); ++j) prefetch_l2(tile_base(j), (tile_valid(j) * kMlaFp8TokenBytes + 15) & ~15);
  if (tid < 256) {  // Q tile (padded heads read as zeros), swizzled
    const bf16* qsrc = a.q + (static_cast<size_t>(qi) * H + head0) * 576;
    for (int u = tid; u < 64 * 72; u += 256) {
      const int r = u / 72, ch = u % 72;
      const bool ok = head0 + r < H;
      cp_async16(smem + (ch >> 3) * 8192 + r * 128 + (((ch & 7) ^ (r & 7)) << 4),
                 qsrc + static_cast<size_t>(ok ? r : 0) * 576 + ch * 8, ok);
    }
    cp_async_commit();
  }
  cp_async_wait<0>();
  fence_proxy_async();
  __syncthreads();
  if (wg == 2) {  // producer: every tile, in order, into buffer j % 2
    asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n" ::: "memory");
    const int t = tid - 256;
    for (int j = 0; j < ntiles; ++j) {
      const uint8_t* base = tile_base(j);
      const int valid = tile_valid(j);
      const uint32_t T = sb + kOffKV + (j & 1) * kTile;
      if (t == 0 && j + 4 < ntiles) prefetch_l2(tile_base(j + 4), (tile_valid(j + 4) * kMlaFp8TokenBytes + 15) & ~15);
      Quarter q0, q1;
      q0.load(base, valid, t, 0);
      if (j >= 2) named_bar_sync(3 + (j & 1), 384);  // both consumers' P V(j-2) done: the buffer is free
      const int r0 = t >> 3;  // RoPE chunks m = 128 u + t: tokens t/8 + 16 u, chunk t % 8
      const uint8_t* gr = base + r0 * kMlaFp8TokenBytes + kMlaFp8RopeOff + 16 * (t & 7);
      const uint32_t dr = T + 8 * 8192 + r0 * 128 + (((t & 7) ^ (r0 & 7)) << 4);
      uint4 rp[4];
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        if (b % 2 == 0) {
          q1.load(base, valid, t, b + 1);
          q0.store(T, t, b);
        } else if (b == 1) {
          q0.load(base, valid, t, b + 1);
          q1.store(T, t, b);
        } else {  // b == 3: the RoPE chunks' loads fly while the last quarter is stored
#pragma unroll
          for (int u = 0; u < 4; ++u)
            rp[u] = r0 + 16 * u < valid ? __ldg(reinterpret_cast<const uint4*>(gr + 16 * u * kMlaFp8TokenBytes)) : make_uint4(0, 0, 0, 0);
          q1.store(T, t, b);
        }
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) sts128(dr + u * 2048, rp[u]);
      fence_proxy_async();
      named_bar_arrive(5 + (j & 1), 256);  // tile j is in buffer j % 2
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float s[32];
  float m0 = kNegInf, m1 = kNegInf, l0 = 0.f, l1 = 0.f;
  const float sl2 = a.sm_scale * kLog2e;
  // warpgroup 0: S = Q K(j)^T, async (the caller fences s and issues wgmma.fence first: a non-wgmma
  // write of an accumulator inside a pipeline stage would serialise the wgmmas)
  auto issue_s = [&](int j) {
    const uint32_t kv = sb + kOffKV + (j & 1) * kTile;
#pragma unroll
    for (int ks = 0; ks < 36; ++ks) {
      const uint32_t off = (ks >> 2) * 8192 + (ks & 3) * 32;
      wgmma_m64n64k16_ss(s, sw128_desc(sb + off, 16, 1024), sw128_desc(kv + off, 16, 1024), ks > 0);
    }
    wg_commit();
  };
  if (wg == 0 && ntiles > 0) {
    named_bar_sync(5, 256);  // tile 0 stored by the producer
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
        *reinterpret_cast<uint32_t*>(sP + rA * 128 + ((jj ^ (rA & 7)) << 4) + 4 * t4) = pack_bf16(p0, p1);
        *reinterpret_cast<uint32_t*>(sP + rB * 128 + ((jj ^ (rB & 7)) << 4) + 4 * t4) = pack_bf16(p2, p3);
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
      if constexpr (decltype(has_next)::value) named_bar_sync(5 + ((j + 1) & 1), 256);  // tile j+1 stored
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
      for (int kk = 0; kk < 4; ++kk)
        wgmma_m64n256k16_ss_tb(o, sw128_desc(sb + kOffP + kk * 32, 16, 1024), sw128_desc(kv + kk * 2048, 8192, 1024), 1);
      wg_commit();
      if constexpr (decltype(has_next)::value) issue_s(j + 1);
      wg_wait<0>();
      fence_regs(o);
      fence_regs(s);
      if (more) named_bar_arrive(3 + st, 384);  // this warpgroup's P V(j) done: buffer st may be refilled
    };
    for (int j = 0; j + 1 < ntiles; ++j) body(j, std::true_type{});
    if (ntiles > 0) body(ntiles - 1, std::false_type{});
  } else {
    for (int j = 0; j < ntiles; ++j) {
      const int st = j & 1;
      const uint32_t kv = sb + kOffKV + st * kTile;
      const bool more = j + 2 < ntiles;
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
      for (int kk = 0; kk < 4; ++kk)
        wgmma_m64n256k16_ss_tb(o, sw128_desc(sb + kOffP + kk * 32, 16, 1024),
                               sw128_desc(kv + 4 * 8192 + kk * 2048, 8192, 1024), 1);
      wg_commit();
      wg_wait<0>();
      fence_regs(o);
      if (j + 1 < ntiles) named_bar_arrive(2, 256);  // P V(j) done: P and alpha may be overwritten
      if (more) named_bar_arrive(3 + st, 384);      // buffer st may be refilled
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
  named_bar_sync(7, 256);  // consumers only (the producer has exited)
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

}  // namespace

void launch_mla_fp8_ws(const MqaArgs& a, const uint8_t* cache_fp8, const MqaPlan& plan, cudaStream_t s) {
  static bool attr = false;
  if (!attr) {
    SS_CUDA(cudaFuncSetAttribute(mla_decode_fp8_ws_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, fp8k::kSmem));
    attr = true;
  }
  mla_decode_fp8_ws_kernel<<<dim3((a.H + 63) / 64, plan.n_work), 384, fp8k::kSmem, s>>>(a, cache_fp8, plan.work.p);
  SS_LAUNCH_CHECK();
}

}  // namespace servesim::attn
