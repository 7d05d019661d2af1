// `servesim run`: a script of named steps. load → validate → apply the command line → check the
// cost models → read the workload once → simulate each deployment (one process each) → export →
// print.
#include "sim/cli/commands.hpp"
#include "sim/cli/common.hpp"
#include "sim/cli/run_progress.hpp"

#include "costmodels/factory.hpp"
#include "costmodels/fitted.hpp"
#include "costmodels/memory.hpp"
#include "sim/exporters/writers.hpp"
#include "sim/simulation.hpp"
#include "workloads/source.hpp"

#include <spdlog/spdlog.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

namespace servesim::cli {

namespace fs = std::filesystem;

std::string default_scenario() { return (fs::path(data_dir()) / "default.json").string(); }

namespace {

// What a deployment's process writes besides summary.json, from the command line.
struct Outputs {
  std::string requests = "csv";  // csv | csv.gz | none
  double timeline_from_s = 0, timeline_to_s = std::numeric_limits<double>::infinity();
  ProgressSlot* progress = nullptr;
  int decode_steps_per_event = 64;
  int prefix_index_min_ranks = 512;
  bool all_to_all_flows = false;
};

// One deployment, in this (child) process. Returns 0 on success.
int run_one(const Scenario& s, const DeploymentSpec& d, const fs::path& dir, const std::vector<std::string>& simgrid_cfg, const Outputs& o) {
  try {
    fs::create_directories(dir);
    auto cost = make_cost_model(s.cost_model, d.gpu);
    MetricsCollector metrics(d.slo, d.prefill.instances, d.decode.instances, s.warmup_s);
    std::unique_ptr<RequestsCsvWriter> csv;
    std::unique_ptr<TimelineWriter> timeline;
    SinkFanout fan;
    fan.add(&metrics);
    if (o.requests != "none") {
      csv = std::make_unique<RequestsCsvWriter>((dir / ("requests." + o.requests)).string(), o.requests == "csv.gz");
      fan.add(csv.get());
    }
    if (s.timeline) {
      timeline = std::make_unique<TimelineWriter>((dir / "timeline.json").string(), s.name + " / " + d.name, s.timeline_max_events, o.timeline_from_s,
                                                  o.timeline_to_s);
      fan.add(timeline.get());
    }
    std::unique_ptr<ProgressSink> progress;
    if (o.progress) {
      progress = std::make_unique<ProgressSink>(o.progress);
      fan.add(progress.get());
    }
    RunOptions opt;
    opt.horizon_s = s.horizon_s;
    opt.seed = s.seed;
    opt.decode_steps_per_event = o.decode_steps_per_event;
    opt.prefix_index_min_ranks = o.prefix_index_min_ranks;
    opt.all_to_all_flows = o.all_to_all_flows;
    for (const auto& c : simgrid_cfg) opt.simgrid_cfg.push_back("--cfg=" + c);
    auto source = make_source(workload_for(s.workload, d.prefix_cache), s.seed);
    const std::string workload = source->describe();
    const RequestSource* src = source.get();
    // released after the outputs are written: this child _exits next, and tearing down the run's
    // radix caches and queues would cost seconds at scale (over 10 s at 10,000 nodes)
    auto owned = std::make_unique<Simulation>(d, std::move(source), cost, fan, opt);
    Simulation& sim = *owned;
    const auto t0 = std::chrono::steady_clock::now();
    const RunTotals totals = sim.run();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RunReport rep;
    rep.deployment = &d;
    rep.workload = workload;
    if (!s.workload.trace_path.empty()) rep.trace = trace_file(s.workload.trace_path);
    rep.cost_model = cost->name();
    rep.seed = s.seed;
    rep.horizon_s = s.horizon_s;
    rep.prefill_memory = sim.prefill_memory();
    rep.decode_memory = sim.decode_memory();
    rep.totals = totals;
    rep.summary = metrics.summary();
    rep.skipped_rows = src->skipped_rows();
    if (dynamic_cast<const FittedCostModel*>(cost.get())) rep.fit = fitted_provenance(d.gpu);
    const nlohmann::json sj = summary_json(rep);
    std::ofstream(dir / "summary.json") << sj.dump(2) << "\n";
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    spdlog::info("{}: simulated {:.1f} s in {:.2f} s of wall time ({:.3g}x real time), peak RSS {} MiB; {} arrived, {} completed, {} rejected, {} in flight",
                 d.name, totals.end_s, wall, wall > 0 ? totals.end_s / wall : 0.0, ru.ru_maxrss / 1024, totals.arrivals, totals.completed,
                 totals.rejected, totals.in_flight);
    if (timeline && timeline->dropped() > 0)  // (rev26: dropped silently; a report then summed 10 of 2,194 steps)
      spdlog::warn("{}: timeline.json holds {} step slices; {} more were dropped past timeline.max_step_events ({})", d.name, timeline->written(),
                   timeline->dropped(), s.timeline_max_events);
    (void)owned.release();  // see above: the process ends without destroying it
    return 0;
  } catch (const TraceError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}: {}\n", d.name, e.what());
    return 1;
  }
}

// The command line's overrides of the scenario. Returns an exit status (0: go on).
int apply_overrides(Scenario& s, const RunArgs& a) {
  if (!a.trace.empty()) {
    // a Mooncake file's hash_ids are 512-token blocks (shared/traces/README.md); a scenario of another
    // kind sets block_tokens for its own workload, not for this file (rev25d: block_tokens 16 refused
    // every row of the real trace as malformed). A mooncake-kind scenario keeps the size it declares.
    if (s.workload.kind != WorkloadSpec::Kind::mooncake) s.workload.block_tokens = WorkloadSpec{}.block_tokens;
    s.workload.kind = WorkloadSpec::Kind::mooncake;
    s.workload.trace_path = a.trace;
    s.workload.max_requests = 0;
  }
  if (a.seed >= 0) s.seed = static_cast<std::uint64_t>(a.seed);
  if (a.horizon_s >= 0) s.horizon_s = a.horizon_s;
  if (a.warmup_s >= 0) s.warmup_s = a.warmup_s;
  if (const std::string why = never_ending_workload(s); !why.empty()) {
    fmt::print(stderr, "error: {}: {}\n", s.path, why);
    return 2;
  }
  if (s.horizon_s > 0 && s.warmup_s >= s.horizon_s) {
    fmt::print(stderr, "error: warm-up {} s (warmup_s / --warmup) must be below the horizon {} s (horizon_s / --horizon)\n", s.warmup_s, s.horizon_s);
    return 2;
  }
  if (a.time_scale > 0) {
    if (!is_trace(s.workload.kind)) {
      fmt::print(stderr, "error: --time-scale applies to trace replays; this scenario's workload is generated (set its rate instead)\n");
      return 2;
    }
    s.workload.time_scale = a.time_scale;
  }
  if (!a.cost_model.empty()) s.cost_model = a.cost_model;
  if (a.no_timeline) s.timeline = false;
  // options that would do nothing here are refused, as --time-scale is (rev27 user review)
  if (!a.timeline_window.empty() && !s.timeline) {
    fmt::print(stderr, "error: --timeline-window: no timeline is written ({}): nothing to window\n",
               a.no_timeline ? "--no-timeline" : "the scenario's \"timeline\" is off");
    return 2;
  }
  if (a.skip_bad_rows) {
    if (!is_trace(s.workload.kind)) {
      fmt::print(stderr, "error: --skip-bad-rows applies to trace replays; this scenario's workload is generated (it has no rows)\n");
      return 2;
    }
    s.workload.skip_bad_rows = true;
  }
  if (!a.only.empty()) {
    const std::string names = deployment_names(s);
    std::erase_if(s.deployments, [&](const DeploymentSpec& d) { return d.name != a.only; });
    if (s.deployments.empty()) {
      fmt::print(stderr, "error: --only {}: no deployment of that name in {} (it has: {})\n", a.only, s.path, names);
      return 2;
    }
  }
  return 0;
}

// Every deployment's cost model can be built (the fitted parameters exist). Exit status.
int check_cost_models(const Scenario& s) {
  try {
    for (const auto& d : s.deployments) {
      if (auto missing = missing_fitted_parameters(s.cost_model, d.gpu)) throw std::runtime_error(*missing);
      make_cost_model(s.cost_model, d.gpu);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }
  return 0;
}

// Reads the whole workload once before anything runs: a malformed row stops here, naming it.
// Session traces are walked round by round too (generators are not: their rounds depend on the
// simulation and they are not read from files). Exit status.
int read_workload(const Scenario& s, const RunArgs& a, long long& requests) {
  requests = 0;
  try {
    auto src = make_source(s.workload, s.seed);
    const bool walk = is_trace(s.workload.kind);
    // a synthetic workload is generated, not read: nothing to check, and its count is the scenario's
    // (rev25d: 2^31 requests were all generated here before a 2 s horizon began)
    if (s.workload.kind == WorkloadSpec::Kind::synthetic) {
      requests = s.workload.requests;
      spdlog::info("workload: {} ({} requests)", src->describe(), requests);
      return 0;
    }
    while (auto r = src->next()) {
      ++requests;
      for (auto f = walk ? src->follow_up(*r, r->arrival_s) : std::nullopt; f; f = src->follow_up(*f, f->arrival_s)) ++requests;
    }
    if (requests == 0 && src->skipped_rows() > 0)
      throw std::runtime_error(fmt::format("every row ({}) was malformed and skipped, nothing to simulate: is the file in the format of "
                                           "workload.kind (--trace reads Mooncake JSONL)?",
                                           src->skipped_rows()));
    if (requests == 0 && walk)  // README "Input rules": an empty trace is refused
      throw std::runtime_error(fmt::format("{}: the trace is empty (no rows, or only blank lines): nothing to simulate", s.workload.trace_path));
    if (const std::string origin = src->time_origin(); !origin.empty()) spdlog::info("workload: arrival times rebased: {}", origin);
    // rows left out of the simulation: said even under --quiet (review: only an info line, which
    // --quiet hid, and summary.json's count)
    if (src->skipped_rows() > 0)
      fmt::print(stderr, "warning: {}: {} malformed rows skipped (--skip-bad-rows; summary.json counts them)\n", s.workload.trace_path,
                 src->skipped_rows());
    spdlog::info("workload: {} ({} {}{})", src->describe(), requests, walk || s.workload.kind == WorkloadSpec::Kind::synthetic ? "requests" : "sessions",
                 src->skipped_rows() ? fmt::format(", {} malformed rows skipped", src->skipped_rows()) : std::string());
  } catch (const TraceError& e) {
    const bool header = std::string(e.what()).find(": header \"") != std::string::npos;  // a wrong file, not a bad row (rev25d)
    fmt::print(stderr, "error: {}\n{}", e.what(),
               header ? "" : "(fix the row, or pass --skip-bad-rows to skip malformed rows and count them in summary.json)\n");
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}: workload{}: {}\n", s.path, a.trace.empty() ? ".trace" : " (--trace)", e.what());
    return 2;
  }
  return 0;
}

// One process per deployment: SimGrid's engine is a per-process singleton, and the processes run
// in parallel on the available cores. Exit status (the worst child's).
int simulate_deployments(const Scenario& s, const fs::path& out, const RunArgs& a, Outputs o, long long requests) {
  // SimGrid takes a precision of 0 or below and then crashes (maxmin/precision:-1, a segfault) or
  // never ends (surf/precision:-5) (rev26 review): every *precision item must be a positive number
  for (const auto& c : a.simgrid_cfg) {
    const size_t colon = c.find(':');
    const std::string key = c.substr(0, colon), value = colon == std::string::npos ? "" : c.substr(colon + 1);
    if (key.size() < 9 || key.compare(key.size() - 9, 9, "precision") != 0) continue;
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(v > 0) || !std::isfinite(v)) {
      fmt::print(stderr, "error: --cfg {}: {} must be a positive number\n", c, key);
      return 2;
    }
  }
  if (!a.simgrid_cfg.empty() && !Simulation::simgrid_accepts(a.simgrid_cfg)) {
    fmt::print(stderr, "error: --cfg: SimGrid refused one of {} (its message is above)\n", fmt::join(a.simgrid_cfg, ", "));
    return 2;
  }
  fs::create_directories(out);
  // One process per deployment: SimGrid's engine is a per-process singleton, and the processes
  // run in parallel on the available cores.
  const int jobs = a.jobs > 0 ? a.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::string> names;
  for (const auto& d : s.deployments) names.push_back(d.name);
  // the share done: simulated time over the horizon, or ended requests over a known count (not for
  // generated sessions, whose rounds are not counted beforehand)
  ProgressBoard board(names, s.horizon_s, s.workload.kind == WorkloadSpec::Kind::agent ? 0 : requests, !a.quiet);
  std::map<pid_t, std::string> running;
  int status_all = 0;
  auto reap = [&] {
    int st = 0;
    pid_t pid = 0;
    while ((pid = waitpid(-1, &st, WNOHANG)) == 0) {  // redraw the progress line while waiting
      board.draw();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (pid <= 0) return;
    const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    if (code != 0) {
      fmt::print(stderr, "error: deployment {} failed (exit status {})\n", running[pid], code);
      status_all = std::max(status_all, code);
    }
    running.erase(pid);
  };
  for (size_t i = 0; i < s.deployments.size(); ++i) {
    const DeploymentSpec& d = s.deployments[i];
    while (static_cast<int>(running.size()) >= jobs) reap();
    std::fflush(nullptr);
    o.progress = board.slot(i);
    const pid_t pid = fork();
    if (pid < 0) {
      fmt::print(stderr, "error: fork failed\n");
      return 1;
    }
    if (pid == 0) {
      const int code = run_one(s, d, out / d.name, a.simgrid_cfg, o);
      std::fflush(nullptr);
      _exit(code);  // skip SimGrid's exit handlers: the engine of this child is never torn down
    }
    running[pid] = d.name;
  }
  while (!running.empty()) reap();
  board.finish();
  return status_all;
}

// --requests and --timeline-window. Exit status (0: go on).
int outputs_from(const RunArgs& a, Outputs& o) {
  if (a.requests != "csv" && a.requests != "csv.gz" && a.requests != "none") {
    fmt::print(stderr, "error: --requests: \"{}\" is not one of csv, csv.gz, none\n", a.requests);
    return 2;
  }
  o.requests = a.requests;
  o.decode_steps_per_event = a.decode_steps_per_event;
  o.prefix_index_min_ranks = a.prefix_index_min_ranks;
  o.all_to_all_flows = a.all_to_all_flows;
  if (a.timeline_window.empty()) return 0;
  const auto colon = a.timeline_window.find(':');
  char* e1 = nullptr;
  char* e2 = nullptr;
  const std::string lo = a.timeline_window.substr(0, colon), hi = colon == std::string::npos ? "" : a.timeline_window.substr(colon + 1);
  o.timeline_from_s = lo.empty() ? 0.0 : std::strtod(lo.c_str(), &e1);
  o.timeline_to_s = hi.empty() ? std::numeric_limits<double>::infinity() : std::strtod(hi.c_str(), &e2);
  const bool bad = colon == std::string::npos || (e1 && *e1) || (e2 && *e2) || !(o.timeline_from_s >= 0) || !(o.timeline_to_s > o.timeline_from_s) ||
                   o.timeline_from_s > kMaxSeconds;
  if (bad) {
    fmt::print(stderr, "error: --timeline-window: \"{}\" must be START:END in simulated seconds, 0 <= START < END (either may be empty: from 0, to the end)\n",
               a.timeline_window);
    return 2;
  }
  return 0;
}

// The scenario-level summary.json (every deployment of this run) and the console table.
void export_and_print(const Scenario& s, const fs::path& out, const std::string& requests) {
  std::vector<nlohmann::json> runs;
  for (const auto& d : s.deployments) {
    std::ifstream in(out / d.name / "summary.json");
    runs.push_back(nlohmann::json::parse(in));
  }
  nlohmann::json all = {{"scenario", s.name}, {"scenario_file", s.path}, {"deployments", runs}};
  // the article's unit-cost formula with the model files, when the run has both models
  const ModelSpec *v4 = nullptr, *k3 = nullptr;
  for (const auto& d : s.deployments) {
    if (d.model.name == "deepseek-v4-pro") v4 = &d.model;
    if (d.model.name == "kimi-k3") k3 = &d.model;
  }
  const double facts = v4 && k3 ? article_decode_bytes(*v4, 500000) / article_decode_bytes(*k3, 500000) : std::nan("");
  const nlohmann::json ratios = unit_cost_ratios(runs, facts);
  if (!ratios.empty()) all["unit_cost_dsv4_over_k3"] = ratios;
  std::ofstream(out / "summary.json") << all.dump(2) << "\n";
  fmt::print("{}", summary_table(runs));
  for (const auto& q : ratios)
    fmt::print("DSV4/K3 unit cost on {} ($ per million output tokens, {} / {}): simulated {:.2f}, article 0.41 (decode bandwidth per "
               "token{}); decode GPUs {:.2f}: the simulated ratio compares efficiency only when both run at their own capacity (servesim capacity), "
               "below it it is about the GPU ratio\n",
               q["hardware"].get<std::string>(), q["dsv4_deployment"].get<std::string>(), q["k3_deployment"].get<std::string>(),
               q["simulated_usd_per_million_output_tokens_ratio"].get<double>(),
               q["model_facts_ratio"].is_number() ? fmt::format("; {:.2f} with the model files' KV and active parameters", q["model_facts_ratio"].get<double>())
                                                  : std::string(),
               q["decode_gpu_ratio"].get<double>());
  fmt::print("\noutputs: {0}/summary.json (the deployments of this run), {0}/<deployment>/{{summary.json{1}{2}}}\n", out.string(),
             requests == "none" ? "" : ", requests." + requests, s.timeline ? ", timeline.json" : "");
}

}  // namespace

int run(const RunArgs& a) {
  auto loaded = load_or_report(a.scenario.empty() ? default_scenario() : a.scenario);
  if (!loaded) return 2;
  Scenario s = std::move(*loaded);
  if (int e = apply_overrides(s, a)) return e;
  if (a.out.empty() && !is_safe_file_name(s.name)) {  // out/<scenario name> must stay under out/
    fmt::print(stderr, "error: {}: name: \"{}\" cannot be the output folder out/<name>: {} (or pass --out DIR)\n", s.path, s.name,
               safe_file_name_rule());
    return 2;
  }
  if (a.quiet) spdlog::set_level(spdlog::level::warn);
  Outputs o;
  if (int e = outputs_from(a, o)) return e;
  if (int e = check_cost_models(s)) return e;
  long long requests = 0;
  if (int e = read_workload(s, a, requests)) return e;
  const fs::path out = a.out.empty() ? fs::path("out") / s.name : fs::path(a.out);
  if (int e = simulate_deployments(s, out, a, o, requests)) return e;
  export_and_print(s, out, a.requests);
  return 0;
}

}  // namespace servesim::cli
