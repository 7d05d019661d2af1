// servesim costmodels: the kernel-fitted cost model (issue #5), the default of `servesim run`.
//
// Each engine op (OpKind + the Op shape fields that step_cost.cpp fills) is the sum of the
// measured kernels it runs, each answered by its fitted family (kernel_families.hpp):
//
//   OpKind           kernels (family: features)                                   Op fields used
//   attn_proj        every projection GEMM (gemm_fp8: M, N·batch, K; BF16: gemm_bf16 (M, N, K) at
//                    batch 1, gemm_bf16_batched (M, N, K, batch) above)           gemms, gemm_m
//   kda_conv_norm    short_conv_{prefill: tokens·channels | decode: batch, channels}, channels 3·H·D;
//                    gated_rmsnorm (tokens, heads)                                 tokens, seqs, heads, head_dim, decode
//   kda_prefill      kda_prefill (tokens, tokens/seqs, heads)                       tokens, seqs, heads
//   kda_decode       kda_decode_fp32 | _bf16 by state bytes (seqs, heads)            seqs, heads, state_bytes
//   mla_prefill      mla_prefill (chunk, keys per query, heads) of the one sequence with the batch's tokens and
//                    causal pairs (chunk = tokens, keys = pairs/tokens; chunk = √(2·pairs) when that is below
//                    (tokens+1)/2) + the kv_b GEMM (M = Σ context)                 tokens, pairs, heads, gemms
//   mla_decode       mla_decode (seqs, Σ context, heads) + W_UK/W_UV batched GEMMs   seqs, ctx_sum, heads, gemms
//   csa/hca/swa_attn v4_attn_{decode: seqs | prefill: tokens}, keys/tokens rows per query, heads;
//                    + compressor_{decode|prefill} (head_dim 512, ratio) for CSA/HCA  tokens, seqs, keys, heads, compress_ratio
//   csa_indexer      indexer_* (rows, keys/tokens, heads) + topk_* (rows, keys/tokens, top-k; decode rows of at
//                    most k logits: topk_decode_copy)
//                    + compressor_* (head_dim 128, ratio 4)                         tokens, seqs, keys, heads, top_k
//   mhc_mix          2 × mhc (tokens, hidden): two sublayers per layer               tokens, hidden
//   dense_ffn,       w13 and w2 GEMMs + act_situ | act_swiglu (rows, width)         gemms, gemm_m, act, width
//   moe_shared
//   moe_router       router (tokens, experts, hidden)                                tokens, experts, hidden
//   moe_latent_proj  down/up GEMMs + latent_rmsnorm (rows, width)                    gemms, gemm_m, width
//   moe_experts      grouped_{w4a16|fp8|bf16} by weight dtype (experts touched, rows, N, K) for w13 and w2
//                    + activation (rows, width)                                      gemms, experts, tokens, act, width
//   moe_permute      permute + combine (rows/top_k tokens, top_k, hidden)            tokens, top_k, hidden
//   lm_head          one GEMM                                                        gemms, gemm_m
//
// Provenance: `fitted` when every kernel's shape lies inside its family's measured range,
// `extrapolated` when one does not (answered along the roofline form, kernel_families.hpp) and for
// every op on a GPU other than the one measured: there each kernel's time above its fixed cost is
// rescaled by cross_gpu_seconds (kernel_families.hpp): its math path by the peak ratio (efficiency
// kept), its memory path by the change of B / achievable bandwidth only (Little's law: the latency
// term of a kernel below the achievable bandwidth carries over; a bandwidth-bound kernel keeps its
// efficiency), and the model's name says "extrapolated from H200".
#pragma once
#include "costmodels/cost_model.hpp"
#include "costmodels/fit_set.hpp"

#include <memory>
#include <string>
#include <vector>

namespace servesim {

class FittedCostModel final : public CostModel {
 public:
  /// fit: parameters fitted on fit->measured_on; gpu: the GPU this model answers for.
  FittedCostModel(std::shared_ptr<const FitSet> fit, GpuSpec gpu);
  /// "fitted" on the measured GPU, else "fitted (extrapolated from H200)" (measured GPU upper-cased).
  std::string name() const override { return name_; }
  OpLatency latency(const Op& op) const override;

  struct Component {
    Family family = Family::gemm_bf16;
    std::array<double, kMaxGridDims> x{};
    double count = 1;
  };
  /// The measured kernels an op maps to (for tests and reports; latency() does the same without
  /// allocating). An expected row count in (0, 1) as the first feature (tokens, M, sequences) is
  /// raised to 1: a launched kernel runs at least one row; the grouped expert GEMMs keep their
  /// fractional expected experts. Throws std::invalid_argument for OpKind::count_.
  std::vector<Component> components(const Op& op) const;
  /// Seconds of one call of kernel family `f` at features `x` (the family's features, linear
  /// units, as in kernel_families.hpp; no clamping) on this GPU; *extrapolated (if not null) is set
  /// when x lies outside the family's measured range.
  double kernel_seconds(Family f, const double* x, bool* extrapolated) const;

 private:
  /// kernel_seconds answers by exact (family, features): a direct-mapped table (a pure function of
  /// its key, so a hit returns the bits a recomputation would). Not thread-safe: one model per thread.
  struct MemoEntry {
    double x[kMaxGridDims];
    double t;
    int family;  // -1: empty
    bool extrapolated;
  };
  static constexpr std::size_t kMemoSlots = 1u << 14;
  double memo_seconds(Family f, const double* x, bool* extrapolated) const;
  mutable std::vector<MemoEntry> memo_;
  std::shared_ptr<const FitSet> fit_;
  GpuSpec gpu_;
  Ceilings target_;
  double fp8_kv_ratio(const Op& op) const;
  bool scaled_ = false;
  std::string name_;
};

/// Reads (once per path and process) the fitted parameters. Throws std::runtime_error as read_fit_json.
std::shared_ptr<const FitSet> load_fit_cached(const std::string& path);

/// Where a GPU's fitted cost model comes from (summary.json "cost_model").
struct FitProvenance {
  std::string parameters;       ///< the hardware file's "fitted_models" as written
  std::string parameters_hash;  ///< FNV-1a 64 of the parameter file
  std::string measured_on;      ///< GPU the tables were measured on
  std::string scaling;          ///< "none" or "extrapolated from H200 (per kernel: ...)" (fitted.cpp)
  std::vector<std::string> measurement_commits;
  std::vector<std::string> tables;  ///< "file@commit#hash"
};
/// Throws std::invalid_argument if the GPU's hardware file names no fitted parameters.
FitProvenance fitted_provenance(const GpuSpec& gpu);

}  // namespace servesim
