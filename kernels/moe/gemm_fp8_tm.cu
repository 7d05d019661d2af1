// FP8 (e4m3) block-scaled grouped expert GEMM for large row counts (prefill, masked m >= 128):
// "tokens as the M side" kernels. Same math, scales and layouts as gemm_fp8.cu (NOTES.md §7, §9):
//   Y[t, n] = sum_kb x_scale[kb][t] * w_scale[e][n/128][kb] * sum_{k in kb} X[t,k] W[e][n,k].
//
// CTA tile: 128 tokens (2 consumer warpgroups x wgmma m64) x BN weight rows (wgmma N side), K in
// 128-wide blocks (= one scale block = one 128-byte swizzle row of e4m3). Producer warpgroup: one
// thread issues TMA loads of the token and weight tiles, warp 1 loads the 128 activation scales
// with 4-byte cp.async (token rows start anywhere, so no TMA box for them).
// With tokens on M a thread's accumulator holds 2 token rows, so promotion needs 2 activation
// scales per k-block (the weights-as-M kernel of gemm_fp8.cu needs BT/4 of them).
//  - BN = 128 ("pipelined"): two temporary accumulators; k-block kb+1's wgmmas are issued before
//    k-block kb is promoted (acc 64 + 2 x 64 registers), so the tensor core always has a queued
//    group while a warpgroup promotes.
//  - BN = 256: one temporary (n128, two halves per k-block, acc 128 + tmp 64 registers), half the
//    token-tile traffic per FLOP; promotion serialised with the warpgroup's own wgmmas.
//  - CL = 2 (either BN): a cluster of 2 CTAs on adjacent N-tiles shares the token tile; each CTA
//    loads half of it by TMA multicast into both, so a slot is refilled only after the consumers of
//    both CTAs released it (empty barrier counts 16 arrivals, half of them remote).
#include "moe/moe.cuh"
#include "moe/device_util.cuh"
#include "moe/sm90_tma.cuh"
#include "moe/wgmma_fp8.cuh"
#include "common/cuda_check.cuh"

#include <algorithm>
#include <stdexcept>

