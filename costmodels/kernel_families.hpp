// servesim costmodels: the kernel families of the fitted cost model. A family is one measured
// kernel (or one kernel configuration family, e.g. every cuBLASLt BF16 GEMM) whose latency is a
// fitted surface over a few shape features. This file says, per family: which table rows train it
// (table file, variants, how the shape fields become features), its features, the roofline work
// (FLOP and HBM bytes of one call, from the table's flop_formula / byte_formula) used to
// extrapolate outside the measured range and to scale to other GPUs, and the fit settings.
// The mapping from the engine's ops (OpKind + Op shape fields) onto these families is in
// costmodels/fitted.cpp (and README "Cost models").
#pragma once
#include "scenarios/dtype.hpp"
#include "costmodels/log_grid.hpp"

#include <array>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace servesim {

enum class Family : int {
  gemm_bf16,           ///< cuBLASLt/cuBLAS BF16 GEMM (M, N, K), one matrix product
  gemm_fp8,            ///< cuBLASLt FP8 e4m3 GEMM with 1x128 / 128x128 block scales (M, N·batch, K)
  gemm_bf16_batched,   ///< cuBLAS strided-batched BF16 GEMM (M, N, K, batch): MLA W_UK/W_UV absorption per head, V4 wo_a groups
  grouped_w4a16,       ///< own MXFP4-weight W4A16 grouped GEMM (kernels/moe)
  grouped_fp8,         ///< FP8 block-scaled grouped GEMM: the faster of the own wgmma kernel and per-expert cuBLASLt
  grouped_bf16,        ///< cublasGemmGroupedBatchedEx BF16
  kda_prefill,         ///< KDA chunked prefill K1+K2
  kda_decode_fp32,     ///< KDA recurrent step, fp32 state
  kda_decode_bf16,     ///< KDA recurrent step, bf16 state
  short_conv_prefill,  ///< KDA short conv + SiLU, prefill
  short_conv_decode,   ///< KDA short conv + SiLU, decode
  gated_rmsnorm,       ///< KDA output RMSNorm · sigmoid(gate)
  mla_decode,          ///< absorbed-MQA decode over the latent cache (core only): batch, mean context, heads
  mla_prefill,         ///< MHA-mode causal attention core
  v4_attn_decode,      ///< V4 sparse/dense attention core over FP8 584-B rows, decode (CSA, HCA, SWA)
  v4_attn_prefill,     ///< same, prefill
  indexer_decode,      ///< CSA lightning-indexer logits, decode
  indexer_prefill,     ///< CSA lightning-indexer logits, prefill
  topk_decode,         ///< top-k of the indexer logits, decode, rows longer than k (radix select)
  topk_decode_copy,    ///< same, rows of at most k logits (a copy)
  topk_prefill,        ///< top-k, prefill
  compressor_prefill,  ///< V4 KV compressors (CSA main / indexer, HCA main), prefill
  compressor_decode,   ///< same, decode
  act_situ,            ///< K3 SiTU GLU activation
  act_swiglu,          ///< DeepSeek SwiGLU (clamped) activation
  latent_rmsnorm,      ///< K3 LatentMoE RMSNorm over the latent
  router,              ///< gate GEMM + scoring + top-k
  permute,             ///< MoE token permutation to expert slots
  combine,             ///< MoE weighted combine of expert outputs
  mhc,                 ///< V4 mHC mixing, one sublayer (pre + post)
  count_
};
constexpr int kFamilyCount = static_cast<int>(Family::count_);

/// FLOP and HBM bytes of one call, and the tensor-core input type of its FLOPs.
struct Work {
  double flops = 0, bytes = 0;
  DType math = DType::bf16;
};

/// Ceilings a roofline bound uses (FLOP/s per tensor-core input type, bytes/s).
struct Ceilings {
  double bf16 = 0, fp8 = 0, fp4 = 0, hbm = 0;
  /// HBM bandwidth a streaming kernel achieves (measured device copy); 0 = not known: the
  /// datasheet `hbm` (cross_gpu_seconds).
  double hbm_achievable = 0;
  /// Peak for `t`: fp8 → fp8; mxfp4 → fp4 when the GPU has FP4 tensor cores, else bf16 (Hopper
  /// runs MXFP4 weights as W4A16, model-facts §3.2); everything else → bf16.
  double peak(DType t) const;
  /// max(flops / peak(math), bytes / hbm), seconds.
  double bound(const Work& w) const;
};

