// servesim sweep GRID.json: every point of a grid run as a child `servesim run` (one per core),
// each into a temporary folder renamed into <out>/points/<id> when it finished; then one results
// table (results.csv, results.json), a row per point and deployment, in grid order. Re-running
// skips points whose folder holds a complete summary.json for the same point scenario. Started by
// an MPI launcher, the ranks share the points out (sweep_mpi.hpp) and rank 0 writes the table.
#include "sim/cli/sweep_cmd.hpp"
#include "sim/cli/sweep_grid.hpp"
#include "sim/cli/sweep_mpi.hpp"
#include "sim/cli/sweep_runner.hpp"

#include <fmt/core.h>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

namespace servesim::cli {

namespace {

// The points not done yet, run `jobs` at a time on this machine; returns which points failed.
std::vector<bool> run_points(const Grid& g, const fs::path& pts, const std::vector<size_t>& pending, int jobs, Progress& pr) {
  std::vector<bool> failed(g.points.size(), false);
  LocalRunner lr(g, pts);
  for (size_t i : pending) {
    while (static_cast<int>(lr.running()) >= jobs) {
      const auto d = lr.wait_one();
      if (!d.ok) failed[d.index] = true, ++pr.failed;
      ++pr.done;
      pr.print();
    }
    lr.spawn(i);
  }
  while (lr.running() > 0) {
    const auto d = lr.wait_one();
    if (!d.ok) failed[d.index] = true, ++pr.failed;
    ++pr.done;
    pr.print();
  }
  return failed;
}

// One child per core this process may run on: the cores of its affinity mask when a launcher bound
// it (mpirun binds each rank to a core or socket; the children inherit it), else the machine's
// cores shared among the `local_ranks` ranks on it.
int default_jobs(int local_ranks) {
  const int online = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  CPU_ZERO(&set);
  const int mine = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : online;
  if (mine > 0 && mine < online) return mine;
  return std::max(1, online / std::max(1, local_ranks));
}

void write_table(const Grid& g, const fs::path& out, const std::vector<bool>& failed) {
  ojson rows = ojson::array();
  for (size_t i = 0; i < g.points.size(); ++i) {
    const auto& p = g.points[i];
    ojson summary;
    const bool ok = !failed[i] && fs::exists(out / "points" / p.id / "summary.json");
    if (ok) summary = ojson::parse(slurp_file(out / "points" / p.id / "summary.json"));
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
  int launcher_size = 1;
  const bool launched = launched_by_mpi(launcher_size);
  if (launched && !mpi_built()) {
    // servesim links SimGrid, whose SMPI defines MPI_Init too: the MPI side is its own program
    const fs::path self = fs::read_symlink("/proc/self/exe");
    const fs::path helper = self.parent_path() / "servesim-mpi-sweep";
    if (fs::exists(helper)) {
      setenv("SERVESIM_RUN_BINARY", self.c_str(), 1);
      std::vector<std::string> args = {helper.string(), a.grid, "--out", a.out, "--jobs", std::to_string(a.jobs)};
      std::vector<char*> argv;
      for (auto& s : args) argv.push_back(s.data());
      argv.push_back(nullptr);
      execv(helper.c_str(), argv.data());
      fmt::print(stderr, "error: sweep: cannot start {}\n", helper.string());
      return 2;
    }
    if (launcher_size != 1) {  // more ranks, or a launcher that does not say how many (PMIx): refuse
      fmt::print(stderr, "error: sweep: started by an MPI launcher as one of {} ranks, but this servesim was built without MPI "
                 "(no {}: install libopenmpi-dev and rebuild; README \"Sweeps beyond one machine\")\n",
                 launcher_size > 1 ? std::to_string(launcher_size) : std::string("several"), helper.string());
      return 2;
    }
  }
  const MpiWorld w = launched && mpi_built() ? mpi_init() : MpiWorld{};
  if (w.active && launcher_size > 1 && w.size != launcher_size) {
    // e.g. srun with a PMI plugin this OpenMPI does not speak: every task is a world of its own and
    // would run the whole grid into the same folder
    fmt::print(stderr, "error: sweep: the launcher started {} ranks but MPI_Comm_size says {}: the ranks did not join one MPI world "
               "(under Slurm use mpirun inside the allocation, or srun --mpi=pmix with a matching OpenMPI)\n", launcher_size, w.size);
    mpi_finalize(w);
    return 2;
  }
  Grid g;
  std::string error;
  try {
    g = load_grid(a.grid, a.check_point);
  } catch (const std::exception& e) {
    error = e.what();
  }
  // every rank reads the grid itself (on a cluster it must be on a filesystem they all see)
  if (mpi_max(w, error.empty() ? 0 : 1)) {
    if (!error.empty()) fmt::print(stderr, "error: {}{}\n", w.active ? fmt::format("rank {}: ", w.rank) : std::string(), error);
    mpi_finalize(w);
    return 2;
  }
  const fs::path out = a.out.empty() ? fs::path("out") / "sweeps" / fs::path(a.grid).stem() : fs::path(a.out);
  const int jobs = a.jobs > 0 ? a.jobs : default_jobs(w.local_size);
  fs::create_directories(out / "points");
  Progress pr;
  pr.total = g.points.size();
  pr.on = w.rank == 0 && isatty(2);
  std::vector<size_t> pending;
  for (size_t i = 0; i < g.points.size(); ++i)
    if (w.rank == 0 && point_done(out / "points" / g.points[i].id, g.points[i], g.only)) ++pr.done, ++pr.skipped;
    else if (w.rank == 0) pending.push_back(i);
  if (w.rank == 0)
    fmt::print(stderr, "sweep: {} points ({} axes) of {}, {} to run, {} at a time{}, into {}\n", g.points.size(), g.axes.size(),
               g.scenario_file, pending.size(), jobs, w.active ? fmt::format(" on each of {} MPI ranks", w.size) : std::string(),
               out.string());
  pr.print();
  const auto failed = w.active ? mpi_run_points(w, g, out / "points", pending, jobs, pr) : run_points(g, out / "points", pending, jobs, pr);
  pr.finish();
  int status = 0;
  if (w.rank == 0) {
    write_table(g, out, failed);
    const auto nfail = std::count(failed.begin(), failed.end(), true);
    fmt::print("sweep: {}/{} points done ({} resumed, {} failed) in {}; results: {}/results.csv, {}/results.json\n", pr.done, pr.total,
               pr.skipped, nfail, duration_text(pr.elapsed_s()), out.string(), out.string());
    status = nfail ? 1 : 0;
  }
  mpi_finalize(w);
  return status;
}

}  // namespace servesim::cli
