#include "sim/cli/capacity_search.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>

namespace servesim::cli {

namespace {

class Search {
 public:
  Search(const CapacityOracle& o, const NodeCount& n, int batch, double ratio)
      : oracle_(o), nodes_(n), batch_(std::max(1, batch)), ratio_(std::max(1e-9, ratio)) {}

  // The bracket's allocation at scale t: t decode instances and t / ratio prefill (at least 1).
  Alloc at(int t) const { return {std::max(1, static_cast<int>(std::lround(t / ratio_))), t}; }

  // What is known or inferred about a, if anything.
  std::optional<bool> known(const Alloc& a) const {
    for (const auto& [k, ok] : r_.known) {
      if (ok && k.prefill <= a.prefill && k.decode <= a.decode) return true;
      if (!ok && k.prefill >= a.prefill && k.decode >= a.decode) return false;
    }
    return std::nullopt;
  }

  // Runs the allocations not known yet (one oracle call), then answers all of them.
  std::vector<bool> eval(const std::vector<Alloc>& as) {
    std::vector<Alloc> run;
    for (const auto& a : as)
      if (!known(a) && std::find(run.begin(), run.end(), a) == run.end()) run.push_back(a);
    if (!run.empty()) {
      const std::vector<bool> ok = oracle_(run);
      for (size_t i = 0; i < run.size(); ++i) r_.known.push_back({run[i], ok[i]});
      r_.evaluations += static_cast<int>(run.size());
    }
    std::vector<bool> out;
    for (const auto& a : as) out.push_back(*known(a));
    return out;
  }

  void consider(const Alloc& a) {
    const int n = nodes_(a);
    if (!r_.found || n < r_.nodes || (n == r_.nodes && a.prefill < r_.best.prefill)) r_.found = true, r_.best = a, r_.nodes = n;
  }

  // Smallest d in [lo, hi] with (p, d) feasible, given (p, hi) feasible: k-section, batch_ probes a round.
  int min_decode(int p, int lo, int hi) {
    while (lo < hi) {
      std::vector<Alloc> probes;
      for (int i = 1; i <= batch_; ++i) {
        const int d = lo + static_cast<int>(static_cast<long long>(hi - lo) * i / (batch_ + 1));
        if (d < hi && (probes.empty() || probes.back().decode != d)) probes.push_back({p, d});
      }
      if (probes.empty()) probes.push_back({p, lo});
      const std::vector<bool> ok = eval(probes);
      int new_hi = hi, new_lo = lo;
      for (size_t i = 0; i < probes.size(); ++i) {
        if (ok[i]) {
          new_hi = std::min(new_hi, probes[i].decode);
          break;
        }
        new_lo = probes[i].decode + 1;
      }
      lo = new_lo, hi = new_hi;
    }
    return hi;
  }

  CapacitySearchResult run(int max_nodes) {
    // 1. bracket
    int t = 1;
    Alloc top;
    for (bool done = false; !done;) {
      std::vector<Alloc> as;
      for (int i = 0, u = t; i < batch_ && nodes_(at(u)) <= max_nodes; ++i, u *= 2) as.push_back(at(u));
      if (as.empty()) return r_;
      const std::vector<bool> ok = eval(as);
      for (size_t i = 0; i < as.size() && !done; ++i)
        if (ok[i]) done = true, top = as[i];
      if (!done) t = as.back().decode * 2;
    }
    consider(top);
    // 2. frontier walk, P from the bracket's down
    int d_lower = 1;  // D_min(P + 1): a lower bound of D_min(P)
    int d_at_top = top.decode;
    for (int p = top.prefill, idle = 0; p >= 1 && idle < 2; --p) {
      int hi = d_lower - 1;  // the largest D whose nodes are at most the best
      while (nodes_({p, hi + 1}) <= r_.nodes && (p != top.prefill || hi + 1 <= top.decode)) ++hi;
      if (p == top.prefill) hi = std::max(hi, top.decode);
      if (hi < d_lower) {
        ++idle;
        continue;
      }
      if (!eval({{p, hi}})[0]) {
        d_lower = hi + 1, ++idle;
        continue;
      }
      idle = 0;
      const int d = min_decode(p, d_lower, hi);
      consider({p, d});
      d_lower = d;
      if (p == top.prefill) d_at_top = d;
    }
    // 3. and up: more prefill, fewer decode (D_min(P) <= D_min(P - 1)), while a D can still give
    // fewer nodes; stops after two prefill counts in a row that improve nothing
    for (int p = top.prefill + 1, idle = 0, d_upper = d_at_top; idle < 2; ++p) {
      int hi = 0;  // the largest D below d_upper with fewer nodes than the best
      while (hi + 1 <= d_upper && nodes_({p, hi + 1}) < r_.nodes) ++hi;
      if (hi < 1) break;  // even one decode instance is not fewer nodes: larger P cannot be
      if (!eval({{p, hi}})[0]) {
        ++idle;
        continue;
      }
      const int d = min_decode(p, 1, hi);
      consider({p, d});
      d_upper = d, idle = 0;
    }
    return r_;
  }

 private:
  const CapacityOracle& oracle_;
  const NodeCount& nodes_;
  int batch_;
  double ratio_;
  CapacitySearchResult r_;
};

}  // namespace

CapacitySearchResult fewest_nodes(const CapacityOracle& oracle, const NodeCount& nodes, int max_nodes, int batch, double decode_per_prefill) {
  return Search(oracle, nodes, batch, decode_per_prefill).run(max_nodes);
}

}  // namespace servesim::cli
