#include "sim/policies/decode_batcher.hpp"

namespace servesim {
namespace {

class FcfsDecode final : public DecodeBatcher {
 public:
  std::string name() const override { return "fcfs"; }
  ReqState* next(std::deque<ReqState*>& ready, int running, int max_running) override {
    if (ready.empty() || running >= max_running) return nullptr;
    ReqState* r = ready.front();
    ready.pop_front();
    return r;
  }
};

}  // namespace

std::unique_ptr<DecodeBatcher> make_decode_batcher(const std::string& name) {
  static const Registry<DecodeBatcher> registry("decode batcher", {
                                                                      {"fcfs", [] { return std::make_unique<FcfsDecode>(); }},
                                                                  });
  return registry.make(name);
}

}  // namespace servesim
