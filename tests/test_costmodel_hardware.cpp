// Cost models on other GPUs (issue 11 item 4, issue 5): per-kernel scaling from the H200 fit,
// the communication calibration against DeepEP and the H800 published-number checks; split from
// test_costmodel_fit.cpp.
#include "costmodels/factory.hpp"
#include "costmodels/calibration/fit.hpp"
#include "costmodels/calibration/kernel_table.hpp"
#include "costmodels/calibration/fit_report.hpp"
#include "costmodels/calibration/samples.hpp"
#include "costmodels/fit_set.hpp"
#include "costmodels/fitted.hpp"
#include "costmodels/log_grid.hpp"
#include "costmodels/step_cost.hpp"
#include "costmodel_test_helpers.hpp"
#include "helpers.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <unistd.h>
#include <sstream>
#include <fstream>
#include <filesystem>
#include <map>

using namespace servesim;
using namespace servesim::costmodel_test;

TEST(Hardware, OtherGpusAreScaledPerKernelAndSaySo) {
  const GpuSpec h200 = test::gpu("h200"), h800 = test::gpu("h800"), b300 = test::gpu("b300");
  const FittedCostModel a(committed(), h200), b(committed(), h800), c(committed(), b300);
  EXPECT_EQ(a.name(), "fitted");
  EXPECT_EQ(b.name(), "fitted (extrapolated from H200)");
  // Only the part above the kernel's fixed cost F (kernel_fixed_s, 2.19 us in every hardware file)
  // scales (issue 11 item 4): t' = F + (t − F)·ratio for a kernel at its ceiling, and for one below
  // the achievable HBM bandwidth t' = t + B / A_target − B / A_H200 (cross_gpu_seconds).
  ASSERT_DOUBLE_EQ(h800.kernel_fixed_s, 2.19e-6);
  ASSERT_DOUBLE_EQ(b300.kernel_fixed_s, 2.19e-6);
  auto scaled = [](double t, double F, double ratio) { return F + (t - F) * ratio; };
  // memory-bound by the datasheet (KDA state streaming): at or above the H200's measured 4.3 TB/s
  // the datasheet HBM ratio 4.8 / 3.35, below it its streaming time at 4.3 · 3.35 / 4.8 TB/s
  // replaces the one at 4.3 TB/s
  const double mem[2] = {64, 96};
  const double tm = a.kernel_seconds(Family::kda_decode_fp32, mem, nullptr);
  ASSERT_GT(tm, 2.19e-6);
  const Work wm = family_info(Family::kda_decode_fp32).work(mem);
  ASSERT_GT(wm.bytes / 4.8e12, wm.flops / 989e12);
  const double rate = wm.bytes / (tm - 2.19e-6);
  EXPECT_NEAR(b.kernel_seconds(Family::kda_decode_fp32, mem, nullptr),
              rate >= 4.3e12 ? scaled(tm, 2.19e-6, 4.8 / 3.35) : tm + wm.bytes / (4.3e12 * 3.35 / 4.8) - wm.bytes / 4.3e12, 1e-12)
      << rate;
  // compute-bound (BF16 8192^3 GEMM): datasheet BF16 ratio (H800 = H200 = 989 TFLOP/s; B300 2,250)
  const double gemm[3] = {8192, 8192, 8192};
  const double tg = a.kernel_seconds(Family::gemm_bf16, gemm, nullptr);
  EXPECT_NEAR(b.kernel_seconds(Family::gemm_bf16, gemm, nullptr), tg, 1e-12);
  EXPECT_NEAR(c.kernel_seconds(Family::gemm_bf16, gemm, nullptr), scaled(tg, 2.19e-6, 989.0 / 2250.0), 1e-12);
  // a kernel no longer than F does not get faster on the B300 (it used to come out 2.3x faster)
  const double tiny[3] = {1, 128, 128};
  const double tt = a.kernel_seconds(Family::gemm_bf16, tiny, nullptr);
  if (tt <= 2.19e-6) EXPECT_NEAR(c.kernel_seconds(Family::gemm_bf16, tiny, nullptr), tt, 1e-15);
  else EXPECT_NEAR(c.kernel_seconds(Family::gemm_bf16, tiny, nullptr), scaled(tt, 2.19e-6, 989.0 / 2250.0), 1e-12);
  // every answer on another GPU is flagged
  Op o;
  o.kind = OpKind::kda_decode, o.flops = 1, o.bytes = 1, o.seqs = 64, o.heads = 96, o.state_bytes = 4, o.tokens = 64;
  EXPECT_EQ(a.latency(o).source, Provenance::fitted);
  EXPECT_EQ(b.latency(o).source, Provenance::extrapolated);
  EXPECT_EQ(fitted_provenance(h200).scaling, "none");
  EXPECT_NE(fitted_provenance(h800).scaling.find("extrapolated from H200"), std::string::npos);
  EXPECT_FALSE(fitted_provenance(h200).measurement_commits.empty());
}

