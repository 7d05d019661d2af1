// servesim costmodels: whether a deployment can exist on its GPUs, and where one GPU's HBM goes.
// Formulas: costmodels/memory.hpp (weights, workspace, KV bytes; model-facts.md §2).
#pragma once
#include "scenarios/deployment.hpp"

#include <string>

namespace servesim {

/// Where one GPU's HBM goes (bytes).
struct GpuMemoryPlan {
  double hbm = 0, usable = 0;  ///< usable = hbm × memory_utilization
  double expert_weights = 0, other_weights = 0, workspace = 0, reserved = 0;
  double kv_budget = 0;  ///< usable − weights − workspace − reserved (may be ≤ 0: does not fit)
  bool fits() const { return kv_budget > 0; }
};

/// Memory plan of one GPU of a pool's instance (costmodels/memory.hpp formulas).
GpuMemoryPlan plan_gpu_memory(const DeploymentSpec& d, const PoolSpec& pool);

/// Checks that the deployment can exist: ep a multiple of attn_tp, attn_tp within a node, ep a
/// divisor or a multiple of gpus_per_node, experts divisible over ep (with redundant copies),
/// enough nodes, weights + workspace fit in HBM on both pools. Throws std::invalid_argument with a
/// message naming the field ("deployments[i].decode.ep", ...) and the fix.
void validate_deployment(const DeploymentSpec& d, const std::string& where);

}  // namespace servesim
