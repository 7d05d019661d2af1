#include "costmodels/feasibility.hpp"
#include "sim/cli/commands.hpp"

#include "costmodels/capacity.hpp"
#include "costmodels/factory.hpp"
#include "costmodels/fitted.hpp"
#include "costmodels/memory.hpp"
#include "scenarios/scenario.hpp"
#include "sim/exporters/writers.hpp"
#include "sim/simulation.hpp"
#include "sim/validate.hpp"
#include "workloads/source.hpp"
#include "topology/graph.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

namespace servesim::cli {

namespace fs = std::filesystem;

std::string default_scenario() { return (fs::path(data_dir()) / "default.json").string(); }

namespace {

std::string gb(double bytes, int prec = 1) { return fmt::format("{:.{}f} GB", bytes / 1e9, prec); }

std::optional<Scenario> load_or_report(const std::string& path) {
  try {
    Scenario s = load_scenario(path);
    validate_scenario(s);
    return s;
  } catch (const ScenarioError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return std::nullopt;
  }
}

std::string deployment_names(const Scenario& s) {
  std::string names;
  for (const auto& d : s.deployments) names += (names.empty() ? "" : ", ") + d.name;
  return names;
}

// One deployment, in this (child) process. Returns 0 on success.
int run_one(const Scenario& s, const DeploymentSpec& d, const fs::path& dir, const std::vector<std::string>& simgrid_cfg) {
  try {
    fs::create_directories(dir);
    auto cost = make_cost_model(s.cost_model, d.gpu);
    MetricsCollector metrics(d.slo, d.prefill.instances, d.decode.instances);
    RequestsCsvWriter csv((dir / "requests.csv").string());
    std::unique_ptr<TimelineWriter> timeline;
    SinkFanout fan;
    fan.add(&metrics);
    fan.add(&csv);
    if (s.timeline) {
      timeline = std::make_unique<TimelineWriter>((dir / "timeline.json").string(), s.name + " / " + d.name, s.timeline_max_events);
      fan.add(timeline.get());
    }
    RunOptions opt;
    opt.horizon_s = s.horizon_s;
    for (const auto& c : simgrid_cfg) opt.simgrid_cfg.push_back("--cfg=" + c);
    auto source = make_source(s.workload, s.seed);
    const std::string workload = source->describe();
    const RequestSource* src = source.get();
    Simulation sim(d, std::move(source), cost, fan, opt);
    const auto t0 = std::chrono::steady_clock::now();
    const RunTotals totals = sim.run();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RunReport rep;
    rep.deployment = &d;
    rep.workload = workload;
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
    spdlog::info("{}: simulated {:.1f} s in {:.2f} s of wall time ({:.0f}x real time), peak RSS {} MiB; {} arrived, {} completed, {} rejected, {} in flight",
                 d.name, totals.end_s, wall, wall > 0 ? totals.end_s / wall : 0.0, ru.ru_maxrss / 1024, totals.arrivals, totals.completed,
                 totals.rejected, totals.in_flight);
    return 0;
  } catch (const TraceError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}: {}\n", d.name, e.what());
    return 1;
  }
}

}  // namespace

