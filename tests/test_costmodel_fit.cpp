// The kernel-fitted cost model (issue #5): the numeric core, the table formulas it extrapolates
// with, reproducibility of the committed parameters, held-out accuracy on the committed tables,
// sanity of the engine's step times and range flags (other GPUs, the communication calibration and
// the published-number checks: test_costmodel_hardware.cpp).
#include "costmodels/factory.hpp"
#include "costmodels/calibration/fit.hpp"
#include "costmodels/calibration/fit_report.hpp"
#include "costmodels/fitted.hpp"
#include "costmodels/log_grid.hpp"
#include "costmodels/step_cost.hpp"
#include "costmodel_test_helpers.hpp"
#include "helpers.hpp"

#include <gtest/gtest.h>
#include <filesystem>
#include <unistd.h>
#include <fstream>

#include <cmath>
#include <map>

using namespace servesim;
using namespace servesim::costmodel_test;

// ----------------------------------------------------------------------------- numeric core

TEST(LogGrid, AffineFunctionsAreReproducedExactlyBetweenScatteredKnots) {
  // y = 1 + 0.5·x0 − 0.25·x1 lies in the null space of the curvature penalty: the fit must return
  // it exactly, also at points that were not measured (independently computed here).
  std::vector<std::array<double, kMaxGridDims>> x;
  std::vector<double> y;
  for (double a : {0.0, 1.0, 2.5, 4.0})
    for (double b : {0.0, 3.0, 5.0}) {
      if (a == 2.5 && b == 3.0) continue;  // a hole in the measured grid
      x.push_back({a, b, 0, 0});
      y.push_back(1 + 0.5 * a - 0.25 * b);
    }
  GridFitOptions o;
  o.lambda = 1e-2;
  const LogGrid g = fit_log_grid(x, y, 2, o);
  for (double a : {0.3, 2.5, 3.9})
    for (double b : {0.7, 3.0, 4.4}) {
      const double p[2] = {a, b};
      EXPECT_NEAR(g.eval(p), 1 + 0.5 * a - 0.25 * b, 1e-6) << a << " " << b;
    }
  const double outside[2] = {10, -3};  // clamped to the knot range [0,4] x [0,5]
  EXPECT_NEAR(g.eval(outside), 1 + 0.5 * 4 - 0.25 * 0, 1e-6);
}

TEST(LogGrid, MonotoneAxesComeOutNonDecreasing) {
  std::vector<std::array<double, kMaxGridDims>> x;
  std::vector<double> y;
  const double v[] = {1.0, 2.0, 1.6, 3.0, 2.8, 4.0};  // two dips
  for (int i = 0; i < 6; ++i) x.push_back({static_cast<double>(i), 0, 0, 0}), y.push_back(v[i]);
  GridFitOptions o;
  o.lambda = 1e-4;
  LogGrid free = fit_log_grid(x, y, 1, o);
  bool dips = false;
  for (size_t i = 1; i < free.values.size(); ++i) dips = dips || free.values[i] < free.values[i - 1];
  EXPECT_TRUE(dips) << "the unconstrained fit should follow the dips";
  o.monotone = {true};
  const LogGrid mono = fit_log_grid(x, y, 1, o);
  for (size_t i = 1; i < mono.values.size(); ++i) EXPECT_GE(mono.values[i], mono.values[i - 1]);
  // isotonic: the first dip pools 2.0 and 1.6 to their mean
  EXPECT_NEAR(mono.values[1], 1.8, 0.02);
}

// ----------------------------------------------------------------------------- tables and formulas

