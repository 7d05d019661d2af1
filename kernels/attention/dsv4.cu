// servesim attention kernels: DeepSeek V4 compressor, lightning-indexer logits (E4M3 mma.sync)
// and per-row top-k (radix select). See dsv4.cuh.
#include "attention/dsv4.cuh"

#include <cub/block/block_scan.cuh>

namespace servesim::attn {

namespace {
constexpr float kNegInf = -INFINITY;

__device__ __forceinline__ void ld4_bf16(const bf16* p, float (&f)[4]) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  __nv_bfloat162 a, b;
  memcpy(&a, &u.x, 4);
  memcpy(&b, &u.y, 4);
  const float2 x = __bfloat1622float2(a), y = __bfloat1622float2(b);
  f[0] = x.x; f[1] = x.y; f[2] = y.x; f[3] = y.y;
}
__device__ __forceinline__ uint8_t to_e4m3(float x) {
  __nv_fp8_e4m3 v(x);
  return v.__x;
}

// ------------------------------------------------------------------------------------------
// Compressor: D/4 threads per entry, 4 channels each.
// ------------------------------------------------------------------------------------------
template <int D, int R, bool IDX>
__global__ void __launch_bounds__(128) compressor_kernel(CompressorArgs a) {
  constexpr bool OV = (R == 4);
  constexpr int COFF = OV ? 2 : 1, W = COFF * D, TPE = D / 4, EPB = 128 / TPE;
  static_assert(!IDX || D == 128, "indexer keys are 128 wide");
  __shared__ float red[4][EPB];
  const int le = threadIdx.x / TPE, sub = threadIdx.x % TPE, c0 = sub * 4;
  const int e = blockIdx.x * EPB + le;
  const bool valid = e < a.n;
  const int2 ent = valid ? a.entries[e] : make_int2(0, 0);
  const int cur = ent.x, pos = ent.y;
  float m[4], l[4], acc[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) { m[k] = kNegInf; l[k] = 0.f; acc[k] = 0.f; }
  auto add = [&](int row, int off, int i) {
    float s[4], v[4];
    ld4_bf16(a.score + static_cast<size_t>(row) * W + off + c0, s);
    ld4_bf16(a.kv + static_cast<size_t>(row) * W + off + c0, v);
    const float4 ap = *reinterpret_cast<const float4*>(a.ape + static_cast<size_t>(i) * W + off + c0);
    const float apv[4] = {ap.x, ap.y, ap.z, ap.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float sk = s[k] + apv[k];
      const float mn = fmaxf(m[k], sk);
      const float al = __expf(m[k] - mn), p = __expf(sk - mn);
      l[k] = l[k] * al + p;
      acc[k] = acc[k] * al + p * v[k];
      m[k] = mn;
    }
  };
  if (valid) {
    if (OV && pos >= R) {
#pragma unroll 4
      for (int i = 0; i < R; ++i) add(cur - R + i, 0, i);
    }
#pragma unroll 4
    for (int i = 0; i < R; ++i) add(cur + i, OV ? D : 0, i);
  }
  float x[4];
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    x[k] = l[k] > 0.f ? acc[k] / l[k] : 0.f;
    ss += x[k] * x[k];
  }
  ss = warp_sum(ss);
  if constexpr (TPE > 32) {
    const int w = sub >> 5;
    if ((threadIdx.x & 31) == 0) red[w][le] = ss;
    __syncthreads();
    ss = 0.f;
#pragma unroll
    for (int i = 0; i < TPE / 32; ++i) ss += red[i][le];
  }
  const float rs = rsqrtf(ss / D + a.eps);
  const float4 nw = *reinterpret_cast<const float4*>(a.norm_w + c0);
  x[0] *= rs * nw.x; x[1] *= rs * nw.y; x[2] *= rs * nw.z; x[3] *= rs * nw.w;
  if (c0 >= D - 64) {  // GPT-J interleaved RoPE on the last 64 dims, pairs (0,1), (2,3)
#pragma unroll
    for (int pr = 0; pr < 2; ++pr) {
      const int i = (c0 - (D - 64)) / 2 + pr;
      const float inv = powf(a.rope_theta, -2.f * i / 64.f);
      float sn, cs;
      sincosf(static_cast<float>(pos) * inv, &sn, &cs);
      const float x0 = x[2 * pr], x1 = x[2 * pr + 1];
      x[2 * pr] = x0 * cs - x1 * sn;
      x[2 * pr + 1] = x0 * sn + x1 * cs;
    }
  }
  if constexpr (IDX) {
    const int lane = threadIdx.x & 31;
    float y0 = x[0] + x[1], y1 = x[0] - x[1], y2 = x[2] + x[3], y3 = x[2] - x[3];
    x[0] = y0 + y2; x[2] = y0 - y2; x[1] = y1 + y3; x[3] = y1 - y3;
#pragma unroll
    for (int msk = 1; msk < 32; msk <<= 1) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float p = __shfl_xor_sync(0xffffffffu, x[k], msk);
        x[k] = (lane & msk) ? (p - x[k]) : (x[k] + p);
      }
    }
    float amax = 0.f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      x[k] *= 0.08838834764831845f;
      amax = fmaxf(amax, fabsf(x[k]));
    }
    amax = warp_max(amax);
    const float scale = fmaxf(amax, 1e-8f) / 448.f;
    if (valid) {
      uint32_t packed = 0;
#pragma unroll
      for (int k = 0; k < 4; ++k) packed |= static_cast<uint32_t>(to_e4m3(x[k] / scale)) << (8 * k);
      *reinterpret_cast<uint32_t*>(a.out + static_cast<size_t>(e) * 128 + c0) = packed;
      if (lane == 0) a.out_scale[e] = scale;
    }
  } else {
    static_assert(IDX || D == 512, "main KV rows are 512 wide");
    float amax = fmaxf(fmaxf(fabsf(x[0]), fabsf(x[1])), fmaxf(fabsf(x[2]), fabsf(x[3])));
#pragma unroll
    for (int o = 1; o < 16; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    uint8_t* row = a.out + static_cast<size_t>(e) * kV4RowBytes;
    if (c0 < kV4Nope) {
      const float v = fmaxf(amax, 1e-4f) / 448.f;
      const uint32_t bits = __float_as_uint(v);
      const int e2 = static_cast<int>((bits >> 23) & 0xff) - 127 + ((bits & 0x7fffff) ? 1 : 0);
      const float inv = __uint_as_float(static_cast<uint32_t>(127 - e2) << 23);  // 2^-e2
      if (valid) {
        uint32_t packed = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) packed |= static_cast<uint32_t>(to_e4m3(x[k] * inv)) << (8 * k);
        *reinterpret_cast<uint32_t*>(row + c0) = packed;
        if ((sub & 15) == 0) row[kV4Nope + 2 * kV4Rope + c0 / 64] = static_cast<uint8_t>(e2 + 127);
        if (sub == 0) row[kV4RowBytes - 1] = 0;
      }
    } else if (valid) {
      uint2 u;
      u.x = pack_bf16(x[0], x[1]);
      u.y = pack_bf16(x[2], x[3]);
      *reinterpret_cast<uint2*>(row + kV4Nope + 2 * (c0 - kV4Nope)) = u;
    }
  }
}

