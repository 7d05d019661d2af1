// servesim attention kernels: KDA chunked prefill (two kernels: K1 per (chunk, head) prep, K2 the
// recurrence over chunks) and its plan. Recurrent decode: kda_decode.cu; short conv and gated
// RMSNorm: kda_conv.cu. See kda.cuh for shapes and NOTES.md for the algebra and the measurements.
#include "attention/kda.cuh"

namespace servesim::attn {

namespace {
constexpr int KD = kKdaD;
constexpr int KC = kKdaChunk;

__device__ __forceinline__ float bf(bf16 v) { return __bfloat162float(v); }

// ------------------------------------------------------------------------------------------
// K1: per (chunk, head), 128 threads (thread = channel d in the gate step). q, k, g arrive as
// 16-B vectors; q~/k~/k^ are kept as bf16 in shared memory and the two 16x16x128 products
// (k~ k^T and q~ k^T) run on mma.sync (warps 0 and 1); (I + A)^-1 by fp32 forward substitution.
// ------------------------------------------------------------------------------------------
constexpr int KLDB = KD + 8;  // bf16 row pitch (16-B skew)
__global__ void __launch_bounds__(128) kda_prep_kernel(KdaPrefillArgs a, const int* __restrict__ chunk_start,
                                                       const int* __restrict__ chunk_len, uint8_t* __restrict__ ws) {
  const int c = blockIdx.x, h = blockIdx.y, d = threadIdx.x, H = a.H;
  const int t0 = chunk_start[c], nc = chunk_len[c];
  __shared__ float qs[KC][KD + 1], ks[KC][KD + 1], gs[KC][KD + 1];
  __shared__ __align__(16) bf16 Ktb[KC * KLDB], Qtb[KC * KLDB], Khb[KC * KLDB];
  __shared__ float Am[KC][KC + 1];
  __shared__ float bet[KC], qinv[KC], kinv[KC];

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int u = d + 128 * i, r = u >> 4, c8 = (u & 15) * 8;
    float fq[8] = {}, fk[8] = {}, fg[8] = {};
    if (r < nc) {
      const size_t off = (static_cast<size_t>(t0 + r) * H + h) * KD + c8;
      const uint4 vq = *reinterpret_cast<const uint4*>(a.q + off);
      const uint4 vk = *reinterpret_cast<const uint4*>(a.k + off);
      const uint4 vg = *reinterpret_cast<const uint4*>(a.g + off);
      const bf16* pq = reinterpret_cast<const bf16*>(&vq);
      const bf16* pk = reinterpret_cast<const bf16*>(&vk);
      const bf16* pg = reinterpret_cast<const bf16*>(&vg);
#pragma unroll
      for (int e = 0; e < 8; ++e) { fq[e] = bf(pq[e]); fk[e] = bf(pk[e]); fg[e] = bf(pg[e]); }
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) { qs[r][c8 + e] = fq[e]; ks[r][c8 + e] = fk[e]; gs[r][c8 + e] = fg[e]; }
  }
  if (d < KC) bet[d] = d < nc ? sigmoidf_(bf(a.beta[static_cast<size_t>(t0 + d) * H + h])) : 0.f;
  __syncthreads();
  {
    const int warp = d >> 5, lane = d & 31;
#pragma unroll
    for (int rr = 0; rr < 4; ++rr) {
      const int r = warp * 4 + rr;
      float sq = 0.f, sk = 0.f;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float x = qs[r][lane + 32 * i], y = ks[r][lane + 32 * i];
        sq += x * x;
        sk += y * y;
      }
      sq = warp_sum(sq);
      sk = warp_sum(sk);
      if (lane == 0) {
        qinv[r] = rsqrtf(sq + 1e-6f);
        kinv[r] = rsqrtf(sk + 1e-6f);
      }
    }
  }
  __syncthreads();

