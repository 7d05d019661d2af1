// servesim attention kernels: DeepSeek V4 compressor, lightning-indexer logits (E4M3 mma.sync)
// and per-row top-k (radix select). See dsv4.cuh.
#include "attention/dsv4.cuh"
#include "attention/hopper.cuh"
#include "attention/mla_fp8_impl.cuh"  // fp8k::wgmma_*_f16 (F16 form of v4_attn_ws_kernel)
#include "attention/tmap.cuh"
#include "attention/wg_store.cuh"

#include <cooperative_groups.h>
#include <cub/block/block_scan.cuh>
#include <cuda.h>
#include <cudaTypedefs.h>

#include <mutex>

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
// Indexer logits, issue 12 (sm_90a): FP8 wgmma (QGMMA m64n64k32) with TMA loads.
// CTA = 1 warpgroup = (key chunk, query). Q [64 heads x 128] E4M3 and NS stages of 64 keys x 128
// E4M3 (+ their 64 fp32 scales) arrive by TMA (128-B swizzle) on one mbarrier per stage; thread 0
// refills a stage once every thread has finished with it. Per 64-key tile: S[keys, heads] =
// K Q^T (4 x wgmma m64n64k32, both operands K-major from smem), then per key row
// s_j * sum_h w_h * relu(S) (16 columns in registers + 2 shuffles) and one fp32 store.
// ------------------------------------------------------------------------------------------
namespace ixw {
constexpr int NS = 5;                       // key stages
constexpr int kTileB = 64 * 128;            // 8 KB of E4M3 keys per stage
constexpr int kOffK = kTileB;               // Q at [0, 8 KB)
constexpr int kSBox = 68;                   // scales per TMA box: 64 + up to 3 before, box start 16-B aligned
constexpr int kOffS = kOffK + NS * kTileB;  // NS x 512 B of fp32 scales
constexpr int kOffBar = kOffS + NS * 512;
constexpr int kSmem = kOffBar + (NS + 1) * 8 + 1024;  // + slack for 1024-B alignment
}  // namespace ixw

__device__ __forceinline__ void tma_load_1d(void* dst, const void* tmap, uint64_t* bar, int c0) {
  asm volatile(
      "cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3}], [%2];\n" ::"r"(
          sm90::saddr(dst)),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(sm90::saddr(bar)), "r"(c0)
      : "memory");
}
// D[64 x 64] (+)= A[64 x 32] * B[32 x 64], E4M3 operands from shared memory (descriptors), both K-major.
__device__ __forceinline__ void wgmma_m64n64k32_e4m3(float (&d)[32], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(scale_d));
}

__global__ void __launch_bounds__(128) indexer_wgmma_kernel(const __grid_constant__ CUtensorMap tmK, const __grid_constant__ CUtensorMap tmQ,
                                                            const __grid_constant__ CUtensorMap tmS, IndexerArgs a, int chunk) {
  using namespace sm90;
  using namespace ixw;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  const uint32_t sb = saddr(smem);
  const float* sS = reinterpret_cast<const float*>(smem + kOffS);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kOffBar);
  uint64_t* qbar = full + NS;
  const int qi = blockIdx.y;
  const int len = a.key_len[qi];
  const int kb0 = blockIdx.x * chunk;
  if (kb0 >= len) return;
  const int kend = min(len, kb0 + chunk);
  const int ntiles = (kend - kb0 + 63) / 64;
  const int row0 = a.key_begin[qi] + kb0;
  const int tid = threadIdx.x, lane = tid & 31, w4 = tid >> 5, g = lane >> 2, t4 = lane & 3;
  auto issue = [&](int j, int st) {
    // a TMA box must start 16-B aligned in its inner dimension: the scale box starts at the 4-aligned
    // row below the tile (the tile's first scale is then at index (row0 + 64 j) % 4)
    mbar_expect_tx(&full[st], kTileB + kSBox * 4);
    tma_load_2d(smem + kOffK + st * kTileB, &tmK, &full[st], 0, row0 + 64 * j);
    tma_load_1d(smem + kOffS + st * 512, &tmS, &full[st], (row0 + 64 * j) & ~3);
  };
  if (tid == 0) {
    for (int i = 0; i <= NS; ++i) mbar_init(&full[i], 1);
    mbar_fence_init();
  }
  __syncthreads();
  if (tid == 0) {
    mbar_expect_tx(qbar, kTileB);
    tma_load_2d(smem, &tmQ, qbar, 0, qi * 64);
    for (int j = 0; j < NS && j < ntiles; ++j) issue(j, j);
  }
  float w[16];  // head weights of this thread's accumulator columns 8c + 2 t4 + e
  const float* wq = a.w + static_cast<size_t>(qi) * 64;
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    w[2 * c] = wq[8 * c + 2 * t4];
    w[2 * c + 1] = wq[8 * c + 2 * t4 + 1];
  }
  mbar_wait(qbar, 0);
  float* out = a.logits + static_cast<size_t>(qi) * a.ld;
  const int rA = 16 * w4 + g;
  for (int j = 0; j < ntiles; ++j) {
    const int st = j % NS;
    mbar_wait(&full[st], (j / NS) & 1);
    float d[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) d[i] = 0.f;
    fence_regs(d);
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
      wgmma_m64n64k32_e4m3(d, sw128_desc(sb + kOffK + st * kTileB + ks * 32, 16, 1024), sw128_desc(sb + ks * 32, 16, 1024), ks > 0);
    wg_commit();
    wg_wait<0>();
    fence_regs(d);
    float vA = 0.f, vB = 0.f;
#pragma unroll
    for (int c = 0; c < 8; ++c)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        vA = fmaf(fmaxf(d[4 * c + e], 0.f), w[2 * c + e], vA);
        vB = fmaf(fmaxf(d[4 * c + 2 + e], 0.f), w[2 * c + e], vB);
      }
    vA += __shfl_xor_sync(0xffffffffu, vA, 1);
    vB += __shfl_xor_sync(0xffffffffu, vB, 1);
    vA += __shfl_xor_sync(0xffffffffu, vA, 2);
    vB += __shfl_xor_sync(0xffffffffu, vB, 2);
    const int r = rA + (t4 & 1) * 8;  // lanes t4 = 0 / 1 store rows rA / rA + 8
    const int k = kb0 + 64 * j + r;
    const float sc = sS[st * 128 + ((row0 + 64 * j) & 3) + r];
    if (t4 < 2 && k < kend) out[k] = sc * (t4 ? vB : vA);
    __syncthreads();  // every thread is done with stage st (keys via wgmma, scales)
    if (tid == 0 && j + NS < ntiles) issue(j + NS, st);
  }
}