TEST(KernelTables, LoaderReadsOnlyKernelTables) {
  const auto& t = tables();
  ASSERT_TRUE(t.count("mla_decode.json"));
  EXPECT_EQ(t.at("mla_decode.json").rows.size(), 713u);  // issue 12: 702 wgmma rows + 11 old-kernel rows kept for before/after
  EXPECT_FALSE(t.count("fitted_models.json"));
  EXPECT_THROW(load_kernel_table(test::data("costmodels/data/h200/fitted_models.json")), std::runtime_error);
  EXPECT_EQ(t.at("mla_decode.json").content_hash.size(), 16u);
  // a kernel table with a key twice in one object is refused, naming the file and the key
  const auto dir = std::filesystem::temp_directory_path() / ("servesim-ktdup-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "t.json") << R"({"schema": "servesim.kernel-table/1", "schema": "servesim.kernel-table/1", "rows": []})";
  try {
    (void)load_kernel_tables(dir.string());
    ADD_FAILURE() << "a duplicate key was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("t.json: key \"schema\" appears twice"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(KernelFamilies, WorkFormulasAreTheTablesOwn) {
  // The roofline work a family extrapolates and scales with must be the table's flop_formula /
  // byte_formula: checked on every row of the families where the features determine them.
  struct Case {
    Family f;
    const char* table;
    bool (*use)(const KernelRow&);
    std::array<double, 4> (*x)(const KernelRow&);
  };
  const Case cases[] = {
      {Family::gemm_bf16, "dense_proj_k3_mla.json", [](const KernelRow& r) { return r.variant.find("/bf16") != std::string::npos && r.at("batch") == 1; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("M"), r.at("N"), r.at("K"), 0}; }},
      {Family::gemm_bf16_batched, "dense_proj_k3_mla.json", [](const KernelRow& r) { return r.variant.find("/bf16") != std::string::npos && r.at("batch") > 1; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("M"), r.at("N"), r.at("K"), r.at("batch")}; }},
      {Family::gemm_bf16_batched, "dense_proj_v4pro.json", [](const KernelRow& r) { return r.variant == "wo_a_grouped/bf16"; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("M"), r.at("N"), r.at("K"), r.at("batch")}; }},
      {Family::gemm_bf16_batched, "dense_proj_v4flash.json", [](const KernelRow& r) { return r.variant == "wo_a_grouped/bf16"; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("M"), r.at("N"), r.at("K"), r.at("batch")}; }},
      {Family::gemm_fp8, "dense_proj_v4pro.json", [](const KernelRow& r) { return r.variant.find("/fp8_block_scale") != std::string::npos; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("M"), r.at("N"), r.at("K"), 0}; }},
      {Family::grouped_w4a16, "moe_grouped_gemm_w4a16.json", [](const KernelRow& r) { return r.variant == "w4a16"; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("active_experts"), r.at("rows"), r.at("N"), r.at("K")}; }},
      {Family::kda_prefill, "kda_prefill.json", [](const KernelRow& r) { return r.variant == "k1+k2"; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("tokens"), r.at("tokens") / r.at("num_seqs"), r.at("heads"), 0}; }},
      {Family::kda_decode_fp32, "kda_decode.json", [](const KernelRow& r) { return r.variant == "state_fp32"; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("batch"), r.at("heads"), 0, 0}; }},
      {Family::gated_rmsnorm, "kda_gated_rmsnorm.json", [](const KernelRow&) { return true; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("tokens"), r.at("heads"), 0, 0}; }},
      {Family::mla_decode, "mla_decode.json", [](const KernelRow& r) { return r.get("mixed", 0) == 0; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("batch"), r.at("ctx"), r.at("heads"), 0}; }},
      {Family::mla_prefill, "mla_prefill.json", [](const KernelRow&) { return true; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("chunk"), r.at("prefix") + (r.at("chunk") + 1) / 2, r.at("heads"), 0}; }},
      {Family::v4_attn_decode, "hca_attn_decode.json", [](const KernelRow&) { return true; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("batch"), r.at("rows_per_query"), r.at("heads"), 0}; }},
      {Family::topk_decode, "csa_topk.json", [](const KernelRow& r) { return r.variant == "decode"; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("batch"), r.at("row_len"), r.at("topk"), 0}; }},
      {Family::act_situ, "moe_act_situ.json", [](const KernelRow&) { return true; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("rows"), r.at("I"), 0, 0}; }},
      {Family::router, "moe_router_k3.json", [](const KernelRow& r) { return r.variant == "gemm_topk"; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("tokens"), r.at("experts"), r.at("hidden"), 0}; }},
      {Family::permute, "moe_permute.json", [](const KernelRow&) { return true; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("tokens"), r.at("top_k"), r.at("D"), 0}; }},
      {Family::combine, "moe_combine.json", [](const KernelRow& r) { return r.variant == "combine"; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("tokens"), r.at("top_k"), r.at("D"), 0}; }},
      {Family::mhc, "mhc_mix.json", [](const KernelRow& r) { return r.variant == "pre_post"; },
       [](const KernelRow& r) { return std::array<double, 4>{r.at("tokens"), r.at("hidden"), 0, 0}; }},
  };
  for (const auto& c : cases) {
    int n = 0;
    for (const auto& r : tables().at(c.table).rows) {
      if (!c.use(r)) continue;
      const auto x = c.x(r);
      const Work w = family_info(c.f).work(x.data());
      if (r.flops > 0) {
        EXPECT_LT(rel(w.flops, r.flops), 1e-6) << c.table << " " << r.variant << " flops";
      }
      EXPECT_LT(rel(w.bytes, r.bytes), 1e-6) << c.table << " " << r.variant << " bytes";
      ++n;
    }
    EXPECT_GT(n, 10) << c.table;
  }
}