struct FamilyInfo {
  Family id;
  std::string name;       ///< as in the fitted-parameter JSON and the report
  std::string op_class;   ///< report grouping
  std::string kernel;     ///< what was measured (tables, variants)
  std::vector<std::string> features;
  std::vector<double> min_gap;     ///< knot thinning per feature (log2)
  std::vector<bool> monotone;      ///< latency made non-decreasing in the feature
  std::vector<double> smooth;      ///< curvature-penalty multiplier per feature (small across measured shapes)
  std::vector<int> series;         ///< features whose distinct values form the measured "shapes" (leave-one-shape-out)
  double lambda = 1e-3;            ///< curvature penalty
  Work (*work)(const double* f) = nullptr;  ///< table formula at features f (after `transform`)
  /// Optional feature transform applied before the surface and `work` see the features: the
  /// kernel's tile or wave quantisation (e.g. tokens per expert padded to the token tile), so that
  /// the surface is smooth in the transformed features. nullptr = identity.
  void (*transform)(double* f) = nullptr;
};

/// Seconds a kernel that takes `s` seconds (its fixed cost already removed) for work `w` on a GPU
/// with ceilings `src` takes on a GPU with ceilings `dst` (the H200's tables priced on the H800,
/// H100 and B300; issue 11 item 4). Little's law (throughput = data in flight / round-trip time; for
/// GPU memory e.g. V. Volkov, "Understanding Latency Hiding on GPUs", UC Berkeley PhD thesis, 2016):
/// a kernel keeps a fixed amount of data in flight N (its CTAs × pipeline stages × tile bytes, set by
/// the same SMs), and each round trip costs the DRAM latency L plus the transfer of N at the
/// achievable bandwidth A, so its memory path takes B·L/N + B/A: only the B/A term depends on the
/// HBM, the latency term B·L/N carries over. A (hbm_achievable): 4.3 TB/s measured device copy on
/// the H200 (../shared/reference/hardware.md), 0.896 of its datasheet; the same fraction of the
/// H800's 3.35 TB/s is 3.0 TB/s, what FlashMLA's memory-bound decode reaches there. Hence, with
/// bound = max(F / peak, B / hbm) (datasheet) on the source:
///   math path   c = s · (F / peak_dst) / bound_src           (efficiency kept, as before)
///   memory path m = s · (B / hbm_src) / bound_src + B / A_dst − B / A_src
///   answer      max(c, m)
/// where A = k · hbm_achievable (datasheet hbm where unknown; a target without a measured figure
/// gets the source's achievable fraction of its own datasheet), k = max(1, achieved / A_src) and
/// achieved = hbm_src · bound_src / s (a kernel at or above the achievable bandwidth is
/// bandwidth-bound: then m = s · (B / hbm_dst) / bound_src, the old ratio rule exactly). The
/// latency term is s · (B / hbm_src) / bound_src − B / A_src ≥ 0; it is 0 for a bandwidth-bound
/// kernel and most of the time of a latency/occupancy-bound one (e.g. the H200's grouped FP8
/// GEMM at 4×256 rows, N 7168, K 2048: 75.5 MB in 31 µs above the fixed cost, 2.4 TB/s of the
/// achievable 4.3: +7.6 µs on the H800 (3.0 TB/s achievable) where the old rule
/// s · bound_dst / bound_src added 13.4 µs). Carrying the latency term over is exact between
/// H200, H100 and H800 (one GH100 die: 132 SMs, the same clocks and DRAM latency; only the HBM
/// differs) and an assumption for B300 (more SMs, its own latency: the term is kept, not shrunk).
double cross_gpu_seconds(double s, const Work& w, const Ceilings& src, const Ceilings& dst);