// Tensor maps of the indexer: keys [rows, 128] E4M3 and q [nq*64, 128] (box 64 x 128 B, 128-B
// swizzle), scales [rows] fp32 (box 64).
CUtensorMap rows128_map(const uint8_t* p, long rows) {
  CUtensorMap m;
  const cuuint64_t dims[2] = {128, static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {128};
  const cuuint32_t box[2] = {128, 64};
  const cuuint32_t estr[2] = {1, 1};
  const CUresult r = tensor_map_encoder()(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<uint8_t*>(p), dims, strides, box, estr,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw std::runtime_error("v4_indexer: cuTensorMapEncodeTiled (rows) failed (" + std::to_string(r) + ")");
  return m;
}
CUtensorMap vec_map(const float* p, long n) {
  CUtensorMap m;
  const cuuint64_t dims[1] = {static_cast<cuuint64_t>(n)};
  const cuuint64_t strides[1] = {4};
  const cuuint32_t box[1] = {ixw::kSBox};
  const cuuint32_t estr[1] = {1};
  const CUresult r = tensor_map_encoder()(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1, const_cast<float*>(p), dims, strides, box, estr,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw std::runtime_error("v4_indexer: cuTensorMapEncodeTiled (scales) failed (" + std::to_string(r) + ")");
  return m;
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

// ------------------------------------------------------------------------------------------
// Top-k, issue 12: one read of the row from device memory. A row is cut into `cs` chunks (a
// thread-block cluster of cs <= 8 CTAs, one chunk each, held in shared memory); radix select on
// the order-preserving key, 11 + 11 + 10 bits. Scan 1 (whole chunk): histogram of the top 11
// bits; the cluster's histograms are summed through distributed shared memory and every CTA picks
// the same bin b1. Scan 2 (whole chunk): keys above b1 are written out at once, keys in b1 become
// candidates (local index list, up to TK2_CAP per CTA, else that CTA rescans its chunk) and feed
// the histogram of the next 11 bits; pass 3 and the final pick run over the candidates only.
// Output slots come from two counters in CTA 0's shared memory (one atomic per warp).
// (First version, call 7: warp-aggregated atomics through __match_any_sync and four full scans
// made it 1.5-5x slower than the one-CTA kernel; see NOTES.md.)
// ------------------------------------------------------------------------------------------
constexpr int TK2 = 512, TK2_BINS = 2048, TK2_MAXC = 32768, TK2_CAP = 4096;
__global__ void __launch_bounds__(TK2) topk_cluster_kernel(const float* __restrict__ logits, int ld, const int* __restrict__ lens,
                                                           int K, int* __restrict__ idx, int chunk) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  using Scan = cub::BlockScan<int, TK2>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int hist[2][TK2_BINS];
  __shared__ int sel_bin, sel_rem, sel_all, sel_tot, ncand, cnt[2];
  extern __shared__ __align__(16) float xs[];
  int* cand = reinterpret_cast<int*>(xs + chunk);  // [TK2_CAP] local indices
  const int cs = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const int qi = blockIdx.y, tid = threadIdx.x, lane = tid & 31;
  const int n = lens[qi];
  int* out = idx + static_cast<size_t>(qi) * K;
  if (n <= K) {  // uniform over the cluster: no CTA of it reaches a cluster barrier
    if (rank == 0)
      for (int i = tid; i < K; i += TK2) out[i] = i < n ? i : -1;
    return;
  }
  const int c0 = rank * chunk, m = max(0, min(n, c0 + chunk) - c0);
  const float* x = logits + static_cast<size_t>(qi) * ld + c0;
  if ((reinterpret_cast<uintptr_t>(x) & 15) == 0) {
    const int m4 = m >> 2;
    for (int i = tid; i < m4; i += TK2) cp_async16(xs + 4 * i, x + 4 * i);
    cp_async_commit();
    for (int i = 4 * m4 + tid; i < m; i += TK2) xs[i] = x[i];
  } else {
    for (int i = tid; i < m; i += TK2) xs[i] = x[i];
  }
  for (int i = tid; i < 2 * TK2_BINS; i += TK2) (&hist[0][0])[i] = 0;
  if (tid == 0) { ncand = 0; if (rank == 0) { cnt[0] = 0; cnt[1] = 0; } }
  cp_async_wait<0>();
  __syncthreads();
  int* gcnt = cluster.map_shared_rank(cnt, 0);
  // Sums histogram h over the cluster (bins nb-1.. in descending order, bpt per thread) and picks the
  // bin holding the rem-th largest key: sel_bin, sel_rem (rank inside it), sel_all (bin taken whole).
  auto select = [&](int* h, int nb, int rem) {
    const int bpt = nb / TK2;
    int tot[TK2_BINS / TK2];
    int local = 0;
#pragma unroll
    for (int k = 0; k < TK2_BINS / TK2; ++k) {
      tot[k] = 0;
      if (k < bpt) {
        const int bin = nb - 1 - (tid * bpt + k);
        int v[8];
#pragma unroll
        for (int r = 0; r < 8; ++r) v[r] = r < cs ? cluster.map_shared_rank(h, r)[bin] : 0;
#pragma unroll
        for (int r = 0; r < 8; ++r) tot[k] += v[r];
        local += tot[k];
      }
    }
    int before;
    Scan(scan_tmp).ExclusiveSum(local, before);
    if (tid == TK2 - 1) sel_tot = before + local;
    int run = before;
#pragma unroll
    for (int k = 0; k < TK2_BINS / TK2; ++k) {
      if (k < bpt) {
        const int bin = nb - 1 - (tid * bpt + k);
        if (run < rem && run + tot[k] >= rem) {
          sel_bin = bin;
          sel_rem = rem - run;
          sel_all = (run + tot[k] == rem);
        }
        run += tot[k];
      }
    }
    __syncthreads();
  };
  // Writes the keys flagged `win` of this warp's 32 elements to consecutive slots of the output.
  auto emit = [&](bool win, int i) {
    const unsigned bw = __ballot_sync(0xffffffffu, win);
    if (!bw) return;
    int base = 0;
    if (lane == 0) base = atomicAdd(gcnt, __popc(bw));
    base = __shfl_sync(0xffffffffu, base, 0);
    if (win) out[base + __popc(bw & ((1u << lane) - 1u))] = c0 + i;
  };
  // Histogram buffers alternate: hist[hb] is being filled / read by the cluster; the other one was
  // last read remotely before the latest cluster barrier, so it may be cleared.
  int hb = 0;
  auto next_buf = [&](int nb) {
    hb ^= 1;
    for (int i = tid; i < nb; i += TK2) hist[hb][i] = 0;
    __syncthreads();
  };
  // Sample (rows >= 16 K): every (m/1024)-th key of each chunk; the cluster's sample histogram gives
  // the bin `lo` above which about 2K (+32) keys of the row are expected, and scan 1 counts only
  // keys in or above it (a compare instead of an atomic for the rest). If fewer than K keys turn out
  // to lie there, scan 1 is repeated over all keys.
  uint32_t lo = 0;
  if (n >= 16 * K) {
    const int step = max(1, m / 1024);
    for (int j = tid; j * step < m; j += TK2) atomicAdd(&hist[0][ord_key(xs[j * step]) >> 21], 1);
    long stot = 0;
    for (int r = 0; r < cs; ++r) {
      const int mr = max(0, min(n, (r + 1) * chunk) - r * chunk), sr = max(1, mr / 1024);
      stot += (mr + sr - 1) / sr;
    }
    const long target = 2L * K * stot / n + 32;
    cluster.sync();
    if (target < stot) {
      select(hist[0], 2048, static_cast<int>(target));
      lo = static_cast<uint32_t>(sel_bin);
    }
    next_buf(2048);
  }
  // Scan 1: histogram of bits 31..21 (keys with those bits >= lo).
  for (int i0 = 0; i0 < m; i0 += TK2) {
    const int i = i0 + tid;
    if (i < m) {
      const uint32_t top = ord_key(xs[i]) >> 21;
      if (top >= lo) atomicAdd(&hist[hb][top], 1);
    }
  }
  cluster.sync();
  select(hist[hb], 2048, K);
  if (sel_tot < K) {  // the sample's bin was too high: count every key
    next_buf(2048);
    for (int i0 = 0; i0 < m; i0 += TK2) {
      const int i = i0 + tid;
      if (i < m) atomicAdd(&hist[hb][ord_key(xs[i]) >> 21], 1);
    }
    cluster.sync();
    select(hist[hb], 2048, K);
  }
  const uint32_t b1 = static_cast<uint32_t>(sel_bin);
  int rem = sel_rem;
  const bool all1 = sel_all;
  next_buf(2048);
  // Scan 2: keys above b1 are in; keys in b1 are candidates (histogram of bits 20..10).
  for (int i0 = 0; i0 < m; i0 += TK2) {
    const int i = i0 + tid;
    const uint32_t u = i < m ? ord_key(xs[i]) : 0u;
    const uint32_t top = u >> 21;
    const bool in = i < m && (top > b1 || (all1 && top == b1));
    emit(in, i);
    if (!all1 && i < m && top == b1) {
      atomicAdd(&hist[hb][(u >> 10) & 2047], 1);
      const int c = atomicAdd(&ncand, 1);
      if (c < TK2_CAP) cand[c] = i;
    }
  }
  if (!all1) {  // uniform over the cluster
    __syncthreads();
    const bool ovf = ncand > TK2_CAP;  // this CTA rescans its chunk instead of the list
    const int nc = ovf ? m : ncand;
    uint32_t prefix = b1 << 21, mask = 0xFFE00000u;
    cluster.sync();
    select(hist[hb], 2048, rem);
    prefix |= static_cast<uint32_t>(sel_bin) << 10;
    mask |= 0x001FFC00u;
    rem = sel_rem;
    if (!sel_all) {
      next_buf(1024);
      for (int j = tid; j < nc; j += TK2) {
        const uint32_t u = ord_key(xs[ovf ? j : cand[j]]);
        if ((u & mask) == prefix) atomicAdd(&hist[hb][u & 1023], 1);
      }
      cluster.sync();
      select(hist[hb], 1024, rem);
      prefix |= static_cast<uint32_t>(sel_bin);
      mask = 0xFFFFFFFFu;
      rem = sel_rem;
    }
    // Final pick among the candidates (keys in b1): above the prefix in; rem of those equal to it.
    for (int j0 = 0; j0 < nc; j0 += TK2) {
      const int j = j0 + tid;
      const int i = j < nc ? (ovf ? j : cand[j]) : 0;
      const uint32_t u = j < nc ? ord_key(xs[i]) : 0u;
      const bool c1 = j < nc && (u >> 21) == b1;
      const bool gt = c1 && (u & mask) > prefix, eq = c1 && (u & mask) == prefix;
      emit(gt, i);
      const unsigned be = __ballot_sync(0xffffffffu, eq);
      if (be) {
        int base = 0;
        if (lane == 0) base = atomicAdd(gcnt + 1, __popc(be));
        base = __shfl_sync(0xffffffffu, base, 0);
        const int e = base + __popc(be & ((1u << lane) - 1u));
        if (eq && e < rem) out[K - rem + e] = c0 + i;
      }
    }
  }
  cluster.sync();  // CTA 0's counters and every histogram stay alive until the cluster is done
}

// ------------------------------------------------------------------------------------------
// V4 CSA/HCA attention, warp-specialised (issue 12, seventh session; v4_attn variant 3).
// CTA = (64-head group, work item of the plan), 384 threads: warpgroups 0 and 1 are the consumers
// of mqa.cu's v4_attn_wgmma_kernel (S = Q K^T on warpgroup 0, online softmax, O += P V split over
// both, setmaxnreg 208 since the twelfth session, 224 before); warpgroup 2 is the producer (setmaxnreg
// 88, 56 before): it gathers tile j's 64 rows
// straight into the BF16 KV buffer j % 2 and dequantises them there while the consumers run tile
// j-1. Shared memory (1024-B aligned): Q [64 x 512] bf16 (64 KB, 8 column blocks of 8 KB, 128-B
// swizzle), two KV buffers of the same layout (2 x 64 KB), P, scales, flags, mbarriers.
// In-place staging: producer warp w owns rows 16 w .. 16 w + 15 of each tile. A row's E4M3 bytes of
// column block c (c < 7) land by cp.async (8-B copies) inside the 2 KB of block c that the warp's
// own BF16 rows occupy (offset 2048 w + 1024 + 64 i for its row i), its BF16 RoPE part directly at
// its swizzled place in block 7, its 7 UE8M0 scales in a side array; after its copies the warp
// converts block by block (32 raw bytes per lane into registers, __syncwarp, 64 BF16 bytes out), so
// no separate FP8 ring is needed next to the two BF16 buffers and no producer-wide barrier either.
// Conversion E4M3 -> BF16 by bit moves (PRMT, shift, LOP): the E4M3 sign / exponent / mantissa
// placed in a BF16 word is the value x 2^-120 (subnormals too), then one BF16x2 multiply by
// 2^(s - 7) applies the UE8M0 scale 2^(s - 127) and the rebias (two multiplies when s > 134).
// Index pipeline: each producer lane holds the row index of tile j (used), j+1 (L2 prefetch of its
// rows during tile j) and j+2 (loaded), so no copy waits on a dependent index load.
// Handshake: full[b] (128 producer arrivals after fence.proxy.async), empty[b] (256 consumer
// arrivals after their P V of the tile in buffer b).
// ------------------------------------------------------------------------------------------
namespace v4ws {
constexpr int kOffKV = 64 * 512 * 2;        // Q at [0, 64 KB)
constexpr int kKV = 64 * 512 * 2;           // one BF16 KV buffer
constexpr int kOffP = kOffKV + 2 * kKV;     // 196608
constexpr int kOffSc = kOffP + 64 * 64 * 2; // [2][64][8] B UE8M0 scales (+ pad byte)
constexpr int kOffFlag = kOffSc + 2 * 512;  // [2][64] int
constexpr int kOffF = kOffFlag + 512;       // alpha[64], m[64], l[64]
constexpr int kOffBar = kOffF + 768;        // full[2], empty[2]
constexpr int kSmem = kOffBar + 32 + 1024;  // + slack for 1024-B alignment
// RING producer (thirteenth session): per producer warp a ring of kRingRows raw-row slots of
// kSlot bytes (a whole 584-B row plus the 8-B shift of odd rows; 704 = 64 mod 128, so two rows read
// by one half-warp fall in different banks), after the mbarriers.
constexpr int kSlot = 704, kRingRows = 8;
constexpr int kOffRing = (kOffBar + 32 + 127) / 128 * 128;
constexpr int kSmemRing = kOffRing + 4 * kRingRows * kSlot + 1024;
static_assert(kOffP % 1024 == 0, "P tile alignment");
static_assert(kOffBar % 8 == 0, "mbarrier alignment");
static_assert(kSmem <= 232448, "shared memory per block");
static_assert(kSmemRing <= 232448, "shared memory per block (ring)");
}  // namespace v4ws

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
// 4 E4M3 values (bytes of w, element 0 in the low byte) -> 4 BF16 (two bf16x2 words) times the
// factor(s) f1 (and f2 when two): see the comment above.
__device__ __forceinline__ uint2 e4m3x4_to_bf16_scaled(uint32_t w, uint32_t f1, uint32_t f2, bool two) {
  const uint32_t t0 = __byte_perm(w, 0u, 0x1404), t1 = __byte_perm(w, 0u, 0x3424);
  uint32_t r0 = (t0 & 0x80008000u) | ((t0 >> 4) & 0x07f007f0u);
  uint32_t r1 = (t1 & 0x80008000u) | ((t1 >> 4) & 0x07f007f0u);
  r0 = bf16x2_mul(r0, f1);
  r1 = bf16x2_mul(r1, f1);
  if (two) {
    r0 = bf16x2_mul(r0, f2);
    r1 = bf16x2_mul(r1, f2);
  }
  return make_uint2(r0, r1);
}
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }
// 16-B cp.async (L2 only) to a shared-window address, predicated, src_size 0..16 (rest zero-filled)
__device__ __forceinline__ void cp_async16_sp(uint32_t pred, uint32_t dst, const void* src, uint32_t sz) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %0, 0;\n@p cp.async.cg.shared.global [%1], [%2], 16, %3;\n}\n" ::"r"(pred), "r"(dst),
               "l"(src), "r"(sz)
               : "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait_mem() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
// 4 E4M3 bytes -> 4 BF16 (x 2^-120) without the scale multiply (see e4m3x4_to_bf16_scaled)
__device__ __forceinline__ uint2 e4m3x4_bits(uint32_t w) {
  const uint32_t t0 = __byte_perm(w, 0u, 0x1404), t1 = __byte_perm(w, 0u, 0x3424);
  return make_uint2((t0 & 0x80008000u) | ((t0 >> 4) & 0x07f007f0u), (t1 & 0x80008000u) | ((t1 >> 4) & 0x07f007f0u));
}
// F16 form (thirteenth session, helper v4c): FP16 operands instead of BF16. 4 E4M3 bytes -> two
// f16x2 words by the hardware unpack (cvt.rn.f16x2.e4m3x2: one F2FP per 2 values, exact: every E4M3
// value is an FP16), times f1 (and f2 when two) with mul.rn.f16x2.
__device__ __forceinline__ uint32_t f16x2_mul(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ uint2 e4m3x4_to_f16_scaled(uint32_t w, uint32_t f1, uint32_t f2, bool two) {
  uint32_t r0, r1;
  asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %2;\ncvt.rn.f16x2.e4m3x2 %0, lo;\ncvt.rn.f16x2.e4m3x2 %1, hi;\n}\n"
      : "=r"(r0), "=r"(r1) : "r"(w));
  r0 = f16x2_mul(r0, f1);
  r1 = f16x2_mul(r1, f1);
  if (two) {
    r0 = f16x2_mul(r0, f2);
    r1 = f16x2_mul(r1, f2);
  }
  return make_uint2(r0, r1);
}
// bf16x2 -> f16x2 (round to nearest; exact for |x| in [2^-14, 65504])
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t v) {
  uint32_t d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(__uint_as_float(v & 0xffff0000u)), "f"(__uint_as_float(v << 16)));
  return d;
}
__device__ __forceinline__ uint4 bf16x8_to_f16x8(uint4 v) {
  return make_uint4(bf16x2_to_f16x2(v.x), bf16x2_to_f16x2(v.y), bf16x2_to_f16x2(v.z), bf16x2_to_f16x2(v.w));
}
__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
// 8-B cp.async to a shared-window address (src_size 0 = zero fill), optionally predicated (no branch)
__device__ __forceinline__ void cp_async8_s(uint32_t dst, const void* src, uint32_t sz) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(sz) : "memory");
}
__device__ __forceinline__ void cp_async8_sp(uint32_t pred, uint32_t dst, const void* src, uint32_t sz) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %0, 0;\n@p cp.async.ca.shared.global [%1], [%2], 8, %3;\n}\n" ::"r"(pred), "r"(dst),
               "l"(src), "r"(sz)
               : "memory");
}

