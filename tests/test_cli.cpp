// The user-facing command: determinism (same scenario + seed ⇒ byte-identical files), exit codes
// and messages for bad input, and the plan/topology reports.
#include "helpers.hpp"
#include "sim/simulation.hpp"

#include "cli_run.hpp"
#include "sim/cli/capacity_serving.hpp"
#include "sim/cli/args.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <deque>
#include <limits>
#include <map>
#include <regex>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using namespace servesim;

namespace {
using test::Out;
using test::sh;
using test::slurp;


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

// --trace replays a Mooncake file at its own 512-token blocks whatever block size the scenario's
// synthetic or agent workload uses (rev25d: block_tokens 16 refused every real row as malformed).
TEST(Cli, TraceOverrideUsesMooncakes512TokenBlocks) {
  const fs::path dir = tmp("trace512");
  fs::create_directories(dir);
  auto scn = nlohmann::json::parse(slurp(test::data("tests/data/small.json")));
  scn["workload"]["block_tokens"] = 16;
  std::ofstream(dir / "s.json") << scn.dump();
  // 1,000 prompt tokens: ceil(1000 / 512) = 2 hash ids (at 16-token blocks it would need 63)
  std::ofstream(dir / "t.jsonl") << "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 3, \"hash_ids\": [1, 2]}\n"
                                 << "{\"timestamp\": 10, \"input_length\": 1000, \"output_length\": 3, \"hash_ids\": [1, 3]}\n";
  const Out o = sh("run " + (dir / "s.json").string() + " --trace " + (dir / "t.jsonl").string() + " --quiet --out " + (dir / "out").string());
  ASSERT_EQ(o.status, 0) << o.text;
  const auto j = nlohmann::json::parse(slurp(dir / "out" / "flash" / "summary.json"));
  EXPECT_EQ(j["requests"]["completed"], 2);
}

// A synthetic workload is generated as the run goes: 2^31 requests under a 2 s horizon start at once
// (rev25d: the parent generated all of them first to count them); the summary counts what arrived.
TEST(Cli, AHugeSyntheticWorkloadIsNotGeneratedUpFront) {
  const fs::path dir = tmp("hugesyn");
  fs::create_directories(dir);
  auto scn = nlohmann::json::parse(slurp(test::data("tests/data/small.json")));
  scn["workload"]["requests"] = 2147483648LL;
  scn["horizon_s"] = 2;
  std::ofstream(dir / "s.json") << scn.dump();
  const Out o = sh("run " + (dir / "s.json").string() + " --no-timeline --requests none --out " + (dir / "out").string());
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("(2147483648 requests)"), std::string::npos) << o.text;
  const auto j = nlohmann::json::parse(slurp(dir / "out" / "flash" / "summary.json"));
  EXPECT_LT(j["requests"]["arrived"].get<long long>(), 1000);  // 6 per second for 2 s
  EXPECT_GT(j["requests"]["arrived"].get<long long>(), 0);
}

// A validation case where a scenario goes is named as such, with its scenario (rev25d: plan said
// only "workload: missing").
TEST(Cli, AValidationCaseGivenAsAScenarioIsNamedAsOne) {
  const Out o = sh("plan " + test::data("scenarios/validation/sglang-dsv3-96xh100.json"));
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("is a validation case of `servesim validate`, not a scenario; its scenario is ../dsv3-sglang-96xh100.json"), std::string::npos)
      << o.text;
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

// Names the file system refuses (longer than its 255-byte limit per component): a hardware name
// in a scenario, an output folder, a report folder. Each is a clean error naming the path, exit 2
// (it was std::filesystem::filesystem_error escaping: exit 134).
TEST(Cli, PathsTheFileSystemRefusesExitWithStatusTwo) {
  const std::string longname(5000, 'h');
  const fs::path dir = tmp("longnames");
  fs::create_directories(dir);
  std::string sc = slurp(test::data("scenarios/default.json"));
  const std::string h200 = "\"hardware\": \"h200\"";
  const auto at = sc.find(h200);
  ASSERT_NE(at, std::string::npos);
  sc.replace(at, h200.size(), "\"hardware\": \"" + longname + "\"");
  std::ofstream(dir / "s.json") << sc;
  Out o = sh("run " + (dir / "s.json").string() + " --out " + (dir / "o").string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("deployments[0].hardware: no hardware file for \"hhhh"), std::string::npos) << o.text.substr(0, 300);  // the field named (rev25d)
  o = sh("run " + test::data("scenarios/default.json") + " --horizon 1 --out " + (dir / longname).string());
  EXPECT_EQ(o.status, 2) << o.text.substr(0, 300);
  EXPECT_NE(o.text.find("File name too long"), std::string::npos) << o.text.substr(0, 300);
  EXPECT_EQ(sh("report " + (dir / longname).string()).status, 2);
}

