#include "topology/graph.hpp"

// GCC 12 reports a false -Wmaybe-uninitialized inside Boost.Graph's edge iterators at -O2
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#pragma GCC diagnostic pop

#include <stdexcept>

namespace servesim {
namespace {

using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using Graph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS, boost::no_property,
    boost::property<boost::edge_capacity_t, double,
                    boost::property<boost::edge_residual_capacity_t, double, boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;

struct Builder {
  Graph g;
  // a full-duplex link: two directed edges, each with its reverse (zero-capacity) companion for max-flow
  void link(std::size_t a, std::size_t b, double cap) {
    arc(a, b, cap);
    arc(b, a, cap);
  }
  void arc(std::size_t a, std::size_t b, double cap) {
    auto cap_map = boost::get(boost::edge_capacity, g);
    auto rev = boost::get(boost::edge_reverse, g);
    auto e1 = boost::add_edge(a, b, g).first;
    auto e2 = boost::add_edge(b, a, g).first;
    cap_map[e1] = cap;
    cap_map[e2] = 0;
    rev[e1] = e2;
    rev[e2] = e1;
  }
};

}  // namespace

TopologyReport analyze_topology(const ClusterSpec& cluster, const GpuSpec& gpu) {
  if (cluster.nodes < 1) throw std::invalid_argument("cluster.nodes must be ≥ 1");
  const FabricParams f = fabric_params(cluster, gpu);
  const int G = gpu.gpus_per_node, N = cluster.nodes;
  TopologyReport r;
  r.nodes = N;
  r.gpus = N * G;
  r.node_nvlink_bytes_per_s = G * f.nvlink_bytes_per_s;
  r.node_nic_bytes_per_s = G * f.nic_bytes_per_s;
  r.node_uplink_bytes_per_s = G * f.nic_bytes_per_s / f.oversubscription;
  r.links = {{"nvlink", N * G, f.nvlink_bytes_per_s},
             {"nic", N * G, f.nic_bytes_per_s},
             {"node_uplink", N, r.node_uplink_bytes_per_s},
             {"pcie", N * G, gpu.pcie_bytes_per_s_per_direction}};
  // vertices: GPUs [0, N*G), switch per node, leaf per node, spine, source, sink
  const std::size_t sw0 = static_cast<std::size_t>(N) * G, leaf0 = sw0 + N, spine = leaf0 + N, src = spine + 1, sink = spine + 2;
  Builder b;
  b.g = Graph(sink + 1);
  for (int n = 0; n < N; ++n) {
    for (int i = 0; i < G; ++i) {
      const std::size_t v = static_cast<std::size_t>(n) * G + i;
      b.link(v, sw0 + n, f.nvlink_bytes_per_s);
      b.link(v, leaf0 + n, f.nic_bytes_per_s);
    }
    b.link(leaf0 + n, spine, r.node_uplink_bytes_per_s);
  }
  r.graph_vertices = static_cast<int>(spine + 1);
  r.graph_edges = static_cast<int>(boost::num_edges(b.g) / 2);  // without the max-flow companions
  if (N >= 2) {
    const double inf = 1e30;
    for (int n = 0; n < N; ++n)
      for (int i = 0; i < G; ++i) {
        const std::size_t v = static_cast<std::size_t>(n) * G + i;
        if (n < N / 2) b.arc(src, v, inf);
        else b.arc(v, sink, inf);
      }
    r.bisection_bytes_per_s = boost::push_relabel_max_flow(b.g, src, sink);
  }
  return r;
}

}  // namespace servesim
