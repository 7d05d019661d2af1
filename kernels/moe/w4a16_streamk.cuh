// MXFP4 W4A16 grouped GEMM, variant 7: stream-K form of variant 5 (w4a16_streamk_kernel), its
// per-CTA partial-sum workspace (g_sk, sk_ensure), g_sk_ctas and launch_streamk.
// Part of gemm_w4a16.cu's translation unit, not a standalone header: gemm_w4a16.cu includes the
// kernel parts in their original order after its shared definitions (Params, Cfg, kThreads,
// scale_factor, dequant_word); one unit keeps the code cicc / ptxas generate for every kernel
// exactly as before the file was split (see gemm_w4a16.cu).
#pragma once
#include "moe/moe.cuh"
#include "moe/device_util.cuh"
#include "moe/sm90_tma.cuh"
#include "moe/wgmma_rs.cuh"
#include "common/cuda_check.cuh"

namespace servesim::kernels::moe {
namespace {

// ================================================================================================
// Variant 7: stream-K form of variant 5 (decode tile widths BT <= 32, K % 256 == 0). A persistent
// grid of NC = (resident CTAs per SM) x SMs CTAs splits the flattened work
//   unit u = (token tile tt, n-tile nt, k-unit ku), tile tl = tt * nx + nt, u = tl * UT + ku,
//   one k-unit = 256 K (two pipeline stages of variant 5, so every segment has an even stage count)
// into equal contiguous ranges [c*W/NC, (c+1)*W/NC), W = tiles(device) * nx * UT: every SM streams
// the same weight bytes whatever G (no partial last wave: K3 w2 G=8 has 224 tiles on 264 slots).
// A CTA walks its range tile segment by tile segment with ONE stage ring (producer warp runs ahead
// across segments). A segment that covers a whole tile is stored directly; a partial one writes its
// fp32 accumulators to a per-CTA workspace slot (slot 0: the CTA's first segment, 1: its last) and
// bumps the tile's counter; the CTA that arrives last sums all contributors' partials in CTA order
// (deterministic), resets the counter to 0 for the next launch and stores bf16. No CTA ever waits
// for another (no co-residency assumption).
// ================================================================================================
template <int BT>
struct SkCfg {
  using D = DCfg<BT, 2>;
  static constexpr int kLd = 136;
  static constexpr int kSt = ((BT * kLd * 2 + 127) / 128) * 128;  // bf16 epilogue staging
  static constexpr int kSmem = D::kStages * (D::kX + D::kW) + kSt + 2 * D::kStages * 8 + 16 + 1024;
};

__device__ __forceinline__ int sk_cta_of(int u, int W, int NC) {
  return static_cast<int>(((static_cast<long long>(u) + 1) * NC - 1) / W);
}
__device__ __forceinline__ int sk_u0(int c, int W, int NC) {
  return static_cast<int>(static_cast<long long>(c) * W / NC);
}

template <int BT>
__global__ void __launch_bounds__(kDecThreads, 2)
    w4a16_streamk_kernel(const Params p, float* __restrict__ part, int* __restrict__ cnt) {
  using D = DCfg<BT, 2>;
  using C = SkCfg<BT>;
  constexpr int S = D::kStages, KS = 2, kLd = C::kLd;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* xs = smem;                    // [S][KS][BT*128], 1024-aligned sub-tiles
  uint8_t* ws = smem + S * D::kX;        // [S][8704]
  bf16* st = reinterpret_cast<bf16*>(ws + S * D::kW);  // [BT][kLd]
  uint64_t* full = reinterpret_cast<uint64_t*>(ws + S * D::kW + C::kSt);
  uint64_t* empty = full + S;
  volatile int* last_flag = reinterpret_cast<volatile int*>(empty + S);

  const int nx = p.N / kRowsPerCta;
  const int UT = p.K / 256;
  const int W = p.tile_offsets[p.G] * nx * UT;  // < 2^31: tiles <= 65535, nx * UT < 2^15
  // NC = min(grid, W): every CTA of [0, NC) owns >= 1 unit, so the CTAs between a tile's first and
  // last contributor all contribute (the fix-up counts them); CTAs past NC exit
  const int c = blockIdx.x, NC = min(static_cast<int>(gridDim.x), W);
  if (c >= NC) return;  // whole CTA (also W == 0)
  const int u0 = sk_u0(c, W, NC), u1 = sk_u0(c + 1, W, NC);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;

  // tile tl -> first row, row count, weight pointer of its n-tile
  auto tile_info = [&](int tl, int& row0, int& rows, const uint8_t*& wmat) {
    const int tt = tl / nx, nt = tl - tt * nx;
    int lo = 0, hi = p.G;
    while (hi - lo > 1) {
      const int mid = (lo + hi) >> 1;
      if (p.tile_offsets[mid] <= tt) lo = mid; else hi = mid;
    }
    row0 = p.row_offsets[lo] + (tt - p.tile_offsets[lo]) * BT;
    rows = min(BT, p.row_offsets[lo + 1] - row0);
    const int e = p.expert_ids ? p.expert_ids[lo] : lo;
    wmat = p.w + static_cast<size_t>(e) * p.matrix_bytes + static_cast<size_t>(nt) * (p.K / kKBlock) * kWBlockBytes;
  };

  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1 + 32);
      mbar_init(&empty[s], 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp == 8) {  // ---- producer warp: all segments through one ring ----
    int kg = 0;
    for (int u = u0; u < u1;) {
      const int tl = u / UT, k0 = u - tl * UT, k1 = min(UT, k0 + (u1 - u));
      int row0, rows;
      const uint8_t* wmat;
      tile_info(tl, row0, rows, wmat);
      const bf16* xrow0 = p.x + static_cast<size_t>(row0) * p.K;
      for (int kb = 2 * k0; kb < 2 * k1; ++kb, ++kg) {
        const int slot = kg % S;
        mbar_wait(&empty[slot], ((kg / S) & 1) ^ 1);
        if (lane == 0) {
          mbar_expect_tx(&full[slot], D::kW);
          bulk_g2s(ws + slot * D::kW, wmat + static_cast<size_t>(kb) * D::kW, D::kW, &full[slot]);
        }
        uint8_t* xd = xs + slot * D::kX;
#pragma unroll
        for (int cc0 = lane; cc0 < BT * 8 * KS; cc0 += 32) {
          const int ks = cc0 / (BT * 8), cc = cc0 % (BT * 8), r = cc >> 3, ch = cc & 7;
          const bool ok = r < rows;
          const bf16* src = ok ? xrow0 + static_cast<size_t>(r) * p.K + (kb * KS + ks) * kKBlock + ch * 8 : p.x;
          cp_async16(xd + ks * D::kXSub + r * 128 + ((ch ^ (r & 7)) << 4), src, ok ? 16 : 0);
        }
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(&full[slot])) : "memory");
      }
      u += k1 - k0;
    }
    cp_async_wait<0>();
    return;
  }

  // ---- consumers (warps 0-7) ----
  float acc[BT / 8][4];
  uint32_t afrag[2][KS][4][4];
  int kg0 = 0;  // global stage index of the segment's first stage

  // li: stage index inside the segment; releases: stage kg-1 after wait_group 1 (li > 0), and at the
  // segment's last stage (wait_group 0) also stage kg itself, so every stage is released exactly once
  auto body = [&](int kg, int li, auto& af, auto last) {
    const int slot = kg % S;
    mbar_wait(&full[slot], (kg / S) & 1);
    decode_stage_mma<BT, KS, D::kXSub, decltype(last)::value>(ws + slot * D::kW, xs + slot * D::kX, warp, lane, gq, af, acc);
    __syncwarp();
    if (lane == 0) {
      if (li > 0) mbar_arrive(&empty[(kg - 1) % S]);
      if constexpr (decltype(last)::value) mbar_arrive(&empty[kg % S]);
    }
  };
  using NotLast = std::integral_constant<bool, false>;
  using Last = std::integral_constant<bool, true>;
  const int n0 = warp * 16 + gq, n1 = n0 + 8;

  for (int u = u0; u < u1;) {
    const int tl = u / UT, k0 = u - tl * UT, k1 = min(UT, k0 + (u1 - u));
    const int L = 2 * (k1 - k0);  // >= 2, even
#pragma unroll
    for (int i = 0; i < BT / 8; ++i)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][q] = 0.f;
    int li = 0;
    for (; li < L - 2; li += 2) {
      body(kg0 + li, li, afrag[0], NotLast{});
      body(kg0 + li + 1, li + 1, afrag[1], NotLast{});
    }
    body(kg0 + L - 2, L - 2, afrag[0], NotLast{});
    body(kg0 + L - 1, L - 1, afrag[1], Last{});
    kg0 += L;
