// servesim cli: the answer's nodes at the engine's error against published deployments
// (capacity_serving.hpp).
#include "sim/cli/capacity_serving.hpp"

#include "sim/cli/validate_case.hpp"

#include <algorithm>
#include <stdexcept>

namespace servesim::cli::cap {

ServingEnds serving_ends(const json& regimes) {
  ServingEnds e;
  const std::string prefill = validation::regime_of(false, 0), large = validation::regime_of(true, kSmallDecodeBatchSeqs + 1),
                    small = validation::regime_of(true, kSmallDecodeBatchSeqs);
  for (const auto& r : regimes) {
    const std::string name = r.at("regime").get<std::string>();
    const double lo = r.at("min_error").get<double>(), hi = r.at("max_error").get<double>();
    if (!(lo > -1) || !(hi > -1)) throw std::invalid_argument("serving error of regime \"" + name + "\" is -100% or less");
    double* least = name == prefill ? &e.least.prefill : name == large ? &e.least.decode_large : name == small ? &e.least.decode_small : nullptr;
    double* largest = name == prefill ? &e.largest.prefill : name == large ? &e.largest.decode_large : name == small ? &e.largest.decode_small : nullptr;
    if (!least) continue;  // a regime the engine has no factor for
    *least = 1 + lo, *largest = 1 + hi;
  }
  return e;
}

namespace {

json factors_json(const StepScale& f) { return {{"prefill", f.prefill}, {"decode_large", f.decode_large}, {"decode_small", f.decode_small}}; }

// When no candidate met: whether every candidate with more decode instances than b has a TPOT p99
// above the bound and no lower (within 2%) than b's, i.e. the bound is one step's time (a rank's
// batch is set by the KV it holds, not by the instance count). Sets j["tpot_bound_per_step"];
// returns the sentence to append ("" when not).
std::string per_step_note(Runner& run, const Config& c, const Alloc& b, const Point& p, const std::vector<Alloc>& cands, std::uint64_t seed,
                          const StepScale& f, double tpot_p99_bound_s, json& j) {
  bool per_step = true, any = false;
  double worst = p.tpot_p99_s;
  std::string counts = std::to_string(b.decode);
  for (const Alloc& al : cands) {
    if (al.decode <= b.decode) continue;
    const Point q = *run.known(c, al, seed, 1, f);
    any = true;
    per_step = per_step && q.tpot_p99_s > tpot_p99_bound_s && q.tpot_p99_s >= 0.98 * p.tpot_p99_s;
    worst = std::min(worst, q.tpot_p99_s);
    if (counts.find(std::to_string(al.decode)) == std::string::npos) counts.append(", ").append(std::to_string(al.decode));
  }
  j["tpot_bound_per_step"] = any && per_step;
  if (!(any && per_step)) return "";
  return fmt::format("; TPOT p99 stays at {:.1f} ms or more at the decode instance counts tried ({}): the TPOT bound looks like one "
                     "step's time there, which more instances do not lower",
                     worst * 1e3, counts);
}

}  // namespace

json serving_nodes(Runner& run, const Answer& ans, const Scenario& s, const ServingEnds& ends, double tpot_p99_bound_s) {
  const Config& c = ans.cfg;
  const Alloc b = ans.r.best;
  const int nb = run.nodes(c, b);
  struct End {
    const char* name;
    StepScale f;
    double decode_f;  // the decode pool's factor
  };
  // the decode pool is scaled by the larger decode factor at both ends: its steps may run in either
  // regime (V4-Pro's few 500K-token sessions per rank run in the small one, whose least factor is
  // the larger), and the larger one shrinks less / grows more (review)
  const End es[] = {{"least", ends.least, std::max(ends.least.decode_large, ends.least.decode_small)},
                    {"largest", ends.largest, std::max(ends.largest.decode_large, ends.largest.decode_small)}};
  // b at both ends in one batch, then each end's candidates in a second: b's prefill pool, its
  // decode pool, and both, scaled (up when b misses, at least one instance more; down when it meets)
  std::vector<Runner::Probe> first;
  for (const End& e : es) first.push_back({b, s.seed, 1, e.f});
  const std::vector<Point> at = run.run(c, first);
  std::vector<Alloc> cands[2];
  std::vector<Runner::Probe> second;
  for (int i = 0; i < 2; ++i) {
    const End& e = es[i];
    const bool ok = at[static_cast<size_t>(i)].ok;
    const int p = ok ? std::min(b.prefill, scaled_instances(b.prefill, e.f.prefill)) : std::max(b.prefill + 1, scaled_instances(b.prefill, e.f.prefill));
    const int d = ok ? std::min(b.decode, scaled_instances(b.decode, e.decode_f)) : std::max(b.decode + 1, scaled_instances(b.decode, e.decode_f));
    for (const Alloc& al : {Alloc{p, b.decode}, Alloc{b.prefill, d}, Alloc{p, d}})
      if (!(al == b) && std::find(cands[i].begin(), cands[i].end(), al) == cands[i].end()) {
        cands[i].push_back(al);
        second.push_back({al, s.seed, 1, e.f});
      }
  }
  run.run(c, second);
  json out;
  for (int i = 0; i < 2; ++i) {
    const End& e = es[i];
    const Point& p = at[static_cast<size_t>(i)];
    json j = {{"step_factors", factors_json(e.f)}, {"meets_slo_at_answer", p.ok},
              {"ttft_p99_s_at_answer", std::isfinite(p.ttft_p99_s) ? json(p.ttft_p99_s) : json()},
              {"tpot_p99_s_at_answer", std::isfinite(p.tpot_p99_s) ? json(p.tpot_p99_s) : json()}, {"candidates_missed_up_to", json()}};
    // the fewest nodes among the candidates that meet the SLO (b itself when it meets)
    std::optional<Point> best;
    for (const Alloc& al : cands[static_cast<size_t>(i)]) {
      const Point q = *run.known(c, al, s.seed, 1, e.f);
      if (q.ok && (!best || q.nodes < best->nodes)) best = q;
    }
    const auto pools = [&](const Point& q) { return fmt::format("{} prefill + {} decode instances ({} nodes)", q.alloc.prefill, q.alloc.decode, q.nodes); };
    std::string text;
    int n = nb;
    if (p.ok && best && best->nodes < nb) n = best->nodes, text = "the answer meets the SLO, and so do fewer instances: " + pools(*best);
    else if (p.ok && best) text = "the answer meets the SLO; its pools scaled down meet it too, with no fewer nodes";
    else if (p.ok) text = cands[static_cast<size_t>(i)].empty() ? "the answer meets the SLO" : "the answer meets the SLO; its pools scaled down miss";
    else if (best) n = best->nodes, text = "the answer misses (" + p.why + "); the fewest nodes among its scaled pools that meet it: " + pools(*best);
    else {
      const Alloc& both = cands[static_cast<size_t>(i)].back();
      text = "the answer misses (" + p.why + "), and so do its pools scaled up, to at most " + std::to_string(run.nodes(c, both)) +
             " nodes (only those splits were tried, at one seed)";
      j["candidates_missed_up_to"] = run.nodes(c, both);
      text += per_step_note(run, c, b, p, cands[static_cast<size_t>(i)], s.seed, e.f, tpot_p99_bound_s, j);
    }
    if (j["candidates_missed_up_to"].is_null()) j["nodes"] = n, j["nodes_delta"] = n - nb;
    else j["nodes"] = json(), j["nodes_delta"] = json();
    j["text"] = text;
    out[e.name] = j;
  }
  return out;
}

}  // namespace servesim::cli::cap
