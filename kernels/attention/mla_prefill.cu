// servesim attention kernels: FlashAttention-2-style causal prefill with a cached prefix
// (mma.sync m16n8k16 BF16, Q fragments in registers, K/V double-buffered with cp.async).
#include "attention/mla_prefill.cuh"

namespace servesim::attn {

namespace {
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -INFINITY;

template <int DQK, int DV, int BM, int BN>
struct PfCfg {
  static constexpr int NW = BM / 16, NT = NW * 32;
  static constexpr int LDK = DQK + 8, LDV = DV + 8;
  static constexpr size_t q_bytes = static_cast<size_t>(BM) * LDK * 2;
  static constexpr size_t k_bytes = 2ull * BN * LDK * 2;
  static constexpr size_t v_bytes = 2ull * BN * LDV * 2;
  static constexpr size_t smem = q_bytes + k_bytes + v_bytes;
};

template <int DQK, int DV, int BM, int BN>
__global__ void __launch_bounds__(BM * 2) mha_prefill_kernel(MhaPrefillArgs a) {
  using C = PfCfg<DQK, DV, BM, BN>;
  constexpr int NT = C::NT, LDK = C::LDK, LDV = C::LDV;
  constexpr int KS = DQK / 16;  // k-steps of QK
  constexpr int NJ = BN / 8;    // n-tiles of S per warp
  constexpr int NO = DV / 8;    // n-tiles of O per warp
  extern __shared__ __align__(16) uint8_t smem[];
  bf16* Qs = reinterpret_cast<bf16*>(smem);
  bf16* Ks = reinterpret_cast<bf16*>(smem + C::q_bytes);
  bf16* Vs = reinterpret_cast<bf16*>(smem + C::q_bytes + C::k_bytes);

  const int H = a.H, N = a.N, P = a.P, T = P + N;
  const int qt = gridDim.x - 1 - blockIdx.x;  // heaviest tiles first
  const int h = blockIdx.y;
  const int q0 = qt * BM;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;

  {
    constexpr int CH = DQK / 8;
    for (int u = tid; u < BM * CH; u += NT) {
      const int r = u / CH, ch = u % CH;
      const bool ok = q0 + r < N;
      cp_async16(Qs + r * LDK + ch * 8, a.q + (static_cast<size_t>(ok ? q0 + r : 0) * H + h) * DQK + ch * 8, ok);
    }
    cp_async_commit();
  }
  const int kv_end = min(T, P + q0 + BM);
  const int ntiles = (kv_end + BN - 1) / BN;
  auto issue = [&](int it, int st) {
    const int k0 = it * BN;
    constexpr int CK = DQK / 8, CV = DV / 8;
    bf16* kd = Ks + static_cast<size_t>(st) * BN * LDK;
    bf16* vd = Vs + static_cast<size_t>(st) * BN * LDV;
    for (int u = tid; u < BN * CK; u += NT) {
      const int r = u / CK, ch = u % CK;
      const bool ok = k0 + r < T;
      cp_async16(kd + r * LDK + ch * 8, a.k + (static_cast<size_t>(ok ? k0 + r : 0) * H + h) * DQK + ch * 8, ok);
    }
    for (int u = tid; u < BN * CV; u += NT) {
      const int r = u / CV, ch = u % CV;
      const bool ok = k0 + r < T;
      cp_async16(vd + r * LDV + ch * 8, a.v + (static_cast<size_t>(ok ? k0 + r : 0) * H + h) * DV + ch * 8, ok);
    }
  };
  if (ntiles > 0) issue(0, 0);
  cp_async_commit();

  uint32_t qf[KS][4];
  float O[NO][4];
#pragma unroll
  for (int j = 0; j < NO; ++j) O[j][0] = O[j][1] = O[j][2] = O[j][3] = 0.f;
  float mA = kNegInf, mB = kNegInf, lA = 0.f, lB = 0.f;
  const float sl2 = a.sm_scale * kLog2e;
  const int lrow = (lane & 7) + ((lane >> 4) << 3);
  const int lcol = ((lane >> 3) & 1) << 3;
  const int trow = (lane & 7) + (((lane >> 3) & 1) << 3);
  const int tcol = (lane >> 4) << 3;
  const int qposA = P + q0 + warp * 16 + g, qposB = qposA + 8;
  const int warp_last = P + q0 + warp * 16 + 15;  // last query position of this warp

  for (int it = 0; it < ntiles; ++it) {
    const int st = it & 1;
    if (it + 1 < ntiles) issue(it + 1, st ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int ks = 0; ks < KS; ++ks)
        ldsm_x4(qf[ks], Qs + (warp * 16 + (lane & 15)) * LDK + ks * 16 + ((lane >> 4) << 3));
    }
    const int k0 = it * BN;
    if (k0 <= warp_last) {  // warps whose queries all precede this tile skip it
      const bf16* Kt = Ks + static_cast<size_t>(st) * BN * LDK;
      const bf16* Vt = Vs + static_cast<size_t>(st) * BN * LDV;
      float S[NJ][4];
#pragma unroll
      for (int j = 0; j < NJ; ++j) S[j][0] = S[j][1] = S[j][2] = S[j][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
        for (int np = 0; np < NJ / 2; ++np) {
          uint32_t b[4];
          ldsm_x4(b, Kt + (np * 16 + lrow) * LDK + ks * 16 + lcol);
          mma_bf16(S[2 * np], qf[ks], b[0], b[1]);
          mma_bf16(S[2 * np + 1], qf[ks], b[2], b[3]);
        }
      }
      const bool need_mask = (k0 + BN - 1 > P + q0 + warp * 16) || (k0 + BN > T);
      float mxA = kNegInf, mxB = kNegInf;
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int kj = k0 + 8 * j + 2 * t + e;
          float sa = S[j][e] * sl2, sb = S[j][2 + e] * sl2;
          if (need_mask) {
            if (kj > qposA || kj >= T) sa = kNegInf;
            if (kj > qposB || kj >= T) sb = kNegInf;
          }
          S[j][e] = sa;
          S[j][2 + e] = sb;
          mxA = fmaxf(mxA, sa);
          mxB = fmaxf(mxB, sb);
        }
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
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        S[j][0] = fast_exp2(S[j][0] - bA);
        S[j][1] = fast_exp2(S[j][1] - bA);
        S[j][2] = fast_exp2(S[j][2] - bB);
        S[j][3] = fast_exp2(S[j][3] - bB);
        sumA += S[j][0] + S[j][1];
        sumB += S[j][2] + S[j][3];
      }
      lA = lA * alA + sumA;
      lB = lB * alB + sumB;
      mA = mnA;
      mB = mnB;
#pragma unroll
      for (int j = 0; j < NO; ++j) {
        O[j][0] *= alA; O[j][1] *= alA; O[j][2] *= alB; O[j][3] *= alB;
      }
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        const uint32_t pa[4] = {pack_bf16(S[2 * kk][0], S[2 * kk][1]), pack_bf16(S[2 * kk][2], S[2 * kk][3]),
                                pack_bf16(S[2 * kk + 1][0], S[2 * kk + 1][1]),
                                pack_bf16(S[2 * kk + 1][2], S[2 * kk + 1][3])};
#pragma unroll
        for (int np = 0; np < NO / 2; ++np) {
          uint32_t b[4];
          ldsm_x4_t(b, Vt + (kk * 16 + trow) * LDV + np * 16 + tcol);
          mma_bf16(O[2 * np], pa, b[0], b[1]);
          mma_bf16(O[2 * np + 1], pa, b[2], b[3]);
        }
      }
    }
    __syncthreads();
  }
  cp_async_wait<0>();
  lA += __shfl_xor_sync(0xffffffffu, lA, 1);
  lA += __shfl_xor_sync(0xffffffffu, lA, 2);
  lB += __shfl_xor_sync(0xffffffffu, lB, 1);
  lB += __shfl_xor_sync(0xffffffffu, lB, 2);
  const float fA = lA > 0.f ? 1.f / lA : 0.f, fB = lB > 0.f ? 1.f / lB : 0.f;
  const int iA = q0 + warp * 16 + g, iB = iA + 8;
  if (iA < N) {
    bf16* o = a.out + (static_cast<size_t>(iA) * H + h) * DV;
#pragma unroll
    for (int j = 0; j < NO; ++j) *reinterpret_cast<uint32_t*>(o + 8 * j + 2 * t) = pack_bf16(O[j][0] * fA, O[j][1] * fA);
  }
  if (iB < N) {
    bf16* o = a.out + (static_cast<size_t>(iB) * H + h) * DV;
#pragma unroll
    for (int j = 0; j < NO; ++j) *reinterpret_cast<uint32_t*>(o + 8 * j + 2 * t) = pack_bf16(O[j][2] * fB, O[j][3] * fB);
  }
}