  const float ea = __expf(a.A_log[h]);
  const float dtb = a.dt_bias[h * KD + d];
  float Gr[KC];
  float G = 0.f;
#pragma unroll
  for (int r = 0; r < KC; ++r) {
    const float gv = r < nc ? a.lower_bound * sigmoidf_(ea * (gs[r][d] + dtb)) : 0.f;
    G += gv;
    Gr[r] = G;
  }
  const float eGC = __expf(G);
  uint8_t* base = ws + (static_cast<size_t>(c) * H + h) * kKdaChunkBytes;
  bf16* Qt = reinterpret_cast<bf16*>(base);
  bf16* Kt = Qt + KC * KD;
  bf16* Kd = Kt + KC * KD;
  bf16* INVb = Kd + KC * KD;
  bf16* Mq = INVb + KC * KC;
  float* dec = reinterpret_cast<float*>(Mq + KC * KC);
#pragma unroll
  for (int r = 0; r < KC; ++r) {
    const float kn = ks[r][d] * kinv[r];
    const float qn = qs[r][d] * qinv[r];
    const float e = __expf(Gr[r]);
    const float ei = __frcp_rn(e);
    const bf16 kt = __float2bfloat16(kn * e), qt = __float2bfloat16(qn * e * a.scale);
    Qt[r * KD + d] = qt;
    Kt[r * KD + d] = kt;
    Kd[r * KD + d] = __float2bfloat16(kn * ei * eGC);
    Qtb[r * KLDB + d] = qt;
    Ktb[r * KLDB + d] = kt;
    Khb[r * KLDB + d] = __float2bfloat16(kn * ei);
  }
  dec[d] = eGC;
  __syncthreads();
  const int warp = d >> 5, lane = d & 31, g = lane >> 2, t = lane & 3;
  if (warp < 2) {
    // warp 0: A = k~ k^^T (strict lower, * beta_t) ; warp 1: Mqk = q~ k^^T (lower incl. diagonal)
    const bf16* Asrc = warp == 0 ? Ktb : Qtb;
    const int lrow = (lane & 7) + ((lane >> 4) << 3);
    const int lcol = ((lane >> 3) & 1) << 3;
    float acc[2][4] = {};
#pragma unroll
    for (int kk = 0; kk < KD / 16; ++kk) {
      uint32_t af[4], b[4];
      ldsm_x4(af, Asrc + (lane & 15) * KLDB + kk * 16 + ((lane >> 4) << 3));
      ldsm_x4(b, Khb + lrow * KLDB + kk * 16 + lcol);
      mma_bf16(acc[0], af, b[0], b[1]);
      mma_bf16(acc[1], af, b[2], b[3]);
    }
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int tt = g + (e >> 1) * 8, ss = 8 * j + 2 * t + (e & 1);
        if (warp == 0) Am[tt][ss] = (ss < tt) ? bet[tt] * acc[j][e] : 0.f;
        else Mq[tt * KC + ss] = __float2bfloat16((ss <= tt) ? acc[j][e] : 0.f);
      }
  }
  __syncthreads();
  if (d < KC) {
    // Column j of X = (I + A)^-1 by forward substitution (A strictly lower), then * beta_j.
    const int j = d;
    float X[KC];
#pragma unroll
    for (int tt = 0; tt < KC; ++tt) {
      float acc = (tt == j) ? 1.f : 0.f;
#pragma unroll
      for (int ss = 0; ss < tt; ++ss) acc = fmaf(-Am[tt][ss], X[ss], acc);
      X[tt] = acc;
    }
#pragma unroll
    for (int tt = 0; tt < KC; ++tt) INVb[tt * KC + j] = __float2bfloat16(X[tt] * bet[j]);
  }
}

// ------------------------------------------------------------------------------------------
// K2: per (V slice of 16*NW, head, sequence); warp = 16 V rows; state S^T [V x K] fp32 in the
// mma accumulators (16 n-tiles of 8 K columns).
// ------------------------------------------------------------------------------------------
template <int NW>
struct KdaStage {
  static constexpr int VB = 16 * NW, LDK = KD + 8, LDC = KC + 8, LDV = VB + 8;
  bf16 Qt[KC * LDK], Kt[KC * LDK], Kd[KC * LDK];
  bf16 INVb[KC * LDC], Mq[KC * LDC];
  bf16 V[KC * LDV];
  float dec[KD];
};

