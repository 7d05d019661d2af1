// servesim sweep GRID.json: every point of a grid run as a child `servesim run` (one per core),
// each into a temporary folder renamed into <out>/points/<id> when it finished; then one results
// table (results.csv, results.json), a row per point and deployment, in grid order. Re-running
// skips points whose folder holds a complete summary.json for the same point scenario.
#include "sim/cli/sweep_grid.hpp"
#include "sim/cli/sweep_cmd.hpp"

#include <fmt/core.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

namespace servesim::cli {

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A finished point: its folder holds the same point.json and a summary.json with every deployment.
bool point_done(const fs::path& dir, const SweepPoint& p) {
  if (!fs::exists(dir / "summary.json") || !fs::exists(dir / "point.json")) return false;
  try {
    if (ojson::parse(slurp(dir / "point.json")) != p.scenario) return false;
    const ojson s = ojson::parse(slurp(dir / "summary.json"));
    return s.contains("deployments") && s["deployments"].is_array() && !s["deployments"].empty();
  } catch (const std::exception&) {
    return false;
  }
}

pid_t spawn(const Grid& g, const fs::path& tmp) {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::vector<std::string> args = {self, "run", (tmp / "point.json").string(), "--out", tmp.string(), "--jobs", "1", "--no-timeline"};
  if (!g.only.empty()) args.insert(args.end(), {"--only", g.only});
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const std::string log = (tmp / "run.log").string();
  FILE* f = std::freopen(log.c_str(), "w", stdout);
  if (f) dup2(fileno(stdout), 2);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(self.c_str(), argv.data());
  _exit(127);
}

struct Progress {
  size_t total = 0, done = 0, failed = 0, skipped = 0;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  void print() const {
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const size_t ran = done - skipped;
    const size_t left = total - done;
    std::string eta = ran ? fmt::format("{:.0f} s", el / ran * left) : std::string("?");
    fmt::print(stderr, "{}sweep: {}/{} points done ({} resumed, {} failed), elapsed {:.0f} s, ETA {}{}", isatty(2) ? "\r" : "", done,
               total, skipped, failed, el, left ? eta : "0 s", isatty(2) && left ? "" : "\n");
  }
};

// Runs the points not yet done, `jobs` at a time; returns which points failed.
std::vector<bool> run_points(const Grid& g, const fs::path& pts, int jobs) {
  std::vector<bool> failed(g.points.size(), false);
  Progress pr;
  pr.total = g.points.size();
  std::map<pid_t, size_t> running;
  auto reap = [&] {
    int st = 0;
    const pid_t pid = wait(&st);
    if (pid <= 0 || !running.count(pid)) return;
    const size_t i = running[pid];
    running.erase(pid);
    const auto& p = g.points[i];
    const fs::path tmp = pts / (".tmp-" + p.id);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      fs::remove_all(pts / p.id);
      fs::rename(tmp, pts / p.id);
    } else {
      failed[i] = true;
      ++pr.failed;
      fmt::print(stderr, "\nsweep: point {} failed (exit {}); its log: {}\n", p.id, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                 (tmp / "run.log").string());
    }
    ++pr.done;
    pr.print();
  };
  for (size_t i = 0; i < g.points.size(); ++i) {
    const auto& p = g.points[i];
    if (point_done(pts / p.id, p)) {
      ++pr.done, ++pr.skipped;
      continue;
    }
    while (static_cast<int>(running.size()) >= jobs) reap();
    const fs::path tmp = pts / (".tmp-" + p.id);
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    std::ofstream(tmp / "point.json") << p.scenario.dump(2) << "\n";
    running[spawn(g, tmp)] = i;
  }
  if (pr.skipped) pr.print();
  while (!running.empty()) reap();
  return failed;
}

void write_table(const Grid& g, const fs::path& out, const std::vector<bool>& failed) {
  ojson rows = ojson::array();
  for (size_t i = 0; i < g.points.size(); ++i) {
    const auto& p = g.points[i];
    ojson summary;
    const bool ok = !failed[i] && fs::exists(out / "points" / p.id / "summary.json");
    if (ok) summary = ojson::parse(slurp(out / "points" / p.id / "summary.json"));
    for (auto& r : point_rows(g, p, summary, ok)) rows.push_back(r);
  }
  ojson params = ojson::array();
  for (const auto& a : g.axes) params.push_back({{"path", a.path}, {"values", a.values}});
  const ojson doc = {{"grid", fs::path(g.file).filename().string()}, {"scenario", fs::path(g.scenario_file).filename().string()},
                     {"points", g.points.size()}, {"parameters", params}, {"rows", rows}};
  std::ofstream(out / "results.json") << doc.dump(2) << "\n";
  std::ofstream(out / "results.csv") << rows_csv(g, rows);
}

}  // namespace

int sweep(const SweepArgs& a) {
  Grid g;
  try {
    g = load_grid(a.grid);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }
  const fs::path out = a.out.empty() ? fs::path("out") / "sweeps" / fs::path(a.grid).stem() : fs::path(a.out);
  const int jobs = a.jobs > 0 ? a.jobs : std::max(1u, std::thread::hardware_concurrency());
  fs::create_directories(out / "points");
  fmt::print(stderr, "sweep: {} points ({} axes) of {}, {} at a time, into {}\n", g.points.size(), g.axes.size(), g.scenario_file, jobs,
             out.string());
  const auto failed = run_points(g, out / "points", jobs);
  write_table(g, out, failed);
  const auto nfail = std::count(failed.begin(), failed.end(), true);
  fmt::print("sweep: {} points, {} failed; results: {}/results.csv, {}/results.json\n", g.points.size(), nfail, out.string(), out.string());
  return nfail ? 1 : 0;
}

}  // namespace servesim::cli
