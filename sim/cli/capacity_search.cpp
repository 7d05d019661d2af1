#include "sim/cli/capacity_search.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>
#include <stdexcept>

namespace servesim::cli {

namespace {

class Search {
 public:
  Search(const CapacityOracle& o, const NodeCount& n, const CapacitySearchOptions& opt)
      : oracle_(o), nodes_(n), batch_(opt.batch), ratio_(opt.decode_per_prefill), start_(opt.start_decode), resolution_(opt.resolution) {
    if (batch_ < 1 || start_ < 1 || !(ratio_ >= 1e-6 && ratio_ <= 1e6) || !(resolution_ >= 0 && resolution_ < 1))
      throw std::invalid_argument("capacity search: batch >= 1, start_decode >= 1, decode_per_prefill 1e-6-1e6, resolution in [0, 1)");
  }

  // The bracket's allocation at scale t: t decode instances and t / ratio prefill (at least 1; at
  // most 2^24, far past any node bound, so that the node count of a probe cannot overflow).
  Alloc at(int t) const { return {static_cast<int>(std::clamp(std::lround(t / ratio_), 1L, 1L << 24)), t}; }

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
  // a round. make(x) is (p, x) to search decode counts, (x, d) to search prefill counts. Stops when
  // make(hi) takes at most resolution_ of its nodes more than make(lo): hi is then within that
  // of the smallest (lo itself is not known to miss): at most resolution_ x make(hi)'s nodes more.
  // Known or inferred results narrow [lo, hi]
  // first, without a run.
  template <class Make>
  int min_feasible(Make make, int lo, int hi) {
    for (int x = hi - 1; x >= lo; --x)  // the largest known miss below hi, the smallest known hit
      if (auto k = known(make(x)); k && !*k) {
        lo = x + 1;
        break;
      }
    while (lo < hi && known(make(hi - 1)).value_or(false)) --hi;
    while (lo < hi && (resolution_ == 0 || nodes_(make(hi)) - nodes_(make(lo)) > resolution_ * nodes_(make(hi)))) {
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
    // 1. bracket (from start_ decode instances: the static estimate, when the command has one)
    int t = start_;
    Alloc top;
    int soft = 0;  // the decode count of the bracket's last miss below `top`, if any
    for (bool done = false; !done;) {
      std::vector<Alloc> as;
      for (int i = 0, u = t; i < batch_ && u <= (1 << 24) && nodes_(at(u)) <= max_nodes; ++i, u *= 2) as.push_back(at(u));
      if (as.empty()) return r_;
      const std::vector<bool> ok = eval(as);
      for (size_t i = 0; i < as.size() && !done; ++i) {
        if (ok[i]) done = true, top = as[i];
        else soft = as[i].decode;
      }
      if (!done) t = as.back().decode * 2;
    }
    consider(top);
    // 2. the corner: the fewest decode instances at the bracket's prefill, then the fewest prefill
    // instances at those (on the frontier: D_min is non-increasing in P). The decode search looks
    // above the bracket's last miss first (with that many decode instances and fewer prefill the
    // load was not served); only if nothing there was shown to miss does it check below.
    int d_star = min_decode(top.prefill, soft + 1, top.decode);
    if (soft > 0) {
      bool miss_above = false;
      for (int x = soft + 1; x < d_star && !miss_above; ++x) miss_above = known({top.prefill, x}) == std::optional<bool>(false);
      if (!miss_above && eval({{top.prefill, soft}})[0]) d_star = min_decode(top.prefill, 1, soft);
    }
    consider({top.prefill, d_star});
    const int p_star = min_prefill(d_star, 1, top.prefill);
    consider({p_star, d_star});
    // 3. the staircase from the corner both ways, each step more instances of one pool (one, or as
    // many as the resolution's nodes hold) and the fewest of the other (bisection below the previous
    // step's), only where nodes can still be at most the best (fewer, for more prefill); each way
    // stops after two steps in a row that improve nothing
    int dstep = 1, pstep = 1;
    const double res_nodes = resolution_ * nodes_({p_star, d_star});
    while (resolution_ > 0 && nodes_({p_star, d_star + dstep + 1}) - nodes_({p_star, d_star}) <= res_nodes) ++dstep;
    while (resolution_ > 0 && nodes_({p_star + pstep + 1, d_star}) - nodes_({p_star, d_star}) <= res_nodes) ++pstep;
    for (int d = d_star + dstep, idle = 0, p_prev = p_star; idle < 2 && p_prev > 1; d += dstep) {  // more decode, less prefill
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
    for (int p = p_star + pstep, idle = 0, d_prev = d_star; idle < 2 && d_prev > 1; p += pstep) {  // more prefill, less decode
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
  int start_;
  double resolution_;
  CapacitySearchResult r_;
};

}  // namespace

CapacitySearchResult fewest_nodes(const CapacityOracle& oracle, const NodeCount& nodes, int max_nodes, const CapacitySearchOptions& opt) {
  return Search(oracle, nodes, opt).run(max_nodes);
}

CapacitySearchResult fewest_nodes(const CapacityOracle& oracle, const NodeCount& nodes, int max_nodes, int batch, double decode_per_prefill) {
  CapacitySearchOptions opt;
  opt.batch = batch, opt.decode_per_prefill = decode_per_prefill;
  return fewest_nodes(oracle, nodes, max_nodes, opt);
}

}  // namespace servesim::cli
