#include "sim/simulation.hpp"

#include "costmodels/memory.hpp"
#include "sim/batch_scheduler.hpp"
#include "sim/kv_store.hpp"
#include "sim/prefix_cache.hpp"
#include "sim/request_state.hpp"
#include "sim/router.hpp"
#include "topology/platform.hpp"
#include "workloads/blocks.hpp"

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cmath>
#include <deque>
#include <exception>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace sg4 = simgrid::s4u;

namespace servesim {

struct Simulation::Impl {
  // ---- configuration (read-only after construction)
  DeploymentSpec d;
  std::unique_ptr<RequestSource> source;
  std::shared_ptr<const CostModel> cost;
  EventSink& sink;
  RunOptions opt;
  GpuMemoryPlan pmem, dmem;
  std::unique_ptr<StepCostModel> pstep, dstep;
  std::unique_ptr<Router> prefill_router, decode_router;
  std::unique_ptr<BatchScheduler> scheduler;
  double block_bytes = 0, checkpoint_bytes = 0;
  bool exact_state_resume = false;  // per-sequence state: a stored history is resumable only at its end

  // ---- SimGrid
  Platform platform;

  // ---- instances
  struct PrefillRank {
    std::deque<ReqState*> waiting, running;
    double queued_tokens = 0;
    double capacity = 0, reserved = 0;  // KV bytes per GPU
    std::unique_ptr<PrefixCache> cache;
    std::vector<PrefillItem> items;
  };
  struct PrefillInst {
    int id = 0, first_gpu = 0;
    std::vector<PrefillRank> ranks;
    sg4::ActorPtr actor;
    bool idle = false;
    std::vector<sg4::CommPtr> a2a_flows;  // this step's all-to-all on the fabric (all_to_all_on_fabric)
  };
  struct DecodeRank {
    std::deque<ReqState*> ready;    // admitted, waiting for a batch slot
    std::vector<ReqState*> active;  // in the running batch
    double capacity = 0, reserved = 0;
    int admitted = 0;  // ready + active + in transfer
  };
  struct DecodeInst {
    int id = 0, first_gpu = 0;
    std::vector<DecodeRank> ranks;
    sg4::ActorPtr actor;
    bool idle = false;
    std::vector<sg4::CommPtr> a2a_flows;  // this step's all-to-all on the fabric (all_to_all_on_fabric)
    // event-driven continuous batching: a sequence's finishing step is known when it joins, so a
    // step costs O(log n) bookkeeping instead of O(n)
    long long step = 0, active = 0;
    std::vector<std::tuple<long long, std::uint64_t, ReqState*>> finish;  // min-heap on (step, id)
    // the step time is re-evaluated when the batch's sequence count or total context (kept exactly,
    // incrementally) has moved by more than kStepReuse since the last evaluation: decode step times
    // change slowly with both
    bool evaluated = false;
    StepTime last;
    double ctx = 0, ctx_at_eval = 0;  // Σ context of the next step's tokens
    long long active_at_eval = 0;
  };
  static constexpr double kStepReuse = 0.01;
  std::vector<PrefillInst> prefill;
  std::vector<DecodeInst> decode;
  std::vector<std::vector<SeqWork>> pwork, dwork;

  // ---- requests and sessions
  struct SessionState {
    double start_s = 0, last_done_s = -1, gpu_s = 0, decode_s = 0, idle_s = 0;
    int rounds = 0;
  };
  std::unordered_map<std::uint64_t, std::unique_ptr<ReqState>> live;
  std::unordered_map<long long, SessionState> sessions;
  std::deque<ReqState*> pending_decode;  // prefilled, waiting for KV room on a decode rank
  struct Later {
    bool operator()(const Request& a, const Request& b) const { return a.arrival_s != b.arrival_s ? a.arrival_s > b.arrival_s : a.id > b.id; }
  };
  std::vector<Request> followups;  // next rounds of sessions: a min-heap on (arrival, id) via Later
  std::unordered_set<std::uint64_t> seen_blocks;                        // trace-level reuse
  std::unique_ptr<KvStore> store;
  std::multimap<long long, double> pending_offloads;  // session → admission time of a round being offloaded (stable iterators)
  sg4::MutexPtr arrivals_mutex;
  sg4::ConditionVariablePtr arrivals_cv;
  std::exception_ptr source_error;
  RunTotals totals;

  Impl(DeploymentSpec dd, std::unique_ptr<RequestSource> src, std::shared_ptr<const CostModel> c, EventSink& s, RunOptions o)
      : d(std::move(dd)), source(std::move(src)), cost(std::move(c)), sink(s), opt(std::move(o)) {
    pmem = plan_gpu_memory(d, d.prefill);
    dmem = plan_gpu_memory(d, d.decode);
    const FabricParams fabric = fabric_params(d.cluster, d.gpu);
    pstep = std::make_unique<StepCostModel>(d.model, cost, fabric, instance_shape(d.prefill), d.prefill.step_overhead_s);
    dstep = std::make_unique<StepCostModel>(d.model, cost, fabric, instance_shape(d.decode), d.decode.step_overhead_s);
    prefill_router = make_router(d.router);
    decode_router = make_router(d.decode_router);
    scheduler = make_batch_scheduler(d.batch_scheduler);
    block_bytes = kv_footprint(d.model, d.prefill.attn_tp).per_token_bytes * d.prefix_cache.block_tokens;
    checkpoint_bytes = resume_state_bytes(d.model, d.prefill.attn_tp, d.prefix_cache.block_tokens);
    exact_state_resume = kv_footprint(d.model, 1).per_seq_bytes > 0;
    if (d.kv_tiers.enabled) store = std::make_unique<KvStore>(d.kv_tiers, d.cluster.nodes, [this] { return make_eviction_policy(d.eviction); });
  }

