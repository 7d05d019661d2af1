// servesim costmodels: the CostModel interface (latency of one op for one shape on one GPU) and
// the op descriptor it answers for. The analytic roofline model implements it here; the
// kernel-fitted model (the default, fitted to the tables of costmodels/data/) in fitted.hpp.
#pragma once
#include "scenarios/dtype.hpp"
#include "scenarios/gpu_spec.hpp"

#include <memory>
#include <string>
#include <string_view>

namespace servesim {

/// What an op is, in the terms of the kernel measurement tables (kernels/, costmodels/data/).
enum class OpKind {
  attn_proj,          ///< dense projections of an attention layer (q/k/v/o/gates, compressors)
  kda_prefill,        ///< KDA chunked delta-rule core
  kda_decode,         ///< KDA recurrent step
  kda_conv_norm,      ///< short conv + gated RMSNorm
  mla_prefill,        ///< MLA causal attention over chunk + prefix (MHA mode, incl. kv_b up-projection)
  mla_decode,         ///< absorbed-MQA decode over the latent cache (incl. W_UK / W_UV absorption)
  csa_indexer,        ///< lightning indexer logits + top-k
  csa_attn,           ///< sparse attention over top-k compressed entries + window
  hca_attn,           ///< dense attention over all ratio-128 entries + window
  swa_attn,           ///< window-only attention
  mhc_mix,            ///< DeepSeek V4 residual-stream mixing
  dense_ffn,          ///< dense GLU MLP
  moe_router,         ///< gate GEMM + top-k
  moe_shared,         ///< shared experts GLU
  moe_latent_proj,    ///< LatentMoE down/up projections + RMSNorm
  moe_experts,        ///< grouped routed-expert GEMMs (+ activation)
  moe_permute,        ///< token permutation / weighted combine
  lm_head,            ///< logits
  mtp_proj,           ///< MTP head's input: RMSNorms of the embedding and hidden state, eh_proj GEMM (2·D → D)
  layer_norm,         ///< a layer's two RMSNorms (each with its residual add), outside attention and FFN
  count_
};
std::string_view to_string(OpKind k);

/// One GEMM inside an op: Y[M, batch·n] = X[M, k] · W[k, n] for `batch` independent weight
/// matrices (strided batched GEMM when batch > 1). M is the op's `gemm_m`. n, k, batch are counts
/// on this GPU (after tensor-parallel splitting); dtype is the weight and tensor-core input format.
struct GemmShape {
  double n = 0, k = 0, batch = 1;
  DType dtype = DType::bf16;
};

/// GLU activation of an FFN-like op (selects the measured activation kernel).
enum class Activation { none, swiglu, situ };

/// One op of one step on one GPU. flops: FLOP (2 per multiply-add); bytes: bytes that must move
/// through HBM (weights, caches, states, activations read or written once). Shape fields carry what
/// a fitted model needs; unused ones stay 0 (costmodels/fitted.hpp documents which op uses which).
struct Op {
  OpKind kind = OpKind::attn_proj;
  OpClass cls = OpClass::gemm;
  DType math = DType::bf16;  ///< tensor-core input precision of the op's FLOPs
  double flops = 0;
  double bytes = 0;
  // shape
  double tokens = 0;    ///< new tokens processed (moe_experts / moe_permute: expert-token rows)
  double seqs = 0;      ///< sequences
  /// Σ context tokens attended (decode) or Σ prefix+chunk (prefill); 0 for the ops of a KDA layer
  /// (projections, short conv, KDA core, norms): they read no context (fixed-size state), and
  /// StepCostModel memoises their price without it (StepCostModel::KdaKey)
  double ctx_sum = 0;
  double ctx_max = 0;   ///< the longest sequence's context + new tokens (0 as ctx_sum for KDA layers)
  double heads = 0;     ///< heads on this GPU (moe_experts: experts held by this GPU)
  // shape fields added for the kernel-fitted models (issue #5)
  bool decode = false;        ///< the op runs in a decode step (tokens / seqs query tokens per sequence: 1, or k + 1 under MTP)
  double head_dim = 0;        ///< per-head dimension (KDA D = 128; V4 attention 512)
  double pairs = 0;           ///< causal prefill (query, key) pairs Σ N·(P + (N+1)/2)
  double keys = 0;            ///< Σ over queries of keys attended (V4 attention) or scored (indexer)
  /// V4 attention: over the op's query tokens, the mean of the rows their sequence's last query
  /// attends (Σ_s N_s · keys_s(P_s + N_s) / Σ_s N_s); for one sequence, its longest list. With `keys`
  /// it gives the prefill ramp per sequence, weighted by the sequences' rows, so a batch of a long
  /// flat chunk and short fresh prompts is not priced like one prefix-0 chunk. 0 = not set (flat).
  double keys_last = 0;
  double top_k = 0;           ///< routed experts per token (router, permute) or indexer top-k
  double experts = 0;         ///< router: routed experts E; moe_experts: experts with ≥ 1 token here
  double hidden = 0;          ///< width read/written per token (mHC, router: model width; permute: dispatch width)
  double width = 0;           ///< GLU intermediate width per GPU (activation) or LatentMoE latent width
  double compress_ratio = 0;  ///< V4 compressor ratio (4 CSA, 128 HCA)
  double state_bytes = 0;     ///< bytes per element of a recurrent state (KDA decode: 4 fp32, 2 bf16)
  double kv_elem_bytes = 0;   ///< MLA decode: bytes per cached latent element (2 bf16, 1 fp8; 0 = bf16)
  Activation act = Activation::none;
  double gemm_m = 0;                   ///< M of every GEMM in `gemms`
  const GemmShape* gemms = nullptr;    ///< GEMMs of the op (owned by the StepCostModel that built it)
  int gemm_count = 0;
};

/// Where a latency came from (recorded in every output).
enum class Provenance { roofline, fitted, extrapolated };
std::string_view to_string(Provenance p);

/// An op's latency (seconds) and where it came from. `source` is the op's worst provenance (one
/// kernel of the op answered outside the measurements makes the op `extrapolated`);
/// `extrapolated_s` is the part of `seconds` (0 ≤ extrapolated_s ≤ seconds) that those kernels
/// take, so that a step's share answered outside the measurements counts only them. A model that
/// reports `extrapolated` but leaves extrapolated_s at its default (−1) has the whole op counted.
struct OpLatency {
  double seconds = 0;
  Provenance source = Provenance::roofline;
  double extrapolated_s = -1;
  /// Seconds of this op answered outside the measurements: 0 unless `extrapolated`; then
  /// extrapolated_s (at most seconds), or all of seconds where it was left at -1.
  double outside_s() const {
    if (source != Provenance::extrapolated) return 0.0;
    return extrapolated_s >= 0 ? (extrapolated_s < seconds ? extrapolated_s : seconds) : seconds;
  }
};

/// Latency of one op on the GPU the model was built for. Implementations are pure (no simulation
/// state) and must be monotone: more FLOPs or bytes never gives a shorter time.
class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string name() const = 0;
  virtual OpLatency latency(const Op& op) const = 0;
};

/// Analytic roofline: t = fixed_s + max(flops / (η_c · peak(math)), bytes / (η_m · HBM)), with
/// peaks = the GPU's measured ceilings where they exist (GpuSpec::*_ceiling_*) and (η_c, η_m,
/// fixed_s) per op class from the hardware file's "roofline_efficiency".
class RooflineCostModel final : public CostModel {
 public:
  explicit RooflineCostModel(GpuSpec gpu) : gpu_(std::move(gpu)) {}
  std::string name() const override { return "roofline"; }
  OpLatency latency(const Op& op) const override;
  /// Peak FLOP/s of the GPU for tensor-core inputs of type `math` (mxfp4 falls back to bf16 on
  /// GPUs without FP4 tensor cores: Hopper runs MXFP4 experts as W4A16, model-facts §3.2).
  double peak_flop_per_s(DType math) const;

 private:
  GpuSpec gpu_;
};

}  // namespace servesim
