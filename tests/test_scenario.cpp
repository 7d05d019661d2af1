// Scenario loading: the shipped scenarios load; every kind of bad input is refused with a message
// naming the file, the line/column or the field, and what was expected.
#include "scenarios/json_unique.hpp"
#include "helpers.hpp"
#include "costmodels/factory.hpp"
#include "sim/validate.hpp"

#include "cli_run.hpp"

#include <gtest/gtest.h>
#include <set>

#include <algorithm>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace servesim;

namespace {

std::string scenario_with(const std::string& deployment_extra, const std::string& workload = R"({"kind":"synthetic","requests":3,"rate_per_s":1,
  "input_tokens":{"dist":"constant","value":1000},"output_tokens":{"dist":"constant","value":10}})") {
  return R"({"name":"t","workload":)" + workload + R"(,"deployments":[{"name":"a","model":"deepseek-v4-flash","hardware":"h200",
    "prefill":{"ep":8},"decode":{"ep":8})" + deployment_extra + "}]}";
}

std::string error_of(const std::string& text) {
  try {
    validate_scenario(parse_scenario(text, "s.json", servesim::test::data("scenarios")));
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Scenario, ShippedScenariosLoad) {
  const Scenario s = load_scenario(servesim::test::data("scenarios/default.json"));
  ASSERT_EQ(s.deployments.size(), 2u);
  EXPECT_EQ(s.deployments[0].model.name, "kimi-k3");
  EXPECT_EQ(s.deployments[1].model.name, "deepseek-v4-pro");
  EXPECT_EQ(s.deployments[0].cluster.nodes, 8);  // 32 + 32 GPUs
  for (const char* f : {"scenarios/mooncake-conversation.json", "scenarios/dsv3-sglang-96xh100.json"}) EXPECT_NO_THROW(validate_scenario(load_scenario(servesim::test::data(f)))) << f;
}

// Every top-level scenario file the project ships loads and passes validation (the subfolders hold models,
// hardware, sweeps and validation cases, read through these).
TEST(Scenario, EveryShippedScenarioLoadsAndValidates) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(servesim::test::data("scenarios"))) {
    if (!e.is_regular_file() || e.path().extension() != ".json") continue;
    EXPECT_NO_THROW(validate_scenario(load_scenario(e.path().string()))) << e.path();
    ++n;
  }
  EXPECT_GE(n, 10);
}

// The article's question (seed article, Section III): its H200 and B300 sizes, node for node (8 GPUs a node,
// each pool from a node boundary): K3 58 + 145 EP32 units = 812 H200 nodes, 18 + 45 = 252 B300 nodes; V4-Pro
// 27 + 68 EP16 units = 190 H200 nodes, 8 + 19 = 54 B300 nodes (the article's 53 with its 15 prefill nodes
// rounded up to whole 2-node units).
TEST(Scenario, ArticleScenarioHoldsTheArticlesSizes) {
  const Scenario s = load_scenario(servesim::test::data("scenarios/article-10k.json"));
  ASSERT_EQ(s.deployments.size(), 4u);
  const struct { const char* name; const char* gpu; int nodes; } want[] = {
      {"k3-h200-article", "h200", 812}, {"v4pro-h200-article", "h200", 190}, {"k3-b300-article", "b300", 252}, {"v4pro-b300-article", "b300", 54}};
  for (size_t i = 0; i < 4; ++i) {
    const auto& d = s.deployments[i];
    EXPECT_EQ(d.name, want[i].name);
    EXPECT_EQ(d.gpu.name, want[i].gpu) << d.name;
    const int p = d.prefill.instances * d.prefill.ep, q = d.decode.instances * d.decode.ep;  // GPUs per pool
    EXPECT_EQ((p + 7) / 8 + (q + 7) / 8, want[i].nodes) << d.name;
  }
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
  // keys read as a whole (an object or array child) are listed too (review: the top-level list
  // lacked "workload" and "deployments", the workload's "input_tokens" and "output_tokens")
  std::string top = scenario_with("");
  top.insert(1, R"("workloads":1,)");
  EXPECT_NE(error_of(top).find("workloads: unknown key (did you mean \"workload\"?)"), std::string::npos) << error_of(top);
  EXPECT_NE(error_of(top).find("deployments"), std::string::npos) << error_of(top);
  const std::string w = R"({"kind":"synthetic","requests":3,"rate_per_s":1,"input_tokens":{"dist":"constant","value":1000},
    "output_tokens":{"dist":"constant","value":10},"output_token":1})";
  EXPECT_NE(error_of(scenario_with("", w)).find("did you mean \"output_tokens\""), std::string::npos) << error_of(scenario_with("", w));
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
  // every model file of the folder, in name order (listing only one, say the last, would not do)
  std::set<std::string> names;
  for (const auto& f : std::filesystem::directory_iterator(servesim::test::data("scenarios/models")))
    if (f.path().extension() == ".json") names.insert(f.path().stem().string());
  ASSERT_GE(names.size(), 5u);
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  EXPECT_NE(e.find("available: " + list + ")"), std::string::npos) << e;
}

