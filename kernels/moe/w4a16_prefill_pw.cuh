// MXFP4 W4A16 grouped GEMM, variants 11 / 12 / 13 / 14 / 15 / 16: variant 8's prefill kernel (w4a16_prefill.cuh)
// with a different producer / dequantisation schedule (NOTES.md §15-17), w4a16_prefill_pw_kernel<BT, PM, K2>
// and launch_prefill_pw.
// Part of gemm_w4a16.cu's translation unit (after w4a16_prefill.cuh, whose WgmmaSSBf16, PCfg, kPfThreads
// and stmatrix_x4 it uses), not a standalone header.
#pragma once
#include "moe/moe.cuh"
#include "moe/device_util.cuh"
#include "moe/sm90_tma.cuh"
#include "moe/wgmma_rs.cuh"
#include "common/cuda_check.cuh"

namespace servesim::kernels::moe {
namespace {

// ================================================================================================
// Same 384 threads, tile (128 weight rows x BT = 256 tokens, k-block 64), load ring (SL = 4 slots of
// one TMA token tile + one bulk copy of the 4352 prepacked weight bytes), SS wgmma consumers and
// epilogue as variant 8. What changes is the dequantisation warpgroup (WG 0):
//  PM = where the producer (the thread that issues the loads) lives:
//   0: thread 0 of WG 0, as variant 8 (refills the slot of kb-1 after its decode of kb);
//   1 (dedicated producer warp; NOTES.md §13 (1) / §14, the side branch w4b/producer-warp-untested):
//     warp 3 lane 0 only issues the loads and may block on the consumers' release of a slot; warps
//     0-2 decode the 8 16-row groups (3 / 3 / 2 per warp) and never wait for the producer. Variant 8's
//     thread 0 refilled the slot of kb-1 inside warp 0's decode loop, so warp 0 (and with it the A
//     ring) could run at most ~1 k-block ahead of the consumers.
//   2 (producer in a consumer warp; first form hung, fixed in 606e9e2, first run w4d, NOTES.md §16): lane 0
//     of consumer warp 4 issues the first SL loads and, in
//     its body of k-block kb, right after its own release of kb-1, waits for the other consumer warps'
//     release of that slot (empty_l) and refills it with kb+SL-1; all 4 WG-0 warps decode (2 row
//     groups each, as variant 8) and never wait for a producer. The consumers wait on full_a anyway
//     (ncu of variant 11: 26% of all stall samples), and the two consumer warpgroups reach their
//     release of kb-1 at about the same time, so the wait should cost them little.
//   3 (NOTES.md §16 "Recommendation", §17): 2 with full_l split per slot into a weight barrier full_w (the
//     4352-byte bulk copy; the decoding warps wait on it) and a token barrier full_l (the TMA token
//     tile; the consumers wait on it), the weight copy issued first. In 2 the decoding warps waited for
//     the 32 KB token tile they never read (full_l 7.5% of all stall samples in ncu, §16). The slot's
//     release stays the consumers' empty_l: a consumer releases kb-1 after its wgmmas of kb-1, which
//     waited on full_a of kb-1, i.e. after every decoding warp's reads of the weight block of kb-1.
//     Measured (§17): as fast as 2; the decoding warps still wait on full_w as long as they waited on
//     full_l (7.6% of all samples), i.e. for the weight load's ISSUE: the load of kb is issued when the
//     consumers release kb-4, the same moment the A slot of kb frees, so its latency is never hidden.
//   4 (§17): 3 with the weight blocks in their own, deeper ring (kPwSWR = 7 slots; the load ring keeps only
//     the token tiles): lane 0 of decoding warp 0 issues the first kPwSWR weight copies and, in round kb,
//     after its arrival, refills the slot of kb-1 with kb-1+kPwSWR once all 4 decoding warps released it
//     (empty_w, lane 0 of each decoding warp after its decode of that k-block). The weight of kb is then
//     requested ~7 decode rounds ahead, independently of the consumers. Measured (§17): correct, but ~10%
//     SLOWER than 3: the decoders' wait on full_w fell from 7.6% to 1.1% of all stall samples, yet their
//     instructions per k-block rose from 209 to 265 (the ring's modulo-7 slot / phase arithmetic and the
//     refill), and the decode issue rate is the bound: the consumers' full_a wait rose from 11% to 26%.
//  K2 (two k-blocks per barrier round; NOTES.md §14 "What would close the gap" (1)): each decoding
//     warp decodes k-blocks 2r and 2r+1 in one round: 2 x its row groups of independent chains, ONE
//     fence.proxy.async and ONE full_a arrival per 2 k-blocks; the A ring is 2 pair slots (the same
//     4 x 16 KB), full_a / empty_a one barrier per pair; the consumers wait on full_a at even k-blocks
//     and release a pair after its odd k-block.
//  variant 11 = PM 1, 12 = PM 1 + K2, 13 = PM 0 + K2 (thread 0 refills the slots of k-blocks 2r-2,
//  2r-1 after round r's arrival: the refill of a pair slot needs the consumers to have started 2r,
//  which needs round r), 14 = PM 2, 15 = PM 3, 16 = PM 4.
// All forms: the codes and scales of every row group of a round are read from shared memory before any
// decode (independent chains for ptxas to interleave), A ring 4 k-blocks, smem 215 KB, 1 CTA / SM.
// ================================================================================================
constexpr int kPwSL = 4;   // load ring (as variant 8 at BT 256)
constexpr int kPwSAK = 4;  // A ring, in k-blocks (variant 8: 3)
constexpr int kPwSmem = kPwSL * (PCfg<256>::kX + kWBlockBytes) + kPwSAK * PCfg<256>::kA + 2 * (kPwSL + kPwSAK) * 8 + 1024;
constexpr int kPwSWR = 7;  // PM 4: weight ring slots (the most that fit in 227 KB beside the other rings)
// PM 3: SL more barriers (full_w); PM 4: kPwSWR weight slots instead of SL, full_w + empty_w per slot
template <int PM>
constexpr int kPwSmemOf = kPwSmem + (PM == 3 ? kPwSL * 8 : 0) + (PM == 4 ? (kPwSWR - kPwSL) * kWBlockBytes + 2 * kPwSWR * 8 : 0);
static_assert(kPwSmemOf<3> <= 232448 && kPwSmemOf<4> <= 232448, "variants 11-16 shared memory");

/// DQ: the dequantisation (0 = dequant_word, variants 11-16; 1 = dequant_word_p, kernel 18 = PM 3 + DQ 1, NOTES.md §18).
template <int BT, int PM, bool K2, int DQ = 0>
__global__ void __launch_bounds__(kPfThreads, 1) w4a16_prefill_pw_kernel(const __grid_constant__ CUtensorMap tmx, const Params p) {
  using C = PCfg<BT>;
  constexpr int SL = kPwSL, SAK = kPwSAK;
  constexpr int R = K2 ? 2 : 1;        // k-blocks per dequantisation round
  constexpr int NA = SAK / R;          // A-ring barriers (one per round slot)
  static_assert(PM >= 0 && PM <= 4 && !(PM >= 2 && K2), "producer placement");
  constexpr bool CP = PM >= 2;  // (token) producer in consumer warp 4 (lane 0)
  constexpr bool SW = PM >= 3;  // separate weight barrier full_w per weight slot
  constexpr bool WR = PM == 4;  // weight blocks in their own ring, loaded and released by the decoding warps
  constexpr int NW = WR ? kPwSWR : SL;  // weight slots
  constexpr int ND = PM == 1 ? 3 : 4;  // decoding warps
  constexpr int NH = (8 + ND - 1) / ND;  // row groups per decoding warp (at most)
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* xs = smem;                   // [SL][BT x 128 B], 1024-aligned
  uint8_t* as = xs + SL * C::kX;        // [SAK][128 x 128 B], 1024-aligned
  uint8_t* wr = as + SAK * C::kA;       // [NW][4352]
  uint64_t* full_l = reinterpret_cast<uint64_t*>(wr + NW * kWBlockBytes);
  uint64_t* empty_l = full_l + SL;
  uint64_t* full_a = empty_l + SL;
  uint64_t* empty_a = full_a + NA;
  // the barrier the decoding warps wait on for a slot's weight block: full_w (PM 3; only the bulk copy's
  // bytes) or full_l (the other forms; the token tile's and the weight block's bytes)
  uint64_t* full_w = SW ? empty_a + NA : full_l;  // [NW]
  uint64_t* empty_w = full_w + NW;                 // [NW], PM 4 only

  const int tile = blockIdx.y;
  const int total_tiles = p.tile_offsets[p.G];
  if (tile >= total_tiles) return;
  int lo = 0, hi = p.G;
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (p.tile_offsets[mid] <= tile) lo = mid; else hi = mid;
  }
  const int g = lo;
  const int row0 = p.row_offsets[g] + (tile - p.tile_offsets[g]) * BT;
  const int rows = min(BT, p.row_offsets[g + 1] - row0);
  const int e = p.expert_ids ? p.expert_ids[g] : g;
  const int KB = p.K / kKBlock;  // even (K % 128 == 0)
  const uint8_t* wmat = p.w + static_cast<size_t>(e) * p.matrix_bytes +
                        static_cast<size_t>(blockIdx.x) * KB * kWBlockBytes;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;

