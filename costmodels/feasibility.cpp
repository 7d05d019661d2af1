#include "costmodels/feasibility.hpp"

#include "costmodels/memory.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace servesim {
namespace {

std::string gb(double b) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(1);
  o << b / 1e9 << " GB";
  return o.str();
}

}  // namespace

GpuMemoryPlan plan_gpu_memory(const DeploymentSpec& d, const PoolSpec& pool) {
  GpuMemoryPlan m;
  m.hbm = d.gpu.hbm_bytes;
  m.usable = m.hbm * d.memory_utilization;
  const WeightsPerGpu w = weights_per_gpu(d.model, pool.ep, pool.attn_tp, pool.redundant_experts);
  m.expert_weights = w.expert_bytes;
  m.other_weights = w.non_expert_bytes;
  const long long tokens = std::max<long long>(pool.max_batch_tokens, pool.max_running);
  m.workspace = activation_workspace_bytes(d.model, tokens, pool.max_running, pool.attn_tp);
  m.reserved = d.reserved_bytes_per_gpu;
  m.kv_budget = m.usable - m.expert_weights - m.other_weights - m.workspace - m.reserved;
  return m;
}

void validate_deployment(const DeploymentSpec& d, const std::string& where) {
  const int per_node = d.gpu.gpus_per_node;
  auto fail = [&](const std::string& field, const std::string& msg) { throw std::invalid_argument(where + "." + field + ": " + msg); };
  for (const auto* pp : {&d.prefill, &d.decode}) {
    const PoolSpec& p = *pp;
    const std::string pool = pp == &d.prefill ? "prefill" : "decode";
    if (p.instances < 1) fail(pool + ".instances", "must be ≥ 1");
    if (p.ep < 1) fail(pool + ".ep", "must be ≥ 1");
    if (p.attn_tp < 1 || p.ep % p.attn_tp != 0)
      fail(pool + ".attn_tp", std::to_string(p.attn_tp) + " must divide ep = " + std::to_string(p.ep));
    if (p.attn_tp > per_node) fail(pool + ".attn_tp", "attention TP runs inside one node: at most " + std::to_string(per_node));
    if (!(per_node % p.ep == 0 || p.ep % per_node == 0))
      fail(pool + ".ep", std::to_string(p.ep) + " must divide or be a multiple of " + std::to_string(per_node) + " GPUs per node");
    for (const auto& f : d.model.ffn_kinds) {
      if (f.op != FfnOp::moe) continue;
      if ((f.experts + p.redundant_experts) % p.ep != 0)
        fail(pool + ".ep", "EP size " + std::to_string(p.ep) + " does not divide the " + std::to_string(f.experts) + " routed experts" +
                               (p.redundant_experts ? " + " + std::to_string(p.redundant_experts) + " redundant" : std::string()) +
                               " of " + d.model.name + "; choose an EP size that divides it or set redundant_experts");
    }
    if (p.max_batch_tokens < 1) fail(pool + ".max_batch_tokens", "must be ≥ 1");
    if (p.chunk_tokens < 1) fail(pool + ".chunk_tokens", "must be ≥ 1");
    if (p.max_running < 1) fail(pool + ".max_running", "must be ≥ 1");
    if (p.mtp_draft_tokens > 0 && &p == &d.prefill) fail(pool + ".mtp", "multi-token prediction is a decode setting");
    if (p.mtp_draft_tokens > 0 && d.model.mtp_layers < 1)
      fail(pool + ".mtp", "model \"" + d.model.name + "\" ships no MTP draft head (mtp_layers 0)");
    if (p.expert_imbalance != 0 && p.expert_imbalance < 1.0) fail(pool + ".expert_imbalance", "must be 0 (sampled) or ≥ 1 (busiest GPU / mean)");
    const GpuMemoryPlan m = plan_gpu_memory(d, p);
    if (!m.fits()) {
      std::ostringstream o;
      o << "weights do not fit: per GPU " << gb(m.expert_weights) << " routed experts + " << gb(m.other_weights)
        << " other weights (1/" << p.attn_tp << " of a replica) + " << gb(m.workspace) << " workspace + " << gb(m.reserved)
        << " reserved > " << gb(m.usable) << " usable (" << d.memory_utilization << " × " << gb(m.hbm)
        << "). Raise attn_tp (splits the non-expert weights) or ep (splits the experts), or lower "
        << (p.max_running > p.max_batch_tokens ? "max_running (the workspace holds one token per running sequence)"
                                               : "max_batch_tokens (the workspace holds the step's tokens)");
      fail(pool, o.str());
    }
  }
  const int nodes_needed = required_nodes(d);
  if (d.cluster.nodes < nodes_needed)
    fail("cluster.nodes", std::to_string(d.cluster.nodes) + " nodes cannot hold the pools: they need " + std::to_string(nodes_needed) +
                              " (prefill " + std::to_string(d.prefill.instances) + " × EP" + std::to_string(d.prefill.ep) + ", decode " +
                              std::to_string(d.decode.instances) + " × EP" + std::to_string(d.decode.ep) + ")");
  if (d.prefix_cache.block_tokens < 1) fail("prefix_cache.block_tokens", "must be ≥ 1");
  if (!(d.memory_utilization > 0 && d.memory_utilization <= 1)) fail("memory_utilization", "must be in (0, 1]");
  if (!(d.slo.ttft_s > 0) || !(d.slo.tpot_s > 0)) fail("slo", "ttft_s and tpot_s must be > 0");
}

}  // namespace servesim
