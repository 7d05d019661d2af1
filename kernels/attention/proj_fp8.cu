// servesim attention kernels: own FP8 block-scaled dense GEMM for small M (see proj.cuh,
// fp8_dense_gemm; NOTES.md "Dense projections: own FP8 GEMM").
//
// Y[M, N] bf16 = sum_kb (X_kb W_kb^T) * x_scale[kb][m] * w_scale[n/128][kb], X [M, K] and W [N, K]
// e4m3, DeepSeek-style 1x128 activation / 128x128 weight scales, fp32 accumulation.
//
// The G = 1 form of the MoE FP8 grouped kernel (kernels/moe/gemm_fp8_ws.cu, variant 0): the weights are
// wgmma's M side (128 weight rows per CTA = one weight-scale block, two consumer warpgroups x m64),
// the tokens its N side (BT = 8..256), so a decode GEMM of a few tokens streams full 128x128 weight
// tiles. Warp-specialised: warpgroup 0 produces (one thread TMA-loads the 128x128 weight tile and the
// BT x 128 token tile per k-block, 128-byte swizzle, on "full" mbarriers; warp 1 loads the BT
// activation scales by 4-byte cp.async), warpgroups 1-2 consume (4 wgmma m64nBTk32 into a temporary,
// wait, promote acc += tmp * w_scale * x_scale).
//
// Split-K: a dense projection at small M has only ceil(N/128) x ceil(M/BT) tiles (e.g. 12 for
// N = 1536), far below the 132 SMs, so the K blocks of each tile are split over S CTAs
// (grid.z = S). Each split adds its fp32 partial into a tile-sized fp32 workspace with vector
// reductions (red.global.add.v4.f32, spread over all split CTAs), then bumps the tile's counter;
// the CTA that arrives last converts the workspace tile to bf16, stores it, and zeroes the tile and
// its counter for the next call (so the workspace stays zero between calls: graph-capturable, no
// memset per call). The fp32 summation order of the splits is not fixed (atomics): results may
// differ between runs in the last fp32 bits, far below the bf16 output rounding.
#include "attention/proj.cuh"
#include "moe/device_util.cuh"
#include "moe/sm90_tma.cuh"
#include "moe/wgmma_fp8.cuh"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace servesim::attn {