// A SimGrid configuration item SimGrid refuses (unknown key, unknown value) is a command-line error:
// exit 2 before any deployment runs or any output is written (it was the child's exit 1 after
// forking); an item it accepts runs as before.
TEST(Cli, ABadCfgItemExitsWithStatusTwoBeforeRunning) {
  const fs::path dir = tmp("cfg");
  for (const std::string c : {"bogus/item:3", "network/model:NOPE"}) {
    const Out o = sh("run " + test::data("scenarios/default.json") + " --only k3-h200 --horizon 1 --quiet --out " + (dir / "o").string() + " --cfg " + c);
    EXPECT_EQ(o.status, 2) << c << ": " << o.text.substr(0, 300);
    EXPECT_NE(o.text.find("error: --cfg: SimGrid refused one of " + c), std::string::npos) << o.text.substr(0, 300);
    EXPECT_FALSE(fs::exists(dir / "o")) << c;
  }
  // a precision SimGrid would take and then crash on (-1: segfault) or loop on (surf -5) (rev26)
  for (const std::string c : {"maxmin/precision:-1", "maxmin/precision:0", "surf/precision:-5", "surf/precision:nan", "maxmin/precision:1e-9x"}) {
    const Out o = sh("run " + test::data("scenarios/default.json") + " --only k3-h200 --horizon 1 --quiet --out " + (dir / "o").string() + " --cfg " + c);
    EXPECT_EQ(o.status, 2) << c << ": " << o.text.substr(0, 300);
    EXPECT_NE(o.text.find("must be a positive number"), std::string::npos) << o.text.substr(0, 300);
    EXPECT_FALSE(fs::exists(dir / "o")) << c;
  }
  const Out ok = sh("run " + test::data("scenarios/default.json") + " --only k3-h200 --horizon 1 --quiet --out " + (dir / "o").string() + " --cfg network/model:CM02");
  EXPECT_EQ(ok.status, 0) << ok.text.substr(0, 300);
  EXPECT_TRUE(fs::exists(dir / "o" / "k3-h200" / "summary.json"));
}