  // ------------------------------------------------------------------ helpers
  double now() const { return sg4::Engine::get_clock(); }
  double kv_prompt(const Request& r) const { return kv_bytes(d.model, r.input_tokens, d.prefill.attn_tp); }
  double kv_whole(const Request& r) const { return kv_bytes(d.model, r.input_tokens + r.output_tokens, d.decode.attn_tp); }
  double cached_bytes(long long tokens) const {
    return kv_bytes(d.model, tokens, d.prefill.attn_tp) - kv_bytes(d.model, 0, d.prefill.attn_tp);
  }
  int node_of(int gpu) const { return gpu / d.gpu.gpus_per_node; }
  static void wake(sg4::ActorPtr& a, bool& idle) {
    if (idle && a) {
      idle = false;
      a->resume();
    }
  }
  PrefillRank& prank(const ReqState* r) { return prefill[static_cast<size_t>(r->rec.prefill_instance)].ranks[static_cast<size_t>(r->prefill_rank)]; }
  int prefill_gpu0(const ReqState* r) const {
    return prefill[static_cast<size_t>(r->rec.prefill_instance)].first_gpu + r->prefill_rank * d.prefill.attn_tp;
  }

  // Flows run in a pool of long-lived worker actors (one blocking SimGrid communication each, then
  // the completion callback in that actor), so that millions of flows do not create millions of
  // actors. A worker with nothing to do suspends itself until the next submit.
  struct FlowWorker {
    sg4::ActorPtr actor;
    std::function<void()> job;
  };
  std::vector<std::unique_ptr<FlowWorker>> workers;
  std::vector<FlowWorker*> idle_workers;

  void submit_flow(sg4::Host* src, sg4::Host* dst, double bytes, std::function<void()> done) {
    auto job = [src, dst, bytes, done = std::move(done)] {
      sg4::Comm::sendto(src, dst, static_cast<uint64_t>(std::max(1.0, bytes)));
      done();
    };
    if (!idle_workers.empty()) {
      FlowWorker* w = idle_workers.back();
      idle_workers.pop_back();
      w->job = std::move(job);
      w->actor->resume();
      return;
    }
    workers.push_back(std::make_unique<FlowWorker>());
    FlowWorker* w = workers.back().get();
    w->job = std::move(job);
    w->actor = sg4::Actor::create("flow" + std::to_string(workers.size()), platform.frontend, [this, w] {
      for (;;) {
        if (w->job) {
          auto j = std::move(w->job);
          w->job = nullptr;
          j();
          continue;
        }
        idle_workers.push_back(w);
        sg4::this_actor::suspend();
      }
    });
    w->actor->daemonize();
  }

  // all_to_all_on_fabric: the step's inter-node all-to-all bytes as background flows from each
  // attention-TP group to the fabric and back, rate-capped to last the step's all-to-all time. They
  // only load the links (KV transfers, offloads and load-backs share them); the step time is the
  // closed form. Traffic of the previous step that has not drained is cancelled.
  void inject_all_to_all(const PoolSpec& pool, int first_gpu, const StepTime& st, std::vector<sg4::CommPtr>& flows) {
    for (auto& c : flows)
      if (!c->test()) c->cancel();
    flows.clear();
    if (!pool.all_to_all_on_fabric || pool.ep <= d.gpu.gpus_per_node || st.a2a_inter_bytes_gpu <= 0 || st.comm_total_s <= 0) return;
    const double bytes = st.a2a_inter_bytes_gpu * pool.attn_tp;  // a TP group's NIC bytes, each direction
    const double rate = bytes / st.comm_total_s;
    for (int r = 0; r < pool.dp(); ++r) {
      sg4::Host* g = platform.endpoint(first_gpu + r * pool.attn_tp);
      for (auto [a, b] : {std::pair{g, platform.spine}, std::pair{platform.spine, g}}) {
        // the rate must be set before both ends are: setting the destination starts the comm
        flows.push_back(sg4::Comm::sendto_init()->set_payload_size(static_cast<uint64_t>(bytes))->set_rate(rate));
        flows.back()->set_source(a);
        flows.back()->set_destination(b);
      }
    }
  }

  void emit_memory(Role role, int inst) {
    MemoryEvent e;
    e.role = role, e.instance = inst, e.t_s = now();
    double sum = 0, mx = 0;
    size_t n = 0;
    if (role == Role::prefill) {
      for (const auto& r : prefill[static_cast<size_t>(inst)].ranks) {
        const double u = r.reserved + (r.cache ? r.cache->bytes() : 0.0);
        sum += u, mx = std::max(mx, u), ++n;
      }
    } else {
      for (const auto& r : decode[static_cast<size_t>(inst)].ranks) sum += r.reserved, mx = std::max(mx, r.reserved), ++n;
    }
    e.kv_bytes_mean = sum / static_cast<double>(n);
    e.kv_bytes_max = mx;
    sink.on_memory(e);
  }
  void emit_tiers() {
    if (store) sink.on_tier({now(), store->bytes(KvStore::Tier::l2), store->bytes(KvStore::Tier::l3)});
  }

