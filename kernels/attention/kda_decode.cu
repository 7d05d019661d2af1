// servesim attention kernels: KDA recurrent decode (one token per sequence; state [B,H,D,D] fp32
// or bf16, updated in place). Chunked prefill: kda.cu. See kda.cuh for shapes and NOTES.md for
// the algebra and the measurements.
#include "attention/kda.cuh"

namespace servesim::attn {

namespace {
constexpr int KD = kKdaD;

__device__ __forceinline__ float bf(bf16 v) { return __bfloat162float(v); }

// ------------------------------------------------------------------------------------------
// Decode: block per (head, seq), 8 warps x 16 V rows; lane owns K columns 4*lane..4*lane+3.
// ------------------------------------------------------------------------------------------
template <bool BF16STATE>
__global__ void __launch_bounds__(256) kda_decode_kernel(KdaDecodeArgs a) {
  const int h = blockIdx.x, b = blockIdx.y, H = a.H;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const size_t hd = (static_cast<size_t>(b) * H + h) * KD;
  const int c0 = 4 * lane;
  const size_t srow0 = hd * KD + static_cast<size_t>(warp * 16) * KD + c0;  // state row (warp*16), col c0

  // Issue the state loads first (16 rows in flight per lane).
  float4 s[16];
  if constexpr (BF16STATE) {
    const bf16* st = static_cast<const bf16*>(a.state);
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const uint2 u = *reinterpret_cast<const uint2*>(st + srow0 + static_cast<size_t>(r) * KD);
      __nv_bfloat162 lo, hi;
      memcpy(&lo, &u.x, 4);
      memcpy(&hi, &u.y, 4);
      const float2 l = __bfloat1622float2(lo), hh = __bfloat1622float2(hi);
      s[r] = make_float4(l.x, l.y, hh.x, hh.y);
    }
  } else {
    const float* st = static_cast<const float*>(a.state);
#pragma unroll
    for (int r = 0; r < 16; ++r) s[r] = *reinterpret_cast<const float4*>(st + srow0 + static_cast<size_t>(r) * KD);
  }
  float qv[4], kv[4], dec[4];
  {
    const uint2 uq = *reinterpret_cast<const uint2*>(a.q + hd + c0);
    const uint2 uk = *reinterpret_cast<const uint2*>(a.k + hd + c0);
    const uint2 ug = *reinterpret_cast<const uint2*>(a.g + hd + c0);
    const bf16* pq = reinterpret_cast<const bf16*>(&uq);
    const bf16* pk = reinterpret_cast<const bf16*>(&uk);
    const bf16* pg = reinterpret_cast<const bf16*>(&ug);
    float sq = 0.f, sk = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      qv[i] = bf(pq[i]);
      kv[i] = bf(pk[i]);
      sq += qv[i] * qv[i];
      sk += kv[i] * kv[i];
    }
    sq = warp_sum(sq);
    sk = warp_sum(sk);
    const float rq = rsqrtf(sq + 1e-6f) * a.scale, rk = rsqrtf(sk + 1e-6f);
    const float ea = expf(a.A_log[h]);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      qv[i] *= rq;
      kv[i] *= rk;
      dec[i] = expf(a.lower_bound * sigmoidf_(ea * (bf(pg[i]) + a.dt_bias[h * KD + c0 + i])));
    }
  }
  float kq = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) kq += kv[i] * qv[i];
  kq = warp_sum(kq);
  const float beta = sigmoidf_(bf(a.beta[static_cast<size_t>(b) * H + h]));
  const float vval = lane < 16 ? bf(a.v[hd + warp * 16 + lane]) : 0.f;
  float ores = 0.f;
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    float x[4] = {s[r].x * dec[0], s[r].y * dec[1], s[r].z * dec[2], s[r].w * dec[3]};
    float pk = x[0] * kv[0] + x[1] * kv[1] + x[2] * kv[2] + x[3] * kv[3];
    float pq = x[0] * qv[0] + x[1] * qv[1] + x[2] * qv[2] + x[3] * qv[3];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      pk += __shfl_xor_sync(0xffffffffu, pk, o);
      pq += __shfl_xor_sync(0xffffffffu, pq, o);
    }
    const float vr = __shfl_sync(0xffffffffu, vval, r);
    const float vp = beta * (vr - pk);
#pragma unroll
    for (int i = 0; i < 4; ++i) x[i] = fmaf(vp, kv[i], x[i]);
    if constexpr (BF16STATE) {
      bf16* st = static_cast<bf16*>(a.state);
      uint2 u;
      u.x = pack_bf16(x[0], x[1]);
      u.y = pack_bf16(x[2], x[3]);
      *reinterpret_cast<uint2*>(st + srow0 + static_cast<size_t>(r) * KD) = u;
    } else {
      float* st = static_cast<float*>(a.state);
      *reinterpret_cast<float4*>(st + srow0 + static_cast<size_t>(r) * KD) = make_float4(x[0], x[1], x[2], x[3]);
    }
    const float o = pq + vp * kq;
    if (lane == r) ores = o;
  }
  if (lane < 16) a.out[hd + warp * 16 + lane] = __float2bfloat16(ores);
}

}  // namespace

void kda_decode(const KdaDecodeArgs& a, cudaStream_t s) {
  if (a.B <= 0 || a.H <= 0) throw std::invalid_argument("kda_decode: B and H must be positive");
  if (a.state_bf16)
    kda_decode_kernel<true><<<dim3(a.H, a.B), 256, 0, s>>>(a);
  else
    kda_decode_kernel<false><<<dim3(a.H, a.B), 256, 0, s>>>(a);
  SS_LAUNCH_CHECK();
}

}  // namespace servesim::attn
