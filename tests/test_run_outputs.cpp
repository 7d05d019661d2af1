// `servesim run` outputs at scale (issue 14): --requests csv|csv.gz|none, --timeline-window,
// --quiet and the progress line (a terminal only).
#include "helpers.hpp"

#include "cli_run.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <numeric>
#include <vector>

namespace fs = std::filesystem;

namespace {

std::string gunzip(const fs::path& p) {
  gzFile f = gzopen(p.string().c_str(), "rb");
  std::string out;
  if (!f) return out;
  char buf[65536];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return out;
}

struct Dir {
  fs::path p = fs::temp_directory_path() / ("servesim-outputs-" + std::to_string(::getpid()));
  Dir() { fs::remove_all(p); }
  ~Dir() { fs::remove_all(p); }
};

std::string run(const std::string& extra, const fs::path& out) {
  const auto o = ::test::sh("run " + servesim::test::data("scenarios/default.json") + " --only k3-h200 --out " + out.string() + " " + extra);
  EXPECT_EQ(o.status, 0) << o.text;
  return o.text;
}

}  // namespace

// csv.gz holds the csv's bytes, the same file every run; none writes no requests file.
TEST(RunOutputs, RequestsCsvGzAndNone) {
  Dir d;
  run("--no-timeline", d.p / "csv");
  run("--no-timeline --requests csv.gz", d.p / "gz1");
  run("--no-timeline --requests csv.gz", d.p / "gz2");
  run("--no-timeline --requests none", d.p / "none");
  const std::string csv = ::test::slurp(d.p / "csv" / "k3-h200" / "requests.csv");
  ASSERT_GT(csv.size(), 1000u);
  EXPECT_EQ(gunzip(d.p / "gz1" / "k3-h200" / "requests.csv.gz"), csv);
  EXPECT_FALSE(fs::exists(d.p / "gz1" / "k3-h200" / "requests.csv"));
  EXPECT_LT(fs::file_size(d.p / "gz1" / "k3-h200" / "requests.csv.gz"), csv.size() / 2);
  EXPECT_EQ(::test::slurp(d.p / "gz1" / "k3-h200" / "requests.csv.gz"), ::test::slurp(d.p / "gz2" / "k3-h200" / "requests.csv.gz"));
  EXPECT_FALSE(fs::exists(d.p / "none" / "k3-h200" / "requests.csv"));
  EXPECT_FALSE(fs::exists(d.p / "none" / "k3-h200" / "requests.csv.gz"));
  // the summary does not depend on the requests file
  EXPECT_EQ(::test::slurp(d.p / "none" / "k3-h200" / "summary.json"), ::test::slurp(d.p / "csv" / "k3-h200" / "summary.json"));
  EXPECT_EQ(::test::sh("run --requests zip --out " + (d.p / "x").string()).status, 2);
}