namespace servesim::kernels::moe {

namespace {

constexpr int kBM = 128;  // tokens per CTA
constexpr int kKB = 128;  // K per stage

struct TmParams {
  const float* xs;  // [K/128][xs_ld]
  const float* ws;  // [E, N/128, K/128]
  const int* expert_ids;
  const int* masked_m;
  const int* row_offsets;
  const int* tile_offsets;
  bf16* y;
  int G, N, K, max_m, tiles_per_group, xs_ld;
};

template <int BN, bool PERS>
struct TCfg {
  static constexpr int kX = kBM * kKB;  // 16 KB token tile
  static constexpr int kW = BN * kKB;   // weight tile
  static constexpr int kS = kBM * 4;    // activation scales
  // persistent forms keep a separate epilogue staging buffer, so fewer stages fit
  static constexpr int kStages = PERS ? (BN == 128 ? 5 : 3) : (BN == 128 ? 6 : 4);
  static constexpr int kTx = kX + kW;
  static constexpr int kNB = BN / 128;  // weight-scale blocks per tile
  static constexpr int kLd = BN + 8;    // epilogue staging row stride (bf16)
  static constexpr int kStaging = PERS ? kBM * kLd * 2 : 0;
  static constexpr int kSmem = kStages * (kX + kW + kS) + 2 * kStages * 8 + kNB * 128 * 4 + kStaging + 1024;
};

/// Tile t of the flattened (token tile, N-tile) space, N-tile fastest -> group, first row, rows;
/// false for tiles past a group's count (masked) or past the last tile (contiguous).
__device__ __forceinline__ bool tm_tile(const TmParams& p, int ty, int& g, int& row0, int& rows) {
  if (p.masked_m) {
    g = ty / p.tiles_per_group;
    const int t0 = (ty - g * p.tiles_per_group) * kBM;
    const int cnt = min(p.masked_m[g], p.max_m);
    if (t0 >= cnt) return false;
    row0 = g * p.max_m + t0;
    rows = min(kBM, cnt - t0);
    return true;
  }
  if (ty >= p.tile_offsets[p.G]) return false;
  int lo = 0, hi = p.G;  // largest g with tile_offsets[g] <= ty
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (p.tile_offsets[mid] <= ty) lo = mid; else hi = mid;
  }
  g = lo;
  row0 = p.row_offsets[g] + (ty - p.tile_offsets[g]) * kBM;
  rows = min(kBM, p.row_offsets[g + 1] - row0);
  return true;
}

/// One CTA per tile (PERS = false, gridDim.x = ntx * tiles_y) or persistent (PERS = true, gridDim.x
/// = resident CTAs walking t = blockIdx.x, + gridDim.x, ...: the producer fills the next tile's
/// stages while the consumers run the epilogue of the current one).
template <int BN, int CL, bool PERS>
__global__ void __launch_bounds__(384, 1)
    fp8_tm_kernel(const __grid_constant__ CUtensorMap tm_w, const __grid_constant__ CUtensorMap tm_x, const TmParams p,
                  int ntx, int total) {
  static_assert(!(PERS && CL > 1), "persistent form is CL = 1 only");
  using C = TCfg<BN, PERS>;
  constexpr int S = C::kStages;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* xring = smem;                                           // [S][128 x 128]
  uint8_t* wring = smem + S * C::kX;                               // [S][BN x 128]
  float* sring = reinterpret_cast<float*>(wring + S * C::kW);      // [S][128]
  uint64_t* full = reinterpret_cast<uint64_t*>(sring + S * kBM);   // [S]
  uint64_t* empty = full + S;                                      // [S]
  float* wsc = reinterpret_cast<float*>(empty + S);                // [kNB][K/128]
  // epilogue staging [128][BN + 8] bf16: the ring itself when one tile per CTA
  bf16* st = PERS ? reinterpret_cast<bf16*>(wsc + C::kNB * 128) : reinterpret_cast<bf16*>(smem);

  const int KB = p.K / kKB;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1 + 32);  // TMA thread's expect_tx + 32 cp.async arrivals of the scale warp
      mbar_init(&empty[s], 8 * CL);  // lane 0 of each consumer warp of each CTA of the cluster
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if constexpr (CL > 1) cluster_sync_all();  // the peer's barriers exist before any remote arrive / multicast
  else __syncthreads();
  const uint32_t crank = CL > 1 ? cluster_ctarank() : 0;