// A kernel below the achievable HBM bandwidth is latency/occupancy-bound: only its streaming
// time B / A changes across GPUs (Little's law, cross_gpu_seconds). Hand arithmetic for the grouped
// FP8 GEMM at 4 x 256 rows, N 7168, K 2048 (DeepGEMM's masked row): B = 4·7168·2048 + 1024·2048 +
// 2·1024·7168 = 75,497,472 bytes, F = 2·1024·7168·2048 = 30,064,771,072 FLOP; on the H200 at
// 2.27 TB/s: t = 33.2588 us, s = t − 2.19 = 31.0688 us above the fixed cost. Datasheet bound on the
// H200: max(F / 1,979 T = 15.1919 us, B / 4.8 T = 15.7286 us) = 15.7286 us (memory); achieved
// 4.8·15.7286/31.0688 = 2.43 TB/s < the measured 4.3: k = 1.
//   H800: A = 3.35·4.3/4.8 = 3.00104 TB/s; m = 31.0688 + 25.1571 − 17.5576 = 38.6684 us;
//         c = 31.0688·15.1919/15.7286 = 30.0086 us; t' = 2.19 + 38.6684 = 40.858 us
//         (old rule: 2.19 + 31.0688·(22.5366/15.7286) = 46.706 us)
//   B300: A = 8·4.3/4.8 = 7.16667 TB/s; m = 31.0688 + 10.5345 − 17.5576 = 24.0458 us;
//         c = 31.0688·(F / 4,500 T = 6.6811)/15.7286 = 13.197 us; t' = 26.236 us (old: 20.831 us)
// A bandwidth-bound kernel (4.0 TB/s on the whole 18.8744 us, 4.53 TB/s above the fixed cost, over
// the achievable 4.3) keeps the ratio rule: H800 2.19 + 16.6844·3.35^-1/4.8^-1 = 26.096 us, B300 12.201 us.
TEST(Hardware, KernelsBelowTheAchievableBandwidthCarryTheirLatencyAcrossGpus) {
  const GpuSpec h200 = test::gpu("h200"), h800 = test::gpu("h800"), b300 = test::gpu("b300");
  const Ceilings src = datasheet_ceilings(h200), d800 = datasheet_ceilings(h800), d300 = datasheet_ceilings(b300);
  ASSERT_DOUBLE_EQ(src.hbm_achievable, 4.3e12);  // measured device copy (hardware.md)
  ASSERT_DOUBLE_EQ(d800.hbm_achievable, 0.0);
  ASSERT_DOUBLE_EQ(d300.hbm_achievable, 0.0);
  const Work w{30064771072.0, 75497472.0, DType::fp8};
  const double F = 2.19e-6;
  const double lat = w.bytes / 2.27e12 - F;
  EXPECT_NEAR(F + cross_gpu_seconds(lat, w, src, d800), 40.858e-6, 0.002e-6);
  EXPECT_NEAR(F + cross_gpu_seconds(lat, w, src, d300), 26.236e-6, 0.002e-6);
  const double bw = w.bytes / 4.0e12 - F;
  EXPECT_NEAR(F + cross_gpu_seconds(bw, w, src, d800), 26.096e-6, 0.002e-6);
  EXPECT_NEAR(F + cross_gpu_seconds(bw, w, src, d300), 12.201e-6, 0.002e-6);
  // a compute-bound kernel keeps its efficiency on the math ceiling (BF16 8192^3 at 700 TFLOP/s)
  const Work g{2.0 * 8192 * 8192 * 8192, 3.0 * 2 * 8192 * 8192, DType::bf16};
  const double tg = g.flops / 700e12;
  EXPECT_NEAR(cross_gpu_seconds(tg, g, src, d800), tg, 1e-12);
  EXPECT_NEAR(cross_gpu_seconds(tg, g, src, d300), tg * 989.0 / 2250.0, 1e-12);
  // the fitted model prices the H200's own grouped FP8 fit this way, and its parameter file
  // carries the H200's measured bandwidth
  EXPECT_DOUBLE_EQ(committed()->reference.hbm_achievable, 4.3e12);
  const FittedCostModel a(committed(), h200), b(committed(), h800), c(committed(), b300);
  const double x[4] = {4, 1024, 7168, 2048};
  const double t = a.kernel_seconds(Family::grouped_fp8, x, nullptr);
  ASSERT_GT(t, F);
  const Work wx = family_info(Family::grouped_fp8).work(x);
  EXPECT_DOUBLE_EQ(wx.bytes, w.bytes);
  EXPECT_NEAR(b.kernel_seconds(Family::grouped_fp8, x, nullptr), F + cross_gpu_seconds(t - F, w, src, d800), 1e-15);
  EXPECT_NEAR(c.kernel_seconds(Family::grouped_fp8, x, nullptr), F + cross_gpu_seconds(t - F, w, src, d300), 1e-15);
}

