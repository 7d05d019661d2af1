// The scenario parser and its validation: the bytes as a scenario file's text, parsed as
// `servesim run` does (parse_scenario, model and hardware references resolved against the shipped
// data files) and every deployment checked for feasibility (costmodels/feasibility.hpp, the part of
// sim/validate that needs no policy registry). Contract: ScenarioError (or the feasibility check's
// std::invalid_argument naming the field), or a scenario whose numbers are in range.
#include "costmodels/feasibility.hpp"
#include "fuzz/fuzz_common.hpp"
#include "scenarios/scenario.hpp"

#include <cmath>
#include <stdexcept>

using namespace servesim;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Scenario s;
  try {
    s = parse_scenario(text, "fuzz.json", data_dir());
  } catch (const ScenarioError&) {
    return 0;
  }
  if (!std::isfinite(s.horizon_s) || s.horizon_s < 0 || s.horizon_s > kMaxSeconds) fuzz::finding("horizon_s out of range");
  const auto& w = s.workload;
  if (!std::isfinite(w.time_scale) || w.time_scale <= 0) fuzz::finding("workload.time_scale out of range");
  if (!std::isfinite(w.jitter_s) || w.jitter_s < 0) fuzz::finding("workload.jitter_s out of range");
  if (!std::isfinite(w.rate_per_s) || w.rate_per_s < 0) fuzz::finding("workload.rate_per_s out of range");
  if (w.max_requests < 0 || w.requests < 0 || w.block_tokens < 1) fuzz::finding("workload counts out of range");
  if (s.deployments.empty()) fuzz::finding("a scenario without deployments");
  for (size_t i = 0; i < s.deployments.size(); ++i) {
    try {
      validate_deployment(s.deployments[i], "deployments[" + std::to_string(i) + "]");
    } catch (const std::invalid_argument& e) {
      if (std::string(e.what()).rfind("deployments[", 0) != 0) fuzz::finding(std::string("error without field path: ") + e.what());
    }
  }
  return 0;
}
