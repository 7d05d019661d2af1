#include "sim/policies/router.hpp"

#include <stdexcept>

namespace servesim {
namespace {

std::size_t least_loaded_decode(const std::vector<DecodeCandidate>& c) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < c.size(); ++i)
    if (c[i].running < c[best].running || (c[i].running == c[best].running && c[i].free_bytes > c[best].free_bytes)) best = i;
  return best;
}

class RoundRobin final : public Router {
 public:
  std::string name() const override { return "round_robin"; }
  std::size_t pick_prefill(const Request&, const std::vector<PrefillCandidate>& c) override { return next_p_++ % c.size(); }
  std::size_t pick_decode(const Request&, const std::vector<DecodeCandidate>& c) override { return next_d_++ % c.size(); }

 private:
  std::size_t next_p_ = 0, next_d_ = 0;
};

class LeastLoaded final : public Router {
 public:
  std::string name() const override { return "least_loaded"; }
  std::size_t pick_prefill(const Request&, const std::vector<PrefillCandidate>& c) override {
    std::size_t best = 0;
    for (std::size_t i = 1; i < c.size(); ++i)
      if (c[i].queued_tokens < c[best].queued_tokens) best = i;
    return best;
  }
  std::size_t pick_decode(const Request&, const std::vector<DecodeCandidate>& c) override { return least_loaded_decode(c); }
};

class CacheAware final : public Router {
 public:
  std::string name() const override { return "cache_aware"; }
  bool uses_prefix_matches() const override { return true; }
  std::size_t pick_prefill(const Request& r, const std::vector<PrefillCandidate>& c) override {
    auto cost = [&](const PrefillCandidate& x) { return x.queued_tokens + static_cast<double>(r.input_tokens - x.cached_tokens); };
    std::size_t best = 0;
    for (std::size_t i = 1; i < c.size(); ++i)
      if (cost(c[i]) < cost(c[best])) best = i;
    return best;
  }
  std::size_t pick_decode(const Request&, const std::vector<DecodeCandidate>& c) override { return least_loaded_decode(c); }
};

}  // namespace

std::unique_ptr<Router> make_router(const std::string& name) {
  static const Registry<Router> registry("router", {
                                                       {"round_robin", [] { return std::make_unique<RoundRobin>(); }},
                                                       {"least_loaded", [] { return std::make_unique<LeastLoaded>(); }},
                                                       {"cache_aware", [] { return std::make_unique<CacheAware>(); }},
                                                   });
  return registry.make(name);
}

}  // namespace servesim
