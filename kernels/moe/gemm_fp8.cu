// FP8 (e4m3) block-scaled grouped expert GEMM, DeepSeek-style scales (activations 1x128, weights
// 128x128), BF16 out, in the masked (decode) and contiguous (prefill) layouts. Own wgmma kernel,
// no library. See NOTES.md §7 for the design and the measurements.
//
// Orientation: Y^T[n, t] = W[n, :] . X[t, :]: the expert's weights fill wgmma's M side (m64 per
// warpgroup, 128 weight rows per CTA = exactly one 128-row weight-scale block) and its tokens the
// N side (BT = 8..128), so a decode tile of a few tokens still streams full 128x128 weight tiles.
// Per 128-wide k-block: 4 wgmma m64nBTk32 into a temporary accumulator, then
// acc += tmp * w_scale[kb] * x_scale[kb][t] in fp32 registers (the "promotion" of DeepGEMM).
// Operands are staged by cp.async (16 B per thread, all 256 threads) into a multi-stage ring of
// 128-byte-swizzled K-major tiles; at BT = 128 the temporary accumulator is double-buffered so
// the wgmmas of k-block kb run while k-block kb-1 is promoted.
// Variant 0, the warp-specialised TMA kernel and its persistent form: gemm_fp8_ws.cu; the
// tokens-as-M variants 2-5: gemm_fp8_tm.cu.
#include "moe/moe.cuh"
#include "moe/device_util.cuh"
#include "moe/wgmma_fp8.cuh"
#include "moe/sm90_tma.cuh"
#include "common/cuda_check.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <mutex>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace servesim::kernels::moe {

