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

/// The same 4 registers as dequant_word, bit for bit (same prepack), with register 3 built from a byte
/// permute (issue 13, w4f; NOTES.md §18): p = PRMT(w, [b1, b1, b3, b3]) puts register 3's mantissa (word
/// bit 10 / 26) and sign (11 / 27) 4 bits and its exponent (13-14 / 29-30) 2 bits below their bf16
/// places, so register 3 = ((p << 4) & 0x80408040) | ((p << 2) & 0x01800180): PRMT + 2 left shifts
/// (IMAD.SHL, FMA pipe) + 2 LOP3 instead of 2 right shifts (SHF, ALU) + 1 left shift + 3 LOP3. Per word
/// 10 integer ops (6 on the ALU pipe) + 4 HMUL2 instead of 11 (8 on the ALU pipe) + 4.
__device__ __forceinline__ uint32_t w4a16_reg3_prmt(uint32_t w) {
  const uint32_t p = __byte_perm(w, 0u, 0x3311);
  return ((p << 4) & 0x80408040u) | ((p << 2) & 0x01800180u);
}
__device__ __forceinline__ void dequant_word_p(uint32_t w, uint32_t f0, uint32_t f1, uint32_t (&a)[4]) {
  a[0] = hmul2_u32(w4a16_reg_bits(w, 0), f0);
  a[1] = hmul2_u32(w4a16_reg_bits(w, 1), f1);
  a[2] = hmul2_u32(w4a16_reg_bits(w, 2), f0);
  a[3] = hmul2_u32(w4a16_reg3_prmt(w), f1);
}
/// DQ = 0: dequant_word (kernels 0-16), 1: dequant_word_p (kernels 17 / 18).
template <int DQ>
__device__ __forceinline__ void dequant_word_t(uint32_t w, uint32_t f0, uint32_t f1, uint32_t (&a)[4]) {
  if constexpr (DQ == 1) dequant_word_p(w, f0, f1, a);
  else dequant_word(w, f0, f1, a);
}

/// Kernel 19 (NOTES.md §18): both rows' factors of one scale pair in ONE register, [2^(s_a-1), 2^(s_b-1)] as bf16x2
/// (s_a = byte B, s_b = byte B + 2 of sc; B = 0 or 1): (sc >> 8B) & 0x00FF00FF, * 128 + 126 * 128 per half (no carry:
/// s <= 128). 2 factor registers per scale word (LOP3 + IMAD, + 1 shift) instead of 4 x (PRMT + IMAD).
template <int B>
__device__ __forceinline__ uint32_t scale_factor_pair(uint32_t sc) {
  return ((sc >> (8 * B)) & 0x00FF00FFu) * 128u + 0x3F003F00u;
}
/// bf16x2 a * (half H of b in both halves): the broadcast is meant to fold into HMUL2's operand selector (.H0_H0 /
/// .H1_H1).
template <int H>
__device__ __forceinline__ uint32_t hmul2_bcast(uint32_t a, uint32_t b) {
  const __nv_bfloat162 bb = *reinterpret_cast<const __nv_bfloat162*>(&b);
  __nv_bfloat162 r = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a), H == 0 ? __low2bfloat162(bb) : __high2bfloat162(bb));
  return *reinterpret_cast<uint32_t*>(&r);
}
/// dequant_word_p with the factor pair fp = scale_factor_pair: registers 0 / 2 (row g) times its low half,
/// 1 / 3 (row g + 8) times its high half. Bit-identical to dequant_word with f0 / f1 = the two halves.
__device__ __forceinline__ void dequant_word_q(uint32_t w, uint32_t fp, uint32_t (&a)[4]) {
  a[0] = hmul2_bcast<0>(w4a16_reg_bits(w, 0), fp);
  a[1] = hmul2_bcast<1>(w4a16_reg_bits(w, 1), fp);
  a[2] = hmul2_bcast<0>(w4a16_reg_bits(w, 2), fp);
  a[3] = hmul2_bcast<1>(w4a16_reg3_prmt(w), fp);
}

