// timeline.json against the rules Perfetto's JSON importer applies (issue #10, item 12): the file
// is valid JSON whatever the names; on every track, complete slices ("X") either nest or do not
// overlap (Perfetto drops the others); counters are keyed by process and name, so each instance's
// counter needs a name of its own; async begin/end pairs match. Checked on the timelines of the
// shipped default scenario and the small test scenario, run by the servesim binary.
#include "cli_run.hpp"
#include "helpers.hpp"
#include "sim/exporters/writers.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

namespace fs = std::filesystem;
using namespace servesim;

namespace {

long long ns(const nlohmann::json& us) { return std::llround(us.get<double>() * 1000); }

// Returns the first violation of Perfetto's import rules, or "".
std::string perfetto_violation(const nlohmann::json& t) {
  std::map<std::pair<long long, long long>, std::vector<std::pair<long long, long long>>> slices;  // (pid, tid) → [start, end]
  std::map<std::pair<long long, std::string>, std::set<long long>> counter_tids;                 // (pid, name) → tids
  std::map<std::string, int> open_async;
  for (const auto& e : t.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "X") {
      const long long a = ns(e.at("ts")), d = ns(e.at("dur"));
      if (d < 0) return "negative duration";
      slices[{e.at("pid"), e.at("tid")}].push_back({a, a + d});
    } else if (ph == "C") {
      counter_tids[{e.at("pid"), e.at("name")}].insert(e.at("tid").get<long long>());
    } else if (ph == "b" || ph == "e") {
      open_async[e.at("name").get<std::string>() + "#" + e.at("id").dump()] += ph == "b" ? 1 : -1;
    }
  }
  for (auto& [track, v] : slices) {
    std::stable_sort(v.begin(), v.end(), [](auto& x, auto& y) { return x.first < y.first; });
    std::vector<long long> stack;  // ends of the open enclosing slices
    for (const auto& [a, b] : v) {
      while (!stack.empty() && stack.back() <= a) stack.pop_back();
      if (!stack.empty() && b > stack.back())
        return "track pid " + std::to_string(track.first) + " tid " + std::to_string(track.second) + ": a slice at " + std::to_string(a) +
               " ns overlaps the one before without nesting";
      stack.push_back(b);
    }
  }
  for (const auto& [key, tids] : counter_tids)
    if (tids.size() > 1) return "counter \"" + key.second + "\" of pid " + std::to_string(key.first) + " is written by several tracks (merged by Perfetto)";
  for (const auto& [key, n] : open_async)
    if (n != 0) return "async slice " + key + " has unmatched begin/end";
  return "";
}

nlohmann::json run_and_load(const std::string& scenario, const std::string& tag, const std::string& deployment) {
  const fs::path out = fs::temp_directory_path() / ("servesim_timeline_" + tag);
  fs::remove_all(out);
  const std::string cmd = std::string(SERVESIM_BINARY) + " run " + scenario + " --out " + out.string() + " > /dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out / deployment / "timeline.json");
  return nlohmann::json::parse(in);  // throws (test error) if not valid JSON
}

}  // namespace

TEST(Timeline, ShippedScenariosFollowPerfettoImportRules) {
  for (const char* d : {"k3-h200", "v4pro-h200"}) {
    const nlohmann::json t = run_and_load(test::data("scenarios/default.json"), "default", d);
    EXPECT_GT(t.at("traceEvents").size(), 1000u) << d;
    EXPECT_EQ(perfetto_violation(t), "") << d;
  }
  EXPECT_EQ(perfetto_violation(run_and_load(test::data("tests/data/small.json"), "small", "flash")), "");
}

