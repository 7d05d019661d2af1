#include "sim/engine/engine.hpp"

#include "costmodels/memory.hpp"

#include <algorithm>

namespace servesim {

Engine::Engine(DeploymentSpec dd, std::unique_ptr<RequestSource> src, std::shared_ptr<const CostModel> c, EventSink& s, RunOptions o)
    : d(std::move(dd)), source(std::move(src)), cost(std::move(c)), sink(s), opt(std::move(o)) {
  pmem = plan_gpu_memory(d, d.prefill);
  dmem = plan_gpu_memory(d, d.decode);
  const FabricParams fabric = fabric_params(d.cluster, d.gpu);
  pstep = std::make_unique<StepCostModel>(d.model, cost, fabric, instance_shape(d, d.prefill), d.prefill.step_overhead_s);
  dstep = std::make_unique<StepCostModel>(d.model, cost, fabric, instance_shape(d, d.decode), d.decode.step_overhead_s);
  pstep->set_scale(opt.step_scale), dstep->set_scale(opt.step_scale);
  prefill_router = make_router(d.router);
  decode_router = make_router(d.decode_router);
  block_bytes = kv_footprint(d.model, d.prefill.attn_tp).per_token_bytes * d.prefix_cache.block_tokens;
  checkpoint_bytes = resume_state_bytes(d.model, d.prefill.attn_tp, d.prefix_cache.block_tokens);
  exact_state_resume = kv_footprint(d.model, 1).per_seq_bytes > 0;
  if (d.kv_tiers.enabled) store = std::make_unique<KvStore>(d.kv_tiers, d.cluster.nodes, [this] { return make_eviction_policy(d.eviction); });
}

double Engine::cached_bytes(long long tokens) const {
  return kv_bytes(d.model, tokens, d.prefill.attn_tp) - kv_bytes(d.model, 0, d.prefill.attn_tp);
}

// The platform (one KV-flow endpoint per attention-TP group), the instances, then the actors:
// prefill, decode, arrivals (creation order fixes SimGrid's scheduling order).
void Engine::build() {
  configure_network_model();
  const GpuLayout layout = gpu_layout(d);
  std::vector<GpuGroup> groups;
  for (const auto* pool : {&d.prefill, &d.decode})
    for (int first : pool == &d.prefill ? layout.prefill_first_gpu : layout.decode_first_gpu)
      for (int r = 0; r < pool->dp(); ++r) groups.push_back({first + r * pool->attn_tp, pool->attn_tp});
  platform = build_platform(d.cluster, d.gpu, d.kv_tiers.storage_bytes_per_s, d.kv_tiers.storage_latency_s, groups);
  prefill.build(layout.prefill_first_gpu);
  decode.build(layout.decode_first_gpu);
  prefill.start();
  decode.start();
  arrivals.start();
}

// After the last event (or at the horizon): settles the counters of work in progress and reports
// whatever did not end as in flight, each request with the phase it was in.
RunTotals Engine::finish() {
  arrivals.keep_alive();
  decode.keep_alive();
  totals.end_s = now();
  decode.settle_counters();
  // sessions still open: their rounds in progress (and offloads in flight) hold GPU KV until now
  for (auto& [id, r] : live) sessions.open_at_horizon(r->req.session, r->rec.admit_s, r->rec.first_token_s);
  for (const auto& [session, admit] : mover.pending_offloads()) sessions.open_at_horizon(session, admit, -1);
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
  sessions.end_all_in_flight();
  if (store) {
    totals.store_held_bytes = store->bytes(KvStore::Tier::l2) + store->bytes(KvStore::Tier::l3);
    totals.store_left_bytes = store->left_bytes();
    totals.store_offloaded_bytes = store->offloaded_bytes();
    totals.store_dropped_bytes = store->dropped_bytes();
    totals.offloads_in_flight = static_cast<long long>(mover.pending_offloads().size());
  }
  sink.on_end(totals.end_s);
  return totals;
}

}  // namespace servesim