// Agent sessions with neither "sessions" nor "duration_s" never stop starting sessions: with
// horizon 0 ("until every request ends") the run never ended (rev26: a hang, killed after 100 s).
// Refused before any run, naming the ways out; in a sweep the point is refused the same way.
TEST(Cli, AnAgentWorkloadWithoutEndNeedsAHorizon) {
  const fs::path dir = tmp("noend");
  const std::string agents = test::data("scenarios/agent-sessions.json");
  Out o = sh("run " + agents + " --only v4pro-h200 --horizon 0 --quiet --out " + (dir / "o").string());
  EXPECT_EQ(o.status, 2) << o.text.substr(0, 300);
  EXPECT_NE(o.text.find("agent-sessions.json: workload: agent sessions with neither \"sessions\" nor \"duration_s\""), std::string::npos) << o.text.substr(0, 300);
  EXPECT_NE(o.text.find("set horizon_s (or --horizon), workload.duration_s or workload.sessions"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "o"));
  fs::create_directories(dir);
  std::ofstream(dir / "g.json") << "{\"scenario\": \"" << agents << "\", \"only\": \"v4pro-h200\", \"grid\": {\"horizon_s\": [5, 0]}}";
  o = sh("sweep " + (dir / "g.json").string() + " --out " + (dir / "s").string());
  EXPECT_EQ(o.status, 2) << o.text.substr(0, 300);
  EXPECT_NE(o.text.find("point p0001 (horizon_s = 0): workload: agent sessions with neither"), std::string::npos) << o.text.substr(0, 400);
  // bounded by its sessions, horizon 0 is fine: 4 sessions of 2 rounds end
  nlohmann::json sc = nlohmann::json::parse(std::ifstream(agents));
  sc["horizon_s"] = 0, sc["workload"]["sessions"] = 4, sc["workload"]["concurrency"] = 2;
  sc["workload"]["rounds"] = {{"dist", "constant"}, {"value", 2}};
  std::ofstream(dir / "bounded.json") << sc.dump();
  o = sh("run " + (dir / "bounded.json").string() + " --only v4pro-h200 --quiet --no-timeline --out " + (dir / "b").string());
  EXPECT_EQ(o.status, 0) << o.text.substr(0, 300);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(dir / "b" / "v4pro-h200" / "summary.json")).at("requests").at("completed").get<int>(), 8);
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
  // the link table with runs of spaces collapsed: counts and rates by hand from the H200 file
  // (NVLink 450 GB/s, NIC 50 GB/s, PCIe 64 GB/s per GPU; the node uplink 8 × 50 GB/s)
  std::string t;
  for (char c : o.text)
    if (!(c == ' ' && !t.empty() && t.back() == ' ')) t += c;
  // K3: 8 nodes of 8 GPUs: 64 of each per-GPU link, 8 uplinks; the graph has 64 GPUs + 8 node
  // switches + 8 hosts + 1 spine = 81 vertices and 2 × (64 + 64 + 8) = 272 directed links
  for (const char* s : {"nvlink 64 450.0", "nic 64 50.0", "node_uplink 8 400.0", "pcie 64 64.0",
                        "bisection bandwidth: 1600 GB/s",  // 4 nodes × 8 NICs × 50 GB/s
                        "81 vertices, 272 links",
                        "nvlink 32 450.0", "node_uplink 4 400.0",  // V4-Pro: 4 nodes
                        "bisection bandwidth: 800 GB/s", "41 vertices, 136 links"})
    EXPECT_NE(t.find(s), std::string::npos) << "topology output lacks \"" << s << "\"\n" << o.text;
}

