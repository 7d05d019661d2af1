#include "costmodels/deepep_bench.hpp"

#include "costmodels/step_cost.hpp"

#include <algorithm>
#include <stdexcept>

namespace servesim {

ModelSpec deepep_bench_model(const DeepEpLayer& l, int ep, EpDispatch mode, int gpus_per_node) {
  if (l.hidden < 1 || l.experts < 1 || l.top_k < 1 || l.top_k > l.experts || ep < 1 || l.experts % ep != 0 || gpus_per_node < 1)
    throw std::invalid_argument("DeepEP benchmark layer: hidden, experts, ep, gpus_per_node >= 1, 1 <= top_k <= experts, ep divides experts");
  ModelSpec m;
  m.name = "deepep-bench";
  m.hidden = l.hidden;
  FfnSpec f;
  f.op = FfnOp::moe;
  f.experts = l.experts, f.top_k = l.top_k;
  f.expert_intermediate = 2048;  // not used by the all-to-all
  f.dispatch_dtype = DType::fp8, f.combine_dtype = DType::bf16;
  const int nodes = (ep + gpus_per_node - 1) / gpus_per_node;
  if (mode == EpDispatch::hierarchical && nodes > 1 && l.experts % nodes == 0) f.expert_groups = nodes, f.topk_groups = std::min(nodes, 4);
  m.ffn_kinds.push_back(f);
  return m;
}

AllToAllLoad deepep_bench_load(const ModelSpec& m, const FabricParams& f, int ep, EpDispatch mode, double tokens, DType msg) {
  InstanceShape sh;
  sh.ep = ep, sh.attn_tp = 1, sh.dispatch = mode;
  const StepCostModel sc(m, nullptr, f, sh, 0.0);
  return sc.moe_alltoall_load(0, tokens, tokens * ep, msg);
}

double deepep_counted_bytes(const ModelSpec& m, int ep, double tokens, DType msg, int gpus_per_node) {
  const FfnSpec& f = m.ffn_kinds.at(0);
  const int nodes = (ep + gpus_per_node - 1) / gpus_per_node;
  const int parts = nodes > 1 ? nodes : ep;
  const double reached = expected_parts_reached(f.experts, f.top_k, f.expert_groups, f.topk_groups, parts);
  return tokens * reached * m.hidden * ep_message_bytes_per_value(msg);
}

}  // namespace servesim
