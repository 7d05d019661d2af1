// servesim sim/engine: the engine's rooms and the one object that owns them. Simulation (the
// facade, sim/simulation.hpp) owns one Engine per run; there are no globals besides SimGrid's own
// engine singleton.
//
//   Arrivals      (arrivals.cpp)     arrival actor: admits each request, rejects the impossible ones,
//                                    routes it to a prefill rank; ends requests and starts the next
//                                    round of a session
//   PrefillPool   (prefill_pool.cpp) prefill instances: chunked-prefill steps, prompt KV admission
//   DecodePool    (decode_pool.cpp)  decode instances: KV admission on a decode rank, continuous
//                                    batching steps
//   KvMover       (kv_mover.cpp)     every KV byte that crosses the fabric: P→D transfers, offloads
//                                    to host DRAM, demotions to storage, load-backs; all-to-all
//                                    background flows
//   FlowPool      (flow_pool.cpp)    long-lived actors that run SimGrid flows
//   SessionLedger (sessions.cpp)     per-session residency (GPU, decode, idle seconds) and records
//
// A request's path: Arrivals → PrefillPool → (DecodePool admission) → KvMover transfer → DecodePool
// → Arrivals::end_request (or KvMover offload, then end). Invariants the tests hold: every arrival
// ends completed, rejected or in flight; each KV byte reserved is released once.
#pragma once
#include "costmodels/feasibility.hpp"
#include "costmodels/step_cost.hpp"
#include "sim/engine/a2a_reservations.hpp"
#include "sim/events.hpp"
#include "sim/kvcache/kv_store.hpp"
#include "sim/kvcache/prefix_cache.hpp"
#include "sim/kvcache/prefix_index.hpp"
#include "sim/policies/batch_scheduler.hpp"
#include "sim/policies/decode_batcher.hpp"
#include "sim/policies/router.hpp"
#include "sim/request_state.hpp"
#include "sim/simulation.hpp"
#include "topology/platform.hpp"
#include "workloads/blocks.hpp"

#include <simgrid/s4u.hpp>

#include <array>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace servesim {

namespace sg4 = simgrid::s4u;
struct Engine;

/// Long-lived worker actors, one blocking SimGrid communication each, then the completion callback
/// in that actor: millions of flows do not create millions of actors.
class FlowPool {
 public:
  explicit FlowPool(Engine& e) : e_(e) {}
  /// Sends `bytes` (at least 1) from src to dst as one flow; `done` runs in simulated time when it ends.
  void submit(sg4::Host* src, sg4::Host* dst, double bytes, std::function<void()> done);

 private:
  struct Worker {
    sg4::ActorPtr actor;
    std::function<void()> job;
  };
  Engine& e_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<Worker*> idle_;
};

/// Per-session residency: rounds, GPU-resident seconds, decode seconds, idle (think) seconds.
class SessionLedger {
 public:
  explicit SessionLedger(Engine& e) : e_(e) {}
  /// A round of `session` arrived (opens the session on its first round).
  void round_arrived(long long session);
  /// A round of `session` completed at now; `first_token_s` < 0 when it never decoded.
  void round_completed(long long session, double first_token_s);
  /// The round's KV left the GPUs: GPU residency since admit_s counts to the session.
  void gpu_released(long long session, double admit_s);
  /// Adds residency still open at the horizon (a round admitted at admit_s, decoding since first_token_s).
  void open_at_horizon(long long session, double admit_s, double first_token_s);
  bool open(long long session) const { return sessions_.count(session) > 0; }
  /// Emits the session's record and forgets it; releases its stored KV.
  void end(long long session, RequestStatus status);
  /// Emits the records of every session still open (in flight at the horizon), by id.
  void end_all_in_flight();

 private:
  struct State {
    double start_s = 0, last_done_s = -1, gpu_s = 0, decode_s = 0, idle_s = 0;
    int rounds = 0;
  };
  SessionRecord record(long long session, const State& s, RequestStatus status, double end_s) const;
  Engine& e_;
  std::unordered_map<long long, State> sessions_;
};

