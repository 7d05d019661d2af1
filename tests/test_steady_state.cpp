// Steady state (issue 14): the warm-up window of the metrics, the stationary start of closed-loop
// agent sessions, and the engine's stored histories, against hand arithmetic and closed forms.
#include "helpers.hpp"
#include "sim/exporters/metrics.hpp"
#include "sim/simulation.hpp"
#include "workloads/agent.hpp"
#include "workloads/source.hpp"

#include "cli_run.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <regex>
#include <sstream>
#include <fstream>
#include <map>

using namespace servesim;

namespace {

RequestRecord completed(std::uint64_t id, double arrival, double first, double done, long long out) {
  RequestRecord r;
  r.id = id, r.status = RequestStatus::completed, r.arrival_s = arrival, r.admit_s = arrival, r.prefill_start_s = arrival;
  r.prefill_end_s = first, r.first_token_s = first, r.done_s = done, r.input_tokens = 100, r.output_tokens = out, r.generated_tokens = out;
  return r;
}

}  // namespace

// Warm-up 10 s, end 20 s. Requests: arrived at 5 (warm-up, completed), 12 (TTFT 1 s, completed),
// 15 (in flight, no first token), 16 (in flight, first token at 16.5), 19 (rejected).
TEST(SteadyState, WarmupRequestsAreCountedApartAndLeftOutOfEveryFigure) {
  MetricsCollector m({2.0, 0.1}, 1, 1, 10.0);
  m.on_request(completed(0, 5.0, 6.0, 7.0, 11));
  m.on_request(completed(1, 12.0, 13.0, 14.0, 11));  // TPOT (14 − 13) / 10 = 0.1
  RequestRecord r2;
  r2.id = 2, r2.arrival_s = 15.0, r2.status = RequestStatus::in_flight, r2.reason = "prefill";
  m.on_request(r2);
  RequestRecord r3;
  r3.id = 3, r3.arrival_s = 16.0, r3.first_token_s = 16.5, r3.status = RequestStatus::in_flight, r3.reason = "decode", r3.generated_tokens = 4;
  m.on_request(r3);
  RequestRecord r4;
  r4.id = 4, r4.arrival_s = 19.0, r4.status = RequestStatus::rejected, r4.reason = "x";
  m.on_request(r4);
  // a prefill step straddling the warm-up: 2 s of its 4 count, and half of its time splits
  // (communication 1 s of which 0.4 exposed, host 0.2 s, extrapolated 3 s); a decode step before it: none
  StepTime straddle;
  straddle.total_s = 4, straddle.comm_total_s = 1, straddle.comm_s = 0.4, straddle.host_s = 0.2, straddle.extrapolated_s = 3;
  m.on_step({Phase::prefill, 0, 8.0, 12.0, 1, 100, straddle});
  m.on_step({Phase::decode, 0, 3.0, 4.0, 1, 1, {}});
  // decode KV: 100 GB before the window, 4 GB from 5 s, 8 GB from 15 s: window mean (4·5 + 8·5)/10 = 6
  m.on_memory({Phase::decode, 0, 0.0, 100e9, 100e9});
  m.on_memory({Phase::decode, 0, 5.0, 4e9, 4e9});
  m.on_memory({Phase::decode, 0, 15.0, 8e9, 8e9});
  m.on_end(20.0);
  const Summary& s = m.summary();
  EXPECT_EQ(s.warmup_arrived, 1);
  EXPECT_EQ(s.warmup_completed, 1);
  EXPECT_EQ(s.arrived, 4);
  EXPECT_EQ(s.completed, 1);
  EXPECT_EQ(s.in_flight, 2);
  EXPECT_EQ(s.rejected, 1);
  EXPECT_EQ(s.ttft_s.n, 1);
  EXPECT_DOUBLE_EQ(s.ttft_s.p50, 1.0);
  EXPECT_EQ(s.output_tokens, 11 + 4);  // the warm-up request's 11 tokens are not counted
  EXPECT_DOUBLE_EQ(s.prefill_busy_s, 2.0);
  EXPECT_DOUBLE_EQ(s.comm_total_s, 0.5);
  EXPECT_DOUBLE_EQ(s.comm_s, 0.2);
  EXPECT_DOUBLE_EQ(s.host_s, 0.1);
  EXPECT_DOUBLE_EQ(s.extrapolated_s, 1.5);
  EXPECT_DOUBLE_EQ(s.decode_busy_s, 0.0);
  EXPECT_EQ(s.decode_steps, 0);
  EXPECT_DOUBLE_EQ(s.decode_kv_mean, 6e9);
  EXPECT_DOUBLE_EQ(s.decode_kv_peak, 8e9);  // the 100 GB before the window is not its peak
  // TTFT with the in-flight ones: {1, 20 − 15 = 5, 0.5}
  EXPECT_EQ(s.ttft_with_in_flight_s.n, 3);
  EXPECT_EQ(s.in_flight_without_first_token, 1);
  EXPECT_DOUBLE_EQ(s.ttft_with_in_flight_s.p50, 1.0);
  EXPECT_NEAR(s.ttft_with_in_flight_s.mean, 6.5 / 3, 1e-12);
}

