// The command line: sim/cli/args.cpp (its option table and the range checks of numeric options)
// fed an argv made of the input's NUL-separated words after "servesim". The commands are stubs
// that check the numbers they receive. Contract: exit status 0 or 2 (usage error), and every number
// handed to a command is finite and in range. An exception escaping the CommandLine is a finding (the
// `--horizon inf` class of bug, exit 134).
#include "fuzz/fuzz_common.hpp"
#include "scenarios/scenario.hpp"
#include "sim/cli/args.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/costmodel_cmd.hpp"
#include "sim/cli/validate_cmd.hpp"
#include "sim/cli/capacity_cmd.hpp"
#include "sim/cli/report_cmd.hpp"

#include <CLI/CLI.hpp>
#if __has_include("sim/cli/sweep_cmd.hpp")
#include "sim/cli/sweep_cmd.hpp"
#define SERVESIM_FUZZ_SWEEP 1
#endif

#include <cmath>
#include <cstdio>
#include <vector>

namespace servesim {
// the sweep's policy-name check (sim/validate.hpp) lives in the engine's library, which this target
// does not build: args.cpp only hands it to the sweep command, whose stub below never calls it
void validate_policy_names(const DeploymentSpec&, const std::string&) {}
}  // namespace servesim

namespace servesim::cli {
using fuzz::finding;
int run(const RunArgs& a) {
  if (a.horizon_s != -1 && (!std::isfinite(a.horizon_s) || a.horizon_s < 0 || a.horizon_s > kMaxSeconds)) finding("run: horizon");
  if (a.time_scale != -1 && (!std::isfinite(a.time_scale) || a.time_scale <= 0)) finding("run: time_scale");
  if (a.seed < -1 || a.jobs < 0 || a.jobs > 4096) finding("run: seed/jobs");
  return 0;
}
int step(const StepArgs& a) {
  if (a.seqs_per_rank < 1 || a.tokens < -1 || a.context < -1) finding("step: numbers");
  return 0;
}
int plan(const std::string&) { return 0; }
int topology(const std::string&) { return 0; }
std::string default_scenario() { return "default.json"; }
int costmodel_fit(const CostModelArgs& a) { return a.worst < 0 ? (finding("costmodel: worst"), 0) : 0; }
int costmodel_report(const CostModelArgs& a) { return costmodel_fit(a); }
int validate(const ValidateArgs&) { return 0; }
int capacity(const CapacityArgs& a) {
  if (a.sessions < -1 || (a.rate != -1 && (!std::isfinite(a.rate) || a.rate <= 0))) finding("capacity: load");
  if (!std::isfinite(a.ttft_p99_s) || a.ttft_p99_s <= 0 || !std::isfinite(a.tpot_p99_s) || a.tpot_p99_s <= 0) finding("capacity: slo");
  if (a.seeds < 1 || a.max_nodes < 1 || a.jobs < 0) finding("capacity: counts");
  for (int t : a.attn_tp) if (t < 1) finding("capacity: attn_tp");
  for (int m : a.max_running) if (m < 1) finding("capacity: max_running");
  return 0;
}
// report_cmd.cpp registers string options only (no numbers to check); it is not linked here because
// it pulls in the HTML exporter, so its three options are declared the same way
CLI::App* add_report(CLI::App& app, ReportArgs& a) {
  auto* r = app.add_subcommand("report", "report");
  r->add_option("dir", a.dir, "dir")->required();
  r->add_option("--out", a.out, "out");
  r->add_option("--json", a.json, "json");
  return r;
}
int report(const ReportArgs&) { return 0; }
#ifdef SERVESIM_FUZZ_SWEEP
int sweep(const SweepArgs& a) { return a.jobs < 0 ? (finding("sweep: jobs"), 0) : 0; }
#endif
}  // namespace servesim::cli

namespace {
// One option table for the whole campaign (building CLI11's table is most of a parse's cost);
// CommandLine resets every option to its default before each parse, as a fresh process would.
// Built in LLVMFuzzerInitialize, outside libFuzzer's per-input timer: built inside the first input
// of a loaded machine's fork-mode job it ran past 1 s, and libFuzzer's timeout handler, which
// allocates, deadlocked inside ASan's allocator (Dec 1 2026 campaign).
servesim::cli::CommandLine* command_line = nullptr;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  command_line = new servesim::cli::CommandLine;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::vector<std::string> words{"servesim"};
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      words.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  words.push_back(cur);
  if (words.size() > 64) return 0;
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  // CLI11 prints usage errors and help; keep the fuzzer's output readable.
  static FILE* devnull = [] {
    FILE* f = std::freopen("/dev/null", "w", stdout);
    return f;
  }();
  (void)devnull;
  const int rc = (*command_line)(static_cast<int>(words.size()), argv.data());
  if (rc != 0 && rc != 2) servesim::fuzz::finding("exit status " + std::to_string(rc));
  return 0;
}
