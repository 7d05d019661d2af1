// Token permutation (gather by expert) and combine (weighted sum of expert outputs, written as a
// deterministic gather), with the scan that also yields the grouped GEMM's token-tile offsets.
#include "moe/moe.cuh"
#include "moe/device_util.cuh"
#include "common/cuda_check.cuh"

#include <stdexcept>

namespace servesim::kernels::moe {

namespace {

__global__ void count_kernel(const int* __restrict__ ids, int n, int E, int* __restrict__ counts) {
  extern __shared__ int hist[];
  for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) atomicAdd(&hist[ids[i]], 1);
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x)
    if (hist[e]) atomicAdd(&counts[e], hist[e]);
}

/// One block of 1024 threads, E <= 1024: exclusive scans of counts and of ceil(counts/bt).
__global__ void scan_kernel(const int* __restrict__ counts, int E, int bt, int* __restrict__ row_offsets,
                            int* __restrict__ tile_offsets, int* __restrict__ cursor) {
  __shared__ int wsum_r[32], wsum_t[32];
  const int e = threadIdx.x, lane = e & 31, w = e >> 5;
  const int c = e < E ? counts[e] : 0;
  int r = c, t = (c + bt - 1) / bt;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int a = __shfl_up_sync(0xffffffffu, r, o), b = __shfl_up_sync(0xffffffffu, t, o);
    if (lane >= o) { r += a; t += b; }
  }
  if (lane == 31) { wsum_r[w] = r; wsum_t[w] = t; }
  __syncthreads();
  if (w == 0) {
    int a = wsum_r[lane], b = wsum_t[lane];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int x = __shfl_up_sync(0xffffffffu, a, o), y = __shfl_up_sync(0xffffffffu, b, o);
      if (lane >= o) { a += x; b += y; }
    }
    wsum_r[lane] = a;
    wsum_t[lane] = b;
  }
  __syncthreads();
  const int base_r = w > 0 ? wsum_r[w - 1] : 0, base_t = w > 0 ? wsum_t[w - 1] : 0;
  const int incl_r = r + base_r, incl_t = t + base_t;
  if (e < E) {
    row_offsets[e + 1] = incl_r;
    tile_offsets[e + 1] = incl_t;
    cursor[e] = incl_r - c;
  }
  if (e == 0) { row_offsets[0] = 0; tile_offsets[0] = 0; }
}

/// One CTA per token: claim k rows, then copy the token's row to each.
__global__ void scatter_kernel(const bf16* __restrict__ x, const int* __restrict__ ids, int k, int D,
                               int* __restrict__ cursor, int* __restrict__ pos, int* __restrict__ row_token,
                               bf16* __restrict__ x_perm) {
  __shared__ int sp[32];
  const int t = blockIdx.x;
  if (threadIdx.x < k) {
    const int p = atomicAdd(&cursor[ids[static_cast<size_t>(t) * k + threadIdx.x]], 1);
    sp[threadIdx.x] = p;
    pos[static_cast<size_t>(t) * k + threadIdx.x] = p;
    row_token[p] = t;
  }
  __syncthreads();
  const uint4* src = reinterpret_cast<const uint4*>(x + static_cast<size_t>(t) * D);
  for (int c = threadIdx.x; c < D / 8; c += blockDim.x) {
    const uint4 v = src[c];
    for (int j = 0; j < k; ++j) reinterpret_cast<uint4*>(x_perm + static_cast<size_t>(sp[j]) * D)[c] = v;
  }
}

/// One CTA per token: out = sum_j w_j * y[pos_j] (fp32), optionally RMS-normalised * gamma.
__global__ void combine_kernel(const bf16* __restrict__ y, const int* __restrict__ pos, const float* __restrict__ w,
                               int k, int D, const bf16* __restrict__ gamma, float eps, bf16* __restrict__ out) {
  extern __shared__ float buf[];  // [D] when gamma != nullptr
  __shared__ int sp[32];
  __shared__ float sw[32];
  __shared__ float red[32];
  const int t = blockIdx.x;
  if (threadIdx.x < k) {
    sp[threadIdx.x] = pos[static_cast<size_t>(t) * k + threadIdx.x];
    sw[threadIdx.x] = w[static_cast<size_t>(t) * k + threadIdx.x];
  }
  __syncthreads();
  float ss = 0.f;
  for (int c = threadIdx.x; c < D / 8; c += blockDim.x) {
    float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j < k; ++j) {
      float v[8];
      load8(y + static_cast<size_t>(sp[j]) * D + c * 8, v);
#pragma unroll
      for (int i = 0; i < 8; ++i) a[i] = fmaf(sw[j], v[i], a[i]);
    }
    if (gamma) {
#pragma unroll
      for (int i = 0; i < 8; ++i) { buf[c * 8 + i] = a[i]; ss += a[i] * a[i]; }
    } else {
      store8(out + static_cast<size_t>(t) * D + c * 8, a);
    }
  }
  if (!gamma) return;
  const float tot = block_sum(ss, red);
  const float r = rsqrtf(tot / D + eps);
  for (int c = threadIdx.x; c < D / 8; c += blockDim.x) {
    float gm[8], a[8];
    load8(gamma + c * 8, gm);
#pragma unroll
    for (int i = 0; i < 8; ++i) a[i] = buf[c * 8 + i] * r * gm[i];
    store8(out + static_cast<size_t>(t) * D + c * 8, a);
  }
}

}  // namespace

