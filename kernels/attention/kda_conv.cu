// servesim attention kernels: KDA short convolution (prefill over cu_seqlens, decode; state
// [N, C, 3] bf16) and gated RMSNorm. See kda.cuh for shapes.
#include "attention/kda.cuh"

namespace servesim::attn {

namespace {
constexpr int KD = kKdaD;

__device__ __forceinline__ float bf(bf16 v) { return __bfloat162float(v); }

// ------------------------------------------------------------------------------------------
// Short convolution and gated RMSNorm
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ void load8(const bf16* p, float (&f)[8]) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const bf16* b = reinterpret_cast<const bf16*>(&u);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = bf(b[i]);
}
__device__ __forceinline__ void store8(bf16* p, const float (&f)[8]) {
  uint4 u;
  u.x = pack_bf16(f[0], f[1]);
  u.y = pack_bf16(f[2], f[3]);
  u.z = pack_bf16(f[4], f[5]);
  u.w = pack_bf16(f[6], f[7]);
  *reinterpret_cast<uint4*>(p) = u;
}
__device__ __forceinline__ float silu(float x) { return x / (1.f + __expf(-x)); }

constexpr int kConvTT = 16;
// Loads the three inputs before token `tok0` of sequence s, for channels c..c+7: hist[j][i] is x_{tok0-3+j}.
__device__ __forceinline__ void conv_history(const bf16* x, const bf16* state_in, const int* cu, int s, int tok0,
                                             int c, int C, float (&hist)[3][8]) {
  const int start = cu[s];
#pragma unroll
  for (int j = 0; j < 3; ++j) {
    const int tok = tok0 - 3 + j;
    if (tok >= start) {
      load8(x + static_cast<size_t>(tok) * C + c, hist[j]);
    } else {
      const int m = start - tok;  // 1..3 tokens before the start
#pragma unroll
      for (int i = 0; i < 8; ++i)
        hist[j][i] = state_in ? bf(state_in[(static_cast<size_t>(s) * C + c + i) * 3 + (3 - m)]) : 0.f;
    }
  }
}

__global__ void short_conv_prefill_kernel(const bf16* __restrict__ x, const float* __restrict__ w,
                                          const bf16* __restrict__ state_in, bf16* __restrict__ y,
                                          const int* __restrict__ cu, int N, int T, int C) {
  const int c = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (c >= C) return;
  const int tt0 = blockIdx.y * kConvTT;
  int lo = 0, hi = N;  // find s with cu[s] <= tt0 < cu[s+1]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (cu[mid] <= tt0) lo = mid; else hi = mid;
  }
  int s = lo;
  float wv[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float4 q = *reinterpret_cast<const float4*>(w + static_cast<size_t>(c + i) * 4);
    wv[i][0] = q.x; wv[i][1] = q.y; wv[i][2] = q.z; wv[i][3] = q.w;
  }
  float hist[3][8];
  conv_history(x, state_in, cu, s, tt0, c, C, hist);
  const int tend = min(tt0 + kConvTT, T);
  for (int tt = tt0; tt < tend; ++tt) {
    if (tt >= cu[s + 1]) {
      while (tt >= cu[s + 1]) ++s;
      conv_history(x, state_in, cu, s, tt, c, C, hist);
    }
    float cur[8], out[8];
    load8(x + static_cast<size_t>(tt) * C + c, cur);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float acc = wv[i][0] * hist[0][i] + wv[i][1] * hist[1][i] + wv[i][2] * hist[2][i] + wv[i][3] * cur[i];
      out[i] = silu(acc);
      hist[0][i] = hist[1][i];
      hist[1][i] = hist[2][i];
      hist[2][i] = cur[i];
    }
    store8(y + static_cast<size_t>(tt) * C + c, out);
  }
}

__global__ void short_conv_state_kernel(const bf16* __restrict__ x, const bf16* __restrict__ state_in,
                                        bf16* __restrict__ state_out, const int* __restrict__ cu, int C) {
  const int c = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
  const int s = blockIdx.y;
  if (c >= C) return;
  float hist[3][8];
  conv_history(x, state_in, cu, s, cu[s + 1], c, C, hist);
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 3; ++j)
      state_out[(static_cast<size_t>(s) * C + c + i) * 3 + j] = __float2bfloat16(hist[j][i]);
}

