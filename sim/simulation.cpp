#include "sim/simulation.hpp"

#include "sim/engine/engine.hpp"

#include <simgrid/s4u.hpp>

namespace servesim {

struct Simulation::Impl {
  Engine engine;
  Impl(DeploymentSpec d, std::unique_ptr<RequestSource> source, std::shared_ptr<const CostModel> cost, EventSink& sink, RunOptions opt)
      : engine(std::move(d), std::move(source), std::move(cost), sink, std::move(opt)) {}

  RunTotals run() {
    std::vector<std::string> args = {"servesim", "--log=root.thres:warning", "--cfg=contexts/stack-size:128"};
    for (const auto& a : engine.opt.simgrid_cfg) args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    int argc = static_cast<int>(argv.size());
    // SimGrid's engine is a process-wide singleton that is never torn down here (see class comment)
    auto* e = new sg4::Engine(&argc, argv.data());
    engine.build();
    if (engine.opt.horizon_s > 0) e->run_until(engine.opt.horizon_s);
    else e->run();
    const RunTotals totals = engine.finish();
    if (engine.source_error) std::rethrow_exception(engine.source_error);
    return totals;
  }
};

Simulation::Simulation(DeploymentSpec d, std::unique_ptr<RequestSource> source, std::shared_ptr<const CostModel> cost, EventSink& sink,
                       RunOptions options)
    : impl_(std::make_unique<Impl>(std::move(d), std::move(source), std::move(cost), sink, std::move(options))) {}

Simulation::~Simulation() = default;

RunTotals Simulation::run() { return impl_->run(); }
const GpuMemoryPlan& Simulation::prefill_memory() const { return impl_->engine.pmem; }
const GpuMemoryPlan& Simulation::decode_memory() const { return impl_->engine.dmem; }

}  // namespace servesim