template <int NW, int NS>
__global__ void __launch_bounds__(NW * 32) kda_recur_kernel(KdaPrefillArgs a, const uint8_t* __restrict__ ws,
                                                            const int* __restrict__ chunk_start,
                                                            const int* __restrict__ chunk_len,
                                                            const int* __restrict__ seq_chunk_begin) {
  using St = KdaStage<NW>;
  constexpr int VB = St::VB, LDK = St::LDK, LDC = St::LDC, LDV = St::LDV, NT = NW * 32;
  extern __shared__ __align__(16) uint8_t smem[];
  St* st = reinterpret_cast<St*>(smem);
  bf16* Os = reinterpret_cast<bf16*>(st + NS);  // [KC][LDV]

  const int vs = blockIdx.x, h = blockIdx.y, n = blockIdx.z, H = a.H;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int cb = seq_chunk_begin[n], ce = seq_chunk_begin[n + 1];
  const int vbase = vs * VB;
  const int vrow = vbase + warp * 16;

  float S[16][4];
  if (a.init_state) {
    const float* src = a.init_state + (static_cast<size_t>(n) * H + h) * KD * KD;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const float2 x0 = *reinterpret_cast<const float2*>(src + (vrow + g) * KD + 8 * j + 2 * t);
      const float2 x1 = *reinterpret_cast<const float2*>(src + (vrow + g + 8) * KD + 8 * j + 2 * t);
      S[j][0] = x0.x; S[j][1] = x0.y; S[j][2] = x1.x; S[j][3] = x1.y;
    }
  } else {
#pragma unroll
    for (int j = 0; j < 16; ++j) S[j][0] = S[j][1] = S[j][2] = S[j][3] = 0.f;
  }

  auto load_stage = [&](int c, int sidx) {
    const bf16* base = reinterpret_cast<const bf16*>(ws + (static_cast<size_t>(c) * H + h) * kKdaChunkBytes);
    St& s_ = st[sidx];
    const int t0 = chunk_start[c], nc = chunk_len[c];
    for (int u = threadIdx.x; u < 3 * KC * 16; u += NT) {
      const int m = u / (KC * 16), r = (u / 16) % KC, ch = u % 16;
      bf16* dst = (m == 0 ? s_.Qt : (m == 1 ? s_.Kt : s_.Kd)) + r * LDK + ch * 8;
      cp_async16(dst, base + m * KC * KD + r * KD + ch * 8);
    }
    for (int u = threadIdx.x; u < 2 * KC * 2; u += NT) {
      const int m = u / (KC * 2), r = (u / 2) % KC, ch = u % 2;
      bf16* dst = (m == 0 ? s_.INVb : s_.Mq) + r * LDC + ch * 8;
      cp_async16(dst, base + 3 * KC * KD + m * KC * KC + r * KC + ch * 8);
    }
    for (int u = threadIdx.x; u < KC * (VB / 8); u += NT) {
      const int r = u / (VB / 8), ch = u % (VB / 8);
      const bool ok = r < nc;
      const bf16* src = a.v + (static_cast<size_t>(t0 + (ok ? r : 0)) * H + h) * KD + vbase + ch * 8;
      cp_async16(s_.V + r * LDV + ch * 8, src, ok);
    }
    const float* dsrc = reinterpret_cast<const float*>(base + 3 * KC * KD + 2 * KC * KC);
    for (int u = threadIdx.x; u < KD / 4; u += NT) cp_async16(s_.dec + u * 4, dsrc + u * 4);
  };

  const int lrow = (lane & 7) + ((lane >> 4) << 3);  // ldmatrix (non-trans) of [n][k] storage
  const int lcol = ((lane >> 3) & 1) << 3;
  const int trow = (lane & 7) + (((lane >> 3) & 1) << 3);  // ldmatrix.trans of [k][n] storage
  const int tcol = (lane >> 4) << 3;

