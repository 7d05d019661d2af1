#include "costmodels/calibration/fit_report.hpp"

#include "costmodels/calibration/samples.hpp"

#include "costmodels/fitted.hpp"
#include "costmodels/step_cost.hpp"

#include <cstdio>
#include <set>
#include <stdexcept>

namespace servesim {

namespace {

int moe_kind(const ModelSpec& m) {
  for (size_t i = 0; i < m.ffn_kinds.size(); ++i)
    if (m.ffn_kinds[i].op == FfnOp::moe && m.ffn_kinds[i].gate != GateKind::hash) return static_cast<int>(i);
  return -1;
}
int dense_kind(const ModelSpec& m) {
  for (size_t i = 0; i < m.ffn_kinds.size(); ++i)
    if (m.ffn_kinds[i].op == FfnOp::dense) return static_cast<int>(i);
  return -1;
}

std::string fmt_shape(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

/// The fitted latency of `ops` (all of them, or those of kind `only`), whether any was
/// extrapolated, and the note naming the families whose kernels left their measured range.
struct OpSum {
  double seconds = 0;
  bool extrapolated = false;
  std::string note;
};

OpSum sum_ops(const FittedCostModel& cost, const std::vector<Op>& ops, OpKind only, bool all) {
  OpSum r;
  std::set<std::string> out;
  for (const auto& o : ops)
    if (all || o.kind == only) {
      const OpLatency l = cost.latency(o);
      r.seconds += l.seconds;
      r.extrapolated = r.extrapolated || l.source == Provenance::extrapolated;
      for (const auto& c : cost.components(o)) {
        bool e = false;
        cost.kernel_seconds(c.family, c.x.data(), &e);
        if (e) out.insert(family_info(c.family).name);
      }
    }
  for (const auto& n : out) r.note += (r.note.empty() ? "" : ", ") + n;
  return r;
}

// whole MoE layer on one GPU (all experts resident), uniform routing; the benchmark runs the
// shared experts in BF16, so the model copy does too.
void moe_layer_checks(const std::shared_ptr<FittedCostModel>& cost, const std::map<std::string, KernelTable>& tables,
                      const std::map<std::string, ModelSpec>& models, std::vector<CheckRow>& out) {
  InstanceShape one;
  one.ep = 1, one.attn_tp = 1;
  for (const char* file : {"moe_layer_k3.json", "moe_layer_dsv4.json"}) {
    const auto t = tables.find(file);
    if (t == tables.end()) continue;
    for (const auto& r : t->second.rows) {
      if (r.get("skew", 0) != 0) continue;
      const auto m = models.find(r.s("model"));
      if (m == models.end()) continue;
      ModelSpec spec = m->second;
      const int fi = moe_kind(spec);
      if (fi < 0) continue;
      spec.ffn_kinds[fi].shared_dtype = DType::bf16;
      StepCostModel sc(spec, cost, FabricParams{}, one, 0.0);
      std::vector<Op> ops;
      const double T = r.at("tokens");
      sc.ffn_ops(fi, T, T, ops);
      const OpSum p = sum_ops(*cost, ops, OpKind::count_, true);
      out.push_back({std::string(file) + " vs engine FFN ops (" + r.s("model") + ")", fmt_shape("tokens %g", T), r.us_median, p.seconds * 1e6, "µs",
                     p.extrapolated, p.note});
    }
  }
}

// The total is timed eagerly (3 launches, one launch gap removed). Where it exceeds the sum of
// its own kernels measured alone (w13, act, w2 of the same shape, each less one gap) by at most
// one launch gap, the excess is the host stalling the GPU between launches (measured 2-4 µs
// at µs-scale kernels), which a CUDA-graph engine does not pay: the reference drops it, and
// the note says so. A larger excess is not a launch effect and stays in the reference.
double total_reference_s(const KernelTable& t, const KernelRow& r, double T, double gap_s, std::string& note) {
  double parts = 0;
  int n_parts = 0;
  for (const auto& q : t.rows)
    if ((q.variant == "w13" || q.variant == "act" || q.variant == "w2") && q.s("model") == r.s("model") && q.at("tokens") == T &&
        q.get("attn_tp", 1) == r.get("attn_tp", 1))
      parts += graph_seconds(t, q, gap_s), ++n_parts;
  double ref = graph_seconds(t, r, gap_s);
  if (n_parts == 3 && parts < ref && ref - parts <= gap_s) {
    note = fmt_shape("eager total less %.1f µs of host launch stalls", (ref - parts) * 1e6) + (note.empty() ? "" : "; extrapolated: " + note);
    ref = parts;
  }
  return ref;
}

// dense FFN and shared experts: measured "total" vs the engine's op (w13 + activation + w2)
void ffn_total_checks(const std::shared_ptr<FittedCostModel>& cost, double gap_s, const std::map<std::string, KernelTable>& tables,
                      const std::map<std::string, ModelSpec>& models, std::vector<CheckRow>& out) {
  for (const char* file : {"dense_ffn_k3.json", "moe_shared_expert.json"}) {
    const auto t = tables.find(file);
    if (t == tables.end()) continue;
    for (const auto& r : t->second.rows) {
      if (r.variant != "total") continue;
      const auto m = models.find(r.s("model"));
      if (m == models.end()) continue;
      ModelSpec spec = m->second;
      const bool dense = std::string(file) == "dense_ffn_k3.json";
      const int fi = dense ? dense_kind(spec) : moe_kind(spec);
      if (fi < 0) continue;
      spec.ffn_kinds[fi].shared_dtype = DType::bf16;
      // rows with "attn_tp" measured the shared expert split over attention TP (one GPU's share)
      InstanceShape split;
      split.attn_tp = split.ep = static_cast<int>(r.get("attn_tp", 1));
      StepCostModel sc(spec, cost, FabricParams{}, split, 0.0);
      std::vector<Op> ops;
      const double T = r.at("tokens");
      sc.ffn_ops(fi, T, T, ops);
      OpSum p = sum_ops(*cost, ops, dense ? OpKind::dense_ffn : OpKind::moe_shared, false);
      const double ref = total_reference_s(t->second, r, T, gap_s, p.note);
      out.push_back({std::string(file) + " total vs engine op (" + r.s("model") + ")",
                     fmt_shape("tokens %g", T) + (split.attn_tp > 1 ? fmt_shape(", attn TP %g", split.attn_tp) : std::string()), ref * 1e6,
                     p.seconds * 1e6, "µs", p.extrapolated, p.note});
    }
  }
}

}  // namespace

std::vector<CheckRow> composite_checks(std::shared_ptr<const FitSet> fit, const GpuSpec& gpu, const std::map<std::string, KernelTable>& tables,
                                       const std::map<std::string, ModelSpec>& models) {
  std::vector<CheckRow> out;
  auto cost = std::make_shared<FittedCostModel>(fit, gpu);
  moe_layer_checks(cost, tables, models, out);
  ffn_total_checks(cost, fit->launch_gap_s, tables, models, out);
  return out;
}

std::vector<CheckRow> published_h800_checks(std::shared_ptr<const FitSet> fit, const GpuSpec& h800) {
  std::vector<CheckRow> out;
  FittedCostModel m(fit, h800);
  // seconds on the H800; ex: the shape lies outside the family's measured range on the H200
  auto kernel = [&](Family f, std::array<double, kMaxGridDims> x, bool& ex) {
    ex = false;
    family_seconds(family_info(f), fit->families[static_cast<int>(f)], x.data(), fit->reference, &ex);
    return m.kernel_seconds(f, x.data(), nullptr);
  };
  bool ex = false;
  // FlashMLA dense decode (BF16 latent, d_k 576 / d_v 512), FlashMLA's benchmark: batch 128, 4096
  // cached tokens each, one query token. Memory-bound at 16 query heads (h_q·s_q < 64), compute-bound
  // at 128 (published-measurements §3.6: 3,000 GB/s and 660 TFLOP/s on H800).
  {
    const double B = 128, L = 4096;
    for (double H : {16.0, 128.0}) {
      const double t = kernel(Family::mla_decode, {B, L, H, 0}, ex);
      const Work w = family_info(Family::mla_decode).work(std::array<double, 4>{B, L, H, 0}.data());
      if (H == 16)
        out.push_back({"FlashMLA dense decode (H800)", "b128 L4096 h16: memory-bound", 3000, w.bytes / t / 1e9, "GB/s", ex, {}});
      else
        out.push_back({"FlashMLA dense decode (H800)", "b128 L4096 h128: compute-bound", 660, w.flops / t / 1e12, "TFLOP/s", ex, {}});
    }
  }
  // FlashMLA sparse decode (FP8 KV, b 128, h 128, s_q 2, top-k 2048) and sparse prefill (s_q 4096,
  // h 128, top-k 2048): our V4 sparse core (584-B FP8 rows, d 512) at the same rows per query.
  {
    const std::array<double, 4> xd{256, 2048, 128, 0};
    const double t = kernel(Family::v4_attn_decode, xd, ex);
    out.push_back({"FlashMLA sparse (H800)", "decode b128 s_q2 h128 top-k 2048", 410,
                   family_info(Family::v4_attn_decode).work(xd.data()).flops / t / 1e12, "TFLOP/s", ex, {}});
    const std::array<double, 4> xp{4096, 2048, 128, 1};  // flat rows (ramp 1): every query has top-k rows
    const double tp = kernel(Family::v4_attn_prefill, xp, ex);
    out.push_back({"FlashMLA sparse (H800)", "prefill s_q4096 h128 top-k 2048", 640,
                   family_info(Family::v4_attn_prefill).work(xp.data()).flops / tp / 1e12, "TFLOP/s", ex, {}});
  }
  // DeepGEMM FP8 dense GEMMs (published-measurements §3.7, README @55ab91f7) vs our cuBLASLt
  // block-scaled FP8 fit.
  struct G {
    double M, N, K, tflops;
  };
  const G dense[] = {{64, 2112, 7168, 206},    {64, 24576, 1536, 289},   {64, 32768, 512, 219},   {64, 7168, 16384, 336},
                     {64, 4096, 7168, 287},    {64, 7168, 2048, 295},    {128, 2112, 7168, 352},  {128, 24576, 1536, 535},
                     {128, 32768, 512, 358},   {128, 7168, 16384, 645},  {128, 4096, 7168, 533},  {128, 7168, 2048, 510},
                     {4096, 2112, 7168, 1009}, {4096, 24576, 1536, 1125}, {4096, 32768, 512, 751}, {4096, 7168, 16384, 1426},
                     {4096, 4096, 7168, 1265}, {4096, 7168, 2048, 1168}};
  for (const auto& g : dense) {
    const double t = kernel(Family::gemm_fp8, {g.M, g.N, g.K, 0}, ex);
    char what[96];
    std::snprintf(what, sizeof what, "M %g N %g K %g", g.M, g.N, g.K);
    out.push_back({"DeepGEMM FP8 dense (H800)", what, g.tflops, 2 * g.M * g.N * g.K / t / 1e12, "TFLOP/s", ex, {}});
  }
  struct GG {
    double groups, m, N, K, tflops;
    const char* layout;
  };
  const GG grouped[] = {{4, 8192, 4096, 7168, 1346, "contiguous"}, {4, 8192, 7168, 2048, 1214, "contiguous"},
                        {8, 4096, 4096, 7168, 1346, "contiguous"}, {8, 4096, 7168, 2048, 1214, "contiguous"},
                        {1, 1024, 4096, 7168, 1233, "masked"},     {1, 1024, 7168, 2048, 925, "masked"},
                        {2, 512, 4096, 7168, 1040, "masked"},      {2, 512, 7168, 2048, 916, "masked"},
                        {4, 256, 4096, 7168, 932, "masked"},       {4, 256, 7168, 2048, 815, "masked"}};
  for (const auto& g : grouped) {
    const double rows = g.groups * g.m;
    const double t = kernel(Family::grouped_fp8, {g.groups, rows, g.N, g.K}, ex);
    char what[96];
    std::snprintf(what, sizeof what, "%s %gx%g N %g K %g", g.layout, g.groups, g.m, g.N, g.K);
    out.push_back({"DeepGEMM FP8 grouped (H800)", what, g.tflops, 2 * rows * g.N * g.K / t / 1e12, "TFLOP/s", ex, {}});
  }
  return out;
}

}  // namespace servesim
