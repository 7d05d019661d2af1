// servesim cli: the progress line of `servesim run` (issue 14). Each deployment runs in a child
// process (run_cmd.cpp); a child's ProgressSink writes its simulated time and ended requests into
// its slot of an anonymous shared mapping made before the fork; the parent draws one line on
// stderr: per deployment the share done, and an ETA. Shown only when stderr is a terminal, after
// the first 2 s of wall time, and not with --quiet; wall-clock figures never reach output files.
#pragma once
#include "sim/events.hpp"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace servesim::cli {

struct ProgressSlot {
  std::atomic<double> sim_s{0};
  std::atomic<long long> ended{0};
  std::atomic<int> done{0};
};

/// What a child reports: the end of every step (simulated time) and every ended request.
class ProgressSink final : public EventSink {
 public:
  explicit ProgressSink(ProgressSlot* s) : s_(s) {}
  void on_step(const StepEvent& e) override { s_->sim_s.store(e.end_s, std::memory_order_relaxed); }
  void on_request(const RequestRecord&) override { s_->ended.fetch_add(1, std::memory_order_relaxed); }
  void on_end(double t) override { s_->sim_s.store(t), s_->done.store(1); }

 private:
  ProgressSlot* s_;
};

class ProgressBoard {
 public:
  /// `horizon_s` > 0 or `requests` > 0 (the workload's known request count) give the share done;
  /// with neither only the simulated time shows.
  ProgressBoard(std::vector<std::string> names, double horizon_s, long long requests, bool enabled)
      : names_(std::move(names)), horizon_(horizon_s), requests_(requests), enabled_(enabled && isatty(2)), t0_(clock::now()) {
    bytes_ = sizeof(ProgressSlot) * std::max<size_t>(1, names_.size());
    void* m = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return;
    slots_ = static_cast<ProgressSlot*>(m);
    for (size_t i = 0; i < names_.size(); ++i) new (&slots_[i]) ProgressSlot();
  }
  ~ProgressBoard() {
    if (slots_) munmap(slots_, bytes_);
  }
  ProgressBoard(const ProgressBoard&) = delete;
  ProgressBoard& operator=(const ProgressBoard&) = delete;

  ProgressSlot* slot(size_t i) { return slots_ ? &slots_[i] : nullptr; }

  /// Redraws the line (parent; call every ~0.2 s).
  void draw() {
    const double wall = std::chrono::duration<double>(clock::now() - t0_).count();
    if (!enabled_ || !slots_ || wall < 2.0) return;
    std::string line;
    double sum = 0;
    bool known = horizon_ > 0 || requests_ > 0;
    for (size_t i = 0; i < names_.size(); ++i) {
      const ProgressSlot& s = slots_[i];
      const double f = share(s);
      sum += f;
      line += fmt::format("{}{} {}", i ? " | " : "", names_[i],
                          known ? fmt::format("{:3.0f}%", 100 * f) : fmt::format("{:.0f} s simulated", s.sim_s.load()));
    }
    const double f = names_.empty() ? 1.0 : sum / static_cast<double>(names_.size());
    if (known && f > 0.01) line += fmt::format("  ETA {:.0f} s", wall * (1 - f) / f);
    if (line.size() > 150) line = line.substr(0, 147) + "...";
    std::fprintf(stderr, "\r%-150s", line.c_str());
    drawn_ = true;
  }
  /// Clears the line (before the table is printed).
  void finish() {
    if (drawn_) std::fprintf(stderr, "\r%-150s\r", "");
  }

 private:
  using clock = std::chrono::steady_clock;
  double share(const ProgressSlot& s) const {
    if (s.done.load()) return 1.0;
    double f = 0;
    if (horizon_ > 0) f = std::max(f, s.sim_s.load() / horizon_);
    if (requests_ > 0) f = std::max(f, static_cast<double>(s.ended.load()) / static_cast<double>(requests_));
    return std::clamp(f, 0.0, 1.0);
  }
  std::vector<std::string> names_;
  double horizon_;
  long long requests_;
  bool enabled_;
  clock::time_point t0_;
  ProgressSlot* slots_ = nullptr;
  size_t bytes_ = 0;
  bool drawn_ = false;
};

}  // namespace servesim::cli
