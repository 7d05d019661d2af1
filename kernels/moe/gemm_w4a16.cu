// W4A16 grouped expert GEMM: MXFP4 (E2M1 codes, E8M0 scale per 32 K) weights dequantised to
// bf16 in registers and used as wgmma's A operand; the expert's tokens (bf16, K-major, 128-byte
// swizzled shared memory) are wgmma's B operand. See NOTES.md §3 for the design and layout.
#include "moe/moe.cuh"
#include "moe/device_util.cuh"
#include "moe/wgmma_rs.cuh"
#include "common/cuda_check.cuh"

#include <cmath>
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

/// bf16x2 factor 2^(s-1) in both halves: multiplies the raw (2^-126-scaled) E2M1 bit pattern to
/// the exact value code * 2^(s-127). Requires s <= 128 (checked at prepack).
__device__ __forceinline__ uint32_t scale_factor_fast(uint32_t s) {
  const uint32_t b = (s + 126u) << 7;
  return b | (b << 16);
}
/// bf16x2 factor 2^(s-127) for the table path (s >= 1).
__device__ __forceinline__ uint32_t scale_factor_lut(uint32_t s) {
  const uint32_t b = s << 7;
  return b | (b << 16);
}
__device__ __forceinline__ uint32_t hmul2_u32(uint32_t a, uint32_t b) {
  __nv_bfloat162 r = __hmul2(*reinterpret_cast<__nv_bfloat162*>(&a), *reinterpret_cast<__nv_bfloat162*>(&b));
  return *reinterpret_cast<uint32_t*>(&r);
}

/// One 32-bit word of 8 E2M1 codes -> the 4 A-fragment registers of one k16 step. Register j
/// holds {low: nibble 3-j, high: nibble 7-j}; j even uses row g (factor f0), j odd row g+8 (f1).
template <bool LUT>
__device__ __forceinline__ void dequant_word(uint32_t q, uint32_t f0, uint32_t f1, uint32_t (&a)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t v;
    if constexpr (!LUT) {
      const uint32_t qj = q << (4 * j);
      v = (qj & 0x80008000u) | ((qj & 0x70007000u) >> 6);  // sign | E2M1 bits at bf16 [8:6]
    } else {
      // E2M1 magnitudes as bf16 {0,.5,1,1.5,2,3,4,6}: low bytes and high bytes, by byte_perm.
      const uint32_t lo_idx = (q >> (4 * (3 - j))) & 7u, hi_idx = (q >> (4 * (7 - j))) & 7u;
      const uint32_t sel = lo_idx | (hi_idx << 4);
      const uint32_t lob = __byte_perm(0xC0800000u, 0xC0804000u, sel);  // low bytes 00,00,80,C0,00,40,80,C0
      const uint32_t hib = __byte_perm(0x3F3F3F00u, 0x40404040u, sel);  // high bytes 00,3F,3F,3F,40,40,40,40
      v = __byte_perm(lob, hib, 0x5140);
      v |= ((q >> (4 * (3 - j) + 3)) & 1u) << 15;
      v |= ((q >> (4 * (7 - j) + 3)) & 1u) << 31;
    }
    a[j] = hmul2_u32(v, (j & 1) ? f1 : f0);
  }
}

