#include "topology/alltoall_flows.hpp"

namespace sg4 = simgrid::s4u;

namespace servesim {

double alltoall_pairwise_flows(const Platform& p, const std::vector<int>& group, const TrafficMatrix& bytes) {
  const double t0 = sg4::Engine::get_clock();
  std::vector<sg4::CommPtr> comms;
  for (size_t i = 0; i < group.size(); ++i)
    for (size_t j = 0; j < group.size(); ++j)
      if (i != j && bytes[i][j] > 0)
        comms.push_back(sg4::Comm::sendto_async(p.gpus[static_cast<size_t>(group[i])], p.gpus[static_cast<size_t>(group[j])], bytes[i][j]));
  sg4::Comm::wait_all(comms);
  return sg4::Engine::get_clock() - t0;
}

double alltoall_aggregate_flows(const Platform& p, const std::vector<int>& group, const TrafficMatrix& bytes) {
  const double t0 = sg4::Engine::get_clock();
  const int per_node = p.gpus_per_node;
  std::vector<sg4::CommPtr> comms;
  for (size_t i = 0; i < group.size(); ++i) {
    double intra_out = 0, intra_in = 0, inter_out = 0, inter_in = 0;
    const int ni = group[i] / per_node;
    for (size_t j = 0; j < group.size(); ++j) {
      if (i == j) continue;
      const bool same = group[j] / per_node == ni;
      (same ? intra_out : inter_out) += bytes[i][j];
      (same ? intra_in : inter_in) += bytes[j][i];
    }
    sg4::Host* g = p.gpus[static_cast<size_t>(group[i])];
    sg4::Host* sw = p.switches[static_cast<size_t>(ni)];
    if (intra_out > 0) comms.push_back(sg4::Comm::sendto_async(g, sw, intra_out));
    if (intra_in > 0) comms.push_back(sg4::Comm::sendto_async(sw, g, intra_in));
    if (inter_out > 0) comms.push_back(sg4::Comm::sendto_async(g, p.spine, inter_out));
    if (inter_in > 0) comms.push_back(sg4::Comm::sendto_async(p.spine, g, inter_in));
  }
  sg4::Comm::wait_all(comms);
  return sg4::Engine::get_clock() - t0;
}

}  // namespace servesim
