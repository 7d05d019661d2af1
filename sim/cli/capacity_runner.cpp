// servesim cli: one run of `servesim capacity` in its child process (capacity_runner.hpp).
#include "sim/cli/capacity_runner.hpp"

#include "costmodels/factory.hpp"
#include "costmodels/scaled.hpp"
#include "sim/exporters/writers.hpp"
#include "sim/simulation.hpp"
#include "workloads/source.hpp"

namespace servesim::cli::cap {

// The child: one run, its summary.json written to `file`.
int simulate_to(const Scenario& s, const DeploymentSpec& d, std::uint64_t seed, double cost_factor, const StepScale& serving, const fs::path& file) {
  try {
    std::shared_ptr<const CostModel> cost = make_cost_model(s.cost_model, d.gpu);
    if (cost_factor != 1) cost = std::make_shared<ScaledCostModel>(cost, cost_factor);
    MetricsCollector metrics(d.slo, d.prefill.instances, d.decode.instances, s.warmup_s);
    RunOptions opt;
    opt.horizon_s = s.horizon_s;
    opt.seed = seed;
    opt.step_scale = serving;
    auto source = make_source(workload_for(s.workload, d.prefix_cache), seed);
    RunReport rep;
    rep.workload = source->describe();
    if (!s.workload.trace_path.empty()) rep.trace = trace_file(s.workload.trace_path);
    // released, not destroyed: the forked child _exits after this (the teardown costs seconds at scale)
    auto owned = std::make_unique<Simulation>(d, std::move(source), cost, metrics, opt);
    Simulation& sim = *owned;
    rep.totals = sim.run();
    rep.deployment = &d;
    rep.cost_model = cost->name();
    rep.seed = seed;
    rep.horizon_s = s.horizon_s;
    rep.prefill_memory = sim.prefill_memory();
    rep.decode_memory = sim.decode_memory();
    rep.summary = metrics.summary();
    std::ofstream(file) << summary_json(rep).dump(1) << "\n";
    (void)owned.release();
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}: {}\n", d.name, e.what());
    return 1;
  }
}

}  // namespace servesim::cli::cap
