// MXFP4 W4A16 grouped GEMM, register-A kernels: variants 0-4 (w4a16_kernel, one CTA barrier
// per stage) and the warp-specialised decode kernel, variants 5 / 6 (w4a16_decode_kernel), with launches.
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

/// V selects the MMA issue pattern (kept to diagnose and compare; see NOTES.md):
///   0: one m64nBTk16 wgmma per k16 step, next stage's dequant overlaps it (wait_group 1)
///   1: as 0 but wait_group 0 after each stage (no overlap)
///   2: BT/8 m64n8k16 wgmmas per k16 step (each on one 8-token swizzle atom), wait_group 1
///   3: as 2 with wait_group 0
///   4: as 0 with two 64-wide k-blocks per stage (KS = 2) at BT <= 64 (halves per-stage overhead)
template <int BT, int V, int KS>
__global__ void __launch_bounds__(kThreads, 1) w4a16_kernel(const Params p) {
  using C = Cfg<BT, KS>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* xs = smem;                          // [stages][BT*128], each 1024-aligned
  uint8_t* ws = smem + C::kStages * C::kXBytes;  // [stages][4352]

  const int tile = blockIdx.y;
  const int total_tiles = p.tile_offsets[p.G];
  if (tile >= total_tiles) return;
  int lo = 0, hi = p.G;  // largest g with tile_offsets[g] <= tile
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (p.tile_offsets[mid] <= tile) lo = mid; else hi = mid;
  }
  const int g = lo;
  const int row0 = p.row_offsets[g] + (tile - p.tile_offsets[g]) * BT;
  const int rows = min(BT, p.row_offsets[g + 1] - row0);
  const int e = p.expert_ids ? p.expert_ids[g] : g;
  const int KB = p.K / (kKBlock * KS);  // pipeline stages
  const uint8_t* wmat = p.w + static_cast<size_t>(e) * p.matrix_bytes +
                        static_cast<size_t>(blockIdx.x) * (p.K / kKBlock) * kWBlockBytes;
  const bf16* xrow0 = p.x + static_cast<size_t>(row0) * p.K;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;

  auto load_stage = [&](int kb, int slot) {
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      uint8_t* xd = xs + slot * C::kXBytes + ks * C::kXSub;
#pragma unroll
      for (int c = tid; c < BT * 8; c += kThreads) {
        const int r = c >> 3, ch = c & 7;
        const bool ok = r < rows;
        const bf16* src = ok ? xrow0 + static_cast<size_t>(r) * p.K + (kb * KS + ks) * kKBlock + ch * 8 : p.x;
        cp_async16(xd + r * 128 + ((ch ^ (r & 7)) << 4), src, ok ? 16 : 0);
      }
    }
    const uint8_t* wsrc = wmat + static_cast<size_t>(kb) * C::kWBytes;
    uint8_t* wd = ws + slot * C::kWBytes;
    for (int c = tid; c < C::kWBytes / 16; c += kThreads) cp_async16(wd + c * 16, wsrc + c * 16);
  };

  float acc[BT / 8][4];
#pragma unroll
  for (int i = 0; i < BT / 8; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) acc[i][q] = 0.f;
  uint32_t afrag[2][KS][4][4];

#pragma unroll
  for (int s = 0; s < C::kStages - 2; ++s) {
    if (s < KB) load_stage(s, s);
    cp_async_commit();
  }

  auto body = [&](int kb, auto& af, auto last) {  // af: uint32_t[KS][4][4] (a typed parameter crashed cudafe++ 13.0)
    cp_async_wait<C::kStages - 3>();
    fence_proxy_async();
    __syncthreads();
    {
      const int nk = kb + C::kStages - 2;
      if (nk < KB) load_stage(nk, nk % C::kStages);
      cp_async_commit();
    }
    const int slot = kb % C::kStages;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      const uint8_t* wb = ws + slot * C::kWBytes + ks * kWBlockBytes;
      const uint4 q = *reinterpret_cast<const uint4*>(wb + warp * 512 + lane * 16);
      const uint32_t sc = *reinterpret_cast<const uint32_t*>(wb + 4096 + warp * 32 + gq * 4);
      // f<group><row half>
      const uint32_t f00 = scale_factor<0>(sc), f01 = scale_factor<2>(sc);
      const uint32_t f10 = scale_factor<1>(sc), f11 = scale_factor<3>(sc);
      dequant_word(q.x, f00, f01, af[ks][0]);
      dequant_word(q.y, f00, f01, af[ks][1]);
      dequant_word(q.z, f10, f11, af[ks][2]);
      dequant_word(q.w, f10, f11, af[ks][3]);
    }
    const uint32_t xb = smem_u32(xs + slot * C::kXBytes);
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
#pragma unroll
      for (int s = 0; s < 4; ++s)