TEST(Cli, SkipBadRowsCountsTheSkippedRows) {
  const fs::path dir = tmp("skip");
  fs::create_directories(dir);
  std::ofstream(dir / "t.jsonl") << "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 3, \"hash_ids\": [1]}\n"
                                 << "{\"timestamp\": 10, \"input_length\": 100, \"output_length\": -3, \"hash_ids\": [2]}\n"
                                 << "{\"timestamp\": 20, \"input_length\": 100, \"output_length\": 4, \"hash_ids\": [3]}\n";
  const Out o = sh("run " + test::data("tests/data/small.json") + " --trace " + (dir / "t.jsonl").string() + " --skip-bad-rows --quiet --out " +
                   (dir / "out").string());
  ASSERT_EQ(o.status, 0) << o.text;
  // said on the console even under --quiet (review, twenty-third session)
  EXPECT_NE(o.text.find("warning: " + (dir / "t.jsonl").string() + ": 1 malformed rows skipped"), std::string::npos) << o.text;
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
  // ... priced as the step prices them (two-batch overlap: per micro-batch), so the rows, with what
  // the step adds (rest of attention / FFN, exposed all-to-all, LM head + host), add up to the step
  // time, and the extrapolated rows to the header's extrapolated share (rev25: 47% of the step, and
  // 2.0% against 4.0%); a decode step and a prefill chunk of the default (overlap on)
  for (const char* args : {"step --ops --seqs-per-rank 32", "step --ops --phase prefill --seqs-per-rank 2 --tokens 4096"}) {
    o = sh(args);
    ASSERT_EQ(o.status, 0) << o.text;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(o.text, m, std::regex(R"(step time\s+([0-9.]+) ms)"))) << o.text;
    const double step_ms = std::stod(m[1]);
    ASSERT_TRUE(std::regex_search(o.text, m, std::regex(R"(extrapolated\s+([0-9.]+)% of the step)"))) << o.text;
    const double extrapolated_pct = std::stod(m[1]);
    double sum = 0, extra = 0, rest_attn = -1, rest_ffn = -1;
    int n = 0;
    std::stringstream ss(o.text.substr(o.text.find("layer kind")));
    std::string line;
    std::getline(ss, line);  // header
    // ms per step, share, answered (a row of several kernels: "extrapolated (x% of its time)")
    const std::regex r(R"((-?[0-9.]+)\s+(-?[0-9.]+)%\s*(\S*)(?: \(([0-9]+)% of its time\))?)");
    while (std::getline(ss, line) && line.rfind("  step ", 0) != 0)
      if (std::regex_search(line, m, r)) {
        const double ms = std::stod(m[1]);
        EXPECT_GE(ms, 0.0) << line;  // no row is negative: a residual below 0 means the ops were overpriced
        sum += ms, ++n;
        if (m[3] == "extrapolated") extra += std::stod(m[2]) * (m[4].matched ? std::stod(m[4]) / 100 : 1.0);
        if (line.rfind("  rest of attention", 0) == 0) rest_attn = ms;
        if (line.rfind("  rest of FFN", 0) == 0) rest_ffn = ms;
      }
    EXPECT_GT(n, 10) << o.text;
    EXPECT_NEAR(sum, step_ms, 0.0005 * n + 1e-9) << args << "\n" << o.text;
    EXPECT_NEAR(extra, extrapolated_pct, 0.05 * 4 + 0.05) << args << "\n" << o.text;
    // a prefill chunk runs each attention layer whole and its FFN as two micro-batches, and both halves
    // of a K3 layer end in the same attention-TP all-reduce of every token (93 attention layers, 93 FFN
    // layers with a dense or shared expert): so the two residuals are equal only if the FFN rows were
    // priced per micro-batch as the step is (rev25b: the residuals absorbed any mispricing)
    if (std::string(args).find("prefill") != std::string::npos) {
      EXPECT_NEAR(rest_attn, rest_ffn, 0.002) << o.text;
    }
  }
  // a batch no rank can hold is priced with a warning (review: 300 x 32K on K3 printed a throughput
  // silently): the edge is `servesim plan`'s decode rank capacity at 32K (76 sequences at attn TP 8)
  o = sh("plan");
  const auto at = o.text.find("decode rank capacity (sequences of one context length, attn TP 8):");
  ASSERT_NE(at, std::string::npos) << o.text;
  const int fit = std::stoi(o.text.substr(o.text.find("32K: ", at) + 5));
  ASSERT_GT(fit, 1);
  const std::string kv_warning = "of KV per GPU, the decode pool's GPUs hold";
  o = sh("step --context 32767 --seqs-per-rank " + std::to_string(fit));  // 32,767 cached + 1 new = 32K each
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_EQ(o.text.find(kv_warning), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("above the decode pool's max_running 64"), std::string::npos) << o.text;  // 76 > 64
  o = sh("step --context 32767 --seqs-per-rank " + std::to_string(fit + 1));
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("warning: " + std::to_string(fit + 1) + " sequences of 32768 tokens need"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find(kv_warning), std::string::npos) << o.text;
  // a context past the model's limit (K3: 1,048,576 tokens, model-facts.md) is priced with a warning (rev25)
  o = sh("step --context 1048575 --seqs-per-rank 1");
  EXPECT_EQ(o.text.find("run rejects such requests"), std::string::npos) << o.text;  // 1,048,575 + 1: at the limit
  o = sh("step --context 1048576 --seqs-per-rank 1");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("warning: 1048576 cached + 1 new = 1048577 tokens of context, above kimi-k3's 1048576"), std::string::npos) << o.text;
}

