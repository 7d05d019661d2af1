#include "costmodels/comm.hpp"

#include <algorithm>

namespace servesim {

double alltoall_time(const FabricParams& f, const AllToAllLoad& load) {
  double t = 0;
  if (load.intra_bytes > 0)
    t = std::max(t, load.intra_bytes / (f.nvlink_efficiency * f.nvlink_bytes_per_s) + 2 * f.nvlink_latency_s + f.nvlink_call_s);
  if (load.inter_bytes > 0 || load.node_inter_bytes > 0) {
    const double nic = f.nic_efficiency * f.nic_bytes_per_s, uplink = nic * f.gpus_per_node / f.oversubscription;
    t = std::max(t, std::max(load.inter_bytes / nic, load.node_inter_bytes / uplink) + 2 * f.nic_latency_s + f.nic_call_s);
  }
  return t;
}

AllToAllLoad uniform_alltoall_load(const FabricParams& f, int group, double bytes_per_peer) {
  const int local = std::min(group, f.gpus_per_node);
  const double inter = static_cast<double>(group - local) * bytes_per_peer;
  return {static_cast<double>(local - 1) * bytes_per_peer, inter, local * inter};
}

AllToAllLoad busiest_load(const FabricParams& f, const std::vector<std::vector<double>>& bytes) {
  AllToAllLoad l;
  const size_t g = bytes.size();
  std::vector<double> node_out((g + f.gpus_per_node - 1) / f.gpus_per_node, 0.0), node_in(node_out.size(), 0.0);
  for (size_t i = 0; i < g; ++i) {
    double io = 0, ii = 0, eo = 0, ei = 0;
    for (size_t j = 0; j < g; ++j) {
      if (i == j) continue;
      const bool same = static_cast<int>(i) / f.gpus_per_node == static_cast<int>(j) / f.gpus_per_node;
      (same ? io : eo) += bytes[i][j];
      (same ? ii : ei) += bytes[j][i];
    }
    l.intra_bytes = std::max({l.intra_bytes, io, ii});
    l.inter_bytes = std::max({l.inter_bytes, eo, ei});
    node_out[i / f.gpus_per_node] += eo;
    node_in[i / f.gpus_per_node] += ei;
  }
  for (size_t n = 0; n < node_out.size(); ++n) l.node_inter_bytes = std::max({l.node_inter_bytes, node_out[n], node_in[n]});
  return l;
}

double allreduce_time(const FabricParams& f, int tp, double bytes) {
  if (tp <= 1) return 0.0;
  const double ring = 2.0 * (tp - 1) / tp * bytes / (f.nvlink_efficiency * f.nvlink_bytes_per_s) + 2.0 * (tp - 1) * f.nvlink_latency_s;
  if (f.allreduce_bytes_per_s <= 0) return ring + f.allreduce_call_s;
  return std::min(f.allreduce_call_s + bytes / f.allreduce_bytes_per_s, ring + f.allreduce_call_s);
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

double expected_parts_reached(int experts, int top_k, int groups, int topk_groups, int parts) {
  if (parts <= 1) return 1.0;
  if (groups <= 1 || topk_groups >= groups || topk_groups > top_k) return expected_destination_gpus(experts, top_k, parts);
  if (groups % parts == 0) return expected_destination_gpus(groups, topk_groups, parts);
  if (parts % groups == 0 && experts % groups == 0)
    return expected_destination_gpus(topk_groups * (experts / groups), top_k, topk_groups * (parts / groups));
  return expected_destination_gpus(experts, top_k, parts);
}

double ep_message_bytes_per_value(DType t) { return t == DType::fp8 ? 1.0 + 4.0 / 128.0 : bytes_per_element(t); }

}  // namespace servesim
