// servesim attention kernels: flash-decoding MQA core for K3 MLA decode and the V4 attention
// variants. See mqa.cuh. Block = (work item, head group of 16*MT heads), 2*MT warps: warp w owns
// heads 16*(w/2).. and, in the score step, keys half (w%2) of the tile, in the PV step output
// columns 256*(w%2)..+256 (fp32 accumulators, 128 registers).
#include "attention/mqa.cuh"
#include "attention/dsv4.cuh"
#include "attention/hopper.cuh"
#include "attention/tmap.cuh"
#include "attention/wg_store.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <type_traits>

namespace servesim::attn {

namespace {
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -INFINITY;

// NS: pipeline stages. BF16 rows: NS bf16 tiles. FP8 rows: NS raw 584-B tiles + one BF16 tile
// (dequantised in place before each score step).
template <int DK, int MT, int TN, int NS, bool FP8>
struct MqaCfg {
  static constexpr int NW = 2 * MT, NT = NW * 32, HB = 16 * MT;
  static constexpr int LD = DK + 8;   // bf16 per smem row (16-B skew: conflict-free ldmatrix)
  static constexpr int SLD = TN + 4;  // fp32 per score row
  static constexpr size_t q_bytes = static_cast<size_t>(HB) * LD * 2;
  static constexpr size_t kv_bytes = static_cast<size_t>(FP8 ? 1 : NS) * TN * LD * 2;
  static constexpr size_t s_bytes = static_cast<size_t>(HB) * SLD * 4;
  static constexpr size_t raw_bytes = FP8 ? static_cast<size_t>(NS) * TN * kV4RowBytes : 0;
  static constexpr size_t flag_bytes = static_cast<size_t>(NS) * TN * 4;
  static constexpr size_t smem = q_bytes + kv_bytes + s_bytes + raw_bytes + flag_bytes;
  static_assert(smem <= 232448, "shared memory per block");
};

template <int DK, int DV, int MT, int TN, int NS, bool FP8>
__global__ void __launch_bounds__(64 * MT, 1) mqa_fwd_kernel(MqaArgs a, const int4* __restrict__ work) {
  using C = MqaCfg<DK, MT, TN, NS, FP8>;
  constexpr int NT = C::NT, HB = C::HB, LD = C::LD, SLD = C::SLD;
  static_assert(DV == 512, "output width 512");
  static_assert(TN % 32 == 0, "tile of 32 or 64 rows");
  extern __shared__ __align__(16) uint8_t smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem);
  bf16* Ks = reinterpret_cast<bf16*>(smem + C::q_bytes);
  float* Ss = reinterpret_cast<float*>(smem + C::q_bytes + C::kv_bytes);
  uint8_t* raw = smem + C::q_bytes + C::kv_bytes + C::s_bytes;
  int* flag = reinterpret_cast<int*>(smem + C::q_bytes + C::kv_bytes + C::s_bytes + C::raw_bytes);

  const int4 wk = work[blockIdx.x];
  const int qi = wk.x, rb = wk.y, re = wk.z, slot = wk.w;
  const int head0 = blockIdx.y * HB;
  const int H = a.H;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int mi = warp >> 1, half = warp & 1;

  // Q tile -> smem
  {
    constexpr int CH = DK / 8;
    const bf16* qsrc = a.q + (static_cast<size_t>(qi) * H + head0) * DK;
    for (int u = tid; u < HB * CH; u += NT) {
      const int r = u / CH, ch = u % CH;
      const bool ok = head0 + r < H;  // padded heads of the last group read zeros
      cp_async16(Qs + r * LD + ch * 8, qsrc + static_cast<size_t>(ok ? r : 0) * DK + ch * 8, ok);
    }
    cp_async_commit();
  }
  auto issue_tile = [&](int it, int st) {
    const int r0 = rb + it * TN;
    if constexpr (!FP8) {
      constexpr int CH = DK / 8;
      bf16* dst = Ks + static_cast<size_t>(st) * TN * LD;
      for (int u = tid; u < TN * CH; u += NT) {
        const int row = u / CH, ch = u % CH;
        const int tok = r0 + row;
        const bool ok = tok < re;
        const int tk = ok ? tok : rb;
        const int page = a.block_table[static_cast<size_t>(qi) * a.max_pages + tk / a.page_size];
        const bf16* src = a.cache + (static_cast<size_t>(page) * a.page_size + tk % a.page_size) * DK + ch * 8;
        cp_async16(dst + row * LD + ch * 8, src, ok);
      }
    } else {
      constexpr int CH = kV4RowBytes / 8;  // 73
      uint8_t* dst = raw + static_cast<size_t>(st) * TN * kV4RowBytes;
      const int* idx = a.indices + static_cast<size_t>(qi) * a.idx_ld;
      for (int u = tid; u < TN * CH; u += NT) {
        const int row = u / CH, ch = u % CH;
        const int r = r0 + row;
        const int id = r < re ? __ldg(idx + r) : -1;
        const bool ok = id >= 0;
        cp_async8(dst + row * kV4RowBytes + ch * 8, a.pool + static_cast<size_t>(ok ? id : 0) * kV4RowBytes + ch * 8, ok);
        if (ch == 0) flag[st * TN + row] = ok;
      }
    }
  };

  const int nrows = re - rb;
  const int ntiles = (nrows + TN - 1) / TN;
#pragma unroll
  for (int p = 0; p < NS - 1; ++p) {
    if (p < ntiles) issue_tile(p, p);
    cp_async_commit();
  }

  float O[32][4];
#pragma unroll
  for (int j = 0; j < 32; ++j) O[j][0] = O[j][1] = O[j][2] = O[j][3] = 0.f;
  float mA = kNegInf, mB = kNegInf, lA = 0.f, lB = 0.f;
  const float sl2 = a.sm_scale * kLog2e;
  const int lrow = (lane & 7) + ((lane >> 4) << 3);
  const int lcol = ((lane >> 3) & 1) << 3;
  const int trow = (lane & 7) + (((lane >> 3) & 1) << 3);
  const int tcol = (lane >> 4) << 3;
  const int rA = mi * 16 + g, rB = rA + 8;

  for (int it = 0; it < ntiles; ++it) {
    const int st = it % NS;
    if (it + NS - 1 < ntiles) issue_tile(it + NS - 1, (it + NS - 1) % NS);
    cp_async_commit();
    cp_async_wait<NS - 1>();
    __syncthreads();
    bf16* Kt = Ks + (FP8 ? 0 : static_cast<size_t>(st) * TN * LD);
    if constexpr (FP8) {
      const uint8_t* rs = raw + static_cast<size_t>(st) * TN * kV4RowBytes;
      for (int u = tid; u < TN * 64; u += NT) {
        const int row = u >> 6, part = u & 63;
        const uint8_t* rr = rs + row * kV4RowBytes;
        bf16* dst = Kt + row * LD;
        uint4 o;
        if (!flag[st * TN + row]) {
          o = make_uint4(0, 0, 0, 0);
          *reinterpret_cast<uint4*>(dst + part * 8) = o;
        } else if (part < 56) {
          const uint2 v = *reinterpret_cast<const uint2*>(rr + part * 8);
          const float sc = ue8m0_to_float(rr[kV4Nope + 2 * kV4Rope + (part >> 3)]);
          const float2 f0 = e4m3x2_to_float2(static_cast<uint16_t>(v.x & 0xffff));
          const float2 f1 = e4m3x2_to_float2(static_cast<uint16_t>(v.x >> 16));
          const float2 f2 = e4m3x2_to_float2(static_cast<uint16_t>(v.y & 0xffff));
          const float2 f3 = e4m3x2_to_float2(static_cast<uint16_t>(v.y >> 16));
          o.x = pack_bf16(f0.x * sc, f0.y * sc);
          o.y = pack_bf16(f1.x * sc, f1.y * sc);
          o.z = pack_bf16(f2.x * sc, f2.y * sc);
          o.w = pack_bf16(f3.x * sc, f3.y * sc);
          *reinterpret_cast<uint4*>(dst + part * 8) = o;
        } else {
          const int p = part - 56;
          const uint2 v0 = *reinterpret_cast<const uint2*>(rr + kV4Nope + p * 16);
          const uint2 v1 = *reinterpret_cast<const uint2*>(rr + kV4Nope + p * 16 + 8);
          o = make_uint4(v0.x, v0.y, v1.x, v1.y);
          *reinterpret_cast<uint4*>(dst + kV4Nope + p * 8) = o;
        }
      }
      __syncthreads();
    }
    // ---- S = Q K^T for rows mi*16.., keys half*(TN/2)..
    constexpr int NPW = TN / 16;  // n-tiles of 8 keys per warp
    float sc[NPW][4];
#pragma unroll
    for (int j = 0; j < NPW; ++j) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.f;
#pragma unroll 4
    for (int ks = 0; ks < DK / 16; ++ks) {
      uint32_t af[4];
      ldsm_x4(af, Qs + (mi * 16 + (lane & 15)) * LD + ks * 16 + ((lane >> 4) << 3));
#pragma unroll
      for (int np = 0; np < NPW / 2; ++np) {
        uint32_t b[4];
        ldsm_x4(b, Kt + (half * (TN / 2) + np * 16 + lrow) * LD + ks * 16 + lcol);
        mma_bf16(sc[2 * np], af, b[0], b[1]);
        mma_bf16(sc[2 * np + 1], af, b[2], b[3]);
      }
    }
    const int r0 = rb + it * TN;
#pragma unroll
    for (int j = 0; j < NPW; ++j) {
      const int col = half * (TN / 2) + j * 8 + 2 * t;
      bool v0, v1;
      if constexpr (FP8) {
        v0 = flag[st * TN + col] != 0;
        v1 = flag[st * TN + col + 1] != 0;
      } else {
        v0 = r0 + col < re;
        v1 = r0 + col + 1 < re;
      }
      *reinterpret_cast<float2*>(Ss + rA * SLD + col) =
          make_float2(v0 ? sc[j][0] * sl2 : kNegInf, v1 ? sc[j][1] * sl2 : kNegInf);
      *reinterpret_cast<float2*>(Ss + rB * SLD + col) =
          make_float2(v0 ? sc[j][2] * sl2 : kNegInf, v1 ? sc[j][3] * sl2 : kNegInf);
    }
    __syncthreads();
    // ---- online softmax over the TN columns of rows rA, rB (both warps of the pair agree)
    constexpr int KK = TN / 16;
    float pA[KK][4], pB[KK][4];
    float mxA = kNegInf, mxB = kNegInf;
#pragma unroll
    for (int kk = 0; kk < KK; ++kk) {
      const float2 a0 = *reinterpret_cast<const float2*>(Ss + rA * SLD + kk * 16 + 2 * t);
      const float2 a1 = *reinterpret_cast<const float2*>(Ss + rA * SLD + kk * 16 + 8 + 2 * t);
      const float2 b0 = *reinterpret_cast<const float2*>(Ss + rB * SLD + kk * 16 + 2 * t);
      const float2 b1 = *reinterpret_cast<const float2*>(Ss + rB * SLD + kk * 16 + 8 + 2 * t);
      pA[kk][0] = a0.x; pA[kk][1] = a0.y; pA[kk][2] = a1.x; pA[kk][3] = a1.y;
      pB[kk][0] = b0.x; pB[kk][1] = b0.y; pB[kk][2] = b1.x; pB[kk][3] = b1.y;
      mxA = fmaxf(mxA, fmaxf(fmaxf(a0.x, a0.y), fmaxf(a1.x, a1.y)));
      mxB = fmaxf(mxB, fmaxf(fmaxf(b0.x, b0.y), fmaxf(b1.x, b1.y)));
    }
    mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
    mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
    mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
    mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
    const float mnA = fmaxf(mA, mxA), mnB = fmaxf(mB, mxB);
    const float alA = (mnA == kNegInf) ? 1.f : fast_exp2(mA - mnA);
    const float alB = (mnB == kNegInf) ? 1.f : fast_exp2(mB - mnB);
    const float bA = (mnA == kNegInf) ? 0.f : mnA, bB = (mnB == kNegInf) ? 0.f : mnB;
    float sumA = 0.f, sumB = 0.f;
    uint32_t pa[KK][4];
#pragma unroll
    for (int kk = 0; kk < KK; ++kk) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        pA[kk][e] = fast_exp2(pA[kk][e] - bA);
        pB[kk][e] = fast_exp2(pB[kk][e] - bB);
        sumA += pA[kk][e];
        sumB += pB[kk][e];
      }
      pa[kk][0] = pack_bf16(pA[kk][0], pA[kk][1]);
      pa[kk][1] = pack_bf16(pB[kk][0], pB[kk][1]);
      pa[kk][2] = pack_bf16(pA[kk][2], pA[kk][3]);
      pa[kk][3] = pack_bf16(pB[kk][2], pB[kk][3]);
    }
    lA = lA * alA + sumA;
    lB = lB * alB + sumB;
    mA = mnA;
    mB = mnB;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      O[j][0] *= alA; O[j][1] *= alA; O[j][2] *= alB; O[j][3] *= alB;
    }
    // ---- O += P V, V = first 512 columns of the row tile, this warp's 256 columns
#pragma unroll
    for (int kk = 0; kk < KK; ++kk) {
#pragma unroll
      for (int np = 0; np < 16; ++np) {
        uint32_t b[4];
        ldsm_x4_t(b, Kt + (kk * 16 + trow) * LD + half * 256 + np * 16 + tcol);
        mma_bf16(O[2 * np], pa[kk], b[0], b[1]);
        mma_bf16(O[2 * np + 1], pa[kk], b[2], b[3]);
      }
    }
    __syncthreads();
  }
  cp_async_wait<0>();

  lA += __shfl_xor_sync(0xffffffffu, lA, 1);
  lA += __shfl_xor_sync(0xffffffffu, lA, 2);
  lB += __shfl_xor_sync(0xffffffffu, lB, 1);
  lB += __shfl_xor_sync(0xffffffffu, lB, 2);
  const int hA = head0 + rA, hB = head0 + rB;
  const bool okA = hA < H, okB = hB < H;
  if (slot < 0) {
    const float sA = (a.sink && okA) ? a.sink[hA] * kLog2e : kNegInf;
    const float sB = (a.sink && okB) ? a.sink[hB] * kLog2e : kNegInf;
    const float MA = fmaxf(mA, sA), MB = fmaxf(mB, sB);
    const float wA = (mA == kNegInf) ? 0.f : exp2f(mA - MA), wB = (mB == kNegInf) ? 0.f : exp2f(mB - MB);
    const float dA = lA * wA + (sA == kNegInf ? 0.f : exp2f(sA - MA));
    const float dB = lB * wB + (sB == kNegInf ? 0.f : exp2f(sB - MB));
    const float fA = dA > 0.f ? wA / dA : 0.f, fB = dB > 0.f ? wB / dB : 0.f;
    bf16* oA = a.out + (static_cast<size_t>(qi) * H + hA) * DV + half * 256;
    bf16* oB = a.out + (static_cast<size_t>(qi) * H + hB) * DV + half * 256;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      if (okA) *reinterpret_cast<uint32_t*>(oA + 8 * j + 2 * t) = pack_bf16(O[j][0] * fA, O[j][1] * fA);
      if (okB) *reinterpret_cast<uint32_t*>(oB + 8 * j + 2 * t) = pack_bf16(O[j][2] * fB, O[j][3] * fB);
    }
    if (a.lse && half == 0 && t == 0) {
      if (okA) a.lse[static_cast<size_t>(qi) * H + hA] = dA > 0.f ? (MA + log2f(dA)) / kLog2e : kNegInf;
      if (okB) a.lse[static_cast<size_t>(qi) * H + hB] = dB > 0.f ? (MB + log2f(dB)) / kLog2e : kNegInf;
    }
  } else {
    const float fA = lA > 0.f ? 1.f / lA : 0.f, fB = lB > 0.f ? 1.f / lB : 0.f;
    float* oA = a.o_part + (static_cast<size_t>(slot) * H + hA) * DV + half * 256;
    float* oB = a.o_part + (static_cast<size_t>(slot) * H + hB) * DV + half * 256;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      if (okA) *reinterpret_cast<float2*>(oA + 8 * j + 2 * t) = make_float2(O[j][0] * fA, O[j][1] * fA);
      if (okB) *reinterpret_cast<float2*>(oB + 8 * j + 2 * t) = make_float2(O[j][2] * fB, O[j][3] * fB);
    }
    if (half == 0 && t == 0) {
      if (okA) a.lse_part[static_cast<size_t>(slot) * H + hA] = lA > 0.f ? mA + log2f(lA) : kNegInf;
      if (okB) a.lse_part[static_cast<size_t>(slot) * H + hB] = lB > 0.f ? mB + log2f(lB) : kNegInf;
    }
  }
}

