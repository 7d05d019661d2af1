#include "sim/engine/engine.hpp"

#include <algorithm>

namespace servesim {

// the pool's own stream of expert-load draws: "prefill" mixed into the scenario's seed
PrefillPool::PrefillPool(Engine& e) : e_(e), load_rng_(e.opt.seed ^ 0x70726566696c6cULL) {}

void PrefillPool::build(const std::vector<int>& first_gpus) {
  const DeploymentSpec& d = e_.d;
  scheduler_ = make_batch_scheduler(d.batch_scheduler);
  for (size_t i = 0; i < first_gpus.size(); ++i) {
    Instance p;
    p.id = static_cast<int>(i), p.first_gpu = first_gpus[i];
    for (int r = 0; r < d.prefill.dp(); ++r) {
      Rank pr;
      pr.capacity = e_.pmem.kv_budget;
      if (d.prefix_cache.enabled)
        pr.cache = std::make_unique<PrefixCache>(d.prefix_cache.block_tokens, e_.block_bytes, e_.checkpoint_bytes, make_eviction_policy(d.eviction));
      p.ranks.push_back(std::move(pr));
    }
    inst_.push_back(std::move(p));
  }
  work_.resize(static_cast<size_t>(d.prefill.dp()));
  const long long ranks = static_cast<long long>(inst_.size()) * d.prefill.dp();
  if (d.prefix_cache.enabled && e_.prefill_router->uses_prefix_matches() && ranks >= e_.opt.prefix_index_min_ranks) {
    std::vector<PrefixCache*> caches;
    for (auto& p : inst_)
      for (auto& pr : p.ranks) caches.push_back(pr.cache.get());
    index_ = std::make_unique<PrefixIndex>(caches);
  }
}

bool PrefillPool::match_all(const Request& r, std::vector<long long>& out) {
  if (!index_) return false;
  index_->match_all(r, out);
  return true;
}

void PrefillPool::start() {
  for (auto& p : inst_) {
    p.actor = sg4::Actor::create("prefill" + std::to_string(p.id), e_.platform.gpus[static_cast<size_t>(p.first_gpu)], [this, &p] { loop(p); });
    p.actor->daemonize();
  }
}

int PrefillPool::gpu0_of(const ReqState* r) const {
  return inst_[static_cast<size_t>(r->rec.prefill_instance)].first_gpu + r->prefill_rank * e_.d.prefill.attn_tp;
}

void PrefillPool::wake(Instance& p) {
  if (p.idle && p.actor) {
    p.idle = false;
    p.actor->resume();
  }
}

void PrefillPool::enqueue(ReqState* r, int inst, int rank) {
  Instance& p = inst_[static_cast<size_t>(inst)];
  Rank& pr = p.ranks[static_cast<size_t>(rank)];
  r->rec.prefill_instance = p.id;
  r->prefill_rank = rank;
  pr.waiting.push_back(r);
  pr.queued_tokens += static_cast<double>(r->req.input_tokens);
  p.queued = true;
}

void PrefillPool::wake_queued() {
  for (auto& p : inst_)
    if (p.queued) p.queued = false, wake(p);
}

void PrefillPool::loaded(ReqState* r, long long tokens) {
  r->prefilled = tokens;
  r->rec.cached_tokens = tokens;
  r->rec.loaded_tokens = tokens;
  rank_of(r).queued_tokens -= static_cast<double>(tokens);
  wake(inst_[static_cast<size_t>(r->rec.prefill_instance)]);
}

void PrefillPool::emit_memory(int inst) {
  MemoryEvent ev;
  ev.role = Phase::prefill, ev.instance = inst, ev.t_s = e_.now();
  double sum = 0, mx = 0;
  size_t n = 0;
  for (const auto& r : inst_[static_cast<size_t>(inst)].ranks) {
    const double u = r.reserved + (r.cache ? r.cache->bytes() : 0.0);
    sum += u, mx = std::max(mx, u), ++n;
  }
  ev.kv_bytes_mean = sum / static_cast<double>(n);
  ev.kv_bytes_max = mx;
  e_.sink.on_memory(ev);
}

// Reserves r's prompt KV on rank pr (less what its prefix cache already holds), or returns false.
bool PrefillPool::admit(Rank& pr, ReqState* r) {
  const long long from_store = e_.mover.store_tokens_for(r->req);
  const bool store_covers = from_store > 0 && from_store >= r->req.history_tokens;  // L1 cannot offer more
  const PrefixMatch m = pr.cache && !store_covers ? pr.cache->match(r->req) : PrefixMatch{};
  const bool load = from_store > m.tokens;
  const long long hit = load ? 0 : m.tokens;
  const int pin = load ? 0 : m.pin_blocks;
  const double need = r->kv_prompt_bytes - (hit > 0 ? e_.cached_bytes(hit) : 0.0);
  if (pr.cache) pr.cache->pin(r->req, pin);
  double free = pr.capacity - pr.reserved - (pr.cache ? pr.cache->bytes() : 0.0);
  // evict only when that makes the request fit (SGLang's rule): otherwise the cache would be
  // flushed for nothing while the queue head waits
  if (free < need && pr.cache && free + pr.cache->evictable_bytes() >= need) free += pr.cache->evict(need - free);
  if (free < need) {
    if (pr.cache) pr.cache->unpin(r->req, pin, e_.now());
    return false;
  }
  pr.reserved += need;
  r->kv_prefill_bytes = need;
  r->pinned_blocks = pin;
  r->rec.admit_s = e_.now();
  r->phase = ReqPhase::prefill;
  if (pr.cache && !store_covers) {  // an L1 lookup was made
    e_.totals.prefix_lookup_blocks += static_cast<long long>(r->req.block_hashes.size());
    e_.totals.prefix_hit_blocks += m.present_blocks;
  }
  e_.totals.prompt_tokens_admitted += r->req.input_tokens;
  if (load) {
    e_.mover.load(r, from_store);
    return true;
  }
  r->prefilled = hit;
  r->rec.cached_tokens = hit;
  e_.totals.tokens_l1 += hit;
  pr.queued_tokens -= static_cast<double>(hit);
  // a stored history this round does not use is stale now (rounds of a session are sequential)
  if (e_.store && r->req.session >= 0 && e_.store->holds(r->req.session)) {
    e_.store->release(r->req.session, e_.now());
    e_.mover.emit_tiers();
  }
  return true;
}

void PrefillPool::loop(Instance& p) {
  for (;;) {
    bool any = false;
    for (auto& pr : p.ranks) {
      pr.items.clear();
      scheduler_->form_prefill_batch(pr.running, pr.waiting, e_.d.prefill.max_batch_tokens, e_.d.prefill.chunk_tokens,
                                     [&](ReqState* r) { return admit(pr, r); }, pr.items);
      any |= !pr.items.empty();
    }
    if (!any) {
      e_.mover.end_all_to_all(Phase::prefill, p.id);
      p.idle = true;
      sg4::this_actor::suspend();
      continue;
    }
    emit_memory(p.id);
    long long seqs = 0, tokens = 0;
    const double start = e_.now();
    for (size_t k = 0; k < p.ranks.size(); ++k) {
      work_[k].clear();
      for (const auto& it : p.ranks[k].items) {
        if (it.req->rec.prefill_start_s < 0) it.req->rec.prefill_start_s = start;
        work_[k].push_back({it.tokens, it.req->prefilled, it.req->prefilled + it.tokens == it.req->req.input_tokens});
        ++seqs, tokens += it.tokens;
      }
    }
    const StepTime st = e_.pstep->step(work_, Phase::prefill, e_.pstep->draw_sample(load_rng_));
    e_.mover.all_to_all_step(Phase::prefill, p.id, p.first_gpu, st, st.a2a_inter_bytes_gpu, st.total_s);
    sg4::this_actor::sleep_for(st.total_s);
    ++e_.totals.prefill_steps;
    e_.sink.on_step({Phase::prefill, p.id, start, e_.now(), seqs, tokens, st});
    for (auto& pr : p.ranks)
      for (const auto& it : pr.items) {
        ReqState* r = it.req;
        r->prefilled += it.tokens;
        pr.queued_tokens -= static_cast<double>(it.tokens);
        if (r->remaining_prefill() == 0) {
          pr.running.erase(std::find(pr.running.begin(), pr.running.end(), r));
          done(r);
        }
      }
  }
}

// At the end of r's prefill its prompt's blocks enter the rank's prefix cache, pinned while r's KV
// waits for and makes its copy to decode, and the bytes they add move from r's reservation to the
// cache's: a request admitted meanwhile finds them (SGLang's radix cache holds a prompt's blocks
// from its prefill on). Until the twenty-seventh session they entered only when r's KV left, so
// requests sharing a long prompt admitted during the first one's wait computed it again (user
// review: 40 requests sharing 60,000 tokens, hit rate 0).
void PrefillPool::cache_prompt(ReqState* r) {
  Rank& pr = rank_of(r);
  if (!pr.cache || !pr.cache->usable(r->req)) return;
  const double added = pr.cache->release_and_insert(r->req, r->pinned_blocks, e_.now());
  const int blocks = static_cast<int>(r->req.block_hashes.size());
  pr.cache->pin(r->req, blocks);
  r->pinned_blocks = blocks, r->cached = true;
  const double moved = std::min(added, r->kv_prefill_bytes);
  pr.reserved -= moved, r->kv_prefill_bytes -= moved;
  const double over = pr.reserved + pr.cache->bytes() - pr.capacity;  // (checkpoint state may add more than r held)
  if (over > 0) pr.cache->evict(over);
  emit_memory(r->rec.prefill_instance);
}

void PrefillPool::release_kv(ReqState* r) {
  Rank& pr = rank_of(r);
  pr.reserved -= r->kv_prefill_bytes;
  r->kv_prefill_bytes = 0;
  if (pr.cache) {
    if (r->cached) pr.cache->unpin(r->req, r->pinned_blocks, e_.now());
    else pr.cache->release_and_insert(r->req, r->pinned_blocks, e_.now());
    r->pinned_blocks = 0, r->cached = false;
    const double over = pr.reserved + pr.cache->bytes() - pr.capacity;
    if (over > 0) pr.cache->evict(over);
  }
  emit_memory(r->rec.prefill_instance);
  wake(inst_[static_cast<size_t>(r->rec.prefill_instance)]);
}

void PrefillPool::done(ReqState* r) {
  r->rec.prefill_end_s = e_.now();
  cache_prompt(r);
  if (r->req.output_tokens == 1) {  // the prefill's token is the whole answer: no decode
    r->rec.first_token_s = r->rec.done_s = e_.now();
    r->rec.generated_tokens = 1;
    release_kv(r);  // its KV stays in the rank's prefix cache
    e_.sessions.gpu_released(r->req.session, r->rec.admit_s);
    if (e_.store && r->req.session >= 0 && !r->req.last_round) e_.mover.offload(r, gpu0_of(r), nullptr);  // a copy of it goes down
    else e_.arrivals.end_request(r, RequestStatus::completed, "");
    return;
  }
  r->phase = ReqPhase::wait_decode;
  e_.decode.enqueue(r);
}

}  // namespace servesim
