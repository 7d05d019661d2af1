// servesim cli: the subcommands. Each returns a process exit status (0 ok, 1 run failure,
// 2 bad input) and prints errors itself.
#pragma once
#include <string>
#include <vector>

namespace servesim::cli {

struct RunArgs {
  std::string scenario;        ///< empty: the built-in default scenario (scenarios/default.json)
  std::string trace;           ///< replace the workload by this Mooncake JSONL trace
  std::string out;             ///< output folder (default out/<scenario name>)
  std::string only;            ///< run only the deployment with this name
  std::string cost_model;      ///< override the scenario's cost model
  long long seed = -1;         ///< override the scenario's seed
  double horizon_s = -1;       ///< override the scenario's horizon
  double warmup_s = -1;        ///< override the scenario's warm-up (start of the measurement window)
  double time_scale = -1;      ///< override the trace's time scale
  int jobs = 0;                ///< deployments simulated in parallel (0: one per core)
  bool no_timeline = false;
  bool skip_bad_rows = false;  ///< skip and count malformed trace rows instead of stopping
  std::string requests = "csv";    ///< requests file: csv | csv.gz (zlib) | none
  std::string timeline_window;     ///< "START:END" simulated seconds: only that part of the timeline (empty: all)
  bool quiet = false;              ///< no progress line and no info log lines on stderr
  std::vector<std::string> simgrid_cfg;
  int decode_steps_per_event = 64;  ///< RunOptions::decode_steps_per_event (1: one SimGrid event per decode step)
  int prefix_index_min_ranks = 512;  ///< RunOptions::prefix_index_min_ranks
  bool all_to_all_flows = false;     ///< RunOptions::all_to_all_flows
};

int run(const RunArgs& a);

/// `servesim step`: the time of one batch step of a deployment's pool for a uniform batch, and the
/// throughput it implies (static, no queueing: for comparing with published per-node figures).
struct StepArgs {
  std::string scenario, deployment, phase = "decode";
  long long seqs_per_rank = 1;   ///< sequences per DP rank
  long long tokens = -1;         ///< new tokens per sequence; -1: prefill the pool's chunk_tokens, decode 1
  long long context = -1;        ///< tokens already in each sequence's cache; -1: prefill 0, decode 2048
  std::string cost_model;        ///< override the scenario's cost model
  bool ops = false;              ///< also print every op of one layer of each kind (latency, provenance)
};
int step(const StepArgs& a);
int plan(const std::string& scenario);
int topology(const std::string& scenario);

/// The default scenario file (data_dir()/default.json).
std::string default_scenario();

}  // namespace servesim::cli
