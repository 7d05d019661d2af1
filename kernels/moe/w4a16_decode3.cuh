// MXFP4 W4A16 grouped GEMM: kernel 20 (NOTES.md §19), the decode kernel of variant 17 reshaped for
// 3 CTAs per SM. Part of gemm_w4a16.cu's translation unit (included after w4a16_rega.cuh, whose
// definitions it uses), not a standalone header.
//
// Kernel 17 (w4a16_decode_kernel<BT, 2, 1>) holds two stages of A fragments (2 x 2 k-blocks x 16 =
// 64 registers) so that one stage's wgmmas overlap the next stage's dequantisation: 95 registers x 288
// threads and 8 stages of ~10.7 KB give 2 CTAs (18 warps) per SM. Kernel 20 keeps kernel 17's stage
// (two 64-wide k-blocks, one 8704-byte bulk copy, one full / empty mbarrier round per stage) but
// pipelines the wgmma groups per k-block, not per stage: dequant k-block 0 into A buffer 0 -> 4 wgmmas
// -> commit -> wait_group 1 (the previous stage's k-block 1 group is complete, so that stage's token
// tile and A buffer 1 are free: release the stage) -> dequant k-block 1 into A buffer 1 -> 4 wgmmas ->
// commit -> wait_group 1. So 2 x 16 A registers (as variant 6, KS = 1) with variant 5's per-stage
// barrier cost, and __launch_bounds__(288, 3) (<= 72 registers) with a stage ring that fits 3 CTAs in
// 228 KB of shared memory (<= 75 KB each: 7 stages at BT 8, 5 at BT 16, 4 at BT 32).
// BT 8 and 16 are instantiated (gemm_w4a16.cu's launch_bt) for 3 CTAs per SM; BT 32 for 3 CTAs per SM was slower (4 stages,
// ptxas C7512, NOTES.md §19), so since §21 (w4i) BT 32 is built for 2 CTAs per SM (kD3MinBlocks: <= 112 registers, 6 stages).
// THE BT-16 BUG (NOTES.md §20, w4h): the first form waited for the last wgmma group with wgmma.wait_group 0 AFTER the
// k-loop, in the loop's exit block. The PTX is in order (wait_group 0, then the cvt of the accumulators), but ptxas
// (CUDA 13.0) scheduled the accumulator reads (F2FP.BF16 of R24-R31) ABOVE the WARPGROUP.DEPBAR.LE gsb0, 0x0 at BT 16
// (w4g call 1's SASS; at BT 8 it happened to keep them below; BT 32 is serialised), so the epilogue read the
// accumulators while the last k-block's group was still in flight: the output missed (part of) the last 64-wide
// k-block, rel L2 ~0.85 x sqrt(64 / K) (0.29 / 0.17 / 0.11 at K 512 / 1536 / 3584, as measured). ptxas apparently
// does not count the loop-carried accumulators as in flight in the exit block (the zero-trip path joins there).
// The fix is kernel 17's structure: the last stage is peeled out of the loop and its k-block-1 group is waited with
// wait_group 0 right after its commit, in the same straight-line code as its wgmmas and before the epilogue.
// KERNEL 22 (NOTES.md §22, w4j; KS = 2): kernel 20 with K split across the 2 CTAs of a (1, 1, 2) thread-block cluster
// (grid z = the K half): CTA rank r runs k-stages [r ? KB - KB/2 : 0, r ? KB : KB - KB/2) with its own ring; after
// both main loops (cluster barrier 1) rank 1's consumers store their fp32 accumulators into rank 0's token ring
// (distributed shared memory, st.shared::cluster), cluster barrier 2, rank 0 adds them and runs the epilogue. No
// workspace, no atomics, no second pass. For the grids of <= 2 CTAs per SM (the w2 GEMMs at G = 8: 224 / 256 CTAs on
// 132 SMs) it doubles the CTAs so that the 3 CTA slots per SM fill. Needs KB >= 2 (K >= 512). Correct (rel L2 <= 1.70e-3,
// memcheck clean) but SLOWER than the unsplit kernel on those grids (w4j calls 1 / 2: 1.05x K3 w2, 1.12-1.20x DSV4-Flash
// w2 at m 1-16; built for 4 CTAs per SM, kernel 23, one wave: 1.05 / 1.07x at m 1-8), so it is opt-in (variants 22 / 23).
#pragma once

