// servesim costmodels: the time of one batch step of one instance (an EP group whose attention
// runs data-parallel over DP = ep / attn_tp groups). This is the engine's unit of work: the compute
// of every layer for the step's batch plus that step's TP all-reduces and EP all-to-alls.
// FLOP and byte formulas: shared/reference/model-facts.md §2 (cited per op in step_cost.cpp).
#pragma once
#include "costmodels/comm.hpp"
#include "costmodels/cost_model.hpp"
#include "scenarios/deployment.hpp"
#include "scenarios/model_spec.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace servesim {

/// How an instance is laid out (from a pool: instance_shape()). ep = GPUs of the instance (EP size); attn_tp = attention tensor
/// parallelism inside a node; dp = ep / attn_tp attention groups.
struct InstanceShape {
  int ep = 8;
  int attn_tp = 1;
  int redundant_experts = 0;       ///< extra expert copies per MoE layer (EPLB)
  double expert_imbalance = 1.0;   ///< busiest GPU's routed tokens / mean (1 = perfectly balanced)
  bool two_batch_overlap = false;  ///< overlap each layer's all-to-all with compute (SGLang TBO)
  EpDispatch dispatch = EpDispatch::hierarchical;
  int dp() const { return ep / attn_tp; }
};

/// The shape of an instance of `pool`. No errors.
inline InstanceShape instance_shape(const PoolSpec& pool) {
  return {pool.ep, pool.attn_tp, pool.redundant_experts, pool.expert_imbalance, pool.two_batch_overlap, pool.ep_dispatch};
}

/// One sequence's work in a step: `new_tokens` tokens (decode: 1) appended after
/// `context_before` tokens already in its cache. `emits_logits`: the step computes its logits
/// (decode steps; the last chunk of a prefill).
struct SeqWork {
  long long new_tokens = 0;
  long long context_before = 0;
  bool emits_logits = false;
};

enum class Phase { prefill, decode };

/// A step's time, seconds, split by where it goes (parts add up to total_s when
/// two_batch_overlap is off; with it, comm_s is what was not hidden). Two-batch overlap needs two
/// micro-batches: a decode step whose busiest DP rank has a single sequence gets none.
struct StepTime {
  double total_s = 0;
  double attention_s = 0;
  double ffn_s = 0;
  double comm_s = 0;        ///< exposed communication (not hidden by two-batch overlap)
  double comm_total_s = 0;  ///< all all-to-all time of the step, hidden or not
  double other_s = 0;       ///< lm_head + fixed step overhead
  Provenance source = Provenance::roofline;  ///< worst provenance among the ops answered
  double a2a_inter_bytes_gpu = 0;   ///< NIC bytes the busiest GPU sends (and receives) in the step's all-to-alls
  double extrapolated_s = 0;        ///< latency of the ops answered `extrapolated` (outside measurements)
  std::uint32_t extrapolated_ops = 0;  ///< bit (1 << OpKind) for each op kind answered `extrapolated`
};

class StepCostModel {
 public:
  /// step_overhead_s: fixed time per step outside the kernels (scheduling, sampling, launch).
  /// Throws std::invalid_argument if the shape does not divide (ep % attn_tp, experts % ep).
  StepCostModel(const ModelSpec& model, std::shared_ptr<const CostModel> cost, FabricParams fabric, InstanceShape shape,
                double step_overhead_s);

  /// Time of one step. per_rank[r]: the sequences DP rank r processes (size must be shape.dp()).
  StepTime step(const std::vector<std::vector<SeqWork>>& per_rank, Phase phase) const;

  /// Ops of one attention layer of kind `a` for one rank's sequences (on one GPU of its TP group).
  void attention_ops(int a, const std::vector<SeqWork>& seqs, Phase phase, std::vector<Op>& out) const;
  /// Ops of one FFN layer of kind `f` on one GPU: `rank_tokens` tokens of the busiest DP rank,
  /// `total_tokens` tokens over the whole instance (routed experts see all of them).
  void ffn_ops(int f, double rank_tokens, double total_tokens, std::vector<Op>& out) const;
  /// EP all-to-all time (dispatch + combine) of one MoE layer of kind f, seconds.
  double moe_comm_s(int f, double rank_tokens, double total_tokens) const;
  /// Busiest GPU's / node's bytes of one EP all-to-all of one MoE layer of kind f whose messages
  /// carry `message` elements (dispatch_dtype or combine_dtype); alltoall_time() of it is the time.
  AllToAllLoad moe_alltoall_load(int f, double rank_tokens, double total_tokens, DType message) const;

  const ModelSpec& model() const { return model_; }
  const InstanceShape& shape() const { return shape_; }
  const CostModel& cost_model() const { return *cost_; }

 private:
  struct LayerPair {
    int attention, ffn, count;
  };
  const ModelSpec& model_;
  std::shared_ptr<const CostModel> cost_;
  FabricParams fabric_;
  InstanceShape shape_;
  double step_overhead_s_;
  std::vector<LayerPair> pairs_;
  std::vector<double> attn_proj_params_;  // per attention kind, whole layer (before TP split)
  // GEMM shapes on one GPU (after the attention-TP split) that the ops point to (Op::gemms)
  struct KindGemms {
    std::vector<GemmShape> proj;    // attention projections (M = new tokens)
    std::vector<GemmShape> kv_b;    // MLA prefill: kv_b up-projection (M = Σ prefix + chunk)
    std::vector<GemmShape> absorb;  // MLA decode: W_UK / W_UV absorption, batched over heads (M = tokens)
  };
  struct FfnGemms {
    std::vector<GemmShape> dense, shared, latent, experts;
  };
  std::vector<KindGemms> attn_gemms_;
  std::vector<FfnGemms> ffn_gemms_;
  GemmShape lm_head_gemm_;
  mutable std::vector<Op> scratch_;
};

}  // namespace servesim
