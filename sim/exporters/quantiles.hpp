// servesim exporters: latency samples reduced to p50 / p90 / p99, mean and count, in memory that
// does not grow with the run past a bound (issue 15: 10 M requests in 1 GiB).
//
// Up to kExactValues values every value is kept and the quantiles are exact (type-7 interpolation
// between order statistics, percentile_sorted). Past that the values are folded into a histogram
// with logarithmic bins (Boost.Histogram, axis::regular with a log transform) and the kept values
// are freed; from then on memory is constant (kBins counters, ~160 KB) and each order statistic is
// read as the geometric centre of its bin:
//   bins span [kLowS, kHighS] = [1e-9 s, 1e7 s] in kBins = 20,000 equal log steps, a ratio of
//   r = (1e16)^(1/20000) = 1.001844 per bin, so a centre is within sqrt(r) − 1 = 0.0922% of every
//   value in its bin: each quantile is within 0.093% (relative) of the exact one (type 7 mixes two
//   order statistics with non-negative weights, which keeps the bound);
//   values <= 0 are counted exactly as zeros (a request that never waited); values in (0, 1 ns)
//   count as 1 ns and values above 1e7 s as 1e7 s (outside any latency a run can produce: stated,
//   not silent).
// The mean is exact: the sum of the kept values in ascending order (as percentiles() sums them),
// after folding the running sum in arrival order. Values must not be NaN
// (std::invalid_argument).
#pragma once
#include <boost/histogram.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace servesim {

struct Percentiles;

class LatencyQuantiles {
 public:
  static constexpr std::size_t kExactValues = std::size_t{1} << 20;  ///< values kept exactly (8 MiB)
  static constexpr unsigned kBins = 20000;
  static constexpr double kLowS = 1e-9, kHighS = 1e7;  ///< histogram range, seconds

  LatencyQuantiles();
  /// Adds one value in seconds. Throws std::invalid_argument on NaN.
  void add(double seconds);
  /// p50 / p90 / p99 (type 7), mean and count of the values added; all 0 when none was.
  Percentiles result() const;
  long long count() const { return n_; }
  /// True once the values were folded into the histogram (quantiles then within 0.093%).
  bool approximate() const { return folded_; }

 private:
  using Axis = boost::histogram::axis::regular<double, boost::histogram::axis::transform::log>;
  using Histogram = boost::histogram::histogram<std::tuple<Axis>, boost::histogram::dense_storage<std::uint64_t>>;
  void fold();
  void put(double seconds);  ///< into the histogram (zeros counted apart, the rest clamped into range)
  /// The k-th smallest value (0-based) in histogram mode: 0 for the zeros, else its bin's centre.
  double order_statistic(std::uint64_t k) const;
  std::vector<double> exact_;
  Histogram hist_;
  std::uint64_t zeros_ = 0;  ///< values <= 0 after folding
  long long n_ = 0;
  double sum_ = 0;
  bool folded_ = false;
};

}  // namespace servesim
