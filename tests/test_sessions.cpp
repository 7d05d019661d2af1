// Agent sessions, prefix reuse and KV tiers in the engine, against hand arithmetic and closed forms.
// A zero-latency cost model makes every batch step last its fixed overhead, so times follow from
// step overheads, KV bytes and link figures alone.
#include "costmodels/memory.hpp"
#include "helpers.hpp"
#include "workloads/source.hpp"
#include "sim/simulation.hpp"
#include "workloads/agent.hpp"
#include "workloads/mooncake.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <filesystem>
#include <map>

using namespace servesim;

namespace {

class Records final : public EventSink {
 public:
  void on_request(const RequestRecord& r) override { req[r.id] = r; }
  void on_session(const SessionRecord& s) override { ses.push_back(s); }
  std::map<std::uint64_t, RequestRecord> req;
  std::vector<SessionRecord> ses;
};

// One session per entry: rounds of (appended tokens, output tokens, think after), round 0 at `start`.
struct Round {
  long long append, output;
  double think;
};
class SessionList final : public RequestSource {
 public:
  SessionList(double start, std::vector<Round> rounds) : start_(start), rounds_(std::move(rounds)) {}
  std::optional<Request> next() override {
    if (started_) return std::nullopt;
    started_ = true;
    return make(0, start_, 0);
  }
  std::optional<Request> follow_up(const Request& done, double t) override {
    if (done.last_round) return std::nullopt;
    return make(done.round + 1, t + done.think_after_s, done.input_tokens + done.output_tokens);
  }
  std::string describe() const override { return "session list"; }

 private:
  Request make(int k, double t, long long history) {
    Request r;
    r.id = id_++, r.arrival_s = t, r.session = 0, r.round = k, r.history_tokens = history;
    r.input_tokens = history + rounds_[static_cast<size_t>(k)].append;
    r.output_tokens = rounds_[static_cast<size_t>(k)].output;
    r.think_after_s = rounds_[static_cast<size_t>(k)].think;
    r.last_round = k + 1 == static_cast<int>(rounds_.size());
    return r;
  }
  double start_;
  std::vector<Round> rounds_;
  bool started_ = false;
  std::uint64_t id_ = 0;
};

DeploymentSpec tiny_with_tiers() { return test::tiny(4096, true); }

}  // namespace

