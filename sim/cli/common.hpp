// servesim cli: what the subcommands share: loading and validating a scenario with errors printed
// (exit status 2 on bad input), and small formatting helpers.
#pragma once
#include "scenarios/scenario.hpp"
#include "sim/validate.hpp"

#include <fmt/format.h>

#include <optional>
#include <string>

namespace servesim::cli {

/// The load and validate steps: the scenario, or nullopt after printing "error: <file>: <field>: ...".
inline std::optional<Scenario> load_or_report(const std::string& path) {
  try {
    Scenario s = load_scenario(path);
    validate_scenario(s);
    return s;
  } catch (const ScenarioError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return std::nullopt;
  }
}

/// "a, b, c": the deployments' names, for error messages.
inline std::string deployment_names(const Scenario& s) {
  std::string names;
  for (const auto& d : s.deployments) names += (names.empty() ? "" : ", ") + d.name;
  return names;
}

/// Bytes as "12.3 GB" (decimal gigabytes).
inline std::string gb(double bytes, int prec = 1) { return fmt::format("{:.{}f} GB", bytes / 1e9, prec); }

}  // namespace servesim::cli