// Only step slices overlapping [20 s, 40 s] are written (with their all-to-all slices), and the
// window is stated.
TEST(RunOutputs, TimelineWindow) {
  Dir d;
  run("--requests none", d.p / "all");
  run("--requests none --timeline-window 20:40", d.p / "win");
  auto slices = [](const nlohmann::json& t, bool check) {
    long long n = 0;
    for (const auto& e : t["traceEvents"])
      if (e["ph"] == "X" && e["pid"].get<int>() <= 2) {  // step slices (pid 3: their all-to-all parts)
        ++n;
        const double a = e["ts"].get<double>() / 1e6, b = a + e["dur"].get<double>() / 1e6;
        if (check) {
          EXPECT_TRUE(b >= 20.0 - 1e-9 && a <= 40.0 + 1e-9) << a << " " << b;
        }
      }
    return n;
  };
  const auto all = nlohmann::json::parse(::test::slurp(d.p / "all" / "k3-h200" / "timeline.json"));
  const auto win = nlohmann::json::parse(::test::slurp(d.p / "win" / "k3-h200" / "timeline.json"));
  const long long n_all = slices(all, false), n_win = slices(win, true);
  EXPECT_GT(n_win, 0);
  EXPECT_LT(n_win, n_all);
  // independently: the full timeline's slices that overlap the window
  long long expect = 0;
  for (const auto& e : all["traceEvents"])
    if (e["ph"] == "X" && e["pid"].get<int>() <= 2) {
      const double a = e["ts"].get<double>() / 1e6, b = a + e["dur"].get<double>() / 1e6;
      expect += b >= 20.0 && a <= 40.0;
    }
  EXPECT_EQ(n_win, expect);
  EXPECT_DOUBLE_EQ(win["metadata"]["window_start_s"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(win["metadata"]["window_end_s"].get<double>(), 40.0);
  EXPECT_FALSE(all["metadata"].contains("window_start_s"));
  for (const char* bad : {"40:20", "abc", "5", "-1:3"})
    EXPECT_EQ(::test::sh(std::string("run --timeline-window ") + bad + " --out " + (d.p / "x").string()).status, 2) << bad;
}

// Not on a terminal: no progress line; --quiet: no info lines either.
TEST(RunOutputs, QuietAndNoProgressOffATerminal) {
  Dir d;
  const std::string loud = run("--no-timeline --requests none", d.p / "a");
  const std::string quiet = run("--no-timeline --requests none --quiet", d.p / "b");
  EXPECT_EQ(loud.find('\r'), std::string::npos);
  EXPECT_NE(loud.find("[info]"), std::string::npos) << loud;
  EXPECT_EQ(quiet.find("[info]"), std::string::npos) << quiet;
  EXPECT_NE(quiet.find("ttft p50"), std::string::npos) << quiet;  // the table still prints
}

namespace {

// requests.csv as rows of fields (header first)
std::vector<std::vector<std::string>> csv_rows(const fs::path& p) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(::test::slurp(p));
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::istringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    rows.push_back(f);
  }
  return rows;
}

// digits after the decimal point of a printed number (0 for integers)
int decimals(const std::string& s) {
  const auto dot = s.find('.');
  return dot == std::string::npos ? 0 : static_cast<int>(s.size() - dot - 1);
}

}  // namespace

// Several decode steps per SimGrid event (the default) against one event per step: the same
// requests, statuses and token counts, and every time equal to within one unit of its last printed
// digit (the two differ only by the clock's rounding). The agent sessions run into a horizon with
// sequences mid-decode (the settled token counts) and have sequences becoming ready while a batch is
// running (a plan cut at the step in progress: joined one plan later, their first-token times would
// move by whole steps, milliseconds).
// The same with MTP (V4-Pro, one draft token at 85% acceptance: fractional tokens per step), and
// on a saturated decode pool (the default scenario at 20 requests/s with one running sequence per
// rank: sequences become ready while every rank is full, so a cut plan joins nobody and the batch
// does not move: only the rolled-back pricing state gives step j its price; 164 V4-Pro rows differ
// without that rollback).
TEST(RunOutputs, DecodeStepsPerEventKeepTheResults) {
  Dir d;
  fs::create_directories(d.p);
  auto scn = nlohmann::json::parse(::test::slurp(servesim::test::data("scenarios/agent-sessions.json")));
  std::string mtp_dep;
  for (auto& dep : scn["deployments"])
    if (dep["model"] == "deepseek-v4-pro") dep["decode"]["mtp"] = {{"draft_tokens", 1}, {"acceptance", 0.85}}, dep["name"] = mtp_dep = "v4pro-mtp";
  ASSERT_FALSE(mtp_dep.empty());
  scn["name"] = "agent-sessions-mtp";
  std::ofstream(d.p / "mtp.json") << scn.dump();
  auto sat = nlohmann::json::parse(::test::slurp(servesim::test::data("scenarios/default.json")));
  sat["name"] = "saturated-decode";
  sat["workload"]["requests"] = 1500, sat["workload"]["rate_per_s"] = 20;
  for (auto& dep : sat["deployments"]) dep["decode"]["max_running"] = 1;
  std::ofstream(d.p / "sat.json") << sat.dump();
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"plain", servesim::test::data("scenarios/agent-sessions.json") + " --horizon 30"},
      {"mtp", (d.p / "mtp.json").string() + " --horizon 30"},
      {"saturated", (d.p / "sat.json").string() + " --horizon 60"}};
  for (const auto& [run, args] : runs)
    for (const char* n : {"1", "64"}) {
      const auto o = ::test::sh("run " + args + " --no-timeline --quiet --jobs 1 --decode-steps-per-event " + n + " --out " + (d.p / run / n).string());
      ASSERT_EQ(o.status, 0) << o.text;
    }
  int deployments = 0;
  for (const auto& [run, args] : runs) {
    for (const auto& dep : fs::directory_iterator(d.p / run / "1")) {
      if (!dep.is_directory()) continue;
      ++deployments;
      const std::string name = dep.path().filename().string();
      const auto a = csv_rows(d.p / run / "1" / name / "requests.csv"), b = csv_rows(d.p / run / "64" / name / "requests.csv");
      ASSERT_EQ(a.size(), b.size()) << name;
      ASSERT_GT(a.size(), 100u) << name;
      long long decoding_at_horizon = 0, multi_token = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i].size(), b[i].size()) << name << " row " << i;
        for (size_t k = 0; k < a[i].size(); ++k) {
          if (a[i][k] == b[i][k]) continue;
          char* e1 = nullptr;
          char* e2 = nullptr;
          const double x = std::strtod(a[i][k].c_str(), &e1), y = std::strtod(b[i][k].c_str(), &e2);
          ASSERT_TRUE(*e1 == 0 && *e2 == 0 && !a[i][k].empty()) << name << " row " << i << " " << a[0][k] << ": " << a[i][k] << " vs " << b[i][k];
          EXPECT_LE(std::abs(x - y), 1.01 * std::pow(10.0, -std::max(decimals(a[i][k]), decimals(b[i][k]))))
              << name << " row " << i << " " << a[0][k] << ": " << a[i][k] << " vs " << b[i][k];
        }
        if (i > 0) decoding_at_horizon += a[i][1] == "in_flight" && a[i][2] == "decode", multi_token += a[i][21] != "0" && a[i][21] != "1";
      }
      EXPECT_GT(decoding_at_horizon, 0) << name;
      EXPECT_GT(multi_token, 0) << name;
      const auto sa = nlohmann::json::parse(::test::slurp(d.p / run / "1" / name / "summary.json"));
      const auto sb = nlohmann::json::parse(::test::slurp(d.p / run / "64" / name / "summary.json"));
      EXPECT_EQ(sa["engine"]["decode_steps"], sb["engine"]["decode_steps"]) << name;
      EXPECT_EQ(sa["requests"], sb["requests"]) << name;
      // one event per step at 1; at 64 the plans took fewer (the setting reached the engine)
      EXPECT_EQ(sa["engine"]["decode_steps_per_event"], 1) << name;
      EXPECT_EQ(sb["engine"]["decode_steps_per_event"], 64) << name;
      const long long steps = sa["engine"]["decode_steps"].get<long long>();
      EXPECT_EQ(sa["engine"]["decode_step_events"].get<long long>(), steps) << name;
      EXPECT_LT(sb["engine"]["decode_step_events"].get<long long>(), steps / 2) << name;
    }
  }
  EXPECT_EQ(deployments, 6);  // k3 and v4pro: plain, with MTP (v4pro-mtp), saturated
}