TEST(Scenario, KvCacheDtypeOverridesTheModelsMlaCache) {
  const Scenario s = parse_scenario(R"({"workload":{"kind":"synthetic","requests":1,"rate_per_s":1,"input_tokens":{"dist":"constant","value":10},
    "output_tokens":{"dist":"constant","value":1}},"deployments":[{"name":"v3","model":"deepseek-v3","hardware":"h200",
    "prefill":{"ep":32},"decode":{"ep":32},"kv_cache_dtype":"fp8"}]})",
                                    "s.json", servesim::test::data("scenarios"));
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

// ----------------------------------------------------------------------------- input rules (issue 10, items 7-9, 11)

namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("servesim_scen_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

using ::test::slurp;

std::string load_error(const fs::path& p) {
  try {
    load_scenario(p.string());
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// Item 7: a UTF-8 byte-order mark before a scenario, model or hardware file is skipped, and the
// line:column of a syntax error is counted without it.
TEST(InputRules, AByteOrderMarkBeforeAJsonFileIsSkipped) {
  const fs::path d = fresh_dir("bom");
  std::ofstream(d / "s.json") << "\xEF\xBB\xBF" << scenario_with("");
  const Scenario s = load_scenario((d / "s.json").string());
  EXPECT_EQ(s.name, "t");
  ASSERT_EQ(s.deployments.size(), 1u);
  EXPECT_EQ(s.deployments[0].name, "a");
  EXPECT_EQ(s.workload.requests, 3);
  fs::create_directories(d / "hardware");
  std::ofstream(d / "hardware" / "h200.json") << "\xEF\xBB\xBF" << slurp(servesim::test::data("scenarios/hardware/h200.json"));
  EXPECT_EQ(load_hardware((d / "hardware" / "h200.json").string()).hbm_bytes, 150754820096.0);
  // {"seed": ,} : the comma is column 10 of line 1 once the mark is dropped
  std::ofstream(d / "b.json") << "\xEF\xBB\xBF{\"seed\": ,}";
  EXPECT_NE(load_error(d / "b.json").find("b.json:1:10: malformed JSON"), std::string::npos) << load_error(d / "b.json");
}

// Item 8: numbers beyond their type (2^32 + 8 = 4294967304 used to become EP 8; 2^64 − 1 as a
// seed), beyond double range (1e400), or beyond their meaning (a horizon over 1e9 s, a chunk over
// 2^40 = 1,099,511,627,776 tokens; a token distribution clamped above it: [min 0, 2^40] printed
// with 6 digits) are refused, naming the field.
TEST(InputRules, HostileScenarioNumbersAreRefusedWithTheirField) {
  std::string t = scenario_with("");
  t.replace(t.find(R"("decode":{"ep":8})"), 17, R"("decode":{"ep":4294967304})");
  EXPECT_NE(error_of(t).find("s.json: deployments[0].decode.ep: must be ≤ 2147483647, got 4294967304"), std::string::npos) << error_of(t);
  t = scenario_with("");
  t.replace(t.find(R"("prefill":{"ep":8})"), 18, R"("prefill":{"ep":8,"chunk_tokens":1099511627777})");
  EXPECT_NE(error_of(t).find("deployments[0].prefill.chunk_tokens: must be ≤ 1099511627776, got 1099511627777"), std::string::npos) << error_of(t);
  t = scenario_with("");
  t.insert(1, R"("seed":18446744073709551615,)");
  EXPECT_NE(error_of(t).find("s.json: seed: must be ≤ 9223372036854775807, got 18446744073709551615"), std::string::npos) << error_of(t);
  t = scenario_with("");
  t.insert(1, R"("horizon_s":2e9,)");
  EXPECT_NE(error_of(t).find("s.json: horizon_s: must be in [0, 1e+09], got 2000000000.0"), std::string::npos) << error_of(t);
  // {"horizon_s":1e400 : the number starts at column 14 of line 1
  t = scenario_with("");
  t.insert(1, R"("horizon_s":1e400,)");
  EXPECT_NE(error_of(t).find("s.json:1:14: a number is out of range"), std::string::npos) << error_of(t);
  const std::string w = R"({"kind":"synthetic","requests":3,"rate_per_s":1,"input_tokens":{"dist":"constant","value":1000,"max":1e19},
    "output_tokens":{"dist":"constant","value":10}})";
  EXPECT_NE(error_of(scenario_with("", w)).find("workload.input_tokens.max: must be in [1, 1099511627776], got 1e+19"), std::string::npos)
      << error_of(scenario_with("", w));
  // just past the bound reads as past it (rev25d: "must be in [0, 1.09951e+12], got 1.09951e+12")
  const std::string w2 = R"({"kind":"synthetic","requests":3,"rate_per_s":1,"input_tokens":{"dist":"constant","value":1099511627777},
    "output_tokens":{"dist":"constant","value":10}})";
  EXPECT_NE(error_of(scenario_with("", w2)).find("must be in [1, 1099511627776], got 1099511627777"), std::string::npos) << error_of(scenario_with("", w2));
  t = scenario_with(R"(,"slo":{"ttft_s":1e300})");
  EXPECT_NE(error_of(t).find("deployments[0].slo.ttft_s: must be in [1e-09, 1e+09]"), std::string::npos) << error_of(t);
}