// One CommandLine parses many argvs (fuzz/fuzz_cli.cpp builds CLI11's table once per campaign):
// each parse starts from every option's default, as a fresh process would. The first call sets
// every step option away from its default; the second gives none and must print what a fresh
// CommandLine prints (1 sequence, 1 new token, 2,048 cached).
TEST(Cli, OneCommandLineParsesEachArgvAsAFreshProcessWould) {
  const std::string scen = test::data("tests/data/small.json");
  auto call = [](cli::CommandLine& c, std::vector<std::string> words, int want_status = 0) {
    words.insert(words.begin(), "servesim");
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    testing::internal::CaptureStdout();
    const int rc = c(static_cast<int>(words.size()), argv.data());
    std::fflush(stdout);
    const std::string out = testing::internal::GetCapturedStdout();
    EXPECT_EQ(rc, want_status) << out;
    return out;
  };
  cli::CommandLine reused;
  const std::string first =
      call(reused, {"step", scen, "--phase", "prefill", "--tokens", "1000", "--context", "4096", "--seqs-per-rank", "3", "--ops"});
  EXPECT_NE(first.find("3 sequences per DP rank, 1000 new tokens each, 4096 cached"), std::string::npos) << first;
  const std::string second = call(reused, {"step", scen});
  cli::CommandLine fresh;
  EXPECT_EQ(second, call(fresh, {"step", scen}));
  EXPECT_NE(second.find("1 new token each, 2048 cached"), std::string::npos) << second;
  EXPECT_EQ(second.find("layer kind"), std::string::npos) << "--ops stayed set from the first argv";
  // a usage error in between leaves nothing behind either
  call(reused, {"step", scen, "--phase", "sideways"}, 2);
  EXPECT_EQ(call(reused, {"step", scen}), second);
  // past the table's rebuild (every 4,096 parses: CLI11 2.1 keeps a record of every parsed option)
  // it still parses as a fresh one, options set just before the rebuild included
  testing::internal::CaptureStderr();
  for (int i = 0; i < 4100; ++i) {
    std::vector<std::string> w{"servesim", "step", "--phase", "sideways"};
    std::vector<char*> argv;
    for (auto& x : w) argv.push_back(x.data());
    argv.push_back(nullptr);
    EXPECT_EQ(reused(static_cast<int>(w.size()), argv.data()), 2);
  }
  (void)testing::internal::GetCapturedStderr();
  EXPECT_EQ(call(reused, {"step", scen}), second);
}

// ----------------------------------------------------------------------------- input rules (issue 10, items 6, 8-11)

namespace {

// a scenario file `dir`/s.json: the small test deployment with this workload and deployment name
fs::path scenario_in(const fs::path& dir, const std::string& workload, const std::string& deployment = "flash", const std::string& name = "t") {
  fs::create_directories(dir);
  std::ofstream(dir / "s.json") << R"({"name": ")" << name << R"(", "workload": )" << workload << R"(, "deployments": [{"name": ")" << deployment
                                << R"(", "model": "deepseek-v4-flash", "hardware": "h200", "prefill": {"ep": 8, "attn_tp": 1}, "decode": {"ep": 8, "attn_tp": 1}}]})";
  return dir / "s.json";
}

// summary.json without its "workload" line (it names the trace file)
// the summary less the fields that name the trace file (workload, trace_file: path, size, hash)
std::string summary_without_workload(const fs::path& p) {
  nlohmann::json j = nlohmann::json::parse(slurp(p));
  j.erase("workload");
  j.erase("trace_file");
  return j.dump(2);
}

}  // namespace

// An empty path or name is an error, not the default (rev26: run --out "" wrote out/default/).
TEST(Cli, EmptyPathsAndNamesAreRefused) {
  const fs::path dir = tmp("empty");
  for (const std::string& args : std::vector<std::string>{"run --out \"\"", "run --trace \"\"", "run --only \"\"", "report " + dir.string() + " --out \"\"",
                                 "capacity " + test::data("scenarios/default.json") + " --sessions 10 --out \"\"",
                                 "capacity " + test::data("scenarios/default.json") + " --sessions 10 --only \"\"", "step --deployment \"\"",
                                 "step \"\"", "run \"\"", "plan \"\"", "validate --dir \"\"", "report " + dir.string() + " --json \"\""}) {
    const Out o = sh(args);
    EXPECT_EQ(o.status, 2) << args << ": " << o.text.substr(0, 300);
    EXPECT_NE(o.text.find("must not be empty"), std::string::npos) << args << ": " << o.text.substr(0, 300);
  }
}