#pragma unroll
  for (int p = 0; p < NS - 1; ++p) {
    if (cb + p < ce) load_stage(cb + p, p);
    cp_async_commit();
  }
  for (int c = cb, i = 0; c < ce; ++c, ++i) {
    if (c + NS - 1 < ce) load_stage(c + NS - 1, (i + NS - 1) % NS);
    cp_async_commit();
    cp_async_wait<NS - 1>();
    __syncthreads();
    const St& X = st[i % NS];
    const int t0 = chunk_start[c], nc = chunk_len[c];

    uint32_t sa[8][4];
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      sa[kk][0] = pack_bf16(S[2 * kk][0], S[2 * kk][1]);
      sa[kk][1] = pack_bf16(S[2 * kk][2], S[2 * kk][3]);
      sa[kk][2] = pack_bf16(S[2 * kk + 1][0], S[2 * kk + 1][1]);
      sa[kk][3] = pack_bf16(S[2 * kk + 1][2], S[2 * kk + 1][3]);
    }
    float W[2][4] = {}, O[2][4] = {};
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      uint32_t b[4];
      ldsm_x4(b, X.Kt + lrow * LDK + kk * 16 + lcol);
      mma_bf16(W[0], sa[kk], b[0], b[1]);
      mma_bf16(W[1], sa[kk], b[2], b[3]);
      ldsm_x4(b, X.Qt + lrow * LDK + kk * 16 + lcol);
      mma_bf16(O[0], sa[kk], b[0], b[1]);
      mma_bf16(O[1], sa[kk], b[2], b[3]);
    }
    // X = V^T - W  (rows v, cols c)
    const int vc = warp * 16 + g;
    float Xv[2][4];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int c0 = 8 * j + 2 * t;
      Xv[j][0] = bf(X.V[c0 * LDV + vc]) - W[j][0];
      Xv[j][1] = bf(X.V[(c0 + 1) * LDV + vc]) - W[j][1];
      Xv[j][2] = bf(X.V[c0 * LDV + vc + 8]) - W[j][2];
      Xv[j][3] = bf(X.V[(c0 + 1) * LDV + vc + 8]) - W[j][3];
    }
    const uint32_t xa[4] = {pack_bf16(Xv[0][0], Xv[0][1]), pack_bf16(Xv[0][2], Xv[0][3]),
                            pack_bf16(Xv[1][0], Xv[1][1]), pack_bf16(Xv[1][2], Xv[1][3])};
    float U[2][4] = {};
    {
      uint32_t b[4];
      ldsm_x4(b, X.INVb + lrow * LDC + lcol);
      mma_bf16(U[0], xa, b[0], b[1]);
      mma_bf16(U[1], xa, b[2], b[3]);
    }
    const uint32_t ua[4] = {pack_bf16(U[0][0], U[0][1]), pack_bf16(U[0][2], U[0][3]), pack_bf16(U[1][0], U[1][1]),
                            pack_bf16(U[1][2], U[1][3])};
    {
      uint32_t b[4];
      ldsm_x4(b, X.Mq + lrow * LDC + lcol);
      mma_bf16(O[0], ua, b[0], b[1]);
      mma_bf16(O[1], ua, b[2], b[3]);
    }
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const float d0 = X.dec[8 * j + 2 * t], d1 = X.dec[8 * j + 2 * t + 1];
      S[j][0] *= d0; S[j][1] *= d1; S[j][2] *= d0; S[j][3] *= d1;
    }
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      uint32_t b[4];
      ldsm_x4_t(b, X.Kd + trow * LDK + p * 16 + tcol);
      mma_bf16(S[2 * p], ua, b[0], b[1]);
      mma_bf16(S[2 * p + 1], ua, b[2], b[3]);
    }
    // O^T tile (v rows, c cols) -> Os[c][v]
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int c0 = 8 * j + 2 * t;
      Os[c0 * LDV + vc] = __float2bfloat16(O[j][0]);
      Os[(c0 + 1) * LDV + vc] = __float2bfloat16(O[j][1]);
      Os[c0 * LDV + vc + 8] = __float2bfloat16(O[j][2]);
      Os[(c0 + 1) * LDV + vc + 8] = __float2bfloat16(O[j][3]);
    }
    __syncthreads();
    for (int u = threadIdx.x; u < KC * (VB / 8); u += NT) {
      const int r = u / (VB / 8), ch = u % (VB / 8);
      if (r < nc)
        *reinterpret_cast<uint4*>(a.out + (static_cast<size_t>(t0 + r) * H + h) * KD + vbase + ch * 8) =
            *reinterpret_cast<const uint4*>(Os + r * LDV + ch * 8);
    }
  }
  cp_async_wait<0>();
  if (a.final_state) {
    float* dst = a.final_state + (static_cast<size_t>(n) * H + h) * KD * KD;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      *reinterpret_cast<float2*>(dst + (vrow + g) * KD + 8 * j + 2 * t) = make_float2(S[j][0], S[j][1]);
      *reinterpret_cast<float2*>(dst + (vrow + g + 8) * KD + 8 * j + 2 * t) = make_float2(S[j][2], S[j][3]);
    }
  }
}
constexpr int kRecurWarps = 4;   // 64 V columns per block, 2 blocks per head
constexpr int kRecurStages = 4;  // chunks in flight (prefetch distance 3)

}  // namespace