  if (warp < 4) {  // ---- producer warpgroup ----
    setmaxnreg_dec<40>();
    if (tid == 0 || warp == 1) {
      uint32_t it = 0;  // stage counter, runs on across tiles
      for (int t = blockIdx.x; t < total; t += gridDim.x) {
        const int ty = t / ntx, nt = t - ty * ntx;
        int g, row0, rows;
        if (!tm_tile(p, ty, g, row0, rows)) continue;
        const int e = p.expert_ids ? p.expert_ids[g] : g;
        const int wrow = e * p.N + nt * BN;
        for (int kb = 0; kb < KB; ++kb, ++it) {
          const int slot = it % S;
          mbar_wait(&empty[slot], ((it / S) & 1) ^ 1);
          if (tid == 0) {
            mbar_expect_tx(&full[slot], C::kTx);  // with CL = 2, half of the token tile comes from the peer
            if constexpr (CL > 1)
              tma_load_2d_mc(xring + slot * C::kX + crank * (kBM / CL) * kKB, &tm_x, kb * kKB,
                             row0 + crank * (kBM / CL), &full[slot], static_cast<uint16_t>((1u << CL) - 1));
            else
              tma_load_2d(xring + slot * C::kX, &tm_x, kb * kKB, row0, &full[slot]);
            tma_load_2d(wring + slot * C::kW, &tm_w, kb * kKB, wrow, &full[slot]);
          } else {  // warp 1: activation scales by 4-byte cp.async
            float* dst = sring + slot * kBM;
            const float* src = p.xs + static_cast<size_t>(kb) * p.xs_ld + row0;
#pragma unroll
            for (int r = lane; r < kBM; r += 32) cp_async4(dst + r, r < rows ? src + r : p.xs, r < rows ? 4 : 0);
            asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(&full[slot])) : "memory");
          }
        }
      }
    }
    if constexpr (CL > 1) cluster_sync_all();  // the peer's consumers may still arrive on our barriers
    return;
  }

  // ---- consumer warpgroups ----
  setmaxnreg_inc<232>();
  const int ct = tid - 128, cw = warp - 4, wg = cw >> 2, gq = lane >> 2, tq = lane & 3;
  const int r_lo = wg * 64 + (cw & 3) * 16 + gq, r_hi = r_lo + 8;  // token rows of this thread in the tile
  constexpr int NA = 64;  // m64n128 accumulator floats per thread
  uint32_t it0 = 0;       // stage counter at the tile's first k-block

  // 4 wgmma m64n128k32 of k-block kb, weight half h, into t (the first with scale-d = 0)
  auto issue = [&](float(&t)[NA], int kb, int h) {
    const int slot = (it0 + kb) % S;
    const uint32_t xa = smem_u32(xring + slot * C::kX) + wg * (64 * 128);
    const uint32_t wb = smem_u32(wring + slot * C::kW) + h * (128 * 128);
    wgmma_fence();
    WgmmaFp8<128, true>::mma(t, desc_sw128(xa), desc_sw128(wb));
#pragma unroll
    for (int s = 1; s < 4; ++s) WgmmaFp8<128, false>::mma(t, desc_sw128(xa + s * 32), desc_sw128(wb + s * 32));
    wgmma_commit();  // no operand fence here: t may stay in flight while the other temporary is promoted
  };
  auto release = [&](int kb) {
    __syncwarp();
    if (lane == 0) {
      if constexpr (CL > 1) {
#pragma unroll
        for (int r = 0; r < CL; ++r) mbar_arrive_cluster(&empty[(it0 + kb) % S], r);
      } else {
        mbar_arrive(&empty[(it0 + kb) % S]);
      }
    }
  };
  // acc += t * s; element (j, q): row q < 2 ? r_lo : r_hi
  auto promote = [&](float(&a)[NA], const float(&t)[NA], float s_lo, float s_hi) {
#pragma unroll
    for (int j = 0; j < NA / 4; ++j) {
      a[4 * j + 0] = fmaf(t[4 * j + 0], s_lo, a[4 * j + 0]);
      a[4 * j + 1] = fmaf(t[4 * j + 1], s_lo, a[4 * j + 1]);
      a[4 * j + 2] = fmaf(t[4 * j + 2], s_hi, a[4 * j + 2]);
      a[4 * j + 3] = fmaf(t[4 * j + 3], s_hi, a[4 * j + 3]);
    }
  };
  auto wait_full = [&](int kb) { mbar_wait(&full[(it0 + kb) % S], ((it0 + kb) / S) & 1); };
  auto xscales = [&](int kb) { return sring + ((it0 + kb) % S) * kBM; };

  for (int t = blockIdx.x; t < total; t += gridDim.x) {
    const int ty = t / ntx, nt = t - ty * ntx;
    int g, row0, rows;
    if (!tm_tile(p, ty, g, row0, rows)) continue;
    const int e = p.expert_ids ? p.expert_ids[g] : g;
    {  // weight scales of this tile's kNB 128-row blocks (the previous tile's readers passed the epilogue barriers)
      const float* wsrc = p.ws + (static_cast<size_t>(e) * (p.N / 128) + nt * C::kNB) * KB;
      for (int i = ct; i < C::kNB * KB; i += 256) wsc[i] = wsrc[i];
      named_bar(1, 256);
    }
    float acc[C::kNB][NA];
#pragma unroll
    for (int h = 0; h < C::kNB; ++h)
#pragma unroll
      for (int i = 0; i < NA; ++i) acc[h][i] = 0.f;

    if constexpr (C::kNB == 1) {
      float t0[NA], t1[NA];
      // K % 256 == 0, so KB is even: per iteration t0 takes k-block kb, t1 kb+1, both issued before
      // t0 is promoted (t0's promotion overlaps t1's wgmmas). Nothing may be in flight across the loop
      // back-edge: the phi copies of an in-flight accumulator there made ptxas serialise every wgmma
      // (C7514), so t1's promotion overlaps only the other warpgroup's wgmmas.
      auto finish = [&](float(&tt)[NA], int kb, float s_lo, float s_hi) {
#pragma unroll
        for (int i = 0; i < NA; ++i) fence_operand(tt[i]);
        release(kb);
        promote(acc[0], tt, s_lo, s_hi);
      };
      for (int kb = 0; kb < KB; kb += 2) {
        wait_full(kb);
        issue(t0, kb, 0);
        wait_full(kb + 1);
        issue(t1, kb + 1, 0);
        const float* xa = xscales(kb);
        const float wa = wsc[kb], a_lo = xa[r_lo] * wa, a_hi = xa[r_hi] * wa;
        wgmma_wait<1>();
        finish(t0, kb, a_lo, a_hi);
        const float* xb = xscales(kb + 1);
        const float wbs = wsc[kb + 1], b_lo = xb[r_lo] * wbs, b_hi = xb[r_hi] * wbs;
        wgmma_wait<0>();
        finish(t1, kb + 1, b_lo, b_hi);
      }
    } else {
      float tt[NA];
      for (int kb = 0; kb < KB; ++kb) {
        wait_full(kb);
        const float* xs = xscales(kb);
        const float x_lo = xs[r_lo], x_hi = xs[r_hi];
#pragma unroll
        for (int h = 0; h < C::kNB; ++h) {
          issue(tt, kb, h);
          const float w = wsc[h * KB + kb];
          wgmma_wait<0>();
#pragma unroll
          for (int i = 0; i < NA; ++i) fence_operand(tt[i]);
          if (h == C::kNB - 1) release(kb);
          promote(acc[h], tt, x_lo * w, x_hi * w);
        }
      }
    }
    it0 += KB;

    // Epilogue: stage [128 tokens][BN] bf16 (row stride BN + 8: conflict-free 4-byte writes), then
    // 16-byte coalesced stores of the valid rows. One tile per CTA: the ring is free (all loads were
    // consumed); persistent: a separate buffer, as the producer is already filling the next tile.
    named_bar(1, 256);
    constexpr int kLd = C::kLd;
#pragma unroll
    for (int h = 0; h < C::kNB; ++h)
#pragma unroll
      for (int j = 0; j < NA / 4; ++j) {
        const int col = h * 128 + 8 * j + 2 * tq;
        *reinterpret_cast<__nv_bfloat162*>(st + r_lo * kLd + col) = __floats2bfloat162_rn(acc[h][4 * j + 0], acc[h][4 * j + 1]);
        *reinterpret_cast<__nv_bfloat162*>(st + r_hi * kLd + col) = __floats2bfloat162_rn(acc[h][4 * j + 2], acc[h][4 * j + 3]);
      }
    named_bar(1, 256);
    constexpr int kCh = BN / 8;  // 16-byte chunks per row
    bf16* yb = p.y + static_cast<size_t>(row0) * p.N + static_cast<size_t>(nt) * BN;
    for (int c = ct; c < rows * kCh; c += 256) {
      const int r = c / kCh, ch = c - r * kCh;
      *reinterpret_cast<uint4*>(yb + static_cast<size_t>(r) * p.N + ch * 8) =
          *reinterpret_cast<const uint4*>(st + r * kLd + ch * 8);
    }
  }
  if constexpr (CL > 1) cluster_sync_all();
}

