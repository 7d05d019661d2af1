// servesim sweep GRID.json [--out DIR] [--jobs N]: a Cartesian grid over scenario fields, run on
// the local cores, into one results table (sweep_grid.hpp says the grid file's format).
#pragma once
#include "scenarios/scenario.hpp"

#include <functional>
#include <string>

namespace servesim::cli {

struct SweepArgs {
  std::string grid;  ///< the grid file
  std::string out;   ///< output folder (default out/sweeps/<grid file stem>)
  int jobs = 0;      ///< points run in parallel (0: one per core)
  /// More checks of each parsed point before any runs (servesim sets the policy-name check,
  /// sim/validate.hpp; the MPI helper, which must not link SimGrid's engine, leaves it empty and
  /// its points find a bad policy name when they run). Throws with the message to print.
  std::function<void(const Scenario&)> check_point;
};

int sweep(const SweepArgs& a);

}  // namespace servesim::cli
