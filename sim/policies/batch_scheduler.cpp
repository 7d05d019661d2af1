#include "sim/policies/batch_scheduler.hpp"

#include <algorithm>
#include <stdexcept>

namespace servesim {


namespace {

void continue_running(std::deque<ReqState*>& running, long long& budget, long long chunk, std::vector<PrefillItem>& out) {
  for (ReqState* r : running) {
    if (budget <= 0) break;
    if (r->loading) continue;
    const long long n = std::min({r->remaining_prefill(), chunk, budget});
    if (n > 0) out.push_back({r, n}), budget -= n;
  }
}

class Fcfs final : public BatchScheduler {
 public:
  std::string name() const override { return "fcfs"; }
  void form_prefill_batch(std::deque<ReqState*>& running, std::deque<ReqState*>& waiting, long long budget, long long chunk,
                          const std::function<bool(ReqState*)>& admit, std::vector<PrefillItem>& out) override {
    continue_running(running, budget, chunk, out);
    while (budget > 0 && !waiting.empty()) {
      ReqState* r = waiting.front();
      if (!admit(r)) break;
      waiting.pop_front();
      running.push_back(r);
      if (r->loading) continue;  // joins a later batch once its KV is loaded back
      const long long n = std::min({r->remaining_prefill(), chunk, budget});
      out.push_back({r, n});
      budget -= n;
    }
  }
};

class ShortestFirst final : public BatchScheduler {
 public:
  std::string name() const override { return "shortest_first"; }
  void form_prefill_batch(std::deque<ReqState*>& running, std::deque<ReqState*>& waiting, long long budget, long long chunk,
                          const std::function<bool(ReqState*)>& admit, std::vector<PrefillItem>& out) override {
    continue_running(running, budget, chunk, out);
    std::stable_sort(waiting.begin(), waiting.end(), [](const ReqState* a, const ReqState* b) { return a->remaining_prefill() < b->remaining_prefill(); });
    for (auto it = waiting.begin(); budget > 0 && it != waiting.end();) {
      ReqState* r = *it;
      if (!admit(r)) {
        ++it;
        continue;
      }
      it = waiting.erase(it);
      running.push_back(r);
      if (r->loading) continue;
      const long long n = std::min({r->remaining_prefill(), chunk, budget});
      out.push_back({r, n});
      budget -= n;
    }
  }
};

}  // namespace

std::unique_ptr<BatchScheduler> make_batch_scheduler(const std::string& name) {
  static const Registry<BatchScheduler> registry("batch scheduler", {
                                                                        {"fcfs", [] { return std::make_unique<Fcfs>(); }},
                                                                        {"shortest_first", [] { return std::make_unique<ShortestFirst>(); }},
                                                                    });
  return registry.make(name);
}

}  // namespace servesim