// Merges the split partials of each (query, head); queries without splits return at once.
__global__ void __launch_bounds__(128) mqa_combine_kernel(MqaArgs a, const int* __restrict__ q_slot_begin) {
  const int qi = blockIdx.x, h = blockIdx.y, H = a.H;
  const int s0 = q_slot_begin[qi], s1 = q_slot_begin[qi + 1];
  if (s0 == s1) return;
  const float sk = a.sink ? a.sink[h] * kLog2e : kNegInf;
  float M = sk;
  for (int s = s0; s < s1; ++s) M = fmaxf(M, a.lse_part[static_cast<size_t>(s) * H + h]);
  float den = 0.f;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  const int c = threadIdx.x * 4;
  if (M != kNegInf) {
    den = sk == kNegInf ? 0.f : exp2f(sk - M);
    for (int s = s0; s < s1; ++s) {
      const float l = a.lse_part[static_cast<size_t>(s) * H + h];
      if (l == kNegInf) continue;
      const float w = exp2f(l - M);
      den += w;
      const float4 o = *reinterpret_cast<const float4*>(a.o_part + (static_cast<size_t>(s) * H + h) * 512 + c);
      acc[0] += w * o.x; acc[1] += w * o.y; acc[2] += w * o.z; acc[3] += w * o.w;
    }
  }
  const float f = den > 0.f ? 1.f / den : 0.f;
  bf16* o = a.out + (static_cast<size_t>(qi) * H + h) * 512 + c;
  uint2 u;
  u.x = pack_bf16(acc[0] * f, acc[1] * f);
  u.y = pack_bf16(acc[2] * f, acc[3] * f);
  *reinterpret_cast<uint2*>(o) = u;
  if (a.lse && threadIdx.x == 0) a.lse[static_cast<size_t>(qi) * H + h] = den > 0.f ? (M + log2f(den)) / kLog2e : kNegInf;
}

template <int DK, int MT, int TN, int NS, bool FP8>
void launch_mqa(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s) {
  using C = MqaCfg<DK, MT, TN, NS, FP8>;
  if (a.H <= 0) throw std::invalid_argument("mqa: head count must be positive");
  if (!a.q || !a.out) throw std::invalid_argument("mqa: q and out are required");
  if (plan.n_slots > 0 && (!a.o_part || !a.lse_part)) throw std::invalid_argument("mqa: split plan needs o_part/lse_part");
  if (plan.nq != a.nq) throw std::invalid_argument("mqa: plan built for another query count");
  auto kern = mqa_fwd_kernel<DK, 512, MT, TN, NS, FP8>;
  static bool attr = false;
  if (!attr) {
    SS_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::smem)));
    attr = true;
  }
  const int groups = (a.H + C::HB - 1) / C::HB;
  if (plan.n_work > 0) {
    kern<<<dim3(plan.n_work, groups), C::NT, C::smem, s>>>(a, plan.work.p);
    SS_LAUNCH_CHECK();
  }
  if (plan.n_slots > 0) {
    mqa_combine_kernel<<<dim3(a.nq, a.H), 128, 0, s>>>(a, plan.q_slot_begin.p);
    SS_LAUNCH_CHECK();
  }
}

// ---------------------------------------------------------------------------------------------
// MLA decode on Hopper (variant 0). Block = (64-head group, work item), 256 threads = two
// warpgroups. Shared memory (1024-B aligned, all operand tiles in the 128-B swizzled layout of
// hopper.cuh): Q [64 x 576] (72 KB, loaded once), two 64-token KV stages (72 KB each: one page,
// 9 TMA boxes of 64 x 64), P [64 x 64] bf16 (8 KB), per-row scale / final m, l.
// Per 64-token tile j: warpgroup 0 computes S = Q K^T (36 x wgmma m64n64k16), masks, runs the
// online softmax, writes P and the rescale factors; then both warpgroups rescale and accumulate
// O[:, 256*wg .. +256] += P V (4 x wgmma m64n256k16, V = the first 512 columns of the same tile,
// read N-major from the same smem). After both are done, thread 0 refills the stage with tile j+2.
// ---------------------------------------------------------------------------------------------
namespace wgk {
constexpr int kTile = 64 * 576 * 2;  // 73728 B: one 64-token page of the latent cache
constexpr int kOffKV = kTile;        // Q occupies [0, kTile)
constexpr int kOffP = 3 * kTile;
constexpr int kOffF = kOffP + 64 * 64 * 2;  // alpha[64], m[64], l[64]
constexpr int kOffBar = kOffF + 1024;
constexpr int kSmem = kOffBar + 64 + 1024;  // + slack for 1024-B alignment
static_assert(kSmem <= 232448, "shared memory per block");
}  // namespace wgk

__global__ void __launch_bounds__(256, 1)
    mla_decode_wgmma_kernel(const __grid_constant__ CUtensorMap tmap, MqaArgs a, const int4* __restrict__ work) {
  using namespace sm90;
  using namespace wgk;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  const uint32_t sb = saddr(smem);
  uint8_t* sKV = smem + kOffKV;
  uint8_t* sP = smem + kOffP;
  float* sAlpha = reinterpret_cast<float*>(smem + kOffF);
  float* sM = sAlpha + 64;
  float* sL = sM + 64;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kOffBar);

  const int4 wk = work[blockIdx.y];
  const int qi = wk.x, rb = wk.y, re = wk.z, slot = wk.w;
  const int head0 = blockIdx.x * 64, H = a.H;
  const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const int rA = 16 * w4 + g, rB = rA + 8;
  const int ntiles = (re - rb + 63) / 64;
  const int* bt = a.block_table + static_cast<size_t>(qi) * a.max_pages;
  const int ps = a.page_size;

  auto issue = [&](int j, int st) {
    const int tok = rb + 64 * j;
    const int row = bt[tok / ps] * ps + tok % ps;
    mbar_expect_tx(&full[st], kTile);
#pragma unroll
    for (int cb = 0; cb < 9; ++cb) tma_load_2d(sKV + st * kTile + cb * 8192, &tmap, &full[st], cb * 64, row);
  };
  if (tid == 0) {
    mbar_init(&full[0], 1);
    mbar_init(&full[1], 1);
    mbar_fence_init();
  }
  __syncthreads();
  if (tid == 0) {
    if (ntiles > 0) issue(0, 0);
    if (ntiles > 1) issue(1, 1);
  }
  {  // Q tile (padded heads read as zeros), swizzled like the TMA tiles
    const bf16* qsrc = a.q + (static_cast<size_t>(qi) * H + head0) * 576;
    for (int u = tid; u < 64 * 72; u += 256) {
      const int r = u / 72, ch = u % 72;
      const bool ok = head0 + r < H;
      cp_async16(smem + (ch >> 3) * 8192 + r * 128 + (((ch & 7) ^ (r & 7)) << 4),
                 qsrc + static_cast<size_t>(ok ? r : 0) * 576 + ch * 8, ok);
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
  }

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float m0 = kNegInf, m1 = kNegInf, l0 = 0.f, l1 = 0.f;
  const float sl2 = a.sm_scale * kLog2e;

  for (int j = 0; j < ntiles; ++j) {
    const int st = j & 1;
    const uint32_t kv = sb + kOffKV + st * kTile;
    const int valid = min(64, re - rb - 64 * j);
    mbar_wait(&full[st], (j >> 1) & 1);
    if (valid < 64) {  // rows past the context: zeros (P is 0 there, but 0 * NaN would not be)
      for (int u = tid; u < (64 - valid) * 72; u += 256) {
        const int r = valid + u / 72, rem = u % 72;
        *reinterpret_cast<uint4*>(sKV + st * kTile + (rem >> 3) * 8192 + r * 128 + (rem & 7) * 16) = make_uint4(0, 0, 0, 0);
      }
      fence_proxy_async();
      named_bar_sync(3, 256);
    }
    float alA, alB;
    if (wg == 0) {
      float s[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) s[i] = 0.f;
      fence_regs(s);
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < 36; ++ks) {
        const uint32_t off = (ks >> 2) * 8192 + (ks & 3) * 32;
        wgmma_m64n64k16_ss(s, sw128_desc(sb + off, 16, 1024), sw128_desc(kv + off, 16, 1024), ks > 0);
      }
      wg_commit();
      wg_wait<0>();
      fence_regs(s);
      float mxA = kNegInf, mxB = kNegInf;
#pragma unroll
      for (int jj = 0; jj < 8; ++jj)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const bool v = 8 * jj + 2 * t4 + e < valid;
          s[4 * jj + e] = v ? s[4 * jj + e] * sl2 : kNegInf;
          s[4 * jj + 2 + e] = v ? s[4 * jj + 2 + e] * sl2 : kNegInf;
          mxA = fmaxf(mxA, s[4 * jj + e]);
          mxB = fmaxf(mxB, s[4 * jj + 2 + e]);
        }
      mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
      mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
      mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
      mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
      const float mnA = fmaxf(m0, mxA), mnB = fmaxf(m1, mxB);
      alA = (m0 == kNegInf) ? 0.f : fast_exp2(m0 - mnA);
      alB = (m1 == kNegInf) ? 0.f : fast_exp2(m1 - mnB);
      float sumA = 0.f, sumB = 0.f;
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        const float p0 = fast_exp2(s[4 * jj] - mnA), p1 = fast_exp2(s[4 * jj + 1] - mnA);
        const float p2 = fast_exp2(s[4 * jj + 2] - mnB), p3 = fast_exp2(s[4 * jj + 3] - mnB);
        sumA += p0 + p1;
        sumB += p2 + p3;
        *reinterpret_cast<uint32_t*>(sP + rA * 128 + ((jj ^ (rA & 7)) << 4) + 4 * t4) = pack_bf16(p0, p1);
        *reinterpret_cast<uint32_t*>(sP + rB * 128 + ((jj ^ (rB & 7)) << 4) + 4 * t4) = pack_bf16(p2, p3);
      }
      l0 = l0 * alA + sumA;
      l1 = l1 * alB + sumB;
      m0 = mnA;
      m1 = mnB;
      if (t4 == 0) {
        sAlpha[rA] = alA;
        sAlpha[rB] = alB;
      }
      fence_proxy_async();
      named_bar_sync(1, 256);
    } else {
      named_bar_sync(1, 256);
      alA = sAlpha[rA];
      alB = sAlpha[rB];
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      o[4 * i] *= alA;
      o[4 * i + 1] *= alA;
      o[4 * i + 2] *= alB;
      o[4 * i + 3] *= alB;
    }
    fence_regs(o);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      wgmma_m64n256k16_ss_tb(o, sw128_desc(sb + kOffP + kk * 32, 16, 1024),
                             sw128_desc(kv + wg * 4 * 8192 + kk * 2048, 8192, 1024), 1);
    wg_commit();
    wg_wait<0>();
    fence_regs(o);
    named_bar_sync(2, 256);  // both halves of P V done: the stage, P and alpha may be overwritten
    if (tid == 0 && j + 2 < ntiles) issue(j + 2, st);
  }

  if (wg == 0) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    if (t4 == 0) {
      sM[rA] = m0; sM[rB] = m1;
      sL[rA] = l0; sL[rB] = l1;
    }
  }
  __syncthreads();
  m0 = sM[rA]; m1 = sM[rB];
  l0 = sL[rA]; l1 = sL[rB];
  wg_store::store_rows(a, o, m0, m1, l0, l1, head0, H, rA, rB, wg, t4, qi, slot);
}

// ---------------------------------------------------------------------------------------------
// V4 attention on Hopper (issue 12; the port of mla_decode_wgmma_kernel to gathered FP8 rows).
// Block = (64-head group, work item), 256 threads = two warpgroups. Shared memory (1024-B aligned):
// Q [64 x 512] bf16 (64 KB, swizzled, loaded once), one BF16 KV tile [64 x 512] (64 KB, swizzled),
// two raw stages of 64 gathered 584-B rows (cp.async 8-B copies, zero-filled for index -1), P
// [64 x 64] bf16, flags, alpha / m / l. Per 64-row tile j: all threads gather tile j+1 into the
// other raw stage, wait for tile j, dequantise it (E4M3 x UE8M0 -> BF16, RoPE part copied) into the
// KV tile; warpgroup 0 computes S = Q K^T (32 x wgmma m64n64k16), masks rows with index -1, online
// softmax, P; both warpgroups rescale and O[:, 256 wg ..] += P V (4 x wgmma m64n256k16, V = K).
// ---------------------------------------------------------------------------------------------
namespace v4k {
constexpr int kQ = 64 * 512 * 2;              // 65536
constexpr int kOffKV = kQ;
constexpr int kOffRaw = kOffKV + 64 * 512 * 2;  // 131072
constexpr int kRaw = 64 * kV4RowBytes;         // 37376
constexpr int kOffP = kOffRaw + 2 * kRaw;      // 205824 (1024-aligned)
constexpr int kOffF = kOffP + 64 * 64 * 2;     // alpha[64], m[64], l[64]
constexpr int kOffFlag = kOffF + 1024;         // [2][64] int
constexpr int kSmem = kOffFlag + 512 + 1024;   // + slack for 1024-B alignment
static_assert(kOffP % 1024 == 0, "P tile alignment");
static_assert(kSmem <= 232448, "shared memory per block");
}  // namespace v4k