// ------------------------------------------------------------------------------------------
// Indexer logits: block = (IKB keys, query), 4 warps; 64-key tiles in a 3-stage cp.async ring.
// Warp w owns keys 16w..16w+15 of each tile for all 64 heads (Q fragments of 4 m-tiles stay in
// registers), so the ReLU-weighted head sum is a register + shuffle reduction with no shared
// memory round trip.
// ------------------------------------------------------------------------------------------
constexpr int IKT = 64, IKB = 1024, IPITCH = 144, INS = 3;
__global__ void __launch_bounds__(128) indexer_kernel(IndexerArgs a) {
  __shared__ __align__(16) uint8_t Qs[64 * IPITCH];
  __shared__ __align__(16) uint8_t Ks[INS][IKT * IPITCH];
  __shared__ float ksc[INS][IKT];
  const int qi = blockIdx.y;
  const int len = a.key_len[qi];
  const int kb0 = blockIdx.x * IKB;
  if (kb0 >= len) return;
  const int kend = min(len, kb0 + IKB);
  const size_t base = static_cast<size_t>(a.key_begin[qi]);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  for (int u = tid; u < 64 * 8; u += 128) {
    const int r = u >> 3, ch = u & 7;
    cp_async16(Qs + r * IPITCH + ch * 16, a.q + (static_cast<size_t>(qi) * 64 + r) * 128 + ch * 16);
  }
  cp_async_commit();
  const int ntiles = (kend - kb0 + IKT - 1) / IKT;
  auto issue = [&](int it, int st) {
    const int k0 = kb0 + it * IKT;
    for (int u = tid; u < IKT * 8; u += 128) {
      const int r = u >> 3, ch = u & 7;
      const bool ok = k0 + r < kend;
      cp_async16(Ks[st] + r * IPITCH + ch * 16, a.keys + (base + (ok ? k0 + r : kb0)) * 128 + ch * 16, ok);
    }
    if (tid < IKT) ksc[st][tid] = (k0 + tid < kend) ? a.kscale[base + k0 + tid] : 0.f;
  };
#pragma unroll
  for (int p = 0; p < INS - 1; ++p) {
    if (p < ntiles) issue(p, p);
    cp_async_commit();
  }
  float w[4][2];
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    w[m][0] = a.w[static_cast<size_t>(qi) * 64 + m * 16 + g];
    w[m][1] = a.w[static_cast<size_t>(qi) * 64 + m * 16 + g + 8];
  }
  const int lrow = (lane & 7) + ((lane >> 4) << 3);
  const int lcolb = ((lane >> 3) & 1) << 4;
  uint32_t qf[4][4][4];  // [m-tile][k-step]
  for (int it = 0; it < ntiles; ++it) {
    const int st = it % INS;
    if (it + INS - 1 < ntiles) issue(it + INS - 1, (it + INS - 1) % INS);
    cp_async_commit();
    cp_async_wait<INS - 1>();
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
          ldsm_x4(qf[m][ks], Qs + (m * 16 + (lane & 15)) * IPITCH + ks * 32 + ((lane >> 4) << 4));
    }
    float acc[4][2][4];
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
      for (int j = 0; j < 2; ++j) acc[m][j][0] = acc[m][j][1] = acc[m][j][2] = acc[m][j][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      uint32_t b[4];
      ldsm_x4(b, Ks[st] + (warp * 16 + lrow) * IPITCH + ks * 32 + lcolb);
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        mma_e4m3(acc[m][0], qf[m][ks], b[0], b[1]);
        mma_e4m3(acc[m][1], qf[m][ks], b[2], b[3]);
      }
    }
    const int k0 = kb0 + it * IKT;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = warp * 16 + 8 * j + 2 * t + e;
        const float sc = ksc[st][col];
        float v = 0.f;