namespace servesim::kernels::moe {
namespace {

// MB = CTAs per SM the kernel is built for (__launch_bounds__ min blocks; the stage ring fills MB's share of the
// shared memory): 3 at BT 8 / 16 (<= 72 registers), 2 at BT 32 (NOTES.md §21, w4i: 92 registers, 0 spills, 6 stages,
// NO C7512; at 3 CTAs per SM, 72 registers and 4 stages, ptxas serialised its wgmmas, C7512, and it ran 1.07-1.19x
// kernel 17). Not serialised it is still no faster than kernel 17 (itself C7512-serialised) at m 17-32: w4i call 1
// t/t17 median 1.013 (0.964-1.024 per shape; faster only on the one-wave w2 G 8 grids), so BT 32 is opt-in (variant 21)
template <int BT>
constexpr int kD3MinBlocks = BT == 32 ? 2 : 3;

template <int BT, int MB = kD3MinBlocks<BT>>
struct D3Cfg {
  static constexpr int kW = kWBlockBytes * 2;  // 8704 B per stage, contiguous in the prepacked matrix
  static constexpr int kXSub = BT * 128;       // one BT x 64 bf16 sub-tile
  static constexpr int kX = kXSub * 2;
  // MB CTAs per SM: MB x (dynamic smem + 1 KB reserved per CTA) <= 228 KB (MB 3: 76,800 B each, MB 2: 115,712 B)
  static constexpr int kBudget = 233472 / MB - 1024;
  static constexpr int kStages = (kBudget - 1024) / (kX + kW + 16);
  static constexpr int kSmem = kStages * (kX + kW) + 2 * kStages * 8 + 1024;
  static_assert(kStages >= 3 && kSmem <= kBudget, "kernel 20: MB CTAs per SM");
};

/// One 64-wide k-block of a kernel-20 consumer warp: dequantise (dequant_word_p) into `a`
/// (uint32_t[4][4]), issue the 4 m64nBTk16 RS wgmmas against the k-block's token sub-tile (descriptor
/// low word `xlo`), commit. The caller waits.
template <int BT, class A, class ACC>
__device__ __forceinline__ void decode3_kblock(const uint8_t* wb, uint32_t xlo, int warp, int lane, int gq, A& a, ACC& acc) {
  const uint4 q = *reinterpret_cast<const uint4*>(wb + warp * 512 + lane * 16);
  const uint32_t sc = *reinterpret_cast<const uint32_t*>(wb + 4096 + warp * 32 + gq * 4);
  const uint32_t f00 = scale_factor<0>(sc), f01 = scale_factor<2>(sc);
  const uint32_t f10 = scale_factor<1>(sc), f11 = scale_factor<3>(sc);
  dequant_word_t<1>(q.x, f00, f01, a[0]);
  dequant_word_t<1>(q.y, f00, f01, a[1]);
  dequant_word_t<1>(q.z, f10, f11, a[2]);
  dequant_word_t<1>(q.w, f10, f11, a[3]);
  constexpr uint64_t kDescHi = desc_sw128(0) & 0xFFFFFFFF00000000ull;
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int j = 0; j < 4; ++j) fence_operand(a[s][j]);
#pragma unroll
  for (int i = 0; i < BT / 8; ++i)
#pragma unroll
    for (int k = 0; k < 4; ++k) fence_operand(acc[i][k]);
  wgmma_fence();
#pragma unroll
  for (int s = 0; s < 4; ++s) WgmmaRS<BT>::mma(&acc[0][0], a[s], kDescHi | (xlo + static_cast<uint32_t>((s * 32) >> 4)));
  wgmma_commit();
#pragma unroll
  for (int i = 0; i < BT / 8; ++i)
#pragma unroll
    for (int k = 0; k < 4; ++k) fence_operand(acc[i][k]);
}

// Kernel 24 (NOTES.md §23, w4k; diagnosis only) = kernel 20 with TR = true: per CTA it writes a 10-word timeline to
// g_d3_trace[blockIdx.y * gridDim.x + blockIdx.x] (set by w4a16_set_trace): smid, CTA, globaltimer at entry / exit,
// and SM clock64 at entry, at the first stage's full barrier (consumer warp 0), at the producer's first bulk-copy
// issue, after the main loop, at exit, and the stage count. TR = false (every other kernel) compiles none of it.
__device__ unsigned long long* g_d3_trace = nullptr;

__device__ __forceinline__ unsigned long long d3_gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned d3_smid() {
  unsigned r;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}

// MB: CTAs per SM built for (kernel 23 = kernel 22 at BT 8 built for 4 CTAs per SM: <= 56 registers, 5 stages; §22)
// EP (kernel 26 = kernel 20 with EP; NOTES.md §23, w4k): the early prologue of kernel 25 (w4a16_rega.cuh: ep_group, the
// mbarriers initialised by the producer's lane 0 and the first min(S, KB) weight copies issued before the CTA barrier)
// EP 2 (kernel 28 = kernel 20 with the tokens-first early prologue, kernel 29 = 28 with the TR timeline; NOTES.md §24,
// w4l): the producer warp issues stage 0's token rows, then the ring's weight copies, then the other ring stages' token
// rows, all before the CTA barrier (w4a16_rega.cuh, EP 2)
// PD (kernels 33 / 35 = kernel 20 with PD 2 / 1; NOTES.md §25, w4m): programmatic dependent launch as kernel 17's PD
// (w4a16_rega.cuh): 1 = trigger + wait before the first global read; 2 = trigger at the start, the routing and the first
// min(S, KB) weight copies (after the CTA barrier) before griddepcontrol.wait, the token rows and y after it
template <int BT, int KS = 1, int MB = kD3MinBlocks<BT>, bool TR = false, int EP = 0, int PD = 0>
__global__ void __launch_bounds__(kDecThreads, MB) w4a16_decode3_kernel(const Params p) {
  static_assert(KS == 1 || KS == 2, "kernel 20 (KS 1) / 22, 23 (KS 2)");
  static_assert(!PD || (KS == 1 && !EP && !TR), "PD: kernel 20's plain form only");
  static_assert(!EP || KS == 1, "EP: kernel 20's form only");
  // EP 3 / 4 (kernels 30 / 31, traced; NOTES.md §24, w4l; diagnosis only): EP's two parts apart: 3 = only the one-round
  // lookup (ep_group; the mbarriers by tid 0, nothing issued before the CTA barrier), 4 = only the tokens-first pre-issue
  // of EP 2 (the binary-search lookup of kernel 20)
  constexpr bool kBallot = EP == 1 || EP == 2 || EP == 3;
  constexpr bool kPre = EP == 1 || EP == 2 || EP == 4;
  constexpr bool kTokFirst = EP == 2 || EP == 4;
  using C = D3Cfg<BT, MB>;
  constexpr int S = C::kStages;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* xs = smem;                    // [S][2][BT*128], 1024-aligned sub-tiles
  uint8_t* ws = smem + S * C::kX;        // [S][8704]
  uint64_t* full = reinterpret_cast<uint64_t*>(ws + S * C::kW);
  uint64_t* empty = full + S;

  [[maybe_unused]] unsigned long long tr_g0 = 0, tr_c0 = 0, tr_c1 = 0;
  [[maybe_unused]] unsigned long long* tr = nullptr;
  if constexpr (TR) {
    tr_c0 = clock64();
    tr_g0 = d3_gtime();
    if (g_d3_trace) tr = g_d3_trace + 10ull * (blockIdx.y * gridDim.x + blockIdx.x);
  }
  if constexpr (PD) griddep_launch();
  if constexpr (PD == 1) griddep_wait();
  const int tile = blockIdx.y;
  const int total_tiles = kBallot ? __ldg(p.tile_offsets + p.G) : p.tile_offsets[p.G];
  [[maybe_unused]] int gep = 0;
  if constexpr (kBallot) gep = ep_group(p.tile_offsets, p.G, tile);  // the same round of loads as total_tiles
  if constexpr (TR) {
    if (tr && threadIdx.x == 0 && tile >= total_tiles) {
      tr[0] = d3_smid(); tr[1] = blockIdx.x + 65536ull * blockIdx.y; tr[2] = tr_g0; tr[3] = d3_gtime();
      tr[4] = tr_c0; tr[5] = tr[6] = tr[7] = tr[8] = clock64(); tr[9] = 0;
    }
  }
  if (tile >= total_tiles) {
    if constexpr (PD) griddep_wait();  // PD: the grid completes only after the previous one (transitive order)
    return;
  }
  int lo = 0;
  if constexpr (kBallot) {
    lo = gep;
  } else {
    int hi = p.G;
    while (hi - lo > 1) {
      const int mid = (lo + hi) >> 1;
      if (p.tile_offsets[mid] <= tile) lo = mid; else hi = mid;
    }
  }
  const int g = lo;
  const int row0 = p.row_offsets[g] + (tile - p.tile_offsets[g]) * BT;
  const int rows = min(BT, p.row_offsets[g + 1] - row0);
  const int e = p.expert_ids ? p.expert_ids[g] : g;
  const int KBall = p.K / (kKBlock * 2);  // stages of the whole K
  // KS 2 (kernel 22): this CTA's half of the stages (rank 0 the first KBall - KBall / 2, rank 1 the rest; KBall >= 2)
  const int rank = KS == 2 ? static_cast<int>(blockIdx.z) : 0;  // cluster (1, 1, 2): the rank is blockIdx.z
  const int kb0 = rank ? KBall - KBall / 2 : 0;
  const int KB = KS == 2 ? (rank ? KBall / 2 : KBall - KBall / 2) : KBall;  // stages of this CTA
  const uint8_t* wmat = p.w + static_cast<size_t>(e) * p.matrix_bytes +
                        static_cast<size_t>(blockIdx.x) * (p.K / kKBlock) * kWBlockBytes;
  const bf16* xrow0 = p.x + static_cast<size_t>(row0) * p.K;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;

  const int pre = (kPre || PD == 2) ? min(S, KB) : 0;  // EP: weight stages issued before the CTA barrier; PD 2: before the wait
  // the token rows of stage kb into its slot, and the slot's 32 cp.async arrivals (producer warp, every lane)
  auto tokens = [&](int kb) {
    const int slot = kb % S;
    uint8_t* xd = xs + slot * C::kX;
#pragma unroll
    for (int c = lane; c < BT * 8 * 2; c += 32) {
      const int ks = c / (BT * 8), cc = c % (BT * 8), r = cc >> 3, ch = cc & 7;
      const bool ok = r < rows;
      const bf16* src = ok ? xrow0 + static_cast<size_t>(r) * p.K + ((kb0 + kb) * 2 + ks) * kKBlock + ch * 8 : p.x;
      cp_async16(xd + ks * C::kXSub + r * 128 + ((ch ^ (r & 7)) << 4), src, ok ? 16 : 0);
    }
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(&full[slot])) : "memory");
  };
  if (tid == (kPre ? 256 : 0)) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1 + 32);  // expect_tx arrival of lane 0 + 32 cp.async arrivals
      mbar_init(&empty[s], 8);      // lane 0 of each consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    if constexpr (EP == 1) {
      for (int kb = 0; kb < pre; ++kb) {  // EP: slots 0..pre-1 are free (first use)
        mbar_expect_tx(&full[kb], C::kW);
        bulk_g2s(ws + kb * C::kW, wmat + static_cast<size_t>(kb0 + kb) * C::kW, C::kW, &full[kb]);
      }
    }
  }
  if constexpr (kTokFirst) {  // tokens first: stage 0's tokens, the ring's weights, the other ring stages' tokens
    if (warp == 8) {
      __syncwarp();  // the barriers initialised (lane 0's fence) before any lane's cp.async arrival
      tokens(0);
      if (lane == 0) {
        for (int kb = 0; kb < pre; ++kb) {  // slots 0..pre-1 are free (first use)
          mbar_expect_tx(&full[kb], C::kW);
          bulk_g2s(ws + kb * C::kW, wmat + static_cast<size_t>(kb0 + kb) * C::kW, C::kW, &full[kb]);
          if constexpr (TR) { if (kb == 0 && tr) tr[6] = clock64(); }
        }
      }
      __syncwarp();
      for (int kb = 1; kb < pre; ++kb) tokens(kb);
    }
  }
  __syncthreads();

  if (warp == 8) {  // ---- producer warp (as kernel 17's) ----
    if constexpr (PD == 2) {  // the first weight stages (constant weights) before the wait, the tokens after it
      if (lane == 0)
        for (int kb = 0; kb < pre; ++kb) {  // slots 0..pre-1 are free (first use)
          mbar_expect_tx(&full[kb], C::kW);
          bulk_g2s(ws + kb * C::kW, wmat + static_cast<size_t>(kb0 + kb) * C::kW, C::kW, &full[kb]);
        }
      griddep_wait();
    }
    for (int kb = (kTokFirst ? pre : 0); kb < KB; ++kb) {
      const int slot = kb % S;
      if (kb >= pre) {
        mbar_wait(&empty[slot], ((kb / S) & 1) ^ 1);
        if (lane == 0) {
          mbar_expect_tx(&full[slot], C::kW);
          bulk_g2s(ws + slot * C::kW, wmat + static_cast<size_t>(kb0 + kb) * C::kW, C::kW, &full[slot]);
          if constexpr (TR) { if (kb == 0 && tr) tr[6] = clock64(); }
        }
      }
      tokens(kb);
    }
    cp_async_wait<0>();
    if constexpr (KS == 2) {  // the consumers' two cluster barriers (every thread of both CTAs arrives)
      cluster_sync_all();
      cluster_sync_all();
    }
    return;
  }

  // ---- consumers (warps 0-7) ----
  float acc[BT / 8][4];
