#include "costmodels/comm.hpp"

#include <algorithm>
#include <cmath>

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

namespace {

// C(E − m, k) / C(E, k) = Π_{i<k} (E − m − i) / (E − i): the chance that k distinct experts drawn
// uniformly from E all miss a given m of them (m real: E / parts need not be whole; 0 once a
// factor is ≤ 0, i.e. k > E − m)
double miss_all(double E, double m, int k) {
  double p = 1.0;
  for (int i = 0; i < k; ++i) p *= std::max(0.0, (E - m - i) / (E - i));
  return p;
}

// C(n, j) p^j (1 − p)^(n − j)
double binomial_pmf(int n, int j, double p) {
  double c = 1.0;
  for (int i = 1; i <= j; ++i) c = c * (n - j + i) / i;
  return c * std::pow(p, j) * std::pow(1.0 - p, n - j);
}

}  // namespace

double expected_destination_gpus(int experts, int top_k, int group) {
  if (group <= 1) return 1.0;
  return group * (1.0 - miss_all(experts, static_cast<double>(experts) / group, top_k));
}

double expected_parts_reached(int experts, int top_k, int groups, int topk_groups, int parts) {
  if (parts <= 1) return 1.0;
  if (groups <= 1 || topk_groups >= groups || topk_groups > top_k || experts % groups != 0) return expected_destination_gpus(experts, top_k, parts);
  if (groups % parts == 0) return expected_destination_gpus(groups, topk_groups, parts);
  if (parts % groups == 0) {
    // each chosen group holds 1 + X of the token's experts, X ~ Binomial(top_k − topk_groups,
    // 1 / topk_groups) (one each, the rest spread over the chosen groups); a group of n experts
    // spans s parts of n / s experts each
    const int n = experts / groups, s = parts / groups, rest = top_k - topk_groups;
    double per_group = 0;
    for (int j = 0; j <= rest; ++j)
      per_group += binomial_pmf(rest, j, 1.0 / topk_groups) * s * (1.0 - miss_all(n, static_cast<double>(n) / s, std::min(n, 1 + j)));
    return topk_groups * per_group;
  }
  return expected_destination_gpus(experts, top_k, parts);
}

double ep_message_bytes_per_value(DType t) { return t == DType::fp8 ? 1.0 + 4.0 / 128.0 : bytes_per_element(t); }

}  // namespace servesim