int run(const RunArgs& a) {
  auto loaded = load_or_report(a.scenario.empty() ? default_scenario() : a.scenario);
  if (!loaded) return 2;
  Scenario s = std::move(*loaded);
  if (!a.trace.empty()) {
    s.workload.kind = WorkloadSpec::Kind::mooncake;
    s.workload.trace_path = a.trace;
    s.workload.max_requests = 0;
  }
  if (a.seed >= 0) s.seed = static_cast<std::uint64_t>(a.seed);
  if (a.horizon_s >= 0) s.horizon_s = a.horizon_s;
  if (a.time_scale > 0) {
    if (!is_trace(s.workload.kind)) {
      fmt::print(stderr, "error: --time-scale applies to trace replays; this scenario's workload is generated (set its rate instead)\n");
      return 2;
    }
    s.workload.time_scale = a.time_scale;
  }
  if (!a.cost_model.empty()) s.cost_model = a.cost_model;
  if (a.no_timeline) s.timeline = false;
  if (a.skip_bad_rows) s.workload.skip_bad_rows = true;
  if (!a.only.empty()) {
    const std::string names = deployment_names(s);
    std::erase_if(s.deployments, [&](const DeploymentSpec& d) { return d.name != a.only; });
    if (s.deployments.empty()) {
      fmt::print(stderr, "error: --only {}: no deployment of that name in {} (it has: {})\n", a.only, s.path, names);
      return 2;
    }
  }
  try {
    for (const auto& d : s.deployments) make_cost_model(s.cost_model, d.gpu);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }
  // Read the whole workload once before anything runs: a malformed row stops here, naming it.
  // Session traces are walked round by round too (generators are not: their rounds depend on the
  // simulation and they are not read from files).
  long long requests = 0;
  try {
    auto src = make_source(s.workload, s.seed);
    const bool walk = is_trace(s.workload.kind);
    while (auto r = src->next()) {
      ++requests;
      for (auto f = walk ? src->follow_up(*r, r->arrival_s) : std::nullopt; f; f = src->follow_up(*f, f->arrival_s)) ++requests;
    }
    if (requests == 0 && src->skipped_rows() > 0)
      throw std::runtime_error(fmt::format("every row ({}) was malformed and skipped, nothing to simulate: is the file in the format of "
                                           "workload.kind (--trace reads Mooncake JSONL)?",
                                           src->skipped_rows()));
    spdlog::info("workload: {} ({} {}{})", src->describe(), requests, walk || s.workload.kind == WorkloadSpec::Kind::synthetic ? "requests" : "sessions",
                 src->skipped_rows() ? fmt::format(", {} malformed rows skipped", src->skipped_rows()) : std::string());
  } catch (const TraceError& e) {
    fmt::print(stderr, "error: {}\n(fix the row, or pass --skip-bad-rows to skip malformed rows and count them in summary.json)\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}: workload{}: {}\n", s.path, a.trace.empty() ? ".trace" : " (--trace)", e.what());
    return 2;
  }
  const fs::path out = a.out.empty() ? fs::path("out") / s.name : fs::path(a.out);
  fs::create_directories(out);
  // One process per deployment: SimGrid's engine is a per-process singleton, and the processes
  // run in parallel on the available cores.
  const int jobs = a.jobs > 0 ? a.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::map<pid_t, std::string> running;
  int status_all = 0;
  auto reap = [&] {
    int st = 0;
    const pid_t pid = wait(&st);
    if (pid <= 0) return;
    const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    if (code != 0) {
      fmt::print(stderr, "error: deployment {} failed (exit status {})\n", running[pid], code);
      status_all = std::max(status_all, code);
    }
    running.erase(pid);
  };
  for (const auto& d : s.deployments) {
    while (static_cast<int>(running.size()) >= jobs) reap();
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
      fmt::print(stderr, "error: fork failed\n");
      return 1;
    }
    if (pid == 0) {
      const int code = run_one(s, d, out / d.name, a.simgrid_cfg);
      std::fflush(nullptr);
      _exit(code);  // skip SimGrid's exit handlers: the engine of this child is never torn down
    }
    running[pid] = d.name;
  }
  while (!running.empty()) reap();
  if (status_all != 0) return status_all;
  std::vector<nlohmann::json> runs;
  for (const auto& d : s.deployments) {
    std::ifstream in(out / d.name / "summary.json");
    runs.push_back(nlohmann::json::parse(in));
  }
  nlohmann::json all = {{"scenario", s.name}, {"scenario_file", s.path}, {"deployments", runs}};
  std::ofstream(out / "summary.json") << all.dump(2) << "\n";
  fmt::print("{}", summary_table(runs));
  fmt::print("\noutputs: {0}/summary.json (the deployments of this run), {0}/<deployment>/{{summary.json, requests.csv{1}}}\n", out.string(),
             s.timeline ? ", timeline.json" : "");
  return 0;
}