#pragma unroll
  for (int i = 0; i < BT / 8; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) acc[i][q] = 0.f;
  uint32_t a0[4][4], a1[4][4];

  // one stage; `last` (std::integral_constant<bool>): the final stage, whose k-block-1 group is waited to
  // completion right after its commit (see the header: a wait_group 0 after the loop let ptxas read the
  // accumulators before it at BT 16)
  auto stage = [&](int kb, auto last) {
    const int slot = kb % S;
    mbar_wait(&full[slot], (kb / S) & 1);
    if constexpr (TR) { if (kb == 0 && tid == 0) tr_c1 = clock64(); }
    const uint8_t* wst = ws + slot * C::kW;
    const uint32_t xlo = static_cast<uint32_t>(desc_sw128(smem_u32(xs + slot * C::kX)));
    decode3_kblock<BT>(wst, xlo, warp, lane, gq, a0, acc);
    // at most this k-block's group in flight: the previous stage's k-block 1 group (the last reader of
    // that stage's token tile and of a1) is complete: release that stage
    wgmma_wait<1>();
    __syncwarp();
    if (lane == 0 && kb > 0) mbar_arrive(&empty[(kb - 1) % S]);
    decode3_kblock<BT>(wst + kWBlockBytes, xlo + static_cast<uint32_t>(C::kXSub >> 4), warp, lane, gq, a1, acc);
    if constexpr (decltype(last)::value) wgmma_wait<0>();  // every group complete: the accumulators are final
    else wgmma_wait<1>();                                  // k-block 0's group complete: a0 free
  };
  using NotLast = std::integral_constant<bool, false>;
  using Last = std::integral_constant<bool, true>;
  for (int kb = 0; kb < KB - 1; ++kb) stage(kb, NotLast{});
  stage(KB - 1, Last{});  // KB >= 2 (K % 256 == 0)
