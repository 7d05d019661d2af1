// MXFP4 W4A16 grouped GEMM, variants 9 / 10: variant 8's prefill kernel on a persistent grid
// (w4a16_prefill2_kernel) and launch_prefill2.
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
// Variants 9 / 10: variant 8's prefill kernel on a PERSISTENT grid (NOTES.md §14; §13 (1)/(2)).
// 384 threads as variant 8: WG 0 dequantises (its thread 0 produces), WG 1-2 consume. One CTA per SM
// loops over work items (token tile x 128 weight rows) w = blockIdx.x, + gridDim.x, ...; the producer
// and the dequant warpgroup run ahead into the next item while the consumers store the previous one
// (the fill and the epilogue of an item overlap the main loop), so the epilogue stages through a
// separate per-warp buffer instead of the rings. (PERS = false: one item per CTA, not dispatched.)
// POLL (variant 9, A ring SA 4): thread 0 never blocks on an empty slot while it has its own barriers
// to wait for: it spins on mbarrier.test_wait and issues every load whose slot frees meanwhile (in
// variant 8 its blocking wait for the consumers' release of k-block kb-1 held warp 0's decode of kb+1).
// !POLL (variant 10, SA 3): variant 8's blocking refill of the slot of kb-1 after the full_a arrival of kb.
// (A dedicated 13th producer warp does not fit: 416 threads put 4 warps on one SM sub-partition,
// 16384 / 128 = 128 registers each, and the m64n256 consumers need 154: ptxas C7602.)
// MEASURED SLOWER than variant 8 at every bt-256 shape (v10 0.82-0.95x, v9 0.74-0.89x its speed; NOTES.md
// §14): kept for comparison, not dispatched by default.
// Epilogue (both): each consumer warp transposes its 16 outputs x 32 tokens per pass through a
// private 32 x 48-byte buffer (conflict-free 2-byte stores) and writes 32-byte row pieces.
// ================================================================================================
template <int SA, bool PERS>
struct P2Cfg {  // SA: dequantised A ring slots; PERS: persistent grid
  static constexpr int kBT = 256;
  static constexpr int kX = kBT * 128;
  static constexpr int kA = 128 * 128;
  static constexpr int kSL = 4;
  static constexpr int kSA = SA;
  static constexpr int kStageLd = 24;                          // bf16 per staged token row (48 B)
  static constexpr int kStageWarp = 32 * kStageLd * 2;         // 32 tokens per pass
  static constexpr int kStage = PERS ? 8 * kStageWarp : 0;     // non-persistent: aliases the X ring
  static constexpr int kSmem = kSL * (kX + kWBlockBytes) + kSA * kA + kStage + 2 * (kSL + kSA) * 8 + 1024;
  static_assert(kSmem <= 232448, "prefill2 shared memory");
};
constexpr int kP2Threads = 384;

struct P2Item {
  int row0, rows, nb;
  const uint8_t* wmat;
};
__device__ __forceinline__ P2Item p2_item(const Params& p, int w, int nx, int KB) {
  const int tile = w / nx, nb = w - tile * nx;
  int lo = 0, hi = p.G;
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (p.tile_offsets[mid] <= tile) lo = mid; else hi = mid;
  }
  P2Item it;
  it.row0 = p.row_offsets[lo] + (tile - p.tile_offsets[lo]) * 256;
  it.rows = min(256, p.row_offsets[lo + 1] - it.row0);
  it.nb = nb;
  const int e = p.expert_ids ? p.expert_ids[lo] : lo;
  it.wmat = p.w + static_cast<size_t>(e) * p.matrix_bytes + static_cast<size_t>(nb) * KB * kWBlockBytes;
  return it;
}

__device__ __forceinline__ bool mbar_test(uint64_t* bar, uint32_t parity) {
  uint32_t r;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(r)
      : "r"(smem_u32(bar)), "r"(parity)
      : "memory");
  return r != 0;
}