// rev26 user review: a field accepted and then ignored or silently changed is refused naming it.
// kv_cache_dtype on a model without MLA layers (V4-Flash: its KV entries are the model file's);
// a token or round count whose every draw would be 0 (a constant 0 ran as 1 token, input 0 as the
// shared prefix + 1). A model with MLA takes it, and counts of 1 are fine.
TEST(InputRules, IgnoredOrSilentlyChangedFieldsAreRefused) {
  EXPECT_NE(error_of(scenario_with(R"(,"kv_cache_dtype":"fp8")")).find("s.json: deployments[0].kv_cache_dtype: sets the dtype of MLA latent caches; deepseek-v4-flash has no MLA layer"),
            std::string::npos)
      << error_of(scenario_with(R"(,"kv_cache_dtype":"fp8")"));
  std::string k3 = scenario_with(R"(,"kv_cache_dtype":"fp8")");
  k3.replace(k3.find("deepseek-v4-flash"), 17, "deepseek-v3");
  EXPECT_EQ(error_of(k3).find("kv_cache_dtype"), std::string::npos) << error_of(k3);  // (the layout may still be refused)
  const std::string in = R"({"kind":"synthetic","requests":3,"rate_per_s":1,"input_tokens":)", out = R"(,"output_tokens":)";
  const std::string one = R"({"dist":"constant","value":1})";
  for (const auto& [dist, field, want] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {R"({"dist":"constant","value":0})", "output", "workload.output_tokens.value: must be in [1, "},
           {R"({"dist":"exponential","mean":0})", "output", "workload.output_tokens.mean: must be > 0"},
           {R"({"dist":"constant","value":0})", "input", "workload.input_tokens.value: must be in [1, "},
           {R"({"dist":"lognormal","mu":3,"sigma":1,"max":0})", "input", "workload.input_tokens.max: must be in [1, "}}) {
    const std::string w = field == "input" ? in + dist + out + one + "}" : in + one + out + dist + "}";
    EXPECT_NE(error_of(scenario_with("", w)).find(want), std::string::npos) << w << ": " << error_of(scenario_with("", w));
  }
  EXPECT_EQ(error_of(scenario_with("", in + one + out + one + "}")), "");
  // a decode router that would route exactly as least_loaded under another name
  EXPECT_NE(error_of(scenario_with(R"(,"decode_router":"cache_aware")")).find("s.json: deployments[0].decode_router: cache_aware ranks prefill instances"),
            std::string::npos)
      << error_of(scenario_with(R"(,"decode_router":"cache_aware")"));
  EXPECT_EQ(error_of(scenario_with(R"(,"decode_router":"round_robin")")), "");
  // arrivals past the 1e9 s bound on times (rate 1e-12 put them at 5e12 s)
  const std::string slow = R"({"kind":"synthetic","requests":3,"rate_per_s":1e-12,"input_tokens":{"dist":"constant","value":10},"output_tokens":{"dist":"constant","value":10}})";
  EXPECT_NE(error_of(scenario_with("", slow)).find("workload.rate_per_s: requests / rate_per_s is more than 1e9 s"), std::string::npos) << error_of(scenario_with("", slow));
  const std::string slow_open = R"({"kind":"agent","loop":"open","rate_per_s":1e-9,"sessions":2})";
  EXPECT_NE(error_of(scenario_with("", slow_open)).find("workload.rate_per_s: sessions / rate_per_s is more than 1e9 s"), std::string::npos) << error_of(scenario_with("", slow_open));
  const std::string agent = R"({"kind":"agent","concurrency":2,"sessions":2,"rounds":{"dist":"constant","value":0}})";
  EXPECT_NE(error_of(scenario_with("", agent)).find("workload.rounds.value: must be in [1, "), std::string::npos) << error_of(scenario_with("", agent));
}