TEST(KernelFamilies, TokenTilePaddingFollowsTheW4A16Heuristic) {
  // kernels/moe: bt = next power of two ≥ mean rows per active expert, in [8, 256]
  EXPECT_EQ(pad_rows(Family::grouped_w4a16, 1, 1), 8);
  EXPECT_EQ(pad_rows(Family::grouped_w4a16, 12, 12), 16);
  EXPECT_EQ(pad_rows(Family::grouped_w4a16, 192, 192), 256);
  EXPECT_EQ(pad_rows(Family::grouped_w4a16, 384, 384), 512);
  // the measured staircase it encodes: m = 12 costs what m = 16 costs, m = 384 what m = 512 costs
  // (within 5%: the variant-11 prefill kernel's TMA loads zero-fill the rows past m without reading
  // them and its epilogue stores only m rows, 4.3% faster at 384 than at 512; variant 8's table: <2%)
  for (const auto& r : tables().at("moe_grouped_gemm_w4a16.json").rows)
    if (r.variant == "w4a16" && r.s("model") == "K3" && r.s("matrix") == "w13" && r.at("active_experts") == 8 && r.at("tokens_per_expert") == 384)
      for (const auto& q : tables().at("moe_grouped_gemm_w4a16.json").rows)
        if (q.variant == "w4a16" && q.s("model") == "K3" && q.s("matrix") == "w13" && q.at("active_experts") == 8 && q.at("tokens_per_expert") == 512) {
          EXPECT_LT(rel(r.us_median, q.us_median), 0.05);
        }
  // Poisson routing: a few rows over many experts each occupy one whole tile
  EXPECT_NEAR(expected_padded_rows(Family::grouped_w4a16, 1e-3, 100, 1e-3), 8e-3, 1e-6);
}

// ----------------------------------------------------------------------------- reproducibility

TEST(Fit, CommittedParametersAreWhatTheFitOfTheCommittedTablesGives) {
  FitOptions o;
  o.validate = false;
  const FitSet fresh = fit_all(tables(), test::gpu("h200"), o);
  const auto c = committed();
  EXPECT_EQ(c->measured_on, "h200");
  EXPECT_NEAR(fresh.launch_gap_s, c->launch_gap_s, 1e-11);
  ASSERT_EQ(fresh.tables.size(), c->tables.size());
  for (size_t i = 0; i < fresh.tables.size(); ++i) {
    EXPECT_EQ(fresh.tables[i].file, c->tables[i].file);
    EXPECT_EQ(fresh.tables[i].hash, c->tables[i].hash) << fresh.tables[i].file << " changed since the fit: run `servesim costmodel fit`";
  }
  for (int f = 0; f < kFamilyCount; ++f) {
    const auto& a = fresh.families[f].grid;
    const auto& b = c->families[f].grid;
    ASSERT_EQ(a.knots, b.knots) << family_info(static_cast<Family>(f)).name;
    ASSERT_EQ(a.values.size(), b.values.size());
    double worst = 0;
    for (size_t k = 0; k < a.values.size(); ++k) worst = std::max(worst, std::abs(a.values[k] - b.values[k]));
    EXPECT_LT(worst, 1e-4) << family_info(static_cast<Family>(f)).name << " (log2 seconds)";
  }
}

// ----------------------------------------------------------------------------- accuracy

