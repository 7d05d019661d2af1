#include "sim/engine/engine.hpp"

#include "costmodels/memory.hpp"
#include "workloads/blocks.hpp"

#include <algorithm>
#include <limits>
#include <optional>

namespace servesim {

void Arrivals::start() {
  mutex_ = sg4::Mutex::create();
  cv_ = sg4::ConditionVariable::create();
  sg4::Actor::create("arrivals", e_.platform.frontend, [this] { loop(); });
}

void Arrivals::keep_alive() {
  // actors may still be blocked at the horizon: like the engine, their synchronisation objects are
  // kept alive for the rest of the process (SimGrid aborts when they are destroyed in use)
  new sg4::MutexPtr(mutex_);
  new sg4::ConditionVariablePtr(cv_);
}

void Arrivals::loop() {
  std::unique_lock lock(*mutex_);
  std::optional<Request> open;
  bool open_done = false;
  const double inf = std::numeric_limits<double>::infinity();
  const double horizon = e_.opt.horizon_s > 0 ? e_.opt.horizon_s : inf;
  for (;;) {
    if (!open && !open_done) {
      try {
        open = e_.source->next();
      } catch (...) {
        e_.source_error = std::current_exception();
      }
      if (!open) open_done = true;
    }
    const double t_open = open ? open->arrival_s : inf;
    const double t_follow = followups_.empty() ? inf : followups_.front().arrival_s;
    const double t = std::min(t_open, t_follow);
    // every arrival of this instant is queued: now the prefill instances may form their batches
    if (t > e_.now() || e_.source_error) e_.prefill.wake_queued();
    if (e_.source_error) break;
    if (t > horizon || t == inf) {
      // nothing (more) arrives before the horizon: wait for running work, or a follow-up, to end
      if (e_.live.empty() && (t == inf || followups_.empty() || t_follow > horizon) && (open_done || t_open > horizon)) break;
      cv_->wait(lock);
      continue;
    }
    if (t > e_.now()) {
      cv_->wait_until(lock, t);
      continue;
    }
    Request req;
    if (t_follow < t_open || (t_follow == t_open && followups_.front().id < open->id)) {
      std::pop_heap(followups_.begin(), followups_.end(), Later{});
      req = std::move(followups_.back());
      followups_.pop_back();
    } else {
      req = std::move(*open);
      open.reset();
    }
    admit(std::move(req));
  }
}

void Arrivals::admit(Request req) {
  const DeploymentSpec& d = e_.d;
  if (d.prefix_cache.enabled && req.block_tokens > 0 && req.block_tokens != d.prefix_cache.block_tokens)
    remap_blocks(req, d.prefix_cache.block_tokens);  // the trace's ids at the cache's block size
  auto owned = std::make_unique<ReqState>();
  ReqState* r = owned.get();
  r->req = std::move(req);
  r->rec.id = r->req.id;
  r->rec.arrival_s = e_.now();
  r->rec.input_tokens = r->req.input_tokens;
  r->rec.output_tokens = r->req.output_tokens;
  r->rec.session = r->req.session;
  r->rec.round = r->req.round;
  e_.live.emplace(r->req.id, std::move(owned));
  ++e_.totals.arrivals;
  // the workload's own reuse: blocks an earlier arrival carried (unlimited cache, arrival order),
  // over the arrivals until RunOptions::trace_reuse_max_block_ids distinct ids were seen (bounded memory)
  if (r->req.session < 0 && e_.totals.trace_reuse_arrivals < 0) {  // (sessions reuse their history by construction)
    if (seen_blocks_.size() + r->req.block_hashes.size() > e_.opt.trace_reuse_max_block_ids) {
      e_.totals.trace_reuse_arrivals = e_.totals.arrivals - 1;  // the closed form covers the arrivals before this one
      seen_blocks_ = BlockIdSet();  // frees the table
    } else {
      for (auto h : r->req.block_hashes) e_.totals.trace_reuse_blocks += !seen_blocks_.insert(h);
      e_.totals.trace_blocks += static_cast<long long>(r->req.block_hashes.size());
    }
  }
  if (r->req.session >= 0) e_.sessions.round_arrived(r->req.session);
  if (reject_impossible(r)) return;
  if (r->req.history_stored && e_.store) e_.mover.preload(r->req);  // a stationary start: its history is in the store
  route(r);
}

// Requests that can never run are rejected at arrival, with the reason.
bool Arrivals::reject_impossible(ReqState* r) {
  const DeploymentSpec& d = e_.d;
  const long long ctx = r->req.input_tokens > std::numeric_limits<long long>::max() - r->req.output_tokens ? std::numeric_limits<long long>::max() : r->req.input_tokens + r->req.output_tokens;  // saturates: no overflow
  if (ctx > d.model.max_context_tokens) {
    end_request(r, RequestStatus::rejected, "context exceeds the model's " + std::to_string(d.model.max_context_tokens) + " tokens: " + std::to_string(ctx) + " tokens");
    return true;
  }
  r->kv_prompt_bytes = kv_bytes(d.model, r->req.input_tokens, d.prefill.attn_tp);  // computed once per request
  r->kv_whole_bytes = kv_bytes(d.model, r->req.input_tokens + r->req.output_tokens, d.decode.attn_tp);
  if (r->kv_prompt_bytes > e_.pmem.kv_budget) {
    end_request(r, RequestStatus::rejected, "prompt KV exceeds a prefill rank's KV budget");
    return true;
  }
  if (r->kv_whole_bytes > e_.dmem.kv_budget) {
    end_request(r, RequestStatus::rejected, "prompt+output KV exceeds a decode rank's KV budget");
    return true;
  }
  return false;
}

void Arrivals::route(ReqState* r) {
  const long long from_store = e_.mover.store_tokens_for(r->req);
  cand_.clear();
  // when the store holds the session's whole history, no L1 cache can offer more (the rest of
  // the prompt is new): skip the lookups
  const bool lookups = e_.prefill_router->uses_prefix_matches() && !(from_store > 0 && from_store >= r->req.history_tokens);
  const bool indexed = lookups && e_.prefill.match_all(r->req, hits_);
  size_t g = 0;
  for (auto& p : e_.prefill.instances())
    for (size_t k = 0; k < p.ranks.size(); ++k, ++g) {
      const auto& pr = p.ranks[k];
      const long long hit = indexed ? hits_[g] : lookups && pr.cache ? pr.cache->match(r->req).tokens : 0;
      cand_.push_back({p.id, static_cast<int>(k), pr.queued_tokens, std::max(hit, from_store)});
    }
  const PrefillCandidate& c = cand_[e_.prefill_router->pick_prefill(r->req, cand_)];
  e_.prefill.enqueue(r, c.instance, c.rank);
}

void Arrivals::end_request(ReqState* r, RequestStatus status, std::string reason) {
  r->phase = ReqPhase::done;
  r->rec.status = status;
  r->rec.reason = std::move(reason);
  e_.sink.on_request(r->rec);
  if (status == RequestStatus::completed) ++e_.totals.completed;
  if (status == RequestStatus::rejected) ++e_.totals.rejected;
  if (r->req.session >= 0) {
    if (status == RequestStatus::completed) e_.sessions.round_completed(r->req.session, r->rec.first_token_s);
    if (status != RequestStatus::completed) r->req.last_round = true;  // a rejected round ends its session
    std::optional<Request> next;
    try {
      next = e_.source->follow_up(r->req, e_.now());
    } catch (...) {
      if (!e_.source_error) e_.source_error = std::current_exception();
    }
    if (r->req.last_round) e_.sessions.end(r->req.session, status);
    if (next) {
      followups_.push_back(std::move(*next));
      std::push_heap(followups_.begin(), followups_.end(), Later{});
      notify();
    }
  }
  e_.live.erase(r->req.id);  // frees r
  if (e_.live.empty()) notify();
}

}  // namespace servesim