// The checker itself: an overlap that does not nest, and one counter name on two tracks, are caught.
TEST(Timeline, TheRuleCheckerCatchesOverlapsAndMergedCounters) {
  auto ev = [](const char* ph, double ts, double dur, int tid, const char* name = "s") {
    return nlohmann::json{{"ph", ph}, {"name", name}, {"pid", 1}, {"tid", tid}, {"ts", ts}, {"dur", dur}};
  };
  nlohmann::json ok = {{"traceEvents", {ev("X", 0, 10, 0), ev("X", 10, 5, 0), ev("X", 2, 3, 0)}}};
  EXPECT_EQ(perfetto_violation(ok), "");
  nlohmann::json overlap = {{"traceEvents", {ev("X", 0, 10.001, 0), ev("X", 10, 5, 0)}}};
  EXPECT_NE(perfetto_violation(overlap), "");
  nlohmann::json merged = {{"traceEvents", {ev("C", 0, 0, 0, "KV"), ev("C", 0, 0, 1, "KV")}}};
  EXPECT_NE(perfetto_violation(merged), "");
}

// A --timeline-window starts each counter at the value it had when the window opened (rev26: they
// read 0 until next set), and leaves out an all-to-all slice that ended before the window even when
// its step reaches into it. Window [10, 20] s, by hand.
TEST(Timeline, AWindowStartsItsCountersWhereTheyStood) {
  const fs::path p = fs::temp_directory_path() / ("servesim_timeline_window_" + std::to_string(::getpid()) + ".json");
  {
    TimelineWriter w(p.string(), "w", 100, 10.0, 20.0);
    auto mem = [&](Phase role, int inst, double t, double gb) {
      MemoryEvent m;
      m.role = role, m.instance = inst, m.t_s = t, m.kv_bytes_mean = gb * 1e9, m.kv_bytes_max = gb * 1e9;
      w.on_memory(m);
    };
    mem(Phase::prefill, 0, 5, 3), mem(Phase::prefill, 0, 8, 4), mem(Phase::decode, 1, 9, 2);
    TierEvent tier;
    tier.t_s = 7, tier.l2_bytes = 5e9, tier.l3_bytes = 1e9;
    w.on_tier(tier);
    StepEvent s;
    s.role = Phase::decode, s.instance = 1, s.start_s = 9, s.end_s = 12, s.seqs = 1, s.tokens = 1;
    s.time.comm_total_s = 0.5, s.time.comm_s = 0.1;  // its all-to-all ends at 9.5 s, before the window
    w.on_step(s);
    mem(Phase::prefill, 0, 15, 6);
    w.on_end(30);
  }
  const nlohmann::json t = nlohmann::json::parse(std::ifstream(p));
  EXPECT_EQ(perfetto_violation(t), "");
  std::vector<std::tuple<std::string, double, double>> counters;  // (name, ts us, value)
  int steps = 0, a2a = 0;
  for (const auto& e : t.at("traceEvents")) {
    if (e.at("ph") == "C") counters.emplace_back(e.at("name"), e.at("ts"), e.at("args").contains("mean") ? e.at("args").at("mean").get<double>() : e.at("args").at("L2 host DRAM").get<double>());
    if (e.at("ph") == "X") (e.at("name") == "decode step" ? steps : a2a) += 1;
  }
  ASSERT_EQ(counters.size(), 4u) << t.dump();
  EXPECT_EQ(counters[0], std::make_tuple(std::string("prefill instance 0 KV GB per GPU"), 10e6, 4.0));  // the latest before 10 s
  EXPECT_EQ(counters[1], std::make_tuple(std::string("decode instance 1 KV GB per GPU"), 10e6, 2.0));
  EXPECT_EQ(counters[2], std::make_tuple(std::string("KV GB"), 10e6, 5.0));
  EXPECT_EQ(counters[3], std::make_tuple(std::string("prefill instance 0 KV GB per GPU"), 15e6, 6.0));
  EXPECT_EQ(steps, 1);
  EXPECT_EQ(a2a, 0);
  fs::remove(p);
}

