// Memory-bound MoE pieces: SiTU and clamped SwiGLU activations, RMSNorm, DSV4 mHC pre/post
// mixing, and device-side random fills used by tests and benchmarks.
#include "moe/moe.cuh"
#include "moe/device_util.cuh"
#include "common/cuda_check.cuh"

#include <algorithm>
#include <stdexcept>

namespace servesim::kernels::moe {

namespace {

enum class Act { kSitu, kSwiglu };

template <Act A>
__global__ void act_kernel(const bf16* __restrict__ h, long long rows, int I, float limit, bf16* __restrict__ out) {
  const int cpr = I / 8;
  const long long n = rows * cpr;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long r = idx / cpr;
    const int c = static_cast<int>(idx - r * cpr);
    float a[8], b[8], o[8];
    load8(h + r * 2 * I + c * 8, a);
    load8(h + r * 2 * I + I + c * 8, b);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      if constexpr (A == Act::kSitu) {
        const float sa = 4.f * tanhf(a[i] * 0.25f) / (1.f + expf(-a[i]));
        o[i] = sa * 25.f * tanhf(b[i] * 0.04f);
      } else {
        const float g = fminf(a[i], limit);
        const float u = fminf(fmaxf(b[i], -limit), limit);
        o[i] = g / (1.f + expf(-g)) * u;
      }
    }
    store8(out + r * I + c * 8, o);
  }
}

