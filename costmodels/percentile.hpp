// servesim costmodels: the one percentile function of the project (latency summaries in
// sim/exporters/metrics.cpp, held-out error statistics in costmodels/calibration/fit.cpp).
#pragma once
#include <cmath>
#include <cstddef>
#include <vector>

namespace servesim {

/// The f-quantile (f in [0, 1]) of `sorted` (ascending, non-empty) by linear interpolation between
/// order statistics: position x = f·(n − 1), value v[⌊x⌋] + (x − ⌊x⌋)·(v[⌊x⌋+1] − v[⌊x⌋]) (Hyndman
/// & Fan type 7, numpy's default). n = 1 gives v[0] for every f. No errors checked: f outside
/// [0, 1] or an empty vector is the caller's bug.
inline double percentile_sorted(const std::vector<double>& sorted, double f) {
  const double x = f * static_cast<double>(sorted.size() - 1);
  const std::size_t i = static_cast<std::size_t>(std::floor(x));
  const double frac = x - static_cast<double>(i);
  return i + 1 < sorted.size() ? sorted[i] + frac * (sorted[i + 1] - sorted[i]) : sorted[i];
}

}  // namespace servesim