// Keys the run would accept and ignore are refused, naming what they apply to (user review,
// twenty-seventh session: each of these ran byte-identical to the run without it).
TEST(InputRules, KeysOfAnotherWorkloadOrPoolAreRefused) {
  const std::string syn = R"({"kind":"synthetic","requests":3,"rate_per_s":1,"input_tokens":{"dist":"constant","value":1000},"output_tokens":{"dist":"constant","value":10})";
  for (const auto& [extra, workload, want] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"", syn + R"(,"max_requests":5})", "workload.max_requests: applies to trace replays (a synthetic workload's count is \"requests\")"},
           {"", R"({"kind":"agent","concurrency":2,"max_requests":5})", "workload.max_requests: applies to trace replays (an agent workload's count is \"sessions\")"},
           {"", R"({"kind":"agent","concurrency":2,"rate_per_s":1000})", "workload.rate_per_s: applies to \"loop\": \"open\""},
           {"", R"({"kind":"agent","rate_per_s":1000})", "workload.rate_per_s: applies to \"loop\": \"open\""},  // closed is the default
           {"", R"({"kind":"agent","loop":"open","rate_per_s":1,"sessions":5,"concurrency":50})", "workload.concurrency: applies to \"loop\": \"closed\""},
           {"", syn + R"(,"shared_prefix_tokens":1000})", "workload.shared_prefix_tokens: 1000 is not a multiple of block_tokens (512)"},
           {"", syn + R"(,"shared_prefix_tokens":1024})", "workload.shared_prefix_tokens: 1024 is not below input_tokens' longest draw (1000)"},
           {"", syn + R"(,"shared_prefix_tokens":500})", "workload.shared_prefix_tokens: 500 is not a multiple of block_tokens (512)"},
           {"", syn + R"(,"burstiness":8})", "workload.burstiness: applies to \"arrival\": \"gamma\""},
           {"", R"({"kind":"agent","loop":"open","rate_per_s":1,"sessions":5,"ramp_s":50})", "workload.ramp_s: applies to \"loop\": \"closed\""}}) {
    EXPECT_NE(error_of(scenario_with(extra, workload)).find("s.json: " + want), std::string::npos) << workload << ": " << error_of(scenario_with(extra, workload));
  }
  EXPECT_EQ(error_of(scenario_with("", syn + R"(,"shared_prefix_tokens":512})")), "");
  EXPECT_EQ(error_of(scenario_with("", syn + R"(,"arrival":"gamma","burstiness":8})")), "");
  EXPECT_EQ(error_of(scenario_with("", R"({"kind":"agent","loop":"open","rate_per_s":1,"sessions":5})")), "");
  // the pools: chunked prefill is the prefill pool's, the batch limit the decode pool's
  std::string t = scenario_with("");
  t.replace(t.find(R"("prefill":{"ep":8})"), 18, R"("prefill":{"ep":8,"max_running":1})");
  EXPECT_NE(error_of(t).find("s.json: deployments[0].prefill.max_running: applies to the decode pool"), std::string::npos) << error_of(t);
  t = scenario_with("");
  t.replace(t.find(R"("decode":{"ep":8})"), 17, R"("decode":{"ep":8,"chunk_tokens":7})");
  EXPECT_NE(error_of(t).find("s.json: deployments[0].decode.chunk_tokens: applies to the prefill pool"), std::string::npos) << error_of(t);
}

