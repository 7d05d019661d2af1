// servesim cli: what `servesim capacity`'s steps share (capacity_cmd.cpp, capacity_band.cpp): a
// configuration and one evaluated run, the SLO check, and the runner that forks one process a run
// (SimGrid's engine is a per-process singleton), `jobs` at a time, remembering every result.
#pragma once
#include "sim/cli/capacity_cmd.hpp"
#include "sim/cli/capacity_search.hpp"
#include "sim/cli/common.hpp"

#include "scenarios/deployment.hpp"
#include "sim/exporters/report/slo.hpp"

#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

namespace servesim::cli::cap {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Config {
  int attn_tp = 1, max_running = 1;
  std::string label() const { return fmt::format("attn TP {}, decode batch limit {}", attn_tp, max_running); }
};

// One evaluated run: what the SLO check read from its summary.json.
struct Point {
  Config cfg;
  Alloc alloc;
  std::uint64_t seed = 0;
  double cost_factor = 1;  // every kernel latency of the cost model times this (the band's held-out error)
  StepScale serving;       // every step's time times its regime's factor (the engine's error against published deployments)
  int nodes = 0, gpus = 0;
  bool ok = false;
  std::string why;  // the first bound missed
  double ttft_p99_s = NAN, tpot_p99_s = NAN, wall_s = 0;
  long long arrived = 0, rejected = 0, waiting = 0;  // waiting: in flight at the end without a first token
  json summary;
};

/// n instances scaled by f (> 0), rounded up (a product within 1e-9 of a whole number stays it), at
/// least 1: the band's and the serving error's scaled pools.
inline int scaled_instances(int n, double f) { return std::max(1, static_cast<int>(std::ceil(n * f - 1e-9))); }

inline DeploymentSpec with(DeploymentSpec d, const Config& c, const Alloc& a) {
  d.prefill.attn_tp = d.decode.attn_tp = c.attn_tp;
  d.decode.max_running = c.max_running;
  d.decode.max_batch_tokens = std::max<long long>(d.decode.max_batch_tokens, c.max_running);
  d.prefill.instances = a.prefill, d.decode.instances = a.decode;
  d.cluster.nodes = required_nodes(d);
  return d;
}

inline double p99_s(const json& pct) { return pct["p99_ms"].is_null() ? INFINITY : pct["p99_ms"].get<double>() / 1e3; }

// The SLO check of one run (README "servesim capacity"; sim/exporters/report/slo.hpp, the same test
// as the sweep report's "nodes needed").
inline void judge(Point& p, const CapacityArgs& a) {
  const SloVerdict v = judge_slo(p.summary, a.ttft_p99_s, a.tpot_p99_s, a.max_rejected);
  p.ok = v.ok, p.why = v.why;
  p.arrived = v.arrived, p.rejected = v.rejected, p.waiting = v.waiting;
  p.ttft_p99_s = v.ttft_p99_s, p.tpot_p99_s = v.tpot_p99_s;
}

/// The child: one run of `d` (kernel times x cost_factor, step times x `serving`'s factor of their
/// regime), its summary.json written to `file`; exit status.
int simulate_to(const Scenario& s, const DeploymentSpec& d, std::uint64_t seed, double cost_factor, const StepScale& serving,
                const std::filesystem::path& file);

/// The text of step factors in keys, file names and progress lines ("p1.201-dl1.211-ds1.332").
inline std::string scale_text(const StepScale& x) { return fmt::format("p{:.3f}-dl{:.3f}-ds{:.3f}", x.prefill, x.decode_large, x.decode_small); }

class Runner {
 public:
  Runner(const Scenario& s, const DeploymentSpec& base, const CapacityArgs& a, fs::path out)
      : s_(s), base_(base), a_(a), out_(std::move(out)), jobs_(a.jobs > 0 ? a.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {}

  // Runs the points not run yet, `jobs` at a time, each in its own process; every point judged.
  // A point already run (same configuration, allocation and seed) is answered from memory.
  std::vector<Point> run(const Config& c, const std::vector<Alloc>& allocs, std::uint64_t seed, double factor = 1, const StepScale& serving = {}) {
    std::vector<Probe> ps;
    for (const auto& al : allocs) ps.push_back({al, seed, factor, serving});
    return run(c, ps);
  }
  struct Probe {
    Alloc alloc;
    std::uint64_t seed = 0;
    double factor = 1;
    StepScale serving;
  };
  // The same for probes of different seeds and kernel-time factors (one batch, `jobs` at a time).
  std::vector<Point> run(const Config& c, const std::vector<Probe>& probes) {
    std::vector<Point> out;
    std::vector<Probe> todo;
    std::set<std::string> queued;
    for (const auto& pr : probes)
      if (!memo_.count(key(c, pr.alloc, pr.seed, pr.factor, pr.serving)) && queued.insert(key(c, pr.alloc, pr.seed, pr.factor, pr.serving)).second)
        todo.push_back(pr);
    for (const Point& p : run_new(c, todo)) memo_[key(c, p.alloc, p.seed, p.cost_factor, p.serving)] = p;
    for (const auto& pr : probes) out.push_back(memo_.at(key(c, pr.alloc, pr.seed, pr.factor, pr.serving)));
    return out;
  }
  // A result already run, if any (nothing is run).
  std::optional<Point> known(const Config& c, const Alloc& al, std::uint64_t seed, double factor = 1, const StepScale& serving = {}) const {
    const auto it = memo_.find(key(c, al, seed, factor, serving));
    return it == memo_.end() ? std::nullopt : std::optional<Point>(it->second);
  }

  const std::vector<Point>& done() const { return done_; }
  int nodes(const Config& c, const Alloc& al) const { return required_nodes(with(base_, c, al)); }

  /// Whether `name` (a file name in runs/) has the form file() gives a run: tp*-mr*-…-seed*.json.
  static bool is_run_file_name(const std::string& name) {
    return name.rfind("tp", 0) == 0 && name.find("-mr") != std::string::npos && name.find("-seed") != std::string::npos && name.size() > 5 &&
           name.compare(name.size() - 5, 5, ".json") == 0;
  }
 private:
  static std::string key(const Config& c, const Alloc& a, std::uint64_t seed, double factor, const StepScale& serving) {
    return fmt::format("{}/{}/{}/{}/{}/{:.6f}/{:.6f}/{:.6f}/{:.6f}", c.attn_tp, c.max_running, a.prefill, a.decode, seed, factor, serving.prefill,
                       serving.decode_large, serving.decode_small);
  }
  std::vector<Point> run_new(const Config& c, const std::vector<Probe>& probes) {
    std::vector<Point> pts;
    std::map<pid_t, size_t> running;
    std::map<size_t, std::chrono::steady_clock::time_point> t0;
    auto reap = [&] {
      int st = 0;
      const pid_t pid = wait(&st);
      if (pid <= 0) return;
      const size_t i = running[pid];
      Point& p = pts[i];
      running.erase(pid);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) throw std::runtime_error(fmt::format("the run of {} failed", file(p).string()));
      p.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0[i]).count();
      p.summary = json::parse(std::ifstream(file(p)));
      judge(p, a_);
      if (!a_.quiet)
        fmt::print(stderr, "  {} | P {:>3} D {:>3} | {:>4} nodes | seed {}{} | TTFT p99 {:>9.3f} s, TPOT p99 {:>7.1f} ms over {} req | {} (wall {:.1f} s)\n",
                   p.cfg.label(), p.alloc.prefill, p.alloc.decode, p.nodes, p.seed,
                   (p.cost_factor != 1 ? fmt::format(", kernel times x{:.3f}", p.cost_factor) : std::string()) +
                       (p.serving.identity() ? std::string() : ", step times " + scale_text(p.serving)),
                   p.ttft_p99_s, p.tpot_p99_s * 1e3, p.arrived,
                   p.ok ? "meets the SLO" : "misses: " + p.why, p.wall_s);
      done_.push_back(p);
    };
    for (const auto& pr : probes) {
      Point p;
      p.cfg = c, p.alloc = pr.alloc, p.seed = pr.seed, p.cost_factor = pr.factor, p.serving = pr.serving;
      const DeploymentSpec d = with(base_, c, pr.alloc);
      p.nodes = required_nodes(d), p.gpus = required_gpus(d);
      pts.push_back(p);
    }
    for (size_t i = 0; i < pts.size(); ++i) {
      while (static_cast<int>(running.size()) >= jobs_) reap();
      std::fflush(nullptr);
      t0[i] = std::chrono::steady_clock::now();
      const pid_t pid = fork();
      if (pid < 0) throw std::runtime_error("fork failed");
      if (pid == 0) {
        const int code = simulate_to(s_, with(base_, c, pts[i].alloc), pts[i].seed, pts[i].cost_factor, pts[i].serving, file(pts[i]));
        std::fflush(nullptr);
        _exit(code);
      }
      running[pid] = i;
    }
    while (!running.empty()) reap();
    return pts;
  }
  fs::path file(const Point& p) const {
    return out_ / "runs" / fmt::format("tp{}-mr{}-p{}-d{}-seed{}{}.json", p.cfg.attn_tp, p.cfg.max_running, p.alloc.prefill, p.alloc.decode, p.seed,
                                       (p.cost_factor != 1 ? fmt::format("-kernels-x{:.3f}", p.cost_factor) : std::string()) +
                                           (p.serving.identity() ? std::string() : "-steps-" + scale_text(p.serving)));
  }
  const Scenario& s_;
  const DeploymentSpec& base_;
  const CapacityArgs& a_;
  fs::path out_;
  int jobs_;
  std::vector<Point> done_;
  std::map<std::string, Point> memo_;
};

struct Answer {
  Config cfg;
  CapacitySearchResult r;
  Point point;
};

}  // namespace servesim::cli::cap
