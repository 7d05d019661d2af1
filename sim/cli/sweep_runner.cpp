// servesim sweep: child `servesim run` processes for the points, and the progress line.
#include "sim/cli/sweep_runner.hpp"

#include <fmt/core.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <stdexcept>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

namespace servesim::cli {

std::string slurp_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool point_done(const fs::path& dir, const SweepPoint& p, const std::string& only) {
  if (!fs::exists(dir / "summary.json") || !fs::exists(dir / "point.json")) return false;
  try {
    if (ojson::parse(slurp_file(dir / "point.json")) != p.scenario) return false;
    // the files it read, byte for byte (a model, hardware, fitted-parameter or trace file changed
    // since: run again)
    if (!fs::exists(dir / "inputs.txt") || slurp_file(dir / "inputs.txt") != p.inputs) return false;
    const ojson s = ojson::parse(slurp_file(dir / "summary.json"));
    if (!s.contains("deployments") || !s["deployments"].is_array() || s["deployments"].empty()) return false;
    // the deployments this sweep simulates (a grid's "only" is not in point.json: rev25 found a
    // re-run with another "only" resuming the old deployment's results), each with a readable summary
    std::vector<std::string> want, have;
    if (!only.empty()) want.push_back(only);
    else
      for (const auto& d : p.scenario.at("deployments")) want.push_back(d.at("name").get<std::string>());
    for (const auto& d : s["deployments"]) {
      have.push_back(d.at("deployment").get<std::string>());
      const fs::path ds = dir / have.back() / "summary.json";  // absent where an MPI rank sent only the top-level file
      if (fs::exists(ds) && !ojson::parse(slurp_file(ds)).is_object()) return false;
    }
    return want == have;
  } catch (const std::exception&) {
    return false;
  }
}

void LocalRunner::spawn(size_t index) {
  const auto& p = g_.points[index];
  const fs::path tmp = pts_ / (".tmp-" + p.id);
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  std::ofstream(tmp / "point.json") << p.scenario.dump(2) << "\n";
  std::ofstream(tmp / "inputs.txt") << p.inputs;
  // the simulator: this program, or the one that started the MPI helper (sweep_cmd.cpp)
  const char* run_binary = std::getenv("SERVESIM_RUN_BINARY");
  const std::string self = run_binary ? std::string(run_binary) : fs::read_symlink("/proc/self/exe").string();
  std::vector<std::string> args = {self, "run", (tmp / "point.json").string(), "--out", tmp.string(), "--jobs", "1", "--no-timeline"};
  if (!g_.only.empty()) args.insert(args.end(), {"--only", g_.only});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log = (tmp / "run.log").string();
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK") ? std::getenv("OMPI_COMM_WORLD_RANK")
                     : std::getenv("PMIX_RANK")          ? std::getenv("PMIX_RANK")
                                                         : std::getenv("PMI_RANK");
  const std::string header = fmt::format("# sweep point {} on {}{}\n", p.id, host, rank ? fmt::format(", MPI rank {}", rank) : "");
  // the child does only async-signal-safe calls before exec (an MPI rank has threads)
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("sweep: fork failed");
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      if (write(fd, header.data(), header.size()) < 0) _exit(127);
      close(fd);
    }
    execv(self.c_str(), argv.data());
    _exit(127);
  }
  running_[pid] = index;
}

std::optional<LocalRunner::Done> LocalRunner::poll() {
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    int st = 0;
    if (waitpid(it->first, &st, WNOHANG) != it->first) continue;
    const size_t i = it->second;
    running_.erase(it);
    const auto& p = g_.points[i];
    const fs::path tmp = pts_ / (".tmp-" + p.id);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      fs::remove_all(pts_ / p.id);
      fs::rename(tmp, pts_ / p.id);
      return Done{i, true};
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    fmt::print(stderr, "\nsweep: point {} failed (exit {}); its log: {} (on {})\n", p.id, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
               (tmp / "run.log").string(), host);
    return Done{i, false};
  }
  return std::nullopt;
}

LocalRunner::Done LocalRunner::wait_one() {
  for (;;) {
    if (auto d = poll()) return *d;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string duration_text(double s) {
  const long long t = std::llround(std::max(0.0, s));
  if (t < 60) return fmt::format("{} s", t);
  if (t < 3600) return fmt::format("{} min {:02} s", t / 60, t % 60);
  return fmt::format("{} h {:02} min", t / 3600, (t % 3600) / 60);
}

double Progress::elapsed_s() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }

double Progress::eta_s() const {
  const size_t ran = done - skipped;
  if (done >= total) return 0;
  if (ran == 0) return -1;
  return elapsed_s() / static_cast<double>(ran) * static_cast<double>(total - done);
}

void Progress::print() const {
  if (!on) return;
  constexpr int width = 24;
  const int filled = total ? static_cast<int>(width * done / total) : width;
  const double eta = eta_s();
  fmt::print(stderr, "\rsweep: [{}{}] {}/{} points ({} resumed, {} failed), {} elapsed, ETA {}   ", std::string(filled, '#'),
             std::string(width - filled, '.'), done, total, skipped, failed, duration_text(elapsed_s()), eta < 0 ? "?" : duration_text(eta));
  std::fflush(stderr);
}

void Progress::finish() const {
  if (on) fmt::print(stderr, "\n");
}

}  // namespace servesim::cli
