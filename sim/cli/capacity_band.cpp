// servesim cli: the band of `servesim capacity`'s answer (capacity_band.hpp).
#include "sim/cli/capacity_band.hpp"

#include "costmodels/fit_set.hpp"

#include <algorithm>

namespace servesim::cli::cap {

namespace {

// Nearest-rank p-quantile of whole node counts (infinity: "more than"): always one of the values.
double nearest_rank(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()) - 1e-9));
  return v[std::min(v.size(), std::max<size_t>(rank, 1)) - 1];
}

// p-quantile (linear interpolation) of a few latencies.
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return NAN;
  const double x = q * static_cast<double>(v.size() - 1);
  const size_t i = static_cast<size_t>(std::floor(x));
  if (std::isinf(v[i]) || (i + 1 < v.size() && x > static_cast<double>(i) && std::isinf(v[i + 1]))) return INFINITY;  // "more than"
  return i + 1 < v.size() ? v[i] + (x - static_cast<double>(i)) * (v[i + 1] - v[i]) : v[i];
}

// How far a run is from the SLO's edge: its larger p99 over its bound (1 = on the edge).
double margin(const Point& p, const CapacityArgs& a) { return std::max(p.ttft_p99_s / a.ttft_p99_s, p.tpot_p99_s / a.tpot_p99_s); }
// A run whose margin is outside [1 / (1 + kEdge), 1 + kEdge] is taken to keep its verdict under
// another seed: near the edge at 10,000 stationary sessions, TTFT p99 over seeds 11-13 was 8.5, 11.2
// and 7.3 s at the K3 answer and 17.8, 21.3 and 22.6 s at the V4-Pro answer (README "Measured
// performance"): a spread of up to ~1.3x; 1.5x leaves room.
constexpr double kEdge = 0.5;
bool near_edge(const Point& p, const CapacityArgs& a) {
  if (!p.ok && (p.why != "TTFT" && p.why != "TPOT")) return false;  // nothing completed, rejections: far
  const double m = margin(p, a);
  return m > 1 / (1 + kEdge) && m < 1 + kEdge;
}

// The neighbours of b one instance away and the allocation sizes the band uses.
struct Around {
  Alloc b, up_p, up_d, up_both;
  std::vector<Alloc> down;
  double f_hi = 1, f_lo = 1;
  Alloc scaled(double f) const {
    return {scaled_instances(b.prefill, f), scaled_instances(b.decode, f)};
  }
};

Around around(const Alloc& b, const std::optional<HeldOut>& ho) {
  Around x;
  x.b = b, x.up_p = {b.prefill + 1, b.decode}, x.up_d = {b.prefill, b.decode + 1}, x.up_both = {b.prefill + 1, b.decode + 1};
  if (b.prefill > 1) x.down.push_back({b.prefill - 1, b.decode});
  if (b.decode > 1) x.down.push_back({b.prefill, b.decode - 1});
  if (ho && ho->e > 0) x.f_hi = 1 + ho->e, x.f_lo = 1 - ho->e;
  return x;
}

// One batch first, so that `jobs` runs go at once: what the seeds will ask when b keeps its
// first-seed verdict, and the cost model's first round.
void prefetch(Runner& run, const Config& c, const Around& x, const Scenario& s, const CapacityArgs& a) {
  std::vector<Runner::Probe> pre;
  const auto first_b = run.known(c, x.b, s.seed);
  for (int k = 0; k < std::max(1, a.seeds); ++k) {
    const std::uint64_t seed = s.seed + static_cast<std::uint64_t>(k);
    if (k > 0 && first_b && !near_edge(*first_b, a)) continue;  // b inferred: its neighbours follow from the first seed's
    if (k > 0) pre.push_back({x.b, seed, 1, {}});
    else
      for (const Alloc& al : first_b && !first_b->ok ? std::vector<Alloc>{x.up_p, x.up_d} : x.down) pre.push_back({al, seed, 1, {}});
  }
  if (x.f_hi != 1) {
    pre.push_back({x.b, s.seed, x.f_hi, {}});
    if (!(x.scaled(x.f_lo) == x.b)) pre.push_back({x.scaled(x.f_lo), s.seed, x.f_lo, {}});
  }
  run.run(c, pre);
}

struct SeedBand {
  json rows = json::array();
  std::vector<double> need, ttft, tpot;
  int inferred = 0;
};

