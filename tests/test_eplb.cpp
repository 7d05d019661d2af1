// EPLB without redundant experts (issue 11): SGLang's --enable-eplb with no
// --ep-num-redundant-experts rebalances which GPU holds which expert but adds no copies (the Kimi K2
// deployment of sgl-project/ome config/runtimes/srt/kimi-k2-pd-rt.yaml). A pool says so with
// "eplb": true and 0 redundant experts. Expected values are hand arithmetic or orderings that a
// wrong placement breaks.
#include "costmodels/expert_load.hpp"
#include "helpers.hpp"
#include "sim/validate.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

using namespace servesim;

namespace {

FfnSpec k2_moe() { return *test::model("kimi-k2").main_moe(); }

// A one-deployment Kimi K2 scenario whose deployment object ends with `pools` (",\"prefill\":{...}").
std::string k2_scenario(const std::string& pools) {
  return R"({"name":"t","workload":{"kind":"synthetic","requests":3,"rate_per_s":1,
    "input_tokens":{"dist":"constant","value":1000},"output_tokens":{"dist":"constant","value":10}},
    "deployments":[{"name":"a","model":"kimi-k2","hardware":"h200")" + pools + "}]}";
}

std::string pool_error(const std::string& prefill) {
  const std::string text = k2_scenario(R"(,"prefill":)" + prefill + R"(,"decode":{"ep":32})");
  try {
    validate_scenario(parse_scenario(text, "s.json", test::data("scenarios")));
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Eplb, WithoutReplicasItOnlyPacksByHand) {
  // loads 8, 4, 3, 1 on 2 GPUs, 2 slots each, no copies: heaviest first onto the lighter GPU with a
  // free slot: g0 = e0 (8), g1 = e1 (4), g1 = e2 (7 < 8), g0 = e3 (g1 is full): {0, 3} and {1, 2}
  const auto p = eplb_placement({8, 4, 3, 1}, 2, 0);
  ASSERT_EQ(p.size(), 2u);
  ASSERT_EQ(p[0].size(), 2u);
  ASSERT_EQ(p[1].size(), 2u);
  EXPECT_EQ(p[0][0].first, 0);
  EXPECT_EQ(p[0][1].first, 3);
  EXPECT_EQ(p[1][0].first, 1);
  EXPECT_EQ(p[1][1].first, 2);
  for (const auto& g : p)
    for (const auto& [e, share] : g) EXPECT_EQ(share, 1.0) << "expert " << e << " has no copy";
}

TEST(Eplb, PackingAloneLiesBetweenIdOrderAndReplicas) {
  // Kimi K2, EP32, 16,384 tokens per GPU: id order leaves hot experts together; packing by load
  // spreads them; copies of the hottest experts (32 redundant) split them further
  const FfnSpec f = k2_moe();
  const double T = 32 * 16384.0;
  const double id_order = ExpertLoad(f, 32, 0, false).expected(T);
  const double packed = ExpertLoad(f, 32, 0, true).expected(T);
  const double copies = ExpertLoad(f, 32, 32, true).expected(T);
  EXPECT_GT(id_order, 1.5 * packed);
  EXPECT_GT(packed, copies);
  EXPECT_GE(copies, 1.0);
  // the three-argument form keeps its meaning: EPLB exactly when there are copies
  EXPECT_EQ(ExpertLoad(f, 32, 0).expected(T), id_order);
  EXPECT_EQ(ExpertLoad(f, 32, 32).expected(T), copies);
}

TEST(Eplb, CopiesWithoutEplbAreRefused) {
  EXPECT_THROW(ExpertLoad(k2_moe(), 32, 32, false), std::invalid_argument);
  const std::string e = pool_error(R"({"ep":32,"redundant_experts":32,"eplb":false})");
  EXPECT_NE(e.find("eplb"), std::string::npos) << e;
  EXPECT_NE(e.find("redundant experts are placed by EPLB"), std::string::npos) << e;
  EXPECT_NE(pool_error(R"({"ep":32,"eplb":"yes"})").find("eplb"), std::string::npos);
  EXPECT_EQ(pool_error(R"({"ep":32,"eplb":true})"), "");
}

TEST(Eplb, ScenarioDefaultFollowsTheRedundantExperts) {
  const Scenario s = parse_scenario(k2_scenario(R"(,"prefill":{"ep":32,"redundant_experts":32},"decode":{"ep":32,"eplb":true})"),
                                    "s.json", test::data("scenarios"));
  EXPECT_TRUE(s.deployments[0].prefill.eplb);
  EXPECT_TRUE(s.deployments[0].decode.eplb);
  EXPECT_EQ(s.deployments[0].decode.redundant_experts, 0);
  const Scenario d = parse_scenario(k2_scenario(""), "s.json", test::data("scenarios"));
  EXPECT_FALSE(d.deployments[0].prefill.eplb);
  EXPECT_FALSE(d.deployments[0].decode.eplb);
}