Dispatch alloc_dispatch(int E, int max_rows) {
  Dispatch d;
  d.E = E;
  d.max_rows = max_rows;
  SS_CUDA(cudaMalloc(&d.counts, sizeof(int) * E));
  SS_CUDA(cudaMalloc(&d.row_offsets, sizeof(int) * (E + 1)));
  SS_CUDA(cudaMalloc(&d.tile_offsets, sizeof(int) * (E + 1)));
  SS_CUDA(cudaMalloc(&d.cursor, sizeof(int) * E));
  SS_CUDA(cudaMalloc(&d.pos, sizeof(int) * max_rows));
  SS_CUDA(cudaMalloc(&d.row_token, sizeof(int) * max_rows));
  return d;
}

void free_dispatch(Dispatch& d) {
  cudaFree(d.counts); cudaFree(d.row_offsets); cudaFree(d.tile_offsets);
  cudaFree(d.cursor); cudaFree(d.pos); cudaFree(d.row_token);
  d = Dispatch{};
}

void moe_permute(const bf16* x, const int* ids, int T, int k, int D, int bt, Dispatch& d, bf16* x_perm,
                 cudaStream_t stream) {
  if (D % 8 != 0 || k < 1 || k > 32 || d.E > 1024 || static_cast<long long>(T) * k > d.max_rows || bt < 1)
    throw std::invalid_argument("moe_permute: need D % 8 == 0, 1 <= k <= 32, E <= 1024, T*k <= max_rows");
  SS_CUDA(cudaMemsetAsync(d.counts, 0, sizeof(int) * d.E, stream));
  if (T <= 0) {
    SS_CUDA(cudaMemsetAsync(d.row_offsets, 0, sizeof(int) * (d.E + 1), stream));
    SS_CUDA(cudaMemsetAsync(d.tile_offsets, 0, sizeof(int) * (d.E + 1), stream));
    return;
  }
  const int n = T * k;
  const int blocks = std::min(132 * 2, (n + 1023) / 1024);
  count_kernel<<<blocks, 1024, sizeof(int) * d.E, stream>>>(ids, n, d.E, d.counts);
  SS_LAUNCH_CHECK();
  scan_kernel<<<1, 1024, 0, stream>>>(d.counts, d.E, bt, d.row_offsets, d.tile_offsets, d.cursor);
  SS_LAUNCH_CHECK();
  const int threads = std::min(256, std::max(32, ((D / 8 + 31) / 32) * 32));
  scatter_kernel<<<T, threads, 0, stream>>>(x, ids, k, D, d.cursor, d.pos, d.row_token, x_perm);
  SS_LAUNCH_CHECK();
}

void moe_combine(const bf16* y_perm, const int* pos, const float* weights, int T, int k, int D, const bf16* gamma,
                 float eps, bf16* out, cudaStream_t stream) {
  if (D % 8 != 0 || k < 1 || k > 32) throw std::invalid_argument("moe_combine: need D % 8 == 0, 1 <= k <= 32");
  if (T <= 0) return;
  const int threads = std::min(256, std::max(32, ((D / 8 + 31) / 32) * 32));
  const size_t smem = gamma ? sizeof(float) * D : 0;
  if (smem > 48 * 1024) {
    SS_CUDA(cudaFuncSetAttribute(combine_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  }
  combine_kernel<<<T, threads, smem, stream>>>(y_perm, pos, weights, k, D, gamma, eps, out);
  SS_LAUNCH_CHECK();
}

}  // namespace servesim::kernels::moe
