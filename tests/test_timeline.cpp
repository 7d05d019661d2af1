// timeline.json against the rules Perfetto's JSON importer applies (issue #10, item 12): the file
// is valid JSON whatever the names; on every track, complete slices ("X") either nest or do not
// overlap (Perfetto drops the others); counters are keyed by process and name, so each instance's
// counter needs a name of its own; async begin/end pairs match. Checked on the timelines of the
// shipped default scenario and the small test scenario, run by the servesim binary.
#include "helpers.hpp"
#include "sim/exporters/writers.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

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
