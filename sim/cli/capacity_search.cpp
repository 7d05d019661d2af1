#include "sim/cli/capacity_search.hpp"

#include <algorithm>
#include <climits>
#include <optional>

namespace servesim::cli {

namespace {

class Search {
 public:
  Search(const CapacityOracle& o, const NodeCount& n, int batch) : oracle_(o), nodes_(n), batch_(std::max(1, batch)) {}

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
    int s = 1;
    for (bool done = false; !done;) {
      std::vector<Alloc> as;
      for (int i = 0, t = s; i < batch_ && nodes_({t, t}) <= max_nodes; ++i, t *= 2) as.push_back({t, t});
      if (as.empty()) return r_;
      const std::vector<bool> ok = eval(as);
      for (size_t i = 0; i < as.size() && !done; ++i) {
        if (ok[i]) done = true, s = as[i].prefill;
      }
      if (!done) s = as.back().prefill * 2;
    }
    consider({s, s});
    // 2. frontier walk, P from s down
    int d_lower = 1;  // D_min(P + 1): a lower bound of D_min(P)
    for (int p = s; p >= 1; --p) {
      int hi = d_lower - 1;  // the largest D whose nodes are below the best
      while (nodes_({p, hi + 1}) <= r_.nodes && hi + 1 <= (p == s ? s : INT_MAX / 2)) ++hi;
      if (p == s) hi = std::max(hi, s);
      if (hi < d_lower) continue;
      if (!eval({{p, hi}})[0]) {
        d_lower = hi + 1;
        continue;
      }
      const int d = min_decode(p, d_lower, hi);
      consider({p, d});
      d_lower = d;
    }
    return r_;
  }

 private:
  const CapacityOracle& oracle_;
  const NodeCount& nodes_;
  int batch_;
  CapacitySearchResult r_;
};

}  // namespace

CapacitySearchResult fewest_nodes(const CapacityOracle& oracle, const NodeCount& nodes, int max_nodes, int batch) {
  return Search(oracle, nodes, batch).run(max_nodes);
}

}  // namespace servesim::cli
