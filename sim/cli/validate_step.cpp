// servesim validate, kind "step_throughput": the per-node throughput of one batch step of a
// deployment's pool for a uniform batch, computed exactly as `servesim step` prints it
// (sim/cli/step_cmd.cpp; tests/test_validate.cpp checks that the two agree).
//
// Case fields: "scenario" (relative to the case file), optional "deployment_name" (default the
// first deployment; "deployment" is the case's description of what was measured) and "cost_model"
// (default the scenario's). Row fields (any other is an error, so that a misspelt override is not
// silently ignored): "metric", "unit", "published", "published_note", "expected_fail", "quick",
// "phase" (prefill | decode),
// "seqs_per_rank", "tokens" (prefill), "context"; optional, the pool's setting for this row only
// (a published ablation): "two_batch_overlap" (true | false), "expert_imbalance" (busiest/mean
// GPU load, 1-64; 1 = perfectly balanced routing), "mtp_draft_tokens" (0-8, decode rows; the model
// must ship an MTP head) with "mtp_acceptance" (0-1, the chained per-draft acceptance), and
// "step_overhead_s" (the pool's per-step host time, 0-1 s); and "baseline", an object of those
// optional settings: the row is then a published ratio (unit "ratio", which needs a baseline) of two
// steps of the same shape: the step with the row's settings over the step with the row's settings
// changed by the baseline's (it inherits what it does not name; an ablation published only as a
// gain), and joins no serving regime (tests/test_validate.cpp RatioRowIsTwoStepsOfOneShape).
#include "sim/cli/validate_case.hpp"
#include "sim/cli/common.hpp"

#include "costmodels/factory.hpp"
#include "costmodels/step_cost.hpp"
#include "scenarios/scenario.hpp"
#include "sim/validate.hpp"

#include <filesystem>
#include <set>

