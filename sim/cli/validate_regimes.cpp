// servesim validate: the engine's error against published serving deployments, by regime
// (validate_case.hpp RegimeError). `validate` prints it under its table and `capacity` beside its
// answer, so that a sized cluster is read with the error the engine shows where it can be checked.
#include "sim/cli/validate_case.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

namespace servesim::cli::validation {

namespace fs = std::filesystem;

std::vector<RegimeError> regime_errors(const std::vector<Row>& rows) {
  static const char* const order[] = {"prefill", "decode > 32 seq/rank", "decode <= 32 seq/rank"};
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
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw CaseError(dir + ": not a folder of validation cases");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::vector<Row> rows;
  for (const auto& f : files) {
    const Case c = load_case(f);
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