#pragma unroll
        for (int j = 0; j < 4; ++j) fence_operand(af[ks][s][j]);
#pragma unroll
    for (int i = 0; i < BT / 8; ++i)
#pragma unroll
      for (int q = 0; q < 4; ++q) fence_operand(acc[i][q]);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        if constexpr (V == 0 || V == 1 || V == 4) {
          WgmmaRS<BT>::mma(&acc[0][0], af[ks][s], desc_sw128(xb + ks * C::kXSub + s * 32));
        } else {
#pragma unroll
          for (int i = 0; i < BT / 8; ++i)
            WgmmaRS<8>::mma(&acc[i][0], af[ks][s], desc_sw128(xb + ks * C::kXSub + i * 1024 + s * 32));
        }
      }
    wgmma_commit();
#pragma unroll
    for (int i = 0; i < BT / 8; ++i)
#pragma unroll
      for (int q = 0; q < 4; ++q) fence_operand(acc[i][q]);
    // The last stage waits for everything inside the body: a wait_group 0 after the loop was
    // scheduled by ptxas after the epilogue's accumulator reads (seen in SASS; NOTES.md).
    if constexpr (V == 1 || V == 3 || decltype(last)::value) wgmma_wait<0>();
    else wgmma_wait<1>();
  };

  using NotLast = std::integral_constant<bool, false>;
  using Last = std::integral_constant<bool, true>;
  for (int kb = 0; kb < KB - 2; kb += 2) {
    body(kb, afrag[0], NotLast{});
    body(kb + 1, afrag[1], NotLast{});  // KB is even (K % 128 == 0): a conditional here serialises wgmma (C7513)
  }
  body(KB - 2, afrag[0], NotLast{});
  body(KB - 1, afrag[1], Last{});
  wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < BT / 8; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) fence_operand(acc[i][q]);
  cp_async_wait<0>();
  __syncthreads();

  // Epilogue: stage [BT tokens][128 outputs] bf16 (row stride 136) then 16-byte stores.
  bf16* st = reinterpret_cast<bf16*>(smem);
  stage_acc_bf16<BT>(st, acc, warp * 16, gq, tq);
  __syncthreads();
  store_staged_rows(st, p.y + static_cast<size_t>(row0) * p.N + static_cast<size_t>(blockIdx.x) * kRowsPerCta, p.N, rows, tid, kThreads);
}

template <int BT, int V, int KS = 1>
void launch(const Params& p, int max_tiles, cudaStream_t stream) {
  static bool configured = false;
  if (!configured) {
    SS_CUDA(cudaFuncSetAttribute(w4a16_kernel<BT, V, KS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 Cfg<BT, KS>::kSmem));
    configured = true;
  }
  dim3 grid(p.N / kRowsPerCta, max_tiles);
  w4a16_kernel<BT, V, KS><<<grid, kThreads, Cfg<BT, KS>::kSmem, stream>>>(p);
  SS_LAUNCH_CHECK();
}