  void notify_arrivals() {
    if (arrivals_cv) arrivals_cv->notify_all();
  }

  void end_session(long long id, RequestStatus status) {
    auto it = sessions.find(id);
    if (it == sessions.end()) return;
    const SessionState& s = it->second;
    SessionRecord rec;
    rec.session = id, rec.status = status, rec.rounds = s.rounds, rec.start_s = s.start_s;
    rec.end_s = status == RequestStatus::in_flight ? now() : s.last_done_s;
    rec.gpu_s = s.gpu_s, rec.decode_s = s.decode_s, rec.idle_s = s.idle_s;
    sink.on_session(rec);
    sessions.erase(it);
    if (store && store->holds(id)) {
      store->release(id, now());  // the session will not come back (a demotion in flight is cancelled)
      emit_tiers();
    }
  }

  // Ends a request (completed or rejected). A session continues with its next round, if any.
  void end_request(ReqState* r, RequestStatus status, std::string reason) {
    r->phase = ReqPhase::done;
    r->rec.status = status;
    r->rec.reason = std::move(reason);
    sink.on_request(r->rec);
    if (status == RequestStatus::completed) ++totals.completed;
    if (status == RequestStatus::rejected) ++totals.rejected;
    if (r->req.session >= 0) {
      SessionState& s = sessions[r->req.session];
      if (status == RequestStatus::completed) {
        s.last_done_s = now();
        if (r->rec.first_token_s >= 0) s.decode_s += now() - r->rec.first_token_s;
      }
      if (status != RequestStatus::completed) r->req.last_round = true;  // a rejected round ends its session
      std::optional<Request> next;
      try {
        next = source->follow_up(r->req, now());
      } catch (...) {
        if (!source_error) source_error = std::current_exception();
      }
      if (r->req.last_round) end_session(r->req.session, status);
      if (next) {
        followups.push_back(std::move(*next));
        std::push_heap(followups.begin(), followups.end(), Later{});
        notify_arrivals();
      }
    }
    live.erase(r->req.id);  // frees r
    if (live.empty()) notify_arrivals();
  }

  // ------------------------------------------------------------------ build
  void build() {
    configure_network_model();
    const int per_node = d.gpu.gpus_per_node;
    std::vector<GpuGroup> groups;  // attention-TP groups: each moves its KV as one flow
    {
      int g = 0;
      for (int i = 0; i < d.prefill.instances; ++i, g += d.prefill.ep)
        for (int r = 0; r < d.prefill.dp(); ++r) groups.push_back({g + r * d.prefill.attn_tp, d.prefill.attn_tp});
      g = (g + per_node - 1) / per_node * per_node;
      for (int i = 0; i < d.decode.instances; ++i, g += d.decode.ep)
        for (int r = 0; r < d.decode.dp(); ++r) groups.push_back({g + r * d.decode.attn_tp, d.decode.attn_tp});
    }
    platform = build_platform(d.cluster, d.gpu, d.kv_tiers.storage_bytes_per_s > 0 ? d.kv_tiers.storage_bytes_per_s : 25e9,
                              d.kv_tiers.storage_latency_s, groups);
    int g = 0;
    for (int i = 0; i < d.prefill.instances; ++i) {
      PrefillInst p;
      p.id = i, p.first_gpu = g;
      g += d.prefill.ep;
      for (int r = 0; r < d.prefill.dp(); ++r) {
        PrefillRank pr;
        pr.capacity = pmem.kv_budget;
        if (d.prefix_cache.enabled)
          pr.cache = std::make_unique<PrefixCache>(d.prefix_cache.block_tokens, block_bytes, checkpoint_bytes, make_eviction_policy(d.eviction));
        p.ranks.push_back(std::move(pr));
      }
      prefill.push_back(std::move(p));
    }
    g = (g + per_node - 1) / per_node * per_node;  // decode pool starts on a node boundary
    for (int i = 0; i < d.decode.instances; ++i) {
      DecodeInst q;
      q.id = i, q.first_gpu = g;
      g += d.decode.ep;
      q.ranks.resize(static_cast<size_t>(d.decode.dp()));
      for (auto& r : q.ranks) r.capacity = dmem.kv_budget;
      decode.push_back(std::move(q));
    }
    pwork.resize(static_cast<size_t>(d.prefill.dp()));
    dwork.resize(static_cast<size_t>(d.decode.dp()));
    for (auto& p : prefill) {
      p.actor = sg4::Actor::create("prefill" + std::to_string(p.id), platform.gpus[static_cast<size_t>(p.first_gpu)], [this, &p] { prefill_loop(p); });
      p.actor->daemonize();
    }
    for (auto& q : decode) {
      q.actor = sg4::Actor::create("decode" + std::to_string(q.id), platform.gpus[static_cast<size_t>(q.first_gpu)], [this, &q] { decode_loop(q); });
      q.actor->daemonize();
    }
    arrivals_mutex = sg4::Mutex::create();
    arrivals_cv = sg4::ConditionVariable::create();
    sg4::Actor::create("arrivals", platform.frontend, [this] { arrival_loop(); });
  }