TEST(Fit, HeldOutErrorMeetsTheTargetPerFamilyAndPerOpClass) {
  FitOptions o;
  o.shape_out = false;
  std::vector<HeldOut> held;
  const FitSet fs = fit_all(tables(), test::gpu("h200"), o, &held);
  ASSERT_EQ(static_cast<int>(fs.validation.size()), kFamilyCount);
  for (const auto& v : fs.validation) {
    const std::string name = family_info(v.family).name;
    const AccuracyException* ex = nullptr;
    for (const auto& e : accuracy_exceptions())
      if (e.family == v.family) ex = &e;
    EXPECT_GE(v.kfold.n, 18) << name;
    if (ex) {
      EXPECT_LE(v.kfold.median, ex->median) << name << " is worse than its documented exception";
      EXPECT_LE(v.kfold.p95, ex->p95) << name << " is worse than its documented exception";
      EXPECT_TRUE(v.kfold.median > kTargetMedianApe || v.kfold.p95 > kTargetP95Ape) << name << " now meets the target: remove its exception";
    } else {
      EXPECT_LE(v.kfold.median, kTargetMedianApe) << name;
      EXPECT_LE(v.kfold.p95, kTargetP95Ape) << name;
    }
  }
  // every op class meets the target without exceptions
  std::map<std::string, std::vector<double>> by_class;
  for (const auto& h : held) by_class[family_info(h.family).op_class].push_back(h.ape());
  EXPECT_EQ(by_class.size(), 8u);
  for (const auto& [cls, e] : by_class) {
    const ErrorStats s = error_stats(e);
    EXPECT_LE(s.median, kTargetMedianApe) << cls;
    EXPECT_LE(s.p95, kTargetP95Ape) << cls;
  }
}

TEST(Fit, EngineOpsSumToTheMeasuredWholeLayersInsideTheMeasuredRange) {
  std::map<std::string, ModelSpec> models{{"K3", test::model("kimi-k3")}, {"DSV4-Pro", test::model("deepseek-v4-pro")},
                                          {"DSV4-Flash", test::model("deepseek-v4-flash")}};
  const auto rows = composite_checks(committed(), test::gpu("h200"), tables(), models);
  std::vector<double> in_range;
  int layer_rows = 0;
  for (const auto& r : rows)
    if (!r.extrapolated) {
      in_range.push_back(std::abs(r.ratio() - 1));
      layer_rows += r.group.find("moe_layer") != std::string::npos;
    }
  EXPECT_GE(layer_rows, 6);  // whole MoE layers at 1-4 tokens (≤ 32 active experts)
  ASSERT_GT(in_range.size(), 100u);
  const ErrorStats s = error_stats(in_range);
  EXPECT_LE(s.median, 0.05);
  EXPECT_LE(s.max, 0.15);
}

// The whole MoE layer on one GPU (moe_layer_* tables: router through combine, 1-8,192 tokens), every
// row, inside the measured range or not: per model the median |engine op sum / measured - 1| within
// issue 13's 10% for whole-layer composites and the p95 within 20% (README "Whole-layer checks"
// states the figures; the review found them drifted from 4.8% / 10.0% to 8.8% / 16.1% for V4-Pro
// with no test noticing: the in-range test above sees 2-3 of each model's 26 rows).
TEST(Fit, WholeMoeLayersOverEveryMeasuredTokenCount) {
  std::map<std::string, ModelSpec> models{{"K3", test::model("kimi-k3")}, {"DSV4-Pro", test::model("deepseek-v4-pro")},
                                          {"DSV4-Flash", test::model("deepseek-v4-flash")}};
  std::map<std::string, std::vector<double>> by_group;
  for (const auto& r : composite_checks(committed(), test::gpu("h200"), tables(), models))
    if (r.group.find("moe_layer") != std::string::npos) by_group[r.group].push_back(std::abs(r.ratio() - 1));
  ASSERT_EQ(by_group.size(), 3u);
  for (const auto& [g, e] : by_group) {
    const ErrorStats s = error_stats(e);
    EXPECT_GE(s.n, 20) << g;
    EXPECT_LE(s.median, 0.10) << g;
    EXPECT_LE(s.p95, 0.20) << g;
    std::printf("%s: %d rows, median %.1f%%, p95 %.1f%%\n", g.c_str(), s.n, 100 * s.median, 100 * s.p95);
  }
}

// ----------------------------------------------------------------------------- sanity