TEST(Hardware, H800PublishedKernelsAgainstOurScaledFits) {
  const auto rows = published_h800_checks(committed(), test::gpu("h800"));
  ASSERT_EQ(rows.size(), 32u);
  for (const auto& r : rows) {
    ASSERT_TRUE(std::isfinite(r.predicted) && r.predicted > 0) << r.what;
    // DeepGEMM FP8 at M = 4096 against our cuBLASLt FP8 fits: the same class of large wgmma GEMM,
    // within 25%: 0.79-1.04 since the V4 projections were measured to M = 16384 (cuBLASLt block-scaled
    // FP8 1108 TFLOP/s at N=7168 K=16384 on the H200 vs DeepGEMM's published 1426 on the H800)
    if (r.group == "DeepGEMM FP8 dense (H800)" && r.what.rfind("M 4096", 0) == 0) {
      EXPECT_NEAR(r.ratio(), 1.0, 0.25) << r.what;
    }
    // our wgmma MLA decode (issue 12) at 16 heads, scaled to the H800: 3.4-3.7 TB/s on the H200 is
    // 0.6-1.0 of FlashMLA's 3,000 GB/s on the H800's slower HBM (measured 0.77); the mma.sync kernel was 0.30
    if (r.what.find("memory-bound") != std::string::npos) {
      EXPECT_GT(r.ratio(), 0.6) << r.what;
      EXPECT_LT(r.ratio(), 1.0) << r.what;
    }
  }
}

// ----------------------------------------------------------------------------- communication

// The host launch gap every eager kernel pays (hardware kernel_launch_s) is the one the fit removes
// from every eagerly timed table row (samples.cpp launch_gap_s, fitted_models.json launch_gap_s),
// to 0.005 us: a table change that moves the fitted gap fails here until the hardware files follow
// (review, twenty-third session: the files said 6.4 us, the fit 6.81).
TEST(Hardware, KernelLaunchIsTheFittedLaunchGap) {
  const double fitted = launch_gap_s(tables());
  EXPECT_GT(fitted, 3e-6);
  EXPECT_LT(fitted, 12e-6);
  for (const char* hw : {"h200", "h100", "h800", "b300"}) EXPECT_NEAR(test::gpu(hw).kernel_launch_s, fitted, 0.005e-6) << hw << ": fitted " << fitted;
}

