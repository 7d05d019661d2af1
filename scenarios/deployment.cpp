#include "scenarios/deployment.hpp"

namespace servesim {

GpuLayout gpu_layout(const DeploymentSpec& d) {
  const int per_node = d.gpu.gpus_per_node;
  auto round_up = [per_node](int g) { return (g + per_node - 1) / per_node * per_node; };
  GpuLayout l;
  int g = 0;
  for (int i = 0; i < d.prefill.instances; ++i, g += d.prefill.ep) l.prefill_first_gpu.push_back(g);
  g = round_up(g);  // the decode pool starts on a node boundary
  for (int i = 0; i < d.decode.instances; ++i, g += d.decode.ep) l.decode_first_gpu.push_back(g);
  l.gpus = round_up(g);
  return l;
}

int required_gpus(const DeploymentSpec& d) { return gpu_layout(d).gpus; }

int required_nodes(const DeploymentSpec& d) { return required_gpus(d) / d.gpu.gpus_per_node; }

}  // namespace servesim