// `eff`: the KV copies' share of NIC line rate between nodes (GpuSpec::kv_transfer_efficiency): the
// prefill -> decode transfer and the load-back from the decode node's host DRAM cross nodes and take
// bytes / (eff x 50 GB/s); the offload stays in its node (PCIe) at line rate.
void three_rounds(double eff) {
  DeploymentSpec d = tiny_with_tiers();
  d.gpu.kv_transfer_efficiency = eff;
  Records rec;
  Simulation sim(d, std::make_unique<SessionList>(0.0, std::vector<Round>{{1000, 10, 1.0}, {100, 10, 1.0}, {100, 10, 0.0}}),
                 std::make_shared<test::ZeroCost>(), rec, {});
  const RunTotals t = sim.run();
  ASSERT_EQ(rec.req.size(), 3u);
  ASSERT_EQ(rec.ses.size(), 1u);
  // link figures (H200 file): NIC 50 GB/s, 3 µs per NIC hop; PCIe 64 GB/s, 1 µs; the host NIC
  // (8 × 50 GB/s) is not the bottleneck of a load-back into one GPU
  auto kv = [](long long L) { return 1152.0 * static_cast<double>(L); };  // tiny-moe: 4 MLA layers × 144 values × 2 B
  auto xfer = [&](long long L) { return 6e-6 + kv(L) / (eff * 50e9); };  // prefill GPU → decode GPU, other node
  auto offload = [&](long long L) { return 1e-6 + kv(L) / 64e9; };         // decode GPU → its host DRAM
  auto load = [&](long long L) { return 6e-6 + kv(L) / (eff * 50e9); };   // decode node's DRAM → prefill GPU
  const long long p0 = 1000, p1 = 1110, p2 = 1220;                    // prompts: history + appended
  double now = 0, gpu = 0, decode = 0;
  // round 0: prefill step, transfer, 9 decode steps, then offload of 1,010 tokens
  double first = now + 0.010 + xfer(p0), done = first + 9 * 0.002;
  EXPECT_NEAR(rec.req.at(0).first_token_s, first, 1e-9);
  EXPECT_NEAR(rec.req.at(0).done_s, done, 1e-9);
  gpu += done + offload(p0 + 10) - now, decode += done - first;
  // round 1 arrives 1 s after round 0's last token; its 1,010-token history is loaded back first
  now = done + 1.0;
  EXPECT_NEAR(rec.req.at(1).arrival_s, now, 1e-9);
  EXPECT_NEAR(rec.req.at(1).load_end_s - rec.req.at(1).load_start_s, load(p0 + 10), 1e-9);
  EXPECT_EQ(rec.req.at(1).loaded_tokens, 1010);
  first = now + load(p0 + 10) + 0.010 + xfer(p1), done = first + 9 * 0.002;
  EXPECT_NEAR(rec.req.at(1).first_token_s, first, 1e-9);
  gpu += done + offload(p1 + 10) - now, decode += done - first;
  // round 2: the last one: no offload, its KV is freed when it ends
  now = done + 1.0;
  first = now + load(p1 + 10) + 0.010 + xfer(p2), done = first + 9 * 0.002;
  EXPECT_NEAR(rec.req.at(2).done_s, done, 1e-9);
  gpu += done - now, decode += done - first;
  const SessionRecord& s = rec.ses.front();
  EXPECT_EQ(s.rounds, 3);
  EXPECT_NEAR(s.end_s - s.start_s, done, 1e-9);
  EXPECT_NEAR(s.gpu_s, gpu, 1e-9);
  EXPECT_NEAR(s.decode_s, decode, 1e-9);  // W_decode = 3 × 9 × 2 ms
  EXPECT_NEAR(s.decode_s, 3 * 0.018, 1e-9);
  EXPECT_NEAR(s.idle_s, 2.0, 1e-9);  // W_idle: two 1-s tool waits
  // hit rates: 1,010 + 1,120 of the 3,330 prompt tokens came back from host DRAM
  EXPECT_EQ(t.tokens_l2, 2130);
  EXPECT_EQ(t.prompt_tokens_admitted, 3330);
  EXPECT_EQ(t.offloads, 2);
  EXPECT_DOUBLE_EQ(t.store_offloaded_bytes, kv(p0 + 10) + kv(p1 + 10));
  EXPECT_DOUBLE_EQ(t.store_left_bytes, t.store_offloaded_bytes);  // both loaded back, none held
}

TEST(Sessions, ThreeRoundsWithOffloadAndLoadBackByHand) { three_rounds(1.0); }

TEST(Sessions, ThreeRoundsAtTheTransferEnginesShareOfTheNics) { three_rounds(0.475); }