namespace {

struct Deploy {
  const char* model;
  int ep, tp;
};

StepTime step(const StepCostModel& m, int seqs, long long tokens, long long ctx, Phase ph) {
  std::vector<std::vector<SeqWork>> r(static_cast<size_t>(m.shape().dp()), std::vector<SeqWork>(static_cast<size_t>(seqs), SeqWork{tokens, ctx, true}));
  return m.step(r, ph);
}

}  // namespace

TEST(Sanity, MoreTokensOrLongerContextIsNeverPredictedFaster) {
  const GpuSpec g = test::gpu("h200");
  auto cost = make_cost_model("fitted", g);
  for (const Deploy d : {Deploy{"kimi-k3", 32, 8}, Deploy{"kimi-k3", 8, 1}, Deploy{"deepseek-v4-pro", 16, 1}, Deploy{"deepseek-v4-flash", 8, 1},
                         Deploy{"deepseek-v4-pro", 16, 4}}) {
    const ModelSpec m = test::model(d.model);
    InstanceShape sh;
    sh.ep = d.ep, sh.attn_tp = d.tp;
    const StepCostModel sc(m, cost, FabricParams{}, sh, 0.0);
    double prev = 0;
    for (int s : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128}) {
      const StepTime st = step(sc, s, 1, 4096, Phase::decode);
      const double t = st.total_s;
      EXPECT_GE(t, prev * (1 - 1e-12)) << d.model << " EP" << d.ep << " decode seqs " << s << " attention " << st.attention_s << " ffn " << st.ffn_s;
      prev = t;
    }
    prev = 0;
    for (long long L = 128; L <= (1 << 20); L *= 2) {
      const double t = step(sc, 8, 1, L, Phase::decode).total_s;
      EXPECT_GE(t, prev * (1 - 1e-12)) << d.model << " decode context " << L;
      prev = t;
    }
    prev = 0;
    for (long long N = 16; N <= 16384; N *= 2) {
      const double t = step(sc, 1, N, 0, Phase::prefill).total_s;
      EXPECT_GE(t, prev * (1 - 1e-12)) << d.model << " prefill chunk " << N;
      prev = t;
    }
    prev = 0;
    for (long long P = 0; P <= (1 << 20); P = P ? P * 4 : 1024) {
      const double t = step(sc, 1, 2048, P, Phase::prefill).total_s;
      // Except from prefix 0 to 1,024 for the V4 models: their sparse-attention kernel takes longer
      // for a chunk at prefix 0, whose rows ramp with the causal position and whose plan splits the
      // longest queries, than for the same chunk after a short prefix (measured, ST + V16 rows of
      // csa_sparse_attn_prefill.json: 64 heads, chunk 2,048: 612.4 µs at prefix 0, 499.3 µs at
      // 4,096; 128 heads, chunk 4,096: 3,374.6 vs 3,217.3 µs); the fit's ramp feature
      // (v4_prefill_ramp, eighteenth session) follows the direction, not the whole size (64 heads,
      // chunk 2,048 at prefix 0: ~535 µs predicted, 612 measured); the whole step is within 1%.
      const bool v4_ramp_step = P == 1024 && std::string(d.model).rfind("deepseek-v4", 0) == 0;
      if (v4_ramp_step) EXPECT_GE(t, prev * 0.99) << d.model << " prefill prefix " << P;
      else EXPECT_GE(t, prev * (1 - 1e-12)) << d.model << " prefill prefix " << P;
      prev = t;
    }
  }
}

TEST(Sanity, NeverFasterThanTheRooflineBoundOfTheOpsOwnWork) {
  for (const char* hw : {"h200", "h800", "b300"}) {
    const GpuSpec g = test::gpu(hw);
    auto cost = make_cost_model("fitted", g);
    int checked = 0;
    for (const Deploy d : {Deploy{"kimi-k3", 32, 8}, Deploy{"deepseek-v4-pro", 16, 1}, Deploy{"deepseek-v4-flash", 8, 1}, Deploy{"deepseek-v3", 32, 1}}) {
      const ModelSpec m = test::model(d.model);
      InstanceShape sh;
      sh.ep = d.ep, sh.attn_tp = d.tp;
      const StepCostModel sc(m, cost, FabricParams{}, sh, 0.0);
      std::vector<Op> ops;
      for (int a = 0; a < static_cast<int>(m.attention_kinds.size()); ++a)
        for (int s : {1, 8, 64})
          for (long long L : {512LL, 8192LL, 131072LL}) {
            std::vector<SeqWork> dec(static_cast<size_t>(s), SeqWork{1, L, true}), pre(1, SeqWork{L / 4 + 1, L, true});
            sc.attention_ops(a, dec, Phase::decode, ops);
            sc.attention_ops(a, pre, Phase::prefill, ops);
          }
      for (int f = 0; f < static_cast<int>(m.ffn_kinds.size()); ++f)
        for (double T : {1.0, 64.0, 4096.0, 65536.0}) sc.ffn_ops(f, T / sh.dp(), T, ops);
      for (const auto& o : ops) {
        const double t = cost->latency(o).seconds;
        EXPECT_GE(t, roofline_bound(o, g)) << hw << " " << d.model << " " << to_string(o.kind) << " tokens " << o.tokens;
        ++checked;
      }
    }
    EXPECT_GT(checked, 300) << hw;
  }
}