// ----------------------------------------------------------------------------- step

namespace {

/// `servesim step --ops`: every op of one layer of each attention and FFN kind on one GPU (DP rank
/// 0 for attention; the busiest rank for the FFN), with its latency, the layers that run it and
/// its share of the step. Communication and the LM head are left out (the summary line has them).
void print_step_ops(const StepCostModel& m, const std::vector<SeqWork>& rank, Phase phase, double rank_tokens, double all_tokens,
                    double step_s) {
  const ModelSpec& model = m.model();
  fmt::print("\n  {:<22}{:<18}{:>7}{:>14}{:>14}{:>9}  {}\n", "layer kind", "op", "layers", "µs per layer", "ms per step", "share", "answered");
  std::vector<Op> ops;
  auto rows = [&](const std::string& kind, int layers) {
    for (const auto& o : ops) {
      const OpLatency l = m.cost_model().latency(o);
      fmt::print("  {:<22}{:<18}{:>7}{:>14.1f}{:>14.3f}{:>8.1f}%  {}\n", kind, std::string(to_string(o.kind)), layers, l.seconds * 1e6,
                 layers * l.seconds * 1e3, 100 * layers * l.seconds / step_s, std::string(to_string(l.source)));
    }
  };
  for (size_t i = 0; i < model.attention_kinds.size(); ++i) {
    const int n = model.count_attention(static_cast<int>(i));
    if (n == 0) continue;
    ops.clear();
    m.attention_ops(static_cast<int>(i), rank, phase, ops);
    rows(model.attention_kinds[i].name, n);
  }
  for (size_t i = 0; i < model.ffn_kinds.size(); ++i) {
    const int n = model.count_ffn(static_cast<int>(i));
    if (n == 0) continue;
    ops.clear();
    m.ffn_ops(static_cast<int>(i), rank_tokens, all_tokens, ops);
    rows(model.ffn_kinds[i].name, n);
  }
}

}  // namespace

