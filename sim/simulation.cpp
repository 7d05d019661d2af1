#include "sim/simulation.hpp"

#include "costmodels/memory.hpp"
#include "sim/batch_scheduler.hpp"
#include "sim/prefix_cache.hpp"
#include "sim/request_state.hpp"
#include "sim/router.hpp"
#include "topology/platform.hpp"

#include <simgrid/s4u.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <exception>
#include <unordered_map>

namespace sg4 = simgrid::s4u;

namespace servesim {

namespace {

// Time-weighted KV occupancy of one DP rank (bytes per GPU).
struct RankKv {
  double capacity = 0;
  double reserved = 0;  // running requests
};

}  // namespace

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

  // ---- SimGrid
  sg4::Engine* engine = nullptr;
  Platform platform;

  // ---- instances
  struct PrefillRank {
    std::deque<ReqState*> waiting, running;
    double queued_tokens = 0;
    RankKv kv;
    std::unique_ptr<PrefixCache> cache;
    std::vector<PrefillItem> items;
  };
  struct PrefillInst {
    int id = 0, first_gpu = 0;
    std::vector<PrefillRank> ranks;
    sg4::ActorPtr actor;
    bool idle = false;
  };
  struct DecodeRank {
    std::deque<ReqState*> ready;     // admitted, waiting for a batch slot
    std::vector<ReqState*> active;   // in the running batch
    RankKv kv;
    int admitted = 0;                // ready + active + in transfer
  };
  struct DecodeInst {
    int id = 0, first_gpu = 0;
    std::vector<DecodeRank> ranks;
    sg4::ActorPtr actor;
    bool idle = false;
  };
  std::vector<PrefillInst> prefill;
  std::vector<DecodeInst> decode;
  std::vector<std::vector<SeqWork>> pwork, dwork;

  // ---- requests
  std::unordered_map<std::uint64_t, std::unique_ptr<ReqState>> live;
  std::deque<ReqState*> pending_decode;  // prefilled, waiting for KV room on a decode rank
  sg4::ActorPtr arrivals_actor;
  bool arrivals_done = false;
  std::exception_ptr source_error;
  RunTotals totals;

  Impl(DeploymentSpec dd, std::unique_ptr<RequestSource> src, std::shared_ptr<const CostModel> c, EventSink& s, RunOptions o)
      : d(std::move(dd)), source(std::move(src)), cost(std::move(c)), sink(s), opt(std::move(o)) {
    pmem = plan_gpu_memory(d, d.prefill);
    dmem = plan_gpu_memory(d, d.decode);
    ClusterSpec cl = d.cluster;
    const FabricParams fabric = fabric_params(cl, d.gpu);
    pstep = std::make_unique<StepCostModel>(d.model, cost, fabric, d.prefill.shape(), d.prefill.step_overhead_s);
    dstep = std::make_unique<StepCostModel>(d.model, cost, fabric, d.decode.shape(), d.decode.step_overhead_s);
    prefill_router = make_router(d.router);
    decode_router = make_router(d.decode_router);
    scheduler = make_batch_scheduler(d.batch_scheduler);
    const KvFootprint fp = kv_footprint(d.model, d.prefill.attn_tp);
    block_bytes = fp.per_token_bytes * d.prefix_cache.block_tokens;
    checkpoint_bytes = resume_state_bytes(d.model, d.prefill.attn_tp, d.prefix_cache.block_tokens);
  }

  // ------------------------------------------------------------------ helpers
  double now() const { return sg4::Engine::get_clock(); }
  double kv_prompt(const Request& r) const { return kv_bytes(d.model, r.input_tokens, d.prefill.attn_tp); }
  double kv_whole(const Request& r) const { return kv_bytes(d.model, r.input_tokens + r.output_tokens, d.decode.attn_tp); }
  double cached_bytes(long long tokens) const {
    return kv_bytes(d.model, tokens, d.prefill.attn_tp) - kv_bytes(d.model, 0, d.prefill.attn_tp);
  }
  static void wake(sg4::ActorPtr& a, bool& idle) {
    if (idle && a) {
      idle = false;
      a->resume();
    }
  }