#pragma unroll
    for (int i = 0; i < BT / 8; ++i)
#pragma unroll
      for (int q = 0; q < 4; ++q) fence_operand(acc[i][q]);

    bool store = true;
    if (k0 != 0 || k1 != UT) {  // partial tile: fix-up through the workspace
      const int ts = tl * UT;
      const int first = sk_cta_of(ts, W, NC), lastc = sk_cta_of(ts + UT - 1, W, NC);
      float4* mine = reinterpret_cast<float4*>(part) + static_cast<size_t>(2 * c + (u == u0 ? 0 : 1)) * (BT / 8) * 256;
#pragma unroll
      for (int i = 0; i < BT / 8; ++i) __stcg(&mine[i * 256 + tid], make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
      __threadfence();
      named_bar(1, 256);
      if (tid == 0) {
        const int old = atomicAdd(&cnt[tl], 1);
        const int is_last = old == lastc - first;
        if (is_last) cnt[tl] = 0;  // every contributor has arrived: reset for the next launch
        __threadfence();
        *last_flag = is_last;
      }
      named_bar(1, 256);
      store = *last_flag != 0;
      if (store) {
        float r[BT / 8][4];
#pragma unroll
        for (int i = 0; i < BT / 8; ++i)
#pragma unroll
          for (int q = 0; q < 4; ++q) r[i][q] = 0.f;
        for (int j = first; j <= lastc; ++j) {  // contributor (CTA) order: deterministic sum
          if (j == c) {
#pragma unroll
            for (int i = 0; i < BT / 8; ++i)
#pragma unroll
              for (int q = 0; q < 4; ++q) r[i][q] += acc[i][q];
          } else {
            const int uj = sk_u0(j, W, NC);
            const float4* pj =
                reinterpret_cast<const float4*>(part) + static_cast<size_t>(2 * j + (uj >= ts ? 0 : 1)) * (BT / 8) * 256;
#pragma unroll
            for (int i = 0; i < BT / 8; ++i) {
              const float4 v = __ldcg(&pj[i * 256 + tid]);
              r[i][0] += v.x;
              r[i][1] += v.y;
              r[i][2] += v.z;
              r[i][3] += v.w;
            }
          }
        }
#pragma unroll
        for (int i = 0; i < BT / 8; ++i)
#pragma unroll
          for (int q = 0; q < 4; ++q) acc[i][q] = r[i][q];
      }
    }
    if (store) {
      int row0, rows;
      const uint8_t* wmat;
      tile_info(tl, row0, rows, wmat);
      named_bar(1, 256);  // the previous segment's stores have read the staging tile
#pragma unroll
      for (int j = 0; j < BT / 8; ++j) {
        const int c0 = 8 * j + 2 * tq;
        st[c0 * kLd + n0] = __float2bfloat16_rn(acc[j][0]);
        st[(c0 + 1) * kLd + n0] = __float2bfloat16_rn(acc[j][1]);
        st[c0 * kLd + n1] = __float2bfloat16_rn(acc[j][2]);
        st[(c0 + 1) * kLd + n1] = __float2bfloat16_rn(acc[j][3]);
      }
      named_bar(1, 256);
      const int nt = tl % nx;
      bf16* yb = p.y + static_cast<size_t>(row0) * p.N + static_cast<size_t>(nt) * kRowsPerCta;
      for (int cc = tid; cc < rows * 16; cc += 256) {
        const int r = cc >> 4, ch = cc & 15;
        *reinterpret_cast<uint4*>(yb + static_cast<size_t>(r) * p.N + ch * 8) =
            *reinterpret_cast<const uint4*>(st + r * kLd + ch * 8);
      }
    }
    u += k1 - k0;
  }
}

