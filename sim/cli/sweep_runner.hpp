// servesim sweep: running points as child `servesim run` processes on this machine, `jobs` at a
// time (LocalRunner), and the progress line with an ETA (Progress). Used by the single-process
// sweep and by every rank of an MPI sweep (sweep_mpi.hpp).
#pragma once
#include "sim/cli/sweep_grid.hpp"

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace servesim::cli {

/// The whole file at `p` ("" when it cannot be read).
std::string slurp_file(const std::filesystem::path& p);

/// A finished point: `dir` holds the same point.json and a summary.json whose deployments are the
/// ones this sweep simulates (`only`, or every deployment of the point when empty), in order, and
/// each <deployment>/summary.json that exists readable (an MPI rank keeps only the top-level file of
/// a remote point). False on anything unreadable (the point runs again).
bool point_done(const std::filesystem::path& dir, const SweepPoint& p, const std::string& only);

/// Child processes `servesim run <pts>/.tmp-<id>/point.json --jobs 1 --no-timeline`; a point that
/// exited 0 is renamed to <pts>/<id>, a failed one keeps its temporary folder (run.log inside).
class LocalRunner {
 public:
  LocalRunner(const Grid& g, std::filesystem::path pts) : g_(g), pts_(std::move(pts)) {}
  void spawn(size_t index);             ///< starts point `index` (a fresh temporary folder)
  size_t running() const { return running_.size(); }
  struct Done {
    size_t index;
    bool ok;
  };
  /// One child that has exited (its folder renamed when it succeeded), or nullopt if none has yet.
  std::optional<Done> poll();
  /// Blocks (polling every 20 ms) until a child exits; precondition: running() > 0.
  Done wait_one();

 private:
  const Grid& g_;
  std::filesystem::path pts_;
  std::map<pid_t, size_t> running_;
};

/// "sweep: [####......] 12/100 points (3 resumed, 0 failed), 41 s elapsed, ETA 5 min" on stderr,
/// redrawn in place; only when stderr is a terminal (`on`), else silent.
struct Progress {
  size_t total = 0, done = 0, failed = 0, skipped = 0;
  bool on = false;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  double elapsed_s() const;
  /// The seconds left at the rate points have been finishing (resumed ones not counted); < 0: unknown.
  double eta_s() const;
  void print() const;
  void finish() const;  ///< ends the redrawn line (a newline) when it was drawn
};

/// "42 s", "3 min 20 s", "1 h 05 min".
std::string duration_text(double s);

}  // namespace servesim::cli