TEST(Sessions, StoreConservationUnderPressureWithDemotionAndDrops) {
  DeploymentSpec d = tiny_with_tiers();
  d.model = test::model("deepseek-v4-flash");
  d.prefill = test::pool(1, 8, 1);
  d.decode = test::pool(1, 8, 1);
  d.kv_tiers.host_bytes_per_node = 0.4e9;  // small L2 and L3: demotions and drops happen
  d.kv_tiers.storage_enabled = true;
  d.kv_tiers.storage_bytes_per_node = 0.8e9;
  d.kv_tiers.storage_bytes_per_s = 5e9;
  d.kv_tiers.storage_latency_s = 1e-4;
  d.cluster.nodes = required_nodes(d);
  validate_deployment(d, "d");
  WorkloadSpec w;
  w.kind = WorkloadSpec::Kind::agent;
  w.concurrency = 40;
  w.ramp_s = 5;
  w.rounds.kind = Dist::Kind::constant, w.rounds.value = 6;
  w.first_prompt_tokens.kind = Dist::Kind::constant, w.first_prompt_tokens.value = 20000;
  w.append_tokens.kind = Dist::Kind::constant, w.append_tokens.value = 400;
  w.output_tokens.kind = Dist::Kind::constant, w.output_tokens.value = 50;
  w.think_s.kind = Dist::Kind::exponential, w.think_s.mean = 2.0, w.think_s.max = 60;
  Records rec;
  RunOptions o;
  o.horizon_s = 40;
  Simulation sim(d, make_source(w, 9), std::make_shared<test::ZeroCost>(), rec, o);
  const RunTotals t = sim.run();
  EXPECT_GT(t.demote_bytes, 0);
  EXPECT_GT(t.store_dropped_bytes, 0);
  EXPECT_GT(t.loads_l2 + t.loads_l3, 0);
  // every object offloaded is held in L2/L3 at the end or has left (loaded back or dropped)
  EXPECT_NEAR(t.store_offloaded_bytes, t.store_held_bytes + t.store_left_bytes, 1e-6 * t.store_offloaded_bytes);
  // every arrival ends exactly once
  EXPECT_EQ(static_cast<long long>(rec.req.size()), t.arrivals);
  EXPECT_EQ(t.completed + t.rejected + t.in_flight, t.arrivals);
  // every session that started is reported once
  EXPECT_EQ(static_cast<long long>(rec.ses.size()), t.sessions);
}

namespace {

// Mooncake rows replayed in file order, `gap` seconds apart (spread far apart so that every
// prefill, transfer and cache insert is done before the next arrival).
class Spread final : public RequestSource {
 public:
  Spread(const std::string& path, double gap) : r_(path, 1.0, 0.0, 512, 0, 1), gap_(gap) {}
  std::optional<Request> next() override {
    auto q = r_.next();
    if (q) q->arrival_s = gap_ * static_cast<double>(q->id);
    return q;
  }
  std::string describe() const override { return "spread"; }

 private:
  MooncakeReader r_;
  double gap_;
};

RunTotals replay_unlimited(std::unique_ptr<RequestSource> src) {
  DeploymentSpec d;
  d.name = "v3";
  d.model = test::model("deepseek-v3");  // pure MLA: any cached block boundary is resumable
  d.gpu = test::gpu("h200");
  d.gpu.hbm_bytes = 1e15;  // unlimited KV capacity
  d.prefill = test::pool(1, 8, 8);  // one DP rank: one prefix cache sees every request
  d.decode = test::pool(1, 8, 8);
  d.cluster.nodes = required_nodes(d);
  validate_deployment(d, "d");
  Records rec;
  Simulation sim(d, std::move(src), std::make_shared<test::ZeroCost>(), rec, {});
  return sim.run();
}

}  // namespace

TEST(PrefixReuse, SpreadArrivalsReproduceTheClosedFormExactly) {
  const std::string path = test::shared_traces() + "/mooncake/conversation_trace.jsonl";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent";
  const RunTotals t = replay_unlimited(std::make_unique<Spread>(path, 100.0));
  EXPECT_EQ(t.prefix_lookup_blocks, t.trace_blocks);
  EXPECT_EQ(t.prefix_hit_blocks, t.trace_reuse_blocks);
  EXPECT_NEAR(static_cast<double>(t.prefix_hit_blocks) / t.prefix_lookup_blocks, 0.3664, 0.00005);  // issue #6
}

TEST(PrefixReuse, TimedReplayCanOnlyFindLess) {
  const std::string path = test::shared_traces() + "/mooncake/conversation_trace.jsonl";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent";
  const RunTotals t = replay_unlimited(std::make_unique<MooncakeReader>(path, 1.0, 0.0, 512, 0, 1));
  EXPECT_EQ(t.trace_reuse_blocks * 10000 / t.trace_blocks, 3664);
  EXPECT_LE(t.prefix_hit_blocks, t.trace_reuse_blocks);
  EXPECT_GT(t.prefix_hit_blocks, t.trace_reuse_blocks * 9 / 10);  // most reuse is found in time
}

