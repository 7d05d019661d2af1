// Test/benchmark helpers for the MoE family: RAII device buffers, host RNG, bf16 conversions.
#pragma once
#include "common/cuda_check.cuh"
#include "moe/moe.cuh"

#include <cuda_bf16.h>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace servesim::kernels::moe {

template <class T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  DevBuf() = default;
  explicit DevBuf(size_t count) : n(count) {
    if (n) SS_CUDA(cudaMalloc(&p, sizeof(T) * n));
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; o.n = 0; }
  DevBuf& operator=(DevBuf&& o) noexcept {
    if (this != &o) { if (p) cudaFree(p); p = o.p; n = o.n; o.p = nullptr; o.n = 0; }
    return *this;
  }
  ~DevBuf() { if (p) cudaFree(p); }
  void upload(const std::vector<T>& h) { SS_CUDA(cudaMemcpy(p, h.data(), sizeof(T) * h.size(), cudaMemcpyHostToDevice)); }
  std::vector<T> download(size_t count = 0) const {
    std::vector<T> h(count ? count : n);
    SS_CUDA(cudaMemcpy(h.data(), p, sizeof(T) * h.size(), cudaMemcpyDeviceToHost));
    return h;
  }
  size_t bytes() const { return sizeof(T) * n; }
};

inline float bf2f(bf16 v) { return __bfloat162float(v); }
inline bf16 f2bf(float v) { return __float2bfloat16_rn(v); }

/// Random bf16 vector uniform in [-amp, amp]; also returns the exact values as double.
inline std::vector<bf16> rand_bf16(std::mt19937_64& rng, size_t n, float amp, std::vector<double>* exact = nullptr) {
  std::uniform_real_distribution<float> u(-amp, amp);
  std::vector<bf16> v(n);
  if (exact) exact->resize(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = f2bf(u(rng));
    if (exact) (*exact)[i] = bf2f(v[i]);
  }
  return v;
}

/// bf16 bit pattern of a quiet NaN: poison for bf16 outputs.
inline void poison_bf16(bf16* d, size_t n) { SS_CUDA(cudaMemset(d, 0xFF, sizeof(bf16) * n)); }

inline std::vector<double> to_double(const std::vector<bf16>& v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = bf2f(v[i]);
  return d;
}
inline std::vector<double> to_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }
inline size_t count_nan(const std::vector<double>& v) {
  size_t c = 0;
  for (double x : v) c += std::isnan(x) ? 1 : 0;
  return c;
}

}  // namespace servesim::kernels::moe