__global__ void rmsnorm_kernel(const bf16* __restrict__ x, const bf16* __restrict__ gamma, int D, float eps,
                               bf16* __restrict__ out) {
  __shared__ float red[32];
  const bf16* xr = x + static_cast<size_t>(blockIdx.x) * D;
  float ss = 0.f;
  for (int c = threadIdx.x; c < D / 8; c += blockDim.x) {
    float v[8];
    load8(xr + c * 8, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += v[i] * v[i];
  }
  const float r = rsqrtf(block_sum(ss, red) / D + eps);
  for (int c = threadIdx.x; c < D / 8; c += blockDim.x) {
    float v[8], g[8];
    load8(xr + c * 8, v);
    load8(gamma + c * 8, g);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = v[i] * r * g[i];
    store8(out + static_cast<size_t>(blockIdx.x) * D + c * 8, v);
  }
}

/// One CTA per token. Pass 1: mean square of the 4*D flattened streams; warp 0 derives pre, post,
/// comb (Sinkhorn); pass 2: y = sum_i pre_i x_i.
__global__ void mhc_pre_kernel(const bf16* __restrict__ x, const float* __restrict__ mixes_raw,
                               const float* __restrict__ hc_scale, const float* __restrict__ hc_base, int D,
                               bf16* __restrict__ y, float* __restrict__ post_out, float* __restrict__ comb_out) {
  __shared__ float red[32];
  __shared__ float pre_s[4];
  const int t = blockIdx.x;
  const bf16* xt = x + static_cast<size_t>(t) * 4 * D;
  float ss = 0.f;
  for (int c = threadIdx.x; c < 4 * D / 8; c += blockDim.x) {
    float v[8];
    load8(xt + c * 8, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += v[i] * v[i];
  }
  const float rs = rsqrtf(block_sum(ss, red) / (4.f * D) + kHcNormEps);
  if (threadIdx.x == 0) {
    float m[24];
    for (int i = 0; i < 24; ++i) m[i] = mixes_raw[static_cast<size_t>(t) * 24 + i] * rs;
    for (int i = 0; i < 4; ++i) {
      pre_s[i] = 1.f / (1.f + expf(-(m[i] * hc_scale[0] + hc_base[i]))) + kHcEps;
      post_out[static_cast<size_t>(t) * 4 + i] = 2.f / (1.f + expf(-(m[4 + i] * hc_scale[1] + hc_base[4 + i])));
    }
    float cm[4][4];
    for (int r = 0; r < 4; ++r) {
      float mx = -INFINITY;
      for (int c = 0; c < 4; ++c) {
        cm[r][c] = m[8 + 4 * r + c] * hc_scale[2] + hc_base[8 + 4 * r + c];
        mx = fmaxf(mx, cm[r][c]);
      }
      float s = 0.f;
      for (int c = 0; c < 4; ++c) { cm[r][c] = expf(cm[r][c] - mx); s += cm[r][c]; }
      for (int c = 0; c < 4; ++c) cm[r][c] = cm[r][c] / s + kHcEps;
    }
    auto colnorm = [&]() {
      for (int c = 0; c < 4; ++c) {
        const float s = cm[0][c] + cm[1][c] + cm[2][c] + cm[3][c] + kHcEps;
        for (int r = 0; r < 4; ++r) cm[r][c] /= s;
      }
    };
    colnorm();
    for (int it = 0; it < kHcSinkhornIters - 1; ++it) {
      for (int r = 0; r < 4; ++r) {
        const float s = cm[r][0] + cm[r][1] + cm[r][2] + cm[r][3] + kHcEps;
        for (int c = 0; c < 4; ++c) cm[r][c] /= s;
      }
      colnorm();
    }
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) comb_out[static_cast<size_t>(t) * 16 + 4 * r + c] = cm[r][c];
  }
  __syncthreads();
  const float p0 = pre_s[0], p1 = pre_s[1], p2 = pre_s[2], p3 = pre_s[3];
  for (int c = threadIdx.x; c < D / 8; c += blockDim.x) {
    float a[8], b[8], cc[8], d[8], o[8];
    load8(xt + c * 8, a);
    load8(xt + D + c * 8, b);
    load8(xt + 2 * D + c * 8, cc);
    load8(xt + 3 * D + c * 8, d);
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = p0 * a[i] + p1 * b[i] + p2 * cc[i] + p3 * d[i];
    store8(y + static_cast<size_t>(t) * D + c * 8, o);
  }
}

__global__ void mhc_post_kernel(const bf16* __restrict__ f, const bf16* __restrict__ res, const float* __restrict__ post,
                                const float* __restrict__ comb, int D, bf16* __restrict__ out) {
  __shared__ float pc[20];
  const int t = blockIdx.x;
  if (threadIdx.x < 4) pc[threadIdx.x] = post[static_cast<size_t>(t) * 4 + threadIdx.x];
  else if (threadIdx.x < 20) pc[threadIdx.x] = comb[static_cast<size_t>(t) * 16 + threadIdx.x - 4];
  __syncthreads();
  const bf16* rt = res + static_cast<size_t>(t) * 4 * D;
  bf16* ot = out + static_cast<size_t>(t) * 4 * D;
  for (int c = threadIdx.x; c < D / 8; c += blockDim.x) {
    float fv[8], r[4][8];
    load8(f + static_cast<size_t>(t) * D + c * 8, fv);
#pragma unroll
    for (int j = 0; j < 4; ++j) load8(rt + j * D + c * 8, r[j]);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float o[8];
#pragma unroll
      for (int q = 0; q < 8; ++q)
        o[q] = pc[i] * fv[q] + pc[4 + 0 * 4 + i] * r[0][q] + pc[4 + 1 * 4 + i] * r[1][q] +
               pc[4 + 2 * 4 + i] * r[2][q] + pc[4 + 3 * 4 + i] * r[3][q];
      store8(ot + i * D + c * 8, o);
    }
  }
}

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ float u01(uint64_t seed, size_t i) {
  return static_cast<float>(mix64(seed * 0x100000001B3ull + i) >> 40) * (1.0f / 16777216.0f);
}

__global__ void fill_bf16_kernel(bf16* p, size_t n, uint64_t seed, float amp) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16_rn((2.f * u01(seed, i) - 1.f) * amp);
}
__global__ void fill_f32_kernel(float* p, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = lo + (hi - lo) * u01(seed, i);
}
__global__ void fill_bytes_kernel(uint8_t* p, size_t n, uint64_t seed, int lo, int hi) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = static_cast<uint8_t>(lo + static_cast<int>(mix64(seed * 0x100000001B3ull + i) % (hi - lo + 1)));
}
__global__ void fill_pool_kernel(uint8_t* p, size_t n, uint64_t seed, int lo, int hi) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint64_t r = mix64(seed * 0x100000001B3ull + i);
    p[i] = (i % 4352) < 4096 ? static_cast<uint8_t>(r) : static_cast<uint8_t>(lo + static_cast<int>(r % (hi - lo + 1)));
  }
}

