// servesim costmodels: parameter counts, weight bytes per GPU and KV-cache bytes per sequence,
// computed from a ModelSpec's dimensions with the formulas of shared/reference/model-facts.md §2.
// Pure functions; no simulation state.
#pragma once
#include "scenarios/model_spec.hpp"

#include <string>
#include <vector>

namespace servesim {

/// Weight elements of one routed expert: 3 · d · I, d = latent_dim (LatentMoE) or hidden.
double expert_params(const FfnSpec& f, int hidden);
/// Weight elements of one attention layer's projections (incl. gates, compressors, indexer
/// projections; excl. norms and small fp32 tensors). model-facts §2.1-2.4 "Projections".
double attention_projection_params(const AttentionSpec& a, int hidden);
/// Of those, the elements every attention-TP rank holds whole: the low-rank down-projections
/// (MLA q_a and kv_a, KDA f_a, V4 wq_a, wkv and the compressors'), as step_cost.cpp prices them.
double attention_replicated_params(const AttentionSpec& a, int hidden);

/// Bytes one token's MLA latent takes in the KV cache: BF16 (kv_lora + rope) × 2 (DeepSeek-V3:
/// 576 × 2 = 1,152); FP8 as FlashMLA stores it: kv_lora e4m3 values, one fp32 scale per 128 of
/// them, and the RoPE part in BF16 (512 + 16 + 128 = 656 B; FlashMLA README, FP8 KV cache).
/// Other dtypes: (kv_lora + rope) × their size. No errors.
double mla_latent_bytes(const AttentionSpec& a);

/// Parameters (element counts) by tensor group, whole model (all layers), and the bytes they take
/// in the model's precisions. `*_bytes` = params × bytes_per_element(dtype of that group).
struct ParamGroup {
  std::string name;      ///< "attention", "routed_experts", "shared_experts", ...
  double params = 0;     ///< elements
  double bytes = 0;      ///< bytes in the stored precision
  bool expert = false;   ///< true: split across the EP group; false: replicated per attention-TP group
};

struct ParamBreakdown {
  std::vector<ParamGroup> groups;
  double total_params() const;           ///< without MTP layers (as published totals are)
  double mtp_params = 0;                 ///< extra parameters of the MTP layers (held in memory)
  double mtp_expert_bytes = 0, mtp_other_bytes = 0;
  /// Of the non-expert bytes (stored precision), those every attention-TP rank holds whole, as
  /// step_cost.cpp prices them at full width: the attention's low-rank down-projections (MLA q_a /
  /// kv_a, KDA f_a, V4 wq_a / wkv / compressors), norms, LatentMoE down / up projections, routers,
  /// mHC mixing; mtp_replicated_bytes the same of the MTP layers (with their eh_proj).
  double replicated_bytes = 0, mtp_replicated_bytes = 0;
  double active_params = 0;              ///< parameters one token uses (routed: top_k experts; no MTP)
  double expert_bytes() const;           ///< routed experts, all layers, stored precision
  double non_expert_bytes() const;       ///< everything else (incl. embeddings), stored precision
};

/// Counts every weight tensor of the model (projections, norms, convolutions, gates, routers,
/// embeddings). Matches the published totals within 0.5% (tests/test_memory.cpp).
ParamBreakdown count_params(const ModelSpec& m);

/// How an instance's weights land on one of its GPUs.
struct WeightsPerGpu {
  double expert_bytes = 0;      ///< routed experts (+ redundant copies) held by this GPU
  /// attention, dense/shared FFN, router, embeddings, norms: the TP-split tensors' 1/attn_tp share
  /// plus the replicated ones whole (replicated_bytes)
  double non_expert_bytes = 0;
  double replicated_bytes = 0;  ///< of non_expert_bytes, held whole on every attention-TP rank
  double total() const { return expert_bytes + non_expert_bytes; }
};

/// Weights on one GPU of an EP group of `ep` GPUs whose attention runs with tensor parallelism
/// `attn_tp` (DP = ep / attn_tp). Routed experts are split over the EP group (+ `redundant_experts`
/// extra copies per MoE layer, spread evenly); everything else is split over the attention-TP group
/// (ParamBreakdown::replicated_bytes excepted: whole on each of its GPUs) and replicated across DP
/// groups. MTP layers are held in memory.
/// Throws std::invalid_argument if ep or attn_tp < 1.
WeightsPerGpu weights_per_gpu(const ModelSpec& m, int ep, int attn_tp, int redundant_experts = 0);

/// KV-cache accounting of one sequence on ONE GPU of an attention-TP group of size attn_tp.
/// Latent/compressed caches (MLA, CSA, HCA, SWA: one KV head) are replicated on every TP rank;
/// KDA states and conv states are split by heads (model-facts §3.2).
struct KvFootprint {
  double per_token_bytes = 0;  ///< bytes per context token (CSA/HCA: average, entry bytes / ratio)
  double per_seq_bytes = 0;    ///< fixed bytes per sequence: KDA + conv states, SWA windows,
                               ///< compressor buffers (model-facts §2.1, §2.4)
};
KvFootprint kv_footprint(const ModelSpec& m, int attn_tp);

/// Exact KV bytes of one sequence of `context_tokens` tokens on one GPU: compressed caches count
/// whole entries only (floor(L / ratio)); the unfinished group lives in the fixed compressor state.
double kv_bytes(const ModelSpec& m, long long context_tokens, int attn_tp);

/// Bytes one decoded token reads on the article's basis for its unit-cost ratio ("Unit Inference
/// Cost": active parameters at one byte each, FP8, plus the whole KV of one sequence at
/// `context_tokens`), from the model file: published_active_params + kv_bytes(m, context, 1).
/// Bytes. No errors.
double article_decode_bytes(const ModelSpec& m, long long context_tokens);

/// Bytes of per-sequence state that must be saved at a block boundary for a later request to
/// resume from there (prefix-cache checkpoint), on one GPU: KDA recurrent + conv states (sharded by
/// attn_tp) and SWA windows; compressor buffers only if `block_tokens` is not a multiple of the
/// layer's compress ratio (at a multiple they are empty). 0 for pure MLA models (any boundary works).
double resume_state_bytes(const ModelSpec& m, int attn_tp, int block_tokens);

/// Estimated activation workspace of one GPU (bytes) for steps of up to `tokens` new tokens per DP
/// rank and `logit_rows` sequences producing logits: 16 hidden-sized BF16 buffers per token
/// (residual streams, norms, projections, attention output), the EP dispatch and combine receive
/// buffers (top_k copies of the dispatch width per token, BF16, both directions) and fp32 logits.
/// An estimate in the spirit of serving engines' profiling runs, not a measurement.
double activation_workspace_bytes(const ModelSpec& m, long long tokens, long long logit_rows, int attn_tp);

/// Per attention kind: name, layers, bytes per token per layer, fixed bytes per sequence per layer
/// (one GPU, attn_tp = 1). Used by `servesim plan` to show where the KV bytes come from.
struct KvLayerRow {
  std::string kind;
  int layers = 0;
  double per_token_bytes_per_layer = 0;
  double per_seq_bytes_per_layer = 0;
  std::string note;
};
std::vector<KvLayerRow> kv_breakdown(const ModelSpec& m);

}  // namespace servesim