__global__ void short_conv_decode_kernel(const bf16* __restrict__ x, const float* __restrict__ w,
                                         bf16* __restrict__ state, bf16* __restrict__ y, int C) {
  const int c = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
  const int b = blockIdx.y;
  if (c >= C) return;
  bf16* sp = state + (static_cast<size_t>(b) * C + c) * 3;  // 24 bf16 = 48 B, 16-B aligned
  uint4 raw[3];
#pragma unroll
  for (int j = 0; j < 3; ++j) raw[j] = reinterpret_cast<const uint4*>(sp)[j];
  const bf16* h = reinterpret_cast<const bf16*>(raw);
  float cur[8], out[8];
  load8(x + static_cast<size_t>(b) * C + c, cur);
  bf16 nh[24];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float4 q = *reinterpret_cast<const float4*>(w + static_cast<size_t>(c + i) * 4);
    const float h0 = bf(h[i * 3]), h1 = bf(h[i * 3 + 1]), h2 = bf(h[i * 3 + 2]);
    out[i] = silu(q.x * h0 + q.y * h1 + q.z * h2 + q.w * cur[i]);
    nh[i * 3] = h[i * 3 + 1];
    nh[i * 3 + 1] = h[i * 3 + 2];
    nh[i * 3 + 2] = __float2bfloat16(cur[i]);
  }
  store8(y + static_cast<size_t>(b) * C + c, out);
#pragma unroll
  for (int j = 0; j < 3; ++j) reinterpret_cast<uint4*>(sp)[j] = reinterpret_cast<const uint4*>(nh)[j];
}

__global__ void gated_rmsnorm_kernel(const bf16* __restrict__ o, const bf16* __restrict__ gate,
                                     const float* __restrict__ w, bf16* __restrict__ y, long rows, float eps) {
  const long row = (static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x) / 16;
  const int sub = threadIdx.x & 15;
  const bool ok = row < rows;
  const long r = ok ? row : 0;
  float v[8], gt[8];
  load8(o + r * KD + sub * 8, v);
  load8(gate + r * KD + sub * 8, gt);
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) ss += v[i] * v[i];
#pragma unroll
  for (int off = 8; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  const float rs = rsqrtf(ss * (1.f / KD) + eps);
  float out[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = v[i] * rs * w[sub * 8 + i] * sigmoidf_(gt[i]);
  if (ok) store8(y + r * KD + sub * 8, out);
}

}  // namespace

void kda_short_conv_prefill(const bf16* x, const float* w, const bf16* state_in, bf16* state_out, bf16* y,
                            const KdaPlan& plan, int C, cudaStream_t s) {
  if (C % 8) throw std::invalid_argument("kda_short_conv: C must be a multiple of 8");
  const int T = plan.total_tokens;
  if (T == 0) return;
  const int groups = C / 8;
  dim3 grid((groups + 127) / 128, (T + kConvTT - 1) / kConvTT);
  short_conv_prefill_kernel<<<grid, 128, 0, s>>>(x, w, state_in, y, plan.cu_seqlens.p, plan.num_seqs, T, C);
  SS_LAUNCH_CHECK();
  if (state_out) {
    short_conv_state_kernel<<<dim3((groups + 127) / 128, plan.num_seqs), 128, 0, s>>>(x, state_in, state_out,
                                                                                   plan.cu_seqlens.p, C);
    SS_LAUNCH_CHECK();
  }
}
void kda_short_conv_decode(const bf16* x, const float* w, bf16* state, bf16* y, int B, int C, cudaStream_t s) {
  if (C % 8) throw std::invalid_argument("kda_short_conv: C must be a multiple of 8");
  const int groups = C / 8;
  short_conv_decode_kernel<<<dim3((groups + 127) / 128, B), 128, 0, s>>>(x, w, state, y, C);
  SS_LAUNCH_CHECK();
}
void kda_gated_rmsnorm(const bf16* o, const bf16* gate, const float* w, bf16* y, long rows, float eps,
                       cudaStream_t s) {
  if (rows <= 0) return;
  const long threads = rows * 16;
  gated_rmsnorm_kernel<<<static_cast<unsigned>((threads + 255) / 256), 256, 0, s>>>(o, gate, w, y, rows, eps);
  SS_LAUNCH_CHECK();
}

}  // namespace servesim::attn