  void emit_memory(Role role, int inst) {
    MemoryEvent e;
    e.role = role, e.instance = inst, e.t_s = now();
    double sum = 0, mx = 0;
    size_t n = 0;
    if (role == Role::prefill) {
      for (const auto& r : prefill[inst].ranks) {
        const double u = r.kv.reserved + (r.cache ? r.cache->bytes() : 0.0);
        sum += u, mx = std::max(mx, u), ++n;
      }
    } else {
      for (const auto& r : decode[inst].ranks) sum += r.kv.reserved, mx = std::max(mx, r.kv.reserved), ++n;
    }
    e.kv_bytes_mean = sum / static_cast<double>(n);
    e.kv_bytes_max = mx;
    sink.on_memory(e);
  }

  void end_request(ReqState* r, RequestStatus status, std::string reason) {
    r->phase = ReqPhase::done;
    r->rec.status = status;
    r->rec.reason = std::move(reason);
    sink.on_request(r->rec);
    if (status == RequestStatus::completed) ++totals.completed;
    if (status == RequestStatus::rejected) ++totals.rejected;
    live.erase(r->req.id);  // frees r
    if (arrivals_done && live.empty() && arrivals_actor) arrivals_actor->resume();
  }

  // ------------------------------------------------------------------ build
  void build(sg4::Engine& e) {
    engine = &e;
    configure_network_model();
    platform = build_platform(d.cluster, d.gpu);
    const int per_node = d.gpu.gpus_per_node;
    int gpu = 0;
    for (int i = 0; i < d.prefill.instances; ++i) {
      PrefillInst p;
      p.id = i, p.first_gpu = gpu;
      gpu += d.prefill.ep;
      for (int r = 0; r < d.prefill.shape().dp(); ++r) {
        PrefillRank pr;
        pr.kv.capacity = pmem.kv_budget;
        if (d.prefix_cache.enabled)
          pr.cache = std::make_unique<PrefixCache>(d.prefix_cache.block_tokens, block_bytes, checkpoint_bytes, make_eviction_policy(d.eviction));
        p.ranks.push_back(std::move(pr));
      }
      prefill.push_back(std::move(p));
    }
    gpu = (gpu + per_node - 1) / per_node * per_node;  // decode pool starts on a node boundary
    for (int i = 0; i < d.decode.instances; ++i) {
      DecodeInst q;
      q.id = i, q.first_gpu = gpu;
      gpu += d.decode.ep;
      q.ranks.resize(static_cast<size_t>(d.decode.shape().dp()));
      for (auto& r : q.ranks) r.kv.capacity = dmem.kv_budget;
      decode.push_back(std::move(q));
    }
    pwork.resize(static_cast<size_t>(d.prefill.shape().dp()));
    dwork.resize(static_cast<size_t>(d.decode.shape().dp()));
    for (auto& p : prefill) {
      p.actor = sg4::Actor::create("prefill" + std::to_string(p.id), platform.gpus[static_cast<size_t>(p.first_gpu)],
                                   [this, &p] { prefill_loop(p); });
      p.actor->daemonize();
    }
    for (auto& q : decode) {
      q.actor = sg4::Actor::create("decode" + std::to_string(q.id), platform.gpus[static_cast<size_t>(q.first_gpu)],
                                   [this, &q] { decode_loop(q); });
      q.actor->daemonize();
    }
    arrivals_actor = sg4::Actor::create("arrivals", platform.frontend, [this] { arrival_loop(); });
  }

