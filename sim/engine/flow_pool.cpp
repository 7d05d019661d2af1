#include "sim/engine/engine.hpp"

namespace servesim {

void FlowPool::submit(sg4::Host* src, sg4::Host* dst, double bytes, std::function<void()> done) {
  auto job = [src, dst, bytes, done = std::move(done)] {
    sg4::Comm::sendto(src, dst, static_cast<uint64_t>(std::max(1.0, bytes)));
    done();
  };
  if (!idle_.empty()) {
    Worker* w = idle_.back();
    idle_.pop_back();
    w->job = std::move(job);
    w->actor->resume();
    return;
  }
  workers_.push_back(std::make_unique<Worker>());
  Worker* w = workers_.back().get();
  w->job = std::move(job);
  // a worker with nothing to do suspends itself until the next submit
  w->actor = sg4::Actor::create("flow" + std::to_string(workers_.size()), e_.platform.frontend, [this, w] {
    for (;;) {
      if (w->job) {
        auto j = std::move(w->job);
        w->job = nullptr;
        j();
        continue;
      }
      idle_.push_back(w);
      sg4::this_actor::suspend();
    }
  });
  w->actor->daemonize();
}

}  // namespace servesim