int step(const StepArgs& a) {
  auto s = load_or_report(a.scenario.empty() ? default_scenario() : a.scenario);
  if (!s) return 2;
  const DeploymentSpec* d = &s->deployments.front();
  if (!a.deployment.empty()) {
    d = nullptr;
    for (const auto& x : s->deployments)
      if (x.name == a.deployment) d = &x;
    if (!d) {
      fmt::print(stderr, "error: --deployment {}: no such deployment in {} (it has: {})\n", a.deployment, s->path, deployment_names(*s));
      return 2;
    }
  }
  const bool decode = a.phase == "decode";
  const PoolSpec& pool = decode ? d->decode : d->prefill;
  if (decode && a.tokens > 1) {
    fmt::print(stderr, "error: --tokens {}: a decode step computes 1 new token per sequence (use --phase prefill for chunks)\n", a.tokens);
    return 2;
  }
  const long long tokens = decode ? 1 : (a.tokens < 0 ? pool.chunk_tokens : a.tokens);
  const long long context = a.context < 0 ? (decode ? 2048 : 0) : a.context;
  if (a.seqs_per_rank < 1 || tokens < 1) {
    fmt::print(stderr, "error: --seqs-per-rank and --tokens must be ≥ 1, --context ≥ 0\n");
    return 2;
  }
  std::shared_ptr<const CostModel> cost;
  try {
    cost = make_cost_model(a.cost_model.empty() ? s->cost_model : a.cost_model, d->gpu);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }
  StepCostModel m(d->model, cost, fabric_params(d->cluster, d->gpu), instance_shape(pool), pool.step_overhead_s);
  std::vector<std::vector<SeqWork>> ranks(static_cast<size_t>(pool.dp()),
                                          std::vector<SeqWork>(static_cast<size_t>(a.seqs_per_rank), SeqWork{tokens, context, true}));
  const StepTime t = m.step(ranks, decode ? Phase::decode : Phase::prefill);
  const double all_tokens = static_cast<double>(tokens * a.seqs_per_rank * pool.dp());
  const double nodes = std::max(1.0, static_cast<double>(pool.ep) / d->gpu.gpus_per_node);
  fmt::print("{} {} step of one instance (EP{}, attn TP{}, DP{}): {} sequence{} per DP rank, {} new token{} each, {} cached\n", d->name,
             a.phase, pool.ep, pool.attn_tp, pool.dp(), a.seqs_per_rank, a.seqs_per_rank == 1 ? "" : "s", tokens,
             tokens == 1 ? "" : "s", context);
  fmt::print("  step time      {:10.3f} ms  (attention {:.3f}, FFN {:.3f}, exposed communication {:.3f}, other {:.3f})\n", t.total_s * 1e3,
             t.attention_s * 1e3, t.ffn_s * 1e3, t.comm_s * 1e3, t.other_s * 1e3);
  fmt::print("  throughput     {:10.0f} {} tokens/s per node, {:.0f} per GPU (cost model {}, answers {})\n", all_tokens / t.total_s / nodes,
             decode ? "output" : "input", all_tokens / t.total_s / pool.ep, cost->name(), std::string(to_string(t.source)));
  fmt::print("  extrapolated     {:8.1f}% of the step time was answered outside the measured range\n",
             t.total_s > 0 ? 100 * t.extrapolated_s / t.total_s : 0.0);
  if (a.ops) print_step_ops(m, ranks.front(), decode ? Phase::decode : Phase::prefill, tokens * a.seqs_per_rank,
                            all_tokens, t.total_s);
  return 0;
}

// ----------------------------------------------------------------------------- plan