#pragma unroll
  for (int i = 0; i < BT / 8; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) fence_operand(acc[i][q]);
  [[maybe_unused]] unsigned long long tr_c2 = 0;
  if constexpr (TR) tr_c2 = clock64();

  if constexpr (KS == 2) {
    // K-split reduction through distributed shared memory. Barrier 1: both CTAs' main loops are done (every
    // stage consumed, every wgmma complete, the producers' copies landed), so rank 0's token ring is free.
    // Rank 1 stores its partial sums there (float4 per fragment row i: [i][256 threads], 16 B x 256 x BT/8 =
    // BT x 512 B <= the ring's S x BT x 256 B); barrier 2 (release / acquire) makes them visible; rank 0 adds.
    // Rank 1 then exits (it no longer touches rank 0's memory); rank 0's reads precede the epilogue's first
    // named barrier, before which no thread writes the staging tile over them.
    cluster_sync_all();
    const uint32_t red = smem_u32(smem);
    if (rank == 1) {
#pragma unroll
      for (int i = 0; i < BT / 8; ++i) {
        const uint32_t la = red + static_cast<uint32_t>((i * 256 + tid) * 16);
        asm volatile(
            "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, 0;\n"
            "st.shared::cluster.v4.f32 [ra], {%1, %2, %3, %4};\n}\n" ::"r"(la),
            "f"(acc[i][0]), "f"(acc[i][1]), "f"(acc[i][2]), "f"(acc[i][3])
            : "memory");
      }
    }
    cluster_sync_all();
    if (rank == 1) return;
    const float4* part = reinterpret_cast<const float4*>(smem);
#pragma unroll
    for (int i = 0; i < BT / 8; ++i) {
      const float4 v = part[i * 256 + tid];
      acc[i][0] += v.x;
      acc[i][1] += v.y;
      acc[i][2] += v.z;
      acc[i][3] += v.w;
    }
  }

  // Epilogue (consumers only; every stage was consumed, so no load is in flight): stage
  // [BT tokens][128 outputs] bf16 in the token ring, then 16-byte stores.
  if constexpr (PD == 2) griddep_wait();  // (already implied by the tokens; y is written after the wait)
  named_bar(1, 256);
  bf16* st = reinterpret_cast<bf16*>(smem);
  stage_acc_bf16<BT>(st, acc, warp * 16, gq, tq);
  named_bar(1, 256);
  store_staged_rows(st, p.y + static_cast<size_t>(row0) * p.N + static_cast<size_t>(blockIdx.x) * kRowsPerCta, p.N, rows, tid, 256);
  if constexpr (TR) {
    if (tr && tid == 0) {
      tr[0] = d3_smid(); tr[1] = blockIdx.x + 65536ull * blockIdx.y; tr[2] = tr_g0; tr[4] = tr_c0; tr[5] = tr_c1;
      tr[7] = tr_c2; tr[9] = KB;
      tr[8] = clock64(); tr[3] = d3_gtime();
    }
  }
}

