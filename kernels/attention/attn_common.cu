// servesim attention kernels: device-side random fills and small host helpers.
#include "attention/attn_common.cuh"

namespace servesim::attn {

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}
__device__ __forceinline__ float u01(uint64_t i, uint64_t seed) {
  return static_cast<float>(mix64(i * 0x9E3779B97F4A7C15ULL + seed) >> 40) * (1.0f / 16777216.0f);
}

__global__ void fill_bf16_kernel(bf16* p, size_t n, float lo, float hi, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = __float2bfloat16(lo + (hi - lo) * u01(i, seed));
}
__global__ void fill_f32_kernel(float* p, size_t n, float lo, float hi, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = lo + (hi - lo) * u01(i, seed);
}
__global__ void fill_e4m3_kernel(uint8_t* p, size_t n, float maxabs, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const float v = (2.f * u01(i, seed) - 1.f) * maxabs;
    __nv_fp8_e4m3 f(v);
    p[i] = f.__x;
  }
}
__global__ void fill_v4_rows_kernel(uint8_t* p, size_t rows, uint64_t seed) {
  const size_t total = rows * kV4RowBytes;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
    const int b = static_cast<int>(i % kV4RowBytes);
    const float r = u01(i, seed);
    uint8_t out;
    if (b < kV4Nope) {
      __nv_fp8_e4m3 f((2.f * r - 1.f) * 448.f);
      out = f.__x;
    } else if (b < kV4Nope + 2 * kV4Rope) {
      // bf16 in [-1, 1]: write the pair from its low byte's position
      const int k = (b - kV4Nope) / 2;
      const float v = 2.f * u01((i / kV4RowBytes) * 64 + k, seed ^ 0x5555) - 1.f;
      const bf16 h = __float2bfloat16(v);
      uint16_t u;
      memcpy(&u, &h, 2);
      out = ((b - kV4Nope) & 1) ? static_cast<uint8_t>(u >> 8) : static_cast<uint8_t>(u & 0xff);
    } else if (b < kV4Nope + 2 * kV4Rope + 7) {
      out = static_cast<uint8_t>(127 - 12 + static_cast<int>(r * 6.f));  // 2^-12 .. 2^-7
    } else {
      out = 0;
    }
    p[i] = out;
  }
}

static int grid_for(size_t n) {
  const size_t b = (n + 255) / 256;
  return static_cast<int>(b < 65536 ? (b ? b : 1) : 65536);
}

void fill_uniform_bf16(bf16* p, size_t n, float lo, float hi, uint64_t seed, cudaStream_t s) {
  if (!n) return;
  fill_bf16_kernel<<<grid_for(n), 256, 0, s>>>(p, n, lo, hi, seed);
  SS_LAUNCH_CHECK();
}
void fill_uniform_f32(float* p, size_t n, float lo, float hi, uint64_t seed, cudaStream_t s) {
  if (!n) return;
  fill_f32_kernel<<<grid_for(n), 256, 0, s>>>(p, n, lo, hi, seed);
  SS_LAUNCH_CHECK();
}
void fill_e4m3(uint8_t* p, size_t n, float maxabs, uint64_t seed, cudaStream_t s) {
  if (!n) return;
  fill_e4m3_kernel<<<grid_for(n), 256, 0, s>>>(p, n, maxabs, seed);
  SS_LAUNCH_CHECK();
}
void fill_v4_rows(uint8_t* p, size_t rows, uint64_t seed, cudaStream_t s) {
  if (!rows) return;
  fill_v4_rows_kernel<<<grid_for(rows * kV4RowBytes), 256, 0, s>>>(p, rows, seed);
  SS_LAUNCH_CHECK();
}

int device_sm_count() {
  static int n = 0;
  if (!n) {
    int dev = 0;
    SS_CUDA(cudaGetDevice(&dev));
    SS_CUDA(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  }
  return n;
}

}  // namespace servesim::attn
