// W4A16 grouped expert GEMM: MXFP4 (E2M1 codes, E8M0 scale per 32 K) weights dequantised to
// bf16 in registers and used as wgmma's A operand; the expert's tokens (bf16, K-major, 128-byte
// swizzled shared memory) are wgmma's B operand. See NOTES.md §3 for the design and layout.
#include "moe/moe.cuh"
#include "moe/device_util.cuh"
#include "moe/sm90_tma.cuh"  // mbarriers and named barriers (shared with the FP8 kernels)
#include "moe/wgmma_rs.cuh"
#include "common/cuda_check.cuh"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <stdexcept>
#include <string>

namespace servesim::kernels::moe {

namespace {

constexpr int kRowsPerCta = 128;   // weight rows (outputs) per CTA: 2 warpgroups x m64
constexpr int kKBlock = 64;        // K per pipeline stage
constexpr int kWBlockBytes = 4352; // 128 x 64 E2M1 codes (4096 B) + 128 x 2 E8M0 scales (256 B)
constexpr int kThreads = 256;

struct Params {
  const bf16* x;
  const uint8_t* w;
  const int* expert_ids;
  const int* row_offsets;
  const int* tile_offsets;
  bf16* y;
  int G, N, K;
  size_t matrix_bytes;
};

/// KS = 64-wide k-blocks per pipeline stage (1, or 2 for variant 4 at decode tile widths).
template <int BT, int KS = 1>
struct Cfg {
  static constexpr int kStages = KS == 1 ? (BT <= 32 ? 8 : (BT == 64 ? 6 : (BT == 128 ? 5 : 4)))
                                         : (BT <= 32 ? 5 : 4);
  static constexpr int kXSub = BT * 128;        // one BT x 64 bf16 tile (1024-byte multiple)
  static constexpr int kXBytes = kXSub * KS;
  static constexpr int kWBytes = kWBlockBytes * KS;
  static constexpr int kSmem = kStages * (kXBytes + kWBytes) + 1024;
};

/// bf16x2 factor 2^(s-1) in both halves, s = byte B of the 4 scale bytes `sc`: multiplies the raw
/// (2^-126-scaled) E2M1 bit pattern to the exact value code * 2^(s-127). Requires s <= 128 (checked
/// at prepack). One PRMT ([s, 0, s, 0]) + one IMAD (s*128 + 126*128 in each half).
template <int B>
__device__ __forceinline__ uint32_t scale_factor(uint32_t sc) {
  return __byte_perm(sc, 0u, 0x4040 | (B << 8) | B) * 128u + 0x3F003F00u;
}
__device__ __forceinline__ uint32_t hmul2_u32(uint32_t a, uint32_t b) {
  __nv_bfloat162 r = __hmul2(*reinterpret_cast<__nv_bfloat162*>(&a), *reinterpret_cast<__nv_bfloat162*>(&b));
  return *reinterpret_cast<uint32_t*>(&r);
}

/// One 32-bit word of 8 E2M1 codes -> the 4 A-fragment registers of one k16 step (decode-friendly
/// prepack, NOTES.md §8): register j = {low: element (g or g+8, k), high: (same row, k+1)} is
/// w4a16_reg_bits(w, j) (sign at bf16 bit 15/31, E2M1 exponent+mantissa at bits 8..6 / 24..22) =
/// code * 2^-126 as bf16 (subnormal for exponent 0); times 2^(s-1) it is code * 2^(s-127).
/// j even uses row g (factor f0), j odd row g+8 (f1). 11 integer ops + 4 HMUL2 per word (the
/// previous nibble order needed 15 + 4). A rotation layout with 9 integer ops (SHF.L.W) was measured
/// 2-4% SLOWER (issue 13 w4dec call 2): its rotations run on the ALU pipe, whereas this layout's left
/// shifts compile to IMAD.SHL on the FMA pipe, and the ALU pipe is the busiest one (NOTES.md §12).
__device__ __forceinline__ void dequant_word(uint32_t w, uint32_t f0, uint32_t f1, uint32_t (&a)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) a[j] = hmul2_u32(w4a16_reg_bits(w, j), (j & 1) ? f1 : f0);
}

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
  constexpr int kLd = 136;
  bf16* st = reinterpret_cast<bf16*>(smem);
  const int n0 = warp * 16 + gq, n1 = n0 + 8;
#pragma unroll
  for (int j = 0; j < BT / 8; ++j) {
    const int c0 = 8 * j + 2 * tq;
    st[c0 * kLd + n0] = __float2bfloat16_rn(acc[j][0]);
    st[(c0 + 1) * kLd + n0] = __float2bfloat16_rn(acc[j][1]);
    st[c0 * kLd + n1] = __float2bfloat16_rn(acc[j][2]);
    st[(c0 + 1) * kLd + n1] = __float2bfloat16_rn(acc[j][3]);
  }
  __syncthreads();
  bf16* yb = p.y + static_cast<size_t>(row0) * p.N + static_cast<size_t>(blockIdx.x) * kRowsPerCta;
  for (int c = tid; c < rows * 16; c += kThreads) {
    const int r = c >> 4, ch = c & 15;
    *reinterpret_cast<uint4*>(yb + static_cast<size_t>(r) * p.N + ch * 8) =
        *reinterpret_cast<const uint4*>(st + r * kLd + ch * 8);
  }
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
template <int BT, int KS, int kXSub, bool Last, class AF, class ACC>
__device__ __forceinline__ void decode_stage_mma(const uint8_t* wst, const uint8_t* xst, int warp, int lane, int gq, AF& af, ACC& acc) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    const uint8_t* wb = wst + ks * kWBlockBytes;
    const uint4 q = *reinterpret_cast<const uint4*>(wb + warp * 512 + lane * 16);
    const uint32_t sc = *reinterpret_cast<const uint32_t*>(wb + 4096 + warp * 32 + gq * 4);
    const uint32_t f00 = scale_factor<0>(sc), f01 = scale_factor<2>(sc);
    const uint32_t f10 = scale_factor<1>(sc), f11 = scale_factor<3>(sc);
    dequant_word(q.x, f00, f01, af[ks][0]);
    dequant_word(q.y, f00, f01, af[ks][1]);
    dequant_word(q.z, f10, f11, af[ks][2]);
    dequant_word(q.w, f10, f11, af[ks][3]);
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

template <int BT, int KS_>
__global__ void __launch_bounds__(kDecThreads, DCfg<BT, KS_>::kMinBlocks) w4a16_decode_kernel(const Params p) {
  using C = DCfg<BT, KS_>;
  constexpr int S = C::kStages, KS = KS_;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* xs = smem;                    // [S][KS][BT*128], 1024-aligned sub-tiles
  uint8_t* ws = smem + S * C::kX;        // [S][8704]
  uint64_t* full = reinterpret_cast<uint64_t*>(ws + S * C::kW);
  uint64_t* empty = full + S;

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
  const int KB = p.K / (kKBlock * KS);  // stages (even: K % 256 == 0)
  const uint8_t* wmat = p.w + static_cast<size_t>(e) * p.matrix_bytes +
                        static_cast<size_t>(blockIdx.x) * (p.K / kKBlock) * kWBlockBytes;
  const bf16* xrow0 = p.x + static_cast<size_t>(row0) * p.K;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;

  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1 + 32);  // expect_tx arrival of lane 0 + 32 cp.async arrivals
      mbar_init(&empty[s], 8);      // lane 0 of each consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp == 8) {  // ---- producer warp ----
    for (int kb = 0; kb < KB; ++kb) {
      const int slot = kb % S;
      mbar_wait(&empty[slot], ((kb / S) & 1) ^ 1);
      if (lane == 0) {
        mbar_expect_tx(&full[slot], C::kW);
        bulk_g2s(ws + slot * C::kW, wmat + static_cast<size_t>(kb) * C::kW, C::kW, &full[slot]);
      }
      uint8_t* xd = xs + slot * C::kX;
#pragma unroll
      for (int c = lane; c < BT * 8 * KS; c += 32) {
        const int ks = c / (BT * 8), cc = c % (BT * 8), r = cc >> 3, ch = cc & 7;
        const bool ok = r < rows;
        const bf16* src = ok ? xrow0 + static_cast<size_t>(r) * p.K + (kb * KS + ks) * kKBlock + ch * 8 : p.x;
        cp_async16(xd + ks * C::kXSub + r * 128 + ((ch ^ (r & 7)) << 4), src, ok ? 16 : 0);
      }
      asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(&full[slot])) : "memory");
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
    decode_stage_mma<BT, KS, C::kXSub, decltype(last)::value>(ws + slot * C::kW, xs + slot * C::kX, warp, lane, gq, af, acc);
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
  named_bar(1, 256);
  constexpr int kLd = 136;
  bf16* st = reinterpret_cast<bf16*>(smem);
  const int n0 = warp * 16 + gq, n1 = n0 + 8;