// ================================================================================================
// Variant 5: warp-specialised decode kernel (BT <= 64). 9 warps: warps 0-7 = 2 consumer warpgroups
// (m64 each, as above), warp 8 = producer. Per stage (two 64-wide k-blocks) the producer's lane 0
// issues ONE 1-D bulk copy (cp.async.bulk) of the 8704 contiguous prepacked weight bytes, completing
// on the stage's "full" mbarrier, and its 32 lanes load the BT x 128 token tile (128-byte swizzle,
// rows past the group's count zero-filled) with 16-byte cp.async + cp.async.mbarrier.arrive. The
// consumers never touch global memory or a CTA barrier in the main loop: wait full -> LDS codes and
// scales -> dequant -> 8 wgmma -> commit -> wait_group 1 -> release the previous stage ("empty").
// ================================================================================================
/// KS_ = 64-wide k-blocks per stage: 2 (variant 5) or 1 (variant 6: half the A-fragment registers,
/// so 3 CTAs per SM at BT <= 16 and no register-starved wgmma serialisation, ptxas C7512).
template <int BT, int KS_ = 2>
struct DCfg {
  static constexpr int KS = KS_;                  // 64-wide k-blocks per stage
  static constexpr int kW = kWBlockBytes * KS;    // 8704 / 4352 B, contiguous in the prepacked matrix
  static constexpr int kXSub = BT * 128;          // one BT x 64 bf16 sub-tile
  static constexpr int kX = kXSub * KS;
  static constexpr int kStages = KS == 2 ? (BT <= 16 ? 8 : 6) : (BT <= 16 ? 10 : 8);
  static constexpr int kSmem = kStages * (kX + kW) + 2 * kStages * 8 + 1024;
  static constexpr int kMinBlocks = KS == 2 ? 2 : (BT <= 16 ? 3 : 2);
};
constexpr int kDecThreads = 288;

/// One pipeline stage of a decode consumer warp (variants 5, 6 and 7): dequantises the stage's KS
/// 64-wide k-blocks of MXFP4 weights (`wst`: the stage's kWBlockBytes x KS bytes in shared memory;
/// this warp's 16 rows at warp x 512, its E8M0 scales after the 4096 code bytes) into the A
/// fragments `af` (uint32_t[KS][4][4]), issues the 4 x KS m64nBTk16 RS wgmmas against the stage's
/// token tile (`xst`, kXSub bytes per k-block; its 128-byte-swizzle descriptor is built once and the
/// wgmmas add their k offsets to its low word: the tile lies below 256 KB of shared memory, so
/// there is no carry into the high word), commits, and waits
/// until at most one wgmma group (Last: none) is in flight. `acc`: float[BT / 8][4]. The array
/// types are template parameters because a typed lambda parameter crashed cudafe++ 13.0.
template <int BT, int KS, int kXSub, bool Last, int DQ = 0, class AF, class ACC>
__device__ __forceinline__ void decode_stage_mma(const uint8_t* wst, const uint8_t* xst, int warp, int lane, int gq, AF& af, ACC& acc) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    const uint8_t* wb = wst + ks * kWBlockBytes;
    const uint4 q = *reinterpret_cast<const uint4*>(wb + warp * 512 + lane * 16);
    const uint32_t sc = *reinterpret_cast<const uint32_t*>(wb + 4096 + warp * 32 + gq * 4);
    if constexpr (DQ == 2) {  // kernel 19: one factor register per scale pair
      const uint32_t fp0 = scale_factor_pair<0>(sc), fp1 = scale_factor_pair<1>(sc);
      dequant_word_q(q.x, fp0, af[ks][0]);
      dequant_word_q(q.y, fp0, af[ks][1]);
      dequant_word_q(q.z, fp1, af[ks][2]);
      dequant_word_q(q.w, fp1, af[ks][3]);
    } else {
      const uint32_t f00 = scale_factor<0>(sc), f01 = scale_factor<2>(sc);
      const uint32_t f10 = scale_factor<1>(sc), f11 = scale_factor<3>(sc);
      dequant_word_t<DQ>(q.x, f00, f01, af[ks][0]);
      dequant_word_t<DQ>(q.y, f00, f01, af[ks][1]);
      dequant_word_t<DQ>(q.z, f10, f11, af[ks][2]);
      dequant_word_t<DQ>(q.w, f10, f11, af[ks][3]);
    }
  }
  const uint32_t xlo = static_cast<uint32_t>(desc_sw128(smem_u32(xst)));
  constexpr uint64_t kDescHi = desc_sw128(0) & 0xFFFFFFFF00000000ull;
#pragma unroll
  for (int ks = 0; ks < KS; ++ks)
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
      for (int j = 0; j < 4; ++j) fence_operand(af[ks][s][j]);
#pragma unroll
  for (int i = 0; i < BT / 8; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) fence_operand(acc[i][q]);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < KS; ++ks)