template <int SA, bool PERS, bool POLL>
__global__ void __launch_bounds__(kP2Threads, 1) w4a16_prefill2_kernel(const __grid_constant__ CUtensorMap tmx, const Params p) {
  using C = P2Cfg<SA, PERS>;
  constexpr int SL = C::kSL, BT = C::kBT;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* xs = smem;                   // [SL][BT x 128 B], 1024-aligned
  uint8_t* as = xs + SL * C::kX;        // [SA][128 x 128 B], 1024-aligned
  uint8_t* wr = as + SA * C::kA;        // [SL][4352]
  uint8_t* stg = wr + SL * kWBlockBytes;  // [8 warps][32][24] bf16 (PERS only)
  uint64_t* full_l = reinterpret_cast<uint64_t*>(stg + C::kStage);
  uint64_t* empty_l = full_l + SL;
  uint64_t* full_a = empty_l + SL;
  uint64_t* empty_a = full_a + SA;

  const int nx = p.N / kRowsPerCta, KB = p.K / kKBlock;
  const int total = p.tile_offsets[p.G] * nx;  // work items
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;

  if (tid == 0) {
    for (int s = 0; s < SL; ++s) {
      mbar_init(&full_l[s], 1);   // expect_tx arrival (TMA + bulk bytes)
      mbar_init(&empty_l[s], 8);  // lane 0 of each consumer warp
    }
    for (int s = 0; s < SA; ++s) {
      mbar_init(&full_a[s], 128);  // every dequant thread (after its own proxy fence)
      mbar_init(&empty_a[s], 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  const int items = static_cast<int>(blockIdx.x) < total ? (total - 1 - static_cast<int>(blockIdx.x)) / static_cast<int>(gridDim.x) + 1 : 0;

  if (warp < 4) {  // ---- dequant warpgroup ----
    const int mi = lane >> 3;  // stmatrix: this lane addresses row (lane & 7) of matrix mi
    const int iters = items * KB;
    // thread 0: the producer. Loads [0, next) are issued; item `li` is cached for the loads.
    int next = 0, li = -1;
    P2Item litem{};
    auto issue = [&]() {
      const int ii = next / KB, kb = next - ii * KB, slot = next % SL;
      if (ii != li) { litem = p2_item(p, blockIdx.x + ii * gridDim.x, nx, KB); li = ii; }
      mbar_expect_tx(&full_l[slot], C::kX + kWBlockBytes);
      tma_load_2d(xs + slot * C::kX, &tmx, kb * kKBlock, litem.row0, &full_l[slot]);
      bulk_g2s(wr + slot * kWBlockBytes, litem.wmat + static_cast<size_t>(kb) * kWBlockBytes, kWBlockBytes, &full_l[slot]);
      ++next;
    };
    // issue loads up to `must` (blocking on their empty slots), then every load whose slot is free now
    auto pump = [&](int must) {
      for (; next < iters && next <= must;) {
        mbar_wait(&empty_l[next % SL], ((next / SL) & 1) ^ 1);
        issue();
      }
      while (next < iters && mbar_test(&empty_l[next % SL], ((next / SL) & 1) ^ 1)) issue();
    };
    // POLL: thread 0 spins on test_wait for its own barriers and issues every load whose slot frees in the
    // meantime (the first form polled only between waits: with SA 4 the dequant warps run 3 k-blocks ahead
    // and sit in the empty_a wait, so each load went out only when the decode needed it: 0.55 of dense).
    auto wait_pumping = [&](uint64_t* bar, uint32_t par) {
      while (!mbar_test(bar, par))
        if (next < iters && mbar_test(&empty_l[next % SL], ((next / SL) & 1) ^ 1)) issue();
    };
    if (!POLL && tid == 0) pump(SL - 2);  // blocking form (variant 8's): SL - 1 loads ahead
    for (int it = 0; it < iters; ++it) {
      if (POLL && tid == 0) pump(it);
      const int ls = it % SL, sa = it % SA;
      if (POLL && tid == 0) {
        wait_pumping(&full_l[ls], (it / SL) & 1);
        wait_pumping(&empty_a[sa], ((it / SA) & 1) ^ 1);
      } else {
        mbar_wait(&full_l[ls], (it / SL) & 1);
        mbar_wait(&empty_a[sa], ((it / SA) & 1) ^ 1);
      }
      const uint8_t* wb = wr + ls * kWBlockBytes;
      const uint32_t ab = smem_u32(as + sa * C::kA);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int rg = warp + 4 * h;
        const uint4 q = *reinterpret_cast<const uint4*>(wb + rg * 512 + lane * 16);
        const uint32_t sc = *reinterpret_cast<const uint32_t*>(wb + 4096 + rg * 32 + gq * 4);
        const uint32_t f00 = scale_factor<0>(sc), f01 = scale_factor<2>(sc);
        const uint32_t f10 = scale_factor<1>(sc), f11 = scale_factor<3>(sc);
        uint32_t a[4][4];
        dequant_word(q.x, f00, f01, a[0]);
        dequant_word(q.y, f00, f01, a[1]);
        dequant_word(q.z, f10, f11, a[2]);
        dequant_word(q.w, f10, f11, a[3]);
        const int r = rg * 16 + (lane & 7) + (mi & 1) * 8;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          const int ch = s * 2 + (mi >> 1);
          stmatrix_x4(ab + r * 128 + ((ch ^ (r & 7)) << 4), a[s][0], a[s][1], a[s][2], a[s][3]);
        }
      }
      fence_proxy_async();
      mbar_arrive(&full_a[sa]);
      // POLL: whatever is free now; blocking form: the load SL - 1 ahead (slot of it - 1: released once the
      // consumers' wgmmas of it - 1 are done, which needs full_a[it], arrived just above)
      if (tid == 0) pump(POLL ? -1 : it + SL - 1);
      __syncwarp();
    }
    return;
  }

  // ---- consumer warpgroups ----
  const int cw = warp - 4, wg = cw >> 2;
  const uint32_t x0 = smem_u32(xs), a0 = smem_u32(as) + wg * (64 * 128);
  float acc[BT / 8][4];
  int base = 0;
  for (int w = blockIdx.x; w < total; w += gridDim.x, base += KB) {
#pragma unroll
    for (int i = 0; i < BT / 8; ++i)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][q] = 0.f;
    auto body = [&](int kb, auto last) {
      const int it = base + kb, ls = it % SL, sa = it % SA;
      mbar_wait(&full_l[ls], (it / SL) & 1);
      mbar_wait(&full_a[sa], (it / SA) & 1);
#pragma unroll
      for (int i = 0; i < BT / 8; ++i)
#pragma unroll
        for (int q = 0; q < 4; ++q) fence_operand(acc[i][q]);
      wgmma_fence();
#pragma unroll
      for (int s = 0; s < 4; ++s)
        WgmmaSSBf16<BT>::mma(&acc[0][0], desc_sw128(a0 + sa * C::kA + s * 32), desc_sw128(x0 + ls * C::kX + s * 32));
      wgmma_commit();
#pragma unroll
      for (int i = 0; i < BT / 8; ++i)
#pragma unroll
        for (int q = 0; q < 4; ++q) fence_operand(acc[i][q]);
      if constexpr (decltype(last)::value) wgmma_wait<0>();
      else wgmma_wait<1>();
      __syncwarp();
      if (lane == 0) {
        if (kb > 0) {
          mbar_arrive(&empty_l[(it - 1) % SL]);
          mbar_arrive(&empty_a[(it - 1) % SA]);
        }
        if constexpr (decltype(last)::value) {  // the item's last k-block: release it too
          mbar_arrive(&empty_l[it % SL]);
          mbar_arrive(&empty_a[it % SA]);
        }
      }
    };
    using NotLast = std::integral_constant<bool, false>;
    using Last = std::integral_constant<bool, true>;
    for (int kb = 0; kb < KB - 2; kb += 2) {
      body(kb, NotLast{});
      body(kb + 1, NotLast{});
    }
    body(KB - 2, NotLast{});
    body(KB - 1, Last{});

    // epilogue: 8 passes of 32 tokens through this warp's staging buffer
    const P2Item item = p2_item(p, w, nx, KB);
    if constexpr (!PERS) named_bar(1, 256);  // the staging aliases the X ring: both warpgroups done with it
    bf16* sw = reinterpret_cast<bf16*>(PERS ? stg : xs) + cw * (32 * C::kStageLd);
    bf16* yb = p.y + static_cast<size_t>(item.row0) * p.N + static_cast<size_t>(item.nb) * kRowsPerCta + cw * 16;
#pragma unroll
    for (int ps = 0; ps < BT / 32; ++ps) {
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        const int j = ps * 4 + jj, c = jj * 8 + 2 * tq;
        sw[c * C::kStageLd + gq] = __float2bfloat16_rn(acc[j][0]);
        sw[(c + 1) * C::kStageLd + gq] = __float2bfloat16_rn(acc[j][1]);
        sw[c * C::kStageLd + gq + 8] = __float2bfloat16_rn(acc[j][2]);
        sw[(c + 1) * C::kStageLd + gq + 8] = __float2bfloat16_rn(acc[j][3]);
      }
      __syncwarp();
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int idx = lane + 32 * t, r = idx >> 1, h = idx & 1, tok = ps * 32 + r;
        if (tok < item.rows)
          *reinterpret_cast<uint4*>(yb + static_cast<size_t>(tok) * p.N + h * 8) =
              *reinterpret_cast<const uint4*>(sw + r * C::kStageLd + h * 8);
      }
      __syncwarp();
    }
  }
}

