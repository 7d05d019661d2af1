// `servesim capacity` (issue 14): the search over instance counts against a brute-force minimum on
// synthetic feasibility regions, and the command on a prefill-bound case whose answer is computed
// from `servesim step` and checked with `servesim run`.
#include "sim/cli/capacity_search.hpp"

#include "helpers.hpp"

#include "cli_run.hpp"

#include <gtest/gtest.h>

#include <cstdio>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <climits>
#include <cmath>
#include <filesystem>
#include <functional>
#include <random>
#include <set>

using servesim::cli::Alloc;

namespace {

struct Case {
  std::function<bool(int, int)> feasible;
  std::function<int(const Alloc&)> nodes;
};

// The brute-force answer over a grid far larger than any answer: fewest nodes, then fewest prefill.
std::pair<Alloc, int> brute(const Case& c) {
  Alloc best{0, 0};
  int n = INT_MAX;
  for (int p = 1; p <= 200; ++p)
    for (int d = 1; d <= 200; ++d)
      if (c.feasible(p, d) && (c.nodes({p, d}) < n || (c.nodes({p, d}) == n && p < best.prefill))) best = {p, d}, n = c.nodes({p, d});
  return {best, n};
}

void check(const Case& c, int batch, double ratio = 1.0, int max_evals = 40) {
  std::set<std::pair<int, int>> seen;
  int calls = 0;
  servesim::cli::CapacityOracle oracle = [&](const std::vector<Alloc>& as) {
    ++calls;
    EXPECT_LE(static_cast<int>(as.size()), batch);
    std::vector<bool> ok;
    for (const auto& a : as) {
      EXPECT_TRUE(seen.insert({a.prefill, a.decode}).second) << "ran twice: " << a.prefill << "," << a.decode;
      ok.push_back(c.feasible(a.prefill, a.decode));
    }
    return ok;
  };
  const auto r = servesim::cli::fewest_nodes(oracle, c.nodes, 100000, batch, ratio);
  const auto [b, n] = brute(c);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.nodes, n);
  EXPECT_EQ(r.best.prefill, b.prefill);
  EXPECT_EQ(r.best.decode, b.decode);
  EXPECT_EQ(r.evaluations, static_cast<int>(seen.size()));
  EXPECT_LT(r.evaluations, max_evals) << "a search, not a sweep of the 200 x 200 grid";
}

}  // namespace

// Feasible when P ≥ 2, D ≥ 5 and 2P + D ≥ 12 (a prefill/decode trade-off); prefill instances of 4
// nodes (EP32), decode of 2 (EP16): brute force gives P = 2, D = 8 at 24 nodes (P = 3, D = 6: 24
// too, but more prefill; P = 4, D = 5: 26).
TEST(CapacitySearch, FindsTheFewestNodesOnTheFrontier) {
  const Case c{[](int p, int d) { return p >= 2 && d >= 5 && 2 * p + d >= 12; }, [](const Alloc& a) { return 4 * a.prefill + 2 * a.decode; }};
  EXPECT_EQ(brute(c).second, 24);
  for (int batch : {1, 2, 3}) check(c, batch);
}

// Whole-node rounding: 3 instances of EP4 (half a node each) take 2 nodes; decode-bound.
TEST(CapacitySearch, RoundsEachPoolToWholeNodes) {
  const Case c{[](int p, int d) { return p >= 1 && d >= 7; }, [](const Alloc& a) { return (a.prefill * 4 + 7) / 8 + (a.decode * 4 + 7) / 8; }};
  EXPECT_EQ(brute(c).second, 5);  // P = 1 (1 node), D = 7 or 8 (4 nodes): D = 7 first
  for (int batch : {1, 2}) check(c, batch);
}

// Prefill-bound, with a large answer (bracket up to 32).
TEST(CapacitySearch, PrefillBoundLargeAnswer) {
  const Case c{[](int p, int d) { return p >= 19 && d >= 3; }, [](const Alloc& a) { return 2 * a.prefill + 4 * a.decode; }};
  for (int batch : {1, 2}) check(c, batch);
}

// A bracket along P:D = 1:4 stops at (8, 32) (2·8 + 32 ≥ 40; (4, 16) misses): the answer needs more
// prefill than that, 2P + D ≥ 40 at fewest P + D: P = 19, D = 2 (21 nodes; P = 20, D = 1 too, more
// prefill), found by the staircase from the corner (8, 24). A straight frontier improves at every
// step, so the staircase visits each P between the corner and the answer (the search's worst shape).
TEST(CapacitySearch, UpwardWalkFindsMorePrefillThanTheBracket) {
  const Case c{[](int p, int d) { return 2 * p + d >= 40; }, [](const Alloc& a) { return a.prefill + a.decode; }};
  EXPECT_EQ(brute(c).second, 21);
  for (int batch : {1, 2}) check(c, batch, 4.0, 80);
  for (int batch : {1, 2}) check(c, batch, 1.0, 80);
}