#pragma unroll
    for (int s = 0; s < 4; ++s)
      WgmmaRS<BT>::mma(&acc[0][0], af[ks][s], kDescHi | (xlo + static_cast<uint32_t>((ks * kXSub + s * 32) >> 4)));
  wgmma_commit();
#pragma unroll
  for (int i = 0; i < BT / 8; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) fence_operand(acc[i][q]);
  if constexpr (Last) wgmma_wait<0>();
  else wgmma_wait<1>();
}

__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}

/// EP (NOTES.md §23, w4k): the tile's group from one round of independent loads (a warp ballot over
/// tile_offsets[1..G-1]: the number of them <= tile is the binary search's answer, offsets non-decreasing) instead of the
/// binary search's chain of 1 + log2(G) dependent loads.
__device__ __forceinline__ int ep_group(const int* toff, int G, int tile) {
  const int lane = threadIdx.x & 31;
  int g = 0;
#pragma unroll 4
  for (int i0 = 1; i0 < G; i0 += 32) {
    const int i = i0 + lane;
    const bool le = i < G && __ldg(toff + i) <= tile;
    g += __popc(__ballot_sync(0xffffffffu, le));
  }
  return g;
}

/// DQ: the dequantisation (0 = dequant_word, variants 5 / 6; 1 = dequant_word_p, kernel 17; 2 = dequant_word_q with
/// one factor register per scale pair, kernel 19).
/// EP (kernel 25 = kernel 17 with EP; NOTES.md §23, w4k): the early prologue: the group from ep_group (the total-tile
/// load in the same round), the mbarriers initialised by the producer's lane 0, which then issues the first min(S, KB)
/// weight bulk copies BEFORE the CTA barrier (the token copies and their arrivals follow in the producer loop as before).
/// Correct (PermuteTest 25) but SLOWER (w4k call 2: 1.03-1.14x; likely the stage-0 token copies queued behind the whole
/// ring's weight copies, so the first full barrier completes later), opt-in only (variant 25).
/// EP 2 (kernel 27 = kernel 17 with the tokens-first early prologue; NOTES.md §24, w4l): as EP 1, but the whole
/// producer warp issues the prologue before the CTA barrier in the order stage 0's token rows, then the ring's weight
/// copies, then the other ring stages' token rows (so the first full barrier does not wait behind the ring's weights);
/// the producer loop then starts at the first stage not issued. Correct (W4A16Decode27, PermuteTest 27) but as SLOW as EP 1
/// (w4l: t27/t20 1.07, t27/t25 0.997; the pre-issue itself is the loss, kernels 30 / 31), opt-in only (variant 27).
/// Programmatic dependent launch (PD; NOTES.md §25, w4m): without the PDL launch attribute both are no-ops.
/// griddep_wait: the prerequisite grid (the kernel before in the stream / graph) is complete and its memory visible;
/// griddep_launch: this CTA lets the dependent grid (launched with the attribute) be scheduled.
__device__ __forceinline__ void griddep_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void griddep_launch() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

/// A launch with cudaLaunchAttributeProgrammaticStreamSerialization (PDL) when pdl, else a plain one.
template <class K>
void launch_maybe_pdl(K kernel, dim3 grid, int threads, int smem, cudaStream_t stream, const Params& p, bool pdl) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  SS_CUDA(cudaLaunchKernelEx(&cfg, kernel, p));
}

