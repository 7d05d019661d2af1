// The Boost.Graph view: link inventory and bisection bandwidth by max-flow, against hand arithmetic.
#include "helpers.hpp"
#include "topology/graph.hpp"

#include <gtest/gtest.h>

using namespace servesim;

TEST(Topology, RailOptimizedBisectionIsHalfTheNodesTimesTheirNics) {
  ClusterSpec c;
  c.nodes = 4;
  const TopologyReport r = analyze_topology(c, test::gpu("h200"));
  EXPECT_EQ(r.gpus, 32);
  EXPECT_DOUBLE_EQ(r.node_nvlink_bytes_per_s, 8 * 450e9);
  EXPECT_DOUBLE_EQ(r.node_nic_bytes_per_s, 8 * 50e9);
  EXPECT_DOUBLE_EQ(r.bisection_bytes_per_s, 2 * 8 * 50e9);  // 2 nodes × 8 NICs × 50 GB/s
  EXPECT_EQ(r.graph_vertices, 32 + 4 + 4 + 1);
  EXPECT_EQ(r.graph_edges, 2 * (32 + 32 + 4));  // each full-duplex link is two directed edges
}

TEST(Topology, OversubscribedFatTreeHalvesTheBisection) {
  ClusterSpec c;
  c.nodes = 6;
  c.fabric = FabricKind::fat_tree;
  c.oversubscription = 2;
  const TopologyReport r = analyze_topology(c, test::gpu("b300"));
  EXPECT_DOUBLE_EQ(r.node_uplink_bytes_per_s, 8 * 100e9 / 2);   // B300: 800 Gb/s NICs
  EXPECT_DOUBLE_EQ(r.bisection_bytes_per_s, 3 * 8 * 100e9 / 2);
}

TEST(Topology, OneNodeHasNoBisection) {
  ClusterSpec c;
  EXPECT_DOUBLE_EQ(analyze_topology(c, test::gpu("h200")).bisection_bytes_per_s, 0.0);
  c.nodes = 0;
  EXPECT_THROW(analyze_topology(c, test::gpu("h200")), std::invalid_argument);
}