__global__ void __launch_bounds__(256, 1) v4_attn_wgmma_kernel(MqaArgs a, const int4* __restrict__ work) {
  using namespace sm90;
  using namespace v4k;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  const uint32_t sb = saddr(smem);
  uint8_t* sKV = smem + kOffKV;
  uint8_t* sRaw = smem + kOffRaw;
  uint8_t* sP = smem + kOffP;
  float* sAlpha = reinterpret_cast<float*>(smem + kOffF);
  float* sM = sAlpha + 64;
  float* sL = sM + 64;
  int* sFlag = reinterpret_cast<int*>(smem + kOffFlag);

  const int4 wk = work[blockIdx.y];
  const int qi = wk.x, rb = wk.y, re = wk.z, slot = wk.w;
  const int head0 = blockIdx.x * 64, H = a.H;
  const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const int rA = 16 * w4 + g, rB = rA + 8;
  const int ntiles = (re - rb + 63) / 64;
  const int* idx = a.indices + static_cast<size_t>(qi) * a.idx_ld;

  auto gather = [&](int j, int st) {
    constexpr int CH = kV4RowBytes / 8;  // 73
    uint8_t* dst = sRaw + st * kRaw;
    const int r0 = rb + 64 * j;
    for (int u = tid; u < 64 * CH; u += 256) {
      const int row = u / CH, ch = u - row * CH;
      const int r = r0 + row;
      const int id = r < re ? __ldg(idx + r) : -1;
      const bool ok = id >= 0;
      cp_async8(dst + row * kV4RowBytes + ch * 8, a.pool + static_cast<size_t>(ok ? id : 0) * kV4RowBytes + ch * 8, ok);
      if (ch == 0) sFlag[st * 64 + row] = ok;
    }
  };
  {  // Q tile (padded heads read as zeros), swizzled
    const bf16* qsrc = a.q + (static_cast<size_t>(qi) * H + head0) * 512;
    for (int u = tid; u < 64 * 64; u += 256) {
      const int r = u >> 6, ch = u & 63;
      const bool ok = head0 + r < H;
      cp_async16(smem + (ch >> 3) * 8192 + r * 128 + (((ch & 7) ^ (r & 7)) << 4),
                 qsrc + static_cast<size_t>(ok ? r : 0) * 512 + ch * 8, ok);
    }
  }
  if (ntiles > 0) gather(0, 0);
  cp_async_commit();

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float m0 = kNegInf, m1 = kNegInf, l0 = 0.f, l1 = 0.f;
  const float sl2 = a.sm_scale * kLog2e;

  for (int j = 0; j < ntiles; ++j) {
    const int st = j & 1;
    if (j + 1 < ntiles) gather(j + 1, st ^ 1);  // raw stage st^1 was dequantised in iteration j-1
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();  // tile j's raw rows and flags (and Q) are in; the KV tile is free (end of j-1)
    {
      const uint8_t* rs = sRaw + st * kRaw;
      for (int u = tid; u < 64 * 64; u += 256) {
        const int row = u >> 6, c = u & 63;
        const uint8_t* rr = rs + row * kV4RowBytes;
        uint4 v;
        if (c < 56) {
          const uint2 x = *reinterpret_cast<const uint2*>(rr + c * 8);
          const float sc = ue8m0_to_float(rr[kV4Nope + 2 * kV4Rope + (c >> 3)]);
          const float2 f0 = e4m3x2_to_float2(static_cast<uint16_t>(x.x & 0xffff));
          const float2 f1 = e4m3x2_to_float2(static_cast<uint16_t>(x.x >> 16));
          const float2 f2 = e4m3x2_to_float2(static_cast<uint16_t>(x.y & 0xffff));
          const float2 f3 = e4m3x2_to_float2(static_cast<uint16_t>(x.y >> 16));
          v.x = pack_bf16(f0.x * sc, f0.y * sc);
          v.y = pack_bf16(f1.x * sc, f1.y * sc);
          v.z = pack_bf16(f2.x * sc, f2.y * sc);
          v.w = pack_bf16(f3.x * sc, f3.y * sc);
        } else {
          const uint2 v0 = *reinterpret_cast<const uint2*>(rr + kV4Nope + (c - 56) * 16);
          const uint2 v1 = *reinterpret_cast<const uint2*>(rr + kV4Nope + (c - 56) * 16 + 8);
          v = make_uint4(v0.x, v0.y, v1.x, v1.y);
        }
        *reinterpret_cast<uint4*>(sKV + (c >> 3) * 8192 + row * 128 + (((c & 7) ^ (row & 7)) << 4)) = v;
      }
    }
    fence_proxy_async();
    __syncthreads();
    const uint32_t kv = sb + kOffKV;
    float alA, alB;
    if (wg == 0) {
      float s[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) s[i] = 0.f;
      fence_regs(s);
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < 32; ++ks) {
        const uint32_t off = (ks >> 2) * 8192 + (ks & 3) * 32;
        wgmma_m64n64k16_ss(s, sw128_desc(sb + off, 16, 1024), sw128_desc(kv + off, 16, 1024), ks > 0);
      }
      wg_commit();
      wg_wait<0>();
      fence_regs(s);
      float mxA = kNegInf, mxB = kNegInf;
#pragma unroll
      for (int jj = 0; jj < 8; ++jj)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const bool v = sFlag[st * 64 + 8 * jj + 2 * t4 + e] != 0;
          s[4 * jj + e] = v ? s[4 * jj + e] * sl2 : kNegInf;
          s[4 * jj + 2 + e] = v ? s[4 * jj + 2 + e] * sl2 : kNegInf;
          mxA = fmaxf(mxA, s[4 * jj + e]);
          mxB = fmaxf(mxB, s[4 * jj + 2 + e]);
        }
      mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
      mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
      mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
      mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
      const float mnA = fmaxf(m0, mxA), mnB = fmaxf(m1, mxB);
      // a tile of only -1 rows keeps m = -inf: its p are exp2(-inf - -inf) -> guard with the max
      const float bA = mnA == kNegInf ? 0.f : mnA, bB = mnB == kNegInf ? 0.f : mnB;
      alA = (m0 == kNegInf) ? 0.f : fast_exp2(m0 - mnA);
      alB = (m1 == kNegInf) ? 0.f : fast_exp2(m1 - mnB);
      float sumA = 0.f, sumB = 0.f;
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        const float p0 = fast_exp2(s[4 * jj] - bA), p1 = fast_exp2(s[4 * jj + 1] - bA);
        const float p2 = fast_exp2(s[4 * jj + 2] - bB), p3 = fast_exp2(s[4 * jj + 3] - bB);
        sumA += p0 + p1;
        sumB += p2 + p3;
        *reinterpret_cast<uint32_t*>(sP + rA * 128 + ((jj ^ (rA & 7)) << 4) + 4 * t4) = pack_bf16(p0, p1);
        *reinterpret_cast<uint32_t*>(sP + rB * 128 + ((jj ^ (rB & 7)) << 4) + 4 * t4) = pack_bf16(p2, p3);
      }
      l0 = l0 * alA + sumA;
      l1 = l1 * alB + sumB;
      m0 = mnA;
      m1 = mnB;
      if (t4 == 0) {
        sAlpha[rA] = alA;
        sAlpha[rB] = alB;
      }
      fence_proxy_async();
      named_bar_sync(1, 256);
    } else {
      named_bar_sync(1, 256);
      alA = sAlpha[rA];
      alB = sAlpha[rB];
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      o[4 * i] *= alA;
      o[4 * i + 1] *= alA;
      o[4 * i + 2] *= alB;
      o[4 * i + 3] *= alB;
    }
    fence_regs(o);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      wgmma_m64n256k16_ss_tb(o, sw128_desc(sb + kOffP + kk * 32, 16, 1024),
                             sw128_desc(kv + wg * 4 * 8192 + kk * 2048, 8192, 1024), 1);
    wg_commit();
    wg_wait<0>();
    fence_regs(o);
    named_bar_sync(2, 256);  // both halves of P V done: the KV tile, P and alpha may be overwritten
  }
  cp_async_wait<0>();

  if (wg == 0) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    if (t4 == 0) {
      sM[rA] = m0; sM[rB] = m1;
      sL[rA] = l0; sL[rB] = l1;
    }
  }
  __syncthreads();
  m0 = sM[rA]; m1 = sM[rB];
  l0 = sL[rA]; l1 = sL[rB];
  wg_store::store_rows(a, o, m0, m1, l0, l1, head0, H, rA, rB, wg, t4, qi, slot);
}

// ---------------------------------------------------------------------------------------------
// MLA decode on Hopper, variant 3: 32-token tiles, 4 KV stages (36 KB each), so that warpgroup 0
// can issue S(j+1) = Q K(j+1)^T before P V(j) and run the softmax of tile j+1 while both
// warpgroups' P V(j) are on the tensor pipe (tile j+1 was loaded three tiles earlier).
// Per tile j, warpgroup 0: softmax(S(j)) in registers -> wait its own P V(j-1), bar 2 (warpgroup
// 1's P V(j-1) done: P buffer and stage (j-1)%4 free) -> thread 0 refills that stage with tile
// j+3 -> P(j), alpha(j) to smem -> bar 1 (arrive) -> rescale O_L -> issue S(j+1), then P V(j)
// (O_L) -> wait S(j+1). Warpgroup 1: bar 1 -> rescale O_R -> P V(j) (O_R) -> wait -> bar 2 (arrive).
// ---------------------------------------------------------------------------------------------
namespace wgk4 {
constexpr int kTile = 32 * 576 * 2;  // 36864 B: half a page
constexpr int kCBs = 32 * 128;       // bytes per 64-column block of a stage
constexpr int kOffKV = 64 * 576 * 2;  // Q first (73728 B)
constexpr int kOffP = kOffKV + 4 * kTile;
constexpr int kOffF = kOffP + 64 * 64 * 2;
constexpr int kOffBar = kOffF + 1024;
constexpr int kSmem = kOffBar + 64 + 1024;
static_assert(kSmem <= 232448, "shared memory per block");
}  // namespace wgk4

__global__ void __launch_bounds__(256, 1)
    mla_decode_wgmma4_kernel(const __grid_constant__ CUtensorMap tmap, MqaArgs a, const int4* __restrict__ work) {
  using namespace sm90;
  using namespace wgk4;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  const uint32_t sb = saddr(smem);
  uint8_t* sKV = smem + kOffKV;
  uint8_t* sP = smem + kOffP;
  float* sAlpha = reinterpret_cast<float*>(smem + kOffF);
  float* sM = sAlpha + 64;
  float* sL = sM + 64;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kOffBar);

  const int4 wk = work[blockIdx.y];
  const int qi = wk.x, rb = wk.y, re = wk.z, slot = wk.w;
  const int head0 = blockIdx.x * 64, H = a.H;
  const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const int rA = 16 * w4 + g, rB = rA + 8;
  const int ntiles = (re - rb + 31) / 32;
  const int* bt = a.block_table + static_cast<size_t>(qi) * a.max_pages;
  const int ps = a.page_size;

  auto issue = [&](int j, int st) {
    const int tok = rb + 32 * j;
    const int row = bt[tok / ps] * ps + tok % ps;
    mbar_expect_tx(&full[st], kTile);
#pragma unroll
    for (int cb = 0; cb < 9; ++cb) tma_load_2d(sKV + st * kTile + cb * kCBs, &tmap, &full[st], cb * 64, row);
  };
  // warpgroup 0 only: rows past the context in tile j -> zeros, then S(j) -> s (not waited)
  auto zero_tail = [&](int j) {
    const int valid = min(32, re - rb - 32 * j);
    if (valid < 32) {
      const int st = j & 3;
      for (int u = tid; u < (32 - valid) * 72; u += 128) {
        const int r = valid + u / 72, rem = u % 72;
        *reinterpret_cast<uint4*>(sKV + st * kTile + (rem >> 3) * kCBs + r * 128 + (rem & 7) * 16) = make_uint4(0, 0, 0, 0);
      }
      fence_proxy_async();
      named_bar_sync(4, 128);
    }
  };
  if (tid == 0) {
#pragma unroll
    for (int i = 0; i < 4; ++i) mbar_init(&full[i], 1);
    mbar_fence_init();
  }
  __syncthreads();
  if (tid == 0)
    for (int j = 0; j < 4 && j < ntiles; ++j) issue(j, j);
  {
    const bf16* qsrc = a.q + (static_cast<size_t>(qi) * H + head0) * 576;
    for (int u = tid; u < 64 * 72; u += 256) {
      const int r = u / 72, ch = u % 72;
      const bool ok = head0 + r < H;
      cp_async16(smem + (ch >> 3) * 8192 + r * 128 + (((ch & 7) ^ (r & 7)) << 4),
                 qsrc + static_cast<size_t>(ok ? r : 0) * 576 + ch * 8, ok);
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
  }

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float s[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) s[i] = 0.f;
  float m0 = kNegInf, m1 = kNegInf, l0 = 0.f, l1 = 0.f;
  const float sl2 = a.sm_scale * kLog2e;
  auto issue_s = [&](int j) {  // warpgroup 0
    const uint32_t kv = sb + kOffKV + (j & 3) * kTile;
    fence_regs(s);
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < 36; ++ks)
      wgmma_m64n32k16_ss(s, sw128_desc(sb + (ks >> 2) * 8192 + (ks & 3) * 32, 16, 1024),
                         sw128_desc(kv + (ks >> 2) * kCBs + (ks & 3) * 32, 16, 1024), ks > 0);
    wg_commit();
  };
  auto issue_pv = [&](int j) {  // either warpgroup, its 256 output columns
    const uint32_t kv = sb + kOffKV + (j & 3) * kTile;
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
      wgmma_m64n256k16_ss_tb(o, sw128_desc(sb + kOffP + kk * 32, 16, 1024),
                             sw128_desc(kv + wg * 4 * kCBs + kk * 2048, kCBs, 1024), 1);
    wg_commit();
  };

  // The two warpgroups run separate loops (wgmma groups stay pending only inside warpgroup 0's own
  // loop, never across a branch that both take), and warpgroup 0's last tile is peeled so every
  // step issues the same groups (S(j+1) then P V(j), wait for all but the newest).
  if (wg == 0) {
    if (ntiles > 0) {
      mbar_wait(&full[0], 0);
      zero_tail(0);
      issue_s(0);
      wg_wait<0>();
      fence_regs(s);
    }
    auto step = [&](int j, auto has_next_c) {
      constexpr bool has_next = decltype(has_next_c)::value;
      const int valid = min(32, re - rb - 32 * j);
      float mxA = kNegInf, mxB = kNegInf;
#pragma unroll
      for (int jj = 0; jj < 4; ++jj)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const bool v = 8 * jj + 2 * t4 + e < valid;
          s[4 * jj + e] = v ? s[4 * jj + e] * sl2 : kNegInf;
          s[4 * jj + 2 + e] = v ? s[4 * jj + 2 + e] * sl2 : kNegInf;
          mxA = fmaxf(mxA, s[4 * jj + e]);
          mxB = fmaxf(mxB, s[4 * jj + 2 + e]);
        }
      mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
      mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
      mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
      mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
      const float mnA = fmaxf(m0, mxA), mnB = fmaxf(m1, mxB);
      const float alA = (m0 == kNegInf) ? 0.f : fast_exp2(m0 - mnA);
      const float alB = (m1 == kNegInf) ? 0.f : fast_exp2(m1 - mnB);
      float sumA = 0.f, sumB = 0.f;
      uint32_t pk[8];
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        const float p0 = fast_exp2(s[4 * jj] - mnA), p1 = fast_exp2(s[4 * jj + 1] - mnA);
        const float p2 = fast_exp2(s[4 * jj + 2] - mnB), p3 = fast_exp2(s[4 * jj + 3] - mnB);
        sumA += p0 + p1;
        sumB += p2 + p3;
        pk[2 * jj] = pack_bf16(p0, p1);
        pk[2 * jj + 1] = pack_bf16(p2, p3);
      }
      l0 = l0 * alA + sumA;
      l1 = l1 * alB + sumB;
      m0 = mnA;
      m1 = mnB;
      wg_wait<0>();  // own P V(j-1)
      fence_regs(o);
      if (j > 0) named_bar_sync(2, 256);  // warpgroup 1's P V(j-1) done
      if (tid == 0 && j > 0 && j + 3 < ntiles) issue(j + 3, (j - 1) & 3);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        *reinterpret_cast<uint32_t*>(sP + rA * 128 + ((jj ^ (rA & 7)) << 4) + 4 * t4) = pk[2 * jj];
        *reinterpret_cast<uint32_t*>(sP + rB * 128 + ((jj ^ (rB & 7)) << 4) + 4 * t4) = pk[2 * jj + 1];
      }
      if (t4 == 0) {
        sAlpha[rA] = alA;
        sAlpha[rB] = alB;
      }
      fence_proxy_async();
      named_bar_arrive(1, 256);
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        o[4 * i] *= alA; o[4 * i + 1] *= alA; o[4 * i + 2] *= alB; o[4 * i + 3] *= alB;
      }
      fence_regs(o);
      if constexpr (has_next) {
        mbar_wait(&full[(j + 1) & 3], ((j + 1) >> 2) & 1);
        zero_tail(j + 1);
        issue_s(j + 1);
        issue_pv(j);
        wg_wait<1>();
        fence_regs(s);
      } else {
        wg_fence();
        issue_pv(j);
      }
    };
    for (int j = 0; j + 1 < ntiles; ++j) step(j, std::true_type{});
    if (ntiles > 0) step(ntiles - 1, std::false_type{});
    wg_wait<0>();
    fence_regs(o);
    if (ntiles > 0) named_bar_sync(2, 256);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    if (t4 == 0) {
      sM[rA] = m0; sM[rB] = m1;
      sL[rA] = l0; sL[rB] = l1;
    }
  } else {
    for (int j = 0; j < ntiles; ++j) {
      named_bar_sync(1, 256);
      mbar_wait(&full[j & 3], (j >> 2) & 1);
      const float alA = sAlpha[rA], alB = sAlpha[rB];
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        o[4 * i] *= alA; o[4 * i + 1] *= alA; o[4 * i + 2] *= alB; o[4 * i + 3] *= alB;
      }
      fence_regs(o);
      wg_fence();
      issue_pv(j);
      wg_wait<0>();
      fence_regs(o);
      named_bar_arrive(2, 256);
    }
  }
  __syncthreads();
  m0 = sM[rA]; m1 = sM[rB];
  l0 = sL[rA]; l1 = sL[rB];
  wg_store::store_rows(a, o, m0, m1, l0, l1, head0, H, rA, rB, wg, t4, qi, slot);
}