#pragma unroll
  for (int j = 0; j < BT / 8; ++j) {
    const int c0 = 8 * j + 2 * tq;
    st[c0 * kLd + n0] = __float2bfloat16_rn(acc[j][0]);
    st[(c0 + 1) * kLd + n0] = __float2bfloat16_rn(acc[j][1]);
    st[c0 * kLd + n1] = __float2bfloat16_rn(acc[j][2]);
    st[(c0 + 1) * kLd + n1] = __float2bfloat16_rn(acc[j][3]);
  }
  named_bar(1, 256);
  bf16* yb = p.y + static_cast<size_t>(row0) * p.N + static_cast<size_t>(blockIdx.x) * kRowsPerCta;
  for (int c = tid; c < rows * 16; c += 256) {
    const int r = c >> 4, ch = c & 15;
    *reinterpret_cast<uint4*>(yb + static_cast<size_t>(r) * p.N + ch * 8) =
        *reinterpret_cast<const uint4*>(st + r * kLd + ch * 8);
  }
}

template <int BT, int KS = 2>
void launch_decode(const Params& p, int max_tiles, cudaStream_t stream) {
  static bool configured = false;
  if (!configured) {
    SS_CUDA(cudaFuncSetAttribute(w4a16_decode_kernel<BT, KS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 DCfg<BT, KS>::kSmem));
    configured = true;
  }
  dim3 grid(p.N / kRowsPerCta, max_tiles);
  w4a16_decode_kernel<BT, KS><<<grid, kDecThreads, DCfg<BT, KS>::kSmem, stream>>>(p);
  SS_LAUNCH_CHECK();
}

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

