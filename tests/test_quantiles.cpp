// Latency percentiles in bounded memory (sim/exporters/quantiles.hpp, issue 15): exact up to
// 2^20 values, then a log histogram whose quantiles stay within 0.093% of the exact ones.
#include "costmodels/percentile.hpp"
#include "scenarios/rng.hpp"
#include "sim/exporters/metrics.hpp"
#include "sim/exporters/quantiles.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

using servesim::LatencyQuantiles;

// Below the bound: the same numbers as sorting every value (hand arithmetic: 1, 2, 3, 4, 10 →
// p50 3, p90 at position 3.6 = 4 + 0.6·6 = 7.6, p99 at 3.96 = 9.76, mean 4).
TEST(Quantiles, ExactBelowTheBound) {
  LatencyQuantiles q;
  for (double v : {10.0, 2.0, 4.0, 1.0, 3.0}) q.add(v);
  const auto p = q.result();
  EXPECT_FALSE(q.approximate());
  EXPECT_EQ(p.n, 5);
  EXPECT_DOUBLE_EQ(p.p50, 3.0);
  EXPECT_DOUBLE_EQ(p.p90, 7.6);
  EXPECT_DOUBLE_EQ(p.p99, 9.76);
  EXPECT_DOUBLE_EQ(p.mean, 4.0);
  EXPECT_EQ(LatencyQuantiles().result().n, 0);
  EXPECT_THROW(q.add(std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
}

// Past the bound: log-normal latencies (median 0.5 s, σ 2: spanning microseconds to hours) with a
// third of them exact zeros, 1.5 M values; every percentile within 0.093% of the exact one (sorted
// copy), zeros read as zeros, the mean and count exact.
TEST(Quantiles, HistogramPastTheBoundIsWithinItsStatedError) {
  LatencyQuantiles q;
  std::vector<double> all;
  servesim::Rng rng(7);
  const size_t n = LatencyQuantiles::kExactValues + 500000;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const double v = i % 3 == 0 ? 0.0 : 0.5 * std::exp(2.0 * rng.normal());
    q.add(v), all.push_back(v), sum += v;
  }
  ASSERT_TRUE(q.approximate());
  std::sort(all.begin(), all.end());
  const auto p = q.result();
  EXPECT_EQ(p.n, static_cast<long long>(n));
  EXPECT_NEAR(p.mean, sum / static_cast<double>(n), 1e-12 * p.mean);
  for (auto [f, got] : {std::pair{0.5, p.p50}, {0.9, p.p90}, {0.99, p.p99}}) {
    const double exact = servesim::percentile_sorted(all, f);
    EXPECT_LE(std::abs(got - exact), 0.00093 * exact) << f << ": " << got << " vs " << exact;
    EXPECT_NE(got, exact) << f;  // read from a bin, not kept
  }
  // a percentile that falls among the zeros is exactly 0
  LatencyQuantiles z;
  for (size_t i = 0; i <= LatencyQuantiles::kExactValues; ++i) z.add(i % 20 == 0 ? 1.0 : 0.0);  // 5% ones: p50 and p90 among the zeros, p99 among the ones
  ASSERT_TRUE(z.approximate());
  EXPECT_EQ(z.result().p50, 0.0);
  EXPECT_EQ(z.result().p90, 0.0);
  EXPECT_NEAR(z.result().p99, 1.0, 0.00093);
}
