// servesim sweep: the grid file (a base scenario and a Cartesian grid over scenario fields given
// as dotted JSON paths) expanded into points, and the results table built from their summaries.
#pragma once
#include "scenarios/scenario.hpp"

#include <functional>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace servesim::cli {

using ojson = nlohmann::ordered_json;

struct GridAxis {
  std::string path;          ///< e.g. "deployments.0.decode.max_running"
  std::vector<ojson> values;
};

struct SweepPoint {
  std::string id;            ///< "p0000", grid order (the first axis varies slowest)
  std::vector<ojson> params; ///< one value per axis
  ojson scenario;            ///< the base scenario with the fields replaced
  /// The bytes of every file the point reads, one line each, "<what> <path> <FNV-1a 64>": each
  /// deployment's model, hardware and fitted-parameter files and the trace. A resumed point whose
  /// recorded inputs differ runs again (rev26: a changed model file resumed the old results).
  std::string inputs;
};

struct Grid {
  std::string file;          ///< the grid file as given
  std::string scenario_file; ///< the base scenario (resolved against the grid file's folder)
  std::string only;          ///< optional: simulate only this deployment of each point
  std::vector<GridAxis> axes;
  std::vector<SweepPoint> points;
};

/// Reads and expands a grid file. Throws std::runtime_error with a message naming the grid file
/// and the field on bad input (the command exits 2).
/// `check` (optional) runs on every parsed point after the scenario reader (SweepArgs::check_point).
Grid load_grid(const std::string& path, const std::function<void(const Scenario&)>& check = {});

/// A point's row(s) for the results table: one per deployment of its summary.json.
ojson point_rows(const Grid& g, const SweepPoint& p, const ojson& summary, bool ok);
/// The table as CSV text (a header, then the rows in order).
std::string rows_csv(const Grid& g, const ojson& rows);

}  // namespace servesim::cli