// ----------------------------------------------------------------------------- range and scaling

TEST(Provenance, FewerThanOneRowCostsWhatOneRowCostsAndIsMeasured) {
  // K3 decode at attention TP 4 with one token per DP rank: each GPU routes 0.25 tokens on average
  // (step_cost.cpp: the rank's tokens / attn_tp); a launched kernel runs at least one row, so the
  // router, latent projections and permute cost what they cost at one token per GPU (attention TP 1),
  // answered from the measured rows. The routed experts keep their fractional expected experts.
  const GpuSpec g = test::gpu("h200");
  const ModelSpec k3 = test::model("kimi-k3");
  int fi = -1;
  for (size_t i = 0; i < k3.ffn_kinds.size(); ++i)
    if (k3.ffn_kinds[i].op != FfnOp::dense) fi = static_cast<int>(i);
  ASSERT_GE(fi, 0);
  auto m = std::make_shared<FittedCostModel>(committed(), g);
  InstanceShape tp4, tp1;
  tp4.ep = 32, tp4.attn_tp = 4;
  tp1.ep = 32, tp1.attn_tp = 1;
  std::vector<Op> quarter, one;  // the ops point into their StepCostModel's GEMM shapes: keep both alive
  const StepCostModel s4(k3, m, FabricParams{}, tp4, 0.0), s1(k3, m, FabricParams{}, tp1, 0.0);
  s4.ffn_ops(fi, 1, 1, quarter);
  s1.ffn_ops(fi, 1, 1, one);
  ASSERT_EQ(quarter.size(), one.size());
  int checked = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    const OpKind k = one[i].kind;
    if (k == OpKind::moe_router || k == OpKind::moe_latent_proj || k == OpKind::moe_permute) {
      EXPECT_EQ(m->latency(quarter[i]).source, Provenance::fitted) << to_string(k);
      EXPECT_DOUBLE_EQ(m->latency(quarter[i]).seconds, m->latency(one[i]).seconds) << to_string(k);
      ++checked;
    }
    if (k == OpKind::moe_experts)  // 1 token x top-16 over 896 experts on 32 GPUs: 0.5 expected experts per GPU
      for (const auto& c : m->components(one[i]))
        if (c.family == Family::grouped_w4a16) {
          EXPECT_NEAR(c.x[0], 16.0 / 32, 0.05);
          ++checked;
        }
  }
  EXPECT_EQ(checked, 5);  // router, latent projection, permute, and the two expert GEMMs (w13, w2)
}

TEST(KernelFamilies, MhaPrefillTimeFollowsTheBlocksOfTheBusiestSm) {
  // mla_prefill (our kernel: a block per 128 query rows and head, one per SM): H·⌈chunk/128⌉ query tiles over 132 SMs; the feature becomes
  // the chunk whose tiles fill ⌈tiles/132⌉ per SM. 12 heads × 768 (72 tiles), 48 × 256 (96) and
  // 24 × 256 (48): at most one per SM, 1; 96 × 256 (192 tiles): 2; 96 × 1536 (1,152): 9.
  const auto& info = family_info(Family::mla_prefill);
  ASSERT_TRUE(info.transform);
  auto per_sm = [&](double chunk, double heads) {
    double f[4] = {chunk, 1024 + (chunk + 1) / 2, heads, 0};
    info.transform(f);
    return f[0] * heads / 128 / 132;
  };
  EXPECT_NEAR(per_sm(768, 12), 1, 1e-9);
  EXPECT_NEAR(per_sm(256, 48), 1, 1e-9);
  EXPECT_NEAR(per_sm(256, 24), 1, 1e-9);
  EXPECT_NEAR(per_sm(256, 96), 2, 1e-9);
  EXPECT_NEAR(per_sm(1536, 96), 9, 1e-9);
  // a chunk larger than the waves it needs keeps its size: 96 heads × 16,384 = 12,288 tiles, 94
  // per SM, 132 · 94 · 128 / 96 = 16,544 ≥ 16,384
  double big[4] = {16384, 16384, 96, 0};
  info.transform(big);
  EXPECT_NEAR(big[0], 16544, 1e-9);
}

