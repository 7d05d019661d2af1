// servesim validate: the validation cases (scenarios/validation/*.json, one file per published
// source) and the rows of the table they produce. validate_case.cpp reads the files and prints the
// table; one evaluator per kind of case: validate_step.cpp (per-node throughput of one batch step,
// as `servesim step`), validate_deepep.cpp (the engine's all-to-all closed form vs DeepEP),
// validate_kernels.cpp (published H800 kernel figures vs the fitted cost model scaled to H800),
// validate_traces.cpp (workload statistics of the trace readers).
#pragma once
#include <nlohmann/json.hpp>

#include <set>
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
  /// Serving regime of a step_throughput row (each is a published measurement of a deployment,
  /// ablations included): "prefill", "decode > 32 seq/rank" or "decode <= 32 seq/rank"; empty
  /// for the other kinds of case (kernels, all-to-all, trace statistics).
  std::string regime;
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

/// The *.json files of folder `dir`, sorted by name (possibly none). Throws CaseError when `dir`
/// is not a folder.
std::vector<std::string> json_files(const std::string& dir);

/// Every case of folder `dir` (json_files order), each name once: a second file of a name (a copy
/// beside the original) throws CaseError naming both files. Possibly none.
std::vector<Case> load_cases(const std::string& dir);

/// The case's "rows" that run (all, or with --quick those whose "quick" is true), and a Row for
/// each with the metric, unit, published value, bound and expected-fail reason filled in.
struct RowSpec {
  const nlohmann::json* j;
  std::string where;  ///< "file: rows[i]" for messages
  Row row;
};
std::vector<RowSpec> selected_rows(const Case& c, bool quick);

/// The settings a step_throughput row (or its "baseline") may change: the ones a published
/// ablation varies (sim/cli/validate_step.cpp's header comment).
const std::set<std::string>& step_row_settings();

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

/// The engine's error against published serving deployments in one regime: the evaluated rows
/// whose `regime` is set, error = simulated/published − 1 (a fraction; > 0: the engine's
/// throughput is higher than the deployment's, i.e. it is optimistic and sizes too few nodes).
struct RegimeError {
  std::string regime;
  int rows = 0;
  double min_error = 0, max_error = 0;
  std::vector<std::string> cases;  ///< case names, each once, in row order
};
/// The regime of a step row: "prefill", or a decode row's by its sequences per rank ("decode > 32
/// seq/rank", "decode <= 32 seq/rank"; 32: SGLang's two-batch-overlap ablation, where overlap loses
/// at 32 tokens per GPU and gains at 256, serving-overheads.md §3).
std::string regime_of(bool decode, long long seqs_per_rank);
/// Groups `rows` by regime, in the order prefill, decode > 32, decode <= 32 (regimes without rows
/// are left out). Skipped rows and rows without a regime are ignored.
std::vector<RegimeError> regime_errors(const std::vector<Row>& rows);
/// Runs every step_throughput case of folder `dir` (all rows, not --quick) and returns
/// regime_errors of their rows. Throws CaseError for a missing folder or a malformed case, and
/// may throw another std::exception (a filesystem error, a scenario the engine cannot price).
std::vector<RegimeError> serving_regime_errors(const std::string& dir);
/// One line per regime ("prefill: +2.1% to +20.1% over 6 rows (case, case)"), for the CLI.
std::vector<std::string> regime_lines(const std::vector<RegimeError>& r);
/// The same as JSON: [{"regime", "rows", "min_error", "max_error", "cases"}] (errors as fractions).
nlohmann::json regime_json(const std::vector<RegimeError>& r);

}  // namespace servesim::cli::validation