  // ------------------------------------------------------------------ arrivals and routing
  void arrival_loop() {
    std::vector<PrefillCandidate> cand;
    for (;;) {
      std::optional<Request> next;
      try {
        next = source->next();
      } catch (...) {
        source_error = std::current_exception();
        break;
      }
      if (!next) break;
      if (opt.horizon_s > 0 && next->arrival_s > opt.horizon_s) break;
      if (next->arrival_s > now()) sg4::this_actor::sleep_until(next->arrival_s);
      auto owned = std::make_unique<ReqState>();
      ReqState* r = owned.get();
      r->req = std::move(*next);
      r->rec.id = r->req.id;
      r->rec.arrival_s = now();
      r->rec.input_tokens = r->req.input_tokens;
      r->rec.output_tokens = r->req.output_tokens;
      live.emplace(r->req.id, std::move(owned));
      ++totals.arrivals;
      // requests that can never run are rejected now, with the reason
      const long long ctx = r->req.input_tokens + r->req.output_tokens;
      if (ctx > d.model.max_context_tokens) {
        end_request(r, RequestStatus::rejected, "context " + std::to_string(ctx) + " tokens exceeds the model's " +
                                                    std::to_string(d.model.max_context_tokens));
        continue;
      }
      if (kv_prompt(r->req) > pmem.kv_budget) {
        end_request(r, RequestStatus::rejected, "prompt KV exceeds a prefill rank's KV budget");
        continue;
      }
      if (kv_whole(r->req) > dmem.kv_budget) {
        end_request(r, RequestStatus::rejected, "prompt+output KV exceeds a decode rank's KV budget");
        continue;
      }
      cand.clear();
      for (auto& p : prefill)
        for (size_t k = 0; k < p.ranks.size(); ++k) {
          const auto& pr = p.ranks[k];
          const long long hit = pr.cache ? static_cast<long long>(pr.cache->match(r->req)) * d.prefix_cache.block_tokens : 0;
          cand.push_back({p.id, static_cast<int>(k), pr.queued_tokens, hit});
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
    arrivals_done = true;
    if (!live.empty()) sg4::this_actor::suspend();  // resumed by the last request's end
  }

  // ------------------------------------------------------------------ prefill
  bool admit_prefill(PrefillRank& pr, ReqState* r) {
    int blocks = pr.cache ? pr.cache->match(r->req) : 0;
    const long long hit = static_cast<long long>(blocks) * d.prefix_cache.block_tokens;
    const double need = kv_prompt(r->req) - cached_bytes(hit);
    if (pr.cache) pr.cache->pin(r->req, blocks);
    double free = pr.kv.capacity - pr.kv.reserved - (pr.cache ? pr.cache->bytes() : 0.0);
    if (free < need && pr.cache) free += pr.cache->evict(need - free);
    if (free < need) {
      if (pr.cache) pr.cache->unpin(r->req, blocks, now());
      return false;
    }
    pr.kv.reserved += need;
    r->kv_prefill_bytes = need;
    r->pinned_blocks = blocks;
    r->prefilled = hit;
    r->rec.cached_tokens = hit;
    r->rec.prefill_start_s = now();
    r->phase = ReqPhase::prefill;
    pr.queued_tokens -= static_cast<double>(hit);
    if (pr.cache) {
      totals.prefix_lookup_blocks += r->req.input_tokens / d.prefix_cache.block_tokens;
      totals.prefix_hit_blocks += blocks;
    }
    return true;
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
      for (size_t k = 0; k < p.ranks.size(); ++k) {
        pwork[k].clear();
        for (const auto& it : p.ranks[k].items) {
          pwork[k].push_back({it.tokens, it.req->prefilled, it.req->prefilled + it.tokens == it.req->req.input_tokens});
          ++seqs, tokens += it.tokens;
        }
      }
      const StepTime st = pstep->step(pwork, Phase::prefill);
      const double start = now();
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
    PrefillInst& p = prefill[static_cast<size_t>(r->rec.prefill_instance)];
    PrefillRank& pr = p.ranks[static_cast<size_t>(r->prefill_rank)];
    pr.kv.reserved -= r->kv_prefill_bytes;
    r->kv_prefill_bytes = 0;
    if (pr.cache) {
      pr.cache->release_and_insert(r->req, r->pinned_blocks, now());
      const double over = pr.kv.reserved + pr.cache->bytes() - pr.kv.capacity;
      if (over > 0) pr.cache->evict(over);
    }
    emit_memory(Role::prefill, p.id);
    wake(p.actor, p.idle);
  }

  void prefill_done(ReqState* r) {
    r->rec.prefill_end_s = now();
    if (r->req.output_tokens == 1) {  // the prefill's token is the whole answer: no decode
      r->rec.first_token_s = r->rec.done_s = now();
      r->rec.generated_tokens = 1;
      release_prefill_kv(r);
      end_request(r, RequestStatus::completed, "");
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
      const double need = kv_whole(r->req);
      cand.clear();
      for (auto& q : decode)
        for (size_t k = 0; k < q.ranks.size(); ++k) {
          const auto& dr = q.ranks[k];
          const double free = dr.kv.capacity - dr.kv.reserved;
          if (free >= need) cand.push_back({q.id, static_cast<int>(k), free, dr.admitted});
        }
      if (cand.empty()) return;  // FIFO: the head waits for room, and so do those behind it
      const DecodeCandidate& c = cand[decode_router->pick_decode(r->req, cand)];
      DecodeInst& q = decode[static_cast<size_t>(c.instance)];
      DecodeRank& dr = q.ranks[static_cast<size_t>(c.rank)];
      dr.kv.reserved += need;
      ++dr.admitted;
      r->kv_decode_bytes = need;
      r->rec.decode_instance = q.id;
      r->decode_rank = c.rank;
      pending_decode.pop_front();
      emit_memory(Role::decode, q.id);
      start_transfer(r);
    }
  }

  void start_transfer(ReqState* r) {
    r->phase = ReqPhase::transfer;
    r->rec.transfer_start_s = now();
    const int tp_p = d.prefill.attn_tp, tp_d = d.decode.attn_tp;
    const int src0 = prefill[static_cast<size_t>(r->rec.prefill_instance)].first_gpu + r->prefill_rank * tp_p;
    const int dst0 = decode[static_cast<size_t>(r->rec.decode_instance)].first_gpu + r->decode_rank * tp_d;
    // one flow per decode TP rank: each needs the replicated latent/compressed KV and its share of
    // the sharded recurrent states
    const double bytes = kv_bytes(d.model, r->req.input_tokens, tp_d);
    sg4::Host* src_host = platform.gpus[static_cast<size_t>(src0)];
    sg4::Actor::create("kv" + std::to_string(r->req.id), src_host, [this, r, src0, dst0, tp_p, tp_d, bytes] {
      std::vector<sg4::CommPtr> comms;
      for (int j = 0; j < tp_d; ++j)
        comms.push_back(sg4::Comm::sendto_async(platform.gpus[static_cast<size_t>(src0 + j % tp_p)],
                                                platform.gpus[static_cast<size_t>(dst0 + j)], bytes));
      sg4::Comm::wait_all(comms);
      transfer_done(r, bytes * tp_d, src0 / d.gpu.gpus_per_node != dst0 / d.gpu.gpus_per_node);
    });
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

  // ------------------------------------------------------------------ decode
  void decode_loop(DecodeInst& q) {
    for (;;) {
      bool any = false;
      long long seqs = 0;
      for (size_t k = 0; k < q.ranks.size(); ++k) {
        DecodeRank& dr = q.ranks[k];
        while (!dr.ready.empty() && static_cast<int>(dr.active.size()) < d.decode.max_running) {
          dr.active.push_back(dr.ready.front());
          dr.ready.pop_front();
        }
        dwork[k].clear();
        for (ReqState* r : dr.active) dwork[k].push_back({1, r->req.input_tokens + r->rec.generated_tokens - 1, true});
        any |= !dr.active.empty();
        seqs += static_cast<long long>(dr.active.size());
      }
      if (!any) {
        q.idle = true;
        sg4::this_actor::suspend();
        continue;
      }
      const StepTime st = dstep->step(dwork, Phase::decode);
      const double start = now();
      sg4::this_actor::sleep_for(st.total_s);
      ++totals.decode_steps;
      sink.on_step({Role::decode, q.id, start, now(), seqs, seqs, st});
      bool freed = false;
      for (auto& dr : q.ranks) {
        for (size_t i = 0; i < dr.active.size();) {
          ReqState* r = dr.active[i];
          if (++r->rec.generated_tokens < r->req.output_tokens) {
            ++i;
            continue;
          }
          dr.active[i] = dr.active.back();
          dr.active.pop_back();
          dr.kv.reserved -= r->kv_decode_bytes;
          --dr.admitted;
          r->rec.done_s = now();
          end_request(r, RequestStatus::completed, "");
          freed = true;
        }
      }
      if (freed) {
        emit_memory(Role::decode, q.id);
        dispatch_pending();
      }
    }
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
    build(*e);
    if (opt.horizon_s > 0) e->run_until(opt.horizon_s);
    else e->run();
    totals.end_s = now();
    // whatever did not end is in flight at the horizon: report each with the phase it was in
    std::vector<ReqState*> rest;
    for (auto& [id, r] : live) rest.push_back(r.get());
    std::sort(rest.begin(), rest.end(), [](const ReqState* a, const ReqState* b) { return a->req.id < b->req.id; });
    for (ReqState* r : rest) {
      r->rec.status = RequestStatus::in_flight;
      r->rec.reason = to_string(r->phase);
      sink.on_request(r->rec);
      ++totals.in_flight;
    }
    live.clear();
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