TEST(Sessions, ResidencyAtTheHorizonCountsTheRoundInProgress) {
  // the run stops halfway through round 0's decode: its GPU time and decode time up to the horizon
  // belong to the session (else the measured residency would be biased low)
  const DeploymentSpec d = tiny_with_tiers();
  Records rec;
  RunOptions o;
  const double first = 0.010 + 6e-6 + 1152.0 * 1000 / 50e9;  // tiny-moe: 1,152 B per token
  o.horizon_s = first + 0.0101;  // 5 of its 99 decode steps done
  Simulation sim(d, std::make_unique<SessionList>(0.0, std::vector<Round>{{1000, 100, 1.0}, {100, 10, 0.0}}), std::make_shared<test::ZeroCost>(), rec, o);
  sim.run();
  ASSERT_EQ(rec.ses.size(), 1u);
  EXPECT_EQ(rec.ses[0].status, RequestStatus::in_flight);
  EXPECT_NEAR(rec.ses[0].gpu_s, o.horizon_s, 1e-9);           // admitted at 0, still on the GPU
  EXPECT_NEAR(rec.ses[0].decode_s, o.horizon_s - first, 1e-9);  // decoding since its first token
  EXPECT_NEAR(rec.ses[0].end_s - rec.ses[0].start_s, o.horizon_s, 1e-9);
}

namespace {

// Request 0 (60K tokens) finishes its prefill while request 1 (200K tokens) is still being prefilled
// on another DP rank of the same 2-node EP16 instance: request 0's KV leaves through its GPU's NIC
// while every prefill step's all-to-all crosses the NICs too. Returns request 0's transfer time.
double first_transfer_s(bool on_fabric, double* uncontended, double kv_efficiency = 0) {
  DeploymentSpec d;
  d.name = "flash";
  d.model = test::model("deepseek-v4-flash");
  d.gpu = test::gpu("h200");
  if (kv_efficiency > 0) d.gpu.kv_transfer_efficiency = kv_efficiency;
  d.prefill = test::pool(1, 16, 1);
  d.decode = test::pool(1, 16, 1);
  d.prefill.two_batch_overlap = d.decode.two_batch_overlap = false;
  d.prefill.all_to_all_on_fabric = d.decode.all_to_all_on_fabric = on_fabric;
  d.prefix_cache.enabled = false;
  d.router = "round_robin";
  d.cluster.nodes = required_nodes(d);
  validate_deployment(d, "d");
  Request a, b;
  a.id = 0, a.arrival_s = 0, a.input_tokens = 60000, a.output_tokens = 2;
  b.id = 1, b.arrival_s = 0, b.input_tokens = 200000, b.output_tokens = 2;
  class Two final : public RequestSource {
   public:
    Two(Request x, Request y) : q_{x, y} {}
    std::optional<Request> next() override {
      if (i_ >= 2) return std::nullopt;
      return q_[i_++];
    }
    std::string describe() const override { return "two"; }

   private:
    Request q_[2];
    int i_ = 0;
  };
  Records rec;
  Simulation sim(d, std::make_unique<Two>(a, b), std::make_shared<test::ZeroCost>(), rec, {});
  sim.run();
  const RequestRecord& r = rec.req.at(0);
  EXPECT_LT(r.transfer_start_s, rec.req.at(1).prefill_end_s);  // the transfer overlaps request 1's prefill
  // alone on its NICs: NIC latency twice + bytes at the transfer engine's share of 50 GB/s (TP 1:
  // one GPU sends, one receives; the copy crosses nodes)
  *uncontended = 6e-6 + kv_bytes(d.model, 60000, 1) / (d.gpu.kv_transfer_efficiency * 50e9);
  return r.first_token_s - r.transfer_start_s;
}

}  // namespace