// The nodes each seed needs (see the comment of band()).
SeedBand seed_band(Runner& run, const Config& c, const Around& x, const Scenario& s, const CapacityArgs& a) {
  SeedBand sb;
  // verdicts at `seed`: run, or (after the first seed) the first seed's when that was far from the edge
  auto verdict = [&](const std::vector<Alloc>& als, std::uint64_t seed) {
    std::vector<Alloc> torun;
    std::vector<std::optional<bool>> out(als.size());
    for (size_t i = 0; i < als.size(); ++i) {
      const auto first = run.known(c, als[i], s.seed);
      if (seed != s.seed && first && !near_edge(*first, a)) out[i] = first->ok, ++sb.inferred;
      else torun.push_back(als[i]);
    }
    const std::vector<Point> got = run.run(c, torun, seed);
    std::vector<bool> v;
    for (size_t i = 0, k = 0; i < als.size(); ++i) v.push_back(out[i] ? *out[i] : got[k++].ok);
    return v;
  };
  const int more_than = run.nodes(c, x.up_both);
  const auto first_b = run.known(c, x.b, s.seed);
  for (int k = 0; k < std::max(1, a.seeds); ++k) {
    const std::uint64_t seed = s.seed + static_cast<std::uint64_t>(k);
    bool at_ok = false;
    json row = {{"seed", seed}};
    if (k > 0 && first_b && !near_edge(*first_b, a)) {
      at_ok = first_b->ok, ++sb.inferred;
      row["inferred"] = "b was far from the SLO's edge at the first seed";
    } else {
      const Point at = run.run(c, {x.b}, seed)[0];
      at_ok = at.ok;
      sb.ttft.push_back(at.ttft_p99_s), sb.tpot.push_back(at.tpot_p99_s);
      row["ttft_p99_s"] = at.ttft_p99_s, row["tpot_p99_s"] = at.tpot_p99_s;
    }
    double n = at_ok ? run.nodes(c, x.b) : INFINITY;
    std::vector<Alloc> nb = at_ok ? x.down : std::vector<Alloc>{x.up_p, x.up_d};
    if (k > 0 && at_ok) {  // later seeds: fewer instances only where known or inferable, not run
      std::vector<Alloc> keep;
      for (const Alloc& al : nb) {
        const auto first = run.known(c, al, s.seed);
        if (run.known(c, al, seed) || (first && !near_edge(*first, a))) keep.push_back(al);
      }
      if (keep.size() < nb.size()) row["fewer_not_tried"] = true;
      nb = keep;
    }
    const std::vector<bool> ok = verdict(nb, seed);
    for (size_t i = 0; i < nb.size(); ++i)
      if (ok[i]) n = std::min<double>(n, run.nodes(c, nb[i]));
    if (std::isinf(n) && verdict({x.up_both}, seed)[0]) n = more_than;
    sb.need.push_back(n);
    row["meets_slo"] = at_ok;
    row["nodes_needed"] = std::isinf(n) ? json(fmt::format("more than {}", more_than)) : json(static_cast<int>(n));
    sb.rows.push_back(row);
  }
  return sb;
}

struct CostBand {
  json j;
  double d_lo = 0, d_hi = 0;  // node differences to b at the optimistic and pessimistic ends (d_hi infinite: more than)
  int hi_more_nodes = 0;      // with d_hi infinite: b's pools scaled up, which missed too
};

// The cost model's ends at the first seed (see the comment of band()).
CostBand cost_band(Runner& run, const Config& c, const Around& x, const Scenario& s, const HeldOut& ho) {
  CostBand cb;
  const Alloc b_up = x.scaled(x.f_hi), b_dn = x.scaled(x.f_lo);
  const int nb = run.nodes(c, x.b);
  const Point pess = run.run(c, {x.b}, s.seed, x.f_hi)[0];
  std::string pess_text = fmt::format("b meets the SLO with kernel times x{:.3f}", x.f_hi);
  if (!pess.ok) {
    const Point up = run.run(c, {b_up}, s.seed, x.f_hi)[0];
    if (up.ok) cb.d_hi = run.nodes(c, b_up) - nb;
    else cb.d_hi = INFINITY, cb.hi_more_nodes = run.nodes(c, b_up);
    pess_text = fmt::format("b misses; b's pools x{:.3f} ({} prefill, {} decode) {}", x.f_hi, b_up.prefill, b_up.decode, up.ok ? "meet it" : "miss too");
  }
  std::string opt_text = "b's pools scaled down round to b itself";
  if (!(b_dn == x.b)) {
    const Point opt = run.run(c, {b_dn}, s.seed, x.f_lo)[0];
    if (opt.ok) cb.d_lo = run.nodes(c, b_dn) - nb;
    opt_text = fmt::format("b's pools x{:.3f} ({} prefill, {} decode) {} with kernel times x{:.3f}", x.f_lo, b_dn.prefill, b_dn.decode,
                           opt.ok ? "meet the SLO" : "miss: no fewer nodes claimed", x.f_lo);
  }
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(); };
  cb.j = {{"held_out_error", std::round(ho.e * 1e4) / 1e4}, {"kernel_factor_p10", x.f_lo}, {"kernel_factor_p90", x.f_hi},
          {"families", ho.families}, {"rows", ho.rows}, {"source", ho.source},
          {"nodes_delta_p10", static_cast<int>(cb.d_lo)}, {"nodes_delta_p90", std::isinf(cb.d_hi) ? json() : json(static_cast<int>(cb.d_hi))},
          {"p10_end", opt_text}, {"p90_end", pess_text},
          {"ttft_p99_s_at_p90_kernels", num(pess.ttft_p99_s)}, {"tpot_p99_s_at_p90_kernels", num(pess.tpot_p99_s)}};
  return cb;
}

}  // namespace