/// The fourth feature of `v4_attn_prefill`, the ramp: the rows of a chunk's last query (keys
/// attended, `rows_max`; for a batch, Op::keys_last: the query-weighted mean over its sequences) over
/// the mean rows per query (`rows_mean`), both counts of 584-B KV rows; >= 1. A chunk after a long
/// prefix has flat rows (1.0); a chunk at prefix 0 ramps with the causal position (CSA up to ~1.8 at
/// 4,096 tokens) and, measured, runs about like a flat chunk at its longest query (the table rows are
/// one sequence each, ramp 1.0-1.81; a larger ramp, e.g. a prompt shorter than the window, is
/// answered at the edge and flagged extrapolated; kernels/attention/NOTES.md, eighteenth session).
/// rows_max <= 0 (not known) or rows_mean <= 0 gives 1.
double v4_prefill_ramp(double rows_max, double rows_mean);
/// KV rows one V4 query attends at context length L tokens (itself included; model-facts §2.3 d,
/// §2.4): the window's min(window, L) rows plus, for a compressed kind (ratio > 0), floor(L / ratio)
/// compressed entries, capped at top-k where topk > 0 (CSA; HCA passes 0, SWA ratio 0). The engine
/// (step_cost.cpp) and the fit's table rows (calibration/samples.cpp) both count with it.
double v4_rows_per_query(double L, double window, double ratio, double topk);
const FamilyInfo& family_info(Family f);
/// Family with this name; throws std::invalid_argument listing the names if none.
Family family_by_name(std::string_view name);

/// One training point: features (linear units), measured seconds, and where it came from.
struct Sample {
  std::array<double, kMaxGridDims> x{};
  double seconds = 0;
  std::string table, variant;
};

/// True for the grouped expert GEMM families (features: expected experts touched G, rows, N, K).
constexpr bool is_grouped(Family f) { return f == Family::grouped_w4a16 || f == Family::grouped_fp8 || f == Family::grouped_bf16; }

/// Rows an expert with m routed tokens occupies in grouped family f once padded to the kernel's
/// token tile: W4A16 (kernels/moe) tile bt = next power of two ≥ the mean rows per active expert,
/// clamped to [8, 256], rows padded to a multiple of bt; FP8 (the own kernels' token tiles): the
/// next power of two ≥ m in [8, 128], then multiples of 128 (the waves of those 128-row tiles are
/// the family's transform); cuBLAS grouped BF16: multiples of 64 above 64 (read off the measured
/// staircase). Other families: m.
double pad_rows(Family f, double m, double mean_active);
/// Expected padded rows of the grouped GEMM on one GPU holding `held` experts that receive `rows`
/// routed rows in all, `active` of them at least one, when each expert's count is Poisson with
/// mean rows/held (uniform routing). The grouped families' "rows" feature is padded rows.
double expected_padded_rows(Family f, double rows, double held, double active);

/// A fitted family: its surface, the smallest measured time (the latency floor used below the
/// measured range) and the measured range is the grid's knot range.
struct FittedFamily {
  LogGrid grid;
  double floor_s = 0;
  /// Measured range of each measured shape (the FamilyInfo::series features' values): a query on
  /// that shape above its own range is answered by the grid (filled between shapes) but flagged
  /// as extrapolated; key/lo/hi in log2 of the features (key: series features only).
  struct SeriesRange {
    std::vector<double> key, lo, hi;
    double floor_s = 0;  ///< smallest measured time of the shape (reported)
  };
  std::vector<SeriesRange> ranges;
};

/// x after the family's transform (identity if none), in out[0..features).
void transform_features(const FamilyInfo& f, const double* x, double* out);

/// Latency of one call of family `f` at features x (linear units, each > 0; the transform is
/// applied here), seconds. The measured range is the grid's knot range (a query on a measured shape
/// above that shape's own range, FittedFamily::ranges, is also flagged). Inside it: 2^grid(log2 x). Outside: the grid at the clamped shape c, scaled along
/// the roofline form by bound(x) / bound(c) (ceilings `ref`), never below min(t(c), floor_s) when
/// the shape is smaller than measured; *extrapolated is set (if not null) when any feature was
/// clamped by more than 1e-9 in log2. Grouped expert GEMMs outside the measured expert counts G_e:
/// (G / G_e) · t(G_e, rows · G_e / G, N, K).
double family_seconds(const FamilyInfo& f, const FittedFamily& fit, const double* x, const Ceilings& ref, bool* extrapolated);

}  // namespace servesim
