// servesim costmodels: the time of one batch step of one instance (an EP group whose attention
// runs data-parallel over DP = ep / attn_tp groups). This is the engine's unit of work: the compute
// of every layer for the step's batch plus that step's TP all-reduces and EP all-to-alls.
// FLOP and byte formulas: shared/reference/model-facts.md §2 (cited per op in step_cost.cpp).
#pragma once
#include "costmodels/comm.hpp"
#include "costmodels/cost_model.hpp"
#include "costmodels/expert_load.hpp"
#include "scenarios/deployment.hpp"
#include "scenarios/model_spec.hpp"

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace servesim {

/// How an instance is laid out (from a pool: instance_shape()). ep = GPUs of the instance (EP size); attn_tp = attention tensor
/// parallelism inside a node; dp = ep / attn_tp attention groups.
struct InstanceShape {
  int ep = 8;
  int attn_tp = 1;
  int redundant_experts = 0;       ///< extra expert copies per MoE layer (EPLB)
  /// Busiest GPU's routed token-expert assignments / mean. > 0: fixed at this value; 0: from the
  /// model's expert popularity (ExpertLoad) when `expert_skew`, else 1 (perfectly balanced).
  double expert_imbalance = 0;
  bool two_batch_overlap = false;  ///< overlap each layer's all-to-all with compute (SGLang TBO)
  EpDispatch dispatch = EpDispatch::hierarchical;
  bool expert_skew = false;        ///< sample routed-expert loads from the model's ExpertPopularity
  // What the step spends outside its kernels (issue 11; sources in the hardware files):
  bool cuda_graph = false;         ///< the step replays a captured CUDA graph (one launch per step)
  double kernel_launch_s = 0;      ///< eager: host launch gap per kernel (seconds)
  double graph_launch_s = 0;       ///< graph: one launch per step (seconds)
  /// Fraction of the SMs that hierarchical (DeepEP normal) dispatch/combine kernels occupy while
  /// they run; compute overlapped with them (two-batch overlap) runs on the rest. 0 = none.
  double comm_sm_fraction = 0;
  int mtp_draft_tokens = 0;  ///< decode: MTP drafts per step (the draft passes are priced in the step)
  double overlap_exposed_fraction = 0;  ///< two-batch overlap: share of the all-to-all left on the critical path
  bool eplb = false;  ///< experts placed by EPLB even without redundant copies (redundant_experts > 0 implies it)
  int dp() const { return ep / attn_tp; }
};

/// The shape of an instance of `pool`, balanced routing and no host costs (unit tests). No errors.
inline InstanceShape instance_shape(const PoolSpec& pool) {
  InstanceShape s;
  s.ep = pool.ep, s.attn_tp = pool.attn_tp, s.redundant_experts = pool.redundant_experts, s.eplb = pool.eplb;
  s.expert_imbalance = pool.expert_imbalance, s.two_batch_overlap = pool.two_batch_overlap, s.dispatch = pool.ep_dispatch;
  s.mtp_draft_tokens = pool.mtp_draft_tokens;
  s.overlap_exposed_fraction = pool.overlap_exposed_fraction;
  return s;
}

/// The shape of an instance of `pool` in deployment `d` as the engine runs it: expert loads from
/// the model's popularity, the pool's CUDA-graph setting and the GPU's launch and SM figures.
/// No errors.
inline InstanceShape instance_shape(const DeploymentSpec& d, const PoolSpec& pool) {
  InstanceShape s = instance_shape(pool);
  s.expert_skew = true;
  s.cuda_graph = pool.cuda_graph;
  s.kernel_launch_s = d.gpu.kernel_launch_s, s.graph_launch_s = d.gpu.graph_launch_s;
  s.comm_sm_fraction = d.gpu.sm_count > 0 ? static_cast<double>(d.gpu.ep_normal_comm_sms) / d.gpu.sm_count : 0.0;
  return s;
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
  double other_s = 0;       ///< lm_head + host time (host_s)
  double host_s = 0;        ///< exposed host time: scheduler (step_overhead_s) + launch gaps or the graph launch
  double expert_load = 1;   ///< busiest/mean routed load the step was priced at (main MoE kind)
  Provenance source = Provenance::roofline;  ///< worst provenance among the ops answered
  double a2a_inter_bytes_gpu = 0;   ///< NIC bytes the busiest GPU sends (and receives) in the step's all-to-alls
  double extrapolated_s = 0;        ///< seconds of the kernels answered `extrapolated` (outside measurements; OpLatency::extrapolated_s)
  std::uint32_t extrapolated_ops = 0;  ///< bit (1 << OpKind) for each op kind answered `extrapolated`
};

/// The per-rank part of a step (attention of every kind on the slowest DP rank, token totals):
/// the expensive half of pricing, independent of the step's expert loads (StepCostModel::finish).
struct StepParts {
  std::vector<double> attn, attn_extra;  ///< per attention kind: slowest rank's seconds, extrapolated seconds
  std::vector<int> attn_kernels;         ///< per attention kind: kernels of one layer
  /// per attention kind, decode with MTP of k > 1 drafts only (else empty): the slowest rank's
  /// seconds of a draft pass, one query token per sequence at the verify pass's context (split into
  /// the two micro-batches as the verify pass is), and the extrapolated part of those seconds
  std::vector<double> attn_draft, attn_draft_extra;
  double Tmax = 0, Ttot = 0, logits_max = 0;
  /// sequences of the busiest DP rank (decode two-batch overlap splits sequences, not tokens: with
  /// MTP a rank of one sequence verifying k + 1 tokens cannot be split)
  double Smax = 0;
  /// effective number of sequences routed in the step, (Σ t_i)² / Σ t_i·(t_i − 1) over every
  /// rank's sequences (t_i new tokens); 0 when every t_i is 1 (no two tokens share a sequence).
  /// Sets the routing drift (ExpertLoad).
  double seqs_eff = 0;
  Provenance source = Provenance::roofline;
  std::uint32_t extrapolated_ops = 0;
};

/// Decode steps whose busiest DP rank holds more than this many sequences are in the large-batch
/// regime, the others in the small-batch one (`servesim validate`'s serving error by regime and
/// StepScale use the same edge). Source: SGLang's two-batch-overlap ablation
/// (../shared/reference/serving-overheads.md §3): at 32 tokens per GPU overlap loses 27%, at 256
/// it gains 25.5%: the published decode rows fall on either side of 32.
inline constexpr long long kSmallDecodeBatchSeqs = 32;

/// Whole-step time multipliers (dimensionless, > 0; 1 = the engine's own price) by serving regime:
/// a prefill step, a decode step of more than kSmallDecodeBatchSeqs sequences on its busiest DP
/// rank, and a decode step of at most that many. `servesim capacity` runs its answer with
/// 1 + the engine's error against published deployments in each regime (`servesim validate`), to
/// say how many nodes the answer would need if real serving were that much slower (or faster)
/// than the engine. Every part of StepTime is scaled alike. Not checked here (the capacity command
/// passes factors from the validation rows).
struct StepScale {
  double prefill = 1, decode_large = 1, decode_small = 1;
  bool identity() const { return prefill == 1 && decode_large == 1 && decode_small == 1; }
  /// the factor of a step of `phase` whose busiest DP rank holds `seqs` sequences
  double of(bool decode, double seqs) const { return !decode ? prefill : seqs > kSmallDecodeBatchSeqs ? decode_large : decode_small; }
};

class StepCostModel {
 public:
  /// step_overhead_s: fixed time per step outside the kernels (scheduling, sampling, launch).
  /// Throws std::invalid_argument if the shape does not divide (ep % attn_tp, experts % ep).
  StepCostModel(const ModelSpec& model, std::shared_ptr<const CostModel> cost, FabricParams fabric, InstanceShape shape,
                double step_overhead_s);

  /// Time of one step at the expected expert load. per_rank[r]: the sequences DP rank r processes
  /// (size must be shape.dp(), else std::invalid_argument).
  StepTime step(const std::vector<std::vector<SeqWork>>& per_rank, Phase phase) const;
  /// The same at expert-load sample `sample` of ExpertLoad (0 ≤ sample < ExpertLoad::kSamples;
  /// −1 = the expected load). The engine draws `sample` per step with draw_sample().
  StepTime step(const std::vector<std::vector<SeqWork>>& per_rank, Phase phase, int sample) const;
  StepParts attention_part(const std::vector<std::vector<SeqWork>>& per_rank, Phase phase) const;
  StepTime finish(const StepParts& parts, Phase phase, int sample) const;
  /// Every later step's time times `s`'s factor of its regime (finish(); default: none). No errors.
  void set_scale(const StepScale& s) { scale_ = s; }
  const StepScale& scale() const { return scale_; }
  /// A uniform sample index for one step (0 when routing is balanced: no draw is taken).
  int draw_sample(Rng& rng) const;
  /// Busiest/mean routed load of MoE kind f for `tokens` tokens from `seqs` effective sequences
  /// (0: one token each) at `sample` (−1: expected).
  double expert_load(int f, double tokens, double seqs, int sample) const;

  /// Two-batch overlap as this instance applies it, given the busiest DP rank's sequence count:
  /// whether a decode rank's attention runs as two micro-batches of alternating sequences (prefill
  /// attention stays whole), and how many micro-batches each layer's FFN and all-to-all run in (2, or
  /// 1 without overlap or for a decode rank of one sequence). No errors.
  bool splits_attention(Phase phase, double seqs) const { return phase == Phase::decode && shape_.two_batch_overlap && seqs >= 2; }
  double micro_batches(Phase phase, double seqs) const { return shape_.two_batch_overlap && (phase == Phase::prefill || seqs >= 2) ? 2.0 : 1.0; }

  /// Ops of one attention layer of kind `a` for one rank's sequences (on one GPU of its TP group).
  void attention_ops(int a, const std::vector<SeqWork>& seqs, Phase phase, std::vector<Op>& out) const;
  /// Ops of one FFN layer of kind `f` on one GPU: `rank_tokens` tokens of the busiest DP rank,
  /// `total_tokens` tokens over the whole instance (routed experts see all of them).
  /// `load`: busiest/mean routed load (1 = balanced).
  void ffn_ops(int f, double rank_tokens, double total_tokens, std::vector<Op>& out, double load = 1) const;
  /// EP all-to-all time (dispatch + combine) of one MoE layer of kind f, seconds.
  double moe_comm_s(int f, double rank_tokens, double total_tokens, double load = 1) const;
  /// Busiest GPU's / node's bytes of one EP all-to-all of one MoE layer of kind f whose messages
  /// carry `message` elements (dispatch_dtype or combine_dtype); alltoall_time() of it is the time.
  AllToAllLoad moe_alltoall_load(int f, double rank_tokens, double total_tokens, DType message, double load = 1) const;

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
  StepScale scale_;
  std::vector<LayerPair> pairs_;
  std::vector<double> attn_proj_params_;  // per attention kind, whole layer (before TP split)
  std::vector<double> attn_rep_params_;   // of those, the ones each attention-TP rank holds whole
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
  GemmShape mtp_proj_gemm_;  // MTP eh_proj (2·D → D, full weights; n 0 without MTP layers)
  std::vector<std::unique_ptr<ExpertLoad>> loads_;  // per ffn kind (null: dense)
  int main_moe_ = -1;                              // ffn kind whose load StepTime reports
  mutable std::vector<Op> scratch_;
  mutable std::vector<SeqWork> draft_;     // a rank's sequences at one query token (MTP draft passes)
  mutable std::vector<SeqWork> halves_[2];  // a decode rank's sequences split into the two micro-batches
  // One FFN layer's priced parts, a pure function of (ffn kind, micro-batches, Tm, Tt, sample):
  // finish() memoises them (decode steps repeat the same token counts and samples millions of
  // times); values are bit-for-bit what pricing gives.
  struct FfnKey {
    int ffn, mb, sample, seq;  // seq: ExpertLoad::seq_key of the step's sequences
    double tm, tt;
    bool operator==(const FfnKey& o) const {
      return ffn == o.ffn && mb == o.mb && sample == o.sample && seq == o.seq && tm == o.tm && tt == o.tt;
    }
  };
  struct FfnKeyHash {
    size_t operator()(const FfnKey& k) const;
  };
  struct FfnLayer {
    double ffn = 0, ffn_extra = 0, comm = 0, a2a_dispatch = 0, a2a_combine = 0;
    int kernels = 0;
    Provenance source = Provenance::roofline;
    std::uint32_t extrapolated_ops = 0;
  };
  // direct-mapped (a slot per hash; a collision recomputes): one probe, no allocation
  struct FfnSlot {
    FfnKey key{-1, 0, 0, 0, 0, 0};
    FfnLayer layer;
  };
  static constexpr size_t kFfnMemoSlots = size_t{1} << 16;
  mutable std::vector<FfnSlot> ffn_memo_;
  FfnLayer ffn_layer(int f, double mb, double Tm, double Tt, double seqs, int sample) const;
  double sum_ops(const std::vector<Op>& ops, StepTime& st, double& extra) const;
  double host_seconds(int kernels, double gpu_s, int syncs) const;
  double rank_attention_s(int a, const std::vector<SeqWork>& seqs, Phase phase, bool split, StepTime& st, double& extra, int& kernels) const;
  /// One micro-batch's attention of a KDA kind, a pure function of (kind, phase, tokens,
  /// sequences): KDA's recurrent state is a fixed size per sequence, so none of its ops (the
  /// projections, short conv, KDA core, norms: kda_ops) reads the context; the ops carry no
  /// context (ctx_sum = ctx_max = 0) so that no cost model can make them depend on it. Decode
  /// re-prices every DP rank whenever its batch moved; this keeps the unchanged ranks' KDA halves.
  struct KdaKey {
    int kind, phase;
    double tokens, seqs;
    bool operator==(const KdaKey& o) const { return kind == o.kind && phase == o.phase && tokens == o.tokens && seqs == o.seqs; }
  };
  struct KdaKeyHash {
    size_t operator()(const KdaKey& k) const;
  };
  struct AttnPrice {
    double s = 0, extra = 0;
    int kernels = 0;
    Provenance source = Provenance::roofline;
    std::uint32_t extrapolated_ops = 0;
  };
  static constexpr size_t kKdaMemoMax = size_t{1} << 16;
  mutable std::unordered_map<KdaKey, AttnPrice, KdaKeyHash> kda_memo_;
  double head_seconds(OpKind kind, double rows, int calls, StepTime& st, int& kernels) const;
};

}  // namespace servesim