// ================================================================================================
// Variant 8: prefill kernel (dispatched at BT = 256; the template also builds BT = 128, measured slower than
// variant 0 there), dequantisation warpgroup + SS wgmma (NOTES.md §13).
// 384 threads = 3 warpgroups:
//  - WG 0 ("dequant"): thread 0 also produces: per 64-wide k-block ONE 2-D TMA load of the BT x 64 token
//    tile (128-byte swizzle; rows past the tensor's end zero-filled) + ONE 1-D bulk copy of the 4352
//    prepacked weight bytes into the load ring (full_l, complete_tx). All 4 warps then dequantise the
//    k-block once per CTA (2 x 16-row groups per warp, the same fragments the register-A kernels
//    build) and write it with stmatrix.x4 into the A ring as a 128 x 64 bf16 K-major tile with the
//    128-byte swizzle (fence.proxy.async, 128 arrivals on full_a).
//  - WG 1, 2 (consumers; 154 registers, no setmaxnreg): wait full_l + full_a, 4 SS wgmma m64nBTk16 (A = 64 dequantised
//    weight rows, B = the token tile), commit, wait_group 1, release the previous k-block's slots.
// The consumers run nothing but wgmma and barrier waits in the main loop, so the tensor pipe sees a
// plain bf16 GEMM; the decode of k-block kb+1.. overlaps the wgmmas of kb on other warps.
// ================================================================================================
/// D[64 x N] += A[64 x 16] * B[16 x N], both bf16 K-major tiles in shared memory (descriptors); only
/// N = 256 (the prefill kernel's 256-token tile) is used.
template <int N> struct WgmmaSSBf16;
template <> struct WgmmaSSBf16<256> {
  __device__ __forceinline__ static void mma(float* d, uint64_t da, uint64_t db) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1, 1, 1, 0, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db));
  }
};