namespace servesim::cli::validation {

namespace {

namespace fs = std::filesystem;

const DeploymentSpec& pick(const Scenario& s, const Case& c) {
  if (!c.j.contains("deployment_name")) return s.deployments.front();
  const std::string name = str(c.j, "deployment_name", c.file);
  for (const auto& d : s.deployments)
    if (d.name == name) return d;
  throw CaseError(c.file + ".deployment_name: no deployment \"" + name + "\" in " + s.path);
}

std::string settings_list() {
  std::string s;
  for (const auto& k : step_row_settings()) s += (s.empty() ? "" : ", ") + k;
  return s;
}

/// `d` with the settings of `j` (a row, or a row's "baseline") applied to the pool of the phase.
/// Throws CaseError naming `where` and the field.
DeploymentSpec with_row_settings(const DeploymentSpec& d, const nlohmann::json& j, bool decode, const std::string& where) {
  DeploymentSpec dr = d;
  if (j.contains("two_batch_overlap")) {
    const auto& v = j.at("two_batch_overlap");
    if (!v.is_boolean()) throw CaseError(where + ".two_batch_overlap: true or false");
    (decode ? dr.decode : dr.prefill).two_batch_overlap = v.get<bool>();
  }
  if (j.contains("expert_imbalance")) {
    const double x = num(j, "expert_imbalance", where);
    if (!(x >= 1 && x <= 64)) throw CaseError(where + ".expert_imbalance: 1-64 (busiest/mean GPU load), got " + std::to_string(x));
    (decode ? dr.decode : dr.prefill).expert_imbalance = x;
  }
  PoolSpec& pool = decode ? dr.decode : dr.prefill;
  if (j.contains("mtp_draft_tokens") != j.contains("mtp_acceptance"))
    throw CaseError(where + ": mtp_draft_tokens and mtp_acceptance go together");
  if (j.contains("mtp_draft_tokens")) {
    const long long k = integer(j, "mtp_draft_tokens", where);
    const double a = num(j, "mtp_acceptance", where);
    if (!decode || k < 0 || k > 8 || !(a >= 0 && a <= 1))
      throw CaseError(where + ": mtp_draft_tokens 0-8 with mtp_acceptance 0-1, decode rows only");
    if (k > 0 && d.model.mtp_layers < 1) throw CaseError(where + ".mtp_draft_tokens: model \"" + d.model.name + "\" ships no MTP head");
    pool.mtp_draft_tokens = static_cast<int>(k), pool.mtp_acceptance = a;
  }
  if (j.contains("step_overhead_s")) {
    const double h = num(j, "step_overhead_s", where);
    if (!(h >= 0 && h <= 1)) throw CaseError(where + ".step_overhead_s: 0-1 s, got " + std::to_string(h));
    pool.step_overhead_s = h;
  }
  return dr;
}

}  // namespace

std::vector<Row> eval_step_throughput(const Case& c, bool quick) {
  const std::string file = (fs::path(c.dir) / str(c.j, "scenario", c.file)).lexically_normal().string();
  Scenario s;
  try {
    s = load_scenario(file);
    validate_scenario(s);
  } catch (const ScenarioError& e) {
    throw CaseError(c.file + ": scenario: " + e.what());
  }
  const DeploymentSpec& d = pick(s, c);
  const std::string cost_model = c.j.contains("cost_model") ? str(c.j, "cost_model", c.file) : s.cost_model;
  std::shared_ptr<const CostModel> cost;
  try {
    cost = make_cost_model(cost_model, d.gpu);
  } catch (const std::exception& e) {
    throw CaseError(c.file + ": cost model \"" + cost_model + "\": " + e.what());
  }
  std::vector<Row> out;
  for (auto& r : selected_rows(c, quick)) {
    // (unknown row keys are refused by selected_rows, validate_case.cpp)
    const std::string phase = str(*r.j, "phase", r.where);
    if (phase != "prefill" && phase != "decode") throw CaseError(r.where + ".phase: prefill or decode, got \"" + phase + "\"");
    const bool decode = phase == "decode";
    if (decode && r.j->contains("tokens"))  // (review, twenty-seventh session: accepted and ignored)
      throw CaseError(r.where + ".tokens: a decode step computes 1 new token per sequence (tokens is a prefill row's chunk)");
    const long long seqs = integer(*r.j, "seqs_per_rank", r.where);
    const long long tokens = decode ? 1 : integer(*r.j, "tokens", r.where);
    const long long context = integer(*r.j, "context", r.where);
    if (seqs < 1 || seqs > (1 << 20) || tokens < 1 || tokens > kMaxTokens || context < 0 || context > kMaxTokens || seqs * tokens > kMaxTokens)
    {
      const char* f = seqs < 1 || seqs > (1 << 20) ? "seqs_per_rank" : tokens < 1 || tokens > kMaxTokens ? "tokens" : context < 0 || context > kMaxTokens ? "context" : "seqs_per_rank";
      throw CaseError(r.where + "." + f + ": seqs_per_rank 1-2^20, tokens 1-2^40, context 0-2^40, at most 2^40 tokens per rank (seqs_per_rank " +
                      std::to_string(seqs) + ", tokens " + std::to_string(tokens) + ", context " + std::to_string(context) + ")");
    }
    const DeploymentSpec dr = with_row_settings(d, *r.j, decode, r.where);
    const double simulated = uniform_step(dr, cost, decode, seqs, tokens, context).tokens_per_s_per_node();
    if (!r.j->contains("baseline")) {
      if (r.row.unit == "ratio") throw CaseError(r.where + ".baseline: a ratio row needs a baseline (the settings of the step it is divided by)");
      // what is simulated is per-node throughput of the phase (rev25d: any unit was taken, "ms" too)
      const char* want = decode ? "output tok/s per node" : "input tok/s per node";
      if (r.row.unit != want) throw CaseError(r.where + ".unit: a " + phase + " row compares \"" + want + "\", got \"" + r.row.unit + "\"");
      r.row.simulated = simulated;
      r.row.regime = regime_of(decode, seqs);
      out.push_back(r.row);
      continue;
    }
    // a published ratio of two runs of the same shape (an ablation whose absolute figures are not
    // published): this row's settings over the baseline's; not a measurement of a deployment, so
    // it joins no serving regime
    const auto& b = r.j->at("baseline");
    if (!b.is_object()) throw CaseError(r.where + ".baseline: an object of row settings");
    for (const auto& [key, value] : b.items())
      if (!step_row_settings().count(key)) throw CaseError(r.where + ".baseline." + key + ": not a row setting (" + settings_list() + ")");
    if (r.row.unit != "ratio") throw CaseError(r.where + ".unit: a row with a baseline is a ratio: unit \"ratio\"");
    const DeploymentSpec db = with_row_settings(dr, b, decode, r.where + ".baseline");  // the row's settings, less what the baseline names
    r.row.simulated = simulated / uniform_step(db, cost, decode, seqs, tokens, context).tokens_per_s_per_node();
    out.push_back(r.row);
  }
  return out;
}
}  // namespace servesim::cli::validation
