// Unit cost and per-pool throughput in summary.json (issue 14), against hand arithmetic.
#include "helpers.hpp"
#include "costmodels/memory.hpp"
#include "sim/exporters/writers.hpp"

#include "cli_run.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>

namespace fs = std::filesystem;

using namespace servesim;

namespace {

// 1 x EP8 prefill, 2 x EP8 decode on H200 (24 GPUs, 3 nodes), $4 per GPU-hour, 700 W; one hour
// of window after a 600 s warm-up, 1e6 input and 2e5 output tokens, prefill busy 1,800 s, decode
// busy 3,600 s (Σ over instances).
struct Fixture {
  DeploymentSpec d = servesim::test::deployment("kimi-k3", "h200", servesim::test::pool(1, 8, 8), servesim::test::pool(2, 8, 8));
  RunReport rep;
  Fixture() {
    d.gpu.gpu_hour_usd = 4.0;
    d.gpu.board_power_w = 700;
    rep.deployment = &d;
    rep.summary.warmup_s = 600;
    rep.summary.end_s = 4200;
    rep.summary.input_tokens = 1000000;
    rep.summary.output_tokens = 200000;
    rep.summary.prefill_busy_s = 1800;
    rep.summary.decode_busy_s = 3600;
  }
};

}  // namespace