/// Prefill instances: each DP rank keeps its queue, its prefix cache and its KV reservations.
class PrefillPool {
 public:
  struct Rank {
    std::deque<ReqState*> waiting, running;
    double queued_tokens = 0;
    double capacity = 0, reserved = 0;  // KV bytes per GPU
    std::unique_ptr<PrefixCache> cache;
    std::vector<PrefillItem> items;
  };
  struct Instance {
    int id = 0, first_gpu = 0;
    std::vector<Rank> ranks;
    sg4::ActorPtr actor;
    bool idle = false;
    bool queued = false;  // got requests since the last wake_queued()
  };
  explicit PrefillPool(Engine& e);
  void build(const std::vector<int>& first_gpus);
  void start();  ///< creates the instances' actors
  std::vector<Instance>& instances() { return inst_; }
  Rank& rank_of(const ReqState* r) { return inst_[static_cast<size_t>(r->rec.prefill_instance)].ranks[static_cast<size_t>(r->prefill_rank)]; }
  /// First GPU of the attention-TP group that prefills r.
  int gpu0_of(const ReqState* r) const;
  /// Queues r on rank `rank` of instance `inst`. The instance is woken by wake_queued(), once every
  /// arrival of the instant is queued: a batch is formed only after all of them.
  void enqueue(ReqState* r, int inst, int rank);
  /// Wakes the idle instances that got requests from enqueue().
  void wake_queued();
  /// out[g] = what rank ordinal g's prefix cache would serve of r (instances in order, then ranks),
  /// from the pool-wide index; false (out untouched) when the pool has none
  /// (RunOptions::prefix_index_min_ranks).
  bool match_all(const Request& r, std::vector<long long>& out);
  /// r's stored history was loaded back: its prefill resumes after `tokens`.
  void loaded(ReqState* r, long long tokens);
  /// r's prompt KV leaves the rank (transferred, or the request ends in prefill): frees the
  /// reservation and inserts the prompt's blocks into the rank's prefix cache.
  void release_kv(ReqState* r);
  /// r's prefill ended: its prompt's blocks enter the rank's prefix cache, pinned until release_kv.
  void cache_prompt(ReqState* r);
  void emit_memory(int inst);
  void wake(Instance& p);

 private:
  void loop(Instance& p);
  bool admit(Rank& pr, ReqState* r);
  void done(ReqState* r);
  Engine& e_;
  std::vector<Instance> inst_;
  std::unique_ptr<BatchScheduler> scheduler_;
  std::vector<std::vector<SeqWork>> work_;
  Rng load_rng_;  // per-step expert-load draws (seeded from the scenario's seed)
  std::unique_ptr<PrefixIndex> index_;  // set when the router reads prefix matches and the pool is large
};