template <int BT>
struct PCfg {
  static constexpr int kX = BT * 128;        // BT tokens x 64 bf16
  static constexpr int kA = 128 * 128;       // 128 weight rows x 64 bf16
  static constexpr int kSL = BT == 256 ? 4 : 6;  // load ring (X + raw weights)
  static constexpr int kSA = BT == 256 ? 3 : 4;  // dequantised A ring
  static constexpr int kSmem = kSL * (kX + kWBlockBytes) + kSA * kA + 2 * (kSL + kSA) * 8 + 1024;
};
constexpr int kPfThreads = 384;

__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1), "r"(r2),
               "r"(r3)
               : "memory");
}

template <int BT>
__global__ void __launch_bounds__(kPfThreads, 1) w4a16_prefill_kernel(const __grid_constant__ CUtensorMap tmx, const Params p) {
  using C = PCfg<BT>;
  constexpr int SL = C::kSL, SA = C::kSA;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* xs = smem;                   // [SL][BT x 128 B], 1024-aligned
  uint8_t* as = xs + SL * C::kX;        // [SA][128 x 128 B], 1024-aligned
  uint8_t* wr = as + SA * C::kA;        // [SL][4352]
  uint64_t* full_l = reinterpret_cast<uint64_t*>(wr + SL * kWBlockBytes);
  uint64_t* empty_l = full_l + SL;
  uint64_t* full_a = empty_l + SL;
  uint64_t* empty_a = full_a + SA;

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
  const int KB = p.K / kKBlock;
  const uint8_t* wmat = p.w + static_cast<size_t>(e) * p.matrix_bytes +
                        static_cast<size_t>(blockIdx.x) * KB * kWBlockBytes;
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

  if (warp < 4) {  // ---- dequant warpgroup (thread 0 = TMA producer) ----
    // no setmaxnreg: the consumers fit in the 168 registers of 384 threads (an inc to 200 with a dec to 112
    // asked for 512 x 128 registers > the 504 x 128 the CTA holds: the inc waited forever, call 1)
    auto load = [&](int kb) {
      const int slot = kb % SL;
      mbar_wait(&empty_l[slot], ((kb / SL) & 1) ^ 1);
      mbar_expect_tx(&full_l[slot], C::kX + kWBlockBytes);
      tma_load_2d(xs + slot * C::kX, &tmx, kb * kKBlock, row0, &full_l[slot]);
      bulk_g2s(wr + slot * kWBlockBytes, wmat + static_cast<size_t>(kb) * kWBlockBytes, kWBlockBytes, &full_l[slot]);
    };
    if (tid == 0)
      for (int kb = 0; kb < SL - 1 && kb < KB; ++kb) load(kb);
    const int mi = lane >> 3;  // stmatrix: this lane addresses row (lane & 7) of matrix mi
    for (int kb = 0; kb < KB; ++kb) {
      const int ls = kb % SL, sa = kb % SA;
      mbar_wait(&full_l[ls], (kb / SL) & 1);
      mbar_wait(&empty_a[sa], ((kb / SA) & 1) ^ 1);
      const uint8_t* wb = wr + ls * kWBlockBytes;
      const uint32_t ab = smem_u32(as + sa * C::kA);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int rg = warp + 4 * h;  // 16-row group (the register-A kernels' warp index)
        const uint4 q = *reinterpret_cast<const uint4*>(wb + rg * 512 + lane * 16);
        const uint32_t sc = *reinterpret_cast<const uint32_t*>(wb + 4096 + rg * 32 + gq * 4);
        const uint32_t f00 = scale_factor<0>(sc), f01 = scale_factor<2>(sc);
        const uint32_t f10 = scale_factor<1>(sc), f11 = scale_factor<3>(sc);
        uint32_t a[4][4];
        dequant_word(q.x, f00, f01, a[0]);
        dequant_word(q.y, f00, f01, a[1]);
        dequant_word(q.z, f10, f11, a[2]);
        dequant_word(q.w, f10, f11, a[3]);
        // matrix mi of k16 step s: rows (mi & 1) * 8 + 0..7 of the group, k (mi >> 1) * 8 + 0..7
        const int r = rg * 16 + (lane & 7) + (mi & 1) * 8;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          const int ch = s * 2 + (mi >> 1);
          stmatrix_x4(ab + r * 128 + ((ch ^ (r & 7)) << 4), a[s][0], a[s][1], a[s][2], a[s][3]);
        }
      }
      fence_proxy_async();
      mbar_arrive(&full_a[sa]);
      // refill the slot of k-block kb-1 (released once the consumers' wgmmas of kb-1 are done, which
      // needs full_a[kb]: issuing this before the dequantisation of kb would deadlock)
      if (tid == 0 && kb + SL - 1 < KB) load(kb + SL - 1);
      __syncwarp();
    }
    return;
  }

  // ---- consumer warpgroups ----

  const int ct = tid - 128, cw = warp - 4, wg = cw >> 2;
  float acc[BT / 8][4];