// Without a warm-up nothing changes: the KV mean is over [0, end] and the peak is every value's.
TEST(SteadyState, NoWarmupMeasuresFromTimeZero) {
  MetricsCollector m({2.0, 0.1}, 1, 1);
  m.on_memory({Phase::decode, 0, 0.0, 100e9, 100e9});
  m.on_memory({Phase::decode, 0, 5.0, 4e9, 4e9});
  m.on_end(10.0);
  EXPECT_DOUBLE_EQ(m.summary().decode_kv_mean, (100e9 * 5 + 4e9 * 5) / 10);
  EXPECT_DOUBLE_EQ(m.summary().decode_kv_peak, 100e9);
}

namespace {

WorkloadSpec stationary_agents(long long sessions) {
  WorkloadSpec w;
  w.kind = WorkloadSpec::Kind::agent;
  w.loop = WorkloadSpec::Loop::closed;
  w.start = WorkloadSpec::Start::stationary;
  w.concurrency = sessions;
  w.requests = 0;  // sessions started: unbounded
  w.ramp_s = 30;
  w.block_tokens = 16;
  // rounds: llround(U[1, 3]) is 1, 2, 3 with probabilities 1/4, 1/2, 1/4
  w.rounds.kind = Dist::Kind::uniform, w.rounds.min = 1, w.rounds.max = 3;
  w.first_prompt_tokens.kind = Dist::Kind::constant, w.first_prompt_tokens.value = 100;
  w.append_tokens.kind = Dist::Kind::constant, w.append_tokens.value = 10;
  w.output_tokens.kind = Dist::Kind::constant, w.output_tokens.value = 5;
  w.think_s.kind = Dist::Kind::constant, w.think_s.value = 1;
  return w;
}

}  // namespace

// A session seen at a random time has R rounds with probability ∝ R·P(R): 1/8, 1/2, 3/8 for
// R = 1, 2, 3; its current round k is uniform below R, so P(k = 0) = 1/8 + 1/4 + 1/8 = 1/2,
// P(k = 1) = 1/4 + 1/8 = 3/8, P(k = 2) = 1/8. Round k's prompt is 100 + k·(5 + 10) tokens of which
// all but the last 10 are its stored history.
TEST(SteadyState, StationaryStartDrawsTheRoundAtARandomTimeOfTheSession) {
  const long long n = 40000;
  AgentSessionSource src(stationary_agents(n), 7);
  std::map<int, long long> at;
  for (long long i = 0; i < n; ++i) {
    const auto r = src.next();
    ASSERT_TRUE(r);
    ++at[r->round];
    EXPECT_EQ(r->input_tokens, 100 + 15 * r->round);
    EXPECT_EQ(r->history_tokens, r->round > 0 ? r->input_tokens - 10 : 0);
    EXPECT_EQ(r->history_stored, r->round > 0);
    EXPECT_GE(r->arrival_s, 0.0);
    EXPECT_LT(r->arrival_s, 30.0);
  }
  EXPECT_FALSE(src.next());
  // binomial standard error at n = 40,000 is at most 0.0025: 4 of them
  EXPECT_NEAR(at[0] / double(n), 0.5, 0.01);
  EXPECT_NEAR(at[1] / double(n), 0.375, 0.01);
  EXPECT_NEAR(at[2] / double(n), 0.125, 0.01);
}

// With start "ramp" (the default) every session begins at round 0 with nothing stored.
TEST(SteadyState, RampStartBeginsAtRoundZero) {
  WorkloadSpec w = stationary_agents(100);
  w.start = WorkloadSpec::Start::ramp;
  AgentSessionSource src(w, 7);
  while (auto r = src.next()) {
    EXPECT_EQ(r->round, 0);
    EXPECT_FALSE(r->history_stored);
    EXPECT_EQ(r->input_tokens, 100);
  }
}

namespace {

Request mid_session() {
  Request r = servesim::test::req(0, 0.0, 1100, 3);
  r.session = 0, r.round = 5, r.history_tokens = 1000, r.history_stored = true, r.last_round = true;
  return r;
}

}  // namespace

