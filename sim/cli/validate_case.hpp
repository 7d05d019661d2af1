// servesim validate: the validation cases (scenarios/validation/*.json, one file per published
// source) and the rows of the table they produce. validate_case.cpp reads the files and prints the
// table; one evaluator per kind of case: validate_step.cpp (per-node throughput of one batch step,
// as `servesim step`), validate_deepep.cpp (the engine's all-to-all closed form vs DeepEP),
// validate_kernels.cpp (published H800 kernel figures vs the fitted cost model scaled to H800),
// validate_traces.cpp (workload statistics of the trace readers).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace servesim::cli::validation {

/// How far the simulated value may be from the published one: |simulated/published − 1| ≤ value
/// (relative) or |simulated − published| ≤ value (absolute, in the metric's unit).
struct Bound {
  bool relative = true;
  double value = 0;
};

enum class Verdict { pass, fail, expected_fail, unexpected_pass, skipped };

/// One line of the table.
struct Row {
  std::string case_name, metric, unit;
  double published = 0, simulated = 0;
  Bound bound;
  std::string expected_fail;  ///< why this row is expected to miss its bound (empty: it must pass)
  std::string skipped;        ///< why it was not evaluated (empty: evaluated)
  bool within() const;
  Verdict verdict() const;
};

/// One case file.
struct Case {
  std::string file, dir;  ///< the file and its folder (relative paths in it are relative to the folder)
  std::string name, kind, source;
  Bound bound;
  std::string expected_fail_reason;  ///< the reason of rows with "expected_fail": true
  bool quick = true;                 ///< default of the rows' "quick"
  nlohmann::json j;
};

/// Thrown for a malformed case file (exit status 2); the message names the file and the field.
struct CaseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Reads one case file. Throws CaseError.
Case load_case(const std::string& path);

/// The case's "rows" that run (all, or with --quick those whose "quick" is true), and a Row for
/// each with the metric, unit, published value, bound and expected-fail reason filled in.
struct RowSpec {
  const nlohmann::json* j;
  std::string where;  ///< "file: rows[i]" for messages
  Row row;
};
std::vector<RowSpec> selected_rows(const Case& c, bool quick);

/// Field accessors that throw CaseError naming `where` and the key.
double num(const nlohmann::json& j, const std::string& key, const std::string& where);
long long integer(const nlohmann::json& j, const std::string& key, const std::string& where);
std::string str(const nlohmann::json& j, const std::string& key, const std::string& where);

/// The evaluators: one per "kind".
std::vector<Row> eval_step_throughput(const Case& c, bool quick);
std::vector<Row> eval_deepep(const Case& c, bool quick);
std::vector<Row> eval_h800_kernels(const Case& c, bool quick);
std::vector<Row> eval_trace_statistics(const Case& c, bool quick);

/// Prints the table and the expected-fail reasons; returns how many rows failed.
int print_table(const std::vector<Row>& rows);

}  // namespace servesim::cli::validation
