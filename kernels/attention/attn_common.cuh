// servesim attention kernels: device primitives shared by the attention kernels (sm_90).
// mma.sync / ldmatrix / cp.async wrappers, BF16 and FP8 packing, a device buffer and a
// device-side random fill. Fragment layouts are the PTX ISA ones for mma.m16n8k16 (BF16) and
// mma.m16n8k32 (E4M3): g = lane/4, t = lane%4;
//   A: a0 (row g, k 2t..), a1 (row g+8, k 2t..), a2 (row g, k 2t+8..), a3 (row g+8, k 2t+8..)
//   B: b0 (k 2t.., col g), b1 (k 2t+8.., col g)      C: c0,c1 (row g, col 2t,2t+1), c2,c3 (row g+8)
// (for E4M3 each register holds 4 consecutive k values and "2t" reads "4t", "+8" reads "+16").
#pragma once
#include "common/cuda_check.cuh"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace servesim::attn {

using bf16 = __nv_bfloat16;

// ------------------------------------------------------------------------------------------
// Device primitives
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool pred = true) {
  const int sz = pred ? 16 : 0;  // src-size 0 zero-fills the 16 bytes
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(sz));
}
__device__ __forceinline__ void cp_async8(void* smem, const void* gmem, bool pred = true) {
  const int sz = pred ? 8 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(sz));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}
// D += A*B, BF16 inputs, FP32 accumulate.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// D += A*B, E4M3 inputs, FP32 accumulate (sm_89+).
__device__ __forceinline__ void mma_e4m3(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t u;
  memcpy(&u, &v, 4);
  return u;
}
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float sigmoidf_(float x) { return 1.f / (1.f + __expf(-x)); }

// Two E4M3 bytes (low byte = first element) -> float2.
__device__ __forceinline__ float2 e4m3x2_to_float2(uint16_t v) {
  uint32_t h;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h) : "h"(v));
  __half2 hh;
  memcpy(&hh, &h, 4);
  return __half22float2(hh);
}
// UE8M0 byte -> 2^(e-127) (e in 1..254).
__device__ __forceinline__ float ue8m0_to_float(uint32_t e) { return __uint_as_float(e << 23); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// ------------------------------------------------------------------------------------------
// FP8 row format of the DeepSeek V4 KV cache (FlashMLA "MODEL1" fp8_ds_mla, model-facts.md 1.2):
// 584 bytes per entry = 448 E4M3 NoPE values, 64 BF16 RoPE values (128 B), 7 UE8M0 scales (one
// per 64 NoPE values), 1 pad byte. Dequantised vector (512) = [NoPE 448 | RoPE 64].
// ------------------------------------------------------------------------------------------
constexpr int kV4RowBytes = 584;
constexpr int kV4Nope = 448;
constexpr int kV4Rope = 64;
constexpr int kV4Dim = 512;
// Indexer key: 128 E4M3 values + one FP32 scale (132 B/entry), stored as two arrays.
constexpr int kIdxDim = 128;

// ------------------------------------------------------------------------------------------
// Host helpers
// ------------------------------------------------------------------------------------------
/// Owning device allocation (cudaMalloc). Throws on failure.
template <class T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  DevBuf() = default;
  explicit DevBuf(size_t count) { alloc(count); }
  void alloc(size_t count) {
    free();
    n = count;
    if (count) SS_CUDA(cudaMalloc(&p, count * sizeof(T)));
  }
  void free() {
    if (p) cudaFree(p);
    p = nullptr;
    n = 0;
  }
  ~DevBuf() { free(); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; o.n = 0; }
  DevBuf& operator=(DevBuf&& o) noexcept {
    free();
    p = o.p; n = o.n; o.p = nullptr; o.n = 0;
    return *this;
  }
  size_t bytes() const { return n * sizeof(T); }
  void upload(const std::vector<T>& h) {
    if (h.size() != n) alloc(h.size());
    if (n) SS_CUDA(cudaMemcpy(p, h.data(), bytes(), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> h(n);
    if (n) SS_CUDA(cudaMemcpy(h.data(), p, bytes(), cudaMemcpyDeviceToHost));
    return h;
  }
};

/// Fills `n` values on the device with uniform(lo, hi) from a counter hash (fresh per seed).
void fill_uniform_bf16(bf16* p, size_t n, float lo, float hi, uint64_t seed, cudaStream_t s = 0);
void fill_uniform_f32(float* p, size_t n, float lo, float hi, uint64_t seed, cudaStream_t s = 0);
/// Random valid E4M3 bytes (no NaN encodings), magnitudes up to ~`maxabs`.
void fill_e4m3(uint8_t* p, size_t n, float maxabs, uint64_t seed, cudaStream_t s = 0);
/// Random V4 FP8 rows (584 B each): E4M3 NoPE in [-448,448]/2^k, scales 2^-12..2^-7, RoPE in [-1,1].
void fill_v4_rows(uint8_t* p, size_t rows, uint64_t seed, cudaStream_t s = 0);

// Host-side conversions used by the CPU references.
inline float bf16_to_float_host(bf16 v) { return __bfloat162float(v); }
inline bf16 float_to_bf16_host(float v) { return __float2bfloat16(v); }
inline float e4m3_to_float_host(uint8_t b) {
  __nv_fp8_e4m3 v;
  memcpy(&v, &b, 1);
  return static_cast<float>(v);
}
inline uint8_t float_to_e4m3_host(float f) {
  __nv_fp8_e4m3 v(f);  // round to nearest even, saturating
  uint8_t b;
  memcpy(&b, &v, 1);
  return b;
}
/// Dequantises one 584-B V4 row into 512 doubles.
inline void v4_row_dequant_host(const uint8_t* row, double* out) {
  for (int i = 0; i < kV4Nope; ++i) {
    const int e = row[kV4Nope + 2 * kV4Rope + i / 64];
    out[i] = static_cast<double>(e4m3_to_float_host(row[i])) * std::ldexp(1.0, e - 127);
  }
  for (int i = 0; i < kV4Rope; ++i) {
    bf16 v;
    memcpy(&v, row + kV4Nope + 2 * i, 2);
    out[kV4Nope + i] = bf16_to_float_host(v);
  }
}

/// Number of SMs of the current device (cached).
int device_sm_count();

}  // namespace servesim::attn