#pragma unroll
  for (int i = 0; i < BT / 8; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) acc[i][q] = 0.f;
  const uint32_t x0 = smem_u32(xs), a0 = smem_u32(as) + wg * (64 * 128);
  // k-block kb: wait for its tokens and dequantised weights, 4 wgmma, then release k-block kb-1 once
  // wait_group 1 says its wgmmas are done. The last k-block waits for everything inside the body and
  // the loop is unrolled by 2 (KB even), as in variant 0: a rolled loop with the accumulator in
  // flight across the back edge made ptxas serialise the wgmmas (C7514).
  auto body = [&](int kb, auto last) {
    const int ls = kb % SL, sa = kb % SA;
    mbar_wait(&full_l[ls], (kb / SL) & 1);
    mbar_wait(&full_a[sa], (kb / SA) & 1);
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
    if (kb > 0) {
      __syncwarp();
      if (lane == 0) {
        mbar_arrive(&empty_l[(kb - 1) % SL]);
        mbar_arrive(&empty_a[(kb - 1) % SA]);
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
  named_bar(1, 256);  // both consumer warpgroups are done with the rings (staging reuses them)

  // Epilogue: stage [BT tokens][128 outputs] bf16 (row stride 136) then 16-byte stores.
  constexpr int kLd = 136;
  bf16* st = reinterpret_cast<bf16*>(smem);
  const int n0 = cw * 16 + gq, n1 = n0 + 8;
#pragma unroll
  for (int j = 0; j < BT / 8; ++j) {
    const int c0 = 8 * j + 2 * tq;
    st[c0 * kLd + n0] = __float2bfloat16_rn(acc[j][0]);
    st[(c0 + 1) * kLd + n0] = __float2bfloat16_rn(acc[j][1]);
    st[c0 * kLd + n1] = __float2bfloat16_rn(acc[j][2]);
    st[(c0 + 1) * kLd + n1] = __float2bfloat16_rn(acc[j][3]);
  }
  named_bar(1, 256);
  bf16* yb = p.y + static_cast<size_t>(row0) * p.N + static_cast<size_t>(blockIdx.x) * kRowsPerCta;
  for (int c = ct; c < rows * 16; c += 256) {
    const int r = c >> 4, ch = c & 15;
    *reinterpret_cast<uint4*>(yb + static_cast<size_t>(r) * p.N + ch * 8) =
        *reinterpret_cast<const uint4*>(st + r * kLd + ch * 8);
  }
}

template <int BT>
void launch_prefill(const Params& p, int max_tiles, long long x_rows, cudaStream_t stream) {
  static bool configured = false;
  if (!configured) {
    SS_CUDA(cudaFuncSetAttribute(w4a16_prefill_kernel<BT>, cudaFuncAttributeMaxDynamicSharedMemorySize, PCfg<BT>::kSmem));
    configured = true;
  }
  // the token tensor map depends only on (x, rows, K): cached for repeated launches
  static CUtensorMap map;
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
  w4a16_prefill_kernel<BT><<<grid, kPfThreads, PCfg<BT>::kSmem, stream>>>(map, p);
  SS_LAUNCH_CHECK();
}

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

int g_variant = 8;  // default: 5 at decode tile widths, the prefill kernel at BT 256 (NOTES.md §13)

template <int BT>
void launch_bt(const Params& p, int max_tiles, long long x_rows, cudaStream_t stream) {
  if (g_variant == 8) {  // prefill kernel at BT = 256 when the token tensor's rows are known, else as 5.
    // At BT = 128 (m = 65..128 per expert) it measured SLOWER than variant 0 (K3 w13 G=8 m=128: 155.6 vs
    // 137.5 us; w4pf call 2 of NOTES.md §13): the 128 x 128 tile gives 2 x m64n128 wgmmas per dequantised
    // k-block and the pipeline fill/epilogue of a short CTA are not hidden; so BT = 128 runs variant 0.
    if constexpr (BT == 256) {
      if (x_rows > 0) { launch_prefill<BT>(p, max_tiles, x_rows, stream); return; }
    }
  }
  if (g_variant == 9 || g_variant == 10) {  // NOTES.md §14: persistent; 9: polling producer, SA 4; 10: blocking producer, SA 3
    if constexpr (BT == 256) {
      if (x_rows > 0) {
        if (g_variant == 9) launch_prefill2<4, true, true>(p, max_tiles, x_rows, stream);
        else launch_prefill2<3, true, false>(p, max_tiles, x_rows, stream);
        return;
      }
    }
  }
  if (g_variant == 5 || g_variant == 4 || g_variant == 6 || g_variant == 7 || g_variant >= 8) {
    if constexpr (BT <= 64) {
      if (p.K % 256 == 0) {
        // variant 5 at BT <= 32; at BT = 64 its A fragments spill (ptxas) and variant 0 was faster
        // than 4 there (81.5 vs 89.9 us, K3 w13 G=8 m=64, call 1 of this session), so 0
        if constexpr (BT <= 32) {
          if (g_variant == 7) { launch_streamk<BT>(p, max_tiles, stream); return; }
          if (g_variant == 5 || g_variant >= 8) { launch_decode<BT, 2>(p, max_tiles, stream); return; }
          if (g_variant == 6) { launch_decode<BT, 1>(p, max_tiles, stream); return; }
        }
        if (g_variant >= 5) launch<BT, 0>(p, max_tiles, stream);
        else launch<BT, 4, 2>(p, max_tiles, stream);
        return;
      }
    }
    launch<BT, 0>(p, max_tiles, stream);
    return;
  }
  switch (g_variant) {
    case 0: launch<BT, 0>(p, max_tiles, stream); return;
    case 1: launch<BT, 1>(p, max_tiles, stream); return;
    case 2: launch<BT, 2>(p, max_tiles, stream); return;
    default: launch<BT, 3>(p, max_tiles, stream); return;
  }
}

}  // namespace

void w4a16_set_variant(int v) {
  if (v < 0 || v > 10) throw std::invalid_argument("w4a16_set_variant: 0..10");
  g_variant = v;
}
void w4a16_set_streamk_ctas(int ctas) { g_sk_ctas = ctas > 0 ? ctas : 0; }
int w4a16_variant() { return g_variant; }

int w4a16_kernel_for(int bt, int K, long long x_rows) {
  const int v = g_variant;
  if (v <= 3) return v;
  if (v >= 8 && bt == 256 && x_rows > 0) return v;  // the prefill kernels (8; 9/10 persistent forms)
  if (bt <= 64 && K % 256 == 0) {  // launch_bt's decode-width branch
    if (bt <= 32) {
      if (v == 7) return 7;
      if (v == 6) return 6;
      if (v == 5 || v >= 8) return 5;
      return 4;
    }
    return v == 4 ? 4 : 0;  // bt 64: variant 0 (4 when asked for)
  }
  return 0;
}

int w4a16_pick_bt(double avg) {
  for (int bt : kW4A16TileWidths)
    if (avg <= bt) return bt;
  return 256;
}

void w4a16_grouped_gemm(const bf16* x, const uint8_t* w_pool, const int* expert_ids, const int* row_offsets,
                        const int* tile_offsets, int G, int N, int K, int bt, int max_tiles, bf16* y,
                        cudaStream_t stream, long long x_rows) {
  if (N % kRowsPerCta != 0 || K % (2 * kKBlock) != 0 || N <= 0 || K <= 0 || G <= 0)
    throw std::invalid_argument("w4a16_grouped_gemm: need N % 128 == 0, K % 128 == 0, G > 0");
  if (max_tiles <= 0) return;
  if (max_tiles > 65535) throw std::invalid_argument("w4a16_grouped_gemm: more than 65535 token tiles");
  const Params p{x, w_pool, expert_ids, row_offsets, tile_offsets, y, G, N, K, w4a16_matrix_bytes(N, K)};
#define SS_W4_CASE(B)                  \
  case B:                              \
    launch_bt<B>(p, max_tiles, x_rows, stream); \
    return;
  switch (bt) {
    SS_W4_CASE(8) SS_W4_CASE(16) SS_W4_CASE(32) SS_W4_CASE(64) SS_W4_CASE(128) SS_W4_CASE(256)
    default: throw std::invalid_argument("w4a16_grouped_gemm: bt must be 8,16,32,64,128 or 256");
  }
#undef SS_W4_CASE
}

// ---- host-side packing ----------------------------------------------------------------------

double e2m1_value(uint8_t code) {
  static const double mag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (code & 8) ? -mag[code & 7] : mag[code & 7];
}
double e8m0_value(uint8_t s) { return std::ldexp(1.0, static_cast<int>(s) - 127); }

namespace {
struct Slot {
  size_t word_byte;   // byte offset of the 32-bit word holding the code
  int bit[4];         // bit positions of the code's m, e0, e1, s in that word
  size_t scale_byte;  // byte offset of the E8M0 scale
};
/// Where element W[n, k] lives in the prepacked layout (the kernel's fragment mapping).
Slot slot_of(int K, int n, int k) {
  const int nt = n / 128, rl = n % 128, rg = rl / 16, rr = rl % 16, g = rr % 8, half = rr / 8;
  const int kb = k / 64, kk = k % 64, s = kk / 16, kc = kk % 16, t = (kc % 8) / 2, hi = kc % 2, second8 = kc / 8;
  const int j = second8 * 2 + half;  // A register: a0 (g, k<8), a1 (g+8, k<8), a2 (g, k>=8), a3 (g+8, k>=8)
  const int lane = g * 4 + t;
  const size_t block = (static_cast<size_t>(nt) * (K / 64) + kb) * kWBlockBytes;
  Slot sl;
  sl.word_byte = block + rg * 512 + lane * 16 + s * 4;
  for (int b = 0; b < 4; ++b) sl.bit[b] = (kW4A16CodeBit[j][b] + 16 * hi) & 31;
  sl.scale_byte = block + 4096 + rg * 32 + g * 4 + half * 2 + (s >= 2 ? 1 : 0);
  return sl;
}
}  // namespace

void w4a16_prepack(const uint8_t* codes, const uint8_t* scales, int N, int K, uint8_t* out) {
  if (N % 128 != 0 || K % 64 != 0) throw std::invalid_argument("w4a16_prepack: need N % 128 == 0 and K % 64 == 0");
  for (size_t i = 0; i < static_cast<size_t>(N) * K / 32; ++i)
    if (scales[i] > 128 || scales[i] < 1)
      throw std::invalid_argument("w4a16_prepack: E8M0 scale byte " + std::to_string(scales[i]) +
                                  " outside [1, 128] (scale outside [2^-126, 2])");
  const size_t bytes = w4a16_matrix_bytes(N, K);
  for (size_t i = 0; i < bytes; ++i) out[i] = 0;
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) {
      const Slot sl = slot_of(K, n, k);
      uint32_t word;
      std::memcpy(&word, out + sl.word_byte, 4);
      const uint32_t code = codes[static_cast<size_t>(n) * K + k] & 0xF;
      for (int b = 0; b < 4; ++b) word |= ((code >> b) & 1u) << sl.bit[b];
      std::memcpy(out + sl.word_byte, &word, 4);
      out[sl.scale_byte] = scales[static_cast<size_t>(n) * (K / 32) + k / 32];
    }
}

double w4a16_packed_value(const uint8_t* packed, int /*N*/, int K, int n, int k) {
  const Slot sl = slot_of(K, n, k);
  uint32_t word;
  std::memcpy(&word, packed + sl.word_byte, 4);
  uint8_t code = 0;
  for (int b = 0; b < 4; ++b) code |= ((word >> sl.bit[b]) & 1u) << b;
  return e2m1_value(code) * e8m0_value(packed[sl.scale_byte]);
}

}  // namespace servesim::kernels::moe