namespace {
namespace mk = servesim::kernels::moe;

constexpr int kRows = 128;  // weight rows per CTA
constexpr int kKB = 128;    // K per stage (= scale block)

template <int BT>
struct DCfg {
  static constexpr int kStages = BT >= 256 ? 4 : (BT == 128 ? 6 : (BT == 64 ? 4 : (BT == 32 ? 5 : 6)));
  static constexpr int kHalf = BT > 128 ? 128 : BT;  // tokens per wgmma group (BT = 256: two halves)
  static constexpr int kNH = BT / kHalf;
  static constexpr int kMinBlocks = BT >= 128 ? 1 : 2;
  static constexpr int kConsRegs = BT >= 128 ? 232 : (BT == 64 ? 96 : 0);  // 0: no setmaxnreg
  static constexpr int kW = kRows * kKB;
  static constexpr int kX = BT * kKB;
  static constexpr int kS = ((BT * 4 + 127) / 128) * 128;
  static constexpr int kTx = kW + kX;
  static constexpr int kSmem = kStages * (kW + kX + kS) + 2 * kStages * 8 + 16 + 1024;
};

struct DParams {
  const float* xs;  // [K/128][xs_ld]
  const float* ws;  // [ceil(N/128)][K/128]
  bf16* y;          // [M, N]
  float* part;      // split > 1: [tiles][NH*NA/4][256] float4, zero between calls
  int* counters;    // split > 1: [tiles], zero between calls
  int M, N, K, xs_ld, split;
};

__device__ __forceinline__ void red_add_v4(float* addr, float a, float b, float c, float d) {
  asm volatile("red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(addr), "f"(a), "f"(b), "f"(c),
               "f"(d)
               : "memory");
}

__device__ __forceinline__ float4 ld_dsmem_f4(const void* local, uint32_t rank) {
  float4 v;
  asm volatile(
      "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %4, %5;\n"
      "ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [ra];\n}\n"
      : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
      : "r"(smem_u32(local)), "r"(rank)
      : "memory");
  return v;
}

/// CL = 1: split partials added into the fp32 workspace by vector atomics, last split stores bf16.
/// CL = 1 with p.split == 1: no split. CL = 2: the p.split CTAs of a tile form one thread-block
/// cluster (grid.z = split = cluster size <= 8); each puts its fp32 partial in its own shared
/// memory, and after a cluster barrier each CTA sums 1/split of the tile over all peers' shared
/// memory (DSMEM, fixed order: deterministic) and stores that part in bf16. No global workspace.
template <int BT, int CL>
__global__ void __launch_bounds__(384, DCfg<BT>::kMinBlocks)
    fp8_dense_kernel(const __grid_constant__ CUtensorMap tm_w, const __grid_constant__ CUtensorMap tm_x,
                     const DParams p) {
  using C = DCfg<BT>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* wring = smem;
  uint8_t* xring = smem + C::kStages * C::kW;
  float* sring = reinterpret_cast<float*>(xring + C::kStages * C::kX);
  uint64_t* full = reinterpret_cast<uint64_t*>(reinterpret_cast<uint8_t*>(sring) + C::kStages * C::kS);
  uint64_t* empty = full + C::kStages;
  int* last_flag = reinterpret_cast<int*>(empty + C::kStages);

  // token tile fastest: CTAs running together share the weight tile in L2
  const int mt = blockIdx.x, nt = blockIdx.y, sp = blockIdx.z;
  const int row0 = mt * BT, rows = min(BT, p.M - row0);
  const int KB = p.K / kKB;
  const int kb0 = static_cast<int>(static_cast<long long>(sp) * KB / p.split);
  const int kb1 = static_cast<int>(static_cast<long long>(sp + 1) * KB / p.split);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

  if (tid == 0) {
    for (int s = 0; s < C::kStages; ++s) {
      mk::mbar_init(&full[s], 1 + 32);  // TMA thread's expect_tx + 32 cp.async arrivals of the scale warp
      mk::mbar_init(&empty[s], 8);      // lane 0 of each consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp < 4) {  // ---- producer warpgroup ----
    if constexpr (C::kConsRegs > 0) mk::setmaxnreg_dec<40>();
    if (tid == 0) {
      for (int kb = kb0, it = 0; kb < kb1; ++kb, ++it) {
        const int slot = it % C::kStages;
        mk::mbar_wait(&empty[slot], ((it / C::kStages) & 1) ^ 1);
        mk::mbar_expect_tx(&full[slot], C::kTx);
        mk::tma_load_2d(wring + slot * C::kW, &tm_w, kb * kKB, nt * kRows, &full[slot]);
        mk::tma_load_2d(xring + slot * C::kX, &tm_x, kb * kKB, row0, &full[slot]);
      }
    } else if (warp == 1) {  // activation scales (4-byte cp.async: a token tile starts at any row)
      for (int kb = kb0, it = 0; kb < kb1; ++kb, ++it) {
        const int slot = it % C::kStages;
        mk::mbar_wait(&empty[slot], ((it / C::kStages) & 1) ^ 1);
        float* dst = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(sring) + slot * C::kS);
        const float* src = p.xs + static_cast<size_t>(kb) * p.xs_ld + row0;
        for (int r = lane; r < BT; r += 32) mk::cp_async4(dst + r, r < rows ? src + r : p.xs, r < rows ? 4 : 0);
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(&full[slot])) : "memory");
      }
    }
    if constexpr (CL > 1) {  // the cluster barriers of the DSMEM reduction count every thread
      mk::cluster_sync_all();
      mk::cluster_sync_all();
    }
    return;
  }
  // ---- consumer warpgroups ----
  if constexpr (C::kConsRegs > 0) mk::setmaxnreg_inc<C::kConsRegs>();
  const int ct = tid - 128, cw = ct >> 5, wg = cw >> 2, gq = lane >> 2, tq = lane & 3;
  constexpr int NH = C::kNH, HB = C::kHalf, NA = HB / 2;
  float acc[NH][NA], tmp[NA];
#pragma unroll
  for (int h = 0; h < NH; ++h)
#pragma unroll
    for (int i = 0; i < NA; ++i) acc[h][i] = 0.f;
  const float* wsp = p.ws + static_cast<size_t>(nt) * KB;
  float wnext = __ldg(wsp + kb0);
  for (int kb = kb0, it = 0; kb < kb1; ++kb, ++it) {
    const int slot = it % C::kStages;
    const float wscale = wnext;
    if (kb + 1 < kb1) wnext = __ldg(wsp + kb + 1);
    mk::mbar_wait(&full[slot], (it / C::kStages) & 1);
    const uint32_t wb = smem_u32(wring + slot * C::kW) + wg * (64 * 128);
    const float* xs = reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(sring) + slot * C::kS);