// Item 6: epoch-millisecond time stamps (1726000000000, 1726000000100) give byte-identical
// requests.csv and the same summary as 0 and 100: time 0 is the first arrival, and the log says so.
TEST(Cli, EpochMillisecondTimestampsGiveTheResultsOfZeroBasedOnes) {
  const fs::path dir = tmp("epoch");
  fs::create_directories(dir);
  auto row = [](const std::string& ts, int id) {
    return "{\"timestamp\": " + ts + ", \"input_length\": 512, \"output_length\": 4, \"hash_ids\": [" + std::to_string(id) + "]}\n";
  };
  std::ofstream(dir / "epoch.jsonl") << row("1726000000000", 1) << row("1726000000100", 2);
  std::ofstream(dir / "zero.jsonl") << row("0", 1) << row("100", 2);
  const std::string scen = test::data("tests/data/small.json");
  const Out e = sh("run " + scen + " --trace " + (dir / "epoch.jsonl").string() + " --out " + (dir / "e").string());
  ASSERT_EQ(e.status, 0) << e.text;
  EXPECT_NE(e.text.find("arrival times rebased: time 0 is the first row's timestamp, 1726000000000 ms"), std::string::npos) << e.text;
  ASSERT_EQ(sh("run " + scen + " --trace " + (dir / "zero.jsonl").string() + " --out " + (dir / "z").string()).status, 0);
  EXPECT_EQ(slurp(dir / "e/flash/requests.csv"), slurp(dir / "z/flash/requests.csv"));
  EXPECT_EQ(summary_without_workload(dir / "e/flash/summary.json"), summary_without_workload(dir / "z/flash/summary.json"));
  // the second request arrives 100 ms after the first
  EXPECT_NE(slurp(dir / "e/flash/requests.csv").find("\n1,completed,,0.100000,"), std::string::npos) << slurp(dir / "e/flash/requests.csv");
}

// Item 8: every numeric option is range-checked: status 2 and a message naming the option.
TEST(Cli, HostileNumericOptionsExitWithStatus2AndNameTheOption) {
  const std::string scen = test::data("tests/data/small.json"), out = " --out " + tmp("hostile").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"run " + scen + " --horizon inf", "--horizon: must be a finite number in [0, 1e+09], got \"inf\""},
      {"run " + scen + " --horizon nan", "--horizon: must be a finite number"},
      {"run " + scen + " --horizon -1", "--horizon: must be a finite number"},
      {"run " + scen + " --horizon 1e400", "--horizon: must be a finite number"},
      {"run " + scen + " --horizon 2e9", "--horizon: must be a finite number"},
      {"run " + scen + " --seed -5", "--seed: must be an integer in [0, 9223372036854775807], got \"-5\""},
      {"run " + scen + " --seed 1.5", "--seed: must be an integer"},
      {"run " + scen + " --seed 99999999999999999999", "--seed: must be an integer"},
      {"run " + scen + " --time-scale 0", "--time-scale: must be a finite number in [1e-09, 1e+09], got \"0\""},
      {"run " + scen + " --time-scale inf", "--time-scale: must be a finite number"},
      {"run " + scen + " --jobs 0", "--jobs: must be an integer in [1, 4096], got \"0\""},
      {"run " + scen + " --jobs -2", "--jobs: must be an integer"},
      {"step --seqs-per-rank 0", "--seqs-per-rank: must be an integer in [1, 1048576], got \"0\""},
      {"step --seqs-per-rank 1048577", "--seqs-per-rank: must be an integer in [1, 1048576]"},
      {"step --phase prefill --tokens 1099511627777", "--tokens: must be an integer in [1, 1099511627776], got \"1099511627777\""},
      {"step --context -1", "--context: must be an integer in [0, 1099511627776], got \"-1\""},
      {"step --context nan", "--context: must be an integer"},
      // 2^40 tokens × 2 sequences = 2^41 tokens in one rank's batch
      {"step --phase prefill --tokens 1099511627776 --seqs-per-rank 2", "a rank's batch must be at most 2^40 tokens"},
      {"costmodel report --worst -1", "--worst: must be an integer"},
      // refused before any fitting, naming the option (review: exit 1, or minutes of fitting for an unknown --family)
      {"costmodel report --data /nonexistent-servesim", "--data /nonexistent-servesim: no such folder"},
      {"costmodel report --hardware nosuch", "--hardware nosuch: no hardware file for \"nosuch\""},
      {"costmodel report --hardware nosuch", "available: b300, h100, h200, h800)"},  // once each
      {"costmodel report --params /nonexistent-servesim.json", "--params /nonexistent-servesim.json: no such parameter file"},
      {"costmodel report --family nosuch", "--family nosuch: no such kernel family (families: gemm_bf16,"},
      {"costmodel fit --family nosuch", "--family nosuch: no such kernel family"},
  };
  for (const auto& [args, want] : cases) {
    const Out o = sh(args + (args.rfind("run", 0) == 0 ? out : ""));
    EXPECT_EQ(o.status, 2) << args << "\n" << o.text;
    EXPECT_NE(o.text.find(want), std::string::npos) << args << "\n" << o.text;
  }
  // the issue's trace row: 2^63 − 1 input tokens, 1 output token
  const fs::path dir = tmp("hostile_trace");
  fs::create_directories(dir);
  std::ofstream(dir / "t.jsonl") << "{\"timestamp\": 0, \"input_length\": 9223372036854775807, \"output_length\": 1, \"hash_ids\": []}\n";
  const Out o = sh("run " + scen + " --trace " + (dir / "t.jsonl").string() + out);
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.text.find("t.jsonl:1: \"input_length\" must be ≤ 1099511627776, got 9223372036854775807"), std::string::npos) << o.text;
}

