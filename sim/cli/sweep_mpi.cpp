// servesim sweep over MPI ranks: a work queue on rank 0 (sweep_mpi.hpp says the protocol's why).
//
// Messages (MPI_COMM_WORLD): a worker sends kAsk (empty) when it has a free slot; rank 0 answers
// kGive with one point index (int64), or -1 when none is left, after which that worker asks no
// more. A worker sends kResult when a point ended: int64 index, one byte ok, then the point's
// summary.json text. Rank 0 runs points of its own between polls of the queue.
#include "sim/cli/sweep_mpi.hpp"

#include <fmt/core.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#ifdef SERVESIM_HAVE_MPI
#include <mpi.h>
#endif

namespace fs = std::filesystem;

namespace servesim::cli {

bool launched_by_mpi(int& size) {
  // Only whether a launcher started us, and the world size it states if it does (0: not stated).
  // The ranks a sweep runs on are MPI_Comm_size / MPI_Comm_rank of MPI_COMM_WORLD (mpi_init), never
  // these variables (review: MPICH's MPI_LOCALNRANKS is the ranks on this host, not the world).
  size = 0;
  bool launched = false;
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK"})
    launched = launched || std::getenv(v) != nullptr;
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* s = std::getenv(v); s && size == 0) size = std::max(0, std::atoi(s));
  if (!launched) size = 1;
  return launched;
}

#ifndef SERVESIM_HAVE_MPI

bool mpi_built() { return false; }
MpiWorld mpi_init() { return {}; }
void mpi_finalize(const MpiWorld&) {}
int mpi_max(const MpiWorld&, int v) { return v; }
std::vector<bool> mpi_run_points(const MpiWorld&, const Grid&, const fs::path&, const std::vector<size_t>&, int, Progress&) {
  throw std::logic_error("servesim was built without MPI");
}

#else

namespace {

constexpr int kAsk = 1, kGive = 2, kResult = 3;

void send_result(size_t index, bool ok, const std::string& summary) {
  std::string msg(9, '\0');
  const std::int64_t i = static_cast<std::int64_t>(index);
  std::memcpy(msg.data(), &i, 8);
  msg[8] = ok ? 1 : 0;
  msg += summary;
  MPI_Send(msg.data(), static_cast<int>(msg.size()), MPI_BYTE, 0, kResult, MPI_COMM_WORLD);
}

// A worker: ask while a slot is free, run what rank 0 gives, report each point when it ends.
void worker(const Grid& g, const fs::path& pts, int jobs) {
  LocalRunner lr(g, pts);
  bool more = true;
  for (;;) {
    while (more && static_cast<int>(lr.running()) < jobs) {
      MPI_Send(nullptr, 0, MPI_BYTE, 0, kAsk, MPI_COMM_WORLD);
      std::int64_t i = -1;
      MPI_Recv(&i, 1, MPI_INT64_T, 0, kGive, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (i < 0) more = false;
      else lr.spawn(static_cast<size_t>(i));
    }
    if (lr.running() == 0) return;
    const auto d = lr.wait_one();
    send_result(d.index, d.ok, d.ok ? slurp_file(pts / g.points[d.index].id / "summary.json") : std::string());
  }
}

// Rank 0 keeps what a worker sent where the single-process sweep would have it.
void keep_remote(const Grid& g, const fs::path& pts, size_t i, const std::string& summary) {
  const auto& p = g.points[i];
  const fs::path dir = pts / p.id;
  if (point_done(dir, p, g.only) && slurp_file(dir / "summary.json") == summary) return;  // a shared filesystem
  fs::remove_all(dir);  // an earlier run's files (a cut deployment summary would fail point_done at every resume: rev25b)
  fs::create_directories(dir);
  std::ofstream(dir / "point.json") << p.scenario.dump(2) << "\n";
  std::ofstream(dir / "inputs.txt") << p.inputs;
  std::ofstream(dir / "summary.json", std::ios::binary) << summary;
}

}  // namespace

bool mpi_built() { return true; }

MpiWorld mpi_init() {
  MPI_Init(nullptr, nullptr);
  MpiWorld w;
  w.active = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &w.local_size);
  MPI_Comm_free(&node);
  return w;
}

void mpi_finalize(const MpiWorld& w) {
  if (w.active) MPI_Finalize();
}

int mpi_max(const MpiWorld& w, int v) {
  if (!w.active) return v;
  int out = v;
  MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

std::vector<bool> mpi_run_points(const MpiWorld& w, const Grid& g, const fs::path& pts, const std::vector<size_t>& pending, int jobs,
                                 Progress& pr) {
  if (w.rank != 0) {
    worker(g, pts, jobs);
    return {};
  }
  std::vector<bool> failed(g.points.size(), false);
  LocalRunner lr(g, pts);
  size_t next = 0, results = 0;
  int asking = w.size - 1;  // workers not yet told that nothing is left
  auto record = [&](size_t i, bool ok) {
    if (!ok) failed[i] = true, ++pr.failed;
    ++pr.done, ++results;
    pr.print();
  };
  while (results < pending.size() || asking > 0) {
    bool busy = false;
    while (static_cast<int>(lr.running()) < jobs && next < pending.size()) lr.spawn(pending[next++]), busy = true;
    if (auto d = lr.poll()) record(d->index, d->ok), busy = true;
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    if (flag && st.MPI_TAG == kAsk) {
      MPI_Recv(nullptr, 0, MPI_BYTE, st.MPI_SOURCE, kAsk, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const std::int64_t i = next < pending.size() ? static_cast<std::int64_t>(pending[next++]) : -1;
      if (i < 0) --asking;
      MPI_Send(&i, 1, MPI_INT64_T, st.MPI_SOURCE, kGive, MPI_COMM_WORLD);
      busy = true;
    } else if (flag && st.MPI_TAG == kResult) {
      int n = 0;
      MPI_Get_count(&st, MPI_BYTE, &n);
      std::string msg(static_cast<size_t>(n), '\0');
      MPI_Recv(msg.data(), n, MPI_BYTE, st.MPI_SOURCE, kResult, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      std::int64_t i = 0;
      std::memcpy(&i, msg.data(), 8);
      const bool ok = msg[8] != 0;
      if (ok) keep_remote(g, pts, static_cast<size_t>(i), msg.substr(9));
      record(static_cast<size_t>(i), ok);
      busy = true;
    }
    if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return failed;
}

#endif

}  // namespace servesim::cli
