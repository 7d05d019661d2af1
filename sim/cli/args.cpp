// servesim's command line: one table of subcommands and options (CLI11), then dispatch.
#include "sim/cli/args.hpp"

#include "sim/cli/capacity_cmd.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/costmodel_cmd.hpp"
#include "sim/cli/report_cmd.hpp"
#include "sim/cli/sweep_cmd.hpp"
#include "sim/cli/validate_cmd.hpp"
#include "sim/validate.hpp"

#include "scenarios/scenario.hpp"

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace servesim::cli {

namespace {

// Range checks of numeric options (README "Input rules"). CLI11 runs them on the text before
// converting it and prefixes the message with the option's name; a failure exits with status 2.
std::string bound(double x) {
  std::ostringstream o;
  o << x;
  return o.str();
}

// A value that is not empty (rev26: --out "" silently meant the default folder, --trace "" no trace).
const CLI::Validator kNotEmpty(
    [](std::string& v) { return v.empty() ? std::string("must not be empty (leave the option out for its default)") : std::string(); }, "");

// A whole integer in [lo, hi].
CLI::Validator integer_in(long long lo, long long hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        long long v = 0;
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || p != s.data() + s.size() || s.empty() || v < lo || v > hi)
          return "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got \"" + s + "\"";
        return {};
      },
      "");
}

// A finite number in [lo, hi] (inf, nan and 1e400 are refused).
CLI::Validator number_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v < lo || v > hi)
          return "must be a finite number in [" + bound(lo) + ", " + bound(hi) + "], got \"" + s + "\"";
        return {};
      },
      "");
}

CLI::App* add_run(CLI::App& app, RunArgs& r) {
  auto* run = app.add_subcommand("run", "simulate every deployment of a scenario (default: the built-in scenario)");
  run->add_option("scenario", r.scenario, "scenario JSON file")->check(kNotEmpty);
  run->add_option("--trace", r.trace, "replay this Mooncake JSONL trace instead of the scenario's workload")->check(kNotEmpty);
  run->add_option("--out", r.out, "output folder (default out/<scenario name>)")->check(kNotEmpty);
  run->add_option("--only", r.only, "simulate only the deployment with this name")->check(kNotEmpty);
  run->add_option("--seed", r.seed, "random seed (default: the scenario's)")->check(integer_in(0, std::numeric_limits<long long>::max()));
  run->add_option("--horizon", r.horizon_s, "stop at this simulated time in seconds (0: run to completion)")->check(number_in(0, kMaxSeconds));
  run->add_option("--warmup", r.warmup_s, "leave requests arriving before this simulated time (s) out of every metric")->check(number_in(0, kMaxSeconds));
  run->add_option("--time-scale", r.time_scale, "multiply trace arrival times by this factor (TraceLab: the tool waits too, unless the scenario sets wait_scale)")->check(number_in(1e-9, 1e9));
  run->add_option("--cost-model", r.cost_model, "cost model: fitted (default: kernel-fitted, issue #5) | roofline");
  run->add_option("--jobs", r.jobs, "deployments simulated in parallel (default: one per core)")->check(integer_in(1, 4096));
  run->add_flag("--no-timeline", r.no_timeline, "do not write timeline.json");
  run->add_option("--requests", r.requests, "the per-request file: csv (requests.csv), csv.gz (gzip, zlib) or none")
      ->capture_default_str()->check(CLI::IsMember({"csv", "csv.gz", "none"}));
  run->add_option("--timeline-window", r.timeline_window, "write only this part of timeline.json: START:END in simulated seconds (either may be empty)");
  run->add_flag("--quiet", r.quiet, "no progress line (shown on a terminal for runs over ~2 s) and no info log lines");
  run->add_flag("--skip-bad-rows", r.skip_bad_rows, "skip malformed trace rows (counted in summary.json) instead of stopping");
  run->add_option("--cfg", r.simgrid_cfg, "SimGrid configuration item, e.g. network/model:LV08 (repeatable)");
  run->add_option("--decode-steps-per-event", r.decode_steps_per_event,
                  "decode steps one SimGrid event may cover while the batch cannot change (1: one event per step; results agree up to clock "
                  "rounding)")
      ->capture_default_str()->check(integer_in(1, 1 << 20));
  run->add_option("--prefix-index-min-ranks", r.prefix_index_min_ranks,
                  "prefill ranks from which the cache-aware router's prefix lookups go through one pool-wide index (same answers; a "
                  "huge value turns it off, for checking)")
      ->capture_default_str()->check(integer_in(0, 1 << 30));
  run->add_flag("--all-to-all-flows", r.all_to_all_flows,
                "all_to_all_on_fabric as one background flow per attention-TP group, direction and step (the check form) instead of "
                "bandwidth held on the NICs and uplinks");
  return run;
}

