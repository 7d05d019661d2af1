#include "scenarios/cluster_spec.hpp"

namespace servesim {

FabricParams fabric_of(const GpuSpec& g) {
  FabricParams f;
  f.gpus_per_node = g.gpus_per_node;
  f.nvlink_bytes_per_s = g.nvlink_bytes_per_s_per_direction();
  f.nvlink_latency_s = g.nvlink_latency_s;
  f.nic_bytes_per_s = g.nic_bytes_per_s();
  f.nic_latency_s = g.nic_latency_s;
  f.nvlink_efficiency = g.nvlink_efficiency;
  f.nic_efficiency = g.nic_efficiency;
  f.nvlink_call_s = g.nvlink_call_overhead_s;
  f.nic_call_s = g.nic_call_overhead_s;
  f.allreduce_call_s = g.allreduce_call_s;
  f.allreduce_bytes_per_s = g.allreduce_bytes_per_s;
  return f;
}

FabricParams fabric_params(const ClusterSpec& c, const GpuSpec& g) {
  FabricParams f = fabric_of(g);
  f.oversubscription = c.fabric == FabricKind::fat_tree ? c.oversubscription : 1.0;
  return f;
}

}  // namespace servesim
