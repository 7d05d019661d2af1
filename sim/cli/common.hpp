// servesim cli: what the subcommands share: loading and validating a scenario with errors printed
// (exit status 2 on bad input), and small formatting helpers.
#pragma once
#include "costmodels/step_cost.hpp"
#include "scenarios/scenario.hpp"
#include "sim/validate.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <algorithm>
#include <memory>
#include <fstream>
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
    // a validation case given where a scenario goes (rev25d: plan on scenarios/validation/*.json said
    // only "workload: missing"): say what it is and where its scenario is
    try {
      std::ifstream in(path);
      const auto j = nlohmann::json::parse(in, nullptr, false);
      if (j.is_object() && j.contains("rows") && j.contains("kind"))
        fmt::print(stderr, "  ({} is a validation case of `servesim validate`, not a scenario{})\n", path,
                   j.contains("scenario") && j["scenario"].is_string() ? "; its scenario is " + j["scenario"].get<std::string>() : std::string());
    } catch (...) {
    }
    return std::nullopt;
  }
}

/// The fitted cost model's parameter file cannot be found: the message naming it and every place
/// looked (scenarios/scenario.hpp fitted_models_fallbacks); nullopt when found or not needed.
inline std::optional<std::string> missing_fitted_parameters(const std::string& cost_model, const GpuSpec& gpu) {
  if (cost_model != "fitted" || gpu.fitted_models_path.empty() || path_exists(gpu.fitted_models_path)) return std::nullopt;
  std::string places = gpu.fitted_models_path + " (relative to the hardware file)";
  for (const auto& p : fitted_models_fallbacks(gpu.fitted_models))
    if (p != gpu.fitted_models_path) places += ", " + p;
  return fmt::format("cost model \"fitted\": hardware \"{}\": its fitted parameters \"{}\" (\"fitted_models\" in the hardware file) are missing; "
                     "looked at {} (copy costmodels/data/ beside the data folder, make \"fitted_models\" absolute, or use --cost-model roofline)",
                     gpu.name, gpu.fitted_models, places);
}

/// "a, b, c": the deployments' names, for error messages.
inline std::string deployment_names(const Scenario& s) {
  std::string names;
  for (const auto& d : s.deployments) names += (names.empty() ? "" : ", ") + d.name;
  return names;
}

/// Bytes as "12.3 GB" (decimal gigabytes).
inline std::string gb(double bytes, int prec = 1) { return fmt::format("{:.{}f} GB", bytes / 1e9, prec); }

/// One batch step of one instance of a pool (`decode` picks the pool) where every DP rank runs
/// `seqs` sequences of `tokens` new tokens over `context` cached ones: its time, the tokens it
/// makes over all ranks and the nodes the instance spans (EP / GPUs per node, at least 1).
/// A decode pool with multi-token prediction (mtp_draft_tokens k > 0) verifies 1 + k tokens per
/// sequence, as the engine's decode steps do (sim/engine/decode_pool.cpp), and makes
/// PoolSpec::tokens_per_step() of them on average: `tokens` counts those (expected output tokens).
/// `servesim step` prints it; `servesim validate` compares its tokens per second per node.
struct UniformStep {
  StepCostModel model;
  std::vector<std::vector<SeqWork>> ranks;
  StepTime time;
  double tokens = 0, nodes = 1;
  long long verified = 1;  ///< tokens computed per sequence (decode with MTP: 1 + drafts)
  double tokens_per_s_per_node() const { return tokens / time.total_s / nodes; }
};
inline UniformStep uniform_step(const DeploymentSpec& d, std::shared_ptr<const CostModel> cost, bool decode, long long seqs,
                                long long tokens, long long context) {
  const PoolSpec& pool = decode ? d.decode : d.prefill;
  const long long verified = decode ? tokens + pool.mtp_draft_tokens : tokens;
  const double made = decode ? static_cast<double>(tokens) * pool.tokens_per_step() : static_cast<double>(tokens);
  UniformStep u{StepCostModel(d.model, std::move(cost), fabric_params(d.cluster, d.gpu), instance_shape(d, pool), pool.step_overhead_s),
                std::vector<std::vector<SeqWork>>(static_cast<size_t>(pool.dp()),
                                                  std::vector<SeqWork>(static_cast<size_t>(seqs), SeqWork{verified, context, true})),
                {}, made * static_cast<double>(seqs * pool.dp()), std::max(1.0, static_cast<double>(pool.ep) / d.gpu.gpus_per_node), verified};
  u.time = u.model.step(u.ranks, decode ? Phase::decode : Phase::prefill);
  return u;
}

}  // namespace servesim::cli
