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
//
// Eighteenth session: 64-row weight tiles (one consumer warpgroup, twice the tiles, deeper ring)
// and programmatic dependent launch (Fp8DenseConfig::pdl; the kernel code is in proj_fp8_kernel.cuh);
// helper pj2: the consumer pipeline forms Fp8DenseConfig::pipe (weight scales staged in the ring; the
// promotion of k-block i overlapped with the wgmma of i+1).
#include "attention/proj_fp8_kernel.cuh"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace servesim::attn {

namespace {
constexpr int kRows = 128;  // weight rows of the default tile (= one weight-scale block)

int g_sms = 0;
int sm_count() {
  if (!g_sms) {
    int dev = 0;
    SS_CUDA(cudaGetDevice(&dev));
    SS_CUDA(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, dev));
  }
  return g_sms;
}

template <int BT, int WR, int PV>
void launch(const void* x, const void* w, const DParams& p, const Fp8DenseConfig& c, cudaStream_t s) {
  using C = DCfg<BT, WR, PV>;
  static bool configured = false;
  if (!configured) {
    SS_CUDA(cudaFuncSetAttribute(fp8_dense_kernel<BT, 1, WR, PV>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
    SS_CUDA(cudaFuncSetAttribute(fp8_dense_kernel<BT, 2, WR, PV>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
    configured = true;
  }
  const CUtensorMap tw = mk::make_map_2d(w, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, p.K, static_cast<uint64_t>(p.N), p.K, kKB,
                                         WR, CU_TENSOR_MAP_SWIZZLE_128B);
  const CUtensorMap tx = mk::make_map_2d(x, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, p.K, static_cast<uint64_t>(p.M), p.K, kKB,
                                         std::min(BT, 256), CU_TENSOR_MAP_SWIZZLE_128B);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(c.m_tiles, c.n_tiles, c.split);
  cfg.blockDim = dim3(C::kThreads);
  cfg.dynamicSmemBytes = C::kSmem;
  cfg.stream = s;
  cudaLaunchAttribute attr[2];
  int na = 0;
  const bool cl = c.cluster && c.split > 1;
  if (cl) {
    attr[na].id = cudaLaunchAttributeClusterDimension;
    attr[na].val.clusterDim.x = 1;
    attr[na].val.clusterDim.y = 1;
    attr[na].val.clusterDim.z = c.split;
    ++na;
  }
  if (c.pdl) {
    attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[na].val.programmaticStreamSerializationAllowed = 1;
    ++na;
  }
  cfg.attrs = na ? attr : nullptr;
  cfg.numAttrs = na;
  if (cl) SS_CUDA(cudaLaunchKernelEx(&cfg, fp8_dense_kernel<BT, 2, WR, PV>, tw, tx, p));
  else SS_CUDA(cudaLaunchKernelEx(&cfg, fp8_dense_kernel<BT, 1, WR, PV>, tw, tx, p));
  SS_LAUNCH_CHECK();
}

template <int PV>
void dispatch(const void* x, const void* w, const DParams& p, const Fp8DenseConfig& c, cudaStream_t s) {
  if (c.rows == 64) {
    switch (c.bt) {
      case 8: launch<8, 64, PV>(x, w, p, c, s); break;
      case 16: launch<16, 64, PV>(x, w, p, c, s); break;
      case 32: launch<32, 64, PV>(x, w, p, c, s); break;
      case 64: launch<64, 64, PV>(x, w, p, c, s); break;
      case 128:  // token split (helper pj3): two warpgroups x 64 tokens share the 64-row weight tile
        if constexpr (PV != 2) launch<128, 64, PV>(x, w, p, c, s);
        else throw std::invalid_argument("fp8_dense_gemm: pipe 2 has no bt 128 x 64-row form");
        break;
      default: throw std::invalid_argument("fp8_dense_gemm: 64-row weight tiles take bt <= 64 or 128");
    }
    return;
  }
  switch (c.bt) {
    case 8: launch<8, 128, PV>(x, w, p, c, s); break;
    case 16: launch<16, 128, PV>(x, w, p, c, s); break;
    case 32: launch<32, 128, PV>(x, w, p, c, s); break;
    case 64:  // pipe 2 would spill here (96 registers): fp8_dense_plan rejects it; never launch nothing silently
      if constexpr (PV != 2) launch<64, 128, PV>(x, w, p, c, s);
      else throw std::invalid_argument("fp8_dense_gemm: pipe 2 has no bt 64 x 128-row form");
      break;
    case 128: launch<128, 128, PV>(x, w, p, c, s); break;
    default:
      if constexpr (PV != 2) launch<256, 128, PV>(x, w, p, c, s);
      else throw std::invalid_argument("fp8_dense_gemm: pipe 2 has no bt 256 form");
      break;
  }
}

}  // namespace

Fp8DenseConfig fp8_dense_plan(int M, int N, int K, int force_split, int force_bt, int force_cluster, int force_rows,
                              int pdl, int pipe) {
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
  if (force_rows) {
    c.rows = force_rows;
  } else {
    // 64-row weight tiles when the 128-row tiles leave SMs idle at BT <= 64: the tuner chose them at
    // 260 of 332 such shapes of the four dense_proj tables (H200, eighteenth session); 128 rows when
    // the tiles already fill the GPU (56 of 74) or BT > 64
    const long long t128 = static_cast<long long>((M + c.bt - 1) / c.bt) * ((N + kRows - 1) / kRows);
    c.rows = c.bt <= 64 && t128 < sm_count() ? 64 : kRows;
  }
  if (c.rows != 64 && c.rows != 128) throw std::invalid_argument("fp8_dense_gemm: weight rows per tile must be 64 or 128");
  if (c.rows == 64 && c.bt > 64 && c.bt != 128)
    throw std::invalid_argument("fp8_dense_gemm: 64-row weight tiles need tile width <= 64 or 128");
  c.pdl = pdl > 0;
  if (pipe < 0 || pipe > 2) throw std::invalid_argument("fp8_dense_gemm: pipe must be 0, 1 or 2");
  if (pipe == 2 && (c.bt > 128 || (c.rows == 128 && c.bt == 64) || (c.rows == 64 && c.bt == 128)))
    throw std::invalid_argument("fp8_dense_gemm: pipe 2 needs tile width <= 128, not 64 at 128 rows nor 128 at 64 rows");
  c.pipe = pipe;
  c.m_tiles = (M + c.bt - 1) / c.bt;
  c.n_tiles = (N + c.rows - 1) / c.rows;
  if (c.m_tiles > 2147483647 / 2 || c.n_tiles > 65535) throw std::invalid_argument("fp8_dense_gemm: grid too large");
  const int KB = K / kKB;
  const long long tiles = static_cast<long long>(c.m_tiles) * c.n_tiles;
  if (force_split) {
    c.split = force_split;
  } else {
    // about one CTA per SM (two at BT <= 16 or with 64-row tiles, whose partials are small); at least
    // 2 k-blocks per split. More splits add partial traffic (split * M * N * 4 bytes) that costs more
    // than the extra CTAs gain from 32 tokens up (H200, NOTES.md).
    const long long slots = static_cast<long long>(sm_count()) * (c.bt <= 16 || c.rows == 64 ? 2 : 1);
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
  return 256 + ((tiles * 4 + 255) / 256) * 256 + tiles * static_cast<size_t>(c.bt) * c.rows * 4;
}

Fp8DenseConfig fp8_dense_gemm(const void* x, const float* x_scale, int x_scale_ld, const void* w, const float* w_scale,
                              bf16* y, int M, int N, int K, void* workspace, size_t workspace_bytes, cudaStream_t s,
                              int force_split, int force_bt, int force_cluster, int force_rows, int pdl, int pipe) {
  const Fp8DenseConfig c = fp8_dense_plan(M, N, K, force_split, force_bt, force_cluster, force_rows, pdl, pipe);
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
  switch (c.pipe) {
    case 1: dispatch<1>(x, w, p, c, s); break;
    case 2: dispatch<2>(x, w, p, c, s); break;
    default: dispatch<0>(x, w, p, c, s); break;
  }
  return c;
}

}  // namespace servesim::attn