  // ------------------------------------------------------------------ arrivals and routing
  void arrival_loop() {
    std::unique_lock lock(*arrivals_mutex);
    std::optional<Request> open;
    bool open_done = false;
    const double inf = std::numeric_limits<double>::infinity();
    const double horizon = opt.horizon_s > 0 ? opt.horizon_s : inf;
    for (;;) {
      if (!open && !open_done) {
        try {
          open = source->next();
        } catch (...) {
          source_error = std::current_exception();
        }
        if (!open) open_done = true;
      }
      const double t_open = open ? open->arrival_s : inf;
      const double t_follow = followups.empty() ? inf : followups.front().arrival_s;
      const double t = std::min(t_open, t_follow);
      if (source_error) break;
      if (t > horizon || t == inf) {
        // nothing (more) arrives before the horizon: wait for running work, or a follow-up, to end
        if (live.empty() && (t == inf || followups.empty() || t_follow > horizon) && (open_done || t_open > horizon)) break;
        arrivals_cv->wait(lock);
        continue;
      }
      if (t > now()) {
        arrivals_cv->wait_until(lock, t);
        continue;
      }
      Request req;
      if (t_follow < t_open || (t_follow == t_open && followups.front().id < open->id)) {
        std::pop_heap(followups.begin(), followups.end(), Later{});
        req = std::move(followups.back());
        followups.pop_back();
      } else {
        req = std::move(*open);
        open.reset();
      }
      admit_arrival(std::move(req));
    }
  }

  long long store_tokens_for(const Request& r) const {
    if (!store || r.session < 0) return 0;
    const KvStore::Object* o = store->find(r.session);
    if (!o) return 0;
    // a stored history with per-sequence state (KDA, windows) resumes only at its exact end
    const long long usable = exact_state_resume ? (r.history_tokens >= o->tokens ? o->tokens : 0) : std::min(o->tokens, r.history_tokens);
    return std::min(usable, r.input_tokens - 1);
  }

  void admit_arrival(Request req) {
    if (d.prefix_cache.enabled && req.block_tokens > 0 && req.block_tokens != d.prefix_cache.block_tokens)
      remap_blocks(req, d.prefix_cache.block_tokens);  // the trace's ids at the cache's block size
    auto owned = std::make_unique<ReqState>();
    ReqState* r = owned.get();
    r->req = std::move(req);
    r->rec.id = r->req.id;
    r->rec.arrival_s = now();
    r->rec.input_tokens = r->req.input_tokens;
    r->rec.output_tokens = r->req.output_tokens;
    r->rec.session = r->req.session;
    r->rec.round = r->req.round;
    live.emplace(r->req.id, std::move(owned));
    ++totals.arrivals;
    // the workload's own reuse: blocks an earlier arrival carried (unlimited cache, arrival order)
    if (r->req.session < 0) {  // (sessions reuse their history by construction; not tracked per block)
      for (auto h : r->req.block_hashes) totals.trace_reuse_blocks += !seen_blocks.insert(h).second;
      totals.trace_blocks += static_cast<long long>(r->req.block_hashes.size());
    }
    if (r->req.session >= 0) {
      auto [it, fresh] = sessions.try_emplace(r->req.session);
      SessionState& s = it->second;
      if (fresh) s.start_s = now(), ++totals.sessions;
      else if (s.last_done_s >= 0) s.idle_s += now() - s.last_done_s;
      ++s.rounds;
    }
    // requests that can never run are rejected now, with the reason
    const long long ctx = r->req.input_tokens + r->req.output_tokens;
    if (ctx > d.model.max_context_tokens) {
      end_request(r, RequestStatus::rejected, "context " + std::to_string(ctx) + " tokens exceeds the model's " + std::to_string(d.model.max_context_tokens));
      return;
    }
    r->kv_prompt_bytes = kv_prompt(r->req);  // computed once per request
    r->kv_whole_bytes = kv_whole(r->req);
    if (r->kv_prompt_bytes > pmem.kv_budget) {
      end_request(r, RequestStatus::rejected, "prompt KV exceeds a prefill rank's KV budget");
      return;
    }
    if (r->kv_whole_bytes > dmem.kv_budget) {
      end_request(r, RequestStatus::rejected, "prompt+output KV exceeds a decode rank's KV budget");
      return;
    }
    const long long from_store = store_tokens_for(r->req);
    std::vector<PrefillCandidate> cand;
    // when the store holds the session's whole history, no L1 cache can offer more (the rest of
    // the prompt is new): skip the lookups
    const bool cache_aware = d.router == "cache_aware" && !(from_store > 0 && from_store >= r->req.history_tokens);
    for (auto& p : prefill)
      for (size_t k = 0; k < p.ranks.size(); ++k) {
        const auto& pr = p.ranks[k];
        const long long hit = cache_aware && pr.cache ? pr.cache->match(r->req).tokens : 0;
        cand.push_back({p.id, static_cast<int>(k), pr.queued_tokens, std::max(hit, from_store)});
      }
    const PrefillCandidate& c = cand[prefill_router->pick_prefill(r->req, cand)];
    PrefillInst& p = prefill[static_cast<size_t>(c.instance)];
    PrefillRank& pr = p.ranks[static_cast<size_t>(c.rank)];
    r->rec.prefill_instance = p.id;
    r->prefill_rank = c.rank;
    pr.waiting.push_back(r);
    pr.queued_tokens += static_cast<double>(r->req.input_tokens);
    wake(p.actor, p.idle);
  }