TEST(AllToAllOnFabric, OffTheKvTransferRunsAtTheTransferEnginesRate) {
  double hand = 0;
  const double t = first_transfer_s(false, &hand);
  EXPECT_EQ(test::gpu("h200").kv_transfer_efficiency, 0.475);  // Mooncake: 190 GB/s on 8 x 400 Gb/s
  EXPECT_NEAR(t, 6e-6 + kv_bytes(test::model("deepseek-v4-flash"), 60000, 1) / (0.475 * 50e9), 1e-9);
  EXPECT_NEAR(t, hand, 1e-9);
}

// At efficiency 1 the same copy runs at line rate (one simulation per test: SimGrid allows one engine
// per process).
TEST(AllToAllOnFabric, OffTheKvTransferAtEfficiencyOneRunsAtLineRate) {
  double line = 0;
  const double t1 = first_transfer_s(false, &line, 1.0);
  EXPECT_NEAR(t1, 6e-6 + kv_bytes(test::model("deepseek-v4-flash"), 60000, 1) / 50e9, 1e-9);
  EXPECT_NEAR(t1, line, 1e-9);
}

TEST(AllToAllOnFabric, OnTheKvTransferSharesTheNicsWithEpTraffic) {
  double hand = 0;
  const double busy = first_transfer_s(true, &hand);
  std::printf("transfer at line rate %.6f s, with EP traffic %.6f s\n", hand, busy);
  // request 1's prefill steps move more all-to-all bytes per second than half the NIC, so under
  // max-min sharing (and the held bandwidth) the copy gets half of it: twice the bytes' time
  EXPECT_NEAR(busy, 6e-6 + 2 * (hand - 6e-6), 1e-6) << "line rate " << hand << " s, with EP traffic on the NICs " << busy << " s";
}

namespace {

// At attention TP 2 a DP rank is a TP group of two GPUs with one aggregate endpoint (a 2 × 50 GB/s
// NIC) that carries both its KV transfers and its share of the all-to-all, the group's inter-node
// bytes, twice one GPU's. Host time, kernels and all-reduces cost nothing and nothing overlaps, so
// request 1's prefill steps (chunks of kChunk tokens) are back-to-back all-to-alls at
// R = 2 · (one GPU's inter-node bytes) / (the step's all-to-all time) during the whole of request
// 0's transfer. Returns the transfer time; lo = the NIC minus R (the outbound all-to-all alone),
// hi = the NIC minus 2R (as if the inbound one shared the link too).
double tp2_transfer_s(bool flows, double* lo, double* hi) {
  const long long kChunk = 128;  // small steps: the all-to-all stays well below the NIC's rate
  DeploymentSpec d;
  d.name = "flash-tp2";
  d.model = test::model("deepseek-v4-flash");
  d.gpu = test::gpu("h200");
  d.gpu.kernel_launch_s = d.gpu.graph_launch_s = 0;
  d.gpu.allreduce_call_s = 0, d.gpu.allreduce_bytes_per_s = 1e30;  // the TP all-reduces take no time
  d.prefill = test::pool(1, 16, 2);
  d.decode = test::pool(1, 16, 2);
  for (PoolSpec* p : {&d.prefill, &d.decode}) {
    p->two_batch_overlap = false, p->all_to_all_on_fabric = true, p->step_overhead_s = 0;
    p->expert_imbalance = 1.0;  // balanced routing: every step of one chunk moves the same bytes
  }
  d.prefill.chunk_tokens = d.prefill.max_batch_tokens = kChunk;
  d.prefix_cache.enabled = false;
  d.router = "round_robin";
  d.cluster.nodes = required_nodes(d);
  validate_deployment(d, "d");
  std::vector<Request> reqs(2);
  reqs[0].id = 0, reqs[0].input_tokens = 60000, reqs[0].output_tokens = 2;
  reqs[1].id = 1, reqs[1].input_tokens = 150000, reqs[1].output_tokens = 2;
  Records rec;
  RunOptions opt;
  opt.all_to_all_flows = flows;
  Simulation sim(d, std::make_unique<test::ListSource>(reqs), std::make_shared<test::ZeroCost>(), rec, opt);
  sim.run();
  const RequestRecord& r = rec.req.at(0);
  const double t = r.first_token_s - r.transfer_start_s;
  EXPECT_LT(r.first_token_s, rec.req.at(1).prefill_end_s);  // request 1 prefills during the whole transfer
  // one of request 1's steps: kChunk tokens on one of the 8 DP ranks
  const StepCostModel sc(d.model, std::make_shared<test::ZeroCost>(), fabric_params(d.cluster, d.gpu), instance_shape(d, d.prefill), 0.0);
  std::vector<std::vector<SeqWork>> ranks(8);
  ranks[0].push_back({kChunk, 100000, false});
  const StepTime st = sc.step(ranks, Phase::prefill);
  EXPECT_NEAR(st.total_s, st.comm_total_s, 1e-12);  // the step is its all-to-all: the traffic never pauses
  const double R = 2 * st.a2a_inter_bytes_gpu / st.comm_total_s;
  EXPECT_LT(2 * R, 50e9);  // far below the NIC
  // every decode TP rank gets the latent KV; the copy's flow carries them / the transfer engine's
  // share of line rate (0.475), and that flow gets what the all-to-all leaves of the NIC
  const double bytes = kv_bytes(d.model, 60000, 2) * 2 / d.gpu.kv_transfer_efficiency;
  *lo = 6e-6 + bytes / (100e9 - R), *hi = 6e-6 + bytes / (100e9 - 2 * R);
  std::printf("R %.2f GB/s: transfer %.6f s in [%.6f, %.6f] (alone %.6f)\n", R / 1e9, t, *lo, *hi, 6e-6 + bytes / 100e9);
  return t;
}

}  // namespace