#pragma unroll
        for (int m = 0; m < 4; ++m)
          v += fmaxf(acc[m][j][e] * sc, 0.f) * w[m][0] + fmaxf(acc[m][j][2 + e] * sc, 0.f) * w[m][1];
        v += __shfl_xor_sync(0xffffffffu, v, 4);
        v += __shfl_xor_sync(0xffffffffu, v, 8);
        v += __shfl_xor_sync(0xffffffffu, v, 16);
        if (g == 0 && k0 + col < kend) a.logits[static_cast<size_t>(qi) * a.ld + k0 + col] = v;
      }
    }
    __syncthreads();
  }
  cp_async_wait<0>();
}

// ------------------------------------------------------------------------------------------
// Top-k: one block per row, radix select on order-preserving uint32 keys (12 + 10 + 10 bits).
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t ord_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
constexpr int TKT = 1024;
__global__ void __launch_bounds__(TKT) topk_kernel(const float* __restrict__ logits, int ld, const int* __restrict__ lens,
                                                   int K, int* __restrict__ idx) {
  using Scan = cub::BlockScan<int, TKT>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int hist[4096];
  __shared__ int sel_bin, sel_rem, cgt, ceq;
  const int qi = blockIdx.x, tid = threadIdx.x;
  const int n = lens[qi];
  const float* x = logits + static_cast<size_t>(qi) * ld;
  int* out = idx + static_cast<size_t>(qi) * K;
  if (n <= K) {
    for (int i = tid; i < K; i += TKT) out[i] = i < n ? i : -1;
    return;
  }
  uint32_t prefix = 0, mask = 0;
  int rem = K;
  const int shifts[3] = {20, 10, 0}, bitsv[3] = {12, 10, 10};
#pragma unroll 1
  for (int pass = 0; pass < 3; ++pass) {
    const int shift = shifts[pass], nb = 1 << bitsv[pass];
    for (int i = tid; i < nb; i += TKT) hist[i] = 0;
    __syncthreads();
    for (int i = tid; i < n; i += TKT) {
      const uint32_t u = ord_key(x[i]);
      if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & (nb - 1)], 1);
    }
    __syncthreads();
    const int bpt = nb / TKT;
    int local = 0;
    for (int k = 0; k < bpt; ++k) local += hist[nb - 1 - (tid * bpt + k)];
    int before;
    Scan(scan_tmp).ExclusiveSum(local, before);
    int run = before;
    for (int k = 0; k < bpt; ++k) {
      const int bin = nb - 1 - (tid * bpt + k);
      const int c = hist[bin];
      if (run < rem && run + c >= rem) {
        sel_bin = bin;
        sel_rem = rem - run;
      }
      run += c;
    }
    __syncthreads();
    prefix |= static_cast<uint32_t>(sel_bin) << shift;
    mask |= static_cast<uint32_t>(nb - 1) << shift;
    rem = sel_rem;
    __syncthreads();
  }
  if (tid == 0) { cgt = 0; ceq = 0; }
  __syncthreads();
  for (int i = tid; i < n; i += TKT) {
    const uint32_t u = ord_key(x[i]);
    if (u > prefix) {
      out[atomicAdd(&cgt, 1)] = i;
    } else if (u == prefix) {
      const int e = atomicAdd(&ceq, 1);
      if (e < rem) out[K - rem + e] = i;
    }
  }
}
}  // namespace