/// Decode instances: KV admission on a rank (decode_admission.cpp), continuous batching steps.
class DecodePool {
 public:
  struct Rank {
    std::deque<ReqState*> ready;    // admitted, waiting for a batch slot
    std::vector<ReqState*> active;  // in the running batch
    /// per active sequence (same order as `active`): its context before its first decode step
    /// (input + generated − 1 at joining) and the step it joined at, so that re-pricing the batch
    /// reads one contiguous array instead of every sequence's ReqState
    struct Joined {
      long long ctx0 = 0, start_step = 0;
    };
    std::vector<Joined> joined;
    double capacity = 0, reserved = 0;
    int admitted = 0;  // ready + active + in transfer
  };
  struct Instance {
    int id = 0, first_gpu = 0;
    std::vector<Rank> ranks;
    sg4::ActorPtr actor;
    bool idle = false;
    // event-driven continuous batching: a sequence's finishing step is known when it joins, so a
    // step costs O(log n) bookkeeping instead of O(n)
    long long step = 0, active = 0;
    std::vector<std::tuple<long long, std::uint64_t, ReqState*>> finish;  // min-heap on (step, id)
    // the step time is re-evaluated when the batch's sequence count or total context (kept exactly,
    // incrementally) has moved by more than kStepReuse since the last evaluation: decode step times
    // change slowly with both
    bool evaluated = false;
    StepParts parts;  // the attention half of the last evaluation
    StepTime last;    // the step priced at this step's expert-load sample
    std::array<StepTime, ExpertLoad::kSamples + 1> at_sample;  // finish(parts) at sample i − 1 (−1: expected), valid where bit i is set
    std::uint64_t sample_valid = 0;
    double ctx = 0, ctx_at_eval = 0;  // Σ context of the next step's tokens
    long long active_at_eval = 0;
    // several steps per SimGrid event (RunOptions::decode_steps_per_event): while the batch cannot
    // change (no sequence finishes before the plan's last step) the steps are priced ahead and slept
    // as one wait, cut at the end of the step in progress when a sequence becomes ready (ready())
    struct PlannedStep {
      double start_s = 0, end_s = 0, ctx_before = 0;  // simulated seconds; Σ context of the step's tokens
      StepTime time;
    };
    struct Repricing {  // the pricing state a re-evaluation at plan step `at` replaced (to roll back a cut)
      size_t at = 0;
      StepParts parts;
      double ctx_at_eval = 0;
      long long active_at_eval = 0;
      bool evaluated = false;
    };
    std::vector<PlannedStep> plan;
    std::vector<Repricing> repricings;
    bool planning = false, in_plan = false;
    Rng load_rng{0};          // this instance's expert-load draws (seeded from the scenario's seed and the instance id)
    std::deque<int> samples;  // sample indices drawn ahead; the front one is the next step's
    sg4::MutexPtr mutex;
    sg4::ConditionVariablePtr cv;
  };
  static constexpr double kStepReuse = 0.01;
  explicit DecodePool(Engine& e);
  ~DecodePool();
  void build(const std::vector<int>& first_gpus);
  void start();  ///< creates the instances' actors
  std::vector<Instance>& instances() { return inst_; }
  int gpu0_of(const ReqState* r) const;
  /// r finished its prefill: it waits for KV room on a decode rank (decode_admission.cpp: in order,
  /// a request that fits nowhere holding one rank, not all), then its KV transfer starts.
  void enqueue(ReqState* r);
  /// r's KV arrived: it joins the rank's ready queue.
  void ready(ReqState* r);
  /// Frees `bytes` of KV reservation on a rank and admits waiting requests.
  void free_kv(int instance, int rank, double bytes);
  void emit_memory(int inst);
  void wake(Instance& q);
  /// At the end of the run (horizon): commits the planned steps that ended before now, then settles
  /// the tokens generated so far by sequences still decoding (their counters are kept implicitly).
  void settle_counters();
  /// Keeps the instances' synchronisation objects alive past a horizon stop (see Arrivals::keep_alive).
  void keep_alive();