// A key given twice in one object is refused with the object's path (review, twenty-second
// session: "seed": 42, "seed": 7 ran with seed 7; a second "deployments" dropped the first), and
// cluster sizes beyond the input bounds are refused naming the field instead of exhausting memory
// (2^31 - 1 decode instances aborted with bad_alloc, exit 134).
TEST(InputRules, DuplicateKeysAndClusterSizesBeyondTheBoundsAreRefused) {
  std::string t = scenario_with("");
  t.insert(1, R"("seed":42,"seed":7,)");
  EXPECT_NE(error_of(t).find("s.json: key \"seed\" appears twice in the top-level object"), std::string::npos) << error_of(t);
  t = scenario_with("");
  t.replace(t.find(R"("prefill":{"ep":8})"), 18, R"("prefill":{"ep":8,"ep":4})");
  EXPECT_NE(error_of(t).find("s.json: key \"ep\" appears twice in \"deployments[0].prefill\""), std::string::npos) << error_of(t);
  t = scenario_with(R"(,"slo":{"ttft_s":1},"slo":{"ttft_s":2})");
  EXPECT_NE(error_of(t).find("key \"slo\" appears twice in \"deployments[0]\""), std::string::npos) << error_of(t);
  // the same key in two different objects is fine
  EXPECT_EQ(error_of(scenario_with("")), "");
  // the path counts array elements, scalars included: the third element of the second object's "b"
  try {
    (void)parse_unique_keys<nlohmann::json>(R"([{"a": 1}, {"a": 2, "b": [1, "x", {"c": 1, "d": [], "c": 2}]}])");
    ADD_FAILURE() << "a duplicate key was accepted";
  } catch (const DuplicateKeyError& e) {
    EXPECT_EQ(e.where, "[1].b[2]");
    EXPECT_EQ(e.key, "c");
  }
  // 2^31 - 1 decode instances of EP 8: refused by the GPU bound, naming the pool
  t = scenario_with("");
  t.replace(t.find(R"("decode":{"ep":8})"), 17, R"("decode":{"ep":8,"instances":2147483647})");
  EXPECT_NE(error_of(t).find("s.json: deployments[0].decode: prefill.instances x prefill.ep + decode.instances x decode.ep = 17179869184 GPUs; at most 262144"),
            std::string::npos) << error_of(t);
  // 32,768 instances of EP 8 is exactly 262,144 GPUs with one prefill instance more: 262,152
  t = scenario_with("");
  t.replace(t.find(R"("decode":{"ep":8})"), 17, R"("decode":{"ep":8,"instances":32767})");
  EXPECT_EQ(error_of(t), "");  // 8 + 32,767 x 8 = 262,144 GPUs: at the bound
  t = scenario_with("");
  t.replace(t.find(R"("decode":{"ep":8})"), 17, R"("decode":{"ep":8,"instances":32768})");
  EXPECT_NE(error_of(t).find("= 262152 GPUs; at most 262144"), std::string::npos) << error_of(t);
  t = scenario_with(R"(,"cluster":{"nodes":2147483647})");
  EXPECT_NE(error_of(t).find("deployments[0].cluster.nodes: must be ≤ 32768"), std::string::npos) << error_of(t);
  const std::string w = R"({"kind":"agent","concurrency":100000000})";
  EXPECT_NE(error_of(scenario_with("", w)).find("workload.concurrency: must be ≤ 10000000"), std::string::npos) << error_of(scenario_with("", w));
}