// Item 9: a deployment named ../x, or a scenario named ../../y used as out/<name>, is refused before
// anything is written.
TEST(Cli, NamesThatWouldLeaveTheOutputFolderAreRefused) {
  const fs::path dir = tmp("names");
  const std::string synth = R"({"kind": "synthetic", "requests": 2, "rate_per_s": 1, "input_tokens": {"dist": "constant", "value": 100},
      "output_tokens": {"dist": "constant", "value": 2}})";
  Out o = sh("run " + scenario_in(dir, synth, "../x").string() + " --out " + (dir / "out").string());
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.text.find("s.json: deployments[0].name: \"../x\" cannot be a folder name"), std::string::npos) << o.text;
  EXPECT_FALSE(fs::exists(dir / "x"));
  EXPECT_FALSE(fs::exists(dir / "out"));
  // the scenario's name is a folder only without --out
  const fs::path s = scenario_in(dir, synth, "flash", "../../y");
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);  // out/ would be made here
  o = sh("run " + s.string());
  fs::current_path(cwd);
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.text.find("s.json: name: \"../../y\" cannot be the output folder out/<name>"), std::string::npos) << o.text;
  EXPECT_FALSE(fs::exists(dir / "out"));
  EXPECT_EQ(sh("run " + s.string() + " --out " + (dir / "given").string()).status, 0);
  EXPECT_TRUE(fs::exists(dir / "given/flash/summary.json"));
}

// Item 10: an empty trace (no rows, blank lines only, a CSV header only) is refused with status 2,
// naming the file, for --trace and for scenario traces.
TEST(Cli, AnEmptyTraceIsRefused) {
  const fs::path dir = tmp("empty");
  fs::create_directories(dir);
  std::ofstream(dir / "none.jsonl") << "";
  std::ofstream(dir / "blank.jsonl") << "\n   \n\n";
  for (const char* f : {"none.jsonl", "blank.jsonl"}) {
    const Out o = sh("run " + test::data("tests/data/small.json") + " --trace " + (dir / f).string() + " --out " + (dir / "out").string());
    EXPECT_EQ(o.status, 2) << o.text;
    EXPECT_NE(o.text.find((dir / f).string() + ": the trace is empty (no rows, or only blank lines)"), std::string::npos) << o.text;
  }
  std::ofstream(dir / "t.csv") << "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  const Out o = sh("run " + scenario_in(dir / "az", R"({"kind": "azure", "trace": "../t.csv"})").string() + " --out " + (dir / "out").string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("t.csv: the trace is empty"), std::string::npos) << o.text;
  EXPECT_FALSE(fs::exists(dir / "out"));
}

