// servesim scenarios: the scenario file format (JSON), loaded and validated once into plain structs
// (DeploymentSpec, WorkloadSpec, ModelSpec, GpuSpec). Everything downstream (topology, workloads,
// cost models, engine, exporters) receives structs, never JSON. The format is documented in
// README.md ("Scenario format").
#pragma once
#include "scenarios/file_names.hpp"
#include "scenarios/gpu_spec.hpp"
#include "scenarios/model_spec.hpp"
#include "scenarios/deployment.hpp"
#include "scenarios/workload_spec.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace servesim {

/// Any problem with a scenario, model or hardware file. what() names the file, the field path
/// (e.g. "deployments[1].decode.ep") or the line and column of a JSON syntax error, what was
/// found and what was expected.
class ScenarioError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Scenario {
  std::string name, description, path;
  std::uint64_t seed = 1;
  double horizon_s = 0;            ///< 0: run until every request ends
  /// Steady state: requests arriving before warmup_s (seconds) are simulated but left out of every
  /// metric (counted apart in summary.json "window"); must be below horizon_s when that is set.
  double warmup_s = 0;
  WorkloadSpec workload;
  std::vector<DeploymentSpec> deployments;
  std::string cost_model = "fitted";  ///< "fitted" (kernel-fitted, costmodels/fitted.hpp) or "roofline"
  bool timeline = true;
  long long timeline_max_events = 2000000;  ///< step slices written to timeline.json at most
};

/// Input bounds (README "Input rules"). Token counts (prompt, output, context, chunk and batch
/// sizes) are at most 2^40, so no sum or product of a few of them overflows 64 bits; times (trace
/// arrival offsets, waits, horizons, SLOs) are finite and at most 1e9 s (~32 years).
inline constexpr long long kMaxTokens = 1LL << 40;
inline constexpr double kMaxSeconds = 1e9;
/// Cluster sizes: at most 262,144 GPUs (both pools together) and 32,768 nodes per deployment, and
/// 10,000,000 concurrent agent sessions: ~3x the largest cluster (10,000 nodes, bench/RESULTS.md)
/// and 100x the most sessions (100,000) the project has run. Larger values are refused (exit 2,
/// naming the field) instead of exhausting memory while the platform or the sessions are built.
inline constexpr long long kMaxClusterGpus = 262144;
inline constexpr long long kMaxClusterNodes = 32768;
inline constexpr long long kMaxSessions = 10000000;

// is_safe_file_name / safe_file_name_rule: scenarios/file_names.hpp (a deployment's name is its
// output folder, the scenario's name out/<name>).

/// Folder holding models/ and hardware/: $SERVESIM_DATA_DIR if set, else the source tree's
/// scenarios/ (compiled in).
std::string data_dir();

/// Loads a scenario file and checks its syntax, keys, types and ranges (whether its deployments can
/// exist and its policy names are known is the validate step: sim/validate.hpp). Model and hardware references are names
/// ("kimi-k3" → models/kimi-k3.json next to the scenario, else under data_dir()) or paths.
/// Throws ScenarioError.
Scenario load_scenario(const std::string& path);

/// Same from an already-read text (origin names it in messages; base_dir resolves references).
Scenario parse_scenario(const std::string& text, const std::string& origin, const std::string& base_dir);

/// Loads one model or hardware data file. Throws ScenarioError.
ModelSpec load_model(const std::string& path);
GpuSpec load_hardware(const std::string& path);

/// Where a hardware file's relative "fitted_models" path is looked for when it is not found
/// relative to the hardware file's own folder: relative to $SERVESIM_DATA_DIR/hardware/ (when set)
/// and to the source tree's scenarios/hardware/ (compiled in), in that order (so a copy of
/// scenarios/ used as $SERVESIM_DATA_DIR still finds costmodels/data/). GpuSpec::fitted_models_path
/// is the first place that exists, else the one relative to the hardware file.
std::vector<std::string> fitted_models_fallbacks(const std::string& fitted_models);

/// Whether `path` names an existing file or folder. A path the system cannot examine (a name longer
/// than the file system allows, a component that is not a folder, no permission) counts as absent
/// instead of throwing std::filesystem::filesystem_error: every caller then reports the path as
/// missing with its own message. No errors.
bool path_exists(const std::string& path) noexcept;

/// Resolves a model/hardware reference as load_scenario does. Throws ScenarioError if not found.
std::string resolve_data_file(const std::string& ref, const std::string& kind, const std::string& base_dir);

/// Empty, or why a run of `s` would never end: agent sessions with neither `sessions` nor
/// `duration_s` keep starting new sessions, and horizon_s 0 runs until every request ends (rev26:
/// a hang). Call it after command-line overrides of the horizon. No errors.
std::string never_ending_workload(const Scenario& s);

}  // namespace servesim