// A NUL byte ends nlohmann::json's input: a scenario followed by NUL bytes and anything else
// parsed as the scenario alone (review, twenty-second session, on trace rows; the same reader
// serves every JSON input file). Refused with the byte's line and column (1-based).
TEST(InputRules, ANulByteInAJsonFileIsRefusedWithLineAndColumn) {
  std::string t = scenario_with("") + "\n";
  const long line = 1 + std::count(t.begin(), t.end(), '\n');  // the line after the scenario's last
  t += std::string("\0\0{\"anything\": 1}", 17);
  EXPECT_NE(error_of(t).find("s.json: a NUL byte (U+0000) at line " + std::to_string(line) + ", column 1:"), std::string::npos) << error_of(t);
  t = scenario_with("");
  t.insert(3, std::string(1, '\0'));  // inside the first key's name, on line 1: the column only
  EXPECT_NE(error_of(t).find("s.json: a NUL byte (U+0000) at column 4:"), std::string::npos) << error_of(t);
  try {
    (void)parse_unique_keys<nlohmann::json>(std::string("[1]\n\n  \0", 8));
    ADD_FAILURE() << "a NUL byte was accepted";
  } catch (const NulByteError& e) {
    EXPECT_EQ(e.byte, 7u);
    EXPECT_NE(std::string(e.what()).find("at line 3, column 3"), std::string::npos) << e.what();
  }
}

// Item 9: a deployment name is its output folder: only letters, digits and . _ - +, not "." or
// "..", so it cannot leave --out.
TEST(InputRules, DeploymentNamesThatWouldLeaveTheOutputFolderAreRefused) {
  for (const char* bad : {"../x", "a/b", "..", ".", "", "x y", "/abs", "a\\\\b"}) {
    std::string t = scenario_with("");
    t.replace(t.find(R"("name":"a")"), 10, std::string(R"("name":")") + bad + "\"");
    EXPECT_NE(error_of(t).find("s.json: deployments[0].name: "), std::string::npos) << bad << ": " << error_of(t);
    EXPECT_NE(error_of(t).find("cannot be a folder name"), std::string::npos) << bad;
  }
  for (const char* good : {"k3-h200", "a.b_c+d", "...", "V4.Pro"}) {
    EXPECT_TRUE(is_safe_file_name(good)) << good;
    std::string t = scenario_with("");
    t.replace(t.find(R"("name":"a")"), 10, std::string(R"("name":")") + good + "\"");
    EXPECT_EQ(error_of(t), "") << good;
  }
}