namespace {

void print_memory(const DeploymentSpec& d) {
  const ParamBreakdown pb = count_params(d.model);
  fmt::print("\n== {}: {} on {} ==\n", d.name, d.model.display_name, d.gpu.display_name);
  fmt::print("parameters: {:.4g}T total (published {:.4g}T), {:.1f}B active (published {:.1f}B); MTP layers hold {:.1f}B more\n",
             pb.total_params() / 1e12, d.model.published_total_params / 1e12, pb.active_params / 1e9, d.model.published_active_params / 1e9,
             pb.mtp_params / 1e9);
  fmt::print("{:<28}{:>14}{:>14}\n", "weights by group", "params", "bytes");
  for (const auto& g : pb.groups) fmt::print("  {:<26}{:>13.2f}B{:>14}\n", g.name, g.params / 1e9, gb(g.bytes));
  fmt::print("\nper GPU                          {:>24}{:>24}\n", fmt::format("prefill EP{}/attnTP{}", d.prefill.ep, d.prefill.attn_tp),
             fmt::format("decode EP{}/attnTP{}", d.decode.ep, d.decode.attn_tp));
  const GpuMemoryPlan p = plan_gpu_memory(d, d.prefill), q = plan_gpu_memory(d, d.decode);
  auto row = [](const char* what, double a, double b) { fmt::print("  {:<31}{:>24}{:>24}\n", what, gb(a), gb(b)); };
  row("HBM", p.hbm, q.hbm);
  row(fmt::format("usable (x{})", d.memory_utilization).c_str(), p.usable, q.usable);
  row("routed experts", p.expert_weights, q.expert_weights);
  row("other weights (1/attn_tp)", p.other_weights, q.other_weights);
  row("activation workspace", p.workspace, q.workspace);
  row("reserved (context, buffers)", p.reserved, q.reserved);
  row("KV budget", p.kv_budget, q.kv_budget);
  fmt::print("\nKV cache per sequence, one GPU (attn TP 1)\n  {:<8}{:>7}{:>16}{:>18}  {}\n", "kind", "layers", "B/token/layer", "fixed B/seq/layer", "what");
  for (const auto& r : kv_breakdown(d.model))
    fmt::print("  {:<8}{:>7}{:>16.2f}{:>18.0f}  {}\n", r.kind, r.layers, r.per_token_bytes_per_layer, r.per_seq_bytes_per_layer, r.note);
  const KvFootprint f = kv_footprint(d.model, 1);
  fmt::print("  total: {:.1f} B/token + {:.2f} MB fixed per sequence\n", f.per_token_bytes, f.per_seq_bytes / 1e6);
  fmt::print("  decode rank capacity (sequences of one context length, attn TP {}):", d.decode.attn_tp);
  for (long long L : {8192LL, 32768LL, 131072LL, 500000LL, 1000000LL}) {
    const double per = kv_bytes(d.model, L, d.decode.attn_tp);
    fmt::print("  {}K: {:.0f}", L / 1000, std::floor(q.kv_budget / per));
  }
  fmt::print("\n");
}

void print_capacity_table(const std::vector<std::pair<std::string, CapacityInputs>>& in, Rounding r) {
  fmt::print("  {:<28}{:>9}{:>9}{:>9}{:>14}{:>7}{:>8}{:>8}{:>8}{:>8}\n", "", "KV/card", "KV/unit", "GB/req", "req/unit", "units",
             "D nodes", "P nodes", "nodes", "GPUs");
  for (const auto& [key, c] : in) {
    try {
      const CapacityResult x = derive_nodes(c, r);
      fmt::print("  {:<28}{:>8.0f}G{:>8.0f}G{:>9.2f}{:>14}{:>7}{:>8}{:>8}{:>8}{:>8}\n", c.label, x.kv_gb_per_gpu, x.kv_gb_per_unit, c.kv_gb_per_request,
                 fmt::format("{:.1f}→{}", x.requests_per_unit_exact, x.requests_per_unit), x.units, x.d_nodes, x.p_nodes, x.total_nodes,
                 x.total_gpus);
    } catch (const std::exception& e) {
      fmt::print("  {:<28} {}\n", c.label, e.what());
    }
  }
}

// The article's derivation with this repository's model data: the same deployment units (EP32 for
// K3, EP16 for V4-Pro) with the smallest attention TP that fits, real weights and real KV bytes.
std::vector<std::pair<std::string, CapacityInputs>> real_inputs(double context) {
  std::vector<std::pair<std::string, CapacityInputs>> v;
  for (const auto& [model, ep] : {std::pair<std::string, int>{"kimi-k3", 32}, {"deepseek-v4-pro", 16}})
    for (const std::string hw : {"h200", "b300"}) {
      DeploymentSpec d;
      d.model = load_model(resolve_data_file(model, "models", data_dir()));
      d.gpu = load_hardware(resolve_data_file(hw, "hardware", data_dir()));
      d.decode.ep = ep;
      d.decode.max_running = 128;
      d.decode.max_batch_tokens = 128;
      GpuMemoryPlan m;
      for (int tp = 1; tp <= 8; tp *= 2) {
        d.decode.attn_tp = tp;
        m = plan_gpu_memory(d, d.decode);
        if (m.fits()) break;
      }
      CapacityInputs c;
      c.label = fmt::format("{} {} EP{} TP{}", model == "kimi-k3" ? "K3" : "V4-Pro", hw, ep, d.decode.attn_tp);
      c.hbm_gb_per_gpu = m.usable / 1e9;
      c.weights_gb_per_gpu = (m.expert_weights + m.other_weights) / 1e9;
      c.overhead_gb_per_gpu = (m.workspace + m.reserved) / 1e9;
      c.unit_gpus = ep;
      c.kv_replicas = d.decode.attn_tp;
      c.gpus_per_node = d.gpu.gpus_per_node;
      c.kv_gb_per_request = kv_bytes(d.model, static_cast<long long>(context), d.decode.attn_tp) / 1e9;
      v.push_back({model + "_" + hw, c});
    }
  return v;
}

void print_article() {
  fmt::print("\n== The article's Section III under its own assumptions ==\n");
  fmt::print("(K3 MLA as \"640-dim latent x2 K/V\" in BF16, 207 MB bf16 KDA state, V4 at 12.2 KB/token = 10% of V3.2,\n"
             " 69/82 GB weights and 5/3 GB overhead per card, EP32/EP16 units, 500K average context, P:D = 1:2.5, 10,000 concurrent)\n");
  const ArticleSection3 art = article_section3(Rounding::article);
  for (const auto& l : art.lines) fmt::print("  {:<26} {:>10.1f}   {}\n", l.what, l.value, l.formula);
  fmt::print("\n  nodes for 10,000 concurrent requests, rounded to the nearest integer at every step (as the article):\n");
  print_capacity_table(art.inputs, Rounding::article);
  fmt::print("\n  same, rounded so that the cluster really covers 10,000 (requests per unit down, units and P nodes up):\n");
  print_capacity_table(art.inputs, Rounding::covering);
  fmt::print("\n== The same derivation with the real configs (scenarios/models, memory plan of servesim) ==\n");
  fmt::print("(K3 MLA latent 576 values = 1,152 B/token/layer in BF16 over 24 layers = 27,648 B/token, not 61.4 KB;\n"
             " KDA state fp32 as TRT-LLM keeps it; V4-Pro 584 B entries + 132 B FP8 indexer keys ≈ 5.5 KB/token, top-6 routing;\n"
             " usable HBM = 0.9 × capacity; overhead = activation workspace + 2 GB reserved; covering rounding)\n");
  print_capacity_table(real_inputs(500000), Rounding::covering);
}

}  // namespace