 private:
  // admission (decode_admission.cpp): requests in prefill-end order; one that fits nowhere holds
  // the rank with the most free KV, later ones take any other rank
  void dispatch_pending();
  void dispatch_once();
  bool place(const ReqState* r, int& instance, int& rank);
  bool hold_most_free();
  double max_free_any() const;
  void hold(int instance, int rank);
  bool held(int instance, int rank) const;
  struct RankIndex;  // the ranks by least_loaded's key (decode_admission.cpp), when the router uses that rule
  bool pick_indexed(double need, int& instance, int& rank);
  void build_index();
  void reindex(const Instance& q, size_t rank, bool insert);
  void loop(Instance& q);
  void join_batch(Instance& q);
  void evaluate_step(Instance& q, int sample);
  int sample_at(Instance& q, size_t i);
  void run_planned_steps(Instance& q, std::unique_lock<sg4::Mutex>& lock, long long k);
  void commit_plan(Instance& q, long long step0, size_t j);
  void finish_sequences(Instance& q);
  void finish_round(ReqState* r);
  Engine& e_;
  std::vector<Instance> inst_;
  std::deque<ReqState*> pending_;  // prefilled, waiting for KV room on a decode rank
  std::vector<DecodeCandidate> cand_;  // dispatch_pending's scratch (kept to avoid an allocation per call)
  std::unique_ptr<RankIndex> index_;   // set when the decode router is least_loaded's rule: no scan of every rank
  std::vector<char> held_;             // per rank (instance · dp + rank): held by a waiting request in this dispatch
  std::vector<size_t> held_list_;      // the held ranks (reset at the end of each dispatch)
  bool dispatching_ = false, redispatch_ = false;
  long long steps_for(long long tokens);
  long long made(const Instance& q, const ReqState* r) const;
  long long made(long long steps) const;  ///< tokens made in `steps` decode steps
  std::unique_ptr<DecodeBatcher> batcher_;
  std::vector<std::vector<SeqWork>> work_;
  Rng mtp_rng_;   // MTP draft acceptances (seeded from the scenario's seed)
  double tokens_per_step_ = 1;  // expected tokens per sequence per step (MTP)
};

/// Every KV movement over the platform's links.
class KvMover {
 public:
  explicit KvMover(Engine& e) : e_(e) {}
  /// P→D: r's prompt KV from its prefill TP group to its decode TP group (one flow).
  void transfer(ReqState* r);
  /// Load-back of r's session history (`tokens`) from the store into its prefill rank's GPUs.
  void load(ReqState* r, long long tokens);
  /// Ends round r (completed) and offloads its session's history from the TP group at src_gpu0 to
  /// that node's host DRAM; `release` runs when the copy is done (frees the GPU KV).
  void offload(ReqState* r, int src_gpu0, std::function<void()> release);
  /// A session that starts mid-life (Request::history_stored): its history's KV enters L2 of node
  /// (session mod nodes) at arrival without a copy, counted apart (preloads, preload_bytes: no link
  /// carried it, so it is not offload traffic).
  void preload(const Request& r);
  /// History tokens of r's session the store can give back (0 without a store).
  long long store_tokens_for(const Request& r) const;
  /// all_to_all_on_fabric for a step (or a decode plan) of `instance` of `phase`'s pool whose first
  /// GPU is `first_gpu`: the flows of step `st` (RunOptions::all_to_all_flows, the check form), or
  /// `bytes` per GPU and direction over `seconds` (> 0) held on the instance's NICs and uplinks
  /// (default form). Does nothing when the pool's option is off or the instance fits in one node.
  void all_to_all_step(Phase phase, int instance, int first_gpu, const StepTime& st, double bytes, double seconds);
  /// An idle instance releases the bandwidth it holds (the flows form holds none).
  void end_all_to_all(Phase phase, int instance);
  /// The holder id of an instance in the link reservations: prefill instances 0..2^24-1, decode
  /// instances 2^24 + their id (instance ids stay below 2^24: a pool has at most 2^20 GPUs).
  static int holder_of(Phase phase, int instance) { return phase == Phase::prefill ? instance : (1 << 24) + instance; }
  void emit_tiers();
  /// Admission times of rounds whose offload is in flight, by session.
  const std::multimap<long long, double>& pending_offloads() const { return pending_offloads_; }