// Held bandwidth (the default): the transfer gets exactly the NIC minus the group's outbound rate R
// (the inbound one is held on the NIC's other direction); with one GPU's bytes per group (the bug
// of mutation M18) it would get 100 − R/2.
TEST(AllToAllOnFabric, AtAttentionTpTwoTheTransferGetsTheNicLessTheGroupsHeldRate) {
  double lo = 0, hi = 0;
  const double t = tp2_transfer_s(false, &lo, &hi);
  EXPECT_NEAR(t, lo, 1e-9 * lo);
}

// The per-flow check form (rate-capped mailbox flows): the capped outbound flow takes exactly R,
// as the held bandwidth does; the flows pause for a link latency between steps, when the transfer
// gets the whole NIC, so it ends up to ~0.1% sooner. (Before the caps were honoured, the flows
// burst at their fair share: 79.1 GB/s of 100, 1.55 R.)
TEST(AllToAllOnFabric, AtAttentionTpTwoTheTransferSharesTheNicWithTheGroupsEpFlows) {
  double lo = 0, hi = 0;
  const double t = tp2_transfer_s(true, &lo, &hi);
  EXPECT_NEAR(t, lo, 1e-3 * lo);
  EXPECT_LT(t, hi);
}

// A round that appends nothing (its prompt is exactly the stored history) still computes its last
// prompt token: 1,009 of the 1,010 stored tokens come back (1,009 × 1,152 B from host DRAM), one is
// prefilled, and the round completes.
TEST(Sessions, ARoundAppendingNothingReloadsAllButTheLastToken) {
  const DeploymentSpec d = tiny_with_tiers();
  Records rec;
  Simulation sim(d, std::make_unique<SessionList>(0.0, std::vector<Round>{{1000, 10, 1.0}, {0, 10, 0.0}}), std::make_shared<test::ZeroCost>(), rec, {});
  const RunTotals t = sim.run();
  ASSERT_EQ(rec.req.size(), 2u);
  const RequestRecord& r = rec.req.at(1);
  EXPECT_EQ(r.input_tokens, 1010);
  EXPECT_EQ(r.status, RequestStatus::completed);
  EXPECT_EQ(r.loaded_tokens, 1009);
  EXPECT_EQ(r.cached_tokens, 1009);
  EXPECT_NEAR(t.load_l2_bytes, 1009 * 1152.0, 1e-6);
}
