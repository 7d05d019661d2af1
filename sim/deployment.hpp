// servesim sim: a deployment (model × GPU × cluster × PD pools × policies) as plain data, and the
// per-GPU memory plan that decides whether it exists. The scenario loader fills these structs;
// the engine never parses JSON.
#pragma once
#include "costmodels/gpu_spec.hpp"
#include "costmodels/model_spec.hpp"
#include "costmodels/step_cost.hpp"
#include "sim/kv_store.hpp"
#include "topology/cluster_spec.hpp"

#include <string>
#include <vector>

namespace servesim {

/// One pool of identical instances (prefill or decode). An instance is an EP group of `ep` GPUs
/// whose attention runs with tensor parallelism `attn_tp` over DP = ep / attn_tp groups ("ranks").
struct PoolSpec {
  int instances = 1;
  int ep = 8;
  int attn_tp = 1;
  long long max_batch_tokens = 16384;  ///< new tokens per DP rank per step (prefill chunk budget)
  long long chunk_tokens = 8192;       ///< prefill: most tokens of one request per step (chunked prefill)
  int max_running = 128;               ///< decode: most sequences per DP rank per step (continuous batching)
  int redundant_experts = 0;           ///< EPLB extra expert copies per MoE layer
  double expert_imbalance = 1.0;       ///< busiest GPU's routed load / mean (1 = balanced)
  bool two_batch_overlap = false;      ///< overlap all-to-all with compute (SGLang TBO)
  double step_overhead_s = 5e-4;       ///< per-step time outside kernels (scheduler, sampling, launch)
  EpDispatch ep_dispatch = EpDispatch::hierarchical;  ///< prefill default; decode default: direct
  /// Put each step's inter-node all-to-all bytes on the fabric as background flows (one per
  /// attention-TP group and direction, rate-capped to last the step's all-to-all time), so that KV
  /// transfers, offloads and load-backs compete with EP traffic. The step time itself stays the
  /// closed form. Off by default: it adds 2 flows per TP group per step.
  bool all_to_all_on_fabric = false;
  InstanceShape shape() const { return {ep, attn_tp, redundant_experts, expert_imbalance, two_batch_overlap, ep_dispatch}; }
};

struct SloSpec {
  double ttft_s = 2.0;  ///< time to first token bound, seconds
  double tpot_s = 0.1;  ///< time per output token bound (mean over the request's decode), seconds
};

struct PrefixCacheSpec {
  bool enabled = true;
  int block_tokens = 512;  ///< tokens per cached KV block (Mooncake hash ids: 512)
};

struct DeploymentSpec {
  std::string name;
  ModelSpec model;
  GpuSpec gpu;
  ClusterSpec cluster;  ///< nodes: derived from the pools when 0 in the scenario
  PoolSpec prefill, decode;
  std::string router = "cache_aware";         ///< prefill placement policy (router.hpp)
  std::string decode_router = "least_loaded";  ///< decode placement policy
  std::string batch_scheduler = "fcfs";        ///< prefill batch formation (batch_scheduler.hpp)
  std::string eviction = "lru";                ///< prefix-cache eviction (prefix_cache.hpp)
  double memory_utilization = 0.90;  ///< fraction of HBM the engine may use (vLLM gpu_memory_utilization default 0.9)
  double reserved_bytes_per_gpu = 2.0 * (1ULL << 30);  ///< CUDA context, cuBLAS/NCCL/EP buffers (assumption)
  SloSpec slo;
  PrefixCacheSpec prefix_cache;
  TierSpec kv_tiers;  ///< session KV offload to host DRAM / storage (disabled by default)
};

/// Where one GPU's HBM goes (bytes).
struct GpuMemoryPlan {
  double hbm = 0, usable = 0;  ///< usable = hbm × memory_utilization
  double expert_weights = 0, other_weights = 0, workspace = 0, reserved = 0;
  double kv_budget = 0;  ///< usable − weights − workspace − reserved (may be ≤ 0: does not fit)
  bool fits() const { return kv_budget > 0; }
};

/// Memory plan of one GPU of a pool's instance (costmodels/memory.hpp formulas).
GpuMemoryPlan plan_gpu_memory(const DeploymentSpec& d, const PoolSpec& pool);

/// GPUs the pools need (instances × ep, each pool starting on a node boundary) and nodes.
int required_gpus(const DeploymentSpec& d);
int required_nodes(const DeploymentSpec& d);

/// Checks that the deployment can exist: ep a multiple of attn_tp, attn_tp within a node, ep a
/// divisor or a multiple of gpus_per_node, experts divisible over ep (with redundant copies),
/// enough nodes, weights + workspace fit in HBM on both pools. Throws std::invalid_argument with a
/// message naming the field ("deployments[i].decode.ep", ...) and the fix.
void validate_deployment(const DeploymentSpec& d, const std::string& where);

}  // namespace servesim
