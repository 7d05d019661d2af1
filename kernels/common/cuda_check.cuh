// servesim kernels: error checking and accuracy helpers shared by every kernel family.
#pragma once
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace servesim::kernels {

/// Throws std::runtime_error naming the call site when a CUDA runtime call fails.
#define SS_CUDA(call)                                                                      \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess)                                                                 \
      throw std::runtime_error(std::string(#call) + " failed at " + __FILE__ + ":" +      \
                               std::to_string(__LINE__) + ": " + cudaGetErrorString(e_));  \
  } while (0)

/// Checks the last launch (and, in debug use, that it ran): call right after <<<...>>>.
#define SS_LAUNCH_CHECK() SS_CUDA(cudaGetLastError())

#define SS_CUBLAS(call)                                                                    \
  do {                                                                                     \
    cublasStatus_t s_ = (call);                                                            \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                                       \
      throw std::runtime_error(std::string(#call) + " failed at " + __FILE__ + ":" +      \
                               std::to_string(__LINE__) + ": cuBLAS status " +            \
                               std::to_string(static_cast<int>(s_)));                      \
  } while (0)

/// True when a CUDA device is usable. GPU tests call GTEST_SKIP() when this is false, so CI
/// (no GPU) stays green and reports the tests as skipped.
inline bool cuda_device_available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) { cudaGetLastError(); return false; }
  return n > 0;
}

/// Relative L2 error ||out - ref|| / ||ref|| (ref in double precision). NaN in `out` yields NaN,
/// which fails every `<` comparison, so a NaN never passes a bound.
inline double rel_l2_error(const std::vector<double>& out, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = out[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::sqrt(num) / std::sqrt(den > 0 ? den : 1.0);
}

/// Poison value written over outputs before a run; `count_poisoned` then proves every element
/// was written (bf16/fp16 outputs: poison with a NaN bit pattern and count NaNs after).
constexpr float kPoison = 1.2345678e30f;

}  // namespace servesim::kernels