#pragma unroll
    for (int h = 0; h < NH; ++h) {
      const uint32_t xb = smem_u32(xring + slot * C::kX) + h * (HB * 128);
#pragma unroll
      for (int i = 0; i < NA; ++i) mk::fence_operand(tmp[i]);
      mk::wgmma_fence();
      mk::WgmmaFp8<HB, true>::mma(tmp, mk::desc_sw128(wb), mk::desc_sw128(xb));
#pragma unroll
      for (int s = 1; s < 4; ++s) mk::WgmmaFp8<HB, false>::mma(tmp, mk::desc_sw128(wb + s * 32), mk::desc_sw128(xb + s * 32));
      mk::wgmma_commit();
      mk::wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < NA; ++i) mk::fence_operand(tmp[i]);
      float2 sc[HB / 8];
#pragma unroll
      for (int j = 0; j < HB / 8; ++j) sc[j] = *reinterpret_cast<const float2*>(xs + h * HB + 8 * j + 2 * tq);
      if (h == NH - 1) {
        __syncwarp();
        if (lane == 0) mk::mbar_arrive(&empty[slot]);
      }
#pragma unroll
      for (int j = 0; j < HB / 8; ++j) {
        const float s0 = sc[j].x * wscale, s1 = sc[j].y * wscale;
        acc[h][4 * j + 0] = fmaf(tmp[4 * j + 0], s0, acc[h][4 * j + 0]);
        acc[h][4 * j + 1] = fmaf(tmp[4 * j + 1], s1, acc[h][4 * j + 1]);
        acc[h][4 * j + 2] = fmaf(tmp[4 * j + 2], s0, acc[h][4 * j + 2]);
        acc[h][4 * j + 3] = fmaf(tmp[4 * j + 3], s1, acc[h][4 * j + 3]);
      }
    }
  }

  if constexpr (CL > 1) {
    // partial -> own shared memory [NH*NA/4][256] float4 (the ring is free: all stages consumed)
    mk::named_bar(1, 256);
    float4* sp4 = reinterpret_cast<float4*>(smem);
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
      for (int i4 = 0; i4 < NA / 4; ++i4)
        sp4[(h * (NA / 4) + i4) * 256 + ct] = make_float4(acc[h][4 * i4], acc[h][4 * i4 + 1], acc[h][4 * i4 + 2], acc[h][4 * i4 + 3]);
    mk::cluster_sync_all();
    // this CTA's part of the tile: float4 rows [lo, hi) of NH*NA/4; each float4 (row f, thread t) holds
    // outputs (token c0, n0), (c0 + 1, n0), (c0, n0 + 8), (c0 + 1, n0 + 8) of consumer thread t's layout
    constexpr int kF = NH * (NA / 4);
    const int S = p.split, rank = static_cast<int>(mk::cluster_ctarank());
    const int total = kF * 256, lo = rank * total / S, hi = (rank + 1) * total / S;
    for (int idx = lo + ct; idx < hi; idx += 256) {
      float4 v = ld_dsmem_f4(sp4 + idx, 0);
      for (int q = 1; q < S; ++q) {
        const float4 u = ld_dsmem_f4(sp4 + idx, q);
        v.x += u.x, v.y += u.y, v.z += u.z, v.w += u.w;
      }
      const int f = idx >> 8, t = idx & 255;
      const int h = f / (NA / 4), j = f - h * (NA / 4);
      const int tl = t & 31, c0 = h * HB + 8 * j + 2 * (tl & 3), n0 = nt * kRows + (t >> 5) * 16 + (tl >> 2);
      bf16* yb = p.y + static_cast<size_t>(row0) * p.N;
      if (n0 < p.N) {
        if (c0 < rows) yb[static_cast<size_t>(c0) * p.N + n0] = __float2bfloat16_rn(v.x);
        if (c0 + 1 < rows) yb[static_cast<size_t>(c0 + 1) * p.N + n0] = __float2bfloat16_rn(v.y);
      }
      if (n0 + 8 < p.N) {
        if (c0 < rows) yb[static_cast<size_t>(c0) * p.N + n0 + 8] = __float2bfloat16_rn(v.z);
        if (c0 + 1 < rows) yb[static_cast<size_t>(c0 + 1) * p.N + n0 + 8] = __float2bfloat16_rn(v.w);
      }
    }
    mk::cluster_sync_all();  // no CTA leaves while a peer may still read its shared memory
    return;
  }
  if (p.split > 1) {
    // add this split's partial into the tile's fp32 workspace (register layout: float4 i4 of
    // consumer thread ct at [i4][ct], coalesced), then count arrivals; the last split finishes
    const int tile = nt * gridDim.x + mt;
    float4* tp = reinterpret_cast<float4*>(p.part) + static_cast<size_t>(tile) * (NH * NA / 4) * 256;
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
      for (int i4 = 0; i4 < NA / 4; ++i4)
        red_add_v4(reinterpret_cast<float*>(tp + (h * (NA / 4) + i4) * 256 + ct), acc[h][4 * i4], acc[h][4 * i4 + 1],
                   acc[h][4 * i4 + 2], acc[h][4 * i4 + 3]);
    __threadfence();
    mk::named_bar(1, 256);
    if (ct == 0) {
      const int old = atomicAdd(p.counters + tile, 1);
      *last_flag = old == p.split - 1;
    }
    mk::named_bar(1, 256);
    if (!*last_flag) return;
    __threadfence();
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
      for (int i4 = 0; i4 < NA / 4; ++i4) {
        float4* a = tp + (h * (NA / 4) + i4) * 256 + ct;
        const float4 v = __ldcg(a);
        acc[h][4 * i4] = v.x, acc[h][4 * i4 + 1] = v.y, acc[h][4 * i4 + 2] = v.z, acc[h][4 * i4 + 3] = v.w;
        __stcg(a, make_float4(0.f, 0.f, 0.f, 0.f));
      }
    if (ct == 0) p.counters[tile] = 0;
  }

  // Epilogue: both consumer warpgroups are done with the ring -> stage [BT tokens][128 outputs]
  // bf16 in the weight ring, then 16-byte stores of the valid rows and columns (N % 8 == 0).
  mk::named_bar(1, 256);
  constexpr int kLd = 136;
  bf16* st = reinterpret_cast<bf16*>(smem);
  const int n0 = cw * 16 + gq, n1 = n0 + 8;
