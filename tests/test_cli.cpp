// The user-facing command: determinism (same scenario + seed ⇒ byte-identical files), exit codes
// and messages for bad input, and the plan/topology reports.
#include "helpers.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using namespace servesim;

namespace {

struct Out {
  int status = 0;
  std::string text;  // stdout + stderr
};

Out sh(const std::string& args) {
  Out o;
  const std::string cmd = std::string(SERVESIM_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.text.append(buf, n);
  const int st = pclose(p);
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path tmp(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("servesim_cli_" + name);
  fs::remove_all(p);
  return p;
}

}  // namespace

TEST(Cli, SameScenarioAndSeedGiveByteIdenticalOutputs) {
  const fs::path a = tmp("a"), b = tmp("b"), c = tmp("c");
  const std::string scen = test::data("tests/data/small.json");
  ASSERT_EQ(sh("run " + scen + " --out " + a.string()).status, 0);
  ASSERT_EQ(sh("run " + scen + " --out " + b.string() + " --jobs 1").status, 0);
  ASSERT_EQ(sh("run " + scen + " --out " + c.string() + " --seed 8").status, 0);
  for (const char* f : {"summary.json", "flash/summary.json", "flash/requests.csv", "flash/timeline.json"}) {
    ASSERT_TRUE(fs::exists(a / f)) << f;
    EXPECT_EQ(slurp(a / f), slurp(b / f)) << f << " differs between two runs with the same seed";
  }
  EXPECT_NE(slurp(a / "flash/requests.csv"), slurp(c / "flash/requests.csv"));
  // 60 requests, one row each
  const std::string csv = slurp(a / "flash/requests.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 61);
}

TEST(Cli, MalformedTraceLineStopsBeforeRunningAndNamesIt) {
  const fs::path dir = tmp("trace");
  fs::create_directories(dir);
  std::ofstream(dir / "t.jsonl") << "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 3, \"hash_ids\": [1]}\n"
                                 << "{\"timestamp\": 10, \"input_length\": 100, \"output_length\": -3, \"hash_ids\": [2]}\n";
  const Out o = sh("run " + test::data("tests/data/small.json") + " --trace " + (dir / "t.jsonl").string() + " --out " + (dir / "out").string());
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.text.find("t.jsonl:2: \"output_length\" must be ≥ 1, got -3"), std::string::npos) << o.text;
  EXPECT_FALSE(fs::exists(dir / "out" / "flash" / "summary.json"));
}

TEST(Cli, BadScenarioExitsWithStatus2) {
  const fs::path dir = tmp("scen");
  fs::create_directories(dir);
  std::ofstream(dir / "s.json") << "{\"workload\": {\"kind\": \"synthetic\"}, \"deployments\": []}";
  const Out o = sh("run " + (dir / "s.json").string());
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.text.find("s.json: workload.requests: missing"), std::string::npos) << o.text;
  EXPECT_EQ(sh("run /nonexistent/x.json").status, 2);
}

TEST(Cli, PlanShowsTheArticleNextToTheRealConfigs) {
  const Out o = sh("plan");
  ASSERT_EQ(o.status, 0) << o.text;
  for (const char* s : {"K3 on H200 (article)", "812", "DSV4 on H200 (article)", "190", "252", " 53 ", "4389", "877",
                        "27648.0 B/token", "449.37 MB fixed", "5511.4 B/token", "real configs", "K3 h200 EP32"})
    EXPECT_NE(o.text.find(s), std::string::npos) << "plan output lacks \"" << s << "\"";
}

TEST(Cli, TopologyPrintsLinksAndBisection) {
  const Out o = sh("topology");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("bisection bandwidth: 1600 GB/s"), std::string::npos) << o.text;  // K3: 8 nodes, 4 × 8 × 50 GB/s
  EXPECT_NE(o.text.find("nvlink"), std::string::npos);
}

TEST(Cli, SkipBadRowsCountsTheSkippedRows) {
  const fs::path dir = tmp("skip");
  fs::create_directories(dir);
  std::ofstream(dir / "t.jsonl") << "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 3, \"hash_ids\": [1]}\n"
                                 << "{\"timestamp\": 10, \"input_length\": 100, \"output_length\": -3, \"hash_ids\": [2]}\n"
                                 << "{\"timestamp\": 20, \"input_length\": 100, \"output_length\": 4, \"hash_ids\": [3]}\n";
  const Out o = sh("run " + test::data("tests/data/small.json") + " --trace " + (dir / "t.jsonl").string() + " --skip-bad-rows --out " +
                   (dir / "out").string());
  ASSERT_EQ(o.status, 0) << o.text;
  const std::string s = slurp(dir / "out" / "flash" / "summary.json");
  EXPECT_NE(s.find("\"skipped_bad_rows\": 1"), std::string::npos) << s;
  EXPECT_NE(s.find("\"arrived\": 2"), std::string::npos) << s;
}

TEST(Cli, AFileWhoseEveryRowIsMalformedIsRefusedEvenWhenSkipping) {
  const fs::path dir = tmp("allbad");
  fs::create_directories(dir);
  std::ofstream(dir / "t.csv") << "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n";
  const Out o = sh("run " + test::data("tests/data/small.json") + " --trace " + (dir / "t.csv").string() + " --skip-bad-rows --out " +
                   (dir / "out").string());
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.text.find("every row (2) was malformed"), std::string::npos) << o.text;
}

TEST(Cli, StepDefaultsFollowThePhaseAndWrongNamesListTheDeployments) {
  // prefill defaults to the pool's chunk (8192 tokens in the built-in scenario) on an empty cache
  Out o = sh("step --phase prefill");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("1 sequence per DP rank, 8192 new tokens each, 0 cached"), std::string::npos) << o.text;
  o = sh("step");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("decode step"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("1 new token each, 2048 cached"), std::string::npos) << o.text;
  EXPECT_EQ(sh("step --phase decode --tokens 5").status, 2);
  o = sh("step --deployment nope");
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.text.find("it has: k3-h200, v4pro-h200"), std::string::npos) << o.text;
  // --ops lists the ops of each layer kind with their provenance
  o = sh("step --ops");
  ASSERT_EQ(o.status, 0) << o.text;
  for (const char* s : {"kda_decode", "mla_decode", "moe_experts", "fitted"}) EXPECT_NE(o.text.find(s), std::string::npos) << s;
}
