#include "sim/engine/engine.hpp"

#include <algorithm>
#include <cmath>

namespace servesim {

namespace {
// min-heap order of DecodePool::Instance::finish: earliest step first, then lowest request id
bool later(const std::tuple<long long, std::uint64_t, ReqState*>& a, const std::tuple<long long, std::uint64_t, ReqState*>& b) {
  return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) > std::get<0>(b) : std::get<1>(a) > std::get<1>(b);
}
}  // namespace

// the pool's own stream of expert-load draws: "decode" mixed into the scenario's seed
DecodePool::DecodePool(Engine& e)
    : e_(e), load_rng_(e.opt.seed ^ 0x6465636f6465ULL), mtp_rng_(e.opt.seed ^ 0x6d7470ULL), tokens_per_step_(e.d.decode.tokens_per_step()) {}

// Decode steps a sequence needs for `tokens` more tokens: 1 without MTP; with k drafts each step
// yields 1 + the run of accepted drafts (draft i accepted with probability a if i − 1 was).
long long DecodePool::steps_for(long long tokens) {
  const int k = e_.d.decode.mtp_draft_tokens;
  if (k == 0) return tokens;
  const double a = e_.d.decode.mtp_acceptance;
  long long steps = 0;
  for (long long made = 0; made < tokens; ++steps) {
    int t = 1;
    while (t <= k && mtp_rng_.uniform() < a) ++t;
    made += t;
  }
  return steps;
}

void DecodePool::build(const std::vector<int>& first_gpus) {
  batcher_ = make_decode_batcher(e_.d.decode_batcher);
  for (size_t i = 0; i < first_gpus.size(); ++i) {
    Instance q;
    q.id = static_cast<int>(i), q.first_gpu = first_gpus[i];
    q.ranks.resize(static_cast<size_t>(e_.d.decode.dp()));
    for (auto& r : q.ranks) r.capacity = e_.dmem.kv_budget;
    inst_.push_back(std::move(q));
  }
  work_.resize(static_cast<size_t>(e_.d.decode.dp()));
}

void DecodePool::start() {
  for (auto& q : inst_) {
    q.actor = sg4::Actor::create("decode" + std::to_string(q.id), e_.platform.gpus[static_cast<size_t>(q.first_gpu)], [this, &q] { loop(q); });
    q.actor->daemonize();
  }
}

int DecodePool::gpu0_of(const ReqState* r) const {
  return inst_[static_cast<size_t>(r->rec.decode_instance)].first_gpu + r->decode_rank * e_.d.decode.attn_tp;
}

void DecodePool::wake(Instance& q) {
  if (q.idle && q.actor) {
    q.idle = false;
    q.actor->resume();
  }
}

void DecodePool::emit_memory(int inst) {
  MemoryEvent ev;
  ev.role = Phase::decode, ev.instance = inst, ev.t_s = e_.now();
  double sum = 0, mx = 0;
  size_t n = 0;
  for (const auto& r : inst_[static_cast<size_t>(inst)].ranks) sum += r.reserved, mx = std::max(mx, r.reserved), ++n;
  ev.kv_bytes_mean = sum / static_cast<double>(n);
  ev.kv_bytes_max = mx;
  e_.sink.on_memory(ev);
}

void DecodePool::enqueue(ReqState* r) {
  pending_.push_back(r);
  dispatch_pending();
}

// Admission on a decode rank: the head of the queue takes a rank with room for its whole KV
// (prompt + output); FIFO: while it waits, so do those behind it.
void DecodePool::dispatch_pending() {
  std::vector<DecodeCandidate>& cand = cand_;
  while (!pending_.empty()) {
    ReqState* r = pending_.front();
    const double need = r->kv_whole_bytes;
    cand.clear();
    for (auto& q : inst_)
      for (size_t k = 0; k < q.ranks.size(); ++k) {
        const auto& dr = q.ranks[k];
        const double free = dr.capacity - dr.reserved;
        if (free >= need) cand.push_back({q.id, static_cast<int>(k), free, dr.admitted});
      }
    if (cand.empty()) return;
    const DecodeCandidate& c = cand[e_.decode_router->pick_decode(r->req, cand)];
    Instance& q = inst_[static_cast<size_t>(c.instance)];
    Rank& dr = q.ranks[static_cast<size_t>(c.rank)];
    dr.reserved += need;
    ++dr.admitted;
    r->kv_decode_bytes = need;
    r->rec.decode_instance = q.id;
    r->decode_rank = c.rank;
    pending_.pop_front();
    emit_memory(q.id);
    e_.mover.transfer(r);
  }
}

void DecodePool::ready(ReqState* r) {
  Instance& q = inst_[static_cast<size_t>(r->rec.decode_instance)];
  q.ranks[static_cast<size_t>(r->decode_rank)].ready.push_back(r);
  wake(q);
}

void DecodePool::free_kv(int instance, int rank, double bytes) {
  Instance& q = inst_[static_cast<size_t>(instance)];
  Rank& dr = q.ranks[static_cast<size_t>(rank)];
  dr.reserved -= bytes;
  --dr.admitted;
  emit_memory(q.id);
  dispatch_pending();
}