int g_sk_ctas = 0;  // forced stream-K grid (tests); 0 = resident CTAs per SM x SMs

struct SkWorkspace {
  float* part = nullptr;
  size_t part_bytes = 0;
  int* cnt = nullptr;
  size_t cnt_n = 0;
};
SkWorkspace g_sk;

void sk_ensure(size_t part_bytes, size_t cnt_n, cudaStream_t stream) {
  if (part_bytes <= g_sk.part_bytes && cnt_n <= g_sk.cnt_n) return;
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  SS_CUDA(cudaStreamIsCapturing(stream, &cs));
  if (cs != cudaStreamCaptureStatusNone)
    throw std::runtime_error("w4a16 stream-K: workspace must grow while the stream is capturing (run once outside the graph first)");
  SS_CUDA(cudaDeviceSynchronize());
  if (part_bytes > g_sk.part_bytes) {
    if (g_sk.part) SS_CUDA(cudaFree(g_sk.part));
    g_sk.part_bytes = std::max(part_bytes, size_t(16) << 20);
    SS_CUDA(cudaMalloc(&g_sk.part, g_sk.part_bytes));
  }
  if (cnt_n > g_sk.cnt_n) {
    if (g_sk.cnt) SS_CUDA(cudaFree(g_sk.cnt));
    g_sk.cnt_n = std::max(cnt_n, size_t(1) << 20);
    SS_CUDA(cudaMalloc(&g_sk.cnt, g_sk.cnt_n * sizeof(int)));
    SS_CUDA(cudaMemset(g_sk.cnt, 0, g_sk.cnt_n * sizeof(int)));
  }
  SS_CUDA(cudaDeviceSynchronize());
}

