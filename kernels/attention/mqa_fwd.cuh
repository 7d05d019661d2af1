// servesim attention kernels: flash-decoding MQA core for K3 MLA decode and the V4 attention
// variants (mla_decode variants 1 / 2, v4_attn variant 1; mma.sync). See mqa.cuh. Block = (work item,
// head group of 16*MT heads), 2*MT warps: warp w owns heads 16*(w/2).. and, in the score step, keys
// half (w%2) of the tile, in the PV step output columns 256*(w%2)..+256 (fp32 accumulators, 128
// registers). Also its split-KV merge, mqa_combine_kernel, and its launcher launch_mqa.
// Part of mqa.cu's translation unit, not a standalone header: mqa.cu includes the kernel parts in
// their original order after defining kLog2e / kNegInf (one unit keeps the code cicc / ptxas
// generate for every kernel exactly as before the file was split; see mqa.cu).
#pragma once
#include "attention/hopper.cuh"
#include "attention/mqa.cuh"

namespace servesim::attn {
namespace {

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

}  // namespace
}  // namespace servesim::attn
