// The engine charges EP all-to-alls with the closed form of costmodels/comm.hpp, and the
// aggregate-flow model (4 flows per GPU) is the cheap SimGrid form of the same traffic. Both are
// checked here against the reference: one SimGrid flow per GPU pair (max-min sharing, CM02), on
// 8 to 32 GPUs inside one node and across 2 and 4 nodes, uniform and skewed (Zipf) traffic.
#include "costmodels/comm.hpp"
#include "helpers.hpp"
#include "topology/alltoall_flows.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace sg4 = simgrid::s4u;
using namespace servesim;

namespace {

struct Result {
  std::string label;
  double pairwise = 0, aggregate = 0, analytic = 0;
  size_t pairwise_flows = 0;
};

TrafficMatrix matrix(int g, double bytes, double zipf) {
  // destination j gets weight 1/(j+1)^zipf, normalised so the mean per pair stays `bytes`
  std::vector<double> w(static_cast<size_t>(g));
  double sum = 0;
  for (int j = 0; j < g; ++j) sum += w[static_cast<size_t>(j)] = 1.0 / std::pow(j + 1.0, zipf);
  TrafficMatrix m(static_cast<size_t>(g), std::vector<double>(static_cast<size_t>(g), 0.0));
  for (int i = 0; i < g; ++i)
    for (int j = 0; j < g; ++j)
      if (i != j) m[static_cast<size_t>(i)][static_cast<size_t>(j)] = bytes * w[static_cast<size_t>(j)] * g / sum;
  return m;
}

std::vector<Result> run_cases(ClusterSpec cluster) {
  int argc = 2;
  char a0[] = "test", a1[] = "--log=root.thres:warning";
  char* argv[] = {a0, a1, nullptr};
  sg4::Engine e(&argc, argv);
  configure_network_model();
  const GpuSpec gpu = test::gpu("h200");
  const Platform p = build_platform(cluster, gpu);
  FabricParams f = fabric_params(cluster, gpu);
  f.nvlink_efficiency = f.nic_efficiency = 1.0;  // the fluid model itself (the platform's links run at line rate)
  f.nvlink_call_s = f.nic_call_s = 0.0;           // and no per-call software cost
  std::vector<Result> out;
  sg4::Actor::create("driver", p.frontend, [&] {
    for (int g : {8, 16, 32})
      for (double zipf : {0.0, 1.0})
        for (double bytes : {64e3, 4e6}) {
          std::vector<int> group;
          for (int i = 0; i < g; ++i) group.push_back(i);
          const TrafficMatrix m = matrix(g, bytes, zipf);
          Result r;
          r.label = "G=" + std::to_string(g) + " zipf=" + std::to_string(zipf) + " bytes/pair=" + std::to_string(bytes);
          r.pairwise = alltoall_pairwise_flows(p, group, m);
          r.aggregate = alltoall_aggregate_flows(p, group, m);
          r.analytic = alltoall_time(f, busiest_load(f, m));
          r.pairwise_flows = static_cast<size_t>(g) * (g - 1);
          out.push_back(r);
        }
  });
  e.run();
  return out;
}

// Uniform traffic (what the engine charges, scaled by expert_imbalance): aggregate and closed form
// within 5% of pairwise flows. Skewed traffic on a non-blocking fabric: also within 5%. Skewed
// traffic through oversubscribed uplinks: the closed form is a lower bound (the busiest link at full
// rate); max-min sharing of pairwise flows is not work-conserving there and finishes up to ~14%
// later (measured G=16/32, Zipf 1), so that case asserts the bound and a 20% band.
void check(const std::vector<Result>& rs, bool oversubscribed) {
  ASSERT_EQ(rs.size(), 12u);
  for (const auto& r : rs) {
    const bool skewed = r.label.find("zipf=0.0") == std::string::npos;
    if (skewed && oversubscribed) {
      EXPECT_LE(r.analytic, r.pairwise * (1 + 1e-5)) << r.label;  // SimGrid solves to ~1e-5 relative
      EXPECT_LT(r.pairwise / r.analytic, 1.20) << r.label;
      EXPECT_NEAR(r.aggregate / r.pairwise, 1.0, 0.10) << r.label;
      continue;
    }
    EXPECT_NEAR(r.aggregate / r.pairwise, 1.0, 0.05) << r.label << " aggregate " << r.aggregate << " pairwise " << r.pairwise;
    EXPECT_NEAR(r.analytic / r.pairwise, 1.0, 0.05) << r.label << " analytic " << r.analytic << " pairwise " << r.pairwise;
  }
}

}  // namespace

TEST(AllToAll, AggregateAndClosedFormMatchPairwiseFlowsOnARailOptimizedFabric) {
  ClusterSpec c;
  c.nodes = 4;
  check(run_cases(c), false);
}

TEST(AllToAll, AggregateAndClosedFormMatchPairwiseFlowsOnAnOversubscribedFatTree) {
  ClusterSpec c;
  c.nodes = 4;
  c.fabric = FabricKind::fat_tree;
  c.oversubscription = 2.0;
  check(run_cases(c), true);
}

TEST(AllToAll, UniformClosedFormByHand) {
  // 32 GPUs on 4 nodes, 1 MB per pair: the NIC carries 24 MB at 50 GB/s → 480 µs + 2 × 3 µs
  FabricParams f;
  EXPECT_DOUBLE_EQ(alltoall_time(f, uniform_alltoall_load(f, 32, 1e6)), 24e6 / 50e9 + 6e-6);
  // through 2:1 oversubscribed uplinks: 8 × 24 MB per node over 200 GB/s
  f.oversubscription = 2;
  EXPECT_DOUBLE_EQ(alltoall_time(f, uniform_alltoall_load(f, 32, 1e6)), 8 * 24e6 / 200e9 + 6e-6);
}