// Item 11: a copy of scenarios/ used as the data folder keeps the fitted cost model: the hardware
// file's "../../costmodels/data/h200/fitted_models.json" is looked for next to the copy, then in
// the source tree; a missing file is named with every place looked.
TEST(InputRules, ACopiedDataFolderStillFindsTheFittedParameters) {
  unsetenv("SERVESIM_DATA_DIR");
  const fs::path d = fresh_dir("data");
  fs::create_directories(d / "data" / "hardware");
  const std::string hw = slurp(servesim::test::data("scenarios/hardware/h200.json"));
  std::ofstream(d / "data" / "hardware" / "h200.json") << hw;
  // <copy>/hardware/../../costmodels/... = <tmp>/costmodels/... does not exist: the source tree's
  const std::string source_fit = (fs::path(servesim::test::source_dir()) / "costmodels/data/h200/fitted_models.json").lexically_normal().string();
  GpuSpec g = load_hardware((d / "data" / "hardware" / "h200.json").string());
  EXPECT_EQ(g.fitted_models, "../../costmodels/data/h200/fitted_models.json");
  EXPECT_EQ(g.fitted_models_path, source_fit);
  EXPECT_EQ(make_cost_model("fitted", g)->name(), "fitted");
  // with costmodels/ copied beside the data folder, the copy relative to the hardware file wins
  fs::create_directories(d / "costmodels" / "data" / "h200");
  fs::copy_file(source_fit, d / "costmodels" / "data" / "h200" / "fitted_models.json");
  g = load_hardware((d / "data" / "hardware" / "h200.json").string());
  EXPECT_EQ(g.fitted_models_path, (d / "costmodels" / "data" / "h200" / "fitted_models.json").string());
  // a parameter file that exists nowhere: the path relative to the hardware file, and the error names it
  std::string missing = hw;
  missing.replace(missing.find("h200/fitted_models.json"), 4, "h999");
  std::ofstream(d / "data" / "hardware" / "h999.json") << missing;
  g = load_hardware((d / "data" / "hardware" / "h999.json").string());
  const std::string rel = (d / "costmodels" / "data" / "h999" / "fitted_models.json").string();
  EXPECT_EQ(g.fitted_models_path, rel);
  try {
    make_cost_model("fitted", g);
    ADD_FAILURE() << "a missing parameter file must throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("are not at " + rel), std::string::npos) << e.what();
  }
  const std::string source_h999 = (fs::path(servesim::test::source_dir()) / "costmodels/data/h999/fitted_models.json").lexically_normal().string();
  EXPECT_EQ(fitted_models_fallbacks(g.fitted_models), (std::vector<std::string>{source_h999}));
  setenv("SERVESIM_DATA_DIR", (d / "data").c_str(), 1);  // then $SERVESIM_DATA_DIR/hardware/ comes first
  EXPECT_EQ(fitted_models_fallbacks(g.fitted_models), (std::vector<std::string>{rel, source_h999}));
  unsetenv("SERVESIM_DATA_DIR");
  // a data folder whose hardware/ is a symlink to the source tree's: "<d>/link/hardware/../../costmodels"
  // exists through the link, its lexical form "<d>/costmodels" does not -- the path kept must be
  // the one that exists (fixed in the twenty-first session), here the source tree's file; and a
  // model referred to as "../models/<name>.json" from the linked folder resolves the same way
  const fs::path l = d / "link";
  fs::create_directories(l);
  fs::create_symlink(fs::path(servesim::test::source_dir()) / "scenarios" / "hardware", l / "hardware");
  fs::remove_all(d / "costmodels");
  g = load_hardware((l / "hardware" / "h200.json").string());
  ASSERT_TRUE(fs::exists(g.fitted_models_path)) << g.fitted_models_path;
  EXPECT_TRUE(fs::equivalent(g.fitted_models_path, source_fit)) << g.fitted_models_path;
  const std::string m = resolve_data_file("../models/kimi-k3.json", "models", (l / "hardware").string());
  ASSERT_TRUE(fs::exists(m)) << m;
  EXPECT_TRUE(fs::equivalent(m, fs::path(servesim::test::source_dir()) / "scenarios" / "models" / "kimi-k3.json")) << m;
}

// workload.wait_scale: read for the two TraceLab kinds (0-1e9; 0 = time_scale), an unknown key for
// every other kind (rev24b: nothing covered the scenario-level path)
TEST(Scenario, WaitScaleIsATraceLabSetting) {
  auto wl = [](const std::string& kind, const std::string& extra) {
    return R"({"kind":")" + kind + R"(","trace":"t.csv","time_scale":0.001)" + extra + "}";
  };
  for (const std::string kind : {"tracelab_replay", "tracelab_rounds"}) {
    const Scenario s = parse_scenario(scenario_with("", wl(kind, R"(,"wait_scale":1.5)")), "s.json", servesim::test::data("scenarios"));
    EXPECT_EQ(s.workload.wait_scale, 1.5) << kind;
    EXPECT_EQ(s.workload.time_scale, 0.001) << kind;
    EXPECT_EQ(parse_scenario(scenario_with("", wl(kind, "")), "s.json", servesim::test::data("scenarios")).workload.wait_scale, 0.0);
    const std::string e = error_of(scenario_with("", wl(kind, R"(,"wait_scale":-1)")));
    EXPECT_NE(e.find("wait_scale"), std::string::npos) << kind << ": " << e;
  }
  for (const std::string kind : {"mooncake", "azure", "burstgpt"}) {
    const std::string e = error_of(scenario_with("", wl(kind, R"(,"wait_scale":1)")));
    EXPECT_NE(e.find("wait_scale: unknown key"), std::string::npos) << kind << ": " << e;
  }
}