template <int BT, int KS = 1, int MB = kD3MinBlocks<BT>, bool TR = false, int EP = 0, int PD = 0>
void launch_decode3(const Params& p, int max_tiles, cudaStream_t stream) {
  using C = D3Cfg<BT, MB>;
  static bool configured = false;
  if (!configured) {
    SS_CUDA(cudaFuncSetAttribute(w4a16_decode3_kernel<BT, KS, MB, TR, EP, PD>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
    configured = true;
  }
  if constexpr (KS == 1 && PD != 0) {
    launch_maybe_pdl(w4a16_decode3_kernel<BT, 1, MB, TR, EP, PD>, dim3(p.N / kRowsPerCta, max_tiles), kDecThreads, C::kSmem,
                     stream, p, true);
  } else if constexpr (KS == 1) {
    dim3 grid(p.N / kRowsPerCta, max_tiles);
    w4a16_decode3_kernel<BT, 1, MB, TR, EP><<<grid, kDecThreads, C::kSmem, stream>>>(p);
  } else {  // kernel 22: the two K halves of a tile are the two CTAs of a (1, 1, 2) cluster
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(p.N / kRowsPerCta, max_tiles, 2);
    cfg.blockDim = dim3(kDecThreads);
    cfg.dynamicSmemBytes = C::kSmem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 2;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    SS_CUDA(cudaLaunchKernelEx(&cfg, w4a16_decode3_kernel<BT, KS, MB>, p));
  }
  SS_LAUNCH_CHECK();
}

}  // namespace
}  // namespace servesim::kernels::moe
