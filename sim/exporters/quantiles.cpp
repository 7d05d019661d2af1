#include "sim/exporters/quantiles.hpp"

#include "costmodels/percentile.hpp"
#include "sim/exporters/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace servesim {

namespace bh = boost::histogram;

LatencyQuantiles::LatencyQuantiles() : hist_(bh::make_histogram_with(bh::dense_storage<std::uint64_t>(), Axis(kBins, kLowS, kHighS))) {}

void LatencyQuantiles::add(double seconds) {
  if (std::isnan(seconds)) throw std::invalid_argument("LatencyQuantiles::add: NaN");
  ++n_;
  sum_ += seconds;
  if (!folded_ && exact_.size() < kExactValues) {
    exact_.push_back(seconds);
    return;
  }
  if (!folded_) fold();  // the (kExactValues + 1)-th value: no vector doubling past the bound
  put(seconds);
}

void LatencyQuantiles::put(double seconds) {
  if (seconds <= 0) ++zeros_;
  else hist_(std::clamp(seconds, kLowS, kHighS * (1 - 1e-12)));  // (the upper edge belongs to the overflow bin)
}

void LatencyQuantiles::fold() {
  folded_ = true;
  for (double v : exact_) put(v);
  std::vector<double>().swap(exact_);
}

double LatencyQuantiles::order_statistic(std::uint64_t k) const {
  if (k < zeros_) return 0.0;
  std::uint64_t below = zeros_;
  const auto& ax = hist_.axis(0);
  for (int i = 0; i < static_cast<int>(kBins); ++i) {
    below += hist_.at(i);
    if (k < below) return std::sqrt(ax.bin(i).lower() * ax.bin(i).upper());
  }
  return kHighS;  // unreachable: every value was clamped into a bin
}

Percentiles LatencyQuantiles::result() const {
  Percentiles p;
  p.n = n_;
  if (n_ == 0) return p;
  if (!folded_) {
    std::vector<double> v = exact_;
    std::sort(v.begin(), v.end());
    p.p50 = percentile_sorted(v, 0.5), p.p90 = percentile_sorted(v, 0.9), p.p99 = percentile_sorted(v, 0.99);
    double sum = 0;  // summed in ascending order, as percentiles() does
    for (double x : v) sum += x;
    p.mean = sum / static_cast<double>(n_);
    return p;
  }
  p.mean = sum_ / static_cast<double>(n_);
  auto q = [&](double f) {  // type 7 over the order statistics read from the bins
    const double x = f * static_cast<double>(n_ - 1);
    const auto i = static_cast<std::uint64_t>(std::floor(x));
    const double frac = x - static_cast<double>(i), lo = order_statistic(i);
    return i + 1 < static_cast<std::uint64_t>(n_) ? lo + frac * (order_statistic(i + 1) - lo) : lo;
  };
  p.p50 = q(0.5), p.p90 = q(0.9), p.p99 = q(0.99);
  return p;
}

}  // namespace servesim