// 2-CTA cluster helpers (PAIR kernel): 16-B / 4-B stores into the peer CTA's shared memory at a
// shared::cluster address (mapa of this CTA's address), arrive on the peer's mbarrier (release,
// cluster scope), cluster barrier of every thread (not .aligned: producer and consumer warps reach it
// from different code), per-thread mbarrier wait with cluster-scope acquire.
__device__ __forceinline__ uint32_t v4_mapa(uint32_t a, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
  return r;
}
__device__ __forceinline__ void st_cluster16(uint32_t a, uint4 v) {
  asm volatile("st.shared::cluster.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ void st_cluster4(uint32_t a, uint32_t v) {
  asm volatile("st.shared::cluster.u32 [%0], %1;\n" ::"r"(a), "r"(v) : "memory");
}
__device__ __forceinline__ void mbar_arrive_remote(uint32_t cluster_addr) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr) : "memory");
}
// default semantics (release, CTA scope): no MEMBAR.ALL.GPU / ERRBAR (the .release.cluster form cost
// the consumers ~30% of their stall samples in ncu, call 1); for arrivals that order no data
__device__ __forceinline__ void mbar_arrive_remote_plain(uint32_t cluster_addr) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr) : "memory");
}
__device__ __forceinline__ void mbar_arrive_local_cluster(uint64_t* bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cta.b64 _, [%0];\n" ::"r"(sm90::saddr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait_cl(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred P1;\nLAB_WAIT:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra DONE;\nbra LAB_WAIT;\nDONE:\n}\n" ::"r"(sm90::saddr(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void cluster_sync_any() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
__device__ __forceinline__ void fence_proxy_async_all() { asm volatile("fence.proxy.async;\n" ::: "memory"); }

// DBG (experiments only, env V4WS_DEBUG): 1 = no conversion (the raw bytes stay in place), 2 = no
// gather (tiles converted from whatever the buffer holds). Both give wrong outputs; 0 = the kernel.
// REG: registers after setmaxnreg, producer / consumers: 1 = 88 / 208 (the default since the twelfth
// session: no spill, 1.12x faster than 0 at Pro 512 x 64K, 544.5 vs 611.9 us same run), 0 = 56 / 224
// (the seventh session's default; ptxas: 8 B spill in the producer). (Call 5 of the seventh session
// ran 96 / 208, which hangs -- the
// consumers' setmaxnreg.inc can only take what the producer's dec released from the 3 x 168
// registers per thread the CTA was launched with, so 2 C + P must be <= 504). Without setmaxnreg
// (168 each) the consumers spill 216 B. 2 = 72 / 216 (experiment).
// (A second producer warpgroup, 512 threads, does not compile: ptxas then holds every instruction
// to 128 registers and the m64n256k16 accumulators need >= 154, C7602.)
// PAIR (v4_attn_ws at H % 128 == 0 with env V4WS_PAIR=1 / v4_attn_ws_set_pair(1); off by default: it
// measured 1.16x slower than the one-CTA kernel, twelfth session call 2, see NOTES): the two 64-head
// groups of a work item run as a 2-CTA cluster (blockIdx.x = 2 k + rank); each CTA's producer gathers
// and converts only rows 32 rank .. 32 rank + 31 of every tile (8 per warp) and stores their BF16
// values (and flags) into both CTAs' buffers (st.shared::cluster for the peer). full[b] then counts
// 128 local + 128 peer producer arrivals, empty[b] one arrival per consumer warp of both CTAs (16):
// a producer overwrites buffer b in both CTAs only after both CTAs' P V of the tile held there.
// FENCE (PAIR only): 0 = the consumers wait on full[b] with the default (CTA-scope) acquire and arrive
// on empty[b] with plain arrivals, the producer's remote full arrival stays release.cluster after its
// fence.proxy.async (MEMBAR.ALL.GPU in SASS): the default. 1 = cluster-scope acquire / release
// everywhere (call 1's form: CCTL.IVALL after every consumer wait, MEMBAR.ALL.GPU + ERRBAR before
// every consumer arrival; 1.12x slower than the one-CTA kernel).
// RING (thirteenth session; env V4WS_RING=1 or v4_attn_ws_set_ring(1), default 0 = off: correct but
// 1.02-1.09x slower than the in-place producer, call 2 of helper v4b, NOTES; one-CTA form only): the producer gathers each
// row whole with 16-B copies (37 per row; an odd row, 8-B aligned in the pool, is copied from 8 B
// before its start, so its bytes sit 8 B into its slot) into a per-warp ring of 8 row slots outside
// the BF16 buffers, in groups of 4 rows: group n+1 is issued before group n is converted, and the
// next tile's first group before the last group of this tile, so the copies no longer wait for the
// consumers' release of the buffer and their latency overlaps the conversion. Conversion: 8 lanes
// per row, lane k converts 16-B output chunk k of each of the 7 FP8 blocks (8 raw bytes) and copies
// RoPE chunk k. RING = false: the twelfth session's in-place staging (below).
// F16 (thirteenth session, helper v4c; env V4WS_F16 / v4_attn_ws_set_f16, default auto = idx_ld > 256; in-place one-CTA form
// only): Q, K and P in FP16 instead of BF16, both wgmma in f16. Q and the BF16 RoPE part of each row
// are converted BF16 -> FP16 in shared memory (Q once per CTA by the threads that copied it; RoPE
// block 7 by the producer lanes that convert the row); E4M3 -> FP16 by cvt.rn.f16x2.e4m3x2 and one
// mul.rn.f16x2 by 2^(s-127) (a normal FP16 for s in 113..142; s < 113: 2^-14 then 2^(s-113)).
// Exact for s in 112..134 (the product's lowest bit >= 2^-24, its largest 448 x 2^7 < 65504); a
// block with s > 134 (amax > 57344) overflows FP16 -- not produced by the compressor's RMS-normed
// rows. Q / RoPE values below 2^-14 lose bits (FP16 subnormals), P gains 3 mantissa bits.
template <int DBG, int REG, bool PAIR, int FENCE = 0, bool RING = false, bool F16 = false>
__global__ void __launch_bounds__(384, 1) v4_attn_ws_kernel(MqaArgs a, const int4* __restrict__ work) {
  static_assert(!(PAIR && RING), "the ring producer is one-CTA only");
  static_assert(!(F16 && (PAIR || RING)), "the F16 form is the in-place one-CTA producer only");
  using namespace sm90;
  using namespace v4ws;
  constexpr float kLog2e = 1.4426950408889634f;
  extern __shared__ uint8_t smem_raw[];
  // 1024-B alignment by an offset from smem_raw (not through an integer cast): the compiler then
  // knows every pointer below is shared and emits LDS/STS (the cast form gave generic LD/ST, ncu call 2)
  uint8_t* smem = smem_raw + ((1024u - (sm90::saddr(smem_raw) & 1023u)) & 1023u);
  const uint32_t sb = saddr(smem);
  uint8_t* sP = smem + kOffP;
  uint8_t* sSc = smem + kOffSc;
  int* sFlag = reinterpret_cast<int*>(smem + kOffFlag);
  float* sAlpha = reinterpret_cast<float*>(smem + kOffF);
  float* sM = sAlpha + 64;
  float* sL = sM + 64;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kOffBar);
  uint64_t* empty = full + 2;

  const int4 wk = work[blockIdx.y];
  const int qi = wk.x, rb = wk.y, re = wk.z, slot = wk.w;
  const int head0 = blockIdx.x * 64, H = a.H;
  const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31;
  const int ntiles = (re - rb + 63) / 64;

  const uint32_t rank = PAIR ? cluster_ctarank() : 0u, peer = rank ^ 1u;
  if (tid == 0) {
    mbar_init(&full[0], PAIR ? 256 : 128);
    mbar_init(&full[1], PAIR ? 256 : 128);
    mbar_init(&empty[0], PAIR ? 16 : 256);
    mbar_init(&empty[1], PAIR ? 16 : 256);
    if (PAIR) mbar_fence_init();
  }
  constexpr int NT = 384, RPW = PAIR ? 8 : 16;  // threads, rows per producer warp
  constexpr int LPR = 32 / RPW, BPL = 64 / LPR;       // conversion: lanes per row, raw bytes per lane
  {  // Q tile (padded heads read as zeros), swizzled, by all threads
    const bf16* qsrc = a.q + (static_cast<size_t>(qi) * H + head0) * 512;
    for (int u = tid; u < 64 * 64; u += NT) {
      const int r = u >> 6, ch = u & 63;
      const bool ok = head0 + r < H;
      cp_async16(smem + (ch >> 3) * 8192 + r * 128 + (((ch & 7) ^ (r & 7)) << 4),
                 qsrc + static_cast<size_t>(ok ? r : 0) * 512 + ch * 8, ok);
    }
    cp_async_commit();
    cp_async_wait<0>();
    if constexpr (F16) {  // each thread converts the chunks it copied (its own copies have landed)
      for (int u = tid; u < 64 * 64; u += NT) {
        const int r = u >> 6, ch = u & 63;
        uint4* p = reinterpret_cast<uint4*>(smem + (ch >> 3) * 8192 + r * 128 + (((ch & 7) ^ (r & 7)) << 4));
        *p = bf16x8_to_f16x8(*p);
      }
    }
  }
  fence_proxy_async();
  if constexpr (PAIR) cluster_sync_any();  // both CTAs' mbarriers initialised before any remote arrive
  else __syncthreads();

  if (wg >= 2) {
    // ------------------------------- producer -------------------------------
    if constexpr (REG == 0) asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n" ::: "memory");
    if constexpr (REG == 1) asm volatile("setmaxnreg.dec.sync.aligned.u32 88;\n" ::: "memory");
    if constexpr (REG == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 72;\n" ::: "memory");
    if constexpr (RING) {
      const int pw = (tid - 256) >> 5, rw0 = 16 * pw;  // the warp's rows rw0 .. rw0 + 15 of every tile
      const int* idx = a.indices + static_cast<size_t>(qi) * a.idx_ld;
      auto load_idx = [&](int j) -> int {  // lane l (< 16) holds the index of row rw0 + l of tile j
        const int r = rb + 64 * j + rw0 + (lane & 15);
        return (j < ntiles && r < re) ? __ldg(idx + r) : -1;
      };
      const uint32_t ring = sb + kOffRing + pw * (kRingRows * kSlot);
      // rows 4 gg .. 4 gg + 3 of a tile (indices in idv, lanes 0..15) -> ring half hf: 4 x 37 chunks,
      // chunk e = lane + 32 t is chunk q of row r (e = 37 r + q)
      auto issue = [&](int idv, int gg, int hf) {
#pragma unroll
        for (int t = 0; t < 5; ++t) {
          const int e = lane + 32 * t;
          const int r = e / 37, q = e - 37 * r;
          const int id = __shfl_sync(0xffffffffu, idv, 4 * gg + (r & 3));
          // an odd row starts 8 B past a 16-B boundary: its chunks start at the boundary before it
          const uint32_t sz = id < 0 ? 0u : (q == 36 && !(id & 1)) ? 8u : 16u;  // even rows: no bytes past the row
          const size_t off = (static_cast<size_t>(id < 0 ? 0 : id) * kV4RowBytes + 16 * q) & ~static_cast<size_t>(15);
          if (DBG != 2) cp_async16_sp(t < 4 || e < 148, ring + (4 * hf + (r & 3)) * kSlot + 16 * q, a.pool + off, sz);
        }
      };
      const int rr = lane >> 3, kk = lane & 7;  // conversion: row 4 gg + rr of the group, output chunk kk
      uint8_t* const ringp = smem + kOffRing + pw * (kRingRows * kSlot);
      // group gg of a tile, in ring half hf -> BF16 buffer kvb (flags of buffer b). Plain C++ shared
      // loads / stores (no asm memory clobbers), so the compiler issues all 10 loads before the math.
      auto convert = [&](int idv, int gg, int hf, uint8_t* kvb, int b) {
        const int dr = rw0 + 4 * gg + rr;
        const int id = __shfl_sync(0xffffffffu, idv, 4 * gg + rr);
        const uint8_t* slot = ringp + (4 * hf + rr) * kSlot + ((id & 1) << 3);
        if (kk == 0) sFlag[b * 64 + dr] = id >= 0;
        const uint32_t swz = dr * 128 + (((kk ^ dr) & 7) << 4);
        const uint2 r0 = *reinterpret_cast<const uint2*>(slot + 448 + 16 * kk);
        const uint2 r1 = *reinterpret_cast<const uint2*>(slot + 456 + 16 * kk);
        uint2 w[7];
        if (DBG != 1) {
#pragma unroll
          for (int c = 0; c < 7; ++c) w[c] = *reinterpret_cast<const uint2*>(slot + 64 * c + 8 * kk);
        }
        const uint2 sc = *reinterpret_cast<const uint2*>(slot + 576);  // UE8M0 scales of blocks 0..6 (+ pad)
        *reinterpret_cast<uint4*>(kvb + 7 * 8192 + swz) = make_uint4(r0.x, r0.y, r1.x, r1.y);  // BF16 RoPE chunk kk
        if (DBG == 1) return;
        // scale byte > 134: 2^(s-7) is no BF16 factor -> two multiplies (2^120, then 2^(s-127))
        const uint32_t big = __vcmpgtu4(sc.x, 0x86868686u) | (__vcmpgtu4(sc.y, 0x86868686u) & 0x00ffffffu);
        if (__any_sync(0xffffffffu, big != 0)) {
#pragma unroll
          for (int c = 0; c < 7; ++c) {
            const uint32_t cs = __byte_perm(c < 4 ? sc.x : sc.y, 0u, 0x4440 | (c & 3));
            const bool two = cs > 134;
            const uint32_t f1 = (two ? 247u : cs + 120u) * 0x00800080u, f2 = (two ? cs : 127u) * 0x00800080u;
            const uint2 lo = e4m3x4_bits(w[c].x), hi = e4m3x4_bits(w[c].y);
            *reinterpret_cast<uint4*>(kvb + c * 8192 + swz) =
                make_uint4(bf16x2_mul(bf16x2_mul(lo.x, f1), f2), bf16x2_mul(bf16x2_mul(lo.y, f1), f2),
                           bf16x2_mul(bf16x2_mul(hi.x, f1), f2), bf16x2_mul(bf16x2_mul(hi.y, f1), f2));
          }
        } else {
#pragma unroll
          for (int c = 0; c < 7; ++c) {
            const uint32_t f1 = (__byte_perm(c < 4 ? sc.x : sc.y, 0u, 0x4440 | (c & 3)) + 120u) * 0x00800080u;
            const uint2 lo = e4m3x4_bits(w[c].x), hi = e4m3x4_bits(w[c].y);
            *reinterpret_cast<uint4*>(kvb + c * 8192 + swz) =
                make_uint4(bf16x2_mul(lo.x, f1), bf16x2_mul(lo.y, f1), bf16x2_mul(hi.x, f1), bf16x2_mul(hi.y, f1));
          }
        }
      };
      int id_cur = load_idx(0), id_nxt = load_idx(1);
      issue(id_cur, 0, 0);
      cp_async_commit();
      for (int j = 0; j < ntiles; ++j) {
        const int b = j & 1;
        const int id_nn = load_idx(j + 2);
        // L2 prefetch of tile j+1's rows: 6 lanes per row (5 lines at +128 k and the last byte)
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int i = k * 5 + lane / 6, part = lane % 6;
          const int id = __shfl_sync(0xffffffffu, id_nxt, i & 15);
          if (lane < 30 && i < 16 && id >= 0)
            prefetch_l2(a.pool + static_cast<size_t>(id) * kV4RowBytes + (part == 5 ? kV4RowBytes - 1 : part * 128));
        }
        uint8_t* const kvb = smem + kOffKV + b * kKV;
#pragma unroll 1
        for (int gg = 0; gg < 4; ++gg) {
          __syncwarp();  // every lane has read ring half (gg + 1) & 1 (group gg - 1) before it is refilled
          if (gg < 3) issue(id_cur, gg + 1, (gg + 1) & 1);
          else if (j + 1 < ntiles) issue(id_nxt, 0, 0);
          cp_async_commit();
          if (gg == 0 && j >= 2) mbar_wait(&empty[b], ((j - 2) >> 1) & 1);  // P V(j-2) done: buffer b is free
          cp_async_wait_mem<1>();
          __syncwarp();  // every lane's copies of group gg have landed
          convert(id_cur, gg, gg & 1, kvb, b);
        }
        fence_proxy_async();
        mbar_arrive(&full[b]);
        id_cur = id_nxt;
        id_nxt = id_nn;
      }
      return;
    }
    const int pt = tid - 256, pw = pt >> 5;
    const int rw0 = (PAIR ? 32 * static_cast<int>(rank) : 0) + RPW * pw;  // the warp's first row of a tile
    const int* idx = a.indices + static_cast<size_t>(qi) * a.idx_ld;
    // lane l holds the index of row rw0 + (l & (RPW - 1)) of a tile
    auto load_idx = [&](int j) -> int {
      const int r = rb + 64 * j + rw0 + (lane & (RPW - 1));
      return (j < ntiles && r < re) ? __ldg(idx + r) : -1;
    };
    // the lane's three 8-B chunks of a row: ch = lane, lane + 32, lane + 64 (source offset 8 ch)
    // Warp pw owns rows 16 pw .. 16 pw + 15 of every tile: it gathers and converts them alone (no
    // producer-wide barrier). Row 16 pw + i's E4M3 bytes of block c are staged at 2048 pw + 1024 + 64 i
    // inside the block, i.e. inside the 2 KB that the warp's own BF16 rows of that block occupy.
    const uint32_t wreg = 128 * rw0 + 64 * RPW;  // the warp's raw staging inside each block
    const uint32_t dA = (lane >> 3) * 8192 + wreg + (lane & 7) * 8;  // + 64 i
    const bool bRope = lane >= 24;
    const uint32_t dB = bRope ? 7 * 8192 + (lane & 1) * 8 : ((lane + 32) >> 3) * 8192 + wreg + (lane & 7) * 8;
    const int qB = (lane - 24) >> 1;               // RoPE 16-B chunk (lane >= 24)
    const uint32_t dC = 7 * 8192 + (lane & 1) * 8;  // lane < 8: RoPE chunk 4 + lane / 2
    const int qC = 4 + (lane >> 1);
    const int di = lane / LPR, dh = lane % LPR;  // conversion: row RPW pw + di, elements BPL dh .. of a block
    const int dr = rw0 + di;
    const uint32_t psb = PAIR ? v4_mapa(sb, peer) : 0u;  // the peer CTA's smem base (shared::cluster)
    int id_cur = load_idx(0), id_nxt = load_idx(1);
    for (int j = 0; j < ntiles; ++j) {
      const int b = j & 1;
      if (j >= 2) {  // P V(j-2) done (in both CTAs when PAIR): buffer b is free
        if constexpr (PAIR && FENCE == 1) mbar_wait_cl(&empty[b], ((j - 2) >> 1) & 1);
        else mbar_wait(&empty[b], ((j - 2) >> 1) & 1);
      }
      const int id_nn = load_idx(j + 2);
      uint8_t* kvb = smem + kOffKV + b * kKV;
      uint8_t* scb = sSc + b * 512;
      // branch-free issue: 32-bit shared addresses, the third copy predicated (lanes 0-8 only)
      const uint32_t kvs = sb + kOffKV + b * kKV, scs = sb + kOffSc + b * 512;
#pragma unroll
      for (int i = 0; i < RPW; ++i) {
        const int r = rw0 + i;
        const int id = __shfl_sync(0xffffffffu, id_cur, i);
        const bool ok = id >= 0;
        const uint32_t sz = ok ? 8u : 0u;
        const uint8_t* src = a.pool + static_cast<size_t>(ok ? id : 0) * kV4RowBytes + lane * 8;
        if (DBG != 2) {
          const uint32_t b2 = bRope ? kvs + dB + r * 128 + (((qB ^ r) & 7) << 4) : kvs + dB + i * 64;
          const uint32_t b3 = lane < 8 ? kvs + dC + r * 128 + (((qC ^ r) & 7) << 4) : scs + r * 8;
          cp_async8_s(kvs + dA + i * 64, src, sz);
          cp_async8_s(b2, src + 256, sz);
          cp_async8_sp(lane <= 8, b3, src + 512, sz);
        }
        if (lane == 0) {
          sFlag[b * 64 + r] = ok;
          if constexpr (PAIR) st_cluster4(psb + kOffFlag + 4 * (b * 64 + r), ok ? 1u : 0u);
        }
      }
      cp_async_commit();
      // L2 prefetch of tile j+1's rows: 6 lanes per row (5 lines at +128 k and the last byte)
#pragma unroll
      for (int k = 0; k < (RPW + 4) / 5; ++k) {
        const int i = k * 5 + lane / 6, part = lane % 6;
        const int id = __shfl_sync(0xffffffffu, id_nxt, i & (RPW - 1));
        if (lane < 30 && i < RPW && id >= 0)
          prefetch_l2(a.pool + static_cast<size_t>(id) * kV4RowBytes + (part == 5 ? kV4RowBytes - 1 : part * 128));
      }
      cp_async_wait<0>();
      __syncwarp();  // every copy of this warp's rows of tile j has landed
      if constexpr (PAIR) {  // the BF16 RoPE block (7) of the warp's rows, as landed, to the peer
        const uint32_t o7 = kOffKV + b * kKV + 7 * 8192 + dr * 128 + 32 * dh;
        st_cluster16(psb + o7, *reinterpret_cast<const uint4*>(smem + o7));
        st_cluster16(psb + o7 + 16, *reinterpret_cast<const uint4*>(smem + o7 + 16));
      }
      // block c+1's raw bytes are loaded before block c is converted (different 8-KB blocks)
      const uint8_t* raw = kvb + wreg + di * 64 + dh * BPL;
      constexpr int NX = BPL / 16;  // uint4 of raw bytes per lane and block
      uint4 x[NX];
#pragma unroll
      for (int u = 0; u < NX; ++u) x[u] = *reinterpret_cast<const uint4*>(raw + 16 * u);
      uint32_t s = scb[dr * 8];
#pragma unroll 1
      for (int c = 0; c < 7; ++c) {
        if (DBG == 1) continue;
        __syncwarp();  // the warp's raw bytes of block c are in registers
        uint32_t w[4 * NX];
#pragma unroll
        for (int u = 0; u < NX; ++u) {
          w[4 * u] = x[u].x; w[4 * u + 1] = x[u].y; w[4 * u + 2] = x[u].z; w[4 * u + 3] = x[u].w;
        }
        const uint32_t cs = s;
        if (c < 6) {
#pragma unroll
          for (int u = 0; u < NX; ++u) x[u] = *reinterpret_cast<const uint4*>(raw + (c + 1) * 8192 + 16 * u);
          s = scb[dr * 8 + c + 1];
        }
        bool two;
        uint32_t f1, f2;
        if constexpr (F16) {  // FP16 2^(s-127): biased exponent s - 112 (normal for s in 113..142)
          two = cs < 113;
          const uint32_t e1 = two ? 1u : min(cs, 142u) - 112u;
          const uint32_t h2 = cs >= 99 ? (cs - 98u) << 10 : (cs >= 89 ? 1u << (cs - 89u) : 0u);  // 2^(s-113)
          f1 = (e1 << 10) * 0x00010001u;
          f2 = h2 * 0x00010001u;
        } else {
          two = cs > 134;
          const uint32_t h1 = two ? (247u << 7) : ((cs + 120u) << 7), h2 = cs << 7;
          f1 = h1 | (h1 << 16);
          f2 = h2 | (h2 << 16);
        }
#pragma unroll
        for (int k = 0; k < 2 * NX; ++k) {  // 16-B output chunks (8 values) of this lane
          const uint2 lo = F16 ? e4m3x4_to_f16_scaled(w[2 * k], f1, f2, two) : e4m3x4_to_bf16_scaled(w[2 * k], f1, f2, two);
          const uint2 hi = F16 ? e4m3x4_to_f16_scaled(w[2 * k + 1], f1, f2, two) : e4m3x4_to_bf16_scaled(w[2 * k + 1], f1, f2, two);
          const uint32_t ob = c * 8192 + dr * 128 + ((((2 * NX * dh + k) ^ dr) & 7) << 4);
          const uint4 v = make_uint4(lo.x, lo.y, hi.x, hi.y);
          *reinterpret_cast<uint4*>(kvb + ob) = v;
          if constexpr (PAIR) st_cluster16(psb + kOffKV + b * kKV + ob, v);
        }
      }
      if constexpr (F16) {  // the row's BF16 RoPE part (block 7, landed in place) -> FP16, same chunks
        if (DBG != 1) {
#pragma unroll
          for (int k = 0; k < 2 * NX; ++k) {
            uint4* p = reinterpret_cast<uint4*>(kvb + 7 * 8192 + dr * 128 + ((((2 * NX * dh + k) ^ dr) & 7) << 4));
            *p = bf16x8_to_f16x8(*p);
          }
        }
      }
      if constexpr (PAIR) {
        fence_proxy_async_all();  // this CTA's and the peer's buffer: generic writes -> wgmma (async proxy)
        if constexpr (FENCE == 1) mbar_arrive_local_cluster(&full[b]);
        else mbar_arrive(&full[b]);
        mbar_arrive_remote(v4_mapa(saddr(&full[b]), peer));  // release.cluster: orders the remote stores
      } else {
        fence_proxy_async();
        mbar_arrive(&full[b]);
      }
      id_cur = id_nxt;
      id_nxt = id_nn;
    }
    if constexpr (PAIR) cluster_sync_any();  // the peer may still arrive on this CTA's barriers
    return;
  }

  // ------------------------------- consumers -------------------------------
  if constexpr (REG == 0) asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
  if constexpr (REG == 1) asm volatile("setmaxnreg.inc.sync.aligned.u32 208;\n" ::: "memory");
  if constexpr (REG == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 216;\n" ::: "memory");
  const int w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const int rA = 16 * w4 + g, rB = rA + 8;
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float m0 = kNegInf, m1 = kNegInf, l0 = 0.f, l1 = 0.f;
  const float sl2 = a.sm_scale * kLog2e;

  for (int j = 0; j < ntiles; ++j) {
    const int b = j & 1;
    if constexpr (PAIR && FENCE == 1) mbar_wait_uniform_cluster(&full[b], (j >> 1) & 1);
    else mbar_wait_uniform(&full[b], (j >> 1) & 1);
    const uint32_t kv = sb + kOffKV + b * kKV;
    float alA, alB;
    if (wg == 0) {
      float s[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) s[i] = 0.f;
      fence_regs(s);
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < 32; ++ks) {
        const uint32_t off = (ks >> 2) * 8192 + (ks & 3) * 32;
        if constexpr (F16) fp8k::wgmma_m64n64k16_ss_f16(s, sw128_desc(sb + off, 16, 1024), sw128_desc(kv + off, 16, 1024), ks > 0);
        else wgmma_m64n64k16_ss(s, sw128_desc(sb + off, 16, 1024), sw128_desc(kv + off, 16, 1024), ks > 0);
      }
      wg_commit();
      wg_wait<0>();
      fence_regs(s);
      float mxA = kNegInf, mxB = kNegInf;
#pragma unroll
      for (int jj = 0; jj < 8; ++jj)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const bool v = sFlag[b * 64 + 8 * jj + 2 * t4 + e] != 0;
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
      // a tile of only -1 rows keeps m = -inf: its p are exp2(-inf - -inf) -> guard with the max
      const float bA = mnA == kNegInf ? 0.f : mnA, bB = mnB == kNegInf ? 0.f : mnB;
      alA = (m0 == kNegInf) ? 0.f : fast_exp2(m0 - mnA);
      alB = (m1 == kNegInf) ? 0.f : fast_exp2(m1 - mnB);
      float sumA = 0.f, sumB = 0.f;
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        const float p0 = fast_exp2(s[4 * jj] - bA), p1 = fast_exp2(s[4 * jj + 1] - bA);
        const float p2 = fast_exp2(s[4 * jj + 2] - bB), p3 = fast_exp2(s[4 * jj + 3] - bB);
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
      fence_proxy_async();
    }
    named_bar_sync(1, 256);  // one bar.sync instruction for both warpgroups (synccheck)
    if (wg == 1) {
      alA = sAlpha[rA];
      alB = sAlpha[rB];
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      o[4 * i] *= alA;
      o[4 * i + 1] *= alA;
      o[4 * i + 2] *= alB;
      o[4 * i + 3] *= alB;
    }
    fence_regs(o);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      if constexpr (F16)
        fp8k::wgmma_m64n256k16_ss_tb_f16(o, sw128_desc(sb + kOffP + kk * 32, 16, 1024),
                                         sw128_desc(kv + wg * 4 * 8192 + kk * 2048, 8192, 1024), 1);
      else
        wgmma_m64n256k16_ss_tb(o, sw128_desc(sb + kOffP + kk * 32, 16, 1024),
                               sw128_desc(kv + wg * 4 * 8192 + kk * 2048, 8192, 1024), 1);
    }
    wg_commit();
    wg_wait<0>();
    fence_regs(o);
    if constexpr (PAIR) {  // one arrival per warp, on this CTA's and the peer's empty[b]
      __syncwarp();
      if (lane == 0) {
        if constexpr (FENCE == 1) {
          mbar_arrive_local_cluster(&empty[b]);
          mbar_arrive_remote(v4_mapa(saddr(&empty[b]), peer));
        } else {  // the wgmma reads of buffer b are complete (wait_group 0): no data to order
          mbar_arrive(&empty[b]);
          mbar_arrive_remote_plain(v4_mapa(saddr(&empty[b]), peer));
        }
      }
    } else {
      mbar_arrive(&empty[b]);
    }
    named_bar_sync(2, 256);  // both halves of P V done: P and alpha may be overwritten
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
  named_bar_sync(4, 256);
  m0 = sM[rA]; m1 = sM[rB];
  l0 = sL[rA]; l1 = sL[rB];
  wg_store::store_rows(a, o, m0, m1, l0, l1, head0, H, rA, rB, wg, t4, qi, slot);
  if constexpr (PAIR) cluster_sync_any();  // the peer's producer / consumers may still touch this CTA's smem
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

namespace {
int g_indexer_variant = 0, g_topk_variant = 0;
int sm_count() {
  static int n = 0;
  if (!n) {
    int dev = 0;
    SS_CUDA(cudaGetDevice(&dev));
    SS_CUDA(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  }
  return n;
}
}  // namespace

void v4_set_variants(int indexer_variant, int topk_variant) {
  g_indexer_variant = indexer_variant;
  g_topk_variant = topk_variant;
}
const char* v4_indexer_variant_name() { return g_indexer_variant == 1 ? "mma_sync_v2" : "wgmma_fp8_tma"; }
const char* v4_topk_variant_name() { return g_topk_variant == 1 ? "radix_1cta" : g_topk_variant == 2 ? "radix_cluster_smem" : "radix_1cta_or_cluster"; }

int v4_indexer_chunk(int nq, int max_len) {
  // Tiles per CTA: enough CTAs for ~4 per SM over the whole problem, 2..64 tiles each.
  const long tiles = static_cast<long>(nq) * ((max_len + 63) / 64);
  const long want = 4L * sm_count();
  const long per = std::min<long>(64, std::max<long>(2, (tiles + want - 1) / want));
  return static_cast<int>(per * 64);
}

void v4_indexer_logits(const IndexerArgs& a, cudaStream_t s) {
  if (a.nq <= 0 || a.max_len <= 0) return;
  if (!a.q || !a.w || !a.keys || !a.kscale || !a.key_begin || !a.key_len || !a.logits)
    throw std::invalid_argument("v4_indexer_logits: null pointer");
  if (g_indexer_variant == 1 || a.nkeys <= 0) {
    indexer_kernel<<<dim3((a.max_len + IKB - 1) / IKB, a.nq), 128, 0, s>>>(a);
    SS_LAUNCH_CHECK();
    return;
  }
  static bool attr = false;
  if (!attr) {
    SS_CUDA(cudaFuncSetAttribute(indexer_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, ixw::kSmem));
    attr = true;
  }
  const CUtensorMap tk = rows128_map(a.keys, a.nkeys), tq = rows128_map(a.q, static_cast<long>(a.nq) * 64),
                    ts = vec_map(a.kscale, a.nkeys);
  const int chunk = v4_indexer_chunk(a.nq, a.max_len);
  indexer_wgmma_kernel<<<dim3((a.max_len + chunk - 1) / chunk, a.nq), 128, ixw::kSmem, s>>>(tk, tq, ts, a, chunk);
  SS_LAUNCH_CHECK();
}

int v4_topk_cluster_size(int nq, int n) {
  int cs = 1;
  while (cs <= 8 && (n + cs - 1) / cs > TK2_MAXC) cs *= 2;
  if (cs > 8) return 0;  // rows too long for 8 x 32768 logits in shared memory: the one-CTA kernel
  // more CTAs per row only while the batch leaves SMs idle and each chunk stays >= 8192 logits
  while (cs < 8 && static_cast<long>(nq) * cs < sm_count() && (n + 2 * cs - 1) / (2 * cs) >= 8192) cs *= 2;
  return cs;
}

bool v4_topk_uses_cluster(int nq, int max_len) {
  if (max_len <= 0 || g_topk_variant == 1 || v4_topk_cluster_size(nq, max_len) == 0) return false;
  return g_topk_variant == 2 || (nq <= 16 && max_len >= 98304) || (nq >= 256 && max_len <= 12288);
}

void v4_topk(const float* logits, int ld, const int* len, int nq, int topk, int* idx, cudaStream_t s, int max_len) {
  if (nq <= 0) return;
  if (topk <= 0) throw std::invalid_argument("v4_topk: topk must be positive");
  const int cs = max_len > 0 ? v4_topk_cluster_size(nq, max_len) : 0;
  // (v4_topk_uses_cluster) Variant 0 runs the cluster kernel only where it measured faster than the one-CTA kernel (call 9
  // sweep: batches <= 16 with rows >= 98304 logits, 1.3-2.5x; batches >= 256 with rows <= 12288,
  // 1.1-1.4x); elsewhere it was 0.4-0.9x. Variant 2 always runs it (tests).
  if (!v4_topk_uses_cluster(nq, max_len)) {
    topk_kernel<<<nq, TKT, 0, s>>>(logits, ld, len, topk, idx);
    SS_LAUNCH_CHECK();
    return;
  }
  static bool attr = false;
  if (!attr) {
    SS_CUDA(cudaFuncSetAttribute(topk_cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, TK2_MAXC * 4 + TK2_CAP * 4));
    attr = true;
  }
  const int chunk = ((max_len + cs - 1) / cs + 3) & ~3;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(cs, nq);
  cfg.blockDim = dim3(TK2);
  cfg.dynamicSmemBytes = static_cast<size_t>(chunk) * 4 + TK2_CAP * 4;
  cfg.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = cs;
  at[0].val.clusterDim.y = 1;
  at[0].val.clusterDim.z = 1;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  SS_CUDA(cudaLaunchKernelEx(&cfg, topk_cluster_kernel, logits, ld, len, topk, idx, chunk));
  SS_LAUNCH_CHECK();
}

namespace {
int g_v4ws_pair = -1;  // -1: from env V4WS_PAIR (default 0)
int g_v4ws_ring = -1;  // -1: from env V4WS_RING (default 0)
int g_v4ws_f16 = -2;   // -2: from env V4WS_F16 (unset = -1: auto, F16 when idx_ld > kV4wsF16MinLd)
constexpr int kV4wsF16MinLd = 256;
template <int DBG, int REG, bool PAIR, int FENCE = 0, bool RING = false, bool F16 = false>
void v4ws_launch(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s) {
  constexpr int smem = RING ? v4ws::kSmemRing : v4ws::kSmem;
  static bool attr = false;
  if (!attr) {
    SS_CUDA(cudaFuncSetAttribute(v4_attn_ws_kernel<DBG, REG, PAIR, FENCE, RING, F16>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    attr = true;
  }
  const dim3 grid(a.H / 64, plan.n_work);
  if constexpr (!PAIR) {
    v4_attn_ws_kernel<DBG, REG, false, 0, RING, F16><<<grid, 384, smem, s>>>(a, plan.work.p);
  } else {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(384);
    cfg.dynamicSmemBytes = v4ws::kSmem;
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 2;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    SS_CUDA(cudaLaunchKernelEx(&cfg, v4_attn_ws_kernel<DBG, REG, true, FENCE>, a, plan.work.p));
  }
  SS_LAUNCH_CHECK();
}
}  // namespace

void v4_attn_ws_set_pair(int pair) { g_v4ws_pair = pair; }
void v4_attn_ws_set_ring(int ring) { g_v4ws_ring = ring; }
void v4_attn_ws_set_f16(int f16) { g_v4ws_f16 = f16; }
// auto (the default): F16 where the lists are long (idx_ld > 256 rows, more than 4 tiles): there it
// measured 1.03-1.06x faster than BF16 in the same run (v4c call 1: Pro CSA 512 x 64K 519.3 vs 544.9 us);
// at <= 4 tiles (window-only layers, HCA below 16K context) the sweep rows were 0.96-1.00x of the BF16
// tables (the per-CTA Q conversion is not amortised), so BF16 stays there.
bool v4_attn_ws_uses_f16(int idx_ld) {
  if (g_v4ws_f16 == -2) {
    const char* e = std::getenv("V4WS_F16");
    g_v4ws_f16 = e ? std::atoi(e) : -1;
  }
  return g_v4ws_f16 < 0 ? idx_ld > kV4wsF16MinLd : g_v4ws_f16 != 0;
}
bool v4_attn_ws_uses_ring() {
  if (g_v4ws_ring < 0) {
    const char* e = std::getenv("V4WS_RING");
    g_v4ws_ring = e ? std::atoi(e) : 0;  // off: the ring measured 1.047x slower at Pro 512 x 64K (568.5 vs 543.1 us)
  }
  return g_v4ws_ring != 0;
}
bool v4_attn_ws_uses_pair(int H) {
  if (g_v4ws_pair < 0) {
    const char* e = std::getenv("V4WS_PAIR");
    g_v4ws_pair = e ? std::atoi(e) : 0;  // off: the pair kernel measured slower (call 2: 627 vs 542 us)
  }
  return g_v4ws_pair != 0 && H % 128 == 0;
}

void v4_attn_ws(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s) {
  if (!a.pool || !a.indices || !a.q || !a.out) throw std::invalid_argument("v4_attn_ws: q, pool, indices and out are required");
  if (a.H % 64 != 0) throw std::invalid_argument("v4_attn_ws: H must be a multiple of 64");
  if (plan.n_slots > 0 && (!a.o_part || !a.lse_part)) throw std::invalid_argument("v4_attn_ws: split plan needs o_part/lse_part");
  if (plan.nq != a.nq) throw std::invalid_argument("v4_attn_ws: plan built for another query count");
  static bool env = false;
  static int dbg = 0, reg = 1, fence = 0;
  if (!env) {
    if (const char* e = std::getenv("V4WS_FENCE")) fence = std::atoi(e);  // experiments: pair barrier scopes
    if (const char* e = std::getenv("V4WS_DEBUG")) dbg = std::atoi(e);  // experiments only: wrong outputs
    if (const char* e = std::getenv("V4WS_REG")) reg = std::atoi(e);    // experiments: register split (see the kernel)
    env = true;
  }
  if (plan.n_work > 0) {
    if (v4_attn_ws_uses_pair(a.H)) {
      if (dbg == 1) v4ws_launch<1, 1, true>(a, plan, s);
      else if (dbg == 2) v4ws_launch<2, 1, true>(a, plan, s);
      else if (fence == 1) v4ws_launch<0, 1, true, 1>(a, plan, s);
      else if (reg == 0) v4ws_launch<0, 0, true>(a, plan, s);
      else if (reg == 2) v4ws_launch<0, 2, true>(a, plan, s);
      else v4ws_launch<0, 1, true>(a, plan, s);
    } else if (v4_attn_ws_uses_ring()) {
      if (dbg == 1) v4ws_launch<1, 1, false, 0, true>(a, plan, s);
      else if (dbg == 2) v4ws_launch<2, 1, false, 0, true>(a, plan, s);
      else v4ws_launch<0, 1, false, 0, true>(a, plan, s);
    } else if (v4_attn_ws_uses_f16(a.idx_ld)) {
      if (dbg == 1) v4ws_launch<1, 1, false, 0, false, true>(a, plan, s);
      else if (dbg == 2) v4ws_launch<2, 1, false, 0, false, true>(a, plan, s);
      else v4ws_launch<0, 1, false, 0, false, true>(a, plan, s);
    } else {
      if (dbg == 1) v4ws_launch<1, 1, false>(a, plan, s);
      else if (dbg == 2) v4ws_launch<2, 1, false>(a, plan, s);
      else if (reg == 0) v4ws_launch<0, 0, false>(a, plan, s);
      else if (reg == 2) v4ws_launch<0, 2, false>(a, plan, s);
      else v4ws_launch<0, 1, false>(a, plan, s);
    }
  }
  mla_combine(a, plan, s);
}

}  // namespace servesim::attn