  if (tid == 0) {
    for (int s = 0; s < SL; ++s) {
      mbar_init(&full_l[s], 1);   // expect_tx arrival (TMA + bulk bytes; PM 3: TMA bytes only)
      mbar_init(&empty_l[s], 8);  // lane 0 of each consumer warp
      if constexpr (SW && !WR) mbar_init(&full_w[s], 1);  // expect_tx arrival (bulk bytes)
    }
    if constexpr (WR)
      for (int s = 0; s < NW; ++s) {
        mbar_init(&full_w[s], 1);    // expect_tx arrival (bulk bytes)
        mbar_init(&empty_w[s], ND);  // lane 0 of each decoding warp
      }
    for (int s = 0; s < NA; ++s) {
      mbar_init(&full_a[s], ND * 32);  // every decoding thread (after its own proxy fence)
      mbar_init(&empty_a[s], 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  auto load = [&](int kb) {
    const int slot = kb % SL;
    mbar_wait(&empty_l[slot], ((kb / SL) & 1) ^ 1);
    if constexpr (WR) {  // the token tile only (the weight ring is the decoding warps')
      mbar_expect_tx(&full_l[slot], C::kX);
      tma_load_2d(xs + slot * C::kX, &tmx, kb * kKBlock, row0, &full_l[slot]);
    } else if constexpr (SW) {  // the weight block first, on its own barrier (the decoding warps need only it)
      mbar_expect_tx(&full_w[slot], kWBlockBytes);
      bulk_g2s(wr + slot * kWBlockBytes, wmat + static_cast<size_t>(kb) * kWBlockBytes, kWBlockBytes, &full_w[slot]);
      mbar_expect_tx(&full_l[slot], C::kX);
      tma_load_2d(xs + slot * C::kX, &tmx, kb * kKBlock, row0, &full_l[slot]);
    } else {
      mbar_expect_tx(&full_l[slot], C::kX + kWBlockBytes);
      tma_load_2d(xs + slot * C::kX, &tmx, kb * kKBlock, row0, &full_l[slot]);
      bulk_g2s(wr + slot * kWBlockBytes, wmat + static_cast<size_t>(kb) * kWBlockBytes, kWBlockBytes, &full_l[slot]);
    }
  };
  // PM 4: weight block kb into its ring slot, after the decoding warps' release of the slot's previous use
  auto load_w = [&](int kb) {
    const int s = kb % NW;
    mbar_wait(&empty_w[s], ((kb / NW) & 1) ^ 1);
    mbar_expect_tx(&full_w[s], kWBlockBytes);
    bulk_g2s(wr + s * kWBlockBytes, wmat + static_cast<size_t>(kb) * kWBlockBytes, kWBlockBytes, &full_w[s]);
  };

  if (warp < 4) {  // ---- WG 0: decoding warps (+ the producer) ----
    if constexpr (PM == 1) {
      if (warp == 3) {  // dedicated producer warp: blocks on empty slots without holding up any decode
        if (lane == 0)
          for (int kb = 0; kb < KB; ++kb) load(kb);
        return;
      }
    } else if constexpr (PM == 0) {
      // variant 8 keeps SL - 1 loads ahead (refill of kb-1 after the decode of kb); the K2 form can issue
      // all SL at once (its first refill, of the slots of k-blocks 0 and 1, follows round 1)
      if (tid == 0)
        for (int kb = 0; kb < (K2 ? SL : SL - 1) && kb < KB; ++kb) load(kb);
    }
    if constexpr (WR) {
      if (warp == 0 && lane == 0)
        for (int kb = 0; kb < NW && kb < KB; ++kb) load_w(kb);
    }
    const int mi = lane >> 3;  // stmatrix: this lane addresses row (lane & 7) of matrix mi
    for (int kb0 = 0; kb0 < KB; kb0 += R) {
      const int r = kb0 / R, sa = r % NA;
#pragma unroll
      for (int j = 0; j < R; ++j) mbar_wait(&full_w[(kb0 + j) % NW], ((kb0 + j) / NW) & 1);
      mbar_wait(&empty_a[sa], ((r / NA) & 1) ^ 1);
      uint4 q[R][NH];
      uint32_t sc[R][NH];
#pragma unroll
      for (int j = 0; j < R; ++j)
#pragma unroll
        for (int h = 0; h < NH; ++h) {
          const int rg = warp + ND * h;
          if (rg < 8) {  // warp-uniform
            const uint8_t* wb = wr + ((kb0 + j) % NW) * kWBlockBytes;
            q[j][h] = *reinterpret_cast<const uint4*>(wb + rg * 512 + lane * 16);
            sc[j][h] = *reinterpret_cast<const uint32_t*>(wb + 4096 + rg * 32 + gq * 4);
          }
        }
#pragma unroll
      for (int j = 0; j < R; ++j) {
        const uint32_t ab = smem_u32(as + ((kb0 + j) % SAK) * C::kA);
#pragma unroll
        for (int h = 0; h < NH; ++h) {
          const int rg = warp + ND * h;  // 16-row group (the register-A kernels' warp index)
          if (rg < 8) {
            const uint32_t f00 = scale_factor<0>(sc[j][h]), f01 = scale_factor<2>(sc[j][h]);
            const uint32_t f10 = scale_factor<1>(sc[j][h]), f11 = scale_factor<3>(sc[j][h]);
            uint32_t a[4][4];
            dequant_word_t<DQ>(q[j][h].x, f00, f01, a[0]);
            dequant_word_t<DQ>(q[j][h].y, f00, f01, a[1]);
            dequant_word_t<DQ>(q[j][h].z, f10, f11, a[2]);
            dequant_word_t<DQ>(q[j][h].w, f10, f11, a[3]);
            const int rr = rg * 16 + (lane & 7) + (mi & 1) * 8;
#pragma unroll
            for (int s = 0; s < 4; ++s) {
              const int ch = s * 2 + (mi >> 1);
              stmatrix_x4(ab + rr * 128 + ((ch ^ (rr & 7)) << 4), a[s][0], a[s][1], a[s][2], a[s][3]);
            }
          }
        }
      }
      fence_proxy_async();
      mbar_arrive(&full_a[sa]);
      if constexpr (WR) {  // this warp is done with weight block kb0 (its values went into the decode above)
        __syncwarp();
        if (lane == 0) {
          mbar_arrive(&empty_w[kb0 % NW]);
          // refill the slot of kb0-1 (all 4 warps are normally past it) with kb0-1+NW
          if (warp == 0 && kb0 >= 1 && kb0 - 1 + NW < KB) load_w(kb0 - 1 + NW);
        }
      }
      if constexpr (PM == 0) {
        if (tid == 0) {
          if constexpr (K2) {
            // slots of k-blocks kb0-2, kb0-1: the consumers release kb0-1 after issuing kb0 (needs this round)
            for (int j = 0; j < R; ++j)
              if (kb0 + R + j >= SL && kb0 + R + j < KB) load(kb0 + R + j);
          } else {
            if (kb0 + SL - 1 < KB) load(kb0 + SL - 1);
          }
        }
      }
      __syncwarp();
    }
    return;
  }

  // ---- consumer warpgroups (variant 8's, with the A ring of SAK k-blocks in NA round slots) ----

  const int ct = tid - 128, cw = warp - 4, wg = cw >> 2;
  float acc[BT / 8][4];
#pragma unroll
  for (int i = 0; i < BT / 8; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) acc[i][q] = 0.f;
  const uint32_t x0 = smem_u32(xs), a0 = smem_u32(as) + wg * (64 * 128);
  const bool producer = CP && cw == 0 && lane == 0;
  // all SL slots at once (fresh barriers); the refill of kb-1's slot with kb+SL-1 follows from kb = 1 on.
  // (The first form, call 2 of §15, issued only SL - 1 here: k-block SL - 1 was never loaded and the
  // decoding warps waited for it forever.)
  if (producer)
    for (int kb = 0; kb < SL && kb < KB; ++kb) load(kb);
  // k-block kb (ODD = kb is odd, known at compile time: the loop is unrolled by 2 and KB is even)
  auto body = [&](int kb, auto odd, auto last) {
    constexpr bool kOdd = decltype(odd)::value;
    const int ls = kb % SL;
    mbar_wait(&full_l[ls], (kb / SL) & 1);
    if (!K2 || !kOdd) mbar_wait(&full_a[(kb / R) % NA], ((kb / R) / NA) & 1);
#pragma unroll
    for (int i = 0; i < BT / 8; ++i)
#pragma unroll
      for (int q = 0; q < 4; ++q) fence_operand(acc[i][q]);
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s)
      WgmmaSSBf16<BT>::mma(&acc[0][0], desc_sw128(a0 + (kb % SAK) * C::kA + s * 32), desc_sw128(x0 + ls * C::kX + s * 32));
    wgmma_commit();
#pragma unroll
    for (int i = 0; i < BT / 8; ++i)
#pragma unroll
      for (int q = 0; q < 4; ++q) fence_operand(acc[i][q]);
    if constexpr (decltype(last)::value) wgmma_wait<0>();
    else wgmma_wait<1>();
    if (kb > 0) {  // k-block kb-1's wgmmas are done
      __syncwarp();
      if (lane == 0) {
        mbar_arrive(&empty_l[(kb - 1) % SL]);
        if (!K2 || !kOdd) mbar_arrive(&empty_a[((kb - 1) / R) % NA]);  // K2: kb-1 odd ends its pair
        if (CP && producer && kb + SL - 1 < KB) load(kb + SL - 1);  // waits for the other warps' release of kb-1
      }
    }
  };
  using F = std::integral_constant<bool, false>;
  using T = std::integral_constant<bool, true>;
  for (int kb = 0; kb < KB - 2; kb += 2) {
    body(kb, F{}, F{});
    body(kb + 1, T{}, F{});
  }
  body(KB - 2, F{}, F{});
  body(KB - 1, T{}, T{});
  named_bar(1, 256);  // both consumer warpgroups are done with the rings (staging reuses them)

  // Epilogue (variant 8's): stage [BT tokens][128 outputs] bf16 (row stride 136) then 16-byte stores.
  bf16* st = reinterpret_cast<bf16*>(smem);
  stage_acc_bf16<BT>(st, acc, cw * 16, gq, tq);
  named_bar(1, 256);
  store_staged_rows(st, p.y + static_cast<size_t>(row0) * p.N + static_cast<size_t>(blockIdx.x) * kRowsPerCta, p.N, rows, ct, 256);
}

template <int BT, int PM, bool K2, int DQ = 0>
void launch_prefill_pw(const Params& p, int max_tiles, long long x_rows, cudaStream_t stream) {
  static_assert(BT == 256, "variants 11-16 are built for BT 256 only");
  static bool configured = false;
  if (!configured) {
    SS_CUDA(cudaFuncSetAttribute(w4a16_prefill_pw_kernel<BT, PM, K2, DQ>, cudaFuncAttributeMaxDynamicSharedMemorySize, kPwSmemOf<PM>));
    configured = true;
  }
  static CUtensorMap map;  // per instantiation, cached as in launch_prefill
  static const void* m_x = nullptr;
  static long long m_rows = -1;
  static int m_k = -1;
  if (m_x != p.x || m_rows != x_rows || m_k != p.K) {
    map = make_map_2d(p.x, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, p.K, static_cast<uint64_t>(x_rows),
                      static_cast<uint64_t>(p.K) * 2, kKBlock, BT, CU_TENSOR_MAP_SWIZZLE_128B);
    m_x = p.x;
    m_rows = x_rows;
    m_k = p.K;
  }
  dim3 grid(p.N / kRowsPerCta, max_tiles);
  w4a16_prefill_pw_kernel<BT, PM, K2, DQ><<<grid, kPfThreads, kPwSmemOf<PM>, stream>>>(map, p);
  SS_LAUNCH_CHECK();
}

}  // namespace
}  // namespace servesim::kernels::moe
