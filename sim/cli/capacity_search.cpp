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

  // Smallest x in [lo, hi] with make(x) feasible, given make(hi) feasible: k-section, batch_ probes
  // a round. make(x) is (p, x) to search decode counts, (x, d) to search prefill counts.
  template <class Make>
  int min_feasible(Make make, int lo, int hi) {
    while (lo < hi) {
      std::vector<Alloc> probes;
      std::vector<int> xs;
      for (int i = 1; i <= batch_; ++i) {
        const int x = lo + static_cast<int>(static_cast<long long>(hi - lo) * i / (batch_ + 1));
        if (x < hi && (xs.empty() || xs.back() != x)) xs.push_back(x), probes.push_back(make(x));
      }
      if (probes.empty()) xs.push_back(lo), probes.push_back(make(lo));
      const std::vector<bool> ok = eval(probes);
      int new_hi = hi, new_lo = lo;
      for (size_t i = 0; i < probes.size(); ++i) {
        if (ok[i]) {
          new_hi = std::min(new_hi, xs[i]);
          break;
        }
        new_lo = xs[i] + 1;
      }
      lo = new_lo, hi = new_hi;
    }
    return hi;
  }
  int min_decode(int p, int lo, int hi) {
    return min_feasible([p](int d) { return Alloc{p, d}; }, lo, hi);
  }
  int min_prefill(int d, int lo, int hi) {
    return min_feasible([d](int p) { return Alloc{p, d}; }, lo, hi);
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
    // 2. the corner: the fewest decode instances at the bracket's prefill, then the fewest prefill
    // instances at those (on the frontier: D_min is non-increasing in P)
    const int d_star = min_decode(top.prefill, 1, top.decode);
    consider({top.prefill, d_star});
    const int p_star = min_prefill(d_star, 1, top.prefill);
    consider({p_star, d_star});
    // 3. the staircase from the corner both ways, each step one more instance of one pool and the
    // fewest of the other (bisection below the previous step's), only where nodes can still be at
    // most the best (fewer, for more prefill); each way stops after two steps in a row that improve
    // nothing
    for (int d = d_star + 1, idle = 0, p_prev = p_star; idle < 2 && p_prev > 1; ++d) {  // more decode, less prefill
      int hi = 0;
      while (hi + 1 < p_prev && nodes_({hi + 1, d}) <= r_.nodes) ++hi;
      if (hi < 1) break;
      if (!eval({{hi, d}})[0]) {
        ++idle;
        continue;
      }
      const Alloc a{min_prefill(d, 1, hi), d};
      idle = nodes_(a) < r_.nodes || (nodes_(a) == r_.nodes && a.prefill < r_.best.prefill) ? 0 : idle + 1;
      consider(a);
      p_prev = a.prefill;
    }
    for (int p = p_star + 1, idle = 0, d_prev = d_star; idle < 2 && d_prev > 1; ++p) {  // more prefill, less decode
      int hi = 0;
      while (hi + 1 < d_prev && nodes_({p, hi + 1}) < r_.nodes) ++hi;
      if (hi < 1) break;
      if (!eval({{p, hi}})[0]) {
        ++idle;
        continue;
      }
      const Alloc a{p, min_decode(p, 1, hi)};
      idle = nodes_(a) < r_.nodes ? 0 : idle + 1;
      consider(a);
      d_prev = a.decode;
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