#pragma unroll
  for (int h = 0; h < NH; ++h)
#pragma unroll
    for (int j = 0; j < HB / 8; ++j) {
      const int c0 = h * HB + 8 * j + 2 * tq;
      st[c0 * kLd + n0] = __float2bfloat16_rn(acc[h][4 * j + 0]);
      st[(c0 + 1) * kLd + n0] = __float2bfloat16_rn(acc[h][4 * j + 1]);
      st[c0 * kLd + n1] = __float2bfloat16_rn(acc[h][4 * j + 2]);
      st[(c0 + 1) * kLd + n1] = __float2bfloat16_rn(acc[h][4 * j + 3]);
    }
  mk::named_bar(1, 256);
  const int ncols = min(kRows, p.N - nt * kRows) / 8;  // 16-byte chunks of this tile
  bf16* yb = p.y + static_cast<size_t>(row0) * p.N + static_cast<size_t>(nt) * kRows;
  for (int c = ct; c < rows * 16; c += 256) {
    const int r = c >> 4, ch = c & 15;
    if (ch < ncols)
      *reinterpret_cast<uint4*>(yb + static_cast<size_t>(r) * p.N + ch * 8) =
          *reinterpret_cast<const uint4*>(st + r * kLd + ch * 8);
  }
}

int g_sms = 0;
int sm_count() {
  if (!g_sms) {
    int dev = 0;
    SS_CUDA(cudaGetDevice(&dev));
    SS_CUDA(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, dev));
  }
  return g_sms;
}

template <int BT>
void launch(const void* x, const void* w, const DParams& p, const Fp8DenseConfig& c, cudaStream_t s) {
  static bool configured = false;
  if (!configured) {
    SS_CUDA(cudaFuncSetAttribute(fp8_dense_kernel<BT, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, DCfg<BT>::kSmem));
    SS_CUDA(cudaFuncSetAttribute(fp8_dense_kernel<BT, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, DCfg<BT>::kSmem));
    configured = true;
  }
  const CUtensorMap tw = mk::make_map_2d(w, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, p.K, static_cast<uint64_t>(p.N), p.K, kKB,
                                         kRows, CU_TENSOR_MAP_SWIZZLE_128B);
  const CUtensorMap tx = mk::make_map_2d(x, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, p.K, static_cast<uint64_t>(p.M), p.K, kKB,
                                         std::min(BT, 256), CU_TENSOR_MAP_SWIZZLE_128B);
  const dim3 grid(c.m_tiles, c.n_tiles, c.split);
  if (c.cluster && c.split > 1) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(384);
    cfg.dynamicSmemBytes = DCfg<BT>::kSmem;
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = c.split;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    SS_CUDA(cudaLaunchKernelEx(&cfg, fp8_dense_kernel<BT, 2>, tw, tx, p));
  } else {
    fp8_dense_kernel<BT, 1><<<grid, 384, DCfg<BT>::kSmem, s>>>(tw, tx, p);
  }
  SS_LAUNCH_CHECK();
}

}  // namespace

