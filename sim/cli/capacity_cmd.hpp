// servesim cli: `servesim capacity SCENARIO.json --sessions N | --rate R` (issue 14): the fewest
// nodes that serve a load within a latency SLO in steady state, found by simulated runs
// (sim/cli/capacity_search.hpp: the search; README "servesim capacity": the method), printed next
// to the article's static estimate (`plan`) and with a band over seeds.
#pragma once
#include <string>
#include <vector>

namespace servesim::cli {

struct CapacityArgs {
  std::string scenario;            ///< scenario file (its workload and a deployment to start from)
  std::string only;                ///< the deployment to size (default: the first)
  std::string out;                 ///< folder for capacity.json and every run's summary (default out/capacity/<scenario>-<deployment>)
  long long sessions = -1;         ///< closed-loop agent sessions (workload kind agent, loop closed)
  double rate = -1;                ///< arrivals per second (synthetic requests, or open-loop agent sessions)
  double ttft_p99_s = 2.0;         ///< SLO: TTFT p99 bound, seconds (in-flight requests count, end − arrival as a lower bound)
  double tpot_p99_s = 0.05;        ///< SLO: TPOT p99 bound, seconds
  double max_rejected = 0.01;      ///< SLO: rejected share of the measured requests at most this
  std::vector<int> attn_tp;        ///< attention TP values to try, both pools (default: the deployment's)
  std::vector<int> max_running;    ///< decode batch limits to try (default: the deployment's)
  int seeds = 3;                   ///< seeds of the band (the scenario's seed, +1, …)
  double horizon_s = -1;           ///< simulated seconds per run (default: the scenario's horizon_s, else 900)
  double warmup_s = -1;            ///< warm-up per run (default: the scenario's warmup_s, else horizon / 3)
  double rho = 0.25;               ///< GPU residency the static estimate assumes (the article's standard ρ)
  double decode_per_prefill = 1;  ///< the P:D split the search's bracket grows along (decode instances per prefill instance)
  int max_nodes = 2048;            ///< give up a configuration beyond this many nodes
  double resolution = 0.02;        ///< bisections stop within this share of the nodes (0: exact)
  bool plan_start = true;          ///< the bracket starts at the static estimate's decode instances (else at 1)
  int jobs = 0;                    ///< runs at once (default: one per core)
  std::string cost_model;          ///< override the scenario's cost model
  bool quiet = false;              ///< no per-run lines on stderr
};

/// Exit status: 0 an answer was found, 1 no configuration met the SLO within max_nodes (or a run
/// failed), 2 bad input.
int capacity(const CapacityArgs& a);

}  // namespace servesim::cli