// Item 11: SERVESIM_DATA_DIR at a copy of scenarios/ keeps the fitted cost model; a parameter file
// that exists nowhere is named with every place looked (exit 2).
TEST(Cli, ACopiedDataFolderKeepsTheFittedCostModel) {
  const fs::path dir = tmp("datadir");
  fs::create_directories(dir);
  fs::copy(test::data("scenarios"), dir / "data", fs::copy_options::recursive);
  setenv("SERVESIM_DATA_DIR", (dir / "data").c_str(), 1);
  Out o = sh("step");
  EXPECT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("cost model fitted"), std::string::npos) << o.text;
  std::string hw = slurp(dir / "data/hardware/h200.json");
  hw.replace(hw.find("h200/fitted_models.json"), 4, "h999");
  std::ofstream(dir / "data/hardware/h200.json") << hw;
  o = sh("step");
  unsetenv("SERVESIM_DATA_DIR");
  EXPECT_EQ(o.status, 2) << o.text;
  const std::string rel = (dir / "costmodels/data/h999/fitted_models.json").string();
  const std::string src = (fs::path(test::source_dir()) / "costmodels/data/h999/fitted_models.json").lexically_normal().string();
  EXPECT_NE(o.text.find("looked at " + rel + " (relative to the hardware file), " + src), std::string::npos) << o.text;
}

// Item 8, the engine's side: input + output tokens cannot overflow the context check. A request of
// 2^63 − 1 input tokens and 1 output token (which no reader lets through) is rejected for its
// context, min(2^63 − 1, (2^63 − 1) + 1) = 9223372036854775807 tokens against the tiny model's 4096,
// not for a wrapped-around negative sum; 4095 + 1 = 4096 tokens is allowed.
TEST(Cli, TheEnginesContextCheckCannotOverflow) {
  class Records final : public EventSink {
   public:
    void on_request(const RequestRecord& r) override { by_id[r.id] = r; }
    std::map<std::uint64_t, RequestRecord> by_id;
  } rec;
  class TwoRequests final : public RequestSource {
   public:
    std::optional<Request> next() override {
      if (n_ == 2) return std::nullopt;
      Request r;
      r.id = static_cast<std::uint64_t>(n_);
      r.arrival_s = static_cast<double>(n_);
      r.input_tokens = n_ == 0 ? std::numeric_limits<long long>::max() : 4095;
      r.output_tokens = 1;
      ++n_;
      return r;
    }
    std::string describe() const override { return "two"; }

   private:
    int n_ = 0;
  };
  Simulation sim(test::tiny(1000), std::make_unique<TwoRequests>(), std::make_shared<test::ZeroCost>(), rec, {});
  sim.run();
  ASSERT_EQ(rec.by_id.size(), 2u);
  EXPECT_EQ(rec.by_id.at(0).status, RequestStatus::rejected);
  EXPECT_EQ(rec.by_id.at(0).reason, "context exceeds the model's 4096 tokens: 9223372036854775807 tokens");
  EXPECT_EQ(rec.by_id.at(1).status, RequestStatus::completed) << rec.by_id.at(1).reason;
}

// The step factors capacity runs its answer at (capacity_serving.hpp): 1 + the least and the largest
// error of each regime, by hand from a regime list like validate's; a regime without rows keeps 1;
// an error of -100% or less is refused.
TEST(Cli, ServingEndsAreOnePlusEachRegimesErrors) {
  using servesim::cli::cap::serving_ends;
  const nlohmann::json regimes = nlohmann::json::parse(R"([
    {"regime": "prefill", "rows": 6, "min_error": 0.021, "max_error": 0.201, "cases": []},
    {"regime": "decode <= 32 seq/rank", "rows": 4, "min_error": 0.129, "max_error": 0.332, "cases": []}])");
  const auto e = serving_ends(regimes);
  EXPECT_DOUBLE_EQ(e.least.prefill, 1.021);
  EXPECT_DOUBLE_EQ(e.largest.prefill, 1.201);
  EXPECT_DOUBLE_EQ(e.least.decode_small, 1.129);
  EXPECT_DOUBLE_EQ(e.largest.decode_small, 1.332);
  EXPECT_EQ(e.least.decode_large, 1.0);  // no "decode > 32 seq/rank" rows: the engine's own price
  EXPECT_EQ(e.largest.decode_large, 1.0);
  EXPECT_THROW(serving_ends(nlohmann::json::parse(R"([{"regime": "prefill", "min_error": -1.0, "max_error": 0.1}])")), std::invalid_argument);
}
