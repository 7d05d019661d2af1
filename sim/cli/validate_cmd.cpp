// servesim validate: runs every case file of the validation folder (scenarios/validation/*.json,
// in name order) through its evaluator and prints one table: case, metric, published, simulated,
// error (simulated/published − 1), bound and the verdict. README "Validation against published
// serving numbers" describes the cases.
#include "sim/cli/validate_cmd.hpp"

#include "sim/cli/validate_case.hpp"

#include "scenarios/scenario.hpp"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>

namespace servesim::cli {

namespace fs = std::filesystem;
using namespace validation;

namespace {

std::vector<Row> evaluate(const Case& c, bool quick) {
  if (c.kind == "step_throughput") return eval_step_throughput(c, quick);
  if (c.kind == "deepep_alltoall") return eval_deepep(c, quick);
  if (c.kind == "h800_kernels") return eval_h800_kernels(c, quick);
  if (c.kind == "trace_statistics") return eval_trace_statistics(c, quick);
  throw CaseError(c.file + ": kind: step_throughput, deepep_alltoall, h800_kernels or trace_statistics, got \"" + c.kind + "\"");
}

std::vector<Case> all_cases(const std::string& dir) {
  auto cases = load_cases(dir);
  if (cases.empty()) throw CaseError(dir + ": no case files (*.json)");
  return cases;
}

}  // namespace

int validate(const ValidateArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string dir = a.dir.empty() ? (fs::path(data_dir()) / "validation").string() : a.dir;
  std::vector<Row> rows;
  std::vector<std::string> sources;
  try {
    for (const Case& c : all_cases(dir)) {
      auto r = evaluate(c, a.quick);
      if (!r.empty()) sources.push_back(fmt::format("{}: {}", c.name, c.source));
      rows.insert(rows.end(), r.begin(), r.end());
    }
  } catch (const CaseError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }
  fmt::print("servesim validate{}: {} rows from {}\n\n", a.quick ? " --quick" : "", rows.size(), dir);
  const int failed = print_table(rows);
  if (const auto reg = regime_errors(rows); !reg.empty()) {
    fmt::print("\nserving error by regime (every throughput step row above, the published ablations included, ratio rows not; error > 0: the engine's "
               "throughput is higher than the deployment's, i.e. it would size too few nodes):\n");
    for (const auto& l : regime_lines(reg)) fmt::print("  {}\n", l);
  }
  fmt::print("\nsources:\n");
  for (const auto& s : sources) fmt::print("  {}\n", s);
  fmt::print("{:.1f} s; {}\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
             failed ? fmt::format("{} row{} outside the bound", failed, failed == 1 ? "" : "s") : std::string("every row not marked expected-fail is within its bound"));
  return failed ? 1 : 0;
}

}  // namespace servesim::cli