// Split-KV merge for the wgmma MLA path: like mqa_combine_kernel, but the slots of one (query,
// head) are read in parallel (weights staged in smem, 8 partial rows in flight per thread), so a
// query split 100+ ways is not a chain of dependent loads.
__global__ void __launch_bounds__(128) mla_combine_kernel(MqaArgs a, const int* __restrict__ q_slot_begin) {
  const int qi = blockIdx.x, h = blockIdx.y, H = a.H;
  const int s0 = q_slot_begin[qi], n = q_slot_begin[qi + 1] - s0;
  if (n == 0) return;
  __shared__ float ws[128];
  __shared__ float red[4];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float sk = a.sink ? a.sink[h] * kLog2e : kNegInf;
  float mx = sk;
  for (int i = tid; i < n; i += 128) mx = fmaxf(mx, a.lse_part[static_cast<size_t>(s0 + i) * H + h]);
  mx = warp_max(mx);
  if (lane == 0) red[warp] = mx;
  __syncthreads();
  const float M = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
  float den = (M == kNegInf || sk == kNegInf) ? 0.f : exp2f(sk - M);
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  const int c = tid * 4;
  const size_t ld = static_cast<size_t>(H) * 512;
  for (int base = 0; base < n; base += 128) {
    const int cnt = min(128, n - base);
    __syncthreads();
    float w = 0.f;
    if (tid < cnt && M != kNegInf) {
      const float l = a.lse_part[static_cast<size_t>(s0 + base + tid) * H + h];
      w = l == kNegInf ? 0.f : exp2f(l - M);
    }
    ws[tid] = w;
    __syncthreads();
    const float* op = a.o_part + (static_cast<size_t>(s0 + base) * H + h) * 512 + c;
    int i = 0;
    for (; i + 8 <= cnt; i += 8) {
      float4 o[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) o[u] = __ldg(reinterpret_cast<const float4*>(op + (i + u) * ld));
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const float wu = ws[i + u];
        den += wu;
        if (wu != 0.f) {
          acc.x += wu * o[u].x; acc.y += wu * o[u].y; acc.z += wu * o[u].z; acc.w += wu * o[u].w;
        }
      }
    }
    for (; i < cnt; ++i) {
      const float wu = ws[i];
      den += wu;
      if (wu != 0.f) {
        const float4 o = __ldg(reinterpret_cast<const float4*>(op + i * ld));
        acc.x += wu * o.x; acc.y += wu * o.y; acc.z += wu * o.z; acc.w += wu * o.w;
      }
    }
  }
  const float f = den > 0.f ? 1.f / den : 0.f;
  bf16* o = a.out + (static_cast<size_t>(qi) * H + h) * 512 + c;
  uint2 u;
  u.x = pack_bf16(acc.x * f, acc.y * f);
  u.y = pack_bf16(acc.z * f, acc.w * f);
  *reinterpret_cast<uint2*>(o) = u;
  if (a.lse && tid == 0) a.lse[static_cast<size_t>(qi) * H + h] = den > 0.f ? (M + log2f(den)) / kLog2e : kNegInf;
}

// ---------------------------------------------------------------------------------------------
// MLA decode on Hopper, variant 4 ("seesaw", issue 12; the two-warpgroup schedule FlashMLA's
// 2025-04 deep-dive describes, written here on the helpers of hopper.cuh). Block = (64-head group,
// work item), 256 threads. Tiles are taken in pairs (K0 = tile 2i in stage 0, K1 = tile 2i+1 in
// stage 1, one 64-token page each, 9 column blocks of 64 x 64 with one mbarrier per block).
// Warpgroup 0 owns O[:, 0:256] and computes S0 = Q K0^T, warpgroup 1 owns O[:, 256:512] and
// computes S1 = Q K1^T, concurrently. Online softmax split over the pair (m = running max):
//   WG0: m0' = max(m, rowmax S0), c0 = 2^(m - m0'), P0 = 2^(S0 - m0'); O_L = c0 O_L + P0 V0L
//   WG1: m1' = max(m0', rowmax S1), c1 = 2^(m0' - m1'), P1 = 2^(S1 - m1');
//        O_R = c0 c1 O_R + P1 V1R + (c1 P0) V0R
//   WG0: O_L = c1 O_L + P1 V1L
// so each warpgroup's softmax runs while the other's GEMMs use the tensor cores. P0 / P1 (bf16,
// 64 x 64) are written over column block 8 (the RoPE part, read only by S) of their own stage.
// Stage release is per half: K0 blocks 0-3 go back to TMA after P0 V0L (WG0), blocks 4-8 after
// c1P0 V0R (WG1); K1 blocks 0-3 and 8 after P1 V1L (WG0), blocks 4-7 after P1 V1R (WG1); the next
// pair's S GEMMs wait per column block, so they start while the rest of their page is in flight.
// Shared memory: Q 72 KB + 2 stages x 72 KB + scale / max exchange rows + 18 mbarriers.
// ---------------------------------------------------------------------------------------------
namespace wgs {
constexpr int kTile = 64 * 576 * 2;  // 73728 B
constexpr int kOffK = kTile;         // Q in [0, kTile), stage st at kOffK + st * kTile
constexpr int kOffF = 3 * kTile;     // floats: sc0[64], m0[64], sc1[64], m1[64], lL[64], lR[64]
constexpr int kOffBar = kOffF + 6 * 64 * 4;
constexpr int kSmem = kOffBar + 22 * 8 + 1024;  // + slack for 1024-B alignment (22 barriers: kept from the removed variant 6)
static_assert(kSmem <= 232448, "shared memory per block");

using sm90::mbar_wait_uniform;  // hopper.cuh

// S (+)= Q[:, 64 cb .. ] K[:, 64 cb ..]^T over column blocks [B0, B1) of stage `st`, each block
// waited on its own mbarrier (parity `par`); the first wgmma of block 0 overwrites S.
// FIRST: the column block whose first wgmma overwrites S (the first one issued); kW: that wgmma
// does not read S at all (write-only operands, so S's old registers are dead before it).
template <int B0, int B1, int FIRST = 0, bool kW = false>
__device__ __forceinline__ void s_gemm(float (&s)[32], uint32_t sq, uint32_t kv, uint64_t* bars, uint32_t par) {
  using namespace sm90;
#pragma unroll
  for (int cb = B0; cb < B1; ++cb) {
    mbar_wait_uniform(&bars[cb], par);
    wg_fence();  // as CUTLASS's mainloops: an explicit fence after each wait (else ptxas injects one)
#pragma unroll
    for (int k4 = 0; k4 < 4; ++k4) {
      const uint32_t off = cb * 8192 + k4 * 32;
      if (kW && cb == FIRST && k4 == 0)
        wgmma_m64n64k16_ss_w(s, sw128_desc(sq + off, 16, 1024), sw128_desc(kv + off, 16, 1024));
      else
        wgmma_m64n64k16_ss(s, sw128_desc(sq + off, 16, 1024), sw128_desc(kv + off, 16, 1024), (cb != FIRST || k4 > 0) ? 1 : 0);
    }
  }
}
// O_half (+)= P V_half: P [64 x 64] bf16 at column block 8 of the stage, V = column blocks [4h, 4h+4).
__device__ __forceinline__ void pv_gemm(float (&o)[128], uint32_t kv, int h) {
  using namespace sm90;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    wgmma_m64n256k16_ss_tb(o, sw128_desc(kv + 8 * 8192 + kk * 32, 16, 1024), sw128_desc(kv + h * 4 * 8192 + kk * 2048, 8192, 1024), 1);
}
// Rows [valid, 64) of column blocks [c0, c1) of a stage -> 0 (a page tail past the context may hold
// NaN; P is 0 there but 0 * NaN is not), by the 128 threads of one warpgroup.
__device__ __forceinline__ void zero_tail(uint8_t* stage, int valid, int c0, int c1, int tw) {
  const int nb = c1 - c0;
  for (int u = tw; u < (64 - valid) * 8 * nb; u += 128) {
    const int r = valid + u / (8 * nb), rem = u % (8 * nb);
    *reinterpret_cast<uint4*>(stage + (c0 + rem / 8) * 8192 + r * 128 + (rem % 8) * 16) = make_uint4(0, 0, 0, 0);
  }
}
// bf16(f * s) -> the swizzled P tile (K-major A operand) at `sp`, rows rA / rB of this thread.
__device__ __forceinline__ void store_p(uint8_t* sp, const float (&s)[32], float fA, float fB, int rA, int rB, int t4) {
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    *reinterpret_cast<uint32_t*>(sp + rA * 128 + ((jj ^ (rA & 7)) << 4) + 4 * t4) = pack_bf16(s[4 * jj] * fA, s[4 * jj + 1] * fA);
    *reinterpret_cast<uint32_t*>(sp + rB * 128 + ((jj ^ (rB & 7)) << 4) + 4 * t4) = pack_bf16(s[4 * jj + 2] * fB, s[4 * jj + 3] * fB);
  }
}
// Masked, log2-scaled S -> P = 2^(S - m_new) in place; returns the row maxima of this tile through
// mxA / mxB (reduced over the quad) and the partial row sums through sumA / sumB.
__device__ __forceinline__ void tile_max(float (&s)[32], int valid, float sl2, int t4, float& mxA, float& mxB) {
  mxA = kNegInf;
  mxB = kNegInf;
#pragma unroll
  for (int jj = 0; jj < 8; ++jj)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const bool v = 8 * jj + 2 * t4 + e < valid;
      s[4 * jj + e] = v ? s[4 * jj + e] * sl2 : kNegInf;
      s[4 * jj + 2 + e] = v ? s[4 * jj + 2 + e] * sl2 : kNegInf;
      mxA = fmaxf(mxA, s[4 * jj + e]);
      mxB = fmaxf(mxB, s[4 * jj + 2 + e]);
    }
  mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
  mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
  mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
  mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
}
__device__ __forceinline__ void tile_exp(float (&s)[32], float mnA, float mnB, float& sumA, float& sumB) {
  sumA = 0.f;
  sumB = 0.f;
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    s[4 * jj] = fast_exp2(s[4 * jj] - mnA);
    s[4 * jj + 1] = fast_exp2(s[4 * jj + 1] - mnA);
    s[4 * jj + 2] = fast_exp2(s[4 * jj + 2] - mnB);
    s[4 * jj + 3] = fast_exp2(s[4 * jj + 3] - mnB);
    sumA += s[4 * jj] + s[4 * jj + 1];
    sumB += s[4 * jj + 2] + s[4 * jj + 3];
  }
}
}  // namespace wgs