TEST(KernelFamilies, Fp8GroupedRowsFollowTheWavesOfTheTokensAsMKernel) {
  // rows per expert padded to the token tile: the next power of two ≥ m in [8, 128], then
  // multiples of 128 (the tokens-as-M kernel's 128-row tile; no longer multiples of 256)
  EXPECT_EQ(pad_rows(Family::grouped_fp8, 5, 5), 8);
  EXPECT_EQ(pad_rows(Family::grouped_fp8, 100, 100), 128);
  EXPECT_EQ(pad_rows(Family::grouped_fp8, 200, 200), 256);
  EXPECT_EQ(pad_rows(Family::grouped_fp8, 384, 384), 384);
  EXPECT_EQ(pad_rows(Family::grouped_fp8, 700, 700), 768);
  // gemm_fp8_tm.cu: one CTA per 128 token rows x 256 weight rows, one CTA per SM, 132 SMs.
  // From the second wave on, the rows feature is the rows the waves hold when full:
  // waves · 132 · 128 / ⌈N/256⌉.
  const auto& info = family_info(Family::grouped_fp8);
  ASSERT_TRUE(info.transform);
  auto rows = [&](double G, double m, double N) {
    double f[4] = {G, G * m, N, 7168};
    info.transform(f);
    return f[1];
  };
  // N 4096 (16 N-tiles): 2 x 512 rows = 8 x 16 = 128 tiles, one wave: rows unchanged
  EXPECT_NEAR(rows(2, 512, 4096), 1024, 1e-9);
  // 2 x 768 = 12 x 16 = 192 tiles and 2 x 1024 = 256 tiles: two waves, 2 · 132 · 128 / 16 = 2112 rows
  EXPECT_NEAR(rows(2, 768, 4096), 2112, 1e-9);
  EXPECT_NEAR(rows(2, 1024, 4096), 2112, 1e-9);
  // N 7168 (28 N-tiles): 4 x 256 = 8 x 28 = 224 tiles, two waves: 2 · 132 · 128 / 28 rows;
  // 4 x 384 = 336 tiles, three; 4 x 512 = 448 tiles, four
  EXPECT_NEAR(rows(4, 256, 7168), 2 * 16896.0 / 28, 1e-9);
  EXPECT_NEAR(rows(4, 384, 7168), 3 * 16896.0 / 28, 1e-9);
  EXPECT_NEAR(rows(4, 512, 7168), 4 * 16896.0 / 28, 1e-9);
  // 4 x 128 = 112 tiles, one wave; and at most one token tile per expert the rows stay, even
  // where 32 experts x 64 rows would span 512 tiles of the tokens-as-M kernel
  EXPECT_NEAR(rows(4, 128, 7168), 512, 1e-9);
  EXPECT_NEAR(rows(32, 64, 4096), 2048, 1e-9);
  // DeepGEMM's contiguous 4 x 8192, N 4096: 256 x 16 = 4096 tiles, 31.03 -> 32 waves of 1056 rows
  EXPECT_NEAR(rows(4, 8192, 4096), 32 * 1056.0, 1e-9);

  // The committed fit follows the measured steps at the DeepSeek-V3 expert shapes within 5% (fastest
  // instrument at each point, launch gap removed as in the fit); the fit without the wave feature
  // was off by 10% at 2 x 768 N 4096 K 7168 (84.3 µs for 93.7 measured) and 6.9% at 4 x 512 N 7168
  // K 2048 (58.9 for 63.3)
  const FittedCostModel m(committed(), test::gpu("h200"));
  const double gap = committed()->launch_gap_s;
  struct P {
    double G, m, N, K;
  };
  int n = 0;
  for (const P p : {P{2, 768, 4096, 7168}, P{2, 1024, 4096, 7168}, P{4, 384, 7168, 2048}, P{4, 512, 7168, 2048}, P{2, 512, 4096, 7168}}) {
    double best = 1e30;
    for (const auto& r : tables().at("moe_grouped_gemm_fp8.json").rows)
      if ((r.variant == "own_masked" || r.variant == "own_contiguous" || r.variant == "cublaslt_block128") && r.get("skew", 0) == 0 &&
          r.at("active_experts") == p.G && r.at("tokens_per_expert") == p.m && r.at("N") == p.N && r.at("K") == p.K && r.us_median > 0)
        best = std::min(best, r.us_median * 1e-6 - gap);
    ASSERT_LT(best, 1) << p.G << "x" << p.m;
    const double x[4] = {p.G, p.G * p.m, p.N, p.K};
    EXPECT_LT(rel(m.kernel_seconds(Family::grouped_fp8, x, nullptr), best), 0.05) << p.G << "x" << p.m << " N " << p.N << " K " << p.K;
    ++n;
  }
  EXPECT_EQ(n, 5);
}