// Decode-bound with a prefill floor, as 10,000 K3 sessions were: P >= 50 and D >= 150, 4 nodes an
// instance, bracket along 1:4. The corner is the answer (50, 150), found by bisections, not by
// walking 14 prefill counts down from the bracket's 64.
TEST(CapacitySearch, CornerByBisection) {
  const Case c{[](int p, int d) { return p >= 50 && d >= 150; }, [](const Alloc& a) { return 4 * a.prefill + 4 * a.decode; }};
  for (int batch : {1, 2}) check(c, batch, 4.0, 30);
}

// The bracket from the static estimate (start_decode 128 along 1:4): the first run is (32, 128), no
// bracket allocation below it is run, and the answer is the same as from 1, in fewer runs.
TEST(CapacitySearch, BracketStartsFromTheEstimate) {
  const Case c{[](int p, int d) { return p >= 50 && d >= 150; }, [](const Alloc& a) { return 4 * a.prefill + 4 * a.decode; }};
  std::vector<Alloc> order;
  servesim::cli::CapacityOracle oracle = [&](const std::vector<Alloc>& as) {
    std::vector<bool> ok;
    for (const auto& a : as) order.push_back(a), ok.push_back(c.feasible(a.prefill, a.decode));
    return ok;
  };
  servesim::cli::CapacitySearchOptions opt;
  opt.batch = 2, opt.decode_per_prefill = 4, opt.start_decode = 128;
  const auto r = servesim::cli::fewest_nodes(oracle, c.nodes, 100000, opt);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.best, (Alloc{50, 150}));
  ASSERT_FALSE(order.empty());
  EXPECT_EQ(order[0], (Alloc{32, 128}));
  for (const auto& a : order) EXPECT_FALSE(a.prefill <= 8 && a.decode <= 32) << a.prefill << "," << a.decode << ": a bracket point below the start";
  const auto from1 = servesim::cli::fewest_nodes(oracle, c.nodes, 100000, 2, 4.0);
  EXPECT_EQ(from1.best, r.best);
  EXPECT_LT(r.evaluations, from1.evaluations);
}

// With a resolution of 5% the answer meets the region, takes at most 5% (plus one instance) more
// nodes than the brute-force minimum, and takes fewer runs than the exact search.
TEST(CapacitySearch, ResolutionStopsWithinItsShare) {
  const Case c{[](int p, int d) { return p >= 50 && d >= 150 && p + d >= 230; }, [](const Alloc& a) { return 4 * a.prefill + 4 * a.decode; }};
  const int exact_nodes = brute(c).second;
  int runs = 0;
  servesim::cli::CapacityOracle oracle = [&](const std::vector<Alloc>& as) {
    std::vector<bool> ok;
    for (const auto& a : as) ++runs, ok.push_back(c.feasible(a.prefill, a.decode));
    return ok;
  };
  servesim::cli::CapacitySearchOptions opt;
  opt.batch = 2, opt.decode_per_prefill = 4, opt.resolution = 0.05;
  const auto r = servesim::cli::fewest_nodes(oracle, c.nodes, 100000, opt);
  ASSERT_TRUE(r.found);
  EXPECT_TRUE(c.feasible(r.best.prefill, r.best.decode));
  EXPECT_LE(r.nodes, exact_nodes * 1.05 + 4);
  const auto exact = servesim::cli::fewest_nodes(oracle, c.nodes, 100000, 2, 4.0);
  EXPECT_EQ(exact.nodes, exact_nodes);
  EXPECT_LT(r.evaluations, exact.evaluations);
}

TEST(CapacitySearch, NothingWithinTheNodeBound) {
  servesim::cli::CapacityOracle never = [](const std::vector<Alloc>& as) { return std::vector<bool>(as.size(), false); };
  const auto r = servesim::cli::fewest_nodes(never, [](const Alloc& a) { return a.prefill + a.decode; }, 100, 2);
  EXPECT_FALSE(r.found);
  EXPECT_LE(r.evaluations, 6);  // (1,1) … (32,32); (64,64) is beyond 100 nodes
}