// (Variants 6-9, the tenth session's experiments on this kernel -- 2-CTA multicast, the S1 block order
// 4-7, 0-3, 8, an L2 prefetch, block-table entries loaded a pair ahead -- were removed in the eleventh
// session; their code is in git history before that session's commit, their numbers in NOTES.md.)
__global__ void __launch_bounds__(256, 1)
    mla_decode_seesaw_kernel(const __grid_constant__ CUtensorMap tmap, MqaArgs a, const int4* __restrict__ work, int pf) {
  using namespace sm90;
  using namespace wgs;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  const uint32_t sb = saddr(smem);
  float* sSc0 = reinterpret_cast<float*>(smem + kOffF);
  float* sM0 = sSc0 + 64;
  float* sSc1 = sM0 + 64;
  float* sM1 = sSc1 + 64;
  float* sLL = sM1 + 64;
  float* sLR = sLL + 64;
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + kOffBar);  // [stage * 9 + column block]

  const int4 wk = work[blockIdx.y];
  const int qi = wk.x, rb = wk.y, re = wk.z, slot = wk.w;
  const int head0 = blockIdx.x * 64, H = a.H;
  const int tid = threadIdx.x, wg = tid >> 7, tw = tid & 127, lane = tid & 31, w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const int rA = 16 * w4 + g, rB = rA + 8;
  const int ntiles = (re - rb + 63) / 64;
  const int npairs = (ntiles + 1) / 2;
  const int* bt = a.block_table + static_cast<size_t>(qi) * a.max_pages;
  const int ps = a.page_size;
  uint8_t* stg[2] = {smem + kOffK, smem + kOffK + kTile};
  const uint32_t kv0 = sb + kOffK, kv1 = sb + kOffK + kTile;

  // TMA of tile j's column blocks [c0, c1) into stage st (one thread)
  auto issue = [&](int j, int st, int c0, int c1) {
    if (pf < 0 && j >= 2) {  // diagnostic (SERVESIM_MLA_NOLOAD=1): no page reload, the
      for (int cb = c0; cb < c1; ++cb) mbar_arrive(&bar[st * 9 + cb]);  // stage keeps tile 0 / 1
      return;
    }
    const int tok = rb + 64 * j;
    const int row = bt[tok / ps] * ps + tok % ps;
    for (int cb = c0; cb < c1; ++cb) {
      mbar_expect_tx(&bar[st * 9 + cb], 8192);
      tma_load_2d(stg[st] + cb * 8192, &tmap, &bar[st * 9 + cb], cb * 64, row);
    }
  };
  if (tid == 0) {
    for (int i = 0; i < 18; ++i) mbar_init(&bar[i], 1);
    mbar_fence_init();
  }
  __syncthreads();
  if (tid == 0) {
    if (ntiles > 0) issue(0, 0, 0, 9);
    if (ntiles > 1) issue(1, 1, 0, 9);
  }
  {  // Q tile (padded heads read as zeros), swizzled like the TMA tiles
    const bf16* qsrc = a.q + (static_cast<size_t>(qi) * H + head0) * 576;
    for (int u = tid; u < 64 * 72; u += 256) {
      const int r = u / 72, ch = u % 72;
      const bool ok = head0 + r < H;
      cp_async16(smem + (ch >> 3) * 8192 + r * 128 + (((ch & 7) ^ (r & 7)) << 4),
                 qsrc + static_cast<size_t>(ok ? r : 0) * 576 + ch * 8, ok);
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
  }

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float s[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) s[i] = 0.f;
  float mA = kNegInf, mB = kNegInf, lA = 0.f, lB = 0.f;
  const float sl2 = a.sm_scale * kLog2e;

  if (wg == 0) {
    // ---------------- warpgroup 0: S0, softmax 0, O_L ----------------
    if (ntiles > 0) {
      fence_regs(s);
      wg_fence();
      s_gemm<0, 9>(s, sb, kv0, bar, 0);
      wg_commit();
      wg_wait<0>();
      fence_regs(s);
    }
    for (int i = 0; i < npairs; ++i) {
      const int j0 = 2 * i, j1 = j0 + 1;
      const bool have1 = j1 < ntiles, next0 = j0 + 2 < ntiles, next1 = j1 + 2 < ntiles;
      const uint32_t par = i & 1;
      const int valid0 = min(64, re - rb - 64 * j0);
      float mxA, mxB, sumA, sumB;
      tile_max(s, valid0, sl2, t4, mxA, mxB);
      const float mnA = fmaxf(mA, mxA), mnB = fmaxf(mB, mxB);
      const float c0A = (mA == kNegInf) ? 0.f : fast_exp2(mA - mnA), c0B = (mB == kNegInf) ? 0.f : fast_exp2(mB - mnB);
      tile_exp(s, mnA, mnB, sumA, sumB);
      lA = lA * c0A + sumA;
      lB = lB * c0B + sumB;
      if (t4 == 0) {
        sSc0[rA] = c0A; sSc0[rB] = c0B;
        sM0[rA] = mnA; sM0[rB] = mnB;
      }
      named_bar_sync(5, 128);  // every warp's S0 wgmma has read column block 8
      store_p(stg[0] + 8 * 8192, s, 1.f, 1.f, rA, rB, t4);
      if (valid0 < 64) zero_tail(stg[0], valid0, 0, 4, tw);
      fence_proxy_async();
      named_bar_sync(5, 128);
      named_bar_arrive(1, 256);  // c0 and m0' ready for warpgroup 1
#pragma unroll
      for (int q = 0; q < 32; ++q) {
        o[4 * q] *= c0A; o[4 * q + 1] *= c0A; o[4 * q + 2] *= c0B; o[4 * q + 3] *= c0B;
      }
      fence_regs(o);
      wg_fence();
      pv_gemm(o, kv0, 0);
      wg_commit();
      wg_wait<0>();
      fence_regs(o);
      named_bar_sync(5, 128);  // P0 V0L done in every warp: K0 blocks 0-3 are free
      if (tw == 0 && next0) issue(j0 + 2, 0, 0, 4);
      named_bar_sync(2, 256);  // c1, m1' and P1 from warpgroup 1
      const float c1A = sSc1[rA], c1B = sSc1[rB];
      mA = sM1[rA];
      mB = sM1[rB];
      lA *= c1A;
      lB *= c1B;
      store_p(stg[0] + 8 * 8192, s, c1A, c1B, rA, rB, t4);  // c1 P0 over P0 (P0 V0L has completed)
      fence_proxy_async();
      named_bar_arrive(3, 256);  // c1 P0 ready for warpgroup 1
#pragma unroll
      for (int q = 0; q < 32; ++q) {
        o[4 * q] *= c1A; o[4 * q + 1] *= c1A; o[4 * q + 2] *= c1B; o[4 * q + 3] *= c1B;
      }
      // after warpgroup 1 has issued c1 P0 V0R (as FlashMLA's rO1sP0sV0RIssued): its completion
      // releases K0 blocks 4-8 and starts the next S1, so it should not queue behind P1 V1L + S0
      named_bar_sync(4, 256);
      if (have1) {
#pragma unroll
        for (int cb = 0; cb < 4; ++cb) mbar_wait_uniform(&bar[9 + cb], par);
        const int valid1 = min(64, re - rb - 64 * j1);
        if (valid1 < 64) {
          zero_tail(stg[1], valid1, 0, 4, tw);
          fence_proxy_async();
          named_bar_sync(5, 128);
        }
        fence_regs(o);
        wg_fence();
        pv_gemm(o, kv1, 0);
        wg_commit();
      }
      if (next0) {
        fence_regs(s);
        wg_fence();
        s_gemm<0, 4>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
        wg_wait<1>();  // P1 V1L done: K1 blocks 0-3 and 8 are free
        named_bar_sync(5, 128);
        if (tw == 0 && next1) {
          issue(j1 + 2, 1, 0, 4);
          issue(j1 + 2, 1, 8, 9);
        }
        s_gemm<4, 9>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
      }
      wg_wait<0>();
      fence_regs(o);
      fence_regs(s);
    }
  } else {
    // ---------------- warpgroup 1: S1, softmax 1, O_R ----------------
    for (int i = 0; i < npairs; ++i) {
      const int j0 = 2 * i, j1 = j0 + 1;
      const bool have1 = j1 < ntiles, next0 = j0 + 2 < ntiles, next1 = j1 + 2 < ntiles;
      const uint32_t par = i & 1;
      // S1 (its K1 blocks were loaded after the previous pair's P1 V1 / at the start); issued and
      // waited inside one branch: wgmma accumulators in flight across a loop edge or a data-dependent
      // branch make ptxas serialise every wgmma of the kernel (C7518)
      if (have1) {
        fence_regs(s);
        wg_fence();
        s_gemm<0, 9>(s, sb, kv1, bar + 9, par);
        wg_commit();
        wg_wait<0>();
        fence_regs(s);
      }
      named_bar_sync(1, 256);  // c0, m0' from warpgroup 0
      const float c0A = sSc0[rA], c0B = sSc0[rB], m0A = sM0[rA], m0B = sM0[rB];
      float c1A = 1.f, c1B = 1.f, sumA = 0.f, sumB = 0.f;
      const int valid1 = have1 ? min(64, re - rb - 64 * j1) : 0;
      if (have1) {
        float mxA, mxB;
        tile_max(s, valid1, sl2, t4, mxA, mxB);
        mA = fmaxf(m0A, mxA);
        mB = fmaxf(m0B, mxB);
        c1A = (m0A == kNegInf) ? 0.f : fast_exp2(m0A - mA);
        c1B = (m0B == kNegInf) ? 0.f : fast_exp2(m0B - mB);
        tile_exp(s, mA, mB, sumA, sumB);
        named_bar_sync(6, 128);  // every warp's S1 wgmma has read column block 8
        store_p(stg[1] + 8 * 8192, s, 1.f, 1.f, rA, rB, t4);
        if (valid1 < 64) zero_tail(stg[1], valid1, 4, 8, tw);
      } else {
        mA = m0A;
        mB = m0B;
      }
      lA = lA * (c0A * c1A) + sumA;
      lB = lB * (c0B * c1B) + sumB;
      if (t4 == 0) {
        sSc1[rA] = c1A; sSc1[rB] = c1B;
        sM1[rA] = mA; sM1[rB] = mB;
      }
      // K0 blocks 4-7 (V0R): loaded long ago (S0 waited on them) and S0 is complete (barrier 1), so a
      // partial page's tail is zeroed here, before any wgmma of this warpgroup is in flight (a
      // divergent loop with in-flight accumulators makes ptxas serialise the kernel's wgmmas, C7518)
#pragma unroll
      for (int cb = 4; cb < 9; ++cb) mbar_wait_uniform(&bar[cb], par);
      const int valid0 = min(64, re - rb - 64 * j0);
      if (valid0 < 64) zero_tail(stg[0], valid0, 4, 8, tw);
      fence_proxy_async();
      named_bar_arrive(2, 256);  // c1, m1', P1 ready for warpgroup 0
      named_bar_sync(6, 128);    // P1 (and the zeroed tail) written by every warp of this warpgroup
      const float fA = c0A * c1A, fB = c0B * c1B;
#pragma unroll
      for (int q = 0; q < 32; ++q) {
        o[4 * q] *= fA; o[4 * q + 1] *= fA; o[4 * q + 2] *= fB; o[4 * q + 3] *= fB;
      }
      fence_regs(o);
      if (have1) {
        wg_fence();
        pv_gemm(o, kv1, 1);
        wg_commit();
      }
      named_bar_sync(3, 256);  // c1 P0 from warpgroup 0
      wg_fence();
      pv_gemm(o, kv0, 1);
      wg_commit();
      named_bar_arrive(4, 256);  // c1 P0 V0R issued: warpgroup 0 may queue P1 V1L and the next S0 behind it
      if (have1) {
        wg_wait<1>();  // P1 V1R done: K1 blocks 4-7 are free
        named_bar_sync(6, 128);
        if (tw == 0 && next1) issue(j1 + 2, 1, 4, 8);
      }
      wg_wait<0>();  // c1 P0 V0R done: K0 blocks 4-8 are free
      fence_regs(o);
      named_bar_sync(6, 128);
      if (tw == 0 && next0) issue(j0 + 2, 0, 4, 9);
    }
  }

  // l = l_L (warpgroup 0's partial sums) + l_R (warpgroup 1's); m is the same in both
  lA += __shfl_xor_sync(0xffffffffu, lA, 1);
  lA += __shfl_xor_sync(0xffffffffu, lA, 2);
  lB += __shfl_xor_sync(0xffffffffu, lB, 1);
  lB += __shfl_xor_sync(0xffffffffu, lB, 2);
  if (t4 == 0) {
    (wg == 0 ? sLL : sLR)[rA] = lA;
    (wg == 0 ? sLL : sLR)[rB] = lB;
  }
  __syncthreads();
  const float m0 = mA, m1 = mB;
  const float l0 = sLL[rA] + sLR[rA], l1 = sLL[rB] + sLR[rB];
  wg_store::store_rows(a, o, m0, m1, l0, l1, head0, H, rA, rB, wg, t4, qi, slot);
}

// ---------------------------------------------------------------------------------------------
// MLA decode, variant 10 (issue 12, tenth session): the seesaw of variant 4 with S1 over K1's column
// blocks 4-7, 0-3, 8 (the order of their refills; the removed variant 7) and each warpgroup's
// own P taken from registers (RS wgmma, as FlashMLA): P0 V0L and P1 V1R read the bf16 P fragments
// packed from the softmax registers, so softmax 0 -> P0 V0L and softmax 1 -> P1 V1R no longer go
// through a shared-memory store, a proxy fence and two named barriers; warpgroup 0 stores only
// c1 P0 (for warpgroup 1's c1 P0 V0R, scaled from the packed bf16 P0: one more bf16 rounding) and
// warpgroup 1 stores P1 (for warpgroup 0's P1 V1L) after issuing P1 V1R. 16 KB less shared-memory
// reads and one 8-KB store less per pair. Partial-page tails are zeroed before the first PV of the
// warpgroup that reads them (no wgmma in flight there). Same plan, smem and stage release as 4/7.
// ---------------------------------------------------------------------------------------------
namespace wgs {
// O_half (+)= P V_half with P from registers (p[16]: bf16x2, p[2 jj] = row rA cols 8 jj + 2 t4 .. +1,
// p[2 jj + 1] = row rB; the k16 step kk uses p[4 kk .. 4 kk + 3], the wgmma A-fragment order).
__device__ __forceinline__ void pv_gemm_rs(float (&o)[128], const uint32_t (&p)[16], uint32_t kv, int h) {
  using namespace sm90;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint32_t af[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
    wgmma_m64n256k16_rs_tb(o, af, sw128_desc(kv + h * 4 * 8192 + kk * 2048, 8192, 1024), 1);
  }
}
__device__ __forceinline__ void pack_p(uint32_t (&p)[16], const float (&s)[32]) {
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    p[2 * jj] = pack_bf16(s[4 * jj], s[4 * jj + 1]);
    p[2 * jj + 1] = pack_bf16(s[4 * jj + 2], s[4 * jj + 3]);
  }
}
__device__ __forceinline__ uint32_t scale_bf16x2(uint32_t v, float f) {
  __nv_bfloat162 h;
  memcpy(&h, &v, 4);
  const float2 x = __bfloat1622float2(h);
  return pack_bf16(x.x * f, x.y * f);
}
// packed P (times fA / fB per row) -> the swizzled P tile at `sp`
__device__ __forceinline__ void store_p_packed(uint8_t* sp, const uint32_t (&p)[16], float fA, float fB, bool scale, int rA, int rB,
                                               int t4) {
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    *reinterpret_cast<uint32_t*>(sp + rA * 128 + ((jj ^ (rA & 7)) << 4) + 4 * t4) = scale ? scale_bf16x2(p[2 * jj], fA) : p[2 * jj];
    *reinterpret_cast<uint32_t*>(sp + rB * 128 + ((jj ^ (rB & 7)) << 4) + 4 * t4) = scale ? scale_bf16x2(p[2 * jj + 1], fB) : p[2 * jj + 1];
  }
}
// Variants 11 / 12: row maxima of the raw S (masked only for a partial tile, a warp-uniform branch),
// returned already log2-scaled (sl2 > 0, so max(S) sl2 = max(S sl2)); S itself stays unscaled.
__device__ __forceinline__ void tile_max_raw(float (&s)[32], int valid, float sl2, int t4, float& mxA, float& mxB) {
  if (valid < 64) {
#pragma unroll
    for (int jj = 0; jj < 8; ++jj)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool v = 8 * jj + 2 * t4 + e < valid;
        s[4 * jj + e] = v ? s[4 * jj + e] : kNegInf;
        s[4 * jj + 2 + e] = v ? s[4 * jj + 2 + e] : kNegInf;
      }
  }
  mxA = kNegInf;
  mxB = kNegInf;
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    mxA = fmaxf(mxA, fmaxf(s[4 * jj], s[4 * jj + 1]));
    mxB = fmaxf(mxB, fmaxf(s[4 * jj + 2], s[4 * jj + 3]));
  }
  mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
  mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
  mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
  mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
  mxA *= sl2;
  mxB *= sl2;
}
// P = 2^(S sl2 - m_new): one FFMA + one ex2 per element (variants 4-10: FMUL in tile_max, FADD here).
__device__ __forceinline__ void tile_exp_fma(float (&s)[32], float sl2, float mnA, float mnB, float& sumA, float& sumB) {
  sumA = 0.f;
  sumB = 0.f;
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    s[4 * jj] = fast_exp2(fmaf(s[4 * jj], sl2, -mnA));
    s[4 * jj + 1] = fast_exp2(fmaf(s[4 * jj + 1], sl2, -mnA));
    s[4 * jj + 2] = fast_exp2(fmaf(s[4 * jj + 2], sl2, -mnB));
    s[4 * jj + 3] = fast_exp2(fmaf(s[4 * jj + 3], sl2, -mnB));
    sumA += s[4 * jj] + s[4 * jj + 1];
    sumB += s[4 * jj + 2] + s[4 * jj + 3];
  }
}
// o[rows A] *= fA, o[rows B] *= fB; kSkip: not at all when every factor of the warp is exactly 1 (the
// running max did not move: multiplying by 1 is the identity, so the result is bit-identical). No
// wgmma may have o in flight here.
template <bool kSkip>
__device__ __forceinline__ void scale_o(float (&o)[128], float fA, float fB) {
  if (kSkip && __all_sync(0xffffffffu, fA == 1.f && fB == 1.f)) return;
#pragma unroll
  for (int q = 0; q < 32; ++q) {
    o[4 * q] *= fA; o[4 * q + 1] *= fA; o[4 * q + 2] *= fB; o[4 * q + 3] *= fB;
  }
}
}  // namespace wgs