void v4_compress(const CompressorArgs& a, int ratio, int head_dim, cudaStream_t s) {
  if (a.n <= 0) return;
  if (!a.kv || !a.score || !a.ape || !a.norm_w || !a.entries || !a.out)
    throw std::invalid_argument("v4_compress: null pointer");
  if (ratio == 4 && head_dim == 512) {
    compressor_kernel<512, 4, false><<<a.n, 128, 0, s>>>(a);
  } else if (ratio == 128 && head_dim == 512) {
    compressor_kernel<512, 128, false><<<a.n, 128, 0, s>>>(a);
  } else if (ratio == 4 && head_dim == 128) {
    if (!a.out_scale) throw std::invalid_argument("v4_compress: indexer keys need out_scale");
    compressor_kernel<128, 4, true><<<(a.n + 3) / 4, 128, 0, s>>>(a);
  } else {
    throw std::invalid_argument("v4_compress: unsupported ratio/head_dim");
  }
  SS_LAUNCH_CHECK();
}

void v4_indexer_logits(const IndexerArgs& a, cudaStream_t s) {
  if (a.nq <= 0 || a.max_len <= 0) return;
  if (!a.q || !a.w || !a.keys || !a.kscale || !a.key_begin || !a.key_len || !a.logits)
    throw std::invalid_argument("v4_indexer_logits: null pointer");
  indexer_kernel<<<dim3((a.max_len + IKB - 1) / IKB, a.nq), 128, 0, s>>>(a);
  SS_LAUNCH_CHECK();
}

void v4_topk(const float* logits, int ld, const int* len, int nq, int topk, int* idx, cudaStream_t s) {
  if (nq <= 0) return;
  if (topk <= 0) throw std::invalid_argument("v4_topk: topk must be positive");
  topk_kernel<<<nq, TKT, 0, s>>>(logits, ld, len, topk, idx);
  SS_LAUNCH_CHECK();
}

}  // namespace servesim::attn
