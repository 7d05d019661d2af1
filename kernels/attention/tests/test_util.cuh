// servesim attention kernel tests: host-side random data, bf16 conversion and comparison helpers.
#pragma once
#include "attention/attn_common.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace servesim::attn::test {

#define SKIP_WITHOUT_GPU() \
  if (!servesim::kernels::cuda_device_available()) GTEST_SKIP() << "no CUDA device"

inline std::mt19937_64& rng() {
  static std::mt19937_64 r(std::random_device{}());
  return r;
}
/// Fresh random bf16 values (returned as bf16 for upload and as the exact double each holds).
inline std::vector<bf16> rand_bf16(size_t n, float lo, float hi, std::vector<double>* exact = nullptr) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<bf16> v(n);
  if (exact) exact->resize(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = float_to_bf16_host(d(rng()));
    if (exact) (*exact)[i] = bf16_to_float_host(v[i]);
  }
  return v;
}
inline std::vector<float> rand_f32(size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng());
  return v;
}
inline std::vector<double> to_double(const std::vector<bf16>& v) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = bf16_to_float_host(v[i]);
  return r;
}
inline std::vector<double> to_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }
/// Poison a bf16 device buffer with NaN (0xFFFF) so unwritten outputs fail.
inline void poison(bf16* p, size_t n) { SS_CUDA(cudaMemset(p, 0xFF, n * sizeof(bf16))); }
inline void poison(float* p, size_t n) { SS_CUDA(cudaMemset(p, 0xFF, n * sizeof(float))); }
inline size_t count_nan(const std::vector<double>& v) {
  size_t c = 0;
  for (double x : v) c += std::isnan(x) ? 1 : 0;
  return c;
}
/// Relative L2 error with NaN counted as failure (returns +inf when any NaN).
inline double rel_err(const std::vector<double>& out, const std::vector<double>& ref) {
  if (count_nan(out)) return INFINITY;
  return servesim::kernels::rel_l2_error(out, ref);
}
inline void report(const char* what, double err, double bound) {
  std::printf("[attn-test] %-48s rel_l2=%.3e bound=%.1e\n", what, err, bound);
}

}  // namespace servesim::attn::test