KdaPlan kda_make_plan(const std::vector<int>& cu) {
  if (cu.size() < 2 || cu[0] != 0) throw std::invalid_argument("kda_make_plan: cu_seqlens must start at 0");
  KdaPlan p;
  p.num_seqs = static_cast<int>(cu.size()) - 1;
  p.total_tokens = cu.back();
  std::vector<int> cs, cl, scb(1, 0);
  for (int s = 0; s < p.num_seqs; ++s) {
    if (cu[s + 1] < cu[s]) throw std::invalid_argument("kda_make_plan: cu_seqlens must be non-decreasing");
    for (int t = cu[s]; t < cu[s + 1]; t += KC) {
      cs.push_back(t);
      cl.push_back(std::min(KC, cu[s + 1] - t));
    }
    scb.push_back(static_cast<int>(cs.size()));
  }
  p.num_chunks = static_cast<int>(cs.size());
  p.cu_seqlens.upload(cu);
  p.chunk_start.upload(cs);
  p.chunk_len.upload(cl);
  p.seq_chunk_begin.upload(scb);
  return p;
}

void kda_prefill_k1(const KdaPrefillArgs& a, const KdaPlan& plan, void* ws, cudaStream_t s) {
  if (a.H <= 0) throw std::invalid_argument("kda_prefill: H must be positive");
  if (plan.num_chunks == 0) return;
  kda_prep_kernel<<<dim3(plan.num_chunks, a.H), 128, 0, s>>>(a, plan.chunk_start.p, plan.chunk_len.p,
                                                             static_cast<uint8_t*>(ws));
  SS_LAUNCH_CHECK();
}
void kda_prefill_k2(const KdaPrefillArgs& a, const KdaPlan& plan, const void* ws, cudaStream_t s) {
  if (plan.num_seqs == 0) return;
  constexpr int NW = kRecurWarps, NS = kRecurStages;
  const size_t smem = NS * sizeof(KdaStage<NW>) + kKdaChunk * KdaStage<NW>::LDV * sizeof(bf16);
  static bool attr = false;
  if (!attr) {
    SS_CUDA(cudaFuncSetAttribute(kda_recur_kernel<NW, NS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(smem)));
    attr = true;
  }
  kda_recur_kernel<NW, NS><<<dim3(KD / (16 * NW), a.H, plan.num_seqs), NW * 32, smem, s>>>(
      a, static_cast<const uint8_t*>(ws), plan.chunk_start.p, plan.chunk_len.p, plan.seq_chunk_begin.p);
  SS_LAUNCH_CHECK();
}
void kda_prefill(const KdaPrefillArgs& a, const KdaPlan& plan, void* ws, cudaStream_t s) {
  kda_prefill_k1(a, plan, ws, s);
  kda_prefill_k2(a, plan, ws, s);
}

}  // namespace servesim::attn
