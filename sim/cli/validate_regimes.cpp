// servesim validate: the engine's error against published serving deployments, by regime
// (validate_case.hpp RegimeError). `validate` prints it under its table and `capacity` beside its
// answer, so that a sized cluster is read with the error the engine shows where it can be checked.
#include "sim/cli/validate_case.hpp"

#include "costmodels/step_cost.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace servesim::cli::validation {

namespace {
// sequences per rank up to which a decode row counts as a small batch: the engine's own edge
// (costmodels/step_cost.hpp kSmallDecodeBatchSeqs, with its source), so that `capacity` can run a
// step at its regime's error (StepScale)
constexpr long long kSmallDecodeBatch = kSmallDecodeBatchSeqs;
static_assert(kSmallDecodeBatch == 32, "the regime names below say 32");
const char* const kRegimes[] = {"prefill", "decode > 32 seq/rank", "decode <= 32 seq/rank"};  // printed in this order
}  // namespace

std::string regime_of(bool decode, long long seqs_per_rank) {
  return !decode ? kRegimes[0] : seqs_per_rank > kSmallDecodeBatch ? kRegimes[1] : kRegimes[2];
}

std::vector<RegimeError> regime_errors(const std::vector<Row>& rows) {
  const auto& order = kRegimes;
  std::vector<RegimeError> out;
  for (const char* name : order) {
    RegimeError e;
    e.regime = name;
    for (const Row& r : rows) {
      if (r.regime != name || !r.skipped.empty()) continue;
      const double err = r.simulated / r.published - 1;
      e.min_error = e.rows == 0 ? err : std::min(e.min_error, err);
      e.max_error = e.rows == 0 ? err : std::max(e.max_error, err);
      ++e.rows;
      if (std::find(e.cases.begin(), e.cases.end(), r.case_name) == e.cases.end()) e.cases.push_back(r.case_name);
    }
    if (e.rows > 0) out.push_back(std::move(e));
  }
  return out;
}

std::vector<RegimeError> serving_regime_errors(const std::string& dir) {
  std::vector<Row> rows;
  for (const Case& c : load_cases(dir)) {
    if (c.kind != "step_throughput") continue;
    auto r = eval_step_throughput(c, false);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  return regime_errors(rows);
}

std::vector<std::string> regime_lines(const std::vector<RegimeError>& r) {
  std::vector<std::string> out;
  for (const auto& e : r) {
    std::string cases;
    for (const auto& c : e.cases) cases += (cases.empty() ? "" : ", ") + c;
    out.push_back(fmt::format("{}: {:+.1f}% to {:+.1f}% over {} row{} ({})", e.regime, 100 * e.min_error, 100 * e.max_error, e.rows,
                              e.rows == 1 ? "" : "s", cases));
  }
  return out;
}

nlohmann::json regime_json(const std::vector<RegimeError>& r) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& e : r)
    a.push_back({{"regime", e.regime}, {"rows", e.rows}, {"min_error", e.min_error}, {"max_error", e.max_error}, {"cases", e.cases}});
  return a;
}

}  // namespace servesim::cli::validation