/// V selects the MMA issue pattern (kept to diagnose and compare; see NOTES.md):
///   0: one m64nBTk16 wgmma per k16 step, next stage's dequant overlaps it (wait_group 1)
///   1: as 0 but wait_group 0 after each stage (no overlap)
///   2: BT/8 m64n8k16 wgmmas per k16 step (each on one 8-token swizzle atom), wait_group 1
///   3: as 2 with wait_group 0
///   4: as 0 with two 64-wide k-blocks per stage (KS = 2) at BT <= 64 (halves per-stage overhead)
template <int BT, bool LUT, int V, int KS>
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

  auto body = [&](int kb, uint32_t(&af)[KS][4][4], auto last) {
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
      uint32_t f00, f01, f10, f11;  // f<group><row half>
      if constexpr (!LUT) {
        f00 = scale_factor_fast(sc & 0xFF); f01 = scale_factor_fast((sc >> 16) & 0xFF);
        f10 = scale_factor_fast((sc >> 8) & 0xFF); f11 = scale_factor_fast(sc >> 24);
      } else {
        f00 = scale_factor_lut(sc & 0xFF); f01 = scale_factor_lut((sc >> 16) & 0xFF);
        f10 = scale_factor_lut((sc >> 8) & 0xFF); f11 = scale_factor_lut(sc >> 24);
      }
      dequant_word<LUT>(q.x, f00, f01, af[ks][0]);
      dequant_word<LUT>(q.y, f00, f01, af[ks][1]);
      dequant_word<LUT>(q.z, f10, f11, af[ks][2]);
      dequant_word<LUT>(q.w, f10, f11, af[ks][3]);
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

template <int BT, bool LUT, int V, int KS = 1>
void launch(const Params& p, int max_tiles, cudaStream_t stream) {
  static bool configured = false;
  if (!configured) {
    SS_CUDA(cudaFuncSetAttribute(w4a16_kernel<BT, LUT, V, KS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 Cfg<BT, KS>::kSmem));
    configured = true;
  }
  dim3 grid(p.N / kRowsPerCta, max_tiles);
  w4a16_kernel<BT, LUT, V, KS><<<grid, kThreads, Cfg<BT, KS>::kSmem, stream>>>(p);
  SS_LAUNCH_CHECK();
}

bool g_use_lut = false;
int g_variant = 0;

template <int BT>
void launch_bt(const Params& p, int max_tiles, cudaStream_t stream) {
  if (g_variant == 4) {
    if constexpr (BT <= 64) {
      if (p.K % 256 == 0) {
        if (g_use_lut) launch<BT, true, 4, 2>(p, max_tiles, stream);
        else launch<BT, false, 4, 2>(p, max_tiles, stream);
        return;
      }
    }
    if (g_use_lut) launch<BT, true, 0>(p, max_tiles, stream);
    else launch<BT, false, 0>(p, max_tiles, stream);
    return;
  }
  switch (g_variant * 2 + (g_use_lut ? 1 : 0)) {
    case 0: launch<BT, false, 0>(p, max_tiles, stream); return;
    case 1: launch<BT, true, 0>(p, max_tiles, stream); return;
    case 2: launch<BT, false, 1>(p, max_tiles, stream); return;
    case 3: launch<BT, true, 1>(p, max_tiles, stream); return;
    case 4: launch<BT, false, 2>(p, max_tiles, stream); return;
    case 5: launch<BT, true, 2>(p, max_tiles, stream); return;
    case 6: launch<BT, false, 3>(p, max_tiles, stream); return;
    default: launch<BT, true, 3>(p, max_tiles, stream); return;
  }
}

}  // namespace

/// Selects the table-based E2M1 decode (true) or the bit-placement decode (false, default).
void w4a16_set_lut_dequant(bool lut) { g_use_lut = lut; }
void w4a16_set_variant(int v) {
  if (v < 0 || v > 4) throw std::invalid_argument("w4a16_set_variant: 0..4");
  g_variant = v;
}
int w4a16_variant() { return g_variant; }

int w4a16_pick_bt(double avg) {
  for (int bt : kW4A16TileWidths)
    if (avg <= bt) return bt;
  return 256;
}

void w4a16_grouped_gemm(const bf16* x, const uint8_t* w_pool, const int* expert_ids, const int* row_offsets,
                        const int* tile_offsets, int G, int N, int K, int bt, int max_tiles, bf16* y,
                        cudaStream_t stream) {
  if (N % kRowsPerCta != 0 || K % (2 * kKBlock) != 0 || N <= 0 || K <= 0 || G <= 0)
    throw std::invalid_argument("w4a16_grouped_gemm: need N % 128 == 0, K % 128 == 0, G > 0");
  if (max_tiles <= 0) return;
  if (max_tiles > 65535) throw std::invalid_argument("w4a16_grouped_gemm: more than 65535 token tiles");
  const Params p{x, w_pool, expert_ids, row_offsets, tile_offsets, y, G, N, K, w4a16_matrix_bytes(N, K)};
#define SS_W4_CASE(B)                  \
  case B:                              \
    launch_bt<B>(p, max_tiles, stream); \
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
  int nibble;         // nibble index within the word
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
  sl.nibble = hi ? 7 - j : 3 - j;
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
      word |= static_cast<uint32_t>(codes[static_cast<size_t>(n) * K + k] & 0xF) << (4 * sl.nibble);
      std::memcpy(out + sl.word_byte, &word, 4);
      out[sl.scale_byte] = scales[static_cast<size_t>(n) * (K / 32) + k / 32];
    }
}

double w4a16_packed_value(const uint8_t* packed, int /*N*/, int K, int n, int k) {
  const Slot sl = slot_of(K, n, k);
  uint32_t word;
  std::memcpy(&word, packed + sl.word_byte, 4);
  const uint8_t code = (word >> (4 * sl.nibble)) & 0xF;
  return e2m1_value(code) * e8m0_value(packed[sl.scale_byte]);
}

}  // namespace servesim::kernels::moe
