// servesim costmodels/calibration: the training points of each kernel family, read from the
// measurement tables (costmodels/data/<gpu>/*.json, schema servesim.kernel-table/1). Offline only:
// the engine evaluates the fitted file (costmodels/fitted.hpp) and never reads these tables.
#pragma once
#include "costmodels/calibration/kernel_table.hpp"
#include "costmodels/kernel_families.hpp"

#include <map>
#include <string>
#include <vector>

namespace servesim {

/// Host launch gap of one eagerly timed call: the median of (events-per-call time − CUDA-graph
/// time per call) over every row measured both ways (the attention tables), seconds. The MoE and
/// communication tables (issue #4) were timed per call with CUDA events only, so each of their
/// rows includes one such gap that a CUDA-graph serving engine does not pay.
double launch_gap_s(const std::map<std::string, KernelTable>& tables);

/// Seconds of one row as a CUDA-graph engine sees it: us_median for graph-timed rows and for the
/// whole-layer tables (moe_layer_*, replayed as one graph); else max(us_median − gap, us_median/4)
/// (the first launch's gap removed, never below a quarter of the measured time).
double graph_seconds(const KernelTable& t, const KernelRow& r, double gap_s);

/// Training points of family f from the loaded tables (rows the family does not use are skipped),
/// times as graph_seconds(gap_s). Throws std::runtime_error if a table the family needs is missing.
std::vector<Sample> family_samples(Family f, const std::map<std::string, KernelTable>& tables, double gap_s);

}  // namespace servesim