// Seed noise makes feasibility non-monotone near the SLO's edge (the header's assumption, "more
// instances never hurt", holds only up to it). Whatever the holes, the answer is an allocation a
// run showed to meet the SLO (never one only inferred from a neighbour), and it is never below the
// true minimum of the noisy region; where a hole sits on the monotone answer the search can end
// above it, by how much is pinned here for one hole (the command's seed band is what shows a user
// such noise).
TEST(CapacitySearch, NonMonotoneFeasibilityAnswersARunThatMet) {
  const auto nodes = [](const Alloc& a) { return 4 * a.prefill + 2 * a.decode; };
  const auto region = [](int p, int d) { return p >= 2 && d >= 5 && 2 * p + d >= 12; };  // answer (2, 8), 24 nodes
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    std::set<std::pair<int, int>> holes;  // allocations in the region that miss anyway
    for (int k = 0; k < 6; ++k) holes.insert({1 + static_cast<int>(rng() % 6), 4 + static_cast<int>(rng() % 10)});
    const Case c{[&](int p, int d) { return region(p, d) && !holes.count({p, d}); }, nodes};
    servesim::cli::CapacityOracle oracle = [&](const std::vector<Alloc>& as) {
      std::vector<bool> ok;
      for (const auto& a : as) ok.push_back(c.feasible(a.prefill, a.decode));
      return ok;
    };
    const auto r = servesim::cli::fewest_nodes(oracle, nodes, 100000, 2);
    ASSERT_TRUE(r.found) << "trial " << trial;
    bool ran_and_met = false;
    for (const auto& [a, ok] : r.known) ran_and_met |= a == r.best && ok;
    EXPECT_TRUE(ran_and_met) << "trial " << trial << ": answer " << r.best.prefill << "," << r.best.decode << " was not a run that met";
    EXPECT_TRUE(c.feasible(r.best.prefill, r.best.decode));
    EXPECT_GE(r.nodes, brute(c).second) << "trial " << trial;
  }
  // one hole on the monotone answer: (2, 8) misses, (3, 6) at the same 24 nodes remains; the search
  // finds it (ties go to fewer prefill, but (2, 8) was run and missed)
  const Case one{[&](int p, int d) { return region(p, d) && !(p == 2 && d == 8); }, nodes};
  servesim::cli::CapacityOracle o1 = [&](const std::vector<Alloc>& as) {
    std::vector<bool> ok;
    for (const auto& a : as) ok.push_back(one.feasible(a.prefill, a.decode));
    return ok;
  };
  const auto r1 = servesim::cli::fewest_nodes(o1, nodes, 100000, 2);
  // options out of range are refused, not clamped (a P:D split of 0 once probed 10^9 prefill instances)
  EXPECT_THROW(servesim::cli::fewest_nodes(o1, nodes, 100000, 2, 0.0), std::invalid_argument);
  EXPECT_THROW(servesim::cli::fewest_nodes(o1, nodes, 100000, 0), std::invalid_argument);
  ASSERT_TRUE(r1.found);
  EXPECT_EQ(r1.nodes, brute(one).second);
}

#ifdef SERVESIM_BINARY
namespace fs = std::filesystem;

namespace {

// A prefill-bound case whose answer follows from one `servesim step` figure, not from the SLO's
// noisy edge: DeepSeek V4-Flash, EP8 instances at attention TP 8 (one DP rank, one node each), every
// prompt 8,192 tokens with a 8,192-token prefill batch limit (one prompt a step), 2 output tokens
// (decode is trivial). A prefill instance then serves 1 / T requests/s, T = the step time `servesim
// step` prices; Poisson arrivals at R = 2.5 / T need P > R T = 2.5 instances to keep up: with 2
// the queue grows by 0.5 / T per second and TTFT p99 over the window grows to tens of seconds, with
// 3 (utilisation 0.83) it stays within a few steps. TTFT p99 <= 10 s and TPOT p99 <= 1 s then put
// the answer at P = 3, D = 1 (4 nodes) whatever the seed.
nlohmann::json prefill_bound(std::uint64_t seed) {
  auto j = nlohmann::json::parse(::test::slurp(servesim::test::data("scenarios/default.json")));
  j["seed"] = seed, j["horizon_s"] = 120, j["warmup_s"] = 40;
  j["workload"] = {{"kind", "synthetic"}, {"requests", 100000}, {"rate_per_s", 1.0}, {"arrival", "poisson"},
                   {"input_tokens", {{"dist", "constant"}, {"value", 8192}}}, {"output_tokens", {{"dist", "constant"}, {"value", 2}}}};
  nlohmann::json dep = j["deployments"][1];
  dep["name"] = "flash", dep["model"] = "deepseek-v4-flash";
  dep["prefill"]["ep"] = 8, dep["prefill"]["attn_tp"] = 8, dep["prefill"]["max_batch_tokens"] = 8192, dep["prefill"]["chunk_tokens"] = 8192;
  dep["decode"]["ep"] = 8, dep["decode"]["attn_tp"] = 8;
  j["deployments"] = nlohmann::json::array({dep});
  return j;
}

fs::path write_scenario(const fs::path& dir, const nlohmann::json& j) {
  fs::create_directories(dir);
  std::ofstream(dir / "s.json") << j.dump();
  return dir / "s.json";
}

// TTFT p99 (with in-flight requests) and TPOT p99 of `servesim run` with P and D instances.
std::pair<double, double> run_p99(const fs::path& dir, nlohmann::json j, int p, int d, double rate) {
  j["deployments"][0]["prefill"]["instances"] = p, j["deployments"][0]["decode"]["instances"] = d;
  j["workload"]["rate_per_s"] = rate;
  const fs::path sc = write_scenario(dir, j);
  const auto o = ::test::sh("run " + sc.string() + " --no-timeline --requests none --quiet --out " + (dir / "out").string());
  EXPECT_EQ(o.status, 0) << o.text;
  const auto s = nlohmann::json::parse(::test::slurp(dir / "out" / "flash" / "summary.json"));
  return {s["latency"]["ttft_with_in_flight"]["p99_ms"].get<double>() / 1e3, s["latency"]["tpot"]["p99_ms"].get<double>() / 1e3};
}

// The held-out error the band uses, computed here from fitted_models.json as README "servesim
// capacity" states it: per family, the k-fold |error|'s 80th percentile interpolated in log space
// between its median and p95 at normal-quantile spacing; the families averaged by rows.
double held_out_from_file() {
  const auto f = nlohmann::json::parse(::test::slurp(servesim::test::data("costmodels/data/h200/fitted_models.json")));
  double sum = 0, rows = 0;
  for (const auto& [name, v] : f["validation"]["families"].items()) {
    const auto& k = v["kfold"];
    const double n = k["n"], med = k["median_ape"], p95 = k["p95_ape"];
    if (n <= 0 || med <= 0 || p95 <= 0) continue;
    const double p80 = std::exp(std::log(med) + (1.2816 - 0.6745) / (1.96 - 0.6745) * (std::log(p95) - std::log(med)));
    sum += p80 * n, rows += n;
  }
  return sum / rows;
}

}  // namespace