int grid_for(size_t n, int threads) {
  return static_cast<int>(std::min<size_t>((n + threads - 1) / threads, 132 * 16));
}

}  // namespace

void act_situ(const bf16* h, int rows, int I, bf16* out, cudaStream_t stream) {
  if (I % 8 != 0) throw std::invalid_argument("act_situ: I % 8 != 0");
  if (rows <= 0) return;
  const size_t n = static_cast<size_t>(rows) * I / 8;
  act_kernel<Act::kSitu><<<grid_for(n, 256), 256, 0, stream>>>(h, rows, I, 0.f, out);
  SS_LAUNCH_CHECK();
}

void act_swiglu(const bf16* h, int rows, int I, float limit, bf16* out, cudaStream_t stream) {
  if (I % 8 != 0) throw std::invalid_argument("act_swiglu: I % 8 != 0");
  if (rows <= 0) return;
  const size_t n = static_cast<size_t>(rows) * I / 8;
  act_kernel<Act::kSwiglu><<<grid_for(n, 256), 256, 0, stream>>>(h, rows, I, limit, out);
  SS_LAUNCH_CHECK();
}

void rmsnorm(const bf16* x, const bf16* gamma, int rows, int D, float eps, bf16* out, cudaStream_t stream) {
  if (D % 8 != 0) throw std::invalid_argument("rmsnorm: D % 8 != 0");
  if (rows <= 0) return;
  const int threads = std::min(512, std::max(32, ((D / 8 + 31) / 32) * 32));
  rmsnorm_kernel<<<rows, threads, 0, stream>>>(x, gamma, D, eps, out);
  SS_LAUNCH_CHECK();
}

void mhc_pre(const bf16* x, const float* mixes_raw, const float* hc_scale, const float* hc_base, int T, int D, bf16* y,
             float* post, float* comb, cudaStream_t stream) {
  if (D % 8 != 0) throw std::invalid_argument("mhc_pre: D % 8 != 0");
  if (T <= 0) return;
  mhc_pre_kernel<<<T, 256, 0, stream>>>(x, mixes_raw, hc_scale, hc_base, D, y, post, comb);
  SS_LAUNCH_CHECK();
}

void mhc_post(const bf16* f, const bf16* res, const float* post, const float* comb, int T, int D, bf16* out,
              cudaStream_t stream) {
  if (D % 8 != 0) throw std::invalid_argument("mhc_post: D % 8 != 0");
  if (T <= 0) return;
  mhc_post_kernel<<<T, 256, 0, stream>>>(f, res, post, comb, D, out);
  SS_LAUNCH_CHECK();
}

void fill_bf16(bf16* p, size_t n, uint64_t seed, float amp, cudaStream_t stream) {
  if (!n) return;
  fill_bf16_kernel<<<grid_for(n, 256), 256, 0, stream>>>(p, n, seed, amp);
  SS_LAUNCH_CHECK();
}
void fill_f32(float* p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t stream) {
  if (!n) return;
  fill_f32_kernel<<<grid_for(n, 256), 256, 0, stream>>>(p, n, seed, lo, hi);
  SS_LAUNCH_CHECK();
}
void fill_bytes(uint8_t* p, size_t n, uint64_t seed, int lo, int hi, cudaStream_t stream) {
  if (!n) return;
  fill_bytes_kernel<<<grid_for(n, 256), 256, 0, stream>>>(p, n, seed, lo, hi);
  SS_LAUNCH_CHECK();
}
void fill_w4a16_pool(uint8_t* p, size_t n_matrices, int N, int K, uint64_t seed, int scale_lo, int scale_hi,
                     cudaStream_t stream) {
  const size_t n = n_matrices * w4a16_matrix_bytes(N, K);
  if (!n) return;
  fill_pool_kernel<<<grid_for(n, 256), 256, 0, stream>>>(p, n, seed, scale_lo, scale_hi);
  SS_LAUNCH_CHECK();
}

}  // namespace servesim::kernels::moe