  // ------------------------------------------------------------------ prefill
  bool admit_prefill(PrefillRank& pr, ReqState* r) {
    const long long from_store = store_tokens_for(r->req);
    const bool store_covers = from_store > 0 && from_store >= r->req.history_tokens;  // L1 cannot offer more
    const PrefixMatch m = pr.cache && !store_covers ? pr.cache->match(r->req) : PrefixMatch{};
    const bool load = from_store > m.tokens;
    const long long hit = load ? 0 : m.tokens;
    const int pin = load ? 0 : m.pin_blocks;
    const double need = r->kv_prompt_bytes - (hit > 0 ? cached_bytes(hit) : 0.0);
    if (pr.cache) pr.cache->pin(r->req, pin);
    double free = pr.capacity - pr.reserved - (pr.cache ? pr.cache->bytes() : 0.0);
    // evict only when that makes the request fit (SGLang's rule): otherwise the cache would be
    // flushed for nothing while the queue head waits
    if (free < need && pr.cache && free + pr.cache->evictable_bytes() >= need) free += pr.cache->evict(need - free);
    if (free < need) {
      if (pr.cache) pr.cache->unpin(r->req, pin, now());
      return false;
    }
    pr.reserved += need;
    r->kv_prefill_bytes = need;
    r->pinned_blocks = pin;
    r->rec.admit_s = now();
    r->phase = ReqPhase::prefill;
    if (pr.cache && !store_covers) {  // an L1 lookup was made
      totals.prefix_lookup_blocks += static_cast<long long>(r->req.block_hashes.size());
      totals.prefix_hit_blocks += m.present_blocks;
    }
    totals.prompt_tokens_admitted += r->req.input_tokens;
    if (load) {
      start_load(r, from_store);
    } else {
      r->prefilled = hit;
      r->rec.cached_tokens = hit;
      totals.tokens_l1 += hit;
      pr.queued_tokens -= static_cast<double>(hit);
      // a stored history this round does not use is stale now (unless it is being loaded for
      // another round of the same session, which cannot happen: rounds are sequential)
      if (store && r->req.session >= 0 && store->holds(r->req.session)) {
        store->release(r->req.session, now());
        emit_tiers();
      }
    }
    return true;
  }

  // Load-back of a session's stored KV (L2 host DRAM or L3 storage of some node) into the prefill
  // rank's GPUs: one flow per attention-TP rank (each needs the replicated caches and its share of
  // the states). The request joins the batch when the flows end.
  void start_load(ReqState* r, long long tokens) {
    const KvStore::Object o = store->take_for_load(r->req.session);
    r->loading = true;
    r->rec.load_start_s = now();
    r->rec.load_tier = static_cast<int>(o.tier);
    sg4::Host* src = o.tier == KvStore::Tier::l2 ? platform.cpus[static_cast<size_t>(o.node)] : platform.storage[static_cast<size_t>(o.node)];
    const int tp = d.prefill.attn_tp;
    const double bytes = kv_bytes(d.model, tokens, tp) * tp;  // every TP rank needs its copy
    (o.tier == KvStore::Tier::l2 ? totals.load_l2_bytes : totals.load_l3_bytes) += bytes;
    ++(o.tier == KvStore::Tier::l2 ? totals.loads_l2 : totals.loads_l3);
    submit_flow(src, platform.endpoint(prefill_gpu0(r)), bytes, [this, r, tokens, tier = o.tier] {
      store->release(r->req.session, now());
      emit_tiers();
      r->loading = false;
      r->rec.load_end_s = now();
      r->prefilled = tokens;
      r->rec.cached_tokens = tokens;
      r->rec.loaded_tokens = tokens;
      (tier == KvStore::Tier::l2 ? totals.tokens_l2 : totals.tokens_l3) += tokens;
      PrefillRank& pr = prank(r);
      pr.queued_tokens -= static_cast<double>(tokens);
      PrefillInst& p = prefill[static_cast<size_t>(r->rec.prefill_instance)];
      wake(p.actor, p.idle);
    });
  }

  void prefill_loop(PrefillInst& p) {
    for (;;) {
      bool any = false;
      for (auto& pr : p.ranks) {
        pr.items.clear();
        scheduler->form_prefill_batch(pr.running, pr.waiting, d.prefill.max_batch_tokens, d.prefill.chunk_tokens,
                                      [&](ReqState* r) { return admit_prefill(pr, r); }, pr.items);
        any |= !pr.items.empty();
      }
      if (!any) {
        p.idle = true;
        sg4::this_actor::suspend();
        continue;
      }
      emit_memory(Role::prefill, p.id);
      long long seqs = 0, tokens = 0;
      const double start = now();
      for (size_t k = 0; k < p.ranks.size(); ++k) {
        pwork[k].clear();
        for (const auto& it : p.ranks[k].items) {
          if (it.req->rec.prefill_start_s < 0) it.req->rec.prefill_start_s = start;
          pwork[k].push_back({it.tokens, it.req->prefilled, it.req->prefilled + it.tokens == it.req->req.input_tokens});
          ++seqs, tokens += it.tokens;
        }
      }
      const StepTime st = pstep->step(pwork, Phase::prefill);
      inject_all_to_all(d.prefill, p.first_gpu, st, p.a2a_flows);
      sg4::this_actor::sleep_for(st.total_s);
      ++totals.prefill_steps;
      sink.on_step({Role::prefill, p.id, start, now(), seqs, tokens, st});
      for (auto& pr : p.ranks)
        for (const auto& it : pr.items) {
          ReqState* r = it.req;
          r->prefilled += it.tokens;
          pr.queued_tokens -= static_cast<double>(it.tokens);
          if (r->remaining_prefill() == 0) {
            pr.running.erase(std::find(pr.running.begin(), pr.running.end(), r));
            prefill_done(r);
          }
        }
    }
  }

