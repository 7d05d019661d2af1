// servesim attention kernels: DeepSeek V4 compressor (compressor_kernel) and the lightning-indexer logits
// (indexer_kernel, issue 3; indexer_wgmma_kernel, issue 12, and its tensor maps).
// Part of dsv4.cu's translation unit, not a standalone header: dsv4.cu includes the kernel parts
// in their original order after defining kNegInf, ld4_bf16 and to_e4m3 (one unit keeps the code
// cicc / ptxas generate for every kernel exactly as before the file was split; see mqa.cu).
#pragma once
#include "attention/dsv4.cuh"
#include "attention/hopper.cuh"
#include "attention/tmap.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>

namespace servesim::attn {
namespace {

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
    uint8_t* row = a.out + static_cast<size_t>(e) * a.out_row_bytes;  // the caller's stride (>= 584, % 8 == 0)
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
        if (sub == 0) {  // pad: byte 583 and the stride's bytes past the 584-B row (8 more at 592) are 0
          row[kV4RowBytes - 1] = 0;
          for (int b = kV4RowBytes; b < a.out_row_bytes; b += 8) *reinterpret_cast<uint2*>(row + b) = make_uint2(0u, 0u);
        }
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

}  // namespace
}  // namespace servesim::attn
