// servesim costmodels: the CostModel interface (latency of one op for one shape on one GPU) and
// the op descriptor it answers for. The analytic roofline model implements it here; the
// kernel-fitted models of costmodels/data/ implement it later without touching the engine.
#pragma once
#include "costmodels/dtype.hpp"
#include "costmodels/gpu_spec.hpp"

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
  count_
};
std::string_view to_string(OpKind k);

/// One op of one step on one GPU. flops: FLOP (2 per multiply-add); bytes: bytes that must move
/// through HBM (weights, caches, states, activations read or written once). Shape fields carry what
/// a fitted model needs; unused ones stay 0.
struct Op {
  OpKind kind = OpKind::attn_proj;
  OpClass cls = OpClass::gemm;
  DType math = DType::bf16;  ///< tensor-core input precision of the op's FLOPs
  double flops = 0;
  double bytes = 0;
  // shape
  double tokens = 0;    ///< new tokens processed
  double seqs = 0;      ///< sequences
  double ctx_sum = 0;   ///< Σ context tokens attended (decode) or Σ prefix+chunk (prefill)
  double ctx_max = 0;
  double heads = 0;     ///< heads on this GPU
};

/// Where a latency came from (recorded in every output).
enum class Provenance { roofline, fitted, extrapolated };
std::string_view to_string(Provenance p);

struct OpLatency {
  double seconds = 0;
  Provenance source = Provenance::roofline;
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