/// Epilogue, first half: this warp's m64 fragment rows (outputs n0 = warp16 + gq and n0 + 8) of the
/// BT x 16 accumulator tile `acc` (float, wgmma m64nBTk16 layout: acc[j] holds tokens 8j + 2tq and
/// + 1) written as bf16 into the staging tile st[BT tokens][kEpiLd] (row stride 136 values: 272 B,
/// so the 16-B reads of the second half do not collide on banks). The caller puts a barrier of all
/// consumer threads between the halves.
constexpr int kEpiLd = 136;
template <int BT>
__device__ __forceinline__ void stage_acc_bf16(bf16* st, const float (&acc)[BT / 8][4], int warp16, int gq, int tq) {
  const int n0 = warp16 + gq, n1 = n0 + 8;
#pragma unroll
  for (int j = 0; j < BT / 8; ++j) {
    const int c0 = 8 * j + 2 * tq;
    st[c0 * kEpiLd + n0] = __float2bfloat16_rn(acc[j][0]);
    st[(c0 + 1) * kEpiLd + n0] = __float2bfloat16_rn(acc[j][1]);
    st[c0 * kEpiLd + n1] = __float2bfloat16_rn(acc[j][2]);
    st[(c0 + 1) * kEpiLd + n1] = __float2bfloat16_rn(acc[j][3]);
  }
}

/// Epilogue, second half: `rows` token rows x the CTA's kRowsPerCta outputs from the staging tile to
/// y (row stride N values) at yb, 16-B stores, thread `t` of `nthreads` taking every nthreads-th chunk.
__device__ __forceinline__ void store_staged_rows(const bf16* st, bf16* yb, int N, int rows, int t, int nthreads) {
  for (int c = t; c < rows * 16; c += nthreads) {
    const int r = c >> 4, ch = c & 15;
    *reinterpret_cast<uint4*>(yb + static_cast<size_t>(r) * N + ch * 8) = *reinterpret_cast<const uint4*>(st + r * kEpiLd + ch * 8);
  }
}

}  // namespace
}  // namespace servesim::kernels::moe

// The kernel parts, in their original order. One translation unit on purpose (as mqa.cu): compiled
// as separate .cu files, cicc may choose different address arithmetic (and ptxas different spills)
// for the TMA kernels; included here the PTX is byte-identical to the unsplit file.
#include "moe/w4a16_rega.cuh"       // variants 0-4 (w4a16_kernel), 5 / 6 (w4a16_decode_kernel)
#include "moe/w4a16_streamk.cuh"    // variant 7 (stream-K), g_sk_ctas
#include "moe/w4a16_prefill.cuh"    // variant 8 (prefill kernel)
#include "moe/w4a16_prefill_pw.cuh" // variants 11-16 (variant 8 with another producer placement / 2 k-blocks per round)
#include "moe/w4a16_decode3.cuh"     // kernel 20 (variant 20: kernel 17 reshaped for 3 CTAs per SM), 22 (20 with a 2-CTA K split)