CLI::App* add_step(CLI::App& app, StepArgs& st) {
  auto* step = app.add_subcommand("step", "time of one batch step for a uniform batch and the throughput it implies (no queueing)");
  step->add_option("scenario", st.scenario, "scenario JSON file (default: the built-in scenario)")->check(kNotEmpty);
  step->add_option("--deployment", st.deployment, "deployment name (default: the first)")->check(kNotEmpty);
  step->add_option("--phase", st.phase, "prefill or decode")->capture_default_str()->check(CLI::IsMember({"prefill", "decode"}));
  step->add_option("--seqs-per-rank", st.seqs_per_rank, "sequences per DP rank")->capture_default_str()->check(integer_in(1, 1 << 20));
  step->add_option("--tokens", st.tokens, "new tokens per sequence (prefill; default: the pool's chunk_tokens; decode: always 1)")
      ->check(integer_in(1, kMaxTokens));
  step->add_option("--context", st.context, "tokens already cached per sequence (default: prefill 0, decode 2048)")->check(integer_in(0, kMaxTokens));
  step->add_option("--cost-model", st.cost_model, "cost model: fitted (default) or roofline");
  step->add_flag("--ops", st.ops, "also list every op of one layer of each kind: latency per layer, layers, share of the step, provenance");
  return step;
}

CLI::App* add_costmodel(CLI::App& app, CostModelArgs& cm, CLI::App*& cm_fit) {
  auto* costmodel = app.add_subcommand("costmodel", "kernel-fitted cost model: rebuild it from the measurement tables, or report its accuracy");
  costmodel->require_subcommand(1);
  cm_fit = costmodel->add_subcommand("fit", "fit every kernel family and the communication parameters; write the parameter file");
  auto* cm_report = costmodel->add_subcommand("report", "held-out error per family, composite and published-number checks, communication rows");
  for (auto* sc : {cm_fit, cm_report}) {
    sc->add_option("--data", cm.data, "folder of kernel tables (default: the folder of the parameter file)")->check(kNotEmpty);
    sc->add_option("--params", cm.params, "fitted-parameter file (default: the hardware file's fitted_models)")->check(kNotEmpty);
    sc->add_option("--hardware", cm.hardware, "GPU the tables were measured on (default h200)");
    sc->add_option("--worst", cm.worst, "also print the N worst held-out rows of each family")->check(integer_in(0, 1000000));
    sc->add_option("--family", cm.family, "restrict --worst to this kernel family");
    sc->add_flag("--no-shape-out", cm.no_shape_out,
                 "k-fold validation only: skip leaving each measured shape out (most of the 7-15 minutes here; fit then writes no shape-out figures)");
  }
  cm_fit->add_flag("--no-validate", cm.no_validate, "skip the held-out validation");

  return costmodel;
}

