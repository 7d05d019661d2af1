// servesim topology: the same cluster as a Boost.Graph, for reports that need graph algorithms
// (bisection bandwidth by max-flow) without running a simulation. Vertices: GPUs, one NVSwitch and
// one leaf (NIC side) per node, one spine. Edges are directed, one per link direction, with
// capacities in bytes/s.
#pragma once
#include "scenarios/gpu_spec.hpp"
#include "scenarios/cluster_spec.hpp"

#include <string>
#include <vector>

namespace servesim {

struct LinkClass {
  std::string name;      ///< "nvlink", "nic", "node_uplink", "pcie"
  int count = 0;         ///< links (each full duplex)
  double bytes_per_s = 0;  ///< per direction
};

struct TopologyReport {
  int nodes = 0, gpus = 0;
  std::vector<LinkClass> links;
  double node_nvlink_bytes_per_s = 0;   ///< Σ NVLink of one node, per direction
  double node_nic_bytes_per_s = 0;      ///< Σ NICs of one node, per direction
  double node_uplink_bytes_per_s = 0;   ///< leaf uplink of one node, per direction
  double bisection_bytes_per_s = 0;     ///< max-flow from the first ⌊nodes/2⌋ nodes' GPUs to the rest, per direction
  int graph_vertices = 0, graph_edges = 0;
};

/// Builds the Boost.Graph of the cluster and computes the report (bisection by push-relabel
/// max-flow; 0 for one node). Throws std::invalid_argument on nodes < 1.
TopologyReport analyze_topology(const ClusterSpec& cluster, const GpuSpec& gpu);

}  // namespace servesim