TEST(UnitCost, DollarsAndJoulesPerTokenFromThePoolsGpuHours) {
  Fixture f;
  ASSERT_EQ(required_gpus(f.d), 24);
  const auto j = summary_json(f.rep);
  const auto& c = j["cost"];
  EXPECT_DOUBLE_EQ(c["gpu_hour_usd"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(c["window_usd"].get<double>(), 24 * 4.0);                           // 24 GPUs x $4 x 1 h
  EXPECT_DOUBLE_EQ(c["usd_per_million_input_tokens"].get<double>(), 32.0);             // 8 x $4 / 1e6 tokens x 1e6
  EXPECT_DOUBLE_EQ(c["usd_per_million_output_tokens"].get<double>(), 320.0);           // 16 x $4 / 2e5 x 1e6
  EXPECT_DOUBLE_EQ(c["usd_per_million_tokens"].get<double>(), 80.0);                   // $96 / 1.2e6 x 1e6
  EXPECT_DOUBLE_EQ(c["joules_per_input_token"].get<double>(), 1800.0 * 8 * 700 / 1e6);   // 10.08
  EXPECT_DOUBLE_EQ(c["joules_per_output_token"].get<double>(), 3600.0 * 8 * 700 / 2e5);  // 100.8
  // per-pool throughput next to the whole cluster's, over the window (3,600 s)
  const auto& t = j["throughput"];
  EXPECT_DOUBLE_EQ(t["input_tokens_per_s_per_prefill_gpu"].get<double>(), std::round(1e6 / 3600 / 8 * 1e3) / 1e3);
  EXPECT_DOUBLE_EQ(t["output_tokens_per_s_per_decode_gpu"].get<double>(), std::round(2e5 / 3600 / 16 * 1e3) / 1e3);
  EXPECT_DOUBLE_EQ(t["output_tokens_per_s_per_gpu"].get<double>(), std::round(2e5 / 3600 / 24 * 1e3) / 1e3);
}

TEST(UnitCost, UnknownPriceOrPowerGivesNoFigure) {
  Fixture f;
  f.d.gpu.gpu_hour_usd = 0;
  f.d.gpu.board_power_w = 0;
  f.rep.summary.output_tokens = 0;
  const auto c = summary_json(f.rep)["cost"];
  EXPECT_FALSE(c.contains("usd_per_million_output_tokens"));
  EXPECT_FALSE(c.contains("joules_per_output_token"));
  f.d.gpu.gpu_hour_usd = 4.0;
  EXPECT_TRUE(summary_json(f.rep)["cost"]["usd_per_million_output_tokens"].is_null());  // no output token
}

// The shipped hardware files carry a price and a board power with a cited source; a deployment
// overrides them.
TEST(UnitCost, HardwareFilesCiteTheirPriceAndPower) {
  for (const char* hw : {"h200", "b300", "h100", "h800"}) {
    const GpuSpec g = servesim::test::gpu(hw);
    EXPECT_GT(g.gpu_hour_usd, 0) << hw;
    EXPECT_GT(g.board_power_w, 0) << hw;
    EXPECT_TRUE(g.sources.count("gpu_hour_usd") && g.sources.count("board_power_w")) << hw;
  }
  EXPECT_DOUBLE_EQ(servesim::test::gpu("h200").gpu_hour_usd, 4.0);
  auto j = nlohmann::json::parse(::test::slurp(servesim::test::data("scenarios/default.json")));
  j["deployments"][0]["gpu_hour_usd"] = 2.5;
  j["deployments"][0]["board_power_w"] = 650;
  const Scenario s = parse_scenario(j.dump(), "s.json", servesim::test::data("scenarios"));
  EXPECT_DOUBLE_EQ(s.deployments[0].gpu.gpu_hour_usd, 2.5);
  EXPECT_DOUBLE_EQ(s.deployments[0].gpu.board_power_w, 650);
  EXPECT_DOUBLE_EQ(s.deployments[1].gpu.gpu_hour_usd, 4.0);
}

// V4-Pro over K3 on the same hardware: 21 / 42 = 0.5, next to the article's 0.41; other pairs
// (another GPU, a missing figure) are not compared.
TEST(UnitCost, ArticleRatioNextToTheSimulatedOne) {
  auto run = [](const char* dep, const char* model, const char* hw, double usd) {
    return nlohmann::json{{"deployment", dep}, {"model", model}, {"hardware", hw}, {"cost", {{"usd_per_million_output_tokens", usd}}}};
  };
  const auto q = unit_cost_ratios({run("k3", "kimi-k3", "h200", 42.0), run("v4", "deepseek-v4-pro", "h200", 21.0),
                                   run("v4b", "deepseek-v4-pro", "b300", 10.0)});
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0]["dsv4_deployment"], "v4");
  EXPECT_EQ(q[0]["k3_deployment"], "k3");
  EXPECT_DOUBLE_EQ(q[0]["simulated_usd_per_million_output_tokens_ratio"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(q[0]["article_ratio"].get<double>(), 0.41);
  EXPECT_TRUE(q[0]["model_facts_ratio"].is_null());  // not given
  EXPECT_TRUE(unit_cost_ratios({run("k3", "kimi-k3", "h200", 42.0)}).empty());
  EXPECT_DOUBLE_EQ(unit_cost_ratios({run("k3", "kimi-k3", "h200", 42.0), run("v4", "deepseek-v4-pro", "h200", 21.0)}, 0.25)[0]["model_facts_ratio"].get<double>(),
                   0.25);
}

// The article's formula, (49 + 6.1) / (104 + 30.7): active parameters at 1 B each + the KV of one
// 500K-token sequence, with the model files (model-facts.md; review, twenty-third session: the
// product showed only the article's 0.41). By hand: K3 104.2e9 + 500,000 x 27,648 + 449,372,160
// (test_memory.cpp Kv.K3PerTokenAndPerSequence) = 118.474e9; V4-Pro 48.8e9 + 125,000 CSA entries x
// 716 B x 30 + 3,906 HCA entries x 584 B x 31 + 61 x 128 x 584 B of windows + compressor state.
TEST(UnitCost, TheArticleFormulaWithTheModelFiles) {
  const double k3 = 104.2e9 + 500000.0 * 27648 + 449372160.0;
  const double compressor = 30 * (32768.0 + 8192.0) + 31 * 524288.0;
  const double v4 = 48.8e9 + 30 * 125000 * 716.0 + 31 * 3906 * 584.0 + 61 * 128 * 584.0 + compressor;
  EXPECT_DOUBLE_EQ(article_decode_bytes(test::model("kimi-k3"), 500000), k3);
  EXPECT_DOUBLE_EQ(article_decode_bytes(test::model("deepseek-v4-pro"), 500000), v4);
  EXPECT_NEAR(v4 / k3, 0.436, 0.001);  // against the article's 0.41
  // and `run` prints it beside the article's figure for the shipped default (both models on H200)
  const auto o = ::test::sh("run --horizon 20 --no-timeline --quiet --out " + (fs::temp_directory_path() / ("servesim-uc-" + std::to_string(::getpid()))).string());
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find(fmt::format("article 0.41 (decode bandwidth per token; {:.2f} with the model files' KV and active parameters)", v4 / k3)), std::string::npos)
      << o.text;
  fs::remove_all(fs::temp_directory_path() / ("servesim-uc-" + std::to_string(::getpid())));
}

// The console's $ figures: three significant digits, fixed notation (review, twenty-third session).
TEST(UnitCost, DollarsPrintWithThreeSignificantDigits) {
  EXPECT_EQ(usd_text(0.0123), "0.0123");
  EXPECT_EQ(usd_text(0.006), "0.00600");
  EXPECT_EQ(usd_text(2.982), "2.98");
  EXPECT_EQ(usd_text(12.34), "12.3");
  EXPECT_EQ(usd_text(87.42), "87.4");
  EXPECT_EQ(usd_text(18400.0), "18400");
  EXPECT_EQ(usd_text(0.0), "0");
}