/// PD (kernels 32 / 34 = kernel 17 with PD 2 / 1; NOTES.md §25, w4m), launched with the PDL attribute:
/// PD 1 (strict): every CTA triggers its dependents and waits (griddepcontrol.wait) before its first global read; only
///   the launch, the CTA's start and the shared-memory carve-up overlap the previous kernel.
/// PD 2 (weights early): every CTA triggers its dependents at its start, reads the routing (tile_offsets, row_offsets,
///   expert_ids), initialises the barriers, passes the CTA barrier, and the producer's lane 0 issues the first
///   min(stages, K stages) weight copies BEFORE griddepcontrol.wait (after the CTA barrier: §24's pre-issue was before it);
///   the token rows (the previous kernel's output) are read and y is written only after the wait. Contract: w and the
///   routing arrays must not be written by any kernel that may still be running when this one starts (with every kernel of
///   a chain triggering early, that can be more than the one immediately before it).
template <int BT, int KS_, int DQ = 0, int EP = 0, int PD = 0>
__global__ void __launch_bounds__(kDecThreads, DCfg<BT, KS_>::kMinBlocks) w4a16_decode_kernel(const Params p) {
  using C = DCfg<BT, KS_>;
  constexpr int S = C::kStages, KS = KS_;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* xs = smem;                    // [S][KS][BT*128], 1024-aligned sub-tiles
  uint8_t* ws = smem + S * C::kX;        // [S][8704]
  uint64_t* full = reinterpret_cast<uint64_t*>(ws + S * C::kW);
  uint64_t* empty = full + S;

  static_assert(!(EP && PD), "EP and PD apart");
  if constexpr (PD) griddep_launch();
  if constexpr (PD == 1) griddep_wait();
  const int tile = blockIdx.y;
  int g;
  if constexpr (EP) {
    const int total_tiles = __ldg(p.tile_offsets + p.G);
    g = ep_group(p.tile_offsets, p.G, tile);
    if (tile >= total_tiles) return;
  } else {
    const int total_tiles = p.tile_offsets[p.G];
    if (tile >= total_tiles) {
      if constexpr (PD) griddep_wait();  // PD: the grid completes only after the previous one (transitive order)
      return;
    }
    int lo = 0, hi = p.G;
    while (hi - lo > 1) {
      const int mid = (lo + hi) >> 1;
      if (p.tile_offsets[mid] <= tile) lo = mid; else hi = mid;
    }
    g = lo;
  }
  const int row0 = p.row_offsets[g] + (tile - p.tile_offsets[g]) * BT;
  const int rows = min(BT, p.row_offsets[g + 1] - row0);
  const int e = p.expert_ids ? p.expert_ids[g] : g;
  const int KB = p.K / (kKBlock * KS);  // stages (even: K % 256 == 0)
  const uint8_t* wmat = p.w + static_cast<size_t>(e) * p.matrix_bytes +
                        static_cast<size_t>(blockIdx.x) * (p.K / kKBlock) * kWBlockBytes;
  const bf16* xrow0 = p.x + static_cast<size_t>(row0) * p.K;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;

  const int pre = (EP || PD == 2) ? min(S, KB) : 0;  // EP: weight stages issued before the CTA barrier; PD 2: before the wait
  // the token rows of stage kb into its slot, and the slot's 32 cp.async arrivals (producer warp, every lane)
  auto tokens = [&](int kb) {
    const int slot = kb % S;
    uint8_t* xd = xs + slot * C::kX;
#pragma unroll
    for (int c = lane; c < BT * 8 * KS; c += 32) {
      const int ks = c / (BT * 8), cc = c % (BT * 8), r = cc >> 3, ch = cc & 7;
      const bool ok = r < rows;
      const bf16* src = ok ? xrow0 + static_cast<size_t>(r) * p.K + (kb * KS + ks) * kKBlock + ch * 8 : p.x;
      cp_async16(xd + ks * C::kXSub + r * 128 + ((ch ^ (r & 7)) << 4), src, ok ? 16 : 0);
    }
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(&full[slot])) : "memory");
  };
  if (tid == (EP ? 256 : 0)) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1 + 32);  // expect_tx arrival of lane 0 + 32 cp.async arrivals
      mbar_init(&empty[s], 8);      // lane 0 of each consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    if constexpr (EP == 1) {
      for (int kb = 0; kb < pre; ++kb) {  // EP: slots 0..pre-1 are free (first use)
        mbar_expect_tx(&full[kb], C::kW);
        bulk_g2s(ws + kb * C::kW, wmat + static_cast<size_t>(kb) * C::kW, C::kW, &full[kb]);
      }
    }
  }
  if constexpr (EP == 2) {  // tokens first: stage 0's tokens, the ring's weights, the other ring stages' tokens
    if (warp == 8) {
      __syncwarp();  // the barriers initialised (lane 0's fence) before any lane's cp.async arrival
      tokens(0);
      if (lane == 0)
        for (int kb = 0; kb < pre; ++kb) {  // slots 0..pre-1 are free (first use)
          mbar_expect_tx(&full[kb], C::kW);
          bulk_g2s(ws + kb * C::kW, wmat + static_cast<size_t>(kb) * C::kW, C::kW, &full[kb]);
        }
      __syncwarp();
      for (int kb = 1; kb < pre; ++kb) tokens(kb);
    }
  }
  __syncthreads();

  if (warp == 8) {  // ---- producer warp ----
    if constexpr (PD == 2) {  // the first weight stages (constant weights) before the wait, the tokens after it
      if (lane == 0)
        for (int kb = 0; kb < pre; ++kb) {  // slots 0..pre-1 are free (first use)
          mbar_expect_tx(&full[kb], C::kW);
          bulk_g2s(ws + kb * C::kW, wmat + static_cast<size_t>(kb) * C::kW, C::kW, &full[kb]);
        }
      griddep_wait();
    }
    for (int kb = (EP == 2 ? pre : 0); kb < KB; ++kb) {
      const int slot = kb % S;
      if (kb >= pre) {
        mbar_wait(&empty[slot], ((kb / S) & 1) ^ 1);
        if (lane == 0) {
          mbar_expect_tx(&full[slot], C::kW);
          bulk_g2s(ws + slot * C::kW, wmat + static_cast<size_t>(kb) * C::kW, C::kW, &full[slot]);
        }
      }
      tokens(kb);
    }
    cp_async_wait<0>();
    return;
  }

  // ---- consumers (warps 0-7) ----
  float acc[BT / 8][4];