  void release_prefill_kv(ReqState* r) {
    PrefillRank& pr = prank(r);
    pr.reserved -= r->kv_prefill_bytes;
    r->kv_prefill_bytes = 0;
    if (pr.cache) {
      pr.cache->release_and_insert(r->req, r->pinned_blocks, now());
      const double over = pr.reserved + pr.cache->bytes() - pr.capacity;
      if (over > 0) pr.cache->evict(over);
    }
    emit_memory(Role::prefill, r->rec.prefill_instance);
    PrefillInst& p = prefill[static_cast<size_t>(r->rec.prefill_instance)];
    wake(p.actor, p.idle);
  }

  void prefill_done(ReqState* r) {
    r->rec.prefill_end_s = now();
    if (r->req.output_tokens == 1) {  // the prefill's token is the whole answer: no decode
      r->rec.first_token_s = r->rec.done_s = now();
      r->rec.generated_tokens = 1;
      release_prefill_kv(r);  // its KV stays in the rank's prefix cache
      gpu_released(r);
      if (store && r->req.session >= 0 && !r->req.last_round) offload_round(r, prefill_gpu0(r), nullptr);  // a copy of it goes down
      else end_request(r, RequestStatus::completed, "");
      return;
    }
    r->phase = ReqPhase::wait_decode;
    pending_decode.push_back(r);
    dispatch_pending();
  }

  // ------------------------------------------------------------------ decode admission and KV transfer
  void dispatch_pending() {
    std::vector<DecodeCandidate> cand;
    while (!pending_decode.empty()) {
      ReqState* r = pending_decode.front();
      const double need = r->kv_whole_bytes;
      cand.clear();
      for (auto& q : decode)
        for (size_t k = 0; k < q.ranks.size(); ++k) {
          const auto& dr = q.ranks[k];
          const double free = dr.capacity - dr.reserved;
          if (free >= need) cand.push_back({q.id, static_cast<int>(k), free, dr.admitted});
        }
      if (cand.empty()) return;  // FIFO: the head waits for room, and so do those behind it
      const DecodeCandidate& c = cand[decode_router->pick_decode(r->req, cand)];
      DecodeInst& q = decode[static_cast<size_t>(c.instance)];
      DecodeRank& dr = q.ranks[static_cast<size_t>(c.rank)];
      dr.reserved += need;
      ++dr.admitted;
      r->kv_decode_bytes = need;
      r->rec.decode_instance = q.id;
      r->decode_rank = c.rank;
      pending_decode.pop_front();
      emit_memory(Role::decode, q.id);
      start_transfer(r);
    }
  }

  int decode_gpu0(const ReqState* r) const {
    return decode[static_cast<size_t>(r->rec.decode_instance)].first_gpu + r->decode_rank * d.decode.attn_tp;
  }

  void start_transfer(ReqState* r) {
    r->phase = ReqPhase::transfer;
    r->rec.transfer_start_s = now();
    const int tp_d = d.decode.attn_tp;
    const int src0 = prefill_gpu0(r), dst0 = decode_gpu0(r);
    // every decode TP rank needs the replicated latent/compressed KV and its share of the sharded
    // recurrent states: one flow between the two TP groups' endpoints carries all of it
    const double bytes = kv_bytes(d.model, r->req.input_tokens, tp_d) * tp_d;
    const bool inter = node_of(src0) != node_of(dst0);
    submit_flow(platform.endpoint(src0), platform.endpoint(dst0), bytes, [this, r, bytes, inter] { transfer_done(r, bytes, inter); });
  }

  void transfer_done(ReqState* r, double bytes, bool inter_node) {
    totals.transfer_bytes += bytes;
    sink.on_transfer({r->req.id, r->rec.prefill_instance, r->rec.decode_instance, inter_node, r->rec.transfer_start_s, now(), bytes});
    release_prefill_kv(r);
    r->phase = ReqPhase::decode;
    r->rec.first_token_s = now();
    r->rec.generated_tokens = 1;
    DecodeInst& q = decode[static_cast<size_t>(r->rec.decode_instance)];
    q.ranks[static_cast<size_t>(r->decode_rank)].ready.push_back(r);
    wake(q.actor, q.idle);
  }