template <int SA, bool PERS, bool POLL>
void launch_prefill2(const Params& p, int max_tiles, long long x_rows, cudaStream_t stream) {
  using C = P2Cfg<SA, PERS>;
  static int sms = 0;
  if (!sms) {
    SS_CUDA(cudaFuncSetAttribute(w4a16_prefill2_kernel<SA, PERS, POLL>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
    int dev = 0;
    SS_CUDA(cudaGetDevice(&dev));
    SS_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  }
  static CUtensorMap map;
  static const void* m_x = nullptr;
  static long long m_rows = -1;
  static int m_k = -1;
  if (m_x != p.x || m_rows != x_rows || m_k != p.K) {
    map = make_map_2d(p.x, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, p.K, static_cast<uint64_t>(x_rows),
                      static_cast<uint64_t>(p.K) * 2, kKBlock, C::kBT, CU_TENSOR_MAP_SWIZZLE_128B);
    m_x = p.x;
    m_rows = x_rows;
    m_k = p.K;
  }
  const long long work = static_cast<long long>(max_tiles) * (p.N / kRowsPerCta);
  if (work >= (1ll << 31)) throw std::invalid_argument("w4a16 prefill: work items overflow int");
  // variant 10's grid: resident CTAs (1 per SM), or w4a16_set_streamk_ctas's count when forced (tests)
  const int grid = PERS ? static_cast<int>(std::min<long long>(work, g_sk_ctas > 0 ? g_sk_ctas : sms)) : static_cast<int>(work);
  w4a16_prefill2_kernel<SA, PERS, POLL><<<grid, kP2Threads, C::kSmem, stream>>>(map, p);
  SS_LAUNCH_CHECK();
}

}  // namespace
}  // namespace servesim::kernels::moe