// The fitted cost model's held-out error as the band uses it: e such that the signed relative error
// of a kernel time lies within ±e for 80% of held-out points (its p10-p90). The fit records, per
// kernel family, the median and p95 of the absolute k-fold error (fitted_models.json
// validation.families.*.kfold); the 80th percentile of the absolute error is interpolated between
// them in log space at the spacing of a normal's quantiles (z 0.674, 1.282, 1.960), and the families
// are averaged weighted by their rows. nullopt for the roofline model (no held-out error).
std::optional<HeldOut> held_out_error(const std::string& cost_model, const GpuSpec& gpu) {
  if (cost_model != "fitted" || gpu.fitted_models_path.empty()) return std::nullopt;
  const FitSet f = read_fit_json(gpu.fitted_models_path);
  const double w = (1.2816 - 0.6745) / (1.9600 - 0.6745);
  HeldOut h;
  double sum = 0;
  for (const FamilyValidation& v : f.validation) {
    if (v.kfold.n <= 0 || v.kfold.median <= 0 || v.kfold.p95 <= 0) continue;
    const double p80 = v.kfold.median * std::pow(v.kfold.p95 / v.kfold.median, w);
    sum += p80 * v.kfold.n, h.rows += v.kfold.n, ++h.families;
  }
  if (h.rows == 0) return std::nullopt;
  h.e = sum / h.rows;
  h.source = gpu.fitted_models_path + " validation.families.*.kfold (measured on " + f.measured_on + ")";
  return h;
}

// The band at the answer b (README "servesim capacity"): whole node counts, p10-p90.
//  Seeds: at each seed the nodes that seed needs, among b and its neighbours one instance away
//  (fewer when b meets the SLO, more when it misses; then one more of each). At the first seed all
//  of them run; later seeds run b, and its neighbours only where b misses (more instances): fewer
//  instances are tried at the first seed only, so a later seed at which b meets needs "at most b".
//  A point far from the SLO's edge at the first seed (near_edge) keeps its verdict at later seeds
//  without a run (so when b is far from the edge, no other seed is run at all).
//  Nearest rank over the seeds' needs: with 3 seeds, p10 is the least and p90 the most.
//  Cost model: at the first seed, b with every kernel time x (1 + e) and, if it misses, b with both
//  pools scaled up by (1 + e); b's pools scaled down by (1 - e) with kernel times x (1 - e). The node
//  difference to b is added to the seeds' p90 (pessimistic) and p10 (optimistic): the two sources
//  are added, not convolved, so the band is wider than a joint p10-p90 would be.
json band(Runner& run, const Answer& ans, const Scenario& s, const CapacityArgs& a, const std::optional<HeldOut>& ho) {
  const Config& c = ans.cfg;
  const Around x = around(ans.r.best, ho);
  prefetch(run, c, x, s, a);
  const SeedBand sb = seed_band(run, c, x, s, a);
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(); };
  auto whole = [](double v, const std::string& more) { return std::isinf(v) ? json(more) : json(static_cast<int>(v)); };
  const std::string more = fmt::format("more than {}", run.nodes(c, x.up_both));
  const double seed_lo = nearest_rank(sb.need, 0.1), seed_hi = nearest_rank(sb.need, 0.9);
  json j = {{"seeds", sb.rows}, {"seed_points_inferred", sb.inferred},
            {"seed_nodes_p10", whole(seed_lo, more)}, {"seed_nodes_p90", whole(seed_hi, more)},
            {"ttft_p99_s_p10", num(quantile(sb.ttft, 0.1))}, {"ttft_p99_s_p90", num(quantile(sb.ttft, 0.9))},
            {"tpot_p99_s_p10", num(quantile(sb.tpot, 0.1))}, {"tpot_p99_s_p90", num(quantile(sb.tpot, 0.9))}};
  double lo = seed_lo, hi = seed_hi;
  std::string hi_more = more;
  if (ho && ho->e > 0) {
    const CostBand cb = cost_band(run, c, x, s, *ho);
    lo = seed_lo + cb.d_lo, hi = seed_hi + cb.d_hi;
    if (std::isinf(cb.d_hi))
      hi_more = fmt::format("more than {}", cb.hi_more_nodes + (std::isinf(seed_hi) ? 0 : static_cast<int>(seed_hi) - run.nodes(c, x.b)));
    j["cost_model_error"] = cb.j;
  } else {
    j["cost_model_error"] = {{"note", "the " + (s.cost_model.empty() ? std::string("scenario's") : s.cost_model) +
                                          " cost model records no held-out error (only the fitted model does): the band is the seeds' alone"}};
  }
  j["nodes_p10"] = whole(lo, more), j["nodes_p90"] = whole(hi, hi_more);
  return j;
}

}  // namespace servesim::cli::cap
