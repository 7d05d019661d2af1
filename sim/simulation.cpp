#include "sim/simulation.hpp"

#include "sim/engine/engine.hpp"

#include <simgrid/s4u.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

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

bool Simulation::simgrid_accepts(const std::vector<std::string>& cfg) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    std::vector<std::string> args = {"servesim", "--log=root.thres:critical"};
    for (const auto& c : cfg) args.push_back("--cfg=" + c);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    int argc = static_cast<int>(argv.size());
    new sg4::Engine(&argc, argv.data());  // exits the child on a bad item
    std::fflush(nullptr);
    _exit(0);
  }
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return false;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

RunTotals Simulation::run() { return impl_->run(); }
const GpuMemoryPlan& Simulation::prefill_memory() const { return impl_->engine.pmem; }
const GpuMemoryPlan& Simulation::decode_memory() const { return impl_->engine.dmem; }

}  // namespace servesim