// kGate (issue 12, eleventh session): 0 = variant 10. 1 = variant 11: warpgroup 1 issues S1 only
//   after warpgroup 0 has issued all of S0 (named barrier 7), so that S0 completes first on the
//   tensor pipe and softmax 0 runs while S1 computes (in variant 10 S0 and S1 interleave and end
//   together, and the pipe idles through softmax 0); plus the cheaper softmax (raw-S max, one FFMA
//   per exponential, masking only in a partial tile) and O rescales skipped when a warp's factors
//   are all 1. 2 = variant 12: the same, with barrier 7 passed after S0's column blocks 0-3 only
//   (S1 interleaves with S0 4-8 as in variant 10). Measured (NOTES.md, eleventh session): 12 is 1.06x
//   variant 10 at the 128-head median and the table's kernel; 11 loses at 512 x 4K (S1 then also
//   waits for K0 4-8, the blocks refilled last).
template <int kGate>
__global__ void __launch_bounds__(256, 1)
    mla_decode_seesaw_rs_kernel(const __grid_constant__ CUtensorMap tmap, MqaArgs a, const int4* __restrict__ work) {
  constexpr bool kNew = kGate > 0;
  using namespace sm90;
  using namespace wgs;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  const uint32_t sb = saddr(smem);
  float* sSc0 = reinterpret_cast<float*>(smem + kOffF);
  float* sM0 = sSc0 + 64;
  float* sSc1 = sM0 + 64;
  float* sM1 = sSc1 + 64;
  float* sLL = sM1 + 64;
  float* sLR = sLL + 64;
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + kOffBar);  // [stage * 9 + column block]

  const int4 wk = work[blockIdx.y];
  const int qi = wk.x, rb = wk.y, re = wk.z, slot = wk.w;
  const int head0 = blockIdx.x * 64, H = a.H;
  const int tid = threadIdx.x, wg = tid >> 7, tw = tid & 127, lane = tid & 31, w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const int rA = 16 * w4 + g, rB = rA + 8;
  const int ntiles = (re - rb + 63) / 64;
  const int npairs = (ntiles + 1) / 2;
  const int* bt = a.block_table + static_cast<size_t>(qi) * a.max_pages;
  const int ps = a.page_size;
  uint8_t* stg[2] = {smem + kOffK, smem + kOffK + kTile};
  const uint32_t kv0 = sb + kOffK, kv1 = sb + kOffK + kTile;
  (void)lane;

  auto issue = [&](int j, int st, int c0, int c1) {
    const int tok = rb + 64 * j;
    const int row = bt[tok / ps] * ps + tok % ps;
    for (int cb = c0; cb < c1; ++cb) {
      mbar_expect_tx(&bar[st * 9 + cb], 8192);
      tma_load_2d(stg[st] + cb * 8192, &tmap, &bar[st * 9 + cb], cb * 64, row);
    }
  };
  if (tid == 0) {
    for (int i = 0; i < 18; ++i) mbar_init(&bar[i], 1);
    mbar_fence_init();
  }
  __syncthreads();
  if (tid == 0) {
    if (ntiles > 0) issue(0, 0, 0, 9);
    if (ntiles > 1) issue(1, 1, 0, 9);
  }
  {  // Q tile (padded heads read as zeros), swizzled like the TMA tiles
    const bf16* qsrc = a.q + (static_cast<size_t>(qi) * H + head0) * 576;
    for (int u = tid; u < 64 * 72; u += 256) {
      const int r = u / 72, ch = u % 72;
      const bool ok = head0 + r < H;
      cp_async16(smem + (ch >> 3) * 8192 + r * 128 + (((ch & 7) ^ (r & 7)) << 4),
                 qsrc + static_cast<size_t>(ok ? r : 0) * 576 + ch * 8, ok);
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
  }

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float s[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) s[i] = 0.f;
  uint32_t p[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) p[i] = 0u;
  float mA = kNegInf, mB = kNegInf, lA = 0.f, lB = 0.f;
  const float sl2 = a.sm_scale * kLog2e;

  if (wg == 0) {
    // ---------------- warpgroup 0: S0, softmax 0, O_L ----------------
    if (ntiles > 0) {
      wg_fence();
      s_gemm<0, 9, 0, true>(s, sb, kv0, bar, 0);
      wg_commit();
      if constexpr (kNew) named_bar_arrive(7, 256);  // S0 issued: warpgroup 1 may issue S1
      wg_wait<0>();
      fence_regs(s);
    }
    for (int i = 0; i < npairs; ++i) {
      const int j0 = 2 * i, j1 = j0 + 1;
      const bool have1 = j1 < ntiles, next0 = j0 + 2 < ntiles, next1 = j1 + 2 < ntiles;
      const uint32_t par = i & 1;
      const int valid0 = min(64, re - rb - 64 * j0);
      float mxA, mxB, sumA, sumB;
      if constexpr (kNew) tile_max_raw(s, valid0, sl2, t4, mxA, mxB);
      else tile_max(s, valid0, sl2, t4, mxA, mxB);
      const float mnA = fmaxf(mA, mxA), mnB = fmaxf(mB, mxB);
      const float c0A = (mA == kNegInf) ? 0.f : fast_exp2(mA - mnA), c0B = (mB == kNegInf) ? 0.f : fast_exp2(mB - mnB);
      if constexpr (kNew) tile_exp_fma(s, sl2, mnA, mnB, sumA, sumB);
      else tile_exp(s, mnA, mnB, sumA, sumB);
      lA = lA * c0A + sumA;
      lB = lB * c0B + sumB;
      if (t4 == 0) {
        sSc0[rA] = c0A; sSc0[rB] = c0B;
        sM0[rA] = mnA; sM0[rB] = mnB;
      }
      pack_p(p, s);  // s is dead until the next S0 (its first wgmma does not read it)
      if (valid0 < 64) {  // V0L rows past the context (may hold NaN) -> 0 before P0 V0L reads them
        zero_tail(stg[0], valid0, 0, 4, tw);
        fence_proxy_async();
        named_bar_sync(5, 128);
      }
      named_bar_arrive(1, 256);  // c0 and m0' ready for warpgroup 1
      scale_o<kNew>(o, c0A, c0B);
      fence_regs(o);
      wg_fence();
      pv_gemm_rs(o, p, kv0, 0);  // P0 V0L, P0 from registers
      wg_commit();
      wg_wait<0>();
      fence_regs(o);
      named_bar_sync(5, 128);  // P0 V0L done in every warp (and every warp's S0 read block 8): K0 0-3 free
      if (tw == 0 && next0) issue(j0 + 2, 0, 0, 4);
      named_bar_sync(2, 256);  // c1, m1' from warpgroup 1
      const float c1A = sSc1[rA], c1B = sSc1[rB];
      mA = sM1[rA];
      mB = sM1[rB];
      lA *= c1A;
      lB *= c1B;
      store_p_packed(stg[0] + 8 * 8192, p, c1A, c1B, true, rA, rB, t4);  // c1 P0 over block 8 (S0 read it)
      fence_proxy_async();
      named_bar_arrive(3, 256);  // c1 P0 ready for warpgroup 1
      scale_o<kNew>(o, c1A, c1B);
      named_bar_sync(4, 256);  // warpgroup 1 stored P1 and issued c1 P0 V0R
      if (have1) {
#pragma unroll
        for (int cb = 0; cb < 4; ++cb) mbar_wait_uniform(&bar[9 + cb], par);
        const int valid1 = min(64, re - rb - 64 * j1);
        if (valid1 < 64) {
          zero_tail(stg[1], valid1, 0, 4, tw);
          fence_proxy_async();
          named_bar_sync(5, 128);
        }
        fence_regs(o);
        wg_fence();
        pv_gemm(o, kv1, 0);  // P1 V1L, P1 from shared memory
        wg_commit();
      }
      if (next0) {
        wg_fence();
        s_gemm<0, 4, 0, true>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
        if constexpr (kGate == 2) named_bar_arrive(7, 256);  // S0 blocks 0-3 issued: warpgroup 1 may issue S1
        wg_wait<1>();  // P1 V1L done: K1 blocks 0-3 and 8 are free
        named_bar_sync(5, 128);
        if (tw == 0 && next1) {
          issue(j1 + 2, 1, 0, 4);
          issue(j1 + 2, 1, 8, 9);
        }
        s_gemm<4, 9>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
        if constexpr (kGate == 1) named_bar_arrive(7, 256);  // all of S0 issued: warpgroup 1 may issue S1
      }
      wg_wait<0>();
      fence_regs(o);
      fence_regs(s);
    }
  } else {
    // ---------------- warpgroup 1: S1, softmax 1, O_R ----------------
    for (int i = 0; i < npairs; ++i) {
      const int j0 = 2 * i, j1 = j0 + 1;
      const bool have1 = j1 < ntiles, next0 = j0 + 2 < ntiles, next1 = j1 + 2 < ntiles;
      const uint32_t par = i & 1;
      if constexpr (kNew) named_bar_sync(7, 256);  // S0 of this pair issued first (one arrival per pair)
      if (have1) {  // S1 over K1 blocks 4-7, 0-3, 8 (the order of their refills)
        wg_fence();
        s_gemm<4, 8, 4, true>(s, sb, kv1, bar + 9, par);
        s_gemm<0, 4, 4>(s, sb, kv1, bar + 9, par);
        s_gemm<8, 9, 4>(s, sb, kv1, bar + 9, par);
        wg_commit();
        wg_wait<0>();
        fence_regs(s);
      }
      named_bar_sync(1, 256);  // c0, m0' from warpgroup 0
      const float c0A = sSc0[rA], c0B = sSc0[rB], m0A = sM0[rA], m0B = sM0[rB];
      float c1A = 1.f, c1B = 1.f, sumA = 0.f, sumB = 0.f;
      const int valid1 = have1 ? min(64, re - rb - 64 * j1) : 0;
      if (have1) {
        float mxA, mxB;
        if constexpr (kNew) tile_max_raw(s, valid1, sl2, t4, mxA, mxB);
        else tile_max(s, valid1, sl2, t4, mxA, mxB);
        mA = fmaxf(m0A, mxA);
        mB = fmaxf(m0B, mxB);
        c1A = (m0A == kNegInf) ? 0.f : fast_exp2(m0A - mA);
        c1B = (m0B == kNegInf) ? 0.f : fast_exp2(m0B - mB);
        if constexpr (kNew) tile_exp_fma(s, sl2, mA, mB, sumA, sumB);
        else tile_exp(s, mA, mB, sumA, sumB);
        pack_p(p, s);
      } else {
        mA = m0A;
        mB = m0B;
      }
      lA = lA * (c0A * c1A) + sumA;
      lB = lB * (c0B * c1B) + sumB;
      if (t4 == 0) {
        sSc1[rA] = c1A; sSc1[rB] = c1B;
        sM1[rA] = mA; sM1[rB] = mB;
      }
      named_bar_arrive(2, 256);  // c1, m1' ready for warpgroup 0 (P1 follows before barrier 4)
      // V0R / V1R rows past the context -> 0 before any wgmma of this warpgroup is in flight (K0 4-8
      // landed long ago: S0 waited on them, and S0 is complete: barrier 1)
#pragma unroll
      for (int cb = 4; cb < 9; ++cb) mbar_wait_uniform(&bar[cb], par);
      const int valid0 = min(64, re - rb - 64 * j0);
      if (valid0 < 64 || (have1 && valid1 < 64)) {
        if (valid0 < 64) zero_tail(stg[0], valid0, 4, 8, tw);
        if (have1 && valid1 < 64) zero_tail(stg[1], valid1, 4, 8, tw);
        fence_proxy_async();
        named_bar_sync(6, 128);
      }
      const float fA = c0A * c1A, fB = c0B * c1B;
      scale_o<kNew>(o, fA, fB);
      fence_regs(o);
      if (have1) {
        wg_fence();
        pv_gemm_rs(o, p, kv1, 1);  // P1 V1R, P1 from registers
        wg_commit();
        named_bar_sync(6, 128);  // every warp's S1 wgmma has read column block 8
        store_p_packed(stg[1] + 8 * 8192, p, 1.f, 1.f, false, rA, rB, t4);  // P1 for warpgroup 0's P1 V1L
        fence_proxy_async();
      }
      named_bar_sync(3, 256);  // c1 P0 from warpgroup 0
      wg_fence();
      pv_gemm(o, kv0, 1);  // c1 P0 V0R
      wg_commit();
      named_bar_arrive(4, 256);  // P1 stored, c1 P0 V0R issued: warpgroup 0 may issue P1 V1L and the next S0
      if (have1) {
        wg_wait<1>();  // P1 V1R done: K1 blocks 4-7 are free
        named_bar_sync(6, 128);
        if (tw == 0 && next1) issue(j1 + 2, 1, 4, 8);
      }
      wg_wait<0>();  // c1 P0 V0R done: K0 blocks 4-8 are free
      fence_regs(o);
      named_bar_sync(6, 128);
      if (tw == 0 && next0) issue(j0 + 2, 0, 4, 9);
    }
  }

  // l = l_L (warpgroup 0's partial sums) + l_R (warpgroup 1's); m is the same in both
  lA += __shfl_xor_sync(0xffffffffu, lA, 1);
  lA += __shfl_xor_sync(0xffffffffu, lA, 2);
  lB += __shfl_xor_sync(0xffffffffu, lB, 1);
  lB += __shfl_xor_sync(0xffffffffu, lB, 2);
  if (t4 == 0) {
    (wg == 0 ? sLL : sLR)[rA] = lA;
    (wg == 0 ? sLL : sLR)[rB] = lB;
  }
  __syncthreads();
  const float m0 = mA, m1 = mB;
  const float l0 = sLL[rA] + sLR[rA], l1 = sLL[rB] + sLR[rB];
  wg_store::store_rows(a, o, m0, m1, l0, l1, head0, H, rA, rB, wg, t4, qi, slot);
}