// A stored history is loaded back from L2 (not prefilled): 1,000 of its 1,100 tokens come from the
// host DRAM tier; without tiers the whole prompt is prefilled.
TEST(SteadyState, StoredHistoryIsLoadedBackFromTheHostTier) {
  const DeploymentSpec d = servesim::test::tiny(4096, true);
  servesim::test::Records rec;
  Simulation sim(d, std::make_unique<servesim::test::ListSource>(std::vector<Request>{mid_session()}), std::make_shared<servesim::test::ZeroCost>(), rec, {});
  const RunTotals t = sim.run();
  ASSERT_EQ(rec.by_id.size(), 1u);
  const RequestRecord& r = rec.by_id.at(0);
  EXPECT_EQ(r.status, RequestStatus::completed);
  EXPECT_EQ(r.load_tier, 2);
  EXPECT_EQ(r.loaded_tokens, 1000);
  EXPECT_EQ(r.cached_tokens, 1000);
  EXPECT_EQ(t.loads_l2, 1);
  // the history entered L2 without crossing a link: a preload (1,000 tokens x 1,152 B of tiny-moe),
  // not an offload copy (review: it was counted, and drawn, as GPU -> host PCIe traffic)
  EXPECT_EQ(t.preloads, 1);
  EXPECT_DOUBLE_EQ(t.preload_bytes, 1000 * 1152.0);
  EXPECT_EQ(t.offloads, 0);  // its session's last round: nothing is copied out after it
  EXPECT_DOUBLE_EQ(t.offload_bytes, 0.0);
}

TEST(SteadyState, StoredHistoryWithoutTiersIsPrefilled) {
  const DeploymentSpec d = servesim::test::tiny(4096, false);
  servesim::test::Records rec;
  Simulation sim(d, std::make_unique<servesim::test::ListSource>(std::vector<Request>{mid_session()}), std::make_shared<servesim::test::ZeroCost>(), rec, {});
  sim.run();
  const RequestRecord& r = rec.by_id.at(0);
  EXPECT_EQ(r.status, RequestStatus::completed);
  EXPECT_EQ(r.load_tier, 0);
  EXPECT_EQ(r.cached_tokens, 0);
}

#ifdef SERVESIM_BINARY
namespace fs = std::filesystem;

// `run --warmup`: the window is stated, and the warm-up requests plus the measured ones are every
// arrival of the same run without a warm-up (same seed: the same requests).
TEST(SteadyState, RunWarmupSplitsTheArrivals) {
  const fs::path out = fs::temp_directory_path() / ("servesim-warmup-" + std::to_string(::getpid()));
  fs::remove_all(out);
  const std::string sc = servesim::test::data("scenarios/default.json");
  auto a = ::test::sh("run " + sc + " --only k3-h200 --no-timeline --out " + (out / "a").string());
  ASSERT_EQ(a.status, 0) << a.text;
  auto b = ::test::sh("run " + sc + " --only k3-h200 --no-timeline --warmup 20 --out " + (out / "b").string());
  ASSERT_EQ(b.status, 0) << b.text;
  const auto ja = nlohmann::json::parse(::test::slurp(out / "a" / "k3-h200" / "summary.json"));
  const auto jb = nlohmann::json::parse(::test::slurp(out / "b" / "k3-h200" / "summary.json"));
  EXPECT_EQ(jb["window"]["start_s"], 20.0);
  EXPECT_EQ(ja["window"]["start_s"], 0.0);
  EXPECT_NEAR(jb["window"]["duration_s"].get<double>(), jb["window"]["end_s"].get<double>() - 20.0, 1e-6);
  const long long warm = jb["window"]["warmup_requests"]["arrived"];
  EXPECT_GT(warm, 0);
  EXPECT_EQ(warm + jb["requests"]["arrived"].get<long long>(), ja["requests"]["arrived"].get<long long>());
  EXPECT_EQ(jb["window"]["warmup_requests"]["completed"].get<long long>() + jb["requests"]["completed"].get<long long>(),
            ja["requests"]["completed"].get<long long>());
  // a warm-up at or past the horizon is refused, naming both
  auto c = ::test::sh("run " + sc + " --only k3-h200 --horizon 10 --warmup 10 --out " + (out / "c").string());
  EXPECT_EQ(c.status, 2);
  EXPECT_NE(c.text.find("--warmup"), std::string::npos) << c.text;
  // run to completion (no horizon) with a warm-up past the run's end: an empty window, warned about,
  // whose durations are 0 (were end - warmup < 0 in throughput.duration_s and the console table)
  auto d = ::test::sh("run " + sc + " --only k3-h200 --no-timeline --horizon 0 --warmup 100000 --out " + (out / "d").string());
  ASSERT_EQ(d.status, 0) << d.text;
  EXPECT_NE(d.text.find("measurement window [100000.0, "), std::string::npos) << d.text;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(d.text, m, std::regex(R"(measured window \(s\)\s+(\S+))"))) << d.text;
  EXPECT_EQ(m[1].str(), "0.0") << d.text;
  const auto jd = nlohmann::json::parse(::test::slurp(out / "d" / "k3-h200" / "summary.json"));
  EXPECT_EQ(jd["throughput"]["duration_s"].get<double>(), 0.0);
  EXPECT_EQ(jd["window"]["duration_s"].get<double>(), 0.0);
  EXPECT_EQ(jd["requests"]["arrived"].get<long long>(), 0);
  fs::remove_all(out);
}