// Any title the user chose (scenario and deployment names) comes out as valid JSON, intact.
TEST(Timeline, AnyNameGivesValidJson) {
  const fs::path p = fs::temp_directory_path() / "servesim_timeline_names.json";
  const std::string title = "scen \"quoted\" \\ back\nslash / ✓ déploiement\t1";
  {
    TimelineWriter w(p.string(), title, 10);
    StepEvent s;
    s.role = Phase::decode, s.instance = 3, s.start_s = 0.1234567891, s.end_s = 0.2, s.seqs = 1, s.tokens = 1;
    w.on_step(s);
    w.on_end(0.2);
  }
  std::ifstream in(p);
  const nlohmann::json t = nlohmann::json::parse(in);
  EXPECT_EQ(t["otherData"]["title"].get<std::string>(), title);
  EXPECT_EQ(perfetto_violation(t), "");
}

// Load-backs, offloads and demotions are slices of their own (cat "kv-tier", pid 4, tracks 2-5),
// each copy that finished once, matching summary.json's counters and the requests it belongs to.
// Agent sessions with host DRAM small enough (K3 20 GB, V4-Pro 2 GB per node) that objects are
// demoted to L3 and loaded back from both tiers. Checked by hand: an offload starts when its round
// completes (requests.csv done_s); a load-back spans the round's load_start_s..load_end_s; K3's
// offloaded bytes grow by 24 MLA layers x 1,152 B = 27,648 B per token of history (model-facts.md
// "KV per token per layer"; KDA states are per sequence, so they cancel in the difference).
TEST(Timeline, KvTierMovesAreSlicesMatchingTheSummaryAndTheRequests) {
  nlohmann::json scn = nlohmann::json::parse(std::ifstream(test::data("scenarios/agent-sessions.json")));
  scn["horizon_s"] = 65;
  scn["deployments"][0]["kv_tiers"] = {{"enabled", true}, {"host_gb_per_node", 20}};
  scn["deployments"][1]["kv_tiers"] = {{"enabled", true}, {"host_gb_per_node", 2}};
  const fs::path dir = fs::temp_directory_path() / ("servesim_timeline_tiers_" + std::to_string(::getpid()));  // (rev25b: concurrent test runs)
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "s.json") << scn.dump();
  const std::string cmd = std::string(SERVESIM_BINARY) + " run " + (dir / "s.json").string() + " --quiet --out " + (dir / "o").string() + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (const char* d : {"k3-h200", "v4pro-h200"}) {
    SCOPED_TRACE(d);
    const nlohmann::json t = nlohmann::json::parse(std::ifstream(dir / "o" / d / "timeline.json"));
    const nlohmann::json tiers = nlohmann::json::parse(std::ifstream(dir / "o" / d / "summary.json")).at("kv_tiers");
    EXPECT_EQ(perfetto_violation(t), "");
    // requests.csv: id -> (done_s, load_start_s, load_end_s, load_tier, input + output tokens)
    struct Row { double done = -1, load0 = -1, load1 = -1; int tier = 0; long long tokens = 0; };
    std::map<long long, Row> rows;
    // loads in flight at the horizon, per tier (rows "in_flight, loading_kv"): summary.json counts a
    // load when it starts, the timeline has a slice only for one that ended (as for demotions)
    long long loading[4] = {0};
    std::ifstream csv(dir / "o" / d / "requests.csv");
    std::string line;
    std::getline(csv, line);
    while (std::getline(csv, line)) {
      const std::vector<std::string> f = test::csv_row(line, 26);
      auto num = [&](int i) { return f[i].empty() ? -1.0 : std::stod(f[i]); };
      rows[std::stoll(f[0])] = {num(12), num(5), num(6), std::stoi(f[19]), std::stoll(f[16]) + std::stoll(f[20])};
      if (f[1] == "in_flight" && f[2] == "loading_kv") ++loading[std::stoi(f[19])];
    }
    std::map<long long, std::tuple<double, long long, long long>> begins;  // id -> (ts us, tid, request or -1)
    long long n[6] = {0}, ended = 0;
    double bytes[6] = {0};
    std::vector<std::pair<long long, double>> offload_sizes;  // (tokens, bytes) of K3's offloads
    for (const auto& e : t.at("traceEvents")) {
      if (e.value("cat", "") != "kv-tier") continue;
      const long long tid = e.at("tid"), id = e.at("id");
      ASSERT_TRUE(e.at("pid") == 4 && tid >= 2 && tid <= 5) << e.dump();
      if (e.at("ph") == "b") {
        const long long request = tid == 5 ? -1 : e.at("args").at("request").get<long long>();
        ASSERT_TRUE(begins.emplace(id, std::tuple{e.at("ts").get<double>(), tid, request}).second) << "id used twice: " << e.dump();
        ++n[tid], bytes[tid] += e.at("args").at("bytes").get<double>();
        const double ts_s = e.at("ts").get<double>() / 1e6;
        if (tid == 5) continue;  // a demotion belongs to no request
        const auto r = rows.find(request);
        ASSERT_NE(r, rows.end()) << e.dump();
        if (tid == 4) {
          EXPECT_NEAR(ts_s, r->second.done, 1.5e-6) << "an offload starts when its round completes: " << e.dump();
          offload_sizes.emplace_back(r->second.tokens, e.at("args").at("bytes").get<double>());
        } else {
          EXPECT_EQ(r->second.tier, tid) << "load tier: " << e.dump();  // tid 2 = L2, 3 = L3
          EXPECT_NEAR(ts_s, r->second.load0, 1.5e-6) << e.dump();
        }
      } else {
        const auto b = begins.find(id);
        ASSERT_NE(b, begins.end()) << "end before begin: " << e.dump();
        EXPECT_GE(e.at("ts").get<double>(), std::get<0>(b->second));
        const long long tid_b = std::get<1>(b->second);
        if (tid_b == 2 || tid_b == 3) {
          EXPECT_NEAR(e.at("ts").get<double>() / 1e6, rows.at(std::get<2>(b->second)).load1, 1.5e-6) << e.dump();
        }
        ++ended;
      }
    }
    EXPECT_EQ(ended, n[2] + n[3] + n[4] + n[5]);
    // every copy that finished once; a load still running at the horizon is counted by the summary
    // and has no slice (the session's dynamics decide whether one is: at 60 s a K3 L3 load was)
    EXPECT_EQ(n[2] + loading[2], tiers.at("loads_from_L2").get<long long>());
    EXPECT_EQ(n[3] + loading[3], tiers.at("loads_from_L3").get<long long>());
    EXPECT_GT(n[3], 0);
    EXPECT_EQ(tiers.at("offloads_in_flight_at_end").get<long long>(), 0);
    EXPECT_EQ(n[4], tiers.at("offloads").get<long long>());
    for (int tier : {2, 3}) {
      const double summary_bytes = tiers.at("bytes_loaded_from_L" + std::to_string(tier)).get<double>();
      if (loading[tier] == 0) {
        EXPECT_DOUBLE_EQ(bytes[tier], summary_bytes) << "L" << tier;
      } else {
        EXPECT_LT(bytes[tier], summary_bytes) << "L" << tier;
      }
    }
    EXPECT_DOUBLE_EQ(bytes[4], tiers.at("bytes_offload_copies_started").get<double>());
    // demotions are counted when they start: those still running at the end have no slice
    EXPECT_GT(n[5], 0);
    EXPECT_LE(bytes[5], tiers.at("bytes_demoted_L2_to_L3").get<double>() * (1 + 1e-12));
    EXPECT_GT(bytes[5], 0.9 * tiers.at("bytes_demoted_L2_to_L3").get<double>());
    // the load-backs' request rows: each one with a load has exactly one slice
    long long loaded_rows = 0;
    for (const auto& [id, r] : rows) loaded_rows += r.load1 >= 0;
    EXPECT_EQ(loaded_rows, n[2] + n[3]);
    if (std::string(d) == "k3-h200") {
      ASSERT_GE(offload_sizes.size(), 2u);
      std::sort(offload_sizes.begin(), offload_sizes.end());
      const auto& lo = offload_sizes.front();
      const auto& hi = offload_sizes.back();
      ASSERT_GT(hi.first, lo.first);
      EXPECT_NEAR((hi.second - lo.second) / static_cast<double>(hi.first - lo.first), 27648.0, 1e-6);
    }
  }
}