CLI::App* add_capacity(CLI::App& app, CapacityArgs& c) {
  auto* cap = app.add_subcommand("capacity", "the fewest nodes that serve a load within the SLO in steady state: a search over simulated runs");
  cap->add_option("scenario", c.scenario, "scenario JSON file (its workload, and the deployment to start from)")->required();
  auto* ses = cap->add_option("--sessions", c.sessions, "concurrent closed-loop agent sessions")->check(integer_in(1, kMaxSessions));
  cap->add_option("--rate", c.rate, "arrivals per second (synthetic requests or open-loop agent sessions)")->check(number_in(1e-9, 1e9))->excludes(ses);
  cap->add_option("--only", c.only, "the deployment to size (default: the first)")->check(kNotEmpty);
  cap->add_option("--out", c.out, "output folder (default out/capacity/<scenario>-<deployment>)")->check(kNotEmpty);
  cap->add_option("--ttft-p99", c.ttft_p99_s, "SLO: TTFT p99 bound in seconds")->capture_default_str()->check(number_in(1e-6, kMaxSeconds));
  cap->add_option("--tpot-p99", c.tpot_p99_s, "SLO: TPOT p99 bound in seconds")->capture_default_str()->check(number_in(1e-6, kMaxSeconds));
  cap->add_option("--max-rejected", c.max_rejected, "SLO: largest rejected share of the measured requests")->capture_default_str()->check(number_in(0, 1));
  cap->add_option("--attn-tp", c.attn_tp, "attention TP values to try, both pools (default: the deployment's)")->delimiter(',')->check(integer_in(1, 64));
  cap->add_option("--max-running", c.max_running, "decode batch limits to try (default: the deployment's)")->delimiter(',')->check(integer_in(1, 1 << 20));
  cap->add_option("--seeds", c.seeds, "seeds of the band at the answer")->capture_default_str()->check(integer_in(1, 1000));
  cap->add_option("--horizon", c.horizon_s, "simulated seconds per run (default: the scenario's horizon_s, else 900)")->check(number_in(1e-3, kMaxSeconds));
  cap->add_option("--warmup", c.warmup_s, "warm-up per run (default: the scenario's warmup_s, else horizon / 3)")->check(number_in(0, kMaxSeconds));
  cap->add_option("--rho", c.rho, "GPU residency the static estimate assumes")->capture_default_str()->check(number_in(1e-6, 1));
  cap->add_option("--pd", c.decode_per_prefill, "decode instances per prefill instance along which the search's bracket grows")
      ->capture_default_str()->check(number_in(1e-3, 1e3));
  cap->add_option("--max-nodes", c.max_nodes, "give up a configuration beyond this many nodes")->capture_default_str()->check(integer_in(1, 1000000));
  cap->add_option("--resolution", c.resolution,
                  "bisections stop when their ends differ by at most this share of the nodes (0: exact, one instance)")
      ->capture_default_str()->check(number_in(0, 0.5));
  cap->add_flag("!--no-plan-start", c.plan_start, "start the bracket from 1 instance, not from the static estimate");
  cap->add_option("--jobs", c.jobs, "runs at once (default: one per core)")->check(integer_in(1, 4096));
  cap->add_option("--cost-model", c.cost_model, "cost model: fitted (default) or roofline");
  cap->add_flag("--quiet", c.quiet, "no line per run on stderr");
  return cap;
}

CLI::App* add_validate(CLI::App& app, ValidateArgs& v) {
  auto* validate = app.add_subcommand("validate", "every case of scenarios/validation/ against its published numbers, as one table (exit 1 if a row misses its bound)");
  validate->add_flag("--quick", v.quick, "only the rows marked quick (the CI subset, well under a second here)");
  validate->add_option("--dir", v.dir, "folder of validation case files (default: scenarios/validation)")->check(kNotEmpty);
  return validate;
}

}  // namespace

// The option table, bound to the argument structs it fills. Built once per CommandLine: CLI11
// builds every option and validator here, which is most of a parse's cost.
struct CommandLine::Table {
  CLI::App app{"servesim: discrete-event simulator of LLM inference-serving clusters"};
  RunArgs r;
  StepArgs st;
  CostModelArgs cm;
  ValidateArgs va;
  CapacityArgs ca;
  ReportArgs rp;
  SweepArgs sw;
  std::string plan_file, topo_file;
  CLI::App *cm_fit = nullptr, *run = nullptr, *plan = nullptr, *topo = nullptr, *step = nullptr, *costmodel = nullptr,
           *validate = nullptr, *cap = nullptr, *rep = nullptr, *sweep = nullptr;