// kv_tiers.token_hit_rate with a warm-up: numerators and denominator over the same requests, those
// that arrived in the window and were admitted (rev25: the denominator held the warm-up's prompts
// too, so L2_host read 0.022 where requests.csv gives 0.140). Recomputed from requests.csv.
TEST(SteadyState, TierHitRatesWithAWarmupAreSharesOfTheWindowsAdmittedPrompts) {
  const fs::path out = fs::temp_directory_path() / ("servesim-warmup-tiers-" + std::to_string(::getpid()));
  fs::remove_all(out);
  auto a = ::test::sh("run " + servesim::test::data("scenarios/agent-sessions.json") + " --only v4pro-h200 --horizon 120 --warmup 40 --no-timeline --quiet --out " +
                      out.string());
  ASSERT_EQ(a.status, 0) << a.text;
  std::ifstream csv(out / "v4pro-h200" / "requests.csv");
  std::string line;
  std::getline(csv, line);
  long long admitted = 0, l1 = 0, l2 = 0, l3 = 0, warm = 0;
  while (std::getline(csv, line)) {
    // id,status,reason,arrival_s,admit_s,...,input_tokens(16),cached_tokens(17),loaded_tokens(18),load_tier(19)
    const std::vector<std::string> f = servesim::test::csv_row(line, 26);
    if (std::stod(f[3]) < 40) {
      ++warm;
      continue;
    }
    if (f[4].empty()) continue;
    const long long in = std::stoll(f[16]), cached = std::stoll(f[17]), loaded = std::stoll(f[18]);
    admitted += in, l1 += cached - loaded;
    if (f[19] == "2") l2 += loaded;
    if (f[19] == "3") l3 += loaded;
  }
  ASSERT_GT(warm, 0);
  ASSERT_GT(l2, 0);
  const auto hr = nlohmann::json::parse(::test::slurp(out / "v4pro-h200" / "summary.json"))["kv_tiers"]["token_hit_rate"];
  EXPECT_NEAR(hr["L1_gpu"].get<double>(), static_cast<double>(l1) / admitted, 1e-6);
  EXPECT_NEAR(hr["L2_host"].get<double>(), static_cast<double>(l2) / admitted, 1e-6);
  EXPECT_NEAR(hr["L3_storage"].get<double>(), static_cast<double>(l3) / admitted, 1e-6);
  fs::remove_all(out);
}
#endif

namespace {

std::string parse_error(const nlohmann::json& j) {
  try {
    parse_scenario(j.dump(), "s.json", servesim::test::data("scenarios"));
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(SteadyState, ScenarioFieldsAreChecked) {
  auto j = nlohmann::json::parse(::test::slurp(servesim::test::data("scenarios/agent-sessions.json")));
  j["horizon_s"] = 100;
  j["warmup_s"] = 100;
  EXPECT_NE(parse_error(j).find("s.json: warmup_s: must be below horizon_s"), std::string::npos) << parse_error(j);
  j["warmup_s"] = 50;
  EXPECT_EQ(parse_error(j), "");
  j["workload"]["start"] = "stationary";
  EXPECT_EQ(parse_error(j), "");
  j["workload"]["start"] = "middle";
  EXPECT_NE(parse_error(j).find("workload.start"), std::string::npos) << parse_error(j);
  j["workload"]["start"] = "stationary";
  j["workload"]["loop"] = "open";
  j["workload"].erase("concurrency");  // (closed-loop keys, refused in an open loop)
  j["workload"].erase("ramp_s");
  EXPECT_NE(parse_error(j).find("workload.start: \"stationary\" applies to \"loop\": \"closed\""), std::string::npos) << parse_error(j);
}