TEST(Provenance, OutsideTheMeasuredRangeTheAnswerFollowsTheRooflineAndIsFlagged) {
  const GpuSpec g = test::gpu("h200");
  const FittedCostModel m(committed(), g);
  bool ex = false;
  // kda_decode (fp32 state) was measured for batch 1..64(+) and heads 12..96
  const double in[2] = {8, 48};
  m.kernel_seconds(Family::kda_decode_fp32, in, &ex);
  EXPECT_FALSE(ex);
  // far beyond the largest batch: memory-bound and linear in the batch (table formula), so doubling
  // the batch doubles the time exactly
  const double a[2] = {1e5, 96}, b[2] = {2e5, 96};
  ex = false;
  const double ta = m.kernel_seconds(Family::kda_decode_fp32, a, &ex);
  EXPECT_TRUE(ex);
  EXPECT_NEAR(m.kernel_seconds(Family::kda_decode_fp32, b, nullptr) / ta, 2.0, 1e-9);
  // below the smallest head count (6 heads, K3 at TP16): half the 12-head time at a batch where
  // the kernel is bandwidth-bound, never below the family's latency floor
  const double h12[2] = {4096, 12}, h6[2] = {4096, 6};
  EXPECT_NEAR(m.kernel_seconds(Family::kda_decode_fp32, h6, nullptr) / m.kernel_seconds(Family::kda_decode_fp32, h12, nullptr), 0.5, 1e-9);
  const double tiny[2] = {1, 1};
  EXPECT_GE(m.kernel_seconds(Family::kda_decode_fp32, tiny, nullptr), committed()->families[static_cast<int>(Family::kda_decode_fp32)].floor_s * (1 - 1e-3));
  // an engine op: K3 MLA prefill at 6 heads per GPU (attention TP 16) lies below the measured 12-96 heads
  const ModelSpec k3 = test::model("kimi-k3");
  InstanceShape sh;
  sh.ep = 32, sh.attn_tp = 16;
  const StepCostModel sc(k3, std::make_shared<FittedCostModel>(committed(), g), FabricParams{}, sh, 0.0);
  std::vector<Op> ops;
  sc.attention_ops(attention_kind(k3, AttentionOp::mla), {{4096, 0, true}}, Phase::prefill, ops);
  for (const auto& o : ops)
    if (o.kind == OpKind::mla_prefill) {
      EXPECT_EQ(m.latency(o).source, Provenance::extrapolated);
    }
  // and KDA decode at 12 heads per GPU (attention TP 8) was measured
  ops.clear();
  sh.attn_tp = 8;
  const StepCostModel sc8(k3, std::make_shared<FittedCostModel>(committed(), g), FabricParams{}, sh, 0.0);
  sc8.attention_ops(attention_kind(k3, AttentionOp::kda), {{1, 4096, true}, {1, 100, true}}, Phase::decode, ops);
  for (const auto& o : ops)
    if (o.kind == OpKind::kda_decode) {
      EXPECT_EQ(m.latency(o).source, Provenance::fitted);
    }
}