// ---------------------------------------------------------------------------------------------
// MLA decode, variant 5 (issue 12): the seesaw of variant 4 with the P0 V0 products taken early.
// O_R = c1 (c0 O_R + P0 V0R) + P1 V1R and O_L = c1 (c0 O_L + P0 V0L) + P1 V1L: both halves of
// P0 V0 need only P0 and c0, so warpgroup 1 issues P0 V0R right after warpgroup 0's softmax and
// runs its own softmax while P0 V0L / P0 V0R are on the tensor pipe; K0 is then released right after
// P0 V0 (early in the pair: blocks 0-3 by warpgroup 0, 4-8 by warpgroup 1 once both products are
// done), so the next S0's page has half a pair to arrive (variant 4 released K0 blocks 4-8 only
// after c1 P0 V0R at the end of the pair; ncu showed the next S0 waiting on them). K1 as in
// variant 4, with block 8 (P1) released by warpgroup 1 after both P1 V1 products.
// Named barriers: 1 P0/c0/m0' ready (WG0 -> WG1), 2 P1/c1/m1' ready (WG1 -> WG0), 3 P0 V0L done,
// 4 P1 V1L done (WG0 -> WG1), 5 / 6 warpgroup-local.
// ---------------------------------------------------------------------------------------------
__global__ void __launch_bounds__(256, 1)
    mla_decode_seesaw2_kernel(const __grid_constant__ CUtensorMap tmap, MqaArgs a, const int4* __restrict__ work) {
  using namespace sm90;
  using namespace wgs;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  const uint32_t sb = saddr(smem);
  float* sSc0 = reinterpret_cast<float*>(smem + kOffF);
  float* sM0 = sSc0 + 64;
  float* sSc1 = sM0 + 64;
  float* sM1 = sSc1 + 64;
  float* sLL = sM1 + 64;
  float* sLR = sLL + 64;
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + kOffBar);  // [stage * 9 + column block]

  const int4 wk = work[blockIdx.y];
  const int qi = wk.x, rb = wk.y, re = wk.z, slot = wk.w;
  const int head0 = blockIdx.x * 64, H = a.H;
  const int tid = threadIdx.x, wg = tid >> 7, tw = tid & 127, lane = tid & 31, w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const int rA = 16 * w4 + g, rB = rA + 8;
  const int ntiles = (re - rb + 63) / 64;
  const int npairs = (ntiles + 1) / 2;
  const int* bt = a.block_table + static_cast<size_t>(qi) * a.max_pages;
  const int ps = a.page_size;
  uint8_t* stg[2] = {smem + kOffK, smem + kOffK + kTile};
  const uint32_t kv0 = sb + kOffK, kv1 = sb + kOffK + kTile;

  auto issue = [&](int j, int st, int c0, int c1) {
    const int tok = rb + 64 * j;
    const int row = bt[tok / ps] * ps + tok % ps;
    for (int cb = c0; cb < c1; ++cb) {
      mbar_expect_tx(&bar[st * 9 + cb], 8192);
      tma_load_2d(stg[st] + cb * 8192, &tmap, &bar[st * 9 + cb], cb * 64, row);
    }
  };
  if (tid == 0) {
    for (int i = 0; i < 18; ++i) mbar_init(&bar[i], 1);
    mbar_fence_init();
  }
  __syncthreads();
  if (tid == 0) {
    if (ntiles > 0) issue(0, 0, 0, 9);
    if (ntiles > 1) issue(1, 1, 0, 9);
  }
  {
    const bf16* qsrc = a.q + (static_cast<size_t>(qi) * H + head0) * 576;
    for (int u = tid; u < 64 * 72; u += 256) {
      const int r = u / 72, ch = u % 72;
      const bool ok = head0 + r < H;
      cp_async16(smem + (ch >> 3) * 8192 + r * 128 + (((ch & 7) ^ (r & 7)) << 4),
                 qsrc + static_cast<size_t>(ok ? r : 0) * 576 + ch * 8, ok);
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
  }

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float s[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) s[i] = 0.f;
  float mA = kNegInf, mB = kNegInf, lA = 0.f, lB = 0.f;
  const float sl2 = a.sm_scale * kLog2e;

  if (wg == 0) {
    // ---------------- warpgroup 0: S0, softmax 0, O_L ----------------
    if (ntiles > 0) {
      fence_regs(s);
      wg_fence();
      s_gemm<0, 9>(s, sb, kv0, bar, 0);
      wg_commit();
      wg_wait<0>();
      fence_regs(s);
    }
    for (int i = 0; i < npairs; ++i) {
      const int j0 = 2 * i, j1 = j0 + 1;
      const bool have1 = j1 < ntiles, next0 = j0 + 2 < ntiles, next1 = j1 + 2 < ntiles;
      const uint32_t par = i & 1;
      const int valid0 = min(64, re - rb - 64 * j0);
      float mxA, mxB, sumA, sumB;
      tile_max(s, valid0, sl2, t4, mxA, mxB);
      const float mnA = fmaxf(mA, mxA), mnB = fmaxf(mB, mxB);
      const float c0A = (mA == kNegInf) ? 0.f : fast_exp2(mA - mnA), c0B = (mB == kNegInf) ? 0.f : fast_exp2(mB - mnB);
      tile_exp(s, mnA, mnB, sumA, sumB);
      lA = lA * c0A + sumA;
      lB = lB * c0B + sumB;
      if (t4 == 0) {
        sSc0[rA] = c0A; sSc0[rB] = c0B;
        sM0[rA] = mnA; sM0[rB] = mnB;
      }
      named_bar_sync(5, 128);  // every warp's S0 wgmma has read column block 8
      store_p(stg[0] + 8 * 8192, s, 1.f, 1.f, rA, rB, t4);
      if (valid0 < 64) zero_tail(stg[0], valid0, 0, 8, tw);  // both V halves (warpgroup 1 reads 4-7 after barrier 1)
      fence_proxy_async();
      named_bar_sync(5, 128);
      named_bar_arrive(1, 256);  // P0, c0, m0' ready
#pragma unroll
      for (int q = 0; q < 32; ++q) {
        o[4 * q] *= c0A; o[4 * q + 1] *= c0A; o[4 * q + 2] *= c0B; o[4 * q + 3] *= c0B;
      }
      fence_regs(o);
      wg_fence();
      pv_gemm(o, kv0, 0);
      wg_commit();
      wg_wait<0>();
      fence_regs(o);
      named_bar_sync(5, 128);    // P0 V0L done in every warp
      named_bar_arrive(3, 256);  // -> warpgroup 1 may reload K0 blocks 4-8 once its P0 V0R is done
      if (tw == 0 && next0) issue(j0 + 2, 0, 0, 4);
      named_bar_sync(2, 256);  // P1, c1, m1' from warpgroup 1
      const float c1A = sSc1[rA], c1B = sSc1[rB];
      mA = sM1[rA];
      mB = sM1[rB];
      lA *= c1A;
      lB *= c1B;
#pragma unroll
      for (int q = 0; q < 32; ++q) {
        o[4 * q] *= c1A; o[4 * q + 1] *= c1A; o[4 * q + 2] *= c1B; o[4 * q + 3] *= c1B;
      }
      fence_regs(o);
      if (have1) {
#pragma unroll
        for (int cb = 0; cb < 4; ++cb) mbar_wait_uniform(&bar[9 + cb], par);
        wg_fence();
        pv_gemm(o, kv1, 0);
        wg_commit();
      }
      if (next0) {
        fence_regs(s);
        wg_fence();
        s_gemm<0, 4>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
        wg_wait<1>();  // P1 V1L done: K1 blocks 0-3 are free
        named_bar_sync(5, 128);
        named_bar_arrive(4, 256);
        if (tw == 0 && next1) issue(j1 + 2, 1, 0, 4);
        s_gemm<4, 9>(s, sb, kv0, bar, par ^ 1);
        wg_commit();
        wg_wait<0>();
      } else {
        wg_wait<0>();
        named_bar_sync(5, 128);
        named_bar_arrive(4, 256);
      }
      fence_regs(o);
      fence_regs(s);
    }
  } else {
    // ---------------- warpgroup 1: S1, P0 V0R, softmax 1, P1 V1R ----------------
    for (int i = 0; i < npairs; ++i) {
      const int j0 = 2 * i, j1 = j0 + 1;
      const bool have1 = j1 < ntiles, next0 = j0 + 2 < ntiles, next1 = j1 + 2 < ntiles;
      const uint32_t par = i & 1;
      if (have1) {
        fence_regs(s);
        wg_fence();
        s_gemm<0, 9>(s, sb, kv1, bar + 9, par);
        wg_commit();
        wg_wait<0>();
        fence_regs(s);
      }
#pragma unroll
      for (int cb = 4; cb < 8; ++cb) mbar_wait_uniform(&bar[cb], par);
      named_bar_sync(1, 256);  // P0, c0, m0' from warpgroup 0 (and K0's tail zeroed)
      const float c0A = sSc0[rA], c0B = sSc0[rB], m0A = sM0[rA], m0B = sM0[rB];
#pragma unroll
      for (int q = 0; q < 32; ++q) {
        o[4 * q] *= c0A; o[4 * q + 1] *= c0A; o[4 * q + 2] *= c0B; o[4 * q + 3] *= c0B;
      }
      fence_regs(o);
      wg_fence();
      pv_gemm(o, kv0, 1);  // O_R = c0 O_R + P0 V0R, overlapping this warpgroup's softmax below
      wg_commit();
      float c1A = 1.f, c1B = 1.f, sumA = 0.f, sumB = 0.f;
      mA = m0A;
      mB = m0B;
      if (have1) {
        const int valid1 = min(64, re - rb - 64 * j1);
        float mxA, mxB;
        tile_max(s, valid1, sl2, t4, mxA, mxB);
        mA = fmaxf(m0A, mxA);
        mB = fmaxf(m0B, mxB);
        c1A = fast_exp2(m0A - mA);
        c1B = fast_exp2(m0B - mB);
        tile_exp(s, mA, mB, sumA, sumB);
        named_bar_sync(6, 128);  // every warp's S1 wgmma has read column block 8
        store_p(stg[1] + 8 * 8192, s, 1.f, 1.f, rA, rB, t4);
        if (valid1 < 64) zero_tail(stg[1], valid1, 0, 8, tw);
      }
      lA = lA * (c0A * c1A) + sumA;
      lB = lB * (c0B * c1B) + sumB;
      if (t4 == 0) {
        sSc1[rA] = c1A; sSc1[rB] = c1B;
        sM1[rA] = mA; sM1[rB] = mB;
      }
      fence_proxy_async();
      wg_wait<0>();  // P0 V0R done
      fence_regs(o);
      named_bar_sync(6, 128);    // P1 written and P0 V0R done in every warp of this warpgroup
      named_bar_sync(3, 256);    // P0 V0L done too: K0 blocks 4-8 (V0R and P0) are free
      if (tw == 0 && next0) issue(j0 + 2, 0, 4, 9);
      named_bar_arrive(2, 256);  // P1, c1, m1' ready
#pragma unroll
      for (int q = 0; q < 32; ++q) {
        o[4 * q] *= c1A; o[4 * q + 1] *= c1A; o[4 * q + 2] *= c1B; o[4 * q + 3] *= c1B;
      }
      fence_regs(o);
      if (have1) {
        wg_fence();
        pv_gemm(o, kv1, 1);
        wg_commit();
      }
      wg_wait<0>();
      fence_regs(o);
      named_bar_sync(4, 256);  // P1 V1L done (warpgroup 0)
      named_bar_sync(6, 128);  // P1 V1R done in every warp: K1 blocks 4-8 are free
      if (tw == 0 && next1) issue(j1 + 2, 1, 4, 9);
    }
  }

  lA += __shfl_xor_sync(0xffffffffu, lA, 1);
  lA += __shfl_xor_sync(0xffffffffu, lA, 2);
  lB += __shfl_xor_sync(0xffffffffu, lB, 1);
  lB += __shfl_xor_sync(0xffffffffu, lB, 2);
  if (t4 == 0) {
    (wg == 0 ? sLL : sLR)[rA] = lA;
    (wg == 0 ? sLL : sLR)[rB] = lB;
  }
  __syncthreads();
  const float m0 = mA, m1 = mB;
  const float l0 = sLL[rA] + sLR[rA], l1 = sLL[rB] + sLR[rB];
  const int hA = head0 + rA, hB = head0 + rB;
  const bool okA = hA < H, okB = hB < H;
  const int c0 = wg * 256 + 2 * t4;
  if (slot < 0) {
    const float sA = (a.sink && okA) ? a.sink[hA] * kLog2e : kNegInf;
    const float sB = (a.sink && okB) ? a.sink[hB] * kLog2e : kNegInf;
    const float MA = fmaxf(m0, sA), MB = fmaxf(m1, sB);
    const float wA = (m0 == kNegInf) ? 0.f : exp2f(m0 - MA), wB = (m1 == kNegInf) ? 0.f : exp2f(m1 - MB);
    const float dA = l0 * wA + (sA == kNegInf ? 0.f : exp2f(sA - MA));
    const float dB = l1 * wB + (sB == kNegInf ? 0.f : exp2f(sB - MB));
    const float fA = dA > 0.f ? wA / dA : 0.f, fB = dB > 0.f ? wB / dB : 0.f;
    bf16* oA = a.out + (static_cast<size_t>(qi) * H + hA) * 512 + c0;
    bf16* oB = a.out + (static_cast<size_t>(qi) * H + hB) * 512 + c0;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      if (okA) *reinterpret_cast<uint32_t*>(oA + 8 * i) = pack_bf16(o[4 * i] * fA, o[4 * i + 1] * fA);
      if (okB) *reinterpret_cast<uint32_t*>(oB + 8 * i) = pack_bf16(o[4 * i + 2] * fB, o[4 * i + 3] * fB);
    }
    if (a.lse && wg == 0 && t4 == 0) {
      if (okA) a.lse[static_cast<size_t>(qi) * H + hA] = dA > 0.f ? (MA + log2f(dA)) / kLog2e : kNegInf;
      if (okB) a.lse[static_cast<size_t>(qi) * H + hB] = dB > 0.f ? (MB + log2f(dB)) / kLog2e : kNegInf;
    }
  } else {
    const float fA = l0 > 0.f ? 1.f / l0 : 0.f, fB = l1 > 0.f ? 1.f / l1 : 0.f;
    float* oA = a.o_part + (static_cast<size_t>(slot) * H + hA) * 512 + c0;
    float* oB = a.o_part + (static_cast<size_t>(slot) * H + hB) * 512 + c0;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      if (okA) *reinterpret_cast<float2*>(oA + 8 * i) = make_float2(o[4 * i] * fA, o[4 * i + 1] * fA);
      if (okB) *reinterpret_cast<float2*>(oB + 8 * i) = make_float2(o[4 * i + 2] * fB, o[4 * i + 3] * fB);
    }
    if (wg == 0 && t4 == 0) {
      if (okA) a.lse_part[static_cast<size_t>(slot) * H + hA] = l0 > 0.f ? m0 + log2f(l0) : kNegInf;
      if (okB) a.lse_part[static_cast<size_t>(slot) * H + hB] = l1 > 0.f ? m1 + log2f(l1) : kNegInf;
    }
  }
}