  // The round's KV left the GPUs: account its GPU residency to the session.
  void gpu_released(long long session, double admit_s) {
    if (session < 0) return;
    auto it = sessions.find(session);
    if (it != sessions.end() && admit_s >= 0) it->second.gpu_s += now() - admit_s;
  }
  void gpu_released(const ReqState* r) { gpu_released(r->req.session, r->rec.admit_s); }
  // what a finished round's offload needs after its ReqState is gone
  struct Held {
    int decode_instance, decode_rank;
    double kv_bytes;
    long long session;
    double admit_s;
  };

  // ------------------------------------------------------------------ decode
  void free_decode_kv(int instance, int rank, double bytes) {
    DecodeInst& q = decode[static_cast<size_t>(instance)];
    DecodeRank& dr = q.ranks[static_cast<size_t>(rank)];
    dr.reserved -= bytes;
    --dr.admitted;
    emit_memory(Role::decode, q.id);
    dispatch_pending();
  }

  void finish_round(ReqState* r) {
    r->rec.done_s = now();
    const bool offload = store && r->req.session >= 0 && !r->req.last_round;
    if (!offload) {
      free_decode_kv(r->rec.decode_instance, r->decode_rank, r->kv_decode_bytes);
      r->kv_decode_bytes = 0;
      gpu_released(r);
      end_request(r, RequestStatus::completed, "");
      return;
    }
    const Held held{r->rec.decode_instance, r->decode_rank, r->kv_decode_bytes, r->req.session, r->rec.admit_s};
    offload_round(r, decode_gpu0(r), [this, held] {
      free_decode_kv(held.decode_instance, held.decode_rank, held.kv_bytes);
      gpu_released(held.session, held.admit_s);
    });
  }

  // Ends round r (completed) and offloads its session's history (prompt + output) from the TP group
  // at `src_gpu0` to that node's host DRAM while the session waits for its next round: one copy,
  // read from the group's GPUs in parallel over PCIe. `release` runs when the copy is done (frees
  // the GPU KV).
  void offload_round(ReqState* r, int src_gpu0, std::function<void()> release) {
    const long long tokens = r->req.input_tokens + r->req.output_tokens;
    const double total = kv_bytes(d.model, tokens, 1);
    const int node = node_of(src_gpu0);
    const long long session = r->req.session;
    ++totals.offloads;
    totals.offload_bytes += total;
    auto pending = pending_offloads.emplace(session, r->rec.admit_s);
    end_request(r, RequestStatus::completed, "");  // done for the user; its KV leaves the GPU later
    submit_flow(platform.endpoint(src_gpu0), platform.cpus[static_cast<size_t>(node)], total,
                [this, release = std::move(release), pending, session, tokens, total, node] {
                  pending_offloads.erase(pending);
                  if (release) release();
                  if (!sessions.count(session)) {  // the session ended meanwhile: nothing to keep
                    totals.offload_abandoned_bytes += total;
                    return;
                  }
                  for (const auto& dm : store->put_l2(session, tokens, total, node, now())) start_demotion(dm);
                  emit_tiers();
                });
  }

  void start_demotion(const KvStore::Demotion& dm) {
    totals.demote_bytes += dm.bytes;
    submit_flow(platform.cpus[static_cast<size_t>(dm.node)], platform.storage[static_cast<size_t>(dm.node)], dm.bytes, [this, dm] {
      store->demoted(dm.session, dm.gen, now());
      emit_tiers();
    });
  }

  void decode_loop(DecodeInst& q) {
    auto later = [](const auto& a, const auto& b) { return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) > std::get<0>(b) : std::get<1>(a) > std::get<1>(b); };
    for (;;) {
      for (auto& dr : q.ranks)
        while (!dr.ready.empty() && static_cast<int>(dr.active.size()) < d.decode.max_running) {
          ReqState* r = dr.ready.front();
          dr.ready.pop_front();
          r->active_index = static_cast<int>(dr.active.size());
          r->start_step = q.step;
          dr.active.push_back(r);
          // it finishes at the end of the step where generated reaches output
          q.finish.emplace_back(q.step + r->req.output_tokens - r->rec.generated_tokens - 1, r->req.id, r);
          std::push_heap(q.finish.begin(), q.finish.end(), later);
          ++q.active;
          q.ctx += static_cast<double>(r->req.input_tokens + r->rec.generated_tokens);
        }
      if (q.active == 0) {
        q.idle = true;
        sg4::this_actor::suspend();
        continue;
      }
      const bool moved = std::abs(static_cast<double>(q.active - q.active_at_eval)) > kStepReuse * static_cast<double>(q.active_at_eval) ||
                         std::abs(q.ctx - q.ctx_at_eval) > kStepReuse * q.ctx_at_eval;
      if (!q.evaluated || moved) {
        for (size_t k = 0; k < q.ranks.size(); ++k) {
          dwork[k].clear();
          for (ReqState* r : q.ranks[k].active)
            dwork[k].push_back({1, r->req.input_tokens + r->rec.generated_tokens - 1 + (q.step - r->start_step), true});
        }
        q.last = dstep->step(dwork, Phase::decode);
        q.ctx_at_eval = q.ctx, q.active_at_eval = q.active, q.evaluated = true;
      }
      const double start = now();
      inject_all_to_all(d.decode, q.first_gpu, q.last, q.a2a_flows);
      sg4::this_actor::sleep_for(q.last.total_s);
      ++totals.decode_steps;
      sink.on_step({Role::decode, q.id, start, now(), q.active, q.active, q.last});
      ++q.step;
      q.ctx += static_cast<double>(q.active);
      while (!q.finish.empty() && std::get<0>(q.finish.front()) < q.step) {
        std::pop_heap(q.finish.begin(), q.finish.end(), later);
        ReqState* r = std::get<2>(q.finish.back());
        q.finish.pop_back();
        DecodeRank& dr = q.ranks[static_cast<size_t>(r->decode_rank)];
        ReqState* moved = dr.active.back();
        dr.active[static_cast<size_t>(r->active_index)] = moved;
        moved->active_index = r->active_index;
        dr.active.pop_back();
        --q.active;
        q.ctx -= static_cast<double>(r->req.input_tokens + r->rec.generated_tokens + (q.step - r->start_step));
        r->rec.generated_tokens = r->req.output_tokens;
        finish_round(r);
      }
    }
  }