 private:
  /// Bytes a KV copy's flow carries: `bytes`, and between nodes scaled by min(line, slower) /
  /// min(eff x line, slower) with line = `nics` NICs at line rate, eff = GpuSpec::kv_transfer_efficiency
  /// and slower = `slower_s` (bytes/s of a slower link on the path; 0 = none).
  double wire_bytes(double bytes, bool between_nodes, int nics, double slower_s) const;
  void transfer_done(ReqState* r, double bytes, bool inter_node);
  void demote(const KvStore::Demotion& dm);
  /// The links from a group's endpoint to the spine and back (SimGrid's route, less the
  /// unlimited links), found once per endpoint.
  const std::pair<std::vector<sg4::Link*>, std::vector<sg4::Link*>>& a2a_route(sg4::Host* g);
  /// The check form: the step's inter-node all-to-all bytes as rate-capped background flows.
  void inject_all_to_all(const PoolSpec& pool, int first_gpu, const StepTime& st);
  /// The default form: `holder` holds, on each of its attention-TP groups' NIC and node uplink, in
  /// each direction, `bytes` per GPU over `seconds` (sim/engine/a2a_reservations.hpp); bytes <= 0
  /// or seconds <= 0 holds nothing.
  void reserve_all_to_all(const PoolSpec& pool, int first_gpu, int holder, double bytes, double seconds);
  Engine& e_;
  std::unordered_map<sg4::Host*, std::pair<std::vector<sg4::Link*>, std::vector<sg4::Link*>>> a2a_routes_;
  LinkReservations a2a_held_;
  std::unordered_set<sg4::Host*> a2a_sinks_;  // hosts with a draining receiver (the check form)
  std::multimap<long long, double> pending_offloads_;  // session → admission time (stable iterators)
};

/// The arrival actor and the end of every request.
class Arrivals {
 public:
  explicit Arrivals(Engine& e) : e_(e) {}
  void start();
  /// Ends a request (completed or rejected); a session continues with its next round, if any.
  void end_request(ReqState* r, RequestStatus status, std::string reason);
  void keep_alive();  // the actor's synchronisation objects outlive a horizon stop

 private:
  void loop();
  void admit(Request req);
  void route(ReqState* r);
  bool reject_impossible(ReqState* r);
  void notify() {
    if (cv_) cv_->notify_all();
  }
  struct Later {
    bool operator()(const Request& a, const Request& b) const { return a.arrival_s != b.arrival_s ? a.arrival_s > b.arrival_s : a.id > b.id; }
  };
  Engine& e_;
  std::vector<Request> followups_;  // next rounds of sessions: a min-heap on (arrival, id) via Later
  std::vector<PrefillCandidate> cand_;  // route()'s candidates and prefix hits (kept: no allocation per arrival)
  std::vector<long long> hits_;
  BlockIdSet seen_blocks_;  // trace-level reuse, up to RunOptions::trace_reuse_max_block_ids ids
  sg4::MutexPtr mutex_;
  sg4::ConditionVariablePtr cv_;
};

struct Engine {
  Engine(DeploymentSpec dd, std::unique_ptr<RequestSource> src, std::shared_ptr<const CostModel> c, EventSink& s, RunOptions o);

  // configuration (read-only after construction)
  DeploymentSpec d;
  std::unique_ptr<RequestSource> source;
  std::shared_ptr<const CostModel> cost;
  EventSink& sink;
  RunOptions opt;
  GpuMemoryPlan pmem, dmem;
  std::unique_ptr<StepCostModel> pstep, dstep;
  std::unique_ptr<Router> prefill_router, decode_router;
  double block_bytes = 0, checkpoint_bytes = 0;
  bool exact_state_resume = false;  // per-sequence state: a stored history is resumable only at its end

  // state
  Platform platform;
  RunTotals totals;
  std::unordered_map<std::uint64_t, std::unique_ptr<ReqState>> live;
  std::unique_ptr<KvStore> store;
  std::exception_ptr source_error;

  // rooms
  FlowPool flows{*this};
  SessionLedger sessions{*this};
  PrefillPool prefill{*this};
  DecodePool decode{*this};
  KvMover mover{*this};
  Arrivals arrivals{*this};

  double now() const { return sg4::Engine::get_clock(); }
  int node_of(int gpu) const { return gpu / d.gpu.gpus_per_node; }
  /// KV bytes per GPU of `tokens` cached tokens on a prefill rank (the per-sequence state excluded).
  double cached_bytes(long long tokens) const;
  void build();
  RunTotals finish();
};

}  // namespace servesim