Fp8DenseConfig fp8_dense_plan(int M, int N, int K, int force_split, int force_bt, int force_cluster) {
  if (M <= 0 || N <= 0 || K <= 0 || N % 8 != 0 || K % kKB != 0)
    throw std::invalid_argument("fp8_dense_gemm: need M, N, K > 0, N % 8 == 0, K % 128 == 0");
  Fp8DenseConfig c;
  if (force_bt) {
    c.bt = force_bt;
  } else if (M <= 128) {  // 65..128 rows: two 64-token tiles (measured faster than one 128-token tile)
    for (int bt : {8, 16, 32, 64})
      if (M <= bt || bt == 64) { c.bt = bt; break; }
  } else {
    c.bt = (M + 255) / 256 * 256 <= (M + 127) / 128 * 128 ? 256 : 128;  // fewest padded rows, ties to 256
  }
  if (c.bt != 8 && c.bt != 16 && c.bt != 32 && c.bt != 64 && c.bt != 128 && c.bt != 256)
    throw std::invalid_argument("fp8_dense_gemm: tile width must be 8, 16, 32, 64, 128 or 256");
  c.m_tiles = (M + c.bt - 1) / c.bt;
  c.n_tiles = (N + kRows - 1) / kRows;
  if (c.m_tiles > 2147483647 / 2 || c.n_tiles > 65535) throw std::invalid_argument("fp8_dense_gemm: grid too large");
  const int KB = K / kKB;
  const long long tiles = static_cast<long long>(c.m_tiles) * c.n_tiles;
  if (force_split) {
    c.split = force_split;
  } else {
    // about one CTA per SM (two at BT <= 16, whose partials are small); at least 2 k-blocks per
    // split. More splits add partial traffic (split * M * N * 4 bytes) that costs more than the
    // extra CTAs gain from 32 tokens up (H200, NOTES.md).
    const long long slots = static_cast<long long>(sm_count()) * (c.bt <= 16 ? 2 : 1);
    c.split = static_cast<int>(std::max<long long>(1, std::min<long long>(slots / tiles, KB / 2)));
  }
  if (c.split < 1 || c.split > KB || c.split > 65535) throw std::invalid_argument("fp8_dense_gemm: split must be in 1..K/128");
  c.cluster = force_cluster > 0 && c.split > 1;
  if (c.cluster && c.split > 8) throw std::invalid_argument("fp8_dense_gemm: cluster reduction needs split <= 8");
  return c;
}

size_t fp8_dense_workspace_bytes(const Fp8DenseConfig& c) {
  if (c.split <= 1 || c.cluster) return 0;
  const size_t tiles = static_cast<size_t>(c.m_tiles) * c.n_tiles;
  return 256 + ((tiles * 4 + 255) / 256) * 256 + tiles * static_cast<size_t>(c.bt) * kRows * 4;
}

Fp8DenseConfig fp8_dense_gemm(const void* x, const float* x_scale, int x_scale_ld, const void* w, const float* w_scale,
                              bf16* y, int M, int N, int K, void* workspace, size_t workspace_bytes, cudaStream_t s,
                              int force_split, int force_bt, int force_cluster) {
  const Fp8DenseConfig c = fp8_dense_plan(M, N, K, force_split, force_bt, force_cluster);
  if (x_scale_ld < M) throw std::invalid_argument("fp8_dense_gemm: x_scale_ld < M");
  const size_t need = fp8_dense_workspace_bytes(c);
  if (need > workspace_bytes || (need && !workspace))
    throw std::invalid_argument("fp8_dense_gemm: workspace of " + std::to_string(need) + " bytes needed");
  DParams p{};
  p.xs = x_scale, p.ws = w_scale, p.y = y, p.M = M, p.N = N, p.K = K, p.xs_ld = x_scale_ld, p.split = c.split;
  if (need) {
    const size_t tiles = static_cast<size_t>(c.m_tiles) * c.n_tiles;
    uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(workspace) + 255) & ~uintptr_t(255));
    p.counters = reinterpret_cast<int*>(base);
    p.part = reinterpret_cast<float*>(base + ((tiles * 4 + 255) / 256) * 256);
  }
  if (s == 0) s = cudaStreamPerThread;
  switch (c.bt) {
    case 8: launch<8>(x, w, p, c, s); break;
    case 16: launch<16>(x, w, p, c, s); break;
    case 32: launch<32>(x, w, p, c, s); break;
    case 64: launch<64>(x, w, p, c, s); break;
    case 128: launch<128>(x, w, p, c, s); break;
    default: launch<256>(x, w, p, c, s); break;
  }
  return c;
}

}  // namespace servesim::attn
