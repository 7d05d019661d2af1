// servesim attention kernel tests: double-precision softmax attention (the CPU reference of test_mqa.cu's
// MLA decode cases and test_v4_attn.cu's V4 cases; both files are compiled into test_mqa).
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

namespace servesim::attn::test {

// out[h][0..dv) = softmax(scale * q_h . k_j (+ sink)) . v_j over the given key rows (double).
inline void ref_attn(const double* q, int H, int dk, const std::vector<const double*>& keys, int dv, double scale,
                     const float* sink, double* out, double* lse) {
  const int n = static_cast<int>(keys.size());
  std::vector<double> s(n);
  for (int h = 0; h < H; ++h) {
    double m = sink ? static_cast<double>(sink[h]) : -INFINITY;
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int d = 0; d < dk; ++d) acc += q[static_cast<size_t>(h) * dk + d] * keys[j][d];
      s[j] = acc * scale;
      m = std::max(m, s[j]);
    }
    double den = sink ? std::exp(sink[h] - m) : 0.0;
    for (int j = 0; j < n; ++j) den += std::exp(s[j] - m);
    for (int d = 0; d < dv; ++d) {
      double acc = 0;
      for (int j = 0; j < n; ++j) acc += std::exp(s[j] - m) * keys[j][d];
      out[static_cast<size_t>(h) * dv + d] = den > 0 ? acc / den : 0.0;
    }
    if (lse) lse[h] = m + std::log(den);
  }
}

}  // namespace servesim::attn::test
