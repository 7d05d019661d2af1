// servesim-mpi-sweep GRID --out DIR --jobs N: the MPI side of `servesim sweep` (sweep_mpi.hpp).
// `servesim sweep` started by an MPI launcher execs this program (same process, same rank): it
// links MPI but not SimGrid, whose SMPI layer defines MPI_Init and the other MPI symbols too. Its
// points run as child `servesim run` processes of the binary named by SERVESIM_RUN_BINARY.
#include "sim/cli/sweep_cmd.hpp"

#include <fmt/core.h>

#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  servesim::cli::SweepArgs a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if ((s == "--out" || s == "--jobs") && i + 1 < argc) {
      if (s == "--out") a.out = argv[++i];
      else a.jobs = std::atoi(argv[++i]);
    } else if (a.grid.empty()) {
      a.grid = s;
    } else {
      fmt::print(stderr, "usage: servesim-mpi-sweep GRID.json [--out DIR] [--jobs N] (started by `servesim sweep` under mpirun)\n");
      return 2;
    }
  }
  if (a.grid.empty()) {
    fmt::print(stderr, "usage: servesim-mpi-sweep GRID.json [--out DIR] [--jobs N] (started by `servesim sweep` under mpirun)\n");
    return 2;
  }
  return servesim::cli::sweep(a);
}