template <int BM>
void launch_pf(const MhaPrefillArgs& a, cudaStream_t s) {
  using C = PfCfg<192, 128, BM, 64>;
  auto kern = mha_prefill_kernel<192, 128, BM, 64>;
  static bool attr = false;
  if (!attr) {
    SS_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::smem)));
    attr = true;
  }
  kern<<<dim3((a.N + BM - 1) / BM, a.H), C::NT, C::smem, s>>>(a);
  SS_LAUNCH_CHECK();
}
}  // namespace

void mla_prefill(const MhaPrefillArgs& a, cudaStream_t s, int variant) {
  if (a.N <= 0 || a.H <= 0 || a.P < 0) throw std::invalid_argument("mla_prefill: bad sizes");
  if (!a.q || !a.k || !a.v || !a.out) throw std::invalid_argument("mla_prefill: null pointer");
  if (variant == 0)
    launch_pf<64>(a, s);
  else if (variant == 1)
    launch_pf<128>(a, s);
  else if (variant >= 2 && variant <= 4)
    mla_prefill_wgmma(a, s, variant - 2);
  else
    throw std::invalid_argument("mla_prefill: unknown variant");
}

const char* mla_prefill_variant_name(int variant) {
  return variant == 0 ? "bm64" : variant == 1 ? "bm128" : variant == 2 ? "wgmma_tma_bm128_bn128"
         : variant == 3 ? "wgmma_tma_bm128_bn128_overlap" : variant == 4 ? "wgmma_tma_bm128_bn128_pingpong" : "unknown";
}

}  // namespace servesim::attn