int plan(const std::string& path) {
  auto s = load_or_report(path);
  if (!s) return 2;
  try {
    for (const auto& d : s->deployments) print_memory(d);
    print_article();
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}

// ----------------------------------------------------------------------------- topology

int topology(const std::string& path) {
  auto s = load_or_report(path);
  if (!s) return 2;
  for (const auto& d : s->deployments) {
    const TopologyReport r = analyze_topology(d.cluster, d.gpu);
    fmt::print("\n== {}: {} nodes of {} x {} ({}), {} ==\n", d.name, r.nodes, d.gpu.gpus_per_node, d.gpu.name, d.gpu.display_name,
               d.cluster.fabric == FabricKind::fat_tree ? fmt::format("fat tree, oversubscription {}", d.cluster.oversubscription)
                                                        : std::string("rail-optimized, non-blocking"));
    fmt::print("GPUs: {} ({} used by the pools: prefill {} x EP{}, decode {} x EP{})\n", r.gpus, required_gpus(d), d.prefill.instances, d.prefill.ep,
               d.decode.instances, d.decode.ep);
    fmt::print("{:<14}{:>8}{:>20}\n", "links", "count", "GB/s per direction");
    for (const auto& l : r.links) fmt::print("{:<14}{:>8}{:>20.1f}\n", l.name, l.count, l.bytes_per_s / 1e9);
    fmt::print("per node: NVLink {:.0f} GB/s, NICs {:.0f} GB/s, uplink {:.0f} GB/s (per direction)\n", r.node_nvlink_bytes_per_s / 1e9,
               r.node_nic_bytes_per_s / 1e9, r.node_uplink_bytes_per_s / 1e9);
    fmt::print("bisection bandwidth: {:.0f} GB/s per direction (max-flow between nodes [0,{}) and [{},{}) on the Boost graph: {} vertices, {} links)\n",
               r.bisection_bytes_per_s / 1e9, r.nodes / 2, r.nodes / 2, r.nodes, r.graph_vertices, r.graph_edges);
  }
  return 0;
}

}  // namespace servesim::cli
