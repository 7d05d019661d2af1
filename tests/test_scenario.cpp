// Scenario loading: the shipped scenarios load; every kind of bad input is refused with a message
// naming the file, the line/column or the field, and what was expected.
#include "helpers.hpp"
#include "sim/validate.hpp"

#include <gtest/gtest.h>

using namespace servesim;

namespace {

std::string scenario_with(const std::string& deployment_extra, const std::string& workload = R"({"kind":"synthetic","requests":3,"rate_per_s":1,
  "input_tokens":{"dist":"constant","value":1000},"output_tokens":{"dist":"constant","value":10}})") {
  return R"({"name":"t","workload":)" + workload + R"(,"deployments":[{"name":"a","model":"deepseek-v4-flash","hardware":"h200",
    "prefill":{"ep":8},"decode":{"ep":8})" + deployment_extra + "}]}";
}

std::string error_of(const std::string& text) {
  try {
    validate_scenario(parse_scenario(text, "s.json", test::data("scenarios")));
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Scenario, ShippedScenariosLoad) {
  const Scenario s = load_scenario(test::data("scenarios/default.json"));
  ASSERT_EQ(s.deployments.size(), 2u);
  EXPECT_EQ(s.deployments[0].model.name, "kimi-k3");
  EXPECT_EQ(s.deployments[1].model.name, "deepseek-v4-pro");
  EXPECT_EQ(s.deployments[0].cluster.nodes, 8);  // 32 + 32 GPUs
  for (const char* f : {"scenarios/mooncake-conversation.json", "scenarios/dsv3-sglang-96xh100.json"}) EXPECT_NO_THROW(validate_scenario(load_scenario(test::data(f)))) << f;
}

TEST(Scenario, MalformedJsonNamesLineAndColumn) {
  const std::string e = error_of("{\n  \"name\": \"x\",\n  \"seed\": ,\n}");
  EXPECT_NE(e.find("s.json:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("malformed JSON"), std::string::npos) << e;
}

TEST(Scenario, UnknownKeyIsNamedWithItsPath) {
  const std::string e = error_of(scenario_with(R"(,"prefil":{"ep":8})"));
  EXPECT_NE(e.find("deployments[0].prefil: unknown key"), std::string::npos) << e;
  std::string text = scenario_with("");
  text.replace(text.find(R"("decode":{"ep":8})"), 17, R"("decode":{"ep":8,"max_runing":3})");
  const std::string e2 = error_of(text);
  EXPECT_NE(e2.find("deployments[0].decode.max_runing: unknown key"), std::string::npos) << e2;
  EXPECT_NE(e2.find("did you mean \"max_running\""), std::string::npos) << e2;
  // the hint lists the keys the reader accepts, also those the file does not use
  const std::string e3 = error_of(scenario_with(R"(,"kv_tier":{"enabled":true})"));
  EXPECT_NE(e3.find("did you mean \"kv_tiers\""), std::string::npos) << e3;
  EXPECT_NE(e3.find("prefix_cache"), std::string::npos) << e3;
  EXPECT_NE(e3.find("batch_scheduler"), std::string::npos) << e3;
}

TEST(Scenario, WrongTypesAndRangesAreNamed) {
  std::string e = error_of(scenario_with(R"(,"memory_utilization":1.5)"));
  EXPECT_NE(e.find("deployments[0].memory_utilization: must be in"), std::string::npos) << e;
  e = error_of(scenario_with("", R"({"kind":"synthetic","requests":-3,"rate_per_s":1,"input_tokens":{"dist":"constant","value":1},"output_tokens":{"dist":"constant","value":1}})"));
  EXPECT_NE(e.find("workload.requests: must be ≥ 1, got -3"), std::string::npos) << e;
  e = error_of(scenario_with("", R"({"kind":"poisson"})"));
  EXPECT_NE(e.find("workload.kind: unknown value \"poisson\""), std::string::npos) << e;
}

TEST(Scenario, ImpossibleDeploymentsAreRefused) {
  // EP 24 does not divide V4-Flash's 256 experts
  std::string text = scenario_with("");
  text.replace(text.find(R"("decode":{"ep":8})"), 17, R"("decode":{"ep":24})");
  std::string e = error_of(text);
  EXPECT_NE(e.find("deployments[0].decode.ep"), std::string::npos) << e;
  EXPECT_NE(e.find("256"), std::string::npos) << e;
  // K3 with pure DP attention at EP32 does not fit an H200
  e = error_of(R"({"workload":{"kind":"synthetic","requests":1,"rate_per_s":1,"input_tokens":{"dist":"constant","value":10},
    "output_tokens":{"dist":"constant","value":1}},"deployments":[{"name":"k","model":"kimi-k3","hardware":"h200",
    "prefill":{"ep":32,"attn_tp":1},"decode":{"ep":32,"attn_tp":8}}]})");
  EXPECT_NE(e.find("deployments[0].prefill: weights do not fit"), std::string::npos) << e;
  // too few nodes
  // EP 12 is neither a divisor nor a multiple of 8 GPUs per node
  text = scenario_with("");
  text.replace(text.find(R"("decode":{"ep":8})"), 17, R"("decode":{"ep":12})");
  e = error_of(text);
  EXPECT_NE(e.find("deployments[0].decode.ep: 12 must divide or be a multiple of 8"), std::string::npos) << e;
  e = error_of(scenario_with(R"(,"cluster":{"nodes":1})"));
  EXPECT_NE(e.find("deployments[0].cluster.nodes"), std::string::npos) << e;
}

TEST(Scenario, MissingModelFileListsWhatExists) {
  std::string text = scenario_with("");
  text.replace(text.find("deepseek-v4-flash"), 17, "deepseek-v5");
  const std::string e = error_of(text);
  EXPECT_NE(e.find("no models file for \"deepseek-v5\""), std::string::npos) << e;
  EXPECT_NE(e.find("kimi-k3"), std::string::npos) << e;
}

TEST(Scenario, KvCacheDtypeOverridesTheModelsMlaCache) {
  const Scenario s = parse_scenario(R"({"workload":{"kind":"synthetic","requests":1,"rate_per_s":1,"input_tokens":{"dist":"constant","value":10},
    "output_tokens":{"dist":"constant","value":1}},"deployments":[{"name":"v3","model":"deepseek-v3","hardware":"h200",
    "prefill":{"ep":32},"decode":{"ep":32},"kv_cache_dtype":"fp8"}]})",
                                    "s.json", test::data("scenarios"));
  EXPECT_EQ(s.deployments[0].model.attention_kinds[0].kv_dtype, DType::fp8);
}

TEST(Scenario, UnknownPolicyNamesAndMisplacedKnobsAreNamed) {
  std::string e = error_of(scenario_with(R"(,"router":"random")"));
  EXPECT_NE(e.find("deployments[0].router: unknown router \"random\""), std::string::npos) << e;
  e = error_of(scenario_with(R"(,"eviction":"fifo")"));
  EXPECT_NE(e.find("deployments[0].eviction: unknown eviction policy"), std::string::npos) << e;
  e = error_of(scenario_with(R"(,"cluster":{"oversubscription":4})"));
  EXPECT_NE(e.find("deployments[0].cluster.oversubscription: applies to \"fabric\": \"fat_tree\" only"), std::string::npos) << e;
}
