// servesim sweep GRID.json [--out DIR] [--jobs N]: a Cartesian grid over scenario fields, run on
// the local cores, into one results table (sweep_grid.hpp says the grid file's format).
#pragma once
#include <string>

namespace servesim::cli {

struct SweepArgs {
  std::string grid;  ///< the grid file
  std::string out;   ///< output folder (default out/sweeps/<grid file stem>)
  int jobs = 0;      ///< points run in parallel (0: one per core)
};

int sweep(const SweepArgs& a);

}  // namespace servesim::cli