template <int BT>
void launch_streamk(const Params& p, int max_tiles, cudaStream_t stream) {
  static int slots = 0;
  if (!slots) {
    SS_CUDA(cudaFuncSetAttribute(w4a16_streamk_kernel<BT>, cudaFuncAttributeMaxDynamicSharedMemorySize, SkCfg<BT>::kSmem));
    int dev = 0, sms = 0, occ = 0;
    SS_CUDA(cudaGetDevice(&dev));
    SS_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    SS_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, w4a16_streamk_kernel<BT>, kDecThreads, SkCfg<BT>::kSmem));
    slots = std::max(1, occ) * sms;
  }
  const long long nx = p.N / kRowsPerCta, work = static_cast<long long>(max_tiles) * nx * (p.K / 256);
  if (work >= (1ll << 31)) throw std::invalid_argument("w4a16 stream-K: work units overflow int");
  const int nc = static_cast<int>(std::min<long long>(g_sk_ctas > 0 ? g_sk_ctas : slots, work));
  sk_ensure(static_cast<size_t>(2) * nc * BT * 128 * sizeof(float), static_cast<size_t>(max_tiles) * nx, stream);
  w4a16_streamk_kernel<BT><<<nc, kDecThreads, SkCfg<BT>::kSmem, stream>>>(p, g_sk.part, g_sk.cnt);
  SS_LAUNCH_CHECK();
}

}  // namespace
}  // namespace servesim::kernels::moe
