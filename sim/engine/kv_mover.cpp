#include "sim/engine/engine.hpp"

#include "costmodels/memory.hpp"

#include <algorithm>

namespace servesim {

void KvMover::emit_tiers() {
  if (e_.store) e_.sink.on_tier({e_.now(), e_.store->bytes(KvStore::Tier::l2), e_.store->bytes(KvStore::Tier::l3)});
}

long long KvMover::store_tokens_for(const Request& r) const {
  if (!e_.store || r.session < 0) return 0;
  const KvStore::Object* o = e_.store->find(r.session);
  if (!o) return 0;
  // a stored history with per-sequence state (KDA, windows) resumes only at its exact end
  const long long usable = e_.exact_state_resume ? (r.history_tokens >= o->tokens ? o->tokens : 0) : std::min(o->tokens, r.history_tokens);
  return std::min(usable, r.input_tokens - 1);
}

// A KV copy between nodes runs at the transfer engine's share of NIC line rate
// (GpuSpec::kv_transfer_efficiency): its flow carries more bytes, so that alone on its path it takes
// bytes / min(eff x NIC line rate, slower links); within a node (NVLink, PCIe) the links' own rates
// stand. `slower_s` is the rate of a slower link on the path (an L3 storage read: the storage link,
// which would otherwise be charged the extra bytes too), 0 if none. The extra bytes also load the
// uplinks the copy crosses (the transfer engine's overhead as wire bytes: README "What is approximate").
double KvMover::wire_bytes(double bytes, bool between_nodes, int nics, double slower_s) const {
  if (!between_nodes) return bytes;
  const double line = nics * e_.d.gpu.nic_bits_per_s / 8, eff = e_.d.gpu.kv_transfer_efficiency;
  const double at_line = slower_s > 0 ? std::min(line, slower_s) : line, achieved = slower_s > 0 ? std::min(eff * line, slower_s) : eff * line;
  return bytes * at_line / achieved;
}

// Every decode TP rank needs the replicated latent/compressed KV and its share of the sharded
// recurrent states: one flow between the two TP groups' endpoints carries all of it.
void KvMover::transfer(ReqState* r) {
  r->phase = ReqPhase::transfer;
  r->rec.transfer_start_s = e_.now();
  const int tp_d = e_.d.decode.attn_tp;
  const int src0 = e_.prefill.gpu0_of(r), dst0 = e_.decode.gpu0_of(r);
  const double bytes = kv_bytes(e_.d.model, r->req.input_tokens, tp_d) * tp_d;
  const bool inter = e_.node_of(src0) != e_.node_of(dst0);
  const int nics = std::min(e_.d.prefill.attn_tp, tp_d);  // the smaller group's NICs bound the copy
  e_.flows.submit(e_.platform.endpoint(src0), e_.platform.endpoint(dst0), wire_bytes(bytes, inter, nics, 0),
                  [this, r, bytes, inter] { transfer_done(r, bytes, inter); });
}

void KvMover::transfer_done(ReqState* r, double bytes, bool inter_node) {
  e_.totals.transfer_bytes += bytes;
  e_.sink.on_transfer({r->req.id, r->rec.prefill_instance, r->rec.decode_instance, inter_node, r->rec.transfer_start_s, e_.now(), bytes});
  e_.prefill.release_kv(r);
  r->phase = ReqPhase::wait_slot;
  r->rec.transfer_end_s = e_.now();
  r->rec.generated_tokens = 1;  // computed by the prefill's last chunk; delivered when decode starts
  e_.decode.ready(r);
}

// Load-back from L2 host DRAM or L3 storage of some node into the prefill rank's GPUs: one flow
// to the TP group (each rank needs the replicated caches and its share of the states). The request
// joins the batch when the flow ends.
void KvMover::load(ReqState* r, long long tokens) {
  const KvStore::Object o = e_.store->take_for_load(r->req.session);
  r->loading = true;
  r->rec.load_start_s = e_.now();
  r->rec.load_tier = static_cast<int>(o.tier);
  const bool l2 = o.tier == KvStore::Tier::l2;
  sg4::Host* src = l2 ? e_.platform.cpus[static_cast<size_t>(o.node)] : e_.platform.storage[static_cast<size_t>(o.node)];
  const int tp = e_.d.prefill.attn_tp;
  const double bytes = kv_bytes(e_.d.model, tokens, tp) * tp;  // every TP rank needs its copy
  (l2 ? e_.totals.load_l2_bytes : e_.totals.load_l3_bytes) += bytes;
  ++(l2 ? e_.totals.loads_l2 : e_.totals.loads_l3);
  const int dst0 = e_.prefill.gpu0_of(r);
  e_.flows.submit(src, e_.platform.endpoint(dst0), wire_bytes(bytes, o.node != e_.node_of(dst0), tp, l2 ? 0.0 : e_.d.kv_tiers.storage_bytes_per_s),
                  [this, r, tokens, l2, bytes, node = o.node] {
    e_.sink.on_kv_move({l2 ? KvMoveKind::load_l2 : KvMoveKind::load_l3, r->req.session, r->req.id, node, r->rec.load_start_s, e_.now(), bytes});
    e_.store->release(r->req.session, e_.now());
    emit_tiers();
    r->loading = false;
    r->rec.load_end_s = e_.now();
    (l2 ? e_.totals.tokens_l2 : e_.totals.tokens_l3) += tokens;
    e_.prefill.loaded(r, tokens);
  });
}

// One copy of the session's history (prompt + output), read from the group's GPUs in parallel
// over PCIe to the node's host DRAM, while the session waits for its next round.
void KvMover::offload(ReqState* r, int src_gpu0, std::function<void()> release) {
  const long long tokens = r->req.input_tokens + r->req.output_tokens;
  const double total = kv_bytes(e_.d.model, tokens, 1);
  const int node = e_.node_of(src_gpu0);
  const long long session = r->req.session;
  ++e_.totals.offloads;
  e_.totals.offload_bytes += total;
  auto pending = pending_offloads_.emplace(session, r->rec.admit_s);
  const std::uint64_t request = r->req.id;
  const double start = e_.now();
  e_.arrivals.end_request(r, RequestStatus::completed, "");  // done for the user; its KV leaves the GPU later
  e_.flows.submit(e_.platform.endpoint(src_gpu0), e_.platform.cpus[static_cast<size_t>(node)], total,
                  [this, release = std::move(release), pending, session, tokens, total, node, request, start] {
                    e_.sink.on_kv_move({KvMoveKind::offload, session, request, node, start, e_.now(), total});
                    pending_offloads_.erase(pending);
                    if (release) release();
                    if (!e_.sessions.open(session)) {  // the session ended meanwhile: nothing to keep
                      e_.totals.offload_abandoned_bytes += total;
                      return;
                    }
                    for (const auto& dm : e_.store->put_l2(session, tokens, total, node, e_.now())) demote(dm);
                    emit_tiers();
                  });
}

void KvMover::preload(const Request& r) {
  const double total = kv_bytes(e_.d.model, r.history_tokens, 1);
  const int node = static_cast<int>(r.session % static_cast<long long>(e_.d.cluster.nodes));
  ++e_.totals.preloads;
  e_.totals.preload_bytes += total;
  for (const auto& dm : e_.store->put_l2(r.session, r.history_tokens, total, node, e_.now())) demote(dm);
  emit_tiers();
}

void KvMover::demote(const KvStore::Demotion& dm) {
  e_.totals.demote_bytes += dm.bytes;
  e_.flows.submit(e_.platform.cpus[static_cast<size_t>(dm.node)], e_.platform.storage[static_cast<size_t>(dm.node)], dm.bytes, [this, dm, start = e_.now()] {
    e_.sink.on_kv_move({KvMoveKind::demote, dm.session, 0, dm.node, start, e_.now(), dm.bytes});
    e_.store->demoted(dm.session, dm.gen, e_.now());
    emit_tiers();
  });
}

// The check form of all_to_all_on_fabric (RunOptions::all_to_all_flows): the step's inter-node
// all-to-all bytes as background flows from each attention-TP group to the fabric and back,
// rate-capped to last the step (a step's dispatches and combines are spread over its layers).
// SimGrid 3.32 caps only mailbox comms (a
// host-to-host comm ignores set_rate: Flows.SimGrid332IgnoresTheRateOfAHostToHostComm), and a
// mailbox comm leaves from its sender's host: the calling actor moves to each sending host to post
// its flow, to a mailbox with a permanent receiver (which makes it start at once) that drains it.
// They only load the links; the step time is the closed form. They are detached (each lasts its
// step): kept as activities of the posting actor, SimGrid scanned them all at each simcall (a Kimi
// K2 run took 35 s for 6 simulated s; 0.85 s detached).
void KvMover::inject_all_to_all(const PoolSpec& pool, int first_gpu, const StepTime& st) {
  if (st.a2a_inter_bytes_gpu <= 0 || st.total_s <= 0) return;
  const double bytes = st.a2a_inter_bytes_gpu * pool.attn_tp;  // a TP group's NIC bytes, each direction
  const double rate = bytes / st.total_s;  // spread over the step, as the held form spreads it
  static int payload = 0;
  auto sink = [this](sg4::Host* h) {  // the mailbox drained on host h
    sg4::Mailbox* mb = sg4::Mailbox::by_name("a2a-to-" + h->get_name());
    if (a2a_sinks_.insert(h).second) {
      sg4::ActorPtr a = sg4::Actor::create("a2a-sink", h, [mb] {
        for (;;) {
          try {
            mb->get<int>();
          } catch (const simgrid::Exception&) {  // a failed comm: nothing to drain
          }
        }
      });
      a->daemonize();
      mb->set_receiver(a);  // before the first put, so that it starts at once
    }
    return mb;
  };
  sg4::Host* home = sg4::this_actor::get_host();
  sg4::Mailbox* up = sink(e_.platform.spine);
  for (int r = 0; r < pool.dp(); ++r) {
    sg4::Host* g = e_.platform.endpoint(first_gpu + r * pool.attn_tp);
    sg4::this_actor::set_host(g);
    up->put_init(&payload, static_cast<uint64_t>(bytes))->set_rate(rate)->detach();
  }
  sg4::this_actor::set_host(e_.platform.spine);
  for (int r = 0; r < pool.dp(); ++r)
    sink(e_.platform.endpoint(first_gpu + r * pool.attn_tp))->put_init(&payload, static_cast<uint64_t>(bytes))->set_rate(rate)->detach();
  sg4::this_actor::set_host(home);
}

const std::pair<std::vector<sg4::Link*>, std::vector<sg4::Link*>>& KvMover::a2a_route(sg4::Host* g) {
  auto it = a2a_routes_.find(g);
  if (it != a2a_routes_.end()) return it->second;
  auto links = [](sg4::Host* a, sg4::Host* b) {
    std::vector<sg4::Link*> all, out;
    double latency = 0;
    a->route_to(b, all, &latency);
    for (auto* l : all)
      if (l->get_bandwidth() < 1e17) out.push_back(l);  // the core's unlimited links carry no limit to hold
    return out;
  };
  return a2a_routes_.emplace(g, std::pair{links(g, e_.platform.spine), links(e_.platform.spine, g)}).first->second;
}

void KvMover::all_to_all_step(Phase phase, int instance, int first_gpu, const StepTime& st, double bytes, double seconds) {
  const PoolSpec& pool = phase == Phase::prefill ? e_.d.prefill : e_.d.decode;
  // only an instance spanning nodes has inter-node all-to-all bytes
  if (!pool.all_to_all_on_fabric || pool.ep <= e_.d.gpu.gpus_per_node) return;
  if (e_.opt.all_to_all_flows) inject_all_to_all(pool, first_gpu, st);
  else reserve_all_to_all(pool, first_gpu, holder_of(phase, instance), bytes, seconds);
}

// Each attention-TP group sends its inter-node bytes out through its NIC and its node's uplink and
// receives as many back: the rate, bytes / seconds, is held on each of those links in each
// direction (a node's uplink adds up its groups' rates). The step time stays the closed form.
void KvMover::reserve_all_to_all(const PoolSpec& pool, int first_gpu, int holder, double bytes, double seconds) {
  std::vector<std::pair<sg4::Link*, double>> rates;
  if (bytes > 0 && seconds > 0) {
    const double rate = bytes * pool.attn_tp / seconds;  // a TP group's NIC bytes per second, each direction
    for (int r = 0; r < pool.dp(); ++r) {
      const auto& [up, down] = a2a_route(e_.platform.endpoint(first_gpu + r * pool.attn_tp));
      for (auto* l : up) rates.emplace_back(l, rate);
      for (auto* l : down) rates.emplace_back(l, rate);
    }
  }
  a2a_held_.hold(holder, std::move(rates));
}

void KvMover::end_all_to_all(Phase phase, int instance) { a2a_held_.hold(holder_of(phase, instance), {}); }

}  // namespace servesim