// The pool-wide prefix index (sim/kvcache/prefix_index.hpp) against a lookup in every rank's cache:
// byte-identical outputs. 64 prefill ranks per deployment (16 instances of EP32 with attention TP 8)
// share a 4,096-token system prompt (more holders than PrefixIndex::kFewHolders, so most ranks are
// answered from the memo of their walk along it); Kimi K3 resumes only at state checkpoints,
// DeepSeek-V3 (pure MLA) at any cached block.
TEST(RunOutputs, PrefixIndexKeepsTheResults) {
  Dir d;
  fs::create_directories(d.p);
  auto pool = [](int n) { return nlohmann::json{{"instances", n}, {"ep", 32}, {"attn_tp", 8}, {"two_batch_overlap", true}}; };
  nlohmann::json scn = {{"name", "prefix-index"}, {"seed", 5}, {"horizon_s", 40},
                        {"workload", {{"kind", "agent"}, {"loop", "closed"}, {"concurrency", 3000}, {"ramp_s", 10}, {"shared_prefix_tokens", 4096}, {"block_tokens", 512}}},
                        {"timeline", {{"enabled", false}}}, {"deployments", nlohmann::json::array()}};
  for (const char* model : {"kimi-k3", "deepseek-v3"}) {
    auto prefill = pool(16);
    prefill["max_batch_tokens"] = 16384, prefill["chunk_tokens"] = 8192;
    scn["deployments"].push_back({{"name", model}, {"model", model}, {"hardware", "h200"}, {"prefill", prefill}, {"decode", pool(8)}});
  }
  std::ofstream(d.p / "s.json") << scn.dump();
  for (const char* n : {"0", "1000000000"}) {
    const auto o = ::test::sh("run " + (d.p / "s.json").string() + " --no-timeline --quiet --jobs 1 --prefix-index-min-ranks " + n + " --out " + (d.p / n).string());
    ASSERT_EQ(o.status, 0) << o.text;
  }
  for (const char* model : {"kimi-k3", "deepseek-v3"}) {
    const fs::path a = d.p / "0" / model, b = d.p / "1000000000" / model;
    const std::string ca = ::test::slurp(a / "requests.csv"), cb = ::test::slurp(b / "requests.csv");
    EXPECT_GT(std::count(ca.begin(), ca.end(), '\n'), 2000) << model;
    EXPECT_TRUE(ca == cb) << model << ": requests.csv differ";
    const auto sa = nlohmann::json::parse(::test::slurp(a / "summary.json")), sb = nlohmann::json::parse(::test::slurp(b / "summary.json"));
    EXPECT_EQ(sa["requests"], sb["requests"]) << model;
    EXPECT_EQ(sa["prefix_cache"], sb["prefix_cache"]) << model;
    EXPECT_GT(sa["prefix_cache"]["token_hit_rate"].get<double>(), 0.05) << model;  // the lookups decided placements
  }
}