// Tensor map of the paged latent cache viewed as [rows, 576] bf16, box 64 x 64, 128-B swizzle.
CUtensorMap latent_cache_map(const bf16* cache, long rows, int box_rows) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  CUtensorMap m;
  const cuuint64_t dims[2] = {576, static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {576 * 2};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t estr[2] = {1, 1};
  const CUresult r = encode(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(cache), dims, strides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw std::runtime_error("mla_decode: cuTensorMapEncodeTiled failed (" + std::to_string(r) + ")");
  return m;
}

// SERVESIM_MLA_NOLOAD=1 (timing diagnostic only, wrong results): variant 4 loads tiles 0 and 1
// and then reuse them instead of loading the later pages, i.e. the seesaw schedule without page loads.
int seesaw_noload() {
  static int v = [] {
    const char* e = std::getenv("SERVESIM_MLA_NOLOAD");
    return e && std::atoi(e) == 1 ? -1 : 0;
  }();
  return v;
}
void launch_mla_wgmma(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s, bool ns4, int seesaw = 0) {
  if (a.H <= 0) throw std::invalid_argument("mqa: head count must be positive");
  if (!a.q || !a.out) throw std::invalid_argument("mqa: q and out are required");
  if (plan.n_slots > 0 && (!a.o_part || !a.lse_part)) throw std::invalid_argument("mqa: split plan needs o_part/lse_part");
  if (plan.nq != a.nq) throw std::invalid_argument("mqa: plan built for another query count");
  static bool attr = false, attr4 = false;
  if (!ns4 && !attr) {
    SS_CUDA(cudaFuncSetAttribute(mla_decode_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, wgk::kSmem));
    attr = true;
  }
  if (ns4 && !attr4) {
    SS_CUDA(cudaFuncSetAttribute(mla_decode_wgmma4_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, wgk4::kSmem));
    attr4 = true;
  }
  static bool attrS = false;
  if (seesaw && !attrS) {
    SS_CUDA(cudaFuncSetAttribute(mla_decode_seesaw_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, wgs::kSmem));
    SS_CUDA(cudaFuncSetAttribute(mla_decode_seesaw_rs_kernel<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, wgs::kSmem));
    SS_CUDA(cudaFuncSetAttribute(mla_decode_seesaw_rs_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, wgs::kSmem));
    SS_CUDA(cudaFuncSetAttribute(mla_decode_seesaw_rs_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, wgs::kSmem));
    SS_CUDA(cudaFuncSetAttribute(mla_decode_seesaw2_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, wgs::kSmem));
    attrS = true;
  }
  const long pages = a.cache_pages > 0 ? a.cache_pages : (1L << 24);
  const CUtensorMap tm = latent_cache_map(a.cache, pages * a.page_size, ns4 ? 32 : 64);
  const int groups = (a.H + 63) / 64;
  if (plan.n_work > 0) {
    if (seesaw == 2) mla_decode_seesaw2_kernel<<<dim3(groups, plan.n_work), 256, wgs::kSmem, s>>>(tm, a, plan.work.p);
    else if (seesaw == 7) mla_decode_seesaw_rs_kernel<0><<<dim3(groups, plan.n_work), 256, wgs::kSmem, s>>>(tm, a, plan.work.p);
    else if (seesaw == 8) mla_decode_seesaw_rs_kernel<1><<<dim3(groups, plan.n_work), 256, wgs::kSmem, s>>>(tm, a, plan.work.p);
    else if (seesaw == 9) mla_decode_seesaw_rs_kernel<2><<<dim3(groups, plan.n_work), 256, wgs::kSmem, s>>>(tm, a, plan.work.p);
    else if (seesaw) mla_decode_seesaw_kernel<<<dim3(groups, plan.n_work), 256, wgs::kSmem, s>>>(tm, a, plan.work.p, seesaw_noload());
    else if (ns4) mla_decode_wgmma4_kernel<<<dim3(groups, plan.n_work), 256, wgk4::kSmem, s>>>(tm, a, plan.work.p);
    else mla_decode_wgmma_kernel<<<dim3(groups, plan.n_work), 256, wgk::kSmem, s>>>(tm, a, plan.work.p);
    SS_LAUNCH_CHECK();
  }
  if (plan.n_slots > 0) {
    mla_combine_kernel<<<dim3(a.nq, a.H), 128, 0, s>>>(a, plan.q_slot_begin.p);
    SS_LAUNCH_CHECK();
  }
}

MqaPlan plan_from_split(const std::vector<int>& rows, long per_rows) {
  MqaPlan p;
  p.nq = static_cast<int>(rows.size());
  std::vector<int4> work;
  std::vector<int> qsb(1, 0);
  int slot = 0;
  for (int q = 0; q < p.nq; ++q) {
    const int n = std::max(rows[q], 0);
    const int ns = static_cast<int>(std::max<long>(1, (n + per_rows - 1) / per_rows));
    if (ns == 1) {
      work.push_back(make_int4(q, 0, n, -1));
    } else {
      int len = (n + ns - 1) / ns;
      len = (len + 63) / 64 * 64;
      for (int b = 0; b < n; b += len) work.push_back(make_int4(q, b, std::min(n, b + len), slot++));
    }
    qsb.push_back(slot);
  }
  std::stable_sort(work.begin(), work.end(), [](const int4& x, const int4& y) { return (x.z - x.y) > (y.z - y.y); });
  p.n_work = static_cast<int>(work.size());
  p.n_slots = slot;
  p.work.upload(work);
  p.q_slot_begin.upload(qsb);
  return p;
}
}  // namespace

MqaPlan mla_decode_plan(const std::vector<int>& rows, int H) {
  const int groups = std::max(1, (H + 63) / 64);
  const long W = std::max(1, device_sm_count() / groups);  // CTAs of one head group per wave (1 CTA/SM)
  long tmax = 1;
  for (int r : rows) tmax = std::max<long>(tmax, (std::max(r, 0) + 63) / 64);
  // candidate tiles per work item: ceil(tmax / s), at least 4 (256 rows); cost = waves x (per + 2)
  long best_per = tmax;
  double best_cost = 1e300;
  for (long s = 1; s <= std::min<long>(tmax, 1024); ++s) {
    const long per = std::max<long>(4, (tmax + s - 1) / s);
    long items = 0;
    for (int r : rows) items += std::max<long>(1, ((std::max(r, 0) + 63) / 64 + per - 1) / per);
    const double cost = static_cast<double>((items + W - 1) / W) * (per + 2);
    if (cost < best_cost - 1e-9) { best_cost = cost; best_per = per; }
    if (per == 4) break;
  }
  return plan_from_split(rows, best_per * 64);
}

MqaPlan mqa_make_plan(const std::vector<int>& rows, int target_items, int min_split_rows, int force_split_rows) {
  MqaPlan p;
  p.nq = static_cast<int>(rows.size());
  if (target_items <= 0) target_items = 2 * device_sm_count();
  long total = 0;
  for (int r : rows) total += std::max(r, 0);
  const int tile = 64;
  long per = force_split_rows > 0 ? force_split_rows
                                  : std::max<long>(min_split_rows, (total + target_items - 1) / std::max(1, target_items));
  per = (per + tile - 1) / tile * tile;
  std::vector<int4> work;
  std::vector<int> qsb(1, 0);
  int slot = 0;
  for (int q = 0; q < p.nq; ++q) {
    const int n = std::max(rows[q], 0);
    const int ns = static_cast<int>(std::max<long>(1, (n + per - 1) / per));
    if (ns == 1) {
      work.push_back(make_int4(q, 0, n, -1));
    } else {
      int len = (n + ns - 1) / ns;
      len = (len + tile - 1) / tile * tile;
      for (int b = 0; b < n; b += len) work.push_back(make_int4(q, b, std::min(n, b + len), slot++));
    }
    qsb.push_back(slot);
  }
  std::stable_sort(work.begin(), work.end(), [](const int4& x, const int4& y) { return (x.z - x.y) > (y.z - y.y); });
  p.n_work = static_cast<int>(work.size());
  p.n_slots = slot;
  p.work.upload(work);
  p.q_slot_begin.upload(qsb);
  return p;
}

void mla_combine(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s) {
  if (plan.n_slots > 0) {
    mla_combine_kernel<<<dim3(a.nq, a.H), 128, 0, s>>>(a, plan.q_slot_begin.p);
    SS_LAUNCH_CHECK();
  }
}

const char* mla_decode_config(int H, int variant) {
  if (variant == 0) return "wgmma_tma_m64_tn64";
  if (variant == 3) return "wgmma_tma_m64_tn32_ns4";
  if (variant == 4) return "wgmma_tma_m64_tn64_seesaw";
  if (variant == 5) return "wgmma_tma_m64_tn64_seesaw_early_pv0";
  if (variant == 10) return "wgmma_tma_m64_tn64_seesaw_rsp";
  if (variant == 11) return "wgmma_tma_m64_tn64_seesaw_rsp_s0first";
  if (variant == 12) return "wgmma_tma_m64_tn64_seesaw_rsp_fastsm";
  if (H >= 48 && H % 48 == 0) return variant == 1 ? "mt3_tn32_ns2" : "mt3_tn64_ns2";
  return H > 16 ? "mt2_tn32_ns3" : "mt1_tn32_ns3";
}
void mla_decode(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s, int variant) {
  if (!a.cache || !a.block_table) throw std::invalid_argument("mla_decode: cache and block_table required");
  if (variant >= 6 && variant <= 9)
    throw std::invalid_argument("mla_decode: variants 6-9 were removed (issue 12, eleventh session; NOTES.md)");
  if (variant >= 0 && variant <= 12 && variant != 1 && variant != 2 && a.page_size % 64 == 0) {
    launch_mla_wgmma(a, plan, s, variant == 3,
                     variant == 4 ? 1 : variant == 5 ? 2 : variant == 10 ? 7 : variant == 11 ? 8 : variant == 12 ? 9 : 0);
  } else if (a.H >= 48 && a.H % 48 == 0) {
    if (variant == 1) launch_mqa<576, 3, 32, 2, false>(a, plan, s);
    else launch_mqa<576, 3, 64, 2, false>(a, plan, s);
  } else if (a.H > 16) {
    launch_mqa<576, 2, 32, 3, false>(a, plan, s);
  } else {
    launch_mqa<576, 1, 32, 3, false>(a, plan, s);
  }
}
namespace {
int g_v4_attn_variant = 0;
// The V4 kernel that variant 0 means at H % 64 == 0: 2 = v4_attn_wgmma_kernel (issue 12, second
// session), 3 = the warp-specialised v4_attn_ws (dsv4.cu, issue 12, seventh session).
constexpr int kV4AttnDefault = 3;  // 1.2-1.6x variant 2 at every point measured (NOTES.md, seventh session)
int v4_attn_effective(int H) {
  const int v = g_v4_attn_variant == 0 ? kV4AttnDefault : g_v4_attn_variant;
  return (H % 64 == 0 && (v == 2 || v == 3)) ? v : 1;
}
}  // namespace
const char* v4_attn_config(int H) {
  if (v4_attn_effective(H) == 3) return "wgmma_ws_m64_tn64";
  if (v4_attn_effective(H) == 2) return "wgmma_m64_tn64";
  if (H % 64 == 0) return "mt4_tn64_ns2";
  return H > 16 ? "mt2_tn32_ns3" : "mt1_tn32_ns3";
}
void v4_attn_set_variant(int v) { g_v4_attn_variant = v; }
bool v4_attn_uses_wgmma(int H) { return v4_attn_effective(H) != 1; }

void v4_attn(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s) {
  if (!a.pool || !a.indices) throw std::invalid_argument("v4_attn: pool and indices required");
  if (v4_attn_effective(a.H) == 3) {
    v4_attn_ws(a, plan, s);
    return;
  }
  if (v4_attn_uses_wgmma(a.H)) {
    if (!a.q || !a.out) throw std::invalid_argument("v4_attn: q and out are required");
    if (plan.n_slots > 0 && (!a.o_part || !a.lse_part)) throw std::invalid_argument("v4_attn: split plan needs o_part/lse_part");
    if (plan.nq != a.nq) throw std::invalid_argument("v4_attn: plan built for another query count");
    static bool attr = false;
    if (!attr) {
      SS_CUDA(cudaFuncSetAttribute(v4_attn_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, v4k::kSmem));
      attr = true;
    }
    if (plan.n_work > 0) {
      v4_attn_wgmma_kernel<<<dim3(a.H / 64, plan.n_work), 256, v4k::kSmem, s>>>(a, plan.work.p);
      SS_LAUNCH_CHECK();
    }
    if (plan.n_slots > 0) {
      mla_combine_kernel<<<dim3(a.nq, a.H), 128, 0, s>>>(a, plan.q_slot_begin.p);
      SS_LAUNCH_CHECK();
    }
    return;
  }
  if (a.H % 64 == 0) launch_mqa<512, 4, 64, 2, true>(a, plan, s);
  else if (a.H > 16) launch_mqa<512, 2, 32, 3, true>(a, plan, s);
  else launch_mqa<512, 1, 32, 3, true>(a, plan, s);
}

}  // namespace servesim::attn
