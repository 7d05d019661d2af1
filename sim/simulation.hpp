// servesim sim: the engine. One Simulation object owns every piece of state of one run (platform,
// instances, requests, policies); there are no globals besides SimGrid's own engine singleton,
// which is why a process runs one Simulation (the CLI forks one process per deployment).
//
// Request life: arrival → router → prefill rank queue → chunked-prefill batches (prefix-cache hits
// skip their tokens) → wait for KV room on a decode rank (the wait counts in TTFT) → KV transfer as
// SimGrid flows over the fabric (one per attention-TP rank) → continuous-batching decode steps →
// completion. The first token is delivered when the request enters decode (TTFT); TPOT is the mean
// time per later token.
//
// Unit of work: one SimGrid activity (sleep) per batch step per instance, lasting StepCostModel's
// step time (compute of every layer + TP all-reduces + EP all-to-alls). KV transfers are the only
// real network flows.
#pragma once
#include "costmodels/feasibility.hpp"
#include "costmodels/cost_model.hpp"
#include "costmodels/step_cost.hpp"
#include "scenarios/deployment.hpp"
#include "sim/events.hpp"
#include "workloads/request.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace servesim {

struct RunOptions {
  double horizon_s = 0;                  ///< stop at this simulated time (0: run until every request ends)
  std::vector<std::string> simgrid_cfg;  ///< extra SimGrid arguments, e.g. "--cfg=network/model:LV08"
  std::uint64_t seed = 0;                ///< the scenario's seed: the engine's own random streams (per-step expert loads)
  /// Decode steps a decode instance may run as one SimGrid event while its batch cannot change
  /// (no sequence finishes and none becomes ready before the last of them; a ready sequence cuts
  /// the run at the end of the step in progress, as it would join there step by step). 1 = one
  /// event per step. The results agree with 1 up to SimGrid's clock rounding (test
  /// RunOutputs.DecodeStepsPerEventKeepTheResults); all_to_all_on_fabric as flows
  /// (all_to_all_flows) always runs one step per event (its flows are per step); held, a plan holds
  /// its steps' mean all-to-all rate, so single KV transfers during it may differ from one event per
  /// step (by up to ~14%; the mean by 0.04%: RunOutputs.AllToAllReservationsMatchTheFlows). Assumes the decode batcher admits from a rank's ready queue by
  /// the queue and the running count alone (DecodeBatcher's contract). Must be >= 1.
  int decode_steps_per_event = 64;
  /// Distinct prompt-block ids the trace-level reuse closed form remembers (RunTotals::
  /// trace_reuse_arrivals): 2^22 = 4,194,304 (a 64 MiB table); tests lower it.
  std::size_t trace_reuse_max_block_ids = std::size_t{1} << 22;
  /// From this many prefill ranks on, a router that reads prefix matches gets them from one
  /// pool-wide index (sim/kvcache/prefix_index.hpp) instead of a lookup in every rank's cache. Same
  /// answers (tests RunOutputs.PrefixIndexKeepsTheResults, PrefixIndex.*); below it the lookups are
  /// cheaper than keeping the index (it costs a hash-table update per inserted and evicted block):
  /// 600 s of bench/scenarios/k3-812.json, 232 ranks: 12.1 s user without, 13.6 s with; 456 ranks:
  /// even; 2,856 ranks (9,996 nodes): 219 -> 81 s for 90 simulated s. Tests set 0 to force it.
  int prefix_index_min_ranks = 512;
  /// all_to_all_on_fabric as one rate-capped background flow per attention-TP group, direction and
  /// step (the check form: mailbox comms posted from the sending host, whose caps SimGrid 3.32
  /// honours; one event per decode step, and far slower) instead of bandwidth held on the NICs and
  /// uplinks (sim/engine/a2a_reservations.hpp; the default). `run --all-to-all-flows`.
  bool all_to_all_flows = false;
  /// Every step's time times its regime's factor (costmodels/step_cost.hpp StepScale; default
  /// none): `servesim capacity` runs its answer at the engine's error against published
  /// deployments with it.
  StepScale step_scale;
};

/// Totals the engine itself keeps (the metrics collector derives everything else from events).
struct RunTotals {
  double end_s = 0;
  long long arrivals = 0, completed = 0, rejected = 0, in_flight = 0;
  long long sessions = 0;
  /// L1 prefix cache (prefill ranks), counted at admission: prompt blocks looked up, blocks found
  /// cached; and the trace-level reference: blocks an earlier arrival carried (arrival order,
  /// unlimited capacity — the closed form of the workload's reuse).
  long long prefix_lookup_blocks = 0, prefix_hit_blocks = 0, trace_reuse_blocks = 0, trace_blocks = 0;
  /// −1: trace_reuse_blocks / trace_blocks cover every arrival; else only the first this many (the
  /// engine remembers at most 2^22 distinct block ids for that closed form: bounded memory)
  long long trace_reuse_arrivals = -1;
  long long prefill_steps = 0, decode_steps = 0;
  /// SimGrid waits the decode steps took (RunOptions::decode_steps_per_event: one per step at 1,
  /// one per plan of several steps otherwise, a cut plan's wait for its step in progress included)
  long long decode_step_events = 0;
  /// decode steps one SimGrid event could cover in this run: RunOptions::decode_steps_per_event,
  /// or 1 with all_to_all_on_fabric as flows (RunOptions::all_to_all_flows: per step)
  int decode_steps_per_event = 1;
  double transfer_bytes = 0;
  // KV store below the GPUs (sim/kv_store.hpp)
  long long offloads = 0, offloads_in_flight = 0, loads_l2 = 0, loads_l3 = 0;
  /// offload_bytes = copies started; of those, offload_abandoned_bytes finished after their session
  /// had ended (not stored); the rest landed in the store or are in flight at the end
  double offload_bytes = 0, offload_abandoned_bytes = 0, demote_bytes = 0, load_l2_bytes = 0, load_l3_bytes = 0;
  /// stationary-start histories put into L2 at arrival without crossing any link (KvMover::preload)
  long long preloads = 0;
  double preload_bytes = 0;
  /// the store's own ledger: offloaded (landed in L2) = held at the end + left (loaded back, dropped)
  double store_offloaded_bytes = 0, store_dropped_bytes = 0, store_left_bytes = 0, store_held_bytes = 0;
  long long tokens_l1 = 0, tokens_l2 = 0, tokens_l3 = 0, prompt_tokens_admitted = 0;
};

class Simulation {
 public:
  /// Validates nothing itself: pass a DeploymentSpec that validate_deployment() accepted.
  Simulation(DeploymentSpec d, std::unique_ptr<RequestSource> source, std::shared_ptr<const CostModel> cost, EventSink& sink,
             RunOptions options);
  ~Simulation();
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  /// Runs the simulation; every arrived request is emitted once through the sink (completed,
  /// rejected, or in flight at the end). Once per process. Throws TraceError / std::runtime_error
  /// from the request source (malformed input) after stopping the simulation.
  RunTotals run();

  const GpuMemoryPlan& prefill_memory() const;
  const GpuMemoryPlan& decode_memory() const;

  /// Whether SimGrid accepts these configuration items ("key:value", as RunOptions::simgrid_cfg
  /// without the "--cfg=" prefix): starts SimGrid's engine with them in a child process (SimGrid
  /// ends the process on a bad key or value, printing its own message) and reports whether that
  /// child exited 0. Lets the CLI refuse a bad --cfg with exit status 2 before running anything.
  static bool simgrid_accepts(const std::vector<std::string>& cfg);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace servesim