// all_to_all_on_fabric held as bandwidth on the NICs and uplinks (the default) against the check
// form, one rate-capped flow per attention-TP group, direction and step (`--all-to-all-flows`): the
// same P→D KV transfer times within 2% (issue 15's bound for aggregating the flows), both clearly
// slower than with the all-to-all off the fabric. Kimi K3, 2 + 2 instances of EP32 at attention TP 8
// (16 nodes), an open-loop stream of 2K-16K-token prompts (the runs keep the same schedule, so the
// transfers pair up one to one).
TEST(RunOutputs, AllToAllReservationsMatchTheFlows) {
  Dir d;
  fs::create_directories(d.p);
  for (const bool on : {true, false}) {
    auto pool = [&](int n) { return nlohmann::json{{"instances", n}, {"ep", 32}, {"attn_tp", 8}, {"two_batch_overlap", true}, {"all_to_all_on_fabric", on}}; };
    auto prefill = pool(2), decode = pool(2);
    prefill["max_batch_tokens"] = 16384, prefill["chunk_tokens"] = 8192, decode["max_running"] = 128;
    nlohmann::json scn = {{"name", "a2a"}, {"seed", 3}, {"horizon_s", 60},
                          {"workload", {{"kind", "synthetic"}, {"requests", 400}, {"rate_per_s", 8.0},
                                        {"input_tokens", {{"dist", "uniform"}, {"min", 2000}, {"max", 16000}}}, {"output_tokens", {{"dist", "constant"}, {"value", 200}}}}},
                          {"timeline", {{"enabled", false}}},
                          {"deployments", {{{"name", "k3"}, {"model", "kimi-k3"}, {"hardware", "h200"}, {"prefill", prefill}, {"decode", decode}, {"prefix_cache", {{"enabled", false}}}}}}};
    std::ofstream(d.p / (on ? "on.json" : "off.json")) << scn.dump();
  }
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"held", "on.json"}, {"held1", "on.json --decode-steps-per-event 1"}, {"flows", "on.json --all-to-all-flows"}, {"off", "off.json"}};
  std::map<std::string, std::vector<double>> t;  // transfer seconds per request id
  for (const auto& [name, args] : runs) {
    const auto o = ::test::sh("run " + (d.p / args).string() + " --no-timeline --quiet --jobs 1 --out " + (d.p / name).string());
    ASSERT_EQ(o.status, 0) << o.text;
    const auto rows = csv_rows(d.p / name / "k3" / "requests.csv");
    ASSERT_GT(rows.size(), 300u);
    for (size_t i = 1; i < rows.size(); ++i)
      if (rows[i].size() > 10 && !rows[i][9].empty() && !rows[i][10].empty()) t[name].push_back(std::stod(rows[i][10]) - std::stod(rows[i][9]));  // transfer_end_s - transfer_start_s
  }
  auto mean = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); };
  ASSERT_EQ(t["held"].size(), t["flows"].size());
  ASSERT_GT(t["held"].size(), 300u);
  EXPECT_NEAR(mean(t["held"]) / mean(t["flows"]), 1.0, 0.02);
  EXPECT_GT(mean(t["held"]), 1.05 * mean(t["off"]));  // the EP traffic slows the KV copies
  EXPECT_GT(mean(t["flows"]), 1.05 * mean(t["off"]));
  // a decode plan holds its steps' mean rate: single transfers move against one event per step
  // (up to ~14%), their mean does not
  ASSERT_EQ(t["held"].size(), t["held1"].size());
  EXPECT_NEAR(mean(t["held"]) / mean(t["held1"]), 1.0, 0.005);
  // held bandwidth keeps several decode steps per event; the flows take one event per step
  const auto held = nlohmann::json::parse(::test::slurp(d.p / "held" / "k3" / "summary.json"))["engine"];
  const auto flows = nlohmann::json::parse(::test::slurp(d.p / "flows" / "k3" / "summary.json"))["engine"];
  EXPECT_LT(held["decode_step_events"].get<long long>(), held["decode_steps"].get<long long>() / 2);
  EXPECT_EQ(flows["decode_step_events"].get<long long>(), flows["decode_steps"].get<long long>());
}

