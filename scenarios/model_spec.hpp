// servesim scenarios: a model architecture as plain data. Loaded from scenarios/models/*.json by
// the scenario loader; code knows op kinds (KDA, MLA, CSA, HCA, SWA, dense FFN, MoE), never model
// names. Every dimension's source is recorded in the model's JSON file ("source" fields).
#pragma once
#include "scenarios/dtype.hpp"

#include <map>
#include <string>
#include <vector>

namespace servesim {

/// Attention op kinds the cost model and the KV accounting know.
///  kda: Kimi Delta Attention (linear, recurrent state [H, D, D] per sequence) — model-facts §2.1
///  mla: multi-head latent attention, absorbed-MQA decode over a (kv_lora+rope)-value latent — §2.2
///  csa: DeepSeek V4 compressed sparse attention (ratio-4 compressor, lightning indexer, top-k) — §2.3
///  hca: DeepSeek V4 heavily compressed attention (ratio 128, dense over compressed entries) — §2.4
///  swa: sliding-window-only attention (V4-Flash layers 0-1) — §1.2
enum class AttentionOp { kda, mla, csa, hca, swa };

/// One attention layer kind. Fields that an op does not use stay 0. Dimensions are counts
/// (heads, values per head); byte fields are bytes.
struct AttentionSpec {
  std::string name;
  AttentionOp op = AttentionOp::mla;
  int heads = 0;      ///< query heads
  int head_dim = 0;   ///< kda: D (= key dim = value dim); csa/hca/swa: 512
  DType proj_dtype = DType::bf16;
  // kda
  int conv_kernel = 0;      ///< short-convolution width (4)
  int gate_rank = 0;        ///< low-rank decay gate f_a/f_b rank (128)
  int kda_chunk_tokens = 0;  ///< KDA kernel chunk C of its chunked prefill (16 FlashKDA, 64 FLA; model file key "chunk_tokens"); not the scheduler's prefill chunk (PoolSpec::chunk_tokens)
  DType state_dtype = DType::fp32;
  bool full_rank_output_gate = false;  ///< g_proj [H*D, hidden]
  // mla
  int q_lora_rank = 0, kv_lora_rank = 0, qk_nope_dim = 0, qk_rope_dim = 0, v_head_dim = 0;
  bool output_gate = false;  ///< gated MLA: g_proj [H*v, hidden]
  DType kv_dtype = DType::bf16;
  // csa / hca / swa (DeepSeek V4)
  int rope_dim = 0;
  int o_groups = 0, o_lora_rank = 0;  ///< grouped low-rank output projection
  int window_tokens = 0;              ///< sliding window (128)
  int compress_ratio = 0;             ///< 4 (csa) or 128 (hca); 0 for swa
  bool compressor_overlap = false;    ///< csa: each entry pools 8 tokens every 4
  double kv_entry_bytes = 0;          ///< 584 B FP8 entry (FlashMLA MODEL1 layout)
  int indexer_heads = 0, indexer_head_dim = 0, indexer_topk = 0;
  double indexer_entry_bytes = 0;     ///< 132 B: 128 FP8 + fp32 scale
};

enum class FfnOp { dense, moe };
/// The MoE gate (model file key "router"): how token-to-expert scores are made. Not the request
/// router (sim/policies/router.hpp).
enum class GateKind { softmax, sigmoid_bias, sqrt_softplus_bias, hash };

/// How unevenly a MoE kind's experts are chosen (costmodels/expert_load.hpp says how it is used):
/// long-run per-expert popularity from a bounded power law x^−alpha on [1, range], jittered every
/// step by exp(σ·N(0,1)) with σ² = drift_sigma² + sequence_sigma² / S, S the step's effective
/// number of sequences (a step of few whole prompts drifts further from the long-run popularity
/// than one token from each of thousands of sequences; costmodels/expert_load.hpp). alpha = 0:
/// perfectly balanced routing.
/// Model file key "expert_popularity" (with its "source").
struct ExpertPopularity {
  double alpha = 0;           ///< power-law exponent (DeepSeek-V3/R1: 1.01, aiconfigurator)
  double range = 1e4;         ///< x_max / x_min of the bounded power law
  double drift_sigma = 0.09;  ///< per-step log-normal jitter of each expert's popularity (dimensionless)
  double sequence_sigma = 0;  ///< effective within-prompt coefficient: adds sequence_sigma² / S to σ² (dimensionless, fitted)
};

/// One FFN layer kind. For moe, `intermediate` is unused and expert fields apply.
struct FfnSpec {
  std::string name;
  FfnOp op = FfnOp::moe;
  int intermediate = 0;  ///< dense GLU width
  DType dtype = DType::bf16;
  int experts = 0, top_k = 0, expert_intermediate = 0;
  /// Group-limited routing (DeepSeek-V3's n_group / topk_group, model file keys "expert_groups" /
  /// "topk_groups"): the experts form `expert_groups` equal groups of consecutive experts and a token
  /// picks its top_k experts inside its `topk_groups` best groups. Defaults 1 / expert_groups: no
  /// limit. Only the
  /// EP all-to-all's destination counts use it (costmodels/comm.hpp expected_parts_reached).
  int expert_groups = 1, topk_groups = 1;
  int shared_experts = 0;
  int shared_intermediate = 0;  ///< total width of the (fused) shared experts
  int latent_dim = 0;           ///< LatentMoE: experts run in this width (0 = hidden)
  GateKind gate = GateKind::softmax;  ///< model file key "router"
  DType expert_dtype = DType::bf16, shared_dtype = DType::bf16, latent_dtype = DType::bf16,
        gate_dtype = DType::bf16;  ///< gate weights (model file key "router_dtype")
  DType dispatch_dtype = DType::bf16, combine_dtype = DType::bf16;  ///< EP message formats
  std::string activation;
  ExpertPopularity popularity;  ///< moe: routing skew (default: balanced)
};

/// One decoder layer: indexes into ModelSpec::attention_kinds / ffn_kinds.
struct LayerSpec {
  int attention = 0;
  int ffn = 0;
};

struct ModelSpec {
  std::string name, display_name;
  int hidden = 0;
  int vocab = 0;
  bool tied_embeddings = false;
  DType embedding_dtype = DType::bf16;
  long long max_context_tokens = 0;
  int mtp_layers = 0;        ///< multi-token-prediction layers: weights held, not run
  int residual_streams = 1;  ///< DeepSeek V4 mHC: 4
  double published_total_params = 0, published_active_params = 0;
  std::vector<AttentionSpec> attention_kinds;
  std::vector<FfnSpec> ffn_kinds;
  std::vector<LayerSpec> layers;  ///< in model order
  std::map<std::string, std::string> sources;

  /// Number of layers using attention kind a / ffn kind f.
  int count_attention(int a) const;
  int count_ffn(int f) const;
  /// The MoE kind with the most layers, or nullptr for a dense model.
  const FfnSpec* main_moe() const;
};

std::string_view to_string(AttentionOp op);

}  // namespace servesim
