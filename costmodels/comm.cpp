#include "costmodels/comm.hpp"

#include <algorithm>

namespace servesim {

double alltoall_time(const FabricParams& f, const AllToAllLoad& load) {
  double t = 0;
  if (load.intra_bytes > 0)
    t = std::max(t, load.intra_bytes / (f.nvlink_efficiency * f.nvlink_bytes_per_s) + 2 * f.nvlink_latency_s);
  if (load.inter_bytes > 0)
    t = std::max(t, load.inter_bytes / (f.nic_efficiency * f.nic_bytes_per_s / f.oversubscription) + 4 * f.nic_latency_s);
  return t;
}

AllToAllLoad uniform_alltoall_load(const FabricParams& f, int group, double bytes_per_peer) {
  const int local = std::min(group, f.gpus_per_node);
  return {static_cast<double>(local - 1) * bytes_per_peer, static_cast<double>(group - local) * bytes_per_peer};
}

double allreduce_time(const FabricParams& f, int tp, double bytes) {
  if (tp <= 1) return 0.0;
  return 2.0 * (tp - 1) / tp * bytes / (f.nvlink_efficiency * f.nvlink_bytes_per_s) + 2.0 * (tp - 1) * f.nvlink_latency_s;
}

double expected_destination_gpus(int experts, int top_k, int group) {
  if (group <= 1) return 1.0;
  const int per_gpu = experts / group;
  // C(E - m, k) / C(E, k) = prod_{i<k} (E - m - i) / (E - i)
  double p_untouched = 1.0;
  for (int i = 0; i < top_k; ++i)
    p_untouched *= std::max(0.0, static_cast<double>(experts - per_gpu - i)) / static_cast<double>(experts - i);
  return group * (1.0 - p_untouched);
}

}  // namespace servesim