// Per-node throughput divides by the nodes the pools take, not by a larger declared cluster.nodes
// (review, twenty-third session: 100 declared nodes for 8 used made every _per_node figure 12.5x
// too small). k3-h200 of the default scenario: 1 x EP32 prefill + 1 x EP32 decode = 4 + 4 nodes,
// 64 GPUs; per node = per GPU x 64 / 8 whatever cluster.nodes says.
TEST(RunOutputs, PerNodeFiguresCountTheNodesThePoolsTake) {
  Dir d;
  auto j = nlohmann::json::parse(::test::slurp(servesim::test::data("scenarios/default.json")));
  for (auto& dep : j["deployments"]) dep["cluster"] = {{"nodes", 100}};
  fs::create_directories(d.p);
  std::ofstream(d.p / "s.json") << j.dump();
  const auto o = ::test::sh("run " + (d.p / "s.json").string() + " --only k3-h200 --horizon 60 --no-timeline --quiet --out " + (d.p / "o").string());
  ASSERT_EQ(o.status, 0) << o.text;
  const auto s = nlohmann::json::parse(::test::slurp(d.p / "o" / "k3-h200" / "summary.json"));
  EXPECT_EQ(s["cluster"]["nodes"], 100);
  EXPECT_EQ(s["cluster"]["nodes_used"], 8);
  EXPECT_EQ(s["cluster"]["gpus_used"], 64);
  const auto& t = s["throughput"];
  const double dur = t["duration_s"].get<double>();
  ASSERT_GT(t["output_tokens"].get<double>(), 0) << t.dump();
  EXPECT_NEAR(t["input_tokens_per_s_per_node"].get<double>(), t["input_tokens"].get<double>() / dur / 8, 1e-3);
  EXPECT_NEAR(t["output_tokens_per_s_per_node"].get<double>(), t["output_tokens"].get<double>() / dur / 8, 1e-3);
  EXPECT_NEAR(t["output_tokens_per_s_per_node"].get<double>(), 8 * t["output_tokens_per_s_per_gpu"].get<double>(), 0.01);
}

// prefix_cache.trace_block_reuse, the closed form over the prompts' block ids, is null where it is
// not computed (a session workload: reuse within a session is the simulated caches' to find), a
// share in [0, 1] where the prompts carry ids (the default's synthetic prompts share a prefix)
TEST(RunOutputs, TraceBlockReuseIsNullWhereNotComputed) {
  Dir d;
  const auto a = ::test::sh("run " + servesim::test::data("scenarios/agent-sessions.json") + " --horizon 20 --no-timeline --quiet --out " +
                            (d.p / "a").string());
  ASSERT_EQ(a.status, 0) << a.text;
  for (const auto& e : fs::directory_iterator(d.p / "a")) {
    if (!e.is_directory()) continue;
    const auto s = nlohmann::json::parse(::test::slurp(e.path() / "summary.json"));
    EXPECT_TRUE(s["prefix_cache"]["trace_block_reuse"].is_null()) << e.path();
  }
  const auto b = ::test::sh("run --only k3-h200 --horizon 60 --no-timeline --quiet --out " + (d.p / "b").string());
  ASSERT_EQ(b.status, 0) << b.text;
  const auto s = nlohmann::json::parse(::test::slurp(d.p / "b" / "k3-h200" / "summary.json"));
  ASSERT_TRUE(s["prefix_cache"]["trace_block_reuse"].is_number()) << s["prefix_cache"].dump();
  EXPECT_GT(s["prefix_cache"]["trace_block_reuse"].get<double>(), 0.0);
  EXPECT_LE(s["prefix_cache"]["trace_block_reuse"].get<double>(), 1.0);
}
