// servesim cli: the search behind `servesim capacity` (issue 14), apart from the simulator so that
// it can be tested with any feasibility oracle. Pure logic, no I/O.
//
// Question: the fewest nodes nodes(P, D) over prefill instance counts P ≥ 1 and decode instance
// counts D ≥ 1 such that the deployment with P and D instances meets the SLO ("feasible"), for one
// configuration (attention TP, decode batch limit; the command loops over those).
//
// Assumption: more instances never hurt — feasible(P, D) ⇒ feasible(P + 1, D) and feasible(P, D + 1)
// (up to seed noise, which the command's band shows). Then the answer lies on the frontier
// D_min(P) = the fewest decode instances that make P prefill instances feasible, non-increasing in P.
//
// Search (each "evaluate" is one simulated run, `batch` of them at once):
//  1. bracket: (s / r, s) for s = s0, 2 s0, 4 s0, … (r = decode_per_prefill, the P:D split the
//     bracket grows along; prefill at least 1; s0 = start_decode, which the command takes from the
//     static estimate so that the small, overloaded and slow allocations are not run) until one is
//     feasible (→ P_hi, D_hi) or nodes exceed max_nodes (→ not found);
//  2. the corner: D* = the fewest decode instances at P_hi, then P* = the fewest prefill instances
//     at D* (by k-section: bisection with `batch` probes per round); (P*, D*) is on the frontier.
//     D* is looked for above the bracket's last miss (D_lo) first; below it only when no probe
//     above missed and (P_hi, D_lo) itself meets the SLO (one run), so the answer is the same;
//  3. the staircase from the corner both ways: D = D* + 1, D* + 2, … each with the fewest prefill
//     instances (at most the previous step's), and P = P* + 1, … each with the fewest decode
//     instances, only where some allocation can still take at most the best nodes (fewer, for more
//     prefill); each way stops after two steps in a row that improve nothing. Ties in nodes go to
//     the fewer prefill instances. The stop makes it a local search around the corner: a frontier
//     whose node count falls again far from it is not followed.
// With resolution r > 0 every bisection stops once its feasible end takes at most a share r of its
// nodes more than its lowest end not known to miss, and the staircase steps by as many instances as
// r of the corner's nodes hold: the answer is then within about r of the exact search's, for far
// fewer runs (the command's default r = 2% is below the seed-to-seed spread of the SLO's edge).
// Every result is remembered; a point with at least as many instances of both kinds as a known
// feasible one is feasible, one with at most as many as a known infeasible one is infeasible:
// inferred, not run.
#pragma once
#include <functional>
#include <utility>
#include <vector>

namespace servesim::cli {

/// Instance counts of the two pools.
struct Alloc {
  int prefill = 1, decode = 1;
  bool operator==(const Alloc&) const = default;
};

/// Evaluates every allocation of the batch (in parallel, by simulation) and says which are feasible,
/// in order. Throws to abort the search.
using CapacityOracle = std::function<std::vector<bool>(const std::vector<Alloc>&)>;
/// Nodes an allocation takes (each pool rounded up to whole nodes).
using NodeCount = std::function<int(const Alloc&)>;

struct CapacitySearchResult {
  bool found = false;
  Alloc best;
  int nodes = 0;
  int evaluations = 0;                        ///< allocations the oracle ran (inferred ones excluded)
  std::vector<std::pair<Alloc, bool>> known;  ///< every allocation run, with its result, in run order
};

struct CapacitySearchOptions {
  int batch = 1;                    ///< allocations per oracle call (≥ 1)
  double decode_per_prefill = 1.0;  ///< the bracket's P:D split (1: both pools double together)
  int start_decode = 1;             ///< the bracket's first decode count (the static estimate's, when known)
  double resolution = 0;            ///< bisections stop when their two ends differ by at most this share of the
                                    ///< feasible end's nodes; the staircase steps by as many instances as that
                                    ///< share of the corner's nodes holds (0: exact, one instance)
};

/// The search above; `max_nodes` bounds the bracket. Throws std::invalid_argument for options out of
/// range (batch < 1, start_decode < 1, decode_per_prefill outside 1e-6-1e6, resolution outside [0, 1)),
/// and whatever the oracle throws.
CapacitySearchResult fewest_nodes(const CapacityOracle& oracle, const NodeCount& nodes, int max_nodes, const CapacitySearchOptions& opt);
/// The same with batch and P:D split only (bracket from 1, exact).
CapacitySearchResult fewest_nodes(const CapacityOracle& oracle, const NodeCount& nodes, int max_nodes, int batch, double decode_per_prefill = 1.0);

}  // namespace servesim::cli
