#include "sim/policies/router.hpp"

#include <stdexcept>

namespace servesim {
namespace {

// Ties: among the candidates that share the best key, the choice rotates (round-robin among the
// tied, one cursor per router and phase). Deterministic, and tied instances share the work instead
// of the first one taking it all. `better(a, b)`: a strictly better than b; `tied(a, b)`: equal.
// One pass finds the best and counts its ties (a better one restarts the count); only a tie of
// several walks again to the chosen one. No allocation: this runs at every arrival and dispatch.
template <class C, class Better, class Tied>
std::size_t pick(const std::vector<C>& c, std::size_t& cursor, Better better, Tied tied) {
  std::size_t best = 0, ties = 1;
  for (std::size_t i = 1; i < c.size(); ++i)
    if (better(c[i], c[best])) best = i, ties = 1;
    else if (tied(c[i], c[best])) ++ties;
  if (ties == 1) return best;
  std::size_t k = cursor++ % ties;
  for (std::size_t i = best;; ++i)
    if (tied(c[i], c[best]) && k-- == 0) return i;
}

// decode: fewest running sequences, then most free KV
std::size_t least_loaded_decode(const std::vector<DecodeCandidate>& c, std::size_t& cursor) {
  return pick(
      c, cursor, [](const DecodeCandidate& a, const DecodeCandidate& b) { return a.running < b.running || (a.running == b.running && a.free_bytes > b.free_bytes); },
      [](const DecodeCandidate& a, const DecodeCandidate& b) { return a.running == b.running && a.free_bytes == b.free_bytes; });
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
    return pick(
        c, tie_p_, [](const PrefillCandidate& a, const PrefillCandidate& b) { return a.queued_tokens < b.queued_tokens; },
        [](const PrefillCandidate& a, const PrefillCandidate& b) { return a.queued_tokens == b.queued_tokens; });
  }
  std::size_t pick_decode(const Request&, const std::vector<DecodeCandidate>& c) override { return least_loaded_decode(c, tie_d_); }
  bool decode_least_loaded() const override { return true; }
  std::size_t rotate_decode_tie(std::size_t ties) override { return tie_d_++ % ties; }

 private:
  std::size_t tie_p_ = 0, tie_d_ = 0;
};

class CacheAware final : public Router {
 public:
  std::string name() const override { return "cache_aware"; }
  bool uses_prefix_matches() const override { return true; }
  std::size_t pick_prefill(const Request& r, const std::vector<PrefillCandidate>& c) override {
    auto cost = [&](const PrefillCandidate& x) { return x.queued_tokens + static_cast<double>(r.input_tokens - x.cached_tokens); };
    return pick(
        c, tie_p_, [&](const PrefillCandidate& a, const PrefillCandidate& b) { return cost(a) < cost(b); },
        [&](const PrefillCandidate& a, const PrefillCandidate& b) { return cost(a) == cost(b); });
  }
  std::size_t pick_decode(const Request&, const std::vector<DecodeCandidate>& c) override { return least_loaded_decode(c, tie_d_); }
  bool decode_least_loaded() const override { return true; }
  std::size_t rotate_decode_tie(std::size_t ties) override { return tie_d_++ % ties; }

 private:
  std::size_t tie_p_ = 0, tie_d_ = 0;
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