template <int BN, int CL, bool PERS>
void launch_tm(const void* x, long long x_rows, const void* w, int num_experts, const TmParams& p, int grid_y,
               cudaStream_t stream) {
  using C = TCfg<BN, PERS>;
  static int resident = 0;
  if (!resident) {
    SS_CUDA(cudaFuncSetAttribute(fp8_tm_kernel<BN, CL, PERS>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
    int dev = 0, sms = 0;
    SS_CUDA(cudaGetDevice(&dev));
    SS_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    resident = sms;  // one CTA per SM (shared memory)
  }
  const CUtensorMap tw = make_map_2d(w, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, p.K, uint64_t(num_experts) * p.N, p.K, kKB, BN,
                                     CU_TENSOR_MAP_SWIZZLE_128B);
  const CUtensorMap tx =
      make_map_2d(x, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, p.K, uint64_t(x_rows), p.K, kKB, kBM / CL, CU_TENSOR_MAP_SWIZZLE_128B);
  const int ntx = p.N / BN;
  const long long total = static_cast<long long>(ntx) * grid_y;
  if (total > (1ll << 30)) throw std::invalid_argument("fp8 tokens-as-M kernel: too many tiles");
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(PERS ? static_cast<unsigned>(std::min<long long>(total, resident)) : static_cast<unsigned>(total));
  cfg.blockDim = dim3(384);
  cfg.dynamicSmemBytes = C::kSmem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = CL;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  SS_CUDA(cudaLaunchKernelEx(&cfg, fp8_tm_kernel<BN, CL, PERS>, tw, tx, p, ntx, static_cast<int>(total)));
  SS_LAUNCH_CHECK();
}

}  // namespace

namespace detail {
/// Launches the tokens-as-M kernel (token tiles of 128 rows). bn = 128 (pipelined promotion) or
/// 256 (needs N % 256 == 0); cl = 2: clusters of 2 CTAs on adjacent N-tiles share the token tile
/// (each loads half by TMA multicast; needs (N / bn) even); pers: persistent grid of one CTA per SM
/// (cl 1 only). masked_m != nullptr: masked layout (tiles_per_group = ceil(max_m/128),
/// grid_y = G * tiles_per_group); else contiguous (tile_offsets computed with 128-row tiles,
/// grid_y >= tile_offsets[G]). Arguments are checked by the public entry points in gemm_fp8.cu.
void fp8_tm_launch(int bn, int cl, bool pers, const void* x, long long x_rows, const float* xs, int xs_ld, const void* w, const float* ws,
                   int num_experts, const int* expert_ids, const int* masked_m, const int* row_offsets,
                   const int* tile_offsets, int G, int N, int K, int max_m, int tiles_per_group, int grid_y, bf16* y,
                   cudaStream_t stream) {
  const TmParams p{xs, ws, expert_ids, masked_m, row_offsets, tile_offsets, y, G, N, K, max_m, tiles_per_group, xs_ld};
  if ((bn != 128 && bn != 256) || N % bn != 0 || (cl != 1 && cl != 2) || (N / bn) % cl != 0 || (pers && cl != 1))
    throw std::invalid_argument(
        "fp8 tokens-as-M kernel: bn 128 or 256 dividing N, cl 1 or 2 dividing N / bn, persistent only with cl 1");
  if (pers) {
    bn == 256 ? launch_tm<256, 1, true>(x, x_rows, w, num_experts, p, grid_y, stream)
              : launch_tm<128, 1, true>(x, x_rows, w, num_experts, p, grid_y, stream);
  } else if (bn == 256) {
    cl == 2 ? launch_tm<256, 2, false>(x, x_rows, w, num_experts, p, grid_y, stream)
            : launch_tm<256, 1, false>(x, x_rows, w, num_experts, p, grid_y, stream);
  } else {
    cl == 2 ? launch_tm<128, 2, false>(x, x_rows, w, num_experts, p, grid_y, stream)
            : launch_tm<128, 1, false>(x, x_rows, w, num_experts, p, grid_y, stream);
  }
}
}  // namespace detail

}  // namespace servesim::kernels::moe
