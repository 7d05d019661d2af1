// servesim sweep under MPI (`mpirun -n N servesim sweep GRID.json`, or `srun` under Slurm): rank 0
// hands the points out one at a time (a work queue: points of one grid can differ 20x in run time),
// every rank runs its points as child processes (sweep_runner.hpp) and sends each point's
// summary.json back; rank 0 writes the one results table. Compiled with MPI when CMake found it
// (SERVESIM_HAVE_MPI); without it, a process started by an MPI launcher with more than one rank
// refuses to run (every rank would run the whole grid into the same folder).
#pragma once
#include "sim/cli/sweep_runner.hpp"

#include <string>
#include <vector>

namespace servesim::cli {

struct MpiWorld {
  bool active = false;  ///< MPI_Init was called (a launcher started us and MPI is built in)
  int rank = 0, size = 1;
  int local_size = 1;   ///< ranks on this node (MPI_COMM_TYPE_SHARED): they share its cores
};

/// Whether this build has MPI.
bool mpi_built();
/// Whether an MPI launcher (mpirun/mpiexec, srun with PMI/PMIx) started this process, from the
/// environment (servesim itself cannot call MPI: see sweep_cmd.cpp); `size` gets the world size the
/// launcher states, 0 when it states none (PMIx), 1 when not launched. Only for the decision to exec
/// the MPI helper or refuse; the helper takes the ranks from MPI_Comm_size / MPI_Comm_rank.
bool launched_by_mpi(int& size);
/// MPI_Init and the world's shape (only when mpi_built()).
MpiWorld mpi_init();
void mpi_finalize(const MpiWorld& w);
/// The largest `v` over all ranks (collective; `v` itself when not active).
int mpi_max(const MpiWorld& w, int v);

/// Runs `pending` (indices into g.points, rank 0's list; ignored on other ranks) over all ranks,
/// `jobs` child processes per rank. On rank 0: returns which points failed (indexed like
/// g.points) after writing point.json and summary.json of points run on other ranks into
/// <pts>/<id> when that folder does not already hold them (no shared filesystem needed); `pr`
/// counts and draws progress. On other ranks: returns an empty vector.
std::vector<bool> mpi_run_points(const MpiWorld& w, const Grid& g, const std::filesystem::path& pts, const std::vector<size_t>& pending,
                                 int jobs, Progress& pr);

}  // namespace servesim::cli