// The command's answer against the stability bound computed from `servesim step`, at two seeds;
// `servesim run` replays the answer (meets) and one prefill instance fewer (misses by far); the
// band is whole nodes and carries the cost model's held-out error.
TEST(CapacityCommand, PrefillBoundAnswerIsTheStabilityBoundAtEverySeed) {
  const fs::path dir = fs::temp_directory_path() / ("servesim-capacity-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const fs::path step_sc = write_scenario(dir / "step", prefill_bound(42));
  const auto st = ::test::sh("step " + step_sc.string() + " --phase prefill --tokens 8192");
  ASSERT_EQ(st.status, 0) << st.text;
  const auto k = st.text.find("step time");
  ASSERT_NE(k, std::string::npos) << st.text;
  const double step_s = std::stod(st.text.substr(k + 9)) / 1e3;  // "step time   343.778 ms"
  ASSERT_GT(step_s, 0.01);
  const double rate = 2.5 / step_s;
  const int p_needed = static_cast<int>(std::ceil(rate * step_s));  // the fewest P with P / T > R
  ASSERT_EQ(p_needed, 3);
  const std::string r = fmt::format("{:.4f}", rate);
  for (std::uint64_t seed : {42u, 7u}) {
    const fs::path sc = write_scenario(dir / ("s" + std::to_string(seed)), prefill_bound(seed));
    const auto o = ::test::sh("capacity " + sc.string() + " --rate " + r + " --ttft-p99 10 --tpot-p99 1 --seeds 2 --quiet --out " +
                              (dir / ("cap" + std::to_string(seed))).string());
    ASSERT_EQ(o.status, 0) << o.text;
    const auto c = nlohmann::json::parse(::test::slurp(dir / ("cap" + std::to_string(seed)) / "capacity.json"));
    EXPECT_EQ(c["answer"]["prefill_instances"], p_needed) << "seed " << seed;
    EXPECT_EQ(c["answer"]["decode_instances"], 1) << "seed " << seed;
    EXPECT_EQ(c["answer"]["nodes"], p_needed + 1);  // EP8: one node an instance
    EXPECT_EQ(c["window"]["start_s"], 40.0);
    EXPECT_NE(o.text.find("simulated answer: 4 nodes"), std::string::npos) << o.text;
    // the band: whole node counts (the seeds' needs and the cost model's ends are simulated allocations)
    const auto& b = c["band"];
    EXPECT_TRUE(b["nodes_p10"].is_number_integer()) << b.dump();
    EXPECT_TRUE(b["nodes_p90"].is_number_integer()) << b.dump();
    EXPECT_LE(b["nodes_p10"].get<int>(), 4);
    EXPECT_GE(b["nodes_p90"].get<int>(), 4);
    EXPECT_EQ(b["seeds"].size(), 2u);
    EXPECT_NEAR(b["cost_model_error"]["held_out_error"].get<double>(), held_out_from_file(), 1e-4);
    EXPECT_NEAR(b["cost_model_error"]["kernel_factor_p90"].get<double>(), 1 + held_out_from_file(), 1e-6);
    // beside the answer, the engine's error against the published deployments: the ranges that
    // `servesim validate` prints under its table (tests/test_validate.cpp checks those by hand)
    const auto& se = c["serving_error_vs_published"];
    ASSERT_EQ(se.size(), 3u) << se.dump();
    const auto v = ::test::sh("validate");
    for (const auto& e : se) {
      const std::string line = fmt::format("  {}: {:+.1f}% to {:+.1f}% over {} row", e["regime"].get<std::string>(), 100 * e["min_error"].get<double>(),
                                           100 * e["max_error"].get<double>(), e["rows"].get<int>());
      EXPECT_NE(v.text.find(line), std::string::npos) << line << "\n" << v.text;
      EXPECT_NE(o.text.find(fmt::format("    {}: {:+.1f}% to", e["regime"].get<std::string>(), 100 * e["min_error"].get<double>())), std::string::npos)
          << o.text;
    }
  }
  {
    // validation cases that cannot be evaluated (a broken case file in the data folder) do not stop
    // capacity: the answer stands, the field is null with a note, and a warning says why
    const fs::path data = dir / "data";
    fs::create_directories(data / "validation");
    for (const auto& e : fs::directory_iterator(::test::data("scenarios")))
      if (e.path().filename() != "validation") fs::create_symlink(e.path(), data / e.path().filename());
    std::ofstream(data / "validation" / "broken.json") << "{";
    ::setenv("SERVESIM_DATA_DIR", data.c_str(), 1);
    const auto o = ::test::sh("capacity " + (dir / "s42" / "s.json").string() + " --rate " + r +
                              " --ttft-p99 10 --tpot-p99 1 --seeds 1 --quiet --out " + (dir / "capbroken").string());
    ::unsetenv("SERVESIM_DATA_DIR");
    ASSERT_EQ(o.status, 0) << o.text;
    EXPECT_NE(o.text.find("warning: the validation cases could not be evaluated"), std::string::npos) << o.text;
    EXPECT_NE(o.text.find("broken.json"), std::string::npos) << o.text;
    const auto c = nlohmann::json::parse(::test::slurp(dir / "capbroken" / "capacity.json"));
    EXPECT_TRUE(c["serving_error_vs_published"].is_null()) << c["serving_error_vs_published"].dump();
    EXPECT_NE(c["serving_error_note"].get<std::string>().find("broken.json"), std::string::npos);
    EXPECT_EQ(c["answer"]["nodes"], p_needed + 1);
  }
  auto meets = [](std::pair<double, double> x) { return x.first <= 10.0 && x.second <= 1.0; };
  EXPECT_TRUE(meets(run_p99(dir / "a", prefill_bound(42), 3, 1, rate)));
  const auto two = run_p99(dir / "b", prefill_bound(42), 2, 1, rate);
  EXPECT_GT(two.first, 15.0) << "two prefill instances at utilisation 1.25: a growing queue";
  // an SLO no allocation within --max-nodes meets: exit 1, and capacity.json still lists every run
  // with why it missed (it said "every run and why" but held only the configurations). At most 2
  // nodes: the bracket's 1 + 1 allocation (2 nodes), one run; a 1 ms TTFT is below one prefill step.
  {
    const fs::path sc = write_scenario(dir / "none", prefill_bound(42));
    const auto o = ::test::sh("capacity " + sc.string() + " --rate " + r + " --ttft-p99 0.001 --tpot-p99 1 --max-nodes 2 --no-plan-start --quiet --out " +
                              (dir / "capnone").string());
    EXPECT_EQ(o.status, 1) << o.text;
    EXPECT_NE(o.text.find("no configuration met the SLO: not within 2 nodes"), std::string::npos) << o.text;
    const auto c = nlohmann::json::parse(::test::slurp(dir / "capnone" / "capacity.json"));
    EXPECT_FALSE(c["found"].get<bool>());
    ASSERT_EQ(c["runs"].size(), 1u) << c.dump(2);
    EXPECT_EQ(c["runs"][0]["nodes"], 2);
    EXPECT_FALSE(c["runs"][0]["meets_slo"].get<bool>());
    EXPECT_NE(c["runs"][0]["missed"].get<std::string>().find("TTFT"), std::string::npos) << c["runs"][0].dump();
    EXPECT_TRUE(c["deployment"].is_string() && c["scenario"].is_string()) << c.dump(2);
    EXPECT_DOUBLE_EQ(c["asked"]["slo"]["ttft_p99_s"].get<double>(), 0.001);
    EXPECT_DOUBLE_EQ(c["asked"]["slo"]["tpot_p99_s"].get<double>(), 1.0);
    EXPECT_NEAR(c["asked"]["load"]["rate_per_s"].get<double>(), std::stod(r), 1e-9);
  }
  // without a load, or with both, exit 2
  EXPECT_EQ(::test::sh("capacity " + servesim::test::data("scenarios/default.json") + " --quiet --out " + (dir / "x").string()).status, 2);
  EXPECT_EQ(::test::sh("capacity " + servesim::test::data("scenarios/default.json") + " --sessions 10 --quiet --out " + (dir / "x").string()).status, 2);
  fs::remove_all(dir);
}

// The prefill-bound case with near-constant arrivals (gamma, cv² 0.001) at R = x0 / T, searched with
// TTFT p99 <= 2 s and TPOT p99 <= 1 s: its scenario, T = one prefill step of a prompt (step_s), the
// ends of validate's prefill error (f_lo, f_hi), x0 and the answer (p0 prefill instances, 1 decode).
struct ServingCase {
  fs::path dir, sc;
  double step_s = 0, f_lo = 0, f_hi = 0, x0 = 0;
  int p0 = 0;
  ::test::Out o;
  nlohmann::json c;
};
void serving_case(ServingCase& x, const std::string& name) {
  x.dir = fs::temp_directory_path() / ("servesim-capserving-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(x.dir);
  auto j = prefill_bound(42);
  j["workload"]["arrival"] = "gamma", j["workload"]["burstiness"] = 0.001;
  x.sc = write_scenario(x.dir / "s", j);
  const auto st = ::test::sh("step " + x.sc.string() + " --phase prefill --tokens 8192");
  ASSERT_EQ(st.status, 0) << st.text;
  x.step_s = std::stod(st.text.substr(st.text.find("step time") + 9)) / 1e3;
  // the prefill row's range as validate prints it ("  prefill: +2.1% to +20.1% over 6 rows")
  const auto v = ::test::sh("validate");
  const auto at = v.text.find("\n  prefill: ");
  ASSERT_NE(at, std::string::npos) << v.text;
  double lo = 0, hi = 0;
  ASSERT_EQ(std::sscanf(v.text.c_str() + at, "\n  prefill: %lf%% to %lf%%", &lo, &hi), 2) << v.text.substr(at, 80);
  x.f_lo = 1 + lo / 100, x.f_hi = 1 + hi / 100;  // to 0.05 points: validate prints one decimal
  auto far = [](double x) { return x - std::floor(x) >= 0.15 && x - std::floor(x) <= 0.85; };
    for (double r : {2.7, 2.6, 2.5, 2.8, 2.4, 2.3, 2.2})
    if (far(r) && far(r * x.f_lo) && far(r * x.f_hi)) {
      x.x0 = r;
      break;
    }
  ASSERT_GT(x.x0, 0) << "no rate keeps both ends off the edge at f " << x.f_lo << ", " << x.f_hi;
  x.o = ::test::sh("capacity " + x.sc.string() + " --rate " + fmt::format("{:.6f}", x.x0 / x.step_s) +
                            " --ttft-p99 2 --tpot-p99 1 --seeds 1 --quiet --out " + (x.dir / "cap").string());
  ASSERT_EQ(x.o.status, 0) << x.o.text;
  x.c = nlohmann::json::parse(::test::slurp(x.dir / "cap" / "capacity.json"));
  x.p0 = static_cast<int>(std::floor(x.x0)) + 1;
  ASSERT_EQ(x.c["answer"]["prefill_instances"], x.p0) << x.c["answer"].dump();
  ASSERT_EQ(x.c["answer"]["decode_instances"], 1);
}

// The answer at the engine's error against published deployments (capacity_serving.hpp) against the
// stability bound. The prefill-bound case above with near-constant arrivals (gamma, cv² 0.001, so
// that a stable pool has no queue and an unstable one a growing one) at R = x0 / T: P instances
// keep up iff P > x0 · f when every prefill step takes f times longer, so the answer's prefill pool
// is floor(x0 · f) + 1 and its nodes that plus the one decode instance (decode steps of 2 output
// tokens stay far inside TPOT p99 <= 1 s at any factor). f at each end is 1 + the least / largest
// prefill error that `servesim validate` prints; x0 is chosen so that x0 · f lies at least 0.15 from
// a whole number at both ends (the verdicts are then far from the edge).
TEST(CapacityCommand, AnswerAtTheServingErrorIsTheStabilityBound) {
  ServingCase x;
  serving_case(x, "bound");
  if (HasFatalFailure()) return;
  const fs::path& dir = x.dir;
  const double step_s = x.step_s, f_lo = x.f_lo, f_hi = x.f_hi, x0 = x.x0;
  const int p0 = x.p0;
  const auto& o = x.o;
  const auto& c = x.c;
  const auto& n = c["nodes_at_serving_error"];
  // the factors are 1 + the regimes' errors written beside them
  for (const auto& e : c["serving_error_vs_published"])
    if (e["regime"] == "prefill") {
      EXPECT_NEAR(n["least"]["step_factors"]["prefill"].get<double>(), 1 + e["min_error"].get<double>(), 1e-12);
      EXPECT_NEAR(n["largest"]["step_factors"]["prefill"].get<double>(), 1 + e["max_error"].get<double>(), 1e-12);
    }
  EXPECT_NEAR(n["largest"]["step_factors"]["prefill"].get<double>(), f_hi, 5e-4);
  // the largest end: the stability bound at f_hi (one more prefill instance today: 2.7 x 1.201 = 3.24)
  const int p_hi = static_cast<int>(std::floor(x0 * f_hi)) + 1;
  EXPECT_EQ(n["largest"]["nodes"], p_hi + 1) << n.dump(2);
  EXPECT_EQ(n["largest"]["nodes_delta"], p_hi - p0) << n.dump(2);
  EXPECT_EQ(n["largest"]["meets_slo_at_answer"].get<bool>(), p_hi == p0) << n.dump(2);
  // the least end: the same when its factor is >= 1 (the candidates scale down only by rounding)
  if (f_lo >= 1) EXPECT_EQ(n["least"]["nodes"], static_cast<int>(std::floor(x0 * f_lo)) + 2) << n.dump(2);
  else EXPECT_LE(n["least"]["nodes"].get<int>(), p0 + 1) << n.dump(2);
  EXPECT_NE(o.text.find(fmt::format("at the largest errors (x{:.3f}", n["largest"]["step_factors"]["prefill"].get<double>())), std::string::npos) << o.text;
  // every run is listed with its factors; the answer's own run has none
  int scaled = 0;
  for (const auto& r : c["runs"]) scaled += r["step_factors"]["prefill"].get<double>() != 1.0;
  EXPECT_GE(scaled, 2);
  EXPECT_EQ(c["answer"]["step_factors"]["prefill"], 1.0);
  // the p99s' sample: the answer's window holds rate x (120 - 40) s of arrivals, ~690 here, fewer
  // than 1,000: a warning names the count (review: a 78-request "p99" went unremarked)
  const long long n_win = c["answer"]["arrived"].get<long long>();
  EXPECT_NEAR(static_cast<double>(n_win), x0 / step_s * 80, 0.05 * x0 / step_s * 80 + 2);
  EXPECT_EQ(c["p99_sample"]["window_requests"], n_win);
  EXPECT_EQ(c["p99_sample"]["enough"].get<bool>(), n_win >= 1000);
  EXPECT_EQ(o.text.find(fmt::format("warning: the answer's p99s rest on {} requests arrived", n_win)) != std::string::npos, n_win < 1000) << o.text;
  EXPECT_NE(o.text.find(fmt::format("over {} requests arrived in the window", n_win)), std::string::npos) << o.text;

  // `report` of this search's folder (review: a renamed key in capacity.json would blank the report
  // while its hand-made test passed): the answer's nodes, one table row per run, scaled runs named
  const auto rep = ::test::sh("report " + (dir / "cap").string() + " --out " + (dir / "r.html").string() + " --json " + (dir / "r.json").string());
  ASSERT_EQ(rep.status, 0) << rep.text;
  const auto rj = nlohmann::json::parse(::test::slurp(dir / "r.json"));
  ASSERT_EQ(rj["tables"].size(), 3u) << rj["tables"].dump();
  EXPECT_EQ(rj["tables"][0]["rows"][1][1], std::to_string(c["answer"]["nodes"].get<int>()));
  ASSERT_EQ(rj["tables"][2]["rows"].size(), c["runs"].size() + 1);
  int named = 0;
  for (size_t i = 0; i < c["runs"].size(); ++i)
    named += (rj["tables"][2]["rows"][i + 1][5] != "-") == (c["runs"][i]["step_factors"]["prefill"].get<double>() != 1.0 || c["runs"][i]["kernel_factor"].get<double>() != 1.0);
  EXPECT_EQ(named, static_cast<int>(c["runs"].size()));
  fs::remove_all(dir);
}

// The answer at the serving error when no scaled split meets the SLO (capacity_serving.hpp's "none
// met" branch and its per-step TPOT note), on the same case with tighter bounds, and the p99s'
// request count (review, twenty-third session).
TEST(CapacityCommand, NoScaledSplitMeetsTheSloAtTheLargestError) {
  ServingCase x;
  serving_case(x, "none");
  if (HasFatalFailure()) return;
  const fs::path& dir = x.dir;
  const fs::path& sc = x.sc;
  const double step_s = x.step_s, f_lo = x.f_lo, f_hi = x.f_hi, x0 = x.x0;
  const int p0 = x.p0;
  const auto& c = x.c;
  // The "none met" branch: a TTFT bound halfway between the answer's TTFT p99 t1 (no queue: one
  // prefill step of its own prompt plus what follows it) and t1 + (f_hi - 1) · step, the same
  // request with the step f_hi times longer. No pool size lowers a request's own step, so at the
  // largest end the answer and all three scaled-up candidates miss (margin 0.08 steps at today's
  // f_hi 1.20), and "nodes" is null with the both-scaled candidate's nodes in
  // candidates_missed_up_to. TTFT, not TPOT, is the bound,
  // so tpot_bound_per_step is false.
  ASSERT_GT(f_hi - 1, 2 * std::max(0.0, f_lo - 1) + 0.05) << "the two ends are too close for this check";
  const double t1 = c["answer"]["ttft_p99_s"].get<double>();
  const double bound = t1 + 0.5 * (f_hi - 1) * step_s;
  const auto o2 = ::test::sh("capacity " + sc.string() + " --rate " + fmt::format("{:.6f}", x0 / step_s) + " --ttft-p99 " +
                             fmt::format("{:.6f}", bound) + " --tpot-p99 1 --seeds 1 --quiet --out " + (dir / "cap2").string());
  ASSERT_EQ(o2.status, 0) << o2.text;
  const auto c2 = nlohmann::json::parse(::test::slurp(dir / "cap2" / "capacity.json"));
  ASSERT_EQ(c2["answer"]["prefill_instances"], p0) << c2["answer"].dump();
  ASSERT_EQ(c2["answer"]["decode_instances"], 1);
  const auto& hi2 = c2["nodes_at_serving_error"]["largest"];
  EXPECT_FALSE(hi2["meets_slo_at_answer"].get<bool>()) << hi2.dump(2);
  EXPECT_TRUE(hi2["nodes"].is_null()) << hi2.dump(2);
  EXPECT_TRUE(hi2["nodes_delta"].is_null()) << hi2.dump(2);
  // both pools scaled up: prefill ceil(p0 · f_hi), at least p0 + 1; decode by the larger decode factor, at least 2
  const double fd = std::max(hi2["step_factors"]["decode_large"].get<double>(), hi2["step_factors"]["decode_small"].get<double>());
  const int up_p = std::max(p0 + 1, static_cast<int>(std::ceil(p0 * f_hi - 1e-9))), up_d = std::max(2, static_cast<int>(std::ceil(fd - 1e-9)));
  EXPECT_EQ(hi2["candidates_missed_up_to"], up_p + up_d) << hi2.dump(2);
  EXPECT_FALSE(hi2["tpot_bound_per_step"].get<bool>()) << hi2.dump(2);
  EXPECT_NE(o2.text.find(fmt::format("none met up to {} nodes", up_p + up_d)), std::string::npos) << o2.text;
  EXPECT_EQ(hi2["text"].get<std::string>().find("TPOT p99 stays"), std::string::npos) << hi2.dump(2);
  // every TTFT p99 at the largest end is at least the answer's plus (f_hi - 1) steps, less 2% of a step
  for (const auto& r : c2["runs"]) {
    if (r["step_factors"]["prefill"].get<double>() > 1.1 && r["ttft_p99_s"].is_number()) {
      EXPECT_GE(r["ttft_p99_s"].get<double>(), t1 + (f_hi - 1 - 0.02) * step_s) << r.dump();
    }
  }
  // the least end (f_lo 1.02): a request's own step still fits under the bound, so some split
  // meets it, with at most one prefill instance more (the answer's pool runs at utilisation
  // x0 · f_lo / p0 = 0.92 there, and queues)
  const auto& lo2 = c2["nodes_at_serving_error"]["least"];
  ASSERT_TRUE(lo2["nodes"].is_number_integer()) << lo2.dump(2);
  EXPECT_LE(lo2["nodes"].get<int>(), p0 + 2) << lo2.dump(2);

  // The per-step TPOT note: the same with TPOT as the bound. Each request decodes one step in a
  // batch of a few sequences (the <= 32 regime), so TPOT is one decode step, which more decode
  // instances do not shorten: a TPOT bound halfway between the answer's TPOT p99 and that times
  // the largest end's small-batch factor is missed at the largest end by every candidate, those
  // with more decode instances included, and the note says so (tpot_bound_per_step true).
  const double fs_hi = hi2["step_factors"]["decode_small"].get<double>();
  ASSERT_GT(fs_hi, 1.1) << "the largest small-batch decode error is too small for this check";
  const double tp1 = c["answer"]["tpot_p99_s"].get<double>(), tbound = tp1 * (1 + 0.5 * (fs_hi - 1));
  // a reused --out: an earlier search's run files are removed, not left beside this one's (review)
  fs::create_directories(dir / "cap3" / "runs");
  std::ofstream(dir / "cap3" / "runs" / "tp8-mr64-p9-d9-seed99.json") << "{}";
  std::ofstream(dir / "cap3" / "runs" / "notes.txt") << "not a run file: kept";
  const auto o3 = ::test::sh("capacity " + sc.string() + " --rate " + fmt::format("{:.6f}", x0 / step_s) + " --ttft-p99 2 --tpot-p99 " +
                             fmt::format("{:.6f}", tbound) + " --seeds 1 --quiet --out " + (dir / "cap3").string());
  ASSERT_EQ(o3.status, 0) << o3.text;
  const auto c3 = nlohmann::json::parse(::test::slurp(dir / "cap3" / "capacity.json"));
  EXPECT_FALSE(fs::exists(dir / "cap3" / "runs" / "tp8-mr64-p9-d9-seed99.json"));
  EXPECT_TRUE(fs::exists(dir / "cap3" / "runs" / "notes.txt"));
  size_t run_files = 0;
  for (const auto& e : fs::directory_iterator(dir / "cap3" / "runs")) run_files += e.path().extension() == ".json";
  EXPECT_EQ(run_files, c3["runs"].size());
  ASSERT_EQ(c3["answer"]["decode_instances"], 1) << c3["answer"].dump();
  const auto& hi3 = c3["nodes_at_serving_error"]["largest"];
  EXPECT_TRUE(hi3["nodes"].is_null()) << hi3.dump(2);
  EXPECT_TRUE(hi3["tpot_bound_per_step"].get<bool>()) << hi3.dump(2);
  EXPECT_NE(hi3["text"].get<std::string>().find("the TPOT bound looks like one step's time there"), std::string::npos) << hi3.dump(2);
  EXPECT_GE(hi3["tpot_p99_s_at_answer"].get<double>(), tp1 * (1 + 0.9 * (fs_hi - 1))) << hi3.dump(2);
  // the decode instance counts tried are named: the answer's 1 and the scaled-up count
  const int d3 = std::max(2, static_cast<int>(std::ceil(std::max(hi3["step_factors"]["decode_large"].get<double>(), fs_hi) - 1e-9)));
  EXPECT_NE(hi3["text"].get<std::string>().find(fmt::format("instance counts tried (1, {})", d3)), std::string::npos) << hi3.dump(2);
  fs::remove_all(dir);
}
#endif

// Bad options are refused before any run starts, naming the option (review: an unknown cost model
// forked runs and exited 1; attention TPs that fit nothing said "no configuration met the SLO").
TEST(CapacityCommand, BadOptionsExitTwoBeforeAnyRun) {
  const fs::path dir = fs::temp_directory_path() / ("servesim_capacity_bad_" + std::to_string(::getpid()));
  const std::string sc = servesim::test::data("scenarios/agent-sessions.json");
  auto o = ::test::sh("capacity " + sc + " --only k3-h200 --sessions 10 --quiet --cost-model bogus --out " + (dir / "a").string());
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.text.find("--cost-model: unknown cost model \"bogus\""), std::string::npos) << o.text;
  EXPECT_FALSE(fs::exists(dir / "a" / "runs")) << "a run was started";
  o = ::test::sh("capacity " + sc + " --only k3-h200 --sessions 10 --quiet --attn-tp 3 --attn-tp 5 --out " + (dir / "b").string());
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.text.find("attn_tp: 3 must divide ep = 32"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("--attn-tp / --max-running: no combination fits k3-h200"), std::string::npos) << o.text;
  fs::remove_all(dir);
}