void DecodePool::finish_round(ReqState* r) {
  r->rec.done_s = e_.now();
  const bool offload = e_.store && r->req.session >= 0 && !r->req.last_round;
  if (!offload) {
    free_kv(r->rec.decode_instance, r->decode_rank, r->kv_decode_bytes);
    r->kv_decode_bytes = 0;
    e_.sessions.gpu_released(r->req.session, r->rec.admit_s);
    e_.arrivals.end_request(r, RequestStatus::completed, "");
    return;
  }
  // what the offload's completion needs after the ReqState is gone
  const int inst = r->rec.decode_instance, rank = r->decode_rank;
  const double bytes = r->kv_decode_bytes, admit_s = r->rec.admit_s;
  const long long session = r->req.session;
  e_.mover.offload(r, gpu0_of(r), [this, inst, rank, bytes, session, admit_s] {
    free_kv(inst, rank, bytes);
    e_.sessions.gpu_released(session, admit_s);
  });
}

// Ready sequences join the running batch; each finishes at the end of the step where its
// generated count reaches its output length.
void DecodePool::join_batch(Instance& q) {
  for (auto& dr : q.ranks)
    while (ReqState* r = dr.ready.empty() ? nullptr : batcher_->next(dr.ready, static_cast<int>(dr.active.size()), e_.d.decode.max_running)) {
      r->active_index = static_cast<int>(dr.active.size());
      r->start_step = q.step;
      r->phase = ReqPhase::decode;
      r->rec.first_token_s = e_.now();  // its first decode step starts now: the first token is out
      dr.active.push_back(r);
      q.finish.emplace_back(q.step + steps_for(r->req.output_tokens - r->rec.generated_tokens) - 1, r->req.id, r);
      std::push_heap(q.finish.begin(), q.finish.end(), later);
      ++q.active;
      q.ctx += static_cast<double>(r->req.input_tokens + r->rec.generated_tokens);
    }
}

// The attention half is re-priced when the batch moved (kStepReuse); each step then draws its
// expert-load sample and takes finish() at that sample, computed once per evaluation.
void DecodePool::evaluate_step(Instance& q) {
  const bool moved = std::abs(static_cast<double>(q.active - q.active_at_eval)) > kStepReuse * static_cast<double>(q.active_at_eval) ||
                     std::abs(q.ctx - q.ctx_at_eval) > kStepReuse * q.ctx_at_eval;
  if (!q.evaluated || moved) {
    for (size_t k = 0; k < q.ranks.size(); ++k) {
      work_[k].clear();
      for (ReqState* r : q.ranks[k].active)
        work_[k].push_back({1 + e_.d.decode.mtp_draft_tokens, r->req.input_tokens + r->rec.generated_tokens - 1 + made(q, r), true});
    }
    q.parts = e_.dstep->attention_part(work_, Phase::decode);
    q.ctx_at_eval = q.ctx, q.active_at_eval = q.active, q.evaluated = true;
    q.sample_valid = 0;
  }
  const int sample = e_.dstep->draw_sample(load_rng_);
  const size_t slot = static_cast<size_t>(sample + 1);
  if (!((q.sample_valid >> slot) & 1u)) {
    q.at_sample[slot] = e_.dstep->finish(q.parts, Phase::decode, sample);
    q.sample_valid |= std::uint64_t{1} << slot;
  }
  q.last = q.at_sample[slot];
}

void DecodePool::finish_sequences(Instance& q) {
  while (!q.finish.empty() && std::get<0>(q.finish.front()) < q.step) {
    std::pop_heap(q.finish.begin(), q.finish.end(), later);
    ReqState* r = std::get<2>(q.finish.back());
    q.finish.pop_back();
    Rank& dr = q.ranks[static_cast<size_t>(r->decode_rank)];
    ReqState* moved = dr.active.back();
    dr.active[static_cast<size_t>(r->active_index)] = moved;
    moved->active_index = r->active_index;
    dr.active.pop_back();
    --q.active;
    q.ctx -= static_cast<double>(r->req.input_tokens + r->rec.generated_tokens) + static_cast<double>(q.step - r->start_step) * tokens_per_step_;
    r->rec.generated_tokens = r->req.output_tokens;
    finish_round(r);
  }
}

void DecodePool::loop(Instance& q) {
  for (;;) {
    join_batch(q);
    if (q.active == 0) {
      q.idle = true;
      sg4::this_actor::suspend();
      continue;
    }
    evaluate_step(q);
    const double start = e_.now();
    e_.mover.inject_all_to_all(e_.d.decode, q.first_gpu, q.last, q.a2a_flows);
    sg4::this_actor::sleep_for(q.last.total_s);
    ++e_.totals.decode_steps;
    e_.sink.on_step({Phase::decode, q.id, start, e_.now(), q.active, q.active, q.last});
    ++q.step;
    q.ctx += static_cast<double>(q.active) * tokens_per_step_;
    finish_sequences(q);
  }
}

// Tokens r has made since it joined (expected, with MTP: steps × tokens per step, rounded).
long long DecodePool::made(const Instance& q, const ReqState* r) const {
  const long long steps = q.step - r->start_step;
  return tokens_per_step_ == 1.0 ? steps : std::llround(static_cast<double>(steps) * tokens_per_step_);
}

void DecodePool::settle_counters() {
  for (auto& q : inst_)
    for (auto& dr : q.ranks)
      for (ReqState* r : dr.active)
        r->rec.generated_tokens = std::min(r->req.output_tokens, r->rec.generated_tokens + made(q, r));
}

}  // namespace servesim