  // tokens generated so far by sequences still decoding (their counters are kept implicitly)
  void settle_decode_counters() {
    for (auto& q : decode)
      for (auto& dr : q.ranks)
        for (ReqState* r : dr.active) r->rec.generated_tokens += q.step - r->start_step;
  }

  // ------------------------------------------------------------------ run
  RunTotals run() {
    std::vector<std::string> args = {"servesim", "--log=root.thres:warning", "--cfg=contexts/stack-size:128"};
    for (const auto& a : opt.simgrid_cfg) args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    int argc = static_cast<int>(argv.size());
    // SimGrid's engine is a process-wide singleton that is never torn down here (see class comment)
    auto* e = new sg4::Engine(&argc, argv.data());
    build();
    if (opt.horizon_s > 0) e->run_until(opt.horizon_s);
    else e->run();
    // Actors may still be blocked at the horizon: like the engine, their synchronisation objects are
    // kept alive for the rest of the process (SimGrid aborts when they are destroyed in use).
    new sg4::MutexPtr(arrivals_mutex);
    new sg4::ConditionVariablePtr(arrivals_cv);
    for (auto& p : prefill) new std::vector<sg4::CommPtr>(std::move(p.a2a_flows));
    for (auto& q : decode) new std::vector<sg4::CommPtr>(std::move(q.a2a_flows));
    totals.end_s = now();
    settle_decode_counters();
    // sessions still open: their rounds in progress (and offloads in flight) hold GPU KV until now
    for (auto& [id, r] : live) {
      auto it = r->req.session >= 0 ? sessions.find(r->req.session) : sessions.end();
      if (it == sessions.end()) continue;
      if (r->rec.admit_s >= 0) it->second.gpu_s += now() - r->rec.admit_s;
      if (r->rec.first_token_s >= 0) it->second.decode_s += now() - r->rec.first_token_s;
    }
    for (const auto& [session, admit] : pending_offloads) {
      auto it = sessions.find(session);
      if (it != sessions.end() && admit >= 0) it->second.gpu_s += now() - admit;
    }
    // whatever did not end is in flight at the end: report each with the phase it was in
    std::vector<ReqState*> rest;
    for (auto& [id, r] : live) rest.push_back(r.get());
    std::sort(rest.begin(), rest.end(), [](const ReqState* a, const ReqState* b) { return a->req.id < b->req.id; });
    for (ReqState* r : rest) {
      r->rec.status = RequestStatus::in_flight;
      r->rec.reason = r->loading ? "loading_kv" : to_string(r->phase);
      sink.on_request(r->rec);
      ++totals.in_flight;
    }
    live.clear();
    std::vector<long long> open_sessions;
    for (const auto& [id, s] : sessions) open_sessions.push_back(id);
    std::sort(open_sessions.begin(), open_sessions.end());
    for (long long id : open_sessions) {
      auto it = sessions.find(id);
      SessionRecord rec;
      rec.session = id, rec.status = RequestStatus::in_flight, rec.rounds = it->second.rounds, rec.start_s = it->second.start_s, rec.end_s = now();
      rec.gpu_s = it->second.gpu_s, rec.decode_s = it->second.decode_s, rec.idle_s = it->second.idle_s;
      sink.on_session(rec);
    }
    sessions.clear();
    if (store) {
      totals.store_held_bytes = store->bytes(KvStore::Tier::l2) + store->bytes(KvStore::Tier::l3);
      totals.store_left_bytes = store->left_bytes();
      totals.store_offloaded_bytes = store->offloaded_bytes();
      totals.store_dropped_bytes = store->dropped_bytes();
      for (const auto& [session, admit] : pending_offloads) (void)admit, ++totals.offloads_in_flight;
    }
    sink.on_end(totals.end_s);
    if (source_error) std::rethrow_exception(source_error);
    return totals;
  }
};

Simulation::Simulation(DeploymentSpec d, std::unique_ptr<RequestSource> source, std::shared_ptr<const CostModel> cost, EventSink& sink,
                       RunOptions options)
    : impl_(std::make_unique<Impl>(std::move(d), std::move(source), std::move(cost), sink, std::move(options))) {}

Simulation::~Simulation() = default;

RunTotals Simulation::run() { return impl_->run(); }
const GpuMemoryPlan& Simulation::prefill_memory() const { return impl_->pmem; }
const GpuMemoryPlan& Simulation::decode_memory() const { return impl_->dmem; }

}  // namespace servesim
