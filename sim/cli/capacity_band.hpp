// servesim cli: the band of `servesim capacity`'s answer (README "servesim capacity"): whole node
// counts p10-p90 from several seeds and the fitted cost model's held-out error.
#pragma once
#include "sim/cli/capacity_runner.hpp"

#include <optional>
#include <string>

namespace servesim::cli::cap {

/// The fitted cost model's held-out error as the band uses it (capacity_band.cpp says how).
struct HeldOut {
  double e = 0;
  int families = 0, rows = 0;
  std::string source;
};
/// nullopt for a cost model without one (roofline). Throws when the parameter file cannot be read.
std::optional<HeldOut> held_out_error(const std::string& cost_model, const GpuSpec& gpu);

/// The band at the answer (runs what it needs through `run`).
json band(Runner& run, const Answer& ans, const Scenario& s, const CapacityArgs& a, const std::optional<HeldOut>& ho);

}  // namespace servesim::cli::cap
