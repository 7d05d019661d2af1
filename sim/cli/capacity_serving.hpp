// servesim cli: the nodes `servesim capacity`'s answer would need if real serving were as much
// slower (or faster) than the engine as on the published deployments that `servesim validate`
// checks (README "servesim capacity").
#pragma once
#include "sim/cli/capacity_runner.hpp"

namespace servesim::cli::cap {

/// Step-time factors at the two ends of the engine's error by regime. `regimes`: validate's
/// regime_json ([{"regime", "min_error", "max_error", ...}], errors as fractions, > 0: the engine's
/// throughput higher than published). A step priced t by the engine would take t · (1 + error)
/// where the engine is that optimistic: least = 1 + min_error, largest = 1 + max_error per regime
/// (1 for a regime without rows). Throws std::invalid_argument for an error <= -1.
struct ServingEnds {
  StepScale least, largest;
};
ServingEnds serving_ends(const json& regimes);

/// At each end, the answer b run with every step time times its regime's factor (StepScale), at
/// the search seed; then three candidates: b's prefill pool scaled, its decode pool scaled, and
/// both (prefill by the prefill factor, decode by the larger of the two decode factors; rounded
/// up): scaled up, at least one instance more, when b misses; scaled down, never above b, when it
/// meets. "nodes" is the fewest nodes among b (if it meets) and the candidates that meet: an
/// estimate from those few splits at one seed, not a search. When none meets, "nodes" is null and
/// "candidates_missed_up_to" holds the both-scaled candidate's nodes (other splits were not tried),
/// with "tpot_bound_per_step" true when every candidate with more decode instances has a TPOT p99
/// above `tpot_p99_bound_s` (seconds, the SLO's) and within 2% of b's or above. Returns
/// {"least": {...}, "largest": {...}}, each with the factors, the verdict and p99s at b, "nodes",
/// "nodes_delta" (to b; null when none met) and a sentence ("text"). Runs through `run`
/// (memoised, `jobs` at a time): 2 to 8 runs.
json serving_nodes(Runner& run, const Answer& ans, const Scenario& s, const ServingEnds& ends, double tpot_p99_bound_s);

}  // namespace servesim::cli::cap
