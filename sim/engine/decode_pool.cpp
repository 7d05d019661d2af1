#include "sim/engine/engine.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

namespace servesim {

namespace {
// min-heap order of DecodePool::Instance::finish: earliest step first, then lowest request id
bool later(const std::tuple<long long, std::uint64_t, ReqState*>& a, const std::tuple<long long, std::uint64_t, ReqState*>& b) {
  return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) > std::get<0>(b) : std::get<1>(a) > std::get<1>(b);
}
}  // namespace

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
    // each instance its own stream of expert-load draws ("decode" and the instance id mixed into the
    // scenario's seed), so that the draws of one instance do not depend on when the others step
    q.load_rng = Rng(e_.opt.seed ^ 0x6465636f6465ULL ^ ((i + 1) * 0xd1b54a32d192ed03ULL));
    inst_.push_back(std::move(q));
  }
  e_.totals.decode_steps_per_event = e_.d.decode.all_to_all_on_fabric && e_.opt.all_to_all_flows ? 1 : std::max(1, e_.opt.decode_steps_per_event);
  if (e_.decode_router->decode_least_loaded()) build_index();
  work_.resize(static_cast<size_t>(e_.d.decode.dp()));
}

void DecodePool::start() {
  for (auto& q : inst_) {
    q.mutex = sg4::Mutex::create();
    q.cv = sg4::ConditionVariable::create();
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

void DecodePool::ready(ReqState* r) {
  Instance& q = inst_[static_cast<size_t>(r->rec.decode_instance)];
  q.ranks[static_cast<size_t>(r->decode_rank)].ready.push_back(r);
  if (q.in_plan) q.cv->notify_one();  // joins at the end of the step in progress
  else wake(q);
}

void DecodePool::free_kv(int instance, int rank, double bytes) {
  Instance& q = inst_[static_cast<size_t>(instance)];
  Rank& dr = q.ranks[static_cast<size_t>(rank)];
  reindex(q, static_cast<size_t>(rank), false);
  dr.reserved -= bytes;
  --dr.admitted;
  reindex(q, static_cast<size_t>(rank), true);
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
      dr.joined.push_back({r->req.input_tokens + r->rec.generated_tokens - 1, r->start_step});
      q.finish.emplace_back(q.step + steps_for(r->req.output_tokens - r->rec.generated_tokens) - 1, r->req.id, r);
      std::push_heap(q.finish.begin(), q.finish.end(), later);
      ++q.active;
      q.ctx += static_cast<double>(r->req.input_tokens + r->rec.generated_tokens);
    }
}

// The attention half is re-priced when the batch moved (kStepReuse); each step then takes its
// expert-load sample and finish() at that sample, computed once per evaluation.
void DecodePool::evaluate_step(Instance& q, int sample) {
  const bool moved = std::abs(static_cast<double>(q.active - q.active_at_eval)) > kStepReuse * static_cast<double>(q.active_at_eval) ||
                     std::abs(q.ctx - q.ctx_at_eval) > kStepReuse * q.ctx_at_eval;
  if (!q.evaluated || moved) {
    for (size_t k = 0; k < q.ranks.size(); ++k) {
      work_[k].clear();
      for (const auto& j : q.ranks[k].joined) work_[k].push_back({1 + e_.d.decode.mtp_draft_tokens, j.ctx0 + made(q.step - j.start_step), true});
    }
    StepParts parts = e_.dstep->attention_part(work_, Phase::decode);
    if (q.planning) q.repricings.push_back({q.plan.size(), std::move(q.parts), q.ctx_at_eval, q.active_at_eval, q.evaluated});
    q.parts = std::move(parts);
    q.ctx_at_eval = q.ctx, q.active_at_eval = q.active, q.evaluated = true;
    q.sample_valid = 0;
  }
  const size_t slot = static_cast<size_t>(sample + 1);
  if (!((q.sample_valid >> slot) & 1u)) {
    q.at_sample[slot] = e_.dstep->finish(q.parts, Phase::decode, sample);
    q.sample_valid |= std::uint64_t{1} << slot;
  }
  q.last = q.at_sample[slot];
}

// The expert-load sample of the i-th step from now (drawn ahead from the instance's stream).
int DecodePool::sample_at(Instance& q, size_t i) {
  while (q.samples.size() <= i) q.samples.push_back(e_.dstep->draw_sample(q.load_rng));
  return q.samples[i];
}

// k > 1 steps with the batch as it is: priced ahead, slept as one wait that ready() may cut.
void DecodePool::run_planned_steps(Instance& q, std::unique_lock<sg4::Mutex>& lock, long long k) {
  const long long step0 = q.step;
  q.plan.clear(), q.repricings.clear();
  q.planning = true;
  double t = e_.now();
  for (long long i = 0; i < k; ++i) {
    evaluate_step(q, sample_at(q, static_cast<size_t>(i)));
    q.plan.push_back({t, t + q.last.total_s, q.ctx, q.last});
    ++q.step;
    q.ctx += static_cast<double>(q.active) * tokens_per_step_;
    t += q.last.total_s;
  }
  q.planning = false;
  q.in_plan = true;
  // the plan's all-to-all bytes spread over the plan (its steps' rates differ only by re-pricings)
  double a2a_bytes = 0;
  for (const auto& ps : q.plan) a2a_bytes += ps.time.a2a_inter_bytes_gpu;
  e_.mover.all_to_all_step(Phase::decode, q.id, q.first_gpu, q.last, a2a_bytes, t - e_.now());  // (held form only: the flows form plans one step)
  ++e_.totals.decode_step_events;
  size_t j = q.plan.size();
  if (q.cv->wait_until(lock, t) == std::cv_status::no_timeout) {
    // a sequence became ready: the step in progress (the first not ended before now) is the last
    const double now = e_.now();
    j = static_cast<size_t>(std::lower_bound(q.plan.begin(), q.plan.end(), now, [](const Instance::PlannedStep& p, double x) { return p.end_s < x; }) -
                            q.plan.begin()) + 1;
    j = std::min(j, q.plan.size());
    // (still in_plan while it sleeps: a horizon stop then commits only the steps that ended)
    if (q.plan[j - 1].end_s > now) sg4::this_actor::sleep_until(q.plan[j - 1].end_s), ++e_.totals.decode_step_events;
  }
  q.in_plan = false;
  commit_plan(q, step0, j);
}

// The first j planned steps happened: emits them and, when the plan was cut, rolls the batch's
// step count, context and pricing state back to what step j will see.
void DecodePool::commit_plan(Instance& q, long long step0, size_t j) {
  for (size_t i = 0; i < j; ++i) {
    const auto& p = q.plan[i];
    e_.sink.on_step({Phase::decode, q.id, p.start_s, p.end_s, q.active, q.active, p.time});
  }
  e_.totals.decode_steps += static_cast<long long>(j);
  q.samples.erase(q.samples.begin(), q.samples.begin() + static_cast<std::ptrdiff_t>(j));
  if (j < q.plan.size()) {
    q.step = step0 + static_cast<long long>(j);
    q.ctx = q.plan[j].ctx_before;
    for (auto& rp : q.repricings)
      if (rp.at >= j) {  // the first re-pricing at or after step j replaced the state step j sees
        q.parts = std::move(rp.parts);
        q.ctx_at_eval = rp.ctx_at_eval, q.active_at_eval = rp.active_at_eval, q.evaluated = rp.evaluated;
        q.sample_valid = 0;
        break;
      }
  }
  q.plan.clear(), q.repricings.clear();
}

void DecodePool::finish_sequences(Instance& q) {
  while (!q.finish.empty() && std::get<0>(q.finish.front()) < q.step) {
    std::pop_heap(q.finish.begin(), q.finish.end(), later);
    ReqState* r = std::get<2>(q.finish.back());
    q.finish.pop_back();
    Rank& dr = q.ranks[static_cast<size_t>(r->decode_rank)];
    ReqState* moved = dr.active.back();
    dr.active[static_cast<size_t>(r->active_index)] = moved;
    dr.joined[static_cast<size_t>(r->active_index)] = dr.joined.back();
    moved->active_index = r->active_index;
    dr.active.pop_back();
    dr.joined.pop_back();
    --q.active;
    q.ctx -= static_cast<double>(r->req.input_tokens + r->rec.generated_tokens) + static_cast<double>(q.step - r->start_step) * tokens_per_step_;
    r->rec.generated_tokens = r->req.output_tokens;
    finish_round(r);
  }
}

void DecodePool::loop(Instance& q) {
  std::unique_lock lock(*q.mutex);
  const int per_event = e_.totals.decode_steps_per_event;
  for (;;) {
    join_batch(q);
    if (q.active == 0) {
      e_.mover.end_all_to_all(Phase::decode, q.id);
      q.idle = true;
      sg4::this_actor::suspend();
      continue;
    }
    // steps up to the one where the next sequence finishes (the batch cannot change before it ends)
    const long long k = std::min<long long>(std::get<0>(q.finish.front()) - q.step + 1, per_event);
    if (k > 1) {
      run_planned_steps(q, lock, k);
    } else {
      evaluate_step(q, sample_at(q, 0));
      q.samples.pop_front();
      const double start = e_.now();
      e_.mover.all_to_all_step(Phase::decode, q.id, q.first_gpu, q.last, q.last.a2a_inter_bytes_gpu, q.last.total_s);
      sg4::this_actor::sleep_for(q.last.total_s);
      ++e_.totals.decode_steps, ++e_.totals.decode_step_events;
      e_.sink.on_step({Phase::decode, q.id, start, e_.now(), q.active, q.active, q.last});
      ++q.step;
      q.ctx += static_cast<double>(q.active) * tokens_per_step_;
    }
    finish_sequences(q);
  }
}

// Tokens r has made since it joined (expected, with MTP: steps × tokens per step, rounded).
long long DecodePool::made(const Instance& q, const ReqState* r) const { return made(q.step - r->start_step); }

long long DecodePool::made(long long steps) const {
  return tokens_per_step_ == 1.0 ? steps : std::llround(static_cast<double>(steps) * tokens_per_step_);
}

void DecodePool::keep_alive() {
  for (auto& q : inst_) new sg4::MutexPtr(q.mutex), new sg4::ConditionVariablePtr(q.cv);
}

void DecodePool::settle_counters() {
  for (auto& q : inst_)
    if (q.in_plan) {  // stopped at the horizon inside a plan: the steps that ended before now happened
      const double now = e_.now();
      size_t j = 0;
      while (j < q.plan.size() && q.plan[j].end_s < now) ++j;
      q.in_plan = false;
      commit_plan(q, q.step - static_cast<long long>(q.plan.size()), j);
    }
  for (auto& q : inst_)
    for (auto& dr : q.ranks)
      for (ReqState* r : dr.active)
        r->rec.generated_tokens = std::min(r->req.output_tokens, r->rec.generated_tokens + made(q, r));
}

}  // namespace servesim