  Table() {
    app.require_subcommand(1);
    run = add_run(app, r);
    plan = app.add_subcommand("plan", "memory per GPU, KV per request and capacity; the article's Section III next to the real configs");
    plan->add_option("scenario", plan_file, "scenario JSON file (default: the built-in scenario)")->check(kNotEmpty);
    topo = app.add_subcommand("topology", "GPUs, links, per-node and bisection bandwidth of each deployment's cluster");
    topo->add_option("scenario", topo_file, "scenario JSON file (default: the built-in scenario)")->check(kNotEmpty);
    step = add_step(app, st);
    costmodel = add_costmodel(app, cm, cm_fit);
    validate = add_validate(app, va);
    cap = add_capacity(app, ca);
    rep = add_report(app, rp);
    sweep = app.add_subcommand("sweep", "a Cartesian grid over scenario fields, run on the local cores, into one results table");
    sweep->add_option("grid", sw.grid, "grid JSON file (scenarios/sweeps/)")->required();
    sweep->add_option("--out", sw.out, "output folder (default out/sweeps/<grid name>)")->check(kNotEmpty);
    sweep->add_option("--jobs", sw.jobs, "points run in parallel (default: one per core)")->check(integer_in(1, 4096));
  }

  // Every argument back to its default and CLI11's parse state cleared, so that a second command
  // line sees nothing of the first (the options are bound to these members by reference).
  void reset() {
    app.clear();
    r = RunArgs{};
    st = StepArgs{};
    cm = CostModelArgs{};
    va = ValidateArgs{};
    ca = CapacityArgs{};
    rp = ReportArgs{};
    sw = SweepArgs{};
    plan_file.clear();
    topo_file.clear();
  }
};

CommandLine::CommandLine() : t_(std::make_unique<Table>()) {}
CommandLine::~CommandLine() = default;

int CommandLine::operator()(int argc, char** argv) {
  // CLI11 2.1's (Debian 12) App::clear() leaves App::parse_order_ (every option parsed, one pointer each) to
  // grow; a CommandLine that parses without end (fuzz/fuzz_cli.cpp) would grow with it (273 MB
  // after 782,950 parses): a fresh table every kParsesPerTable parses bounds it.
  if (++parses_ > kParsesPerTable) t_ = std::make_unique<Table>(), parses_ = 1;
  Table& t = *t_;
  t.reset();
  try {
    t.app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = t.app.exit(e);  // prints help (code 0) or the usage error
    return code == 0 ? 0 : 2;
  }
  if (*t.costmodel) return *t.cm_fit ? costmodel_fit(t.cm) : costmodel_report(t.cm);
  if (*t.run) return cli::run(t.r);
  if (*t.sweep) {
    // policy names, which the scenario reader leaves to sim/validate.hpp (commit review, twenty-third session)
    t.sw.check_point = [](const Scenario& s) {
      for (size_t i = 0; i < s.deployments.size(); ++i) {
        try {
          validate_policy_names(s.deployments[i], "deployments[" + std::to_string(i) + "]");
        } catch (const std::invalid_argument& e) {
          throw ScenarioError(s.path + ": " + e.what());
        }
      }
    };
    return cli::sweep(t.sw);
  }
  if (*t.rep) return cli::report(t.rp);
  if (*t.cap) return cli::capacity(t.ca);
  if (*t.step) return cli::step(t.st);
  if (*t.validate) return cli::validate(t.va);
  if (*t.plan) return cli::plan(t.plan_file.empty() ? default_scenario() : t.plan_file);
  return cli::topology(t.topo_file.empty() ? default_scenario() : t.topo_file);
}

int main(int argc, char** argv) { return CommandLine{}(argc, argv); }

}  // namespace servesim::cli