TEST(Comm, HardwareFilesCarryTheCalibrationAndDeepEpRowsAreClose) {
  const CommCalibration c = calibrate_comm(tables(), test::gpu("h200"), test::gpu("h800"));
  for (const char* hw : {"h200", "h100", "h800", "b300"}) {
    const GpuSpec g = test::gpu(hw);
    EXPECT_DOUBLE_EQ(g.nvlink_efficiency, c.nvlink_efficiency) << hw;
    EXPECT_DOUBLE_EQ(g.nic_efficiency, c.nic_efficiency) << hw;
    EXPECT_DOUBLE_EQ(g.nic_latency_s, c.nic_latency_s) << hw;
    EXPECT_DOUBLE_EQ(g.nvlink_call_overhead_s, c.nvlink_call_s) << hw;
    EXPECT_DOUBLE_EQ(g.nic_call_overhead_s, c.nic_call_s) << hw;
  }
  EXPECT_GT(c.nvlink_efficiency, 0.5);
  EXPECT_LT(c.nvlink_efficiency, 0.8);
  int ll = 0;
  for (const auto& r : c.rows)
    if (r.fitted && r.what.find("LL") != std::string::npos) {
      EXPECT_GT(r.predicted / r.published, 0.85) << r.what;
      EXPECT_LT(r.predicted / r.published, 1.10) << r.what;
      ++ll;
    }
  EXPECT_EQ(ll, 10);
  // every DeepEP row, fitted or not (normal EP16, intranode EP8), read as its benchmark routes and
  // counts (costmodels/deepep_bench.hpp), within 10%; before that reading the NIC fit sat at its
  // bound 1.0 and intranode EP8 / normal EP16 came out at 0.84x / 0.50x
  int deepep = 0;
  for (const auto& r : c.rows)
    if (r.what.find("DeepEP") != std::string::npos) {
      EXPECT_GT(r.predicted / r.published, 0.90) << r.what;
      EXPECT_LT(r.predicted / r.published, 1.10) << r.what;
      ++deepep;
    }
  EXPECT_EQ(deepep, 20);
  EXPECT_LT(c.nic_efficiency, 0.95);  // not at its bound
  // with the per-call cost the NCCL rows from 1 MiB to 1 GiB per peer stay within 15% (without it
  // the 1 MiB row is predicted at 0.2x: 5.5 µs against 27.6 µs measured)
  int nccl = 0;
  for (const auto& r : c.rows)
    if (r.what.find("NCCL") != std::string::npos) {
      EXPECT_GT(r.predicted / r.published, 0.85) << r.what;
      EXPECT_LT(r.predicted / r.published, 1.15) << r.what;
      ++nccl;
    }
  EXPECT_EQ(nccl, 6);
  EXPECT_GT(c.nvlink_call_s, 10e-6);
  EXPECT_GT(c.nic_call_s, 10e-6);
  // the committed parameter file carries the same calibration
  EXPECT_DOUBLE_EQ(committed()->comm.nic_efficiency, c.nic_efficiency);
  EXPECT_DOUBLE_EQ(committed()->comm.nvlink_efficiency, c.nvlink_efficiency);
  EXPECT_DOUBLE_EQ(committed()->comm.nvlink_call_s, c.nvlink_call_s);
  EXPECT_DOUBLE_EQ(committed()->comm.nic_call_s, c.nic_call_s);
}

// ----------------------------------------------------------------------------- in the product

TEST(Product, FittedIsTheDefaultAndRooflineStaysSelectable) {
  const Scenario s = parse_scenario(R"({"workload": {"kind": "synthetic", "requests": 1, "rate_per_s": 1,
      "input_tokens": {"dist": "constant", "value": 100}, "output_tokens": {"dist": "constant", "value": 2}},
      "deployments": [{"name": "a", "model": "kimi-k3", "hardware": "h200",
        "prefill": {"instances": 1, "ep": 32, "attn_tp": 8}, "decode": {"instances": 1, "ep": 32, "attn_tp": 8}}]})",
                                    "inline", test::data("scenarios"));
  EXPECT_EQ(s.cost_model, "fitted");
  const GpuSpec g = test::gpu("h200");
  EXPECT_EQ(make_cost_model(s.cost_model, g)->name(), "fitted");
  EXPECT_EQ(make_cost_model("roofline", g)->name(), "roofline");
  try {
    make_cost_model("bogus", g);
    ADD_FAILURE() << "unknown cost model accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("fitted, roofline"), std::string::npos);
  }
  GpuSpec bare = g;
  bare.fitted_models_path.clear();
  EXPECT_THROW(make_cost_model("fitted", bare), std::invalid_argument);
  EXPECT_THROW(parse_scenario(R"({"cost_model": "nope", "workload": {}, "deployments": []})", "inline", test::data("scenarios")), ScenarioError);
}