namespace {

constexpr int kRows = 128;     // weight rows per CTA (2 warpgroups x m64)
constexpr int kKB = 128;       // K per stage (= scale block, = one 128-byte swizzle row of e4m3)
constexpr int kThreads = 256;
constexpr int kMaxKBlocks = 128;  // K <= 16384

struct Params {
  const uint8_t* x;        // e4m3 [rows_total, K]
  const float* xs;         // [K/128][xs_ld]
  const uint8_t* w;        // e4m3 [E, N, K]
  const float* ws;         // [E, N/128, K/128]
  const int* expert_ids;   // [G] or nullptr (identity)
  const int* masked_m;     // masked layout: [G] rows per group (nullptr: contiguous layout)
  const int* row_offsets;  // contiguous layout: [G+1]
  const int* tile_offsets; // contiguous layout: [G+1]
  bf16* y;                 // [rows_total, N]
  int G, N, K, max_m, xs_ld, tiles_per_group;
};

template <int BT>
struct FCfg {
  static constexpr bool kDB = false;  // double-buffered temporary accumulator: serialised by ptxas (C7514), off
  static constexpr int kStages = BT >= 128 ? 6 : (BT == 64 ? 4 : 5);
  static constexpr int kMinBlocks = BT >= 128 ? 1 : 2;
  static constexpr int kW = kRows * kKB;  // 16384 B
  static constexpr int kX = BT * kKB;     // multiple of 1024
  static constexpr int kStage = kW + kX;
  static constexpr int kSmem = kStages * kStage + kStages * BT * 4 + kMaxKBlocks * 4 + 1024;
};


template <int BT>
__global__ void __launch_bounds__(kThreads, FCfg<BT>::kMinBlocks) fp8_grouped_kernel(const Params p) {
  using C = FCfg<BT>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* ring = smem;                                            // [stages][W 16 KB | X BT*128]
  float* xsc = reinterpret_cast<float*>(smem + C::kStages * C::kStage);  // [stages][BT]
  float* wsc = xsc + C::kStages * BT;                               // [K/128]

  // ---- tile -> (group, first row, rows) ----
  int g, row0, rows;
  if (p.masked_m) {
    g = blockIdx.y / p.tiles_per_group;
    const int t0 = (blockIdx.y - g * p.tiles_per_group) * BT;
    const int cnt = min(p.masked_m[g], p.max_m);
    if (t0 >= cnt) return;
    row0 = g * p.max_m + t0;
    rows = min(BT, cnt - t0);
  } else {
    const int tile = blockIdx.y;
    if (tile >= p.tile_offsets[p.G]) return;
    int lo = 0, hi = p.G;  // largest g with tile_offsets[g] <= tile
    while (hi - lo > 1) {
      const int mid = (lo + hi) >> 1;
      if (p.tile_offsets[mid] <= tile) lo = mid; else hi = mid;
    }
    g = lo;
    row0 = p.row_offsets[g] + (tile - p.tile_offsets[g]) * BT;
    rows = min(BT, p.row_offsets[g + 1] - row0);
  }
  const int e = p.expert_ids ? p.expert_ids[g] : g;
  const int KB = p.K / kKB;
  const int nt = blockIdx.x;
  const uint8_t* wtile = p.w + (static_cast<size_t>(e) * p.N + static_cast<size_t>(nt) * kRows) * p.K;
  const uint8_t* xtile = p.x + static_cast<size_t>(row0) * p.K;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3, wg = warp >> 2;

  {
    const float* wsrc = p.ws + (static_cast<size_t>(e) * (p.N / kRows) + nt) * KB;
    for (int i = tid; i < KB; i += kThreads) wsc[i] = wsrc[i];
  }

  auto load_stage = [&](int kb, int slot) {
    uint8_t* wd = ring + slot * C::kStage;
    uint8_t* xd = wd + C::kW;
    const size_t koff = static_cast<size_t>(kb) * kKB;
#pragma unroll
    for (int i = 0; i < (kRows * 8) / kThreads; ++i) {
      const int c = tid + i * kThreads, r = c >> 3, ch = c & 7;
      cp_async16(wd + r * 128 + ((ch ^ (r & 7)) << 4), wtile + static_cast<size_t>(r) * p.K + koff + ch * 16);
    }
#pragma unroll
    for (int c = tid; c < BT * 8; c += kThreads) {
      const int r = c >> 3, ch = c & 7;
      const bool ok = r < rows;
      cp_async16(xd + r * 128 + ((ch ^ (r & 7)) << 4), ok ? xtile + static_cast<size_t>(r) * p.K + koff + ch * 16 : p.x,
                 ok ? 16 : 0);
    }
    if (tid < BT) {
      const bool ok = tid < rows;
      cp_async4(xsc + slot * BT + tid, ok ? p.xs + static_cast<size_t>(kb) * p.xs_ld + row0 + tid : p.xs, ok ? 4 : 0);
    }
  };

  constexpr int NA = BT / 2;  // accumulator floats per thread (m64nBT)
  float acc[NA];
  float tmp[C::kDB ? 2 : 1][NA];
#pragma unroll
  for (int i = 0; i < NA; ++i) acc[i] = 0.f;

#pragma unroll
  for (int s = 0; s < C::kStages - 2; ++s) {
    if (s < KB) load_stage(s, s);
    cp_async_commit();
  }

  // acc += t * w_scale[kb] * x_scale[kb][token]; token of element (j, q) = 8j + 2tq + (q & 1).
  auto promote = [&](float(&t)[NA], int kb) {
    const float wscale = wsc[kb];
    const float* xs = xsc + (kb % C::kStages) * BT;
#pragma unroll
    for (int j = 0; j < BT / 8; ++j) {
      const float2 s = *reinterpret_cast<const float2*>(xs + 8 * j + 2 * tq);
      const float s0 = s.x * wscale, s1 = s.y * wscale;
      acc[4 * j + 0] = fmaf(t[4 * j + 0], s0, acc[4 * j + 0]);
      acc[4 * j + 1] = fmaf(t[4 * j + 1], s1, acc[4 * j + 1]);
      acc[4 * j + 2] = fmaf(t[4 * j + 2], s0, acc[4 * j + 2]);
      acc[4 * j + 3] = fmaf(t[4 * j + 3], s1, acc[4 * j + 3]);
    }
  };

  auto issue = [&](float(&t)[NA], int kb) {
    const int slot = kb % C::kStages;
    const uint32_t wb = smem_u32(ring + slot * C::kStage) + wg * (64 * 128);
    const uint32_t xb = smem_u32(ring + slot * C::kStage + C::kW);
#pragma unroll
    for (int i = 0; i < NA; ++i) fence_operand(t[i]);
    wgmma_fence();
    WgmmaFp8<BT, true>::mma(t, desc_sw128(wb), desc_sw128(xb));
#pragma unroll
    for (int s = 1; s < 4; ++s) WgmmaFp8<BT, false>::mma(t, desc_sw128(wb + s * 32), desc_sw128(xb + s * 32));
    wgmma_commit();
#pragma unroll
    for (int i = 0; i < NA; ++i) fence_operand(t[i]);
  };

  auto stage_sync = [&](int kb) {
    cp_async_wait<C::kStages - 3>();
    fence_proxy_async();
    __syncthreads();
    const int nk = kb + C::kStages - 2;
    if (nk < KB) load_stage(nk, nk % C::kStages);
    cp_async_commit();
  };

  if constexpr (C::kDB) {
    // KB even (K % 256 == 0). Stage kb issues into tmp[kb&1], waits for kb-1 (wait_group 1) and
    // promotes tmp[(kb-1)&1] while the wgmmas of kb run. Branch-free so ptxas can track the
    // accumulator registers of the in-flight wgmma.
    auto fence_all = [&](float(&t)[NA]) {
#pragma unroll
      for (int i = 0; i < NA; ++i) fence_operand(t[i]);
    };
    stage_sync(0);
    issue(tmp[0], 0);
    for (int kb = 1; kb < KB - 1; kb += 2) {
      stage_sync(kb);
      issue(tmp[1], kb);
      wgmma_wait<1>();
      fence_all(tmp[0]);
      promote(tmp[0], kb - 1);
      stage_sync(kb + 1);
      issue(tmp[0], kb + 1);
      wgmma_wait<1>();
      fence_all(tmp[1]);
      promote(tmp[1], kb);
    }
    stage_sync(KB - 1);
    issue(tmp[1], KB - 1);
    wgmma_wait<1>();
    fence_all(tmp[0]);
    promote(tmp[0], KB - 2);
    wgmma_wait<0>();
    fence_all(tmp[1]);
    promote(tmp[1], KB - 1);
  } else {
    for (int kb = 0; kb < KB; ++kb) {
      stage_sync(kb);
      issue(tmp[0], kb);
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < NA; ++i) fence_operand(tmp[0][i]);
      promote(tmp[0], kb);
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  // Epilogue: stage [BT tokens][128 outputs] bf16 (row stride 136) then 16-byte stores.
  constexpr int kLd = 136;
  bf16* st = reinterpret_cast<bf16*>(smem);
  const int n0 = warp * 16 + gq, n1 = n0 + 8;
#pragma unroll
  for (int j = 0; j < BT / 8; ++j) {
    const int c0 = 8 * j + 2 * tq;
    st[c0 * kLd + n0] = __float2bfloat16_rn(acc[4 * j + 0]);
    st[(c0 + 1) * kLd + n0] = __float2bfloat16_rn(acc[4 * j + 1]);
    st[c0 * kLd + n1] = __float2bfloat16_rn(acc[4 * j + 2]);
    st[(c0 + 1) * kLd + n1] = __float2bfloat16_rn(acc[4 * j + 3]);
  }
  __syncthreads();
  bf16* yb = p.y + static_cast<size_t>(row0) * p.N + static_cast<size_t>(nt) * kRows;
  for (int c = tid; c < rows * 16; c += kThreads) {
    const int r = c >> 4, ch = c & 15;
    *reinterpret_cast<uint4*>(yb + static_cast<size_t>(r) * p.N + ch * 8) =
        *reinterpret_cast<const uint4*>(st + r * kLd + ch * 8);
  }
}

bool g_fp8_cluster = false;    // cluster of 2 with X multicast at BT >= 128 when N/128 is even (slower, off)
bool g_fp8_persistent = false;  // persistent tile loop (CL = 1): measured 3-10% slower, off

int g_fp8_variant = kFp8DefaultVariant;

template <int BT>
void launch(const Params& p, int grid_y, cudaStream_t stream) {
  static bool configured = false;
  if (!configured) {
    SS_CUDA(cudaFuncSetAttribute(fp8_grouped_kernel<BT>, cudaFuncAttributeMaxDynamicSharedMemorySize, FCfg<BT>::kSmem));
    configured = true;
  }
  dim3 grid(p.N / kRows, grid_y);
  fp8_grouped_kernel<BT><<<grid, kThreads, FCfg<BT>::kSmem, stream>>>(p);
  SS_LAUNCH_CHECK();
}

void dispatch_bt(const Params& p, int bt, int grid_y, cudaStream_t stream) {
  switch (bt) {
    case 8: launch<8>(p, grid_y, stream); return;
    case 16: launch<16>(p, grid_y, stream); return;
    case 32: launch<32>(p, grid_y, stream); return;
    case 64: launch<64>(p, grid_y, stream); return;
    case 128: launch<128>(p, grid_y, stream); return;
    default: throw std::invalid_argument("fp8 grouped gemm: bt must be 8, 16, 32, 64 or 128");
  }
}

void check_nk(int N, int K, int G, const char* who) {
  if (N <= 0 || K <= 0 || G <= 0 || N % kRows != 0 || K % (2 * kKB) != 0 || K > kKB * kMaxKBlocks)
    throw std::invalid_argument(std::string(who) + ": need N % 128 == 0, K % 256 == 0, K <= 16384, G > 0");
}

}  // namespace

namespace detail {
// gemm_fp8_tm.cu
void fp8_tm_launch(int bn, int cl, bool pers, const void* x, long long x_rows, const float* xs, int xs_ld, const void* w, const float* ws,
                   int num_experts, const int* expert_ids, const int* masked_m, const int* row_offsets,
                   const int* tile_offsets, int G, int N, int K, int max_m, int tiles_per_group, int grid_y, bf16* y,
                   cudaStream_t stream);
// gemm_fp8_ws.cu
void fp8_ws_launch(int bt, bool cluster, bool persistent, const void* x, long long x_rows, const float* xs, int xs_ld,
                   const void* w, const float* ws, int num_experts, const int* expert_ids, const int* masked_m,
                   const int* row_offsets, const int* tile_offsets, int G, int N, int K, int max_m, int tiles_per_group,
                   int grid_y, bf16* y, cudaStream_t stream);
}  // namespace detail

// tokens-as-M kernels (variants 2-5): weight-tile width and cluster size for N
static int tm_bn(int N) { return (g_fp8_variant == 3 || g_fp8_variant == 5) && N % 256 == 0 ? 256 : 128; }
static int tm_cl(int N, int bn) { return g_fp8_variant >= 4 && (N / bn) % 2 == 0 ? 2 : 1; }

void fp8_set_variant(int v) {
  if (v < 0 || v > 5)
    throw std::invalid_argument(
        "fp8_set_variant: 0 (warp-specialised TMA), 1 (cp.async), 2 / 3 (tokens-as-M 128x128 pipelined / 128x256), "
        "4 / 5 (the same in 2-CTA clusters sharing the token tile)");
  g_fp8_variant = v;
}
int fp8_variant() { return g_fp8_variant; }
void fp8_set_cluster(bool on) { g_fp8_cluster = on; }
void fp8_set_persistent(bool on) { g_fp8_persistent = on; }
bool fp8_persistent() { return g_fp8_persistent; }
bool fp8_cluster() { return g_fp8_cluster; }

int fp8_pick_bt(double rows_per_group) {
  for (int bt : {8, 16, 32, 64, 128})
    if (rows_per_group <= bt) return bt;
  if (g_fp8_variant >= 1) return 128;  // variant 1, and the tokens-as-M kernels (128-row token tiles)
  // fewest padded rows among 128 / 192 / 256 (ties -> the wider tile: less L2 traffic per FLOP)
  const long long m = static_cast<long long>(rows_per_group + 0.999);
  int best = 256;
  long long best_pad = (m + 255) / 256 * 256;
  for (int bt : {192, 128}) {
    const long long pad = (m + bt - 1) / bt * bt;
    if (pad < best_pad) { best = bt; best_pad = pad; }
  }
  return best;
}

void fp8_grouped_gemm_masked(const void* x, const float* x_scale, int x_scale_ld, const void* w, const float* w_scale,
                             int num_experts, const int* expert_ids, const int* masked_m, int G, int max_m, int N,
                             int K, int bt, bf16* y, cudaStream_t stream) {
  check_nk(N, K, G, "fp8_grouped_gemm_masked");
  if (max_m <= 0) return;
  if (x_scale_ld < G * max_m || x_scale_ld % 4 != 0)
    throw std::invalid_argument("fp8_grouped_gemm_masked: x_scale_ld must be >= G*max_m and a multiple of 4");
  const int tpg = (max_m + bt - 1) / bt;
  if (static_cast<long long>(tpg) * G > 65535) throw std::invalid_argument("fp8_grouped_gemm_masked: grid too large");
  if (g_fp8_variant >= 2 && bt == 128) {
    const int bn = tm_bn(N), cl = tm_cl(N, bn);
    detail::fp8_tm_launch(bn, cl, g_fp8_persistent && cl == 1, x, static_cast<long long>(G) * max_m, x_scale,
                          x_scale_ld, w, w_scale, num_experts, expert_ids, masked_m, nullptr, nullptr, G, N, K, max_m,
                          tpg, tpg * G, y, stream);
    return;
  }
  if (g_fp8_variant != 1) {
    detail::fp8_ws_launch(bt, g_fp8_cluster, g_fp8_persistent, x, static_cast<long long>(G) * max_m, x_scale, x_scale_ld,
                          w, w_scale, num_experts, expert_ids, masked_m, nullptr, nullptr, G, N, K, max_m, tpg, tpg * G,
                          y, stream);
    return;
  }
  if (bt > 128) throw std::invalid_argument("fp8 grouped gemm variant 1: bt <= 128");
  const Params p{static_cast<const uint8_t*>(x), x_scale, static_cast<const uint8_t*>(w), w_scale, expert_ids, masked_m,
                 nullptr, nullptr, y, G, N, K, max_m, x_scale_ld, tpg};
  dispatch_bt(p, bt, tpg * G, stream);
}

void fp8_grouped_gemm_contiguous(const void* x, long long x_rows, const float* x_scale, int x_scale_ld, const void* w,
                                 const float* w_scale, int num_experts, const int* expert_ids, const int* row_offsets,
                                 const int* tile_offsets, int G, int N, int K, int bt, int max_tiles, bf16* y,
                                 cudaStream_t stream) {
  check_nk(N, K, G, "fp8_grouped_gemm_contiguous");
  if (max_tiles <= 0) return;
  if (max_tiles > 65535) throw std::invalid_argument("fp8_grouped_gemm_contiguous: more than 65535 token tiles");
  if (x_scale_ld < x_rows || x_scale_ld % 4 != 0)
    throw std::invalid_argument("fp8_grouped_gemm_contiguous: x_scale_ld must be >= x_rows and a multiple of 4");
  if (g_fp8_variant >= 2 && bt == 128) {
    const int bn = tm_bn(N), cl = tm_cl(N, bn);
    detail::fp8_tm_launch(bn, cl, g_fp8_persistent && cl == 1, x, x_rows, x_scale, x_scale_ld, w, w_scale,
                          num_experts, expert_ids, nullptr, row_offsets, tile_offsets, G, N, K, 0, 0, max_tiles, y, stream);
    return;
  }
  if (g_fp8_variant != 1) {
    detail::fp8_ws_launch(bt, g_fp8_cluster, g_fp8_persistent, x, x_rows, x_scale, x_scale_ld, w, w_scale, num_experts,
                          expert_ids, nullptr, row_offsets, tile_offsets, G, N, K, 0, 0, max_tiles, y, stream);
    return;
  }
  if (bt > 128) throw std::invalid_argument("fp8 grouped gemm variant 1: bt <= 128");
  const Params p{static_cast<const uint8_t*>(x), x_scale, static_cast<const uint8_t*>(w), w_scale, expert_ids, nullptr,
                 row_offsets, tile_offsets, y, G, N, K, 0, x_scale_ld, 0};
  dispatch_bt(p, bt, max_tiles, stream);
}

}  // namespace servesim::kernels::moe