#pragma unroll
  for (int i = 0; i < BT / 8; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) acc[i][q] = 0.f;
  uint32_t afrag[2][KS][4][4];

  auto body = [&](int kb, auto& af, auto last) {  // af: uint32_t[KS][4][4] (a typed parameter crashed cudafe++ 13.0)
    const int slot = kb % S;
    mbar_wait(&full[slot], (kb / S) & 1);
    decode_stage_mma<BT, KS, C::kXSub, decltype(last)::value, DQ>(ws + slot * C::kW, xs + slot * C::kX, warp, lane, gq, af, acc);
    // the wgmmas of stage kb-1 (which read its token tile) are complete: release that stage
    __syncwarp();
    if (lane == 0 && kb > 0) mbar_arrive(&empty[(kb - 1) % S]);
  };

  using NotLast = std::integral_constant<bool, false>;
  using Last = std::integral_constant<bool, true>;
  for (int kb = 0; kb < KB - 2; kb += 2) {
    body(kb, afrag[0], NotLast{});
    body(kb + 1, afrag[1], NotLast{});
  }
  body(KB - 2, afrag[0], NotLast{});
  body(KB - 1, afrag[1], Last{});
#pragma unroll
  for (int i = 0; i < BT / 8; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) fence_operand(acc[i][q]);

  // Epilogue (consumers only; every stage was consumed, so no load is in flight): stage
  // [BT tokens][128 outputs] bf16 in the token ring, then 16-byte stores.
  if constexpr (PD == 2) griddep_wait();  // (already implied by the tokens; y is written after the wait)
  named_bar(1, 256);
  bf16* st = reinterpret_cast<bf16*>(smem);
  stage_acc_bf16<BT>(st, acc, warp * 16, gq, tq);
  named_bar(1, 256);
  store_staged_rows(st, p.y + static_cast<size_t>(row0) * p.N + static_cast<size_t>(blockIdx.x) * kRowsPerCta, p.N, rows, tid, 256);
}

template <int BT, int KS = 2, int DQ = 0, int EP = 0, int PD = 0>
void launch_decode(const Params& p, int max_tiles, cudaStream_t stream) {
  static bool configured = false;
  if (!configured) {
    SS_CUDA(cudaFuncSetAttribute(w4a16_decode_kernel<BT, KS, DQ, EP, PD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 DCfg<BT, KS>::kSmem));
    configured = true;
  }
  dim3 grid(p.N / kRowsPerCta, max_tiles);
  if constexpr (PD) {
    launch_maybe_pdl(w4a16_decode_kernel<BT, KS, DQ, EP, PD>, grid, kDecThreads, DCfg<BT, KS>::kSmem, stream, p, true);
  } else {
    w4a16_decode_kernel<BT, KS, DQ, EP><<<grid, kDecThreads, DCfg<BT, KS>::kSmem, stream>>>(p);
  }
  SS_LAUNCH_CHECK();
}

}  // namespace
}  // namespace servesim::kernels::moe
