// servesim validate, kind "h800_kernels": published H800 kernel figures (FlashMLA, DeepGEMM) against
// the fitted cost model scaled to the H800 — the rows `servesim costmodel report` prints
// (costmodels/calibration/fit_report.hpp published_h800_checks). The only validation file that
// uses the calibration library (tests/tools/include_arrows.py CALIBRATION_USERS).
//
// Case fields: "hardware" (the H800 hardware file; its fitted_models are the parameters). Row
// fields: "group" and "what" name a row of published_h800_checks; its "published" value must equal
// the function's (a case file and the code that disagree on a published figure are bad input).
#include "sim/cli/validate_case.hpp"

#include "costmodels/calibration/fit_report.hpp"
#include "costmodels/fitted.hpp"
#include "scenarios/scenario.hpp"

#include <cmath>

namespace servesim::cli::validation {

std::vector<Row> eval_h800_kernels(const Case& c, bool quick) {
  GpuSpec gpu;
  try {
    gpu = load_hardware(resolve_data_file(str(c.j, "hardware", c.file), "hardware", c.dir));
  } catch (const ScenarioError& e) {
    throw CaseError(c.file + ": hardware: " + e.what());
  }
  if (gpu.fitted_models_path.empty()) throw CaseError(c.file + ": hardware " + gpu.name + " names no fitted_models file");
  std::vector<CheckRow> checks;
  try {
    checks = published_h800_checks(load_fit_cached(gpu.fitted_models_path), gpu);
  } catch (const std::exception& e) {
    throw CaseError(c.file + ": fitted parameters " + gpu.fitted_models_path + ": " + e.what());
  }
  std::vector<Row> out;
  for (auto& r : selected_rows(c, quick)) {
    const std::string group = str(*r.j, "group", r.where), what = str(*r.j, "what", r.where);
    const CheckRow* hit = nullptr;
    for (const auto& k : checks)
      if (k.group == group && k.what == what) hit = &k;
    if (!hit) throw CaseError(r.where + ": no published H800 check \"" + group + "\" / \"" + what + "\" (costmodels/calibration/fit_report.cpp)");
    if (std::abs(hit->reference - r.row.published) > 1e-9 * std::abs(hit->reference) || hit->unit != r.row.unit)
      throw CaseError(r.where + ": published " + std::to_string(r.row.published) + " " + r.row.unit + ", but fit_report.cpp has " +
                      std::to_string(hit->reference) + " " + hit->unit);
    r.row.simulated = hit->predicted;
    out.push_back(r.row);
  }
  return out;
}

}  // namespace servesim::cli::validation