namespace servesim::kernels::moe {

namespace {

// 17 (the default from NOTES.md §18 to §19): kernel 17 (variant 5's decode kernel with the byte-permute dequantisation; 1.05-1.07x
// kernel 5 in the same run) at decode tile widths, variant 15's prefill kernel (variant 8's with the producer in a
// consumer warp, 4 decoding warps and a weight barrier per load slot; NOTES.md §17: 0.81-0.84 of cuBLAS dense at
// m >= 1024) at BT 256 with x_rows, else 0
// 20 (the DEFAULT since NOTES.md §19): 17 with kernel 20 (3 CTAs per SM) at BT 8 on grids of more than 2 CTAs per SM
// and (since §20, w4h) at every BT 16 grid
int g_variant = 20;

/// The one decision of the W4A16 dispatch: the kernel (0..8, 11..16 as w4a16_set_variant numbers them; 17 = the
/// decode kernel with dequant_word_p, 18 = variant 15's prefill kernel with dequant_word_p) that
/// variant v runs at token tile width bt, K and x_rows (and, for variant 20, N and max_tiles); launch_bt launches it and w4a16_kernel_for
/// reports it, so the two cannot drift.
int sm_count() {
  static int n = 0;
  if (n == 0) {
    int dev = 0;
    SS_CUDA(cudaGetDevice(&dev));
    SS_CUDA(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  }
  return n;
}

int choose_kernel(int v, int bt, int K, long long x_rows, int N = 0, int max_tiles = 0) {
  if (v <= 3) return v;
  // 8: the prefill kernel at BT = 256 when the token tensor's rows are known, else as 5. At BT = 128
  // (m = 65..128 per expert) it measured SLOWER than variant 0 (K3 w13 G=8 m=128: 155.6 vs 137.5 us;
  // w4pf call 2 of NOTES.md §13): the 128 x 128 tile gives 2 x m64n128 wgmmas per dequantised k-block
  // and the pipeline fill/epilogue of a short CTA are not hidden; so BT = 128 runs variant 0.
  if (v == 8 && bt == 256 && x_rows > 0) return 8;
  // 11-15 (NOTES.md §15-17): variant 8's kernel with a dedicated producer warp (11, the default until
  // §17), two k-blocks per dequantisation round (13), or both (12), or the producer in a consumer warp (14:
  // 4 decoding warps, 1.02-1.04x 11), or 14 with a separate weight barrier per load slot, the weight copy
  // issued first (15, the DEFAULT since §17; as fast as 14 within noise), or 15 with the weight blocks in
  // their own 7-slot ring loaded by a decoding warp (16, §17: ~10% slower than 15, kept for comparison);
  // like 8 at every other tile width
  if (v >= 11 && v <= 16 && bt == 256 && x_rows > 0) return v;
  // 17 (the DEFAULT since NOTES.md §18) = 15 with kernel 17 (variant 5's decode kernel with the byte-permute
  // dequantisation dequant_word_p: 1.05-1.07x kernel 5 at BT <= 32) in place of 5; 18 = 17 with kernel 18
  // (variant 15's prefill kernel with dequant_word_p: as fast as 15 within noise, kept for comparison) at
  // BT 256 with x_rows; else variant 0 (as 15)
  // 19 = 17 with kernel 19 (kernel 17 with both rows' scale factors in one register, scale_factor_pair +
  // hmul2_bcast; NOTES.md §18) at BT <= 32
  // 20 (the DEFAULT since NOTES.md §19) = 17 with kernel 20 (kernel 17 with the wgmma groups pipelined per k-block:
  // 2 x 16 A registers, 62 registers, 3 CTAs per SM) at BT 8 when the grid (N / 128 x max_tiles CTAs) is more than
  // one wave of 2 CTAs per SM, or when N / max_tiles are not given (0): measured 0.94-0.96x kernel 17's time there,
  // but 1.01-1.03x at a grid of at most 2 CTAs per SM (K3 w2 / DSV4-Flash w2 G = 8: 224 / 256 CTAs on 132 SMs;
  // DSV4-Flash w13 G = 8, also 256 CTAs, falls under the same rule but was not measured). The rule counts the
  // launched grid, idle CTAs included: the whole-layer bench passes w4a16_max_tiles() (an upper bound), the GEMM bench
  // the exact tiles, so the two could choose differently within a few CTAs of 2 per SM (no table point is there).
  // At BT 16 kernel 20 computed WRONG values in w4g call 1 (rel L2 0.1-0.3: ptxas read the accumulators before the
  // last wait_group; fixed in NOTES.md §20 by peeling the last stage). Fixed, it runs 0.87-0.97x kernel 17's time at
  // m 9-16 (w4h call 1: median 0.89; kernel 17 at BT 16 is C7512-serialised), on the <= 2-CTAs-per-SM grids too
  // (K3 w2 / DSV4-Flash w2 G = 8: 0.96 / 0.97), so variant 20 runs it at every BT 16 grid (no grid rule there).
  // At BT 32 it was slower built for 3 CTAs per SM (4 stages, C7512; §19): kernel 17 there. 21 = kernel 20 at every BT 8
  // and BT 16 grid (no grid rule: tests, comparisons) and (since §21, w4i) at BT 32, where kernel 20 is built for 2 CTAs
  // per SM (kD3MinBlocks: 6 stages, 92 registers, no C7512): correct, but 1.013x kernel 17's time at m 17-32 (median;
  // 0.964 / 0.976 on the one-wave K3 / DSV4-Flash w2 G 8 grids, 1.008-1.024 elsewhere), so variant 20 keeps kernel 17 there
  // 22 (NOTES.md §22, w4j) = 20 with kernel 22 (kernel 20 with K split across the 2 CTAs of a cluster, fp32 partials
  // reduced through distributed shared memory) at BT 8 / 16 with K % 256 == 0 and K >= 512 when the launched grid,
  // N / 128 x max_tiles CTAs, is at most 2 CTAs per SM (the one-wave w2 GEMMs at G = 8: 224 / 256 CTAs on 132 SMs),
  // N and max_tiles known; else exactly 20. MEASURED SLOWER (w4j calls 1 / 2, NOTES.md §22): t/t(20) 1.05 (K3 w2 G 8) and
  // 1.12-1.20 (DSV4-Flash w2 G 8) event at m 1-16, so opt-in only (tests, comparisons)
  // 23 = 20 with kernel 23 (kernel 22 built for 4 CTAs per SM: the split grid, 448 / 512 CTAs at K3 / DSV4-Flash w2
  // G = 8, in one wave of 528 slots instead of 396 + a second partial wave) at BT 8 under 22's grid rule; else as 20.
  // ptxas: 48 registers, C7512. Measured (w4j call 2): 1.05 / 1.07 x variant 20's event time at m 1-8 (K3 / DSV4-Flash w2
  // G 8): the one wave recovers most of kernel 22's DSV4-Flash loss but not the rest; opt-in only
  // 25 (NOTES.md §23, w4k) = 20 with the early prologue (EP: the tile's group from one round of loads, the first
  // min(stages, K stages) weight copies issued by the producer before the CTA barrier) on the grids that fit in ONE wave,
  // where every CTA's prologue is exposed (kernel-24 timelines: ~1.7 us from entry to the first bulk copy, ~3 us to the
  // first full stage, of a 14-20 us kernel): kernel 25 (= kernel 17 + EP) at BT 8 on grids of <= 2 CTAs per SM,
  // kernel 26 (= kernel 20 + EP) at BT 8 on grids of 2-3 CTAs per SM and at BT 16 on grids of <= 3 CTAs per SM
  // (N and max_tiles known, K % 256 == 0); else exactly 20. MEASURED SLOWER (w4k call 2, NOTES.md §23): t25/t20 1.03-1.14
  // event, median 1.067, at every point where it runs (K3 w2 / DSV4-Flash w2 / K3 w13 G 8, m 1-16), most likely because the
  // stage-0 token copies now queue behind the whole ring's weight copies; opt-in only (tests, comparisons)
  // 32 / 34 (NOTES.md §25, w4m) = 20 with every kernel-17 / kernel-20 launch in its programmatic-dependent-launch form
  // (launched with cudaLaunchAttributeProgrammaticStreamSerialization): 32 = PD 2 (kernel 32 = 17 + PD 2, kernel 33 =
  // 20 + PD 2: trigger at the start, the routing and the first ring's weight copies before griddepcontrol.wait, the tokens
  // after it; contract: w and the routing not written by a kernel that may still run), 34 = PD 1 (kernel 34 = 17 + PD 1,
  // 35 = 20 + PD 1: trigger + wait before the first global read); the prefill kernel and variant 0 launch as in 20
  if (v == 32 || v == 34) {
    const int k = choose_kernel(20, bt, K, x_rows, N, max_tiles);
    if (k == 17) return v;
    if (k == 20) return v + 1;
    return k;
  }
  if (v == 25) {
    const long long ctas = static_cast<long long>(N / kRowsPerCta) * max_tiles;
    if (N > 0 && max_tiles > 0 && K % 256 == 0) {
      if (bt == 8 && ctas <= 2ll * sm_count()) return 25;
      if ((bt == 8 || bt == 16) && ctas <= 3ll * sm_count()) return 26;
    }
    v = 20;
  }
  // 27 (NOTES.md §24, w4l) = 25 with the tokens-first early prologue (EP 2: the producer warp issues stage 0's token rows,
  // then the ring's weight copies, then the other ring stages' token rows, all before the CTA barrier, so the first full
  // stage does not wait behind the whole ring's weights): kernel 27 (= kernel 17 + EP 2) at BT 8 on grids of <= 2 CTAs
  // per SM, kernel 28 (= kernel 20 + EP 2) at BT 8 on grids of 2-3 CTAs per SM and at BT 16 on grids of <= 3 CTAs per SM
  // (N and max_tiles known, K % 256 == 0); else exactly 20. MEASURED SLOWER (w4l call 1, NOTES.md §24): t27/t20 1.04-1.10
  // event, median 1.07, and t27/t25 0.997: the token order changes nothing; the split kernels 30 / 31 (call 2) put the whole
  // loss on the weight copies issued before the CTA barrier; opt-in only (tests, comparisons)
  if (v == 27) {
    const long long ctas = static_cast<long long>(N / kRowsPerCta) * max_tiles;
    if (N > 0 && max_tiles > 0 && K % 256 == 0) {
      if (bt == 8 && ctas <= 2ll * sm_count()) return 27;
      if ((bt == 8 || bt == 16) && ctas <= 3ll * sm_count()) return 28;
    }
    v = 20;
  }
  // 29 (NOTES.md §24, w4l; diagnosis only) = kernel 29 (kernel 28 writing the kernel-24 timeline) at every BT 8 grid with
  // K % 256 == 0; else as 21
  if (v == 29) {
    if (bt == 8 && K % 256 == 0) return 29;
    v = 21;
  }
  // 30 / 31 (NOTES.md §24, w4l; diagnosis only) = kernel 30 / 31 (kernel 20 traced, with only the one-round lookup of EP /
  // only the tokens-first pre-issue of EP 2) at every BT 8 grid with K % 256 == 0; else as 21. Measured (w4l call 2): t/t24
  // 0.983 (30) and 1.067 (31) at the K3 w2 / DSV4-Flash w2 / K3 w13 G 8 points, m 1-8
  if (v == 30 || v == 31) {
    if (bt == 8 && K % 256 == 0) return v;
    v = 21;
  }
  // 24 (NOTES.md §23, w4k; diagnosis only) = kernel 24 (kernel 20 writing a per-CTA timeline, w4a16_set_trace) at every
  // BT 8 grid with K % 256 == 0; else as 21
  if (v == 24) {
    if (bt == 8 && K % 256 == 0) return 24;
    v = 21;
  }
  if (v == 22 || v == 23) {
    if ((bt == 8 || (v == 22 && bt == 16)) && K % 256 == 0 && K >= 512 && N > 0 && max_tiles > 0 &&
        static_cast<long long>(N / kRowsPerCta) * max_tiles <= 2ll * sm_count())
      return v;
    v = 20;
  }
  if (v == 17 || v == 18 || v == 19 || v == 20 || v == 21) {
    if (bt == 256 && x_rows > 0) return v == 18 ? 18 : 15;
    if ((v == 20 || v == 21) && bt == 16 && K % 256 == 0) return 20;
    if (v == 21 && (bt == 8 || bt == 32) && K % 256 == 0) return 20;
    if (v == 20 && bt == 8 && K % 256 == 0 &&
        (N <= 0 || max_tiles <= 0 || static_cast<long long>(N / kRowsPerCta) * max_tiles > 2ll * sm_count())) return 20;
    if (bt <= 32 && K % 256 == 0) return v == 19 ? 19 : 17;
    return 0;
  }
  if (bt <= 64 && K % 256 == 0) {
    // variant 5 at BT <= 32; at BT = 64 its A fragments spill (ptxas) and variant 0 was faster
    // than 4 there (81.5 vs 89.9 us, K3 w13 G=8 m=64, call 1 of this session), so 0
    if (bt <= 32) {
      if (v == 7) return 7;
      if (v == 5 || v == 8 || v >= 11) return 5;
      if (v == 6) return 6;
    }
    return v >= 5 ? 0 : 4;
  }
  return 0;
}

template <int BT>
void launch_bt(const Params& p, int max_tiles, long long x_rows, cudaStream_t stream) {
  // each kernel only at the tile widths choose_kernel gives it (the instantiations as before)
  switch (choose_kernel(g_variant, BT, p.K, x_rows, p.N, max_tiles)) {
    case 0: launch<BT, 0>(p, max_tiles, stream); return;
    case 1: launch<BT, 1>(p, max_tiles, stream); return;
    case 2: launch<BT, 2>(p, max_tiles, stream); return;
    case 3: launch<BT, 3>(p, max_tiles, stream); return;
    case 4: if constexpr (BT <= 64) { launch<BT, 4, 2>(p, max_tiles, stream); return; } break;
    case 5: if constexpr (BT <= 32) { launch_decode<BT, 2>(p, max_tiles, stream); return; } break;
    case 6: if constexpr (BT <= 32) { launch_decode<BT, 1>(p, max_tiles, stream); return; } break;
    case 7: if constexpr (BT <= 32) { launch_streamk<BT>(p, max_tiles, stream); return; } break;
    case 8: if constexpr (BT == 256) { launch_prefill<BT>(p, max_tiles, x_rows, stream); return; } break;
    case 11: if constexpr (BT == 256) { launch_prefill_pw<BT, 1, false>(p, max_tiles, x_rows, stream); return; } break;
    case 12: if constexpr (BT == 256) { launch_prefill_pw<BT, 1, true>(p, max_tiles, x_rows, stream); return; } break;
    case 13: if constexpr (BT == 256) { launch_prefill_pw<BT, 0, true>(p, max_tiles, x_rows, stream); return; } break;
    case 14: if constexpr (BT == 256) { launch_prefill_pw<BT, 2, false>(p, max_tiles, x_rows, stream); return; } break;
    case 15: if constexpr (BT == 256) { launch_prefill_pw<BT, 3, false>(p, max_tiles, x_rows, stream); return; } break;
    case 16: if constexpr (BT == 256) { launch_prefill_pw<BT, 4, false>(p, max_tiles, x_rows, stream); return; } break;
    case 17: if constexpr (BT <= 32) { launch_decode<BT, 2, 1>(p, max_tiles, stream); return; } break;
    case 18: if constexpr (BT == 256) { launch_prefill_pw<BT, 3, false, 1>(p, max_tiles, x_rows, stream); return; } break;
    case 19: if constexpr (BT <= 32) { launch_decode<BT, 2, 2>(p, max_tiles, stream); return; } break;
    case 20: if constexpr (BT == 8 || BT == 16 || BT == 32) { launch_decode3<BT>(p, max_tiles, stream); return; } break;
    case 22: if constexpr (BT == 8 || BT == 16) { launch_decode3<BT, 2>(p, max_tiles, stream); return; } break;
    case 23: if constexpr (BT == 8) { launch_decode3<BT, 2, 4>(p, max_tiles, stream); return; } break;
    case 24: if constexpr (BT == 8) { launch_decode3<BT, 1, kD3MinBlocks<BT>, true>(p, max_tiles, stream); return; } break;
    case 25: if constexpr (BT == 8) { launch_decode<BT, 2, 1, 1>(p, max_tiles, stream); return; } break;
    case 26: if constexpr (BT == 8 || BT == 16) { launch_decode3<BT, 1, kD3MinBlocks<BT>, false, 1>(p, max_tiles, stream); return; } break;
    case 27: if constexpr (BT == 8) { launch_decode<BT, 2, 1, 2>(p, max_tiles, stream); return; } break;
    case 28: if constexpr (BT == 8 || BT == 16) { launch_decode3<BT, 1, kD3MinBlocks<BT>, false, 2>(p, max_tiles, stream); return; } break;
    case 29: if constexpr (BT == 8) { launch_decode3<BT, 1, kD3MinBlocks<BT>, true, 2>(p, max_tiles, stream); return; } break;
    case 30: if constexpr (BT == 8) { launch_decode3<BT, 1, kD3MinBlocks<BT>, true, 3>(p, max_tiles, stream); return; } break;
    case 31: if constexpr (BT == 8) { launch_decode3<BT, 1, kD3MinBlocks<BT>, true, 4>(p, max_tiles, stream); return; } break;
    case 32: if constexpr (BT == 8 || BT == 32) { launch_decode<BT, 2, 1, 0, 2>(p, max_tiles, stream); return; } break;
    case 33: if constexpr (BT == 8 || BT == 16) { launch_decode3<BT, 1, kD3MinBlocks<BT>, false, 0, 2>(p, max_tiles, stream); return; } break;
    case 34: if constexpr (BT == 8 || BT == 32) { launch_decode<BT, 2, 1, 0, 1>(p, max_tiles, stream); return; } break;
    case 35: if constexpr (BT == 8 || BT == 16) { launch_decode3<BT, 1, kD3MinBlocks<BT>, false, 0, 1>(p, max_tiles, stream); return; } break;
    default: break;
  }
  throw std::logic_error("w4a16: choose_kernel gave a kernel not built for this tile width");
}

}  // namespace

void w4a16_set_variant(int v) {
  if (v < 0 || v > 34 || v == 9 || v == 10 || v == 26 || v == 28 || v == 33)  // 9 / 10 removed (73471e7); 26 / 28 / 33 are kernels only
    throw std::invalid_argument("w4a16_set_variant: 0..8, 11..25, 27, 29, 30, 31, 32 or 34");
  g_variant = v;
}
void w4a16_set_trace(unsigned long long* buf) { SS_CUDA(cudaMemcpyToSymbol(g_d3_trace, &buf, sizeof(buf))); }
void w4a16_set_streamk_ctas(int ctas) { g_sk_ctas = ctas > 0 ? ctas : 0; }
int w4a16_variant() { return g_variant; }

int w4a16_kernel_for(int bt, int K, long long x_rows, int N, int max_tiles) {
  return choose_kernel(g_variant, bt, K, x_rows, N, max_tiles);
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

// ---- test helper: both dequantisations on the device (NOTES.md §18) ----
namespace {
__global__ void w4a16_dequant_pair_kernel(const uint32_t* words, const uint32_t* scales, int n, uint32_t* out_old,
                                          uint32_t* out_new, uint32_t* out_new2) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const uint32_t w = words[i], sc = scales[i];
  // the kernels' factor pairing: registers 0 / 2 use byte 0 (row g), 1 / 3 byte 2 (row g + 8); also bytes 1 / 3
  const uint32_t f0 = (i & 1) ? scale_factor<1>(sc) : scale_factor<0>(sc);
  const uint32_t f1 = (i & 1) ? scale_factor<3>(sc) : scale_factor<2>(sc);
  uint32_t a[4], b[4];
  dequant_word_t<0>(w, f0, f1, a);
  dequant_word_t<1>(w, f0, f1, b);
  uint32_t c[4];
  dequant_word_q(w, (i & 1) ? scale_factor_pair<1>(sc) : scale_factor_pair<0>(sc), c);
  for (int j = 0; j < 4; ++j) {
    out_old[4 * i + j] = a[j];
    out_new[4 * i + j] = b[j];
    if (out_new2) out_new2[4 * i + j] = c[j];
  }
}
}  // namespace

void w4a16_dequant_pair(const uint32_t* words, const uint32_t* scales, int n, uint32_t* out_old, uint32_t* out_new,
                        cudaStream_t stream, uint32_t* out_new2) {
  if (n <= 0) return;
  w4a16_dequant_pair_kernel<<<(n + 255) / 256, 256, 0, stream>>>(words, scales, n, out_old, out_new, out_new2);
  SS_LAUNCH_CHECK();
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