// An op of several kernels is `extrapolated` when any one of them lies outside the measurements,
// but only those kernels' seconds count as answered outside them (the step's extrapolated share).
// DeepSeek-V3's absorbed MLA decode at 128 heads per GPU: the attention kernel was measured at
// 12-128 heads, the absorption GEMMs (one product per head: strided-batched BF16) only up to K3's
// 96 heads, so at 2 sequences of 67,584 tokens the op is extrapolated and its extrapolated seconds
// are the GEMMs' alone. On a GPU scaled from the H200 every kernel is extrapolated.
TEST(Hardware, ExtrapolatedTimeCountsOnlyTheKernelsOutsideTheMeasurements) {
  const ModelSpec m = test::model("deepseek-v3");
  InstanceShape sh;
  sh.ep = 16;
  for (const char* gpu : {"h200", "h800"}) {
    const FittedCostModel f(committed(), test::gpu(gpu));
    const StepCostModel sc(m, std::make_shared<FittedCostModel>(committed(), test::gpu(gpu)), FabricParams{}, sh, 0.0);
    std::vector<Op> ops;
    sc.attention_ops(attention_kind(m, AttentionOp::mla), {{1, 67583, true}, {1, 67583, true}}, Phase::decode, ops);
    const Op& o = find_op(ops, OpKind::mla_decode);
    double kernel = 0, gemms = 0;
    for (const auto& c : f.components(o)) {
      bool ex = false;
      const double t = c.count * f.kernel_seconds(c.family, c.x.data(), &ex);
      if (c.family == Family::mla_decode) {
        kernel += t;
        EXPECT_EQ(ex, std::string(gpu) == "h800") << gpu;
      } else {
        gemms += t;
        EXPECT_EQ(c.family, Family::gemm_bf16_batched);
        EXPECT_TRUE(ex) << gpu;
      }
    }
    ASSERT_GT(kernel, 0);
    ASSERT_GT(gemms, 0);
    const OpLatency l = f.latency(o);
    EXPECT_EQ(l.source, Provenance::extrapolated);
    EXPECT_NEAR(l.seconds, kernel + gemms, 1e-12);
    EXPECT_NEAR(l.extrapolated_s, std::string(gpu) == "h800" ? kernel + gemms : gemms, 1e-12) << gpu;
  }
}

// NUL bytes in the cost model's own inputs (json_unique.hpp's rule; review, twenty-third session:
// only the scenario and trace readers were tested): a kernel table and the fitted parameters with
// one after their JSON are refused naming the file, where json::parse would stop at the NUL.
TEST(InputRules, NulBytesInKernelTablesAndFittedParametersAreRefused) {
  const std::filesystem::path d = std::filesystem::temp_directory_path() / ("servesim-nul-cm-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  auto with_nul = [&](const std::string& from, const std::string& name) {
    std::ifstream in(from, std::ios::binary);
    std::ostringstream os;
    os << in.rdbuf();
    std::ofstream(d / name, std::ios::binary) << os.str() << std::string("\0{}", 3);
    return (d / name).string();
  };
  const std::string table = with_nul(test::data("costmodels/data/h200/csa_topk.json"), "csa_topk.json");
  try {
    (void)load_kernel_table(table);
    ADD_FAILURE() << "a kernel table with a NUL byte was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(table + ": a NUL byte (U+0000) at line"), std::string::npos) << e.what();
  }
  const std::string fit = with_nul(test::data("costmodels/data/h200/fitted_models.json"), "fitted_models.json");
  try {
    (void)read_fit_json(fit);
    ADD_FAILURE() << "fitted parameters with a NUL byte were accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(fit + ": malformed JSON (a NUL byte (U+0000) at line"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(d);
}
