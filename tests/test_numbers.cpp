// Numbers users read, against values worked out by hand (issue #18): percentiles, goodput with each
// SLO bound missed on its own, K3's KV bytes at attention TP 1, 2 and 8.
#include "costmodels/memory.hpp"
#include "costmodels/step_cost.hpp"
#include "costmodels/percentile.hpp"
#include "helpers.hpp"
#include "sim/exporters/metrics.hpp"
#include "sim/simulation.hpp"
#include "scenarios/rng.hpp"

#include <gtest/gtest.h>

#include <map>

using namespace servesim;

// Linear interpolation between order statistics at f·(n − 1) (numpy's default).
TEST(Numbers, PercentilesOfOneTwoFourAndTwelveValues) {
  const std::vector<double> one = {5};
  EXPECT_DOUBLE_EQ(percentile_sorted(one, 0.5), 5);
  EXPECT_DOUBLE_EQ(percentile_sorted(one, 0.99), 5);
  const std::vector<double> two = {1, 3};  // x = f · 1
  EXPECT_DOUBLE_EQ(percentile_sorted(two, 0.5), 2);
  EXPECT_DOUBLE_EQ(percentile_sorted(two, 0.9), 2.8);
  EXPECT_DOUBLE_EQ(percentile_sorted(two, 0.99), 2.98);
  const std::vector<double> four = {1, 2, 3, 4};  // x = f · 3
  EXPECT_DOUBLE_EQ(percentile_sorted(four, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(percentile_sorted(four, 0.9), 3.7);
  EXPECT_NEAR(percentile_sorted(four, 0.99), 3.97, 1e-12);
  std::vector<double> twelve;
  for (int i = 1; i <= 12; ++i) twelve.push_back(10.0 * i);  // x = f · 11
  EXPECT_DOUBLE_EQ(percentile_sorted(twelve, 0.5), 65);         // 60 + 0.5 · 10
  EXPECT_NEAR(percentile_sorted(twelve, 0.9), 109, 1e-9);       // x = 9.9: 100 + 0.9 · 10
  EXPECT_NEAR(percentile_sorted(twelve, 0.99), 118.9, 1e-9);    // x = 10.89: 110 + 0.89 · 10
  // the summary uses the same rule on unsorted input, and reports the mean
  MetricsCollector m({2.0, 0.1}, 1, 1);
  for (double t : {4.0, 1.0, 3.0, 2.0}) {
    RequestRecord r;
    r.status = RequestStatus::completed, r.arrival_s = 0, r.admit_s = 0, r.prefill_end_s = t, r.first_token_s = t, r.done_s = t;
    r.output_tokens = 1;
    m.on_request(r);
  }
  m.on_end(10);
  EXPECT_DOUBLE_EQ(m.summary().ttft_s.p50, 2.5);
  EXPECT_DOUBLE_EQ(m.summary().ttft_s.p90, 3.7);
  EXPECT_DOUBLE_EQ(m.summary().ttft_s.mean, 2.5);
}

// SLO TTFT ≤ 2 s, TPOT ≤ 50 ms (tighter than the TTFT bound in seconds): a request missing only
// TPOT, one missing only TTFT, one meeting both. Only the last counts.
TEST(Numbers, GoodputCountsARequestOnlyWhenBothBoundsHold) {
  MetricsCollector m({2.0, 0.05}, 1, 1);
  auto req = [](std::uint64_t id, double ttft, double tpot) {
    RequestRecord r;
    r.id = id, r.status = RequestStatus::completed, r.arrival_s = 0, r.admit_s = 0, r.prefill_end_s = ttft, r.first_token_s = ttft;
    r.output_tokens = 11, r.generated_tokens = 11, r.done_s = ttft + 10 * tpot;
    return r;
  };
  m.on_request(req(0, 1.0, 0.1));   // TPOT 100 ms > 50 ms
  m.on_request(req(1, 3.0, 0.01));  // TTFT 3 s > 2 s
  m.on_request(req(2, 1.0, 0.04));  // both within
  m.on_end(10);
  EXPECT_EQ(m.summary().slo_met, 1);
  EXPECT_EQ(m.summary().slo_met_output_tokens, 11);
}

// K3 (scenarios/models/kimi-k3.json): 24 MLA layers × 576 BF16 latent values = 27,648 B per token,
// replicated on every attention-TP rank; 69 KDA layers × (96 heads × 128 × 128 fp32 state +
// 3 · 96 · 128 channels × (4 − 1) BF16 conv history) = 69 × 6,512,640 = 449,372,160 B per sequence,
// sharded over attention TP.
TEST(Numbers, KimiK3KvBytesAtAttentionTpOneTwoAndEight) {
  const ModelSpec k3 = test::model("kimi-k3");
  const double per_token = 24.0 * 576 * 2, state = 69.0 * (96.0 * 128 * 128 * 4 + 3.0 * 96 * 128 * 3 * 2);
  for (int tp : {1, 2, 8}) {
    const KvFootprint f = kv_footprint(k3, tp);
    EXPECT_DOUBLE_EQ(f.per_token_bytes, per_token) << "tp " << tp;
    EXPECT_NEAR(f.per_seq_bytes, state / tp, 1.0) << "tp " << tp;
    EXPECT_NEAR(kv_bytes(k3, 10000, tp), 10000 * per_token + state / tp, 1.0) << "tp " << tp;
  }
}


// Decode admission reserves prompt + output KV. The decode rank's budget is set to 1.5 × one
// request's whole KV (2,000 tokens): two prompts (1,000 tokens each) would fit, two whole
// reservations do not, so the second request's KV transfer starts only when the first is done.
TEST(Numbers, DecodeAdmissionReservesPromptPlusOutput) {
  DeploymentSpec d = test::tiny(1000);
  const double whole = kv_bytes(d.model, 2000, 1), prompt = kv_bytes(d.model, 1000, 1);
  ASSERT_LT(2 * prompt, 1.5 * whole);
  d.reserved_bytes_per_gpu += plan_gpu_memory(d, d.decode).kv_budget - 1.5 * whole;
  ASSERT_NEAR(plan_gpu_memory(d, d.decode).kv_budget, 1.5 * whole, 1.0);
  test::Records rec;
  Simulation sim(d, std::make_unique<test::ListSource>(std::vector<Request>{test::req(0, 0.0, 1000, 1000), test::req(1, 0.001, 1000, 1000)}), std::make_shared<test::ZeroCost>(), rec, {});
  sim.run();
  const RequestRecord &a = rec.by_id.at(0), &b = rec.by_id.at(1);
  ASSERT_EQ(b.status, RequestStatus::completed);
  EXPECT_GE(b.transfer_start_s, a.done_s - 1e-12);
  EXPECT_NEAR(b.transfer_start_s - b.prefill_end_s, a.done_s - b.prefill_end_s, 1e-9);  // decode_kv_wait
}

namespace {
class Transfers final : public EventSink {
 public:
  void on_transfer(const TransferEvent& e) override { bytes.push_back(e.bytes); }
  std::vector<double> bytes;
};
}  // namespace

// P→D transfer of K3 at decode attention TP 8: every TP rank gets the replicated MLA latent
// (1,000 tokens × 27,648 B) and its eighth of the KDA + conv state: 8 × 27,648,000 + 449,372,160
// = 670,556,160 B in one flow between the two TP groups.
TEST(Numbers, KimiK3TransferBytesAtDecodeAttentionTpEight) {
  DeploymentSpec d = test::deployment("kimi-k3", "h200", test::pool(1, 32, 8), test::pool(1, 32, 8));
  d.prefix_cache.enabled = false;
  Transfers t;
  Simulation sim(d, std::make_unique<test::ListSource>(std::vector<Request>{test::req(0, 0, 1000, 4)}), std::make_shared<test::ZeroCost>(), t, {});
  sim.run();
  ASSERT_EQ(t.bytes.size(), 1u);
  EXPECT_NEAR(t.bytes[0], 8 * 27648000.0 + 449372160.0, 1.0);
}

// Direct EP dispatch (DeepEP low-latency): one message per routed expert, experts spread evenly,
// a GPU's own experts cost no link. DeepSeek-V3 (top-8, hidden 7,168) at EP16 over 2 nodes of 8:
// per token 8 · 7/16 = 3.5 NVLink and 8 · 8/16 = 4 NIC messages; 128 tokens per GPU in BF16:
// 128 · 7,168 · 2 = 1,835,008 B per message set → 6,422,528 B NVLink, 7,340,032 B NIC per GPU,
// the node's uplink 8 × that.
TEST(Numbers, DirectDispatchLoadsCountOnlyTokensLeavingTheGpu) {
  const ModelSpec v3 = test::model("deepseek-v3");
  int fi = -1;
  for (size_t i = 0; i < v3.ffn_kinds.size(); ++i)
    if (v3.ffn_kinds[i].op == FfnOp::moe) fi = static_cast<int>(i);
  ASSERT_GE(fi, 0);
  ASSERT_EQ(v3.ffn_kinds[static_cast<size_t>(fi)].top_k, 8);
  ClusterSpec c;
  c.nodes = 2;
  InstanceShape shape;
  shape.ep = 16, shape.attn_tp = 1, shape.dispatch = EpDispatch::direct;
  const StepCostModel m(v3, std::make_shared<test::ZeroCost>(), fabric_params(c, test::gpu("h200")), shape, 0.0);
  const AllToAllLoad l = m.moe_alltoall_load(fi, 128, 128 * 16, DType::bf16);
  EXPECT_NEAR(l.intra_bytes, 3.5 * 1835008, 1e-6);
  EXPECT_NEAR(l.inter_bytes, 4.0 * 1835008, 1e-6);
  EXPECT_NEAR(l.node_inter_bytes, 8 * 4.0 * 1835008, 1e-6);
}

// The seeded stream itself, pinned: xoshiro256** seeded through splitmix64 (Blackman & Vigna), its
// first three outputs for seed 42 computed independently (a 20-line Python transcription of the
// published algorithms): 0x15780b2e0c2ec716, 0x6104d9866d113a7e, 0xae17533239e499a1; uniform() is
// the top 53 bits × 2⁻⁵³. A change here changes every seeded workload.
TEST(Numbers, TheSeededStreamStartsWithTheReferenceValues) {
  Rng r(42);
  EXPECT_EQ(r.next_u64(), 0x15780b2e0c2ec716ULL);
  EXPECT_EQ(r.next_u64(), 0x6104d9866d113a7eULL);
  Rng u(42);
  EXPECT_DOUBLE_EQ(u.uniform(), static_cast<double>(0x15780b2e0c2ec716ULL >> 11) * 0x1.0p-53);  // 0.0838629710598822
  EXPECT_NEAR(u.uniform(), 0.3789802506626686, 1e-16);
  EXPECT_NEAR(u.uniform(), 0.6800434110281394, 1e-16);
}

namespace {

// Everything a run reports per event, for the byte checks below.
class Ledger final : public EventSink {
 public:
  void on_request(const RequestRecord& r) override { req[r.id] = r; }
  void on_session(const SessionRecord& s) override { ses.push_back(s); }
  void on_transfer(const TransferEvent& e) override { transfers.push_back(e.bytes); }
  void on_memory(const MemoryEvent& e) override {
    double& p = e.role == Phase::prefill ? prefill_peak : decode_peak;
    p = std::max(p, e.kv_bytes_max);
  }
  std::map<std::uint64_t, RequestRecord> req;
  std::vector<SessionRecord> ses;
  std::vector<double> transfers;
  double prefill_peak = 0, decode_peak = 0;
};

// Two rounds of one session: 1,000 prompt tokens + 10 out, 1 s of think time, then 100 appended
// tokens + 10 out (the last round).
class TwoRounds final : public RequestSource {
 public:
  std::optional<Request> next() override {
    if (started_) return std::nullopt;
    started_ = true;
    return make(0, 0.0, 0, 1000);
  }
  std::optional<Request> follow_up(const Request& done, double t) override {
    if (done.last_round) return std::nullopt;
    return make(1, t + done.think_after_s, done.input_tokens + done.output_tokens, 100);
  }
  std::string describe() const override { return "two rounds"; }

 private:
  static Request make(int k, double t, long long history, long long append) {
    Request r;
    r.id = static_cast<std::uint64_t>(k), r.arrival_s = t, r.session = 0, r.round = k, r.history_tokens = history;
    r.input_tokens = history + append, r.output_tokens = 10, r.think_after_s = 1.0, r.last_round = k == 1;
    return r;
  }
  bool started_ = false;
};

}  // namespace

// Engine and session at attention TP > 1, bytes by hand. tests/data/tiny-hybrid.json: 2 MLA layers ×
// (128 + 16) BF16 values = 576 B per token, replicated on every TP rank; 2 KDA layers × (4 heads ×
// 32 × 32 fp32 state = 16,384 B + 3 · 4 · 32 channels × (4 − 1) BF16 conv columns = 2,304 B)
// = 37,376 B per sequence, sharded over attention TP. Prefill at EP2 / attention TP 2 (one DP rank
// of 2 GPUs), decode at EP2 / TP 1 (two DP ranks), KV tiers on.
//   round 0 (1,000 prompt + 10 out):
//     prefill reservation (TP 2) 576,000 + 18,688 = 594,688 B
//     decode reservation (TP 1, prompt + output) 581,760 + 37,376 = 619,136 B
//     P→D transfer (decode TP 1) 576,000 + 37,376 = 613,376 B
//     offload of the session's KV (one copy, TP 1) 619,136 B
//   round 1 (1,010 history + 100 appended = 1,110 prompt + 10 out):
//     load of the 1,010 stored tokens into the TP-2 prefill group: each rank its copy of the
//       latent + its half of the state = 2 × (581,760 + 18,688) = 1,200,896 B
//     prefill reservation 639,360 + 18,688 = 658,048 B; decode 645,120 + 37,376 = 682,496 B
//     transfer 639,360 + 37,376 = 676,736 B
// The session's idle time is its 1 s of think time; its decode time is the sum over its rounds of
// last token − first token.
TEST(Numbers, HybridSessionAtAttentionTpTwoByHand) {
  DeploymentSpec d = test::tiny(4096, true);
  d.model = load_model(test::data("tests/data/tiny-hybrid.json"));
  d.prefill = test::pool(1, 2, 2);
  d.decode = test::pool(1, 2, 1);
  d.prefill.step_overhead_s = 0.010, d.decode.step_overhead_s = 0.002;
  d.prefill.max_batch_tokens = d.prefill.chunk_tokens = 4096;
  d.cluster.nodes = required_nodes(d);
  validate_deployment(d, "hybrid");
  Ledger led;
  Simulation sim(d, std::make_unique<TwoRounds>(), std::make_shared<test::ZeroCost>(), led, {});
  const RunTotals t = sim.run();
  ASSERT_EQ(led.req.size(), 2u);
  ASSERT_EQ(led.req.at(1).status, RequestStatus::completed);
  ASSERT_EQ(led.transfers.size(), 2u);
  EXPECT_NEAR(led.transfers[0], 613376, 1e-6);
  EXPECT_NEAR(led.transfers[1], 676736, 1e-6);
  EXPECT_NEAR(t.transfer_bytes, 613376 + 676736, 1e-6);
  EXPECT_NEAR(led.prefill_peak, 658048, 1e-6);
  EXPECT_NEAR(led.decode_peak, 682496, 1e-6);
  EXPECT_EQ(t.offloads, 1);
  EXPECT_NEAR(t.offload_bytes, 619136, 1e-6);
  EXPECT_EQ(t.loads_l2, 1);
  EXPECT_NEAR(t.load_l2_bytes, 1200896, 1e-6);
  EXPECT_EQ(t.tokens_l2, 1010);
  EXPECT_EQ(led.req.at(1).cached_tokens, 1010);
  EXPECT_EQ(led.req.at(1).loaded_tokens, 1010);
  EXPECT_EQ(led.req.at(1).load_tier, 2);
  ASSERT_EQ(led.ses.size(), 1u);
  const SessionRecord& s = led.ses[0];
  EXPECT_EQ(s.status, RequestStatus::completed);
  EXPECT_EQ(s.rounds, 2);
  const RequestRecord &r0 = led.req.at(0), &r1 = led.req.at(1);
  EXPECT_NEAR(r1.arrival_s - r0.done_s, 1.0, 1e-9);  // the think time
  EXPECT_NEAR(s.idle_s, 1.0, 1e-9);
  EXPECT_NEAR(s.decode_s, (r0.done_s - r0.first_token_s) + (r1.done_s - r1.first_token_s), 1e-9);
  EXPECT_NEAR(s.end_s - s.start_s, r1.done_s, 1e-9);
  EXPECT_GT(r0.done_s - r0.first_token_s, 9 * 0.002);  // 9 decode steps of at least their overhead
}

// V4-Flash (scenarios/models/deepseek-v4-flash.json) at 10,000 tokens, by hand: 21 CSA layers ×
// (⌊10,000/4⌋ = 2,500 entries × (584 + 132) B + a 128-entry window × 584 B + compressor state
// 2 · 4 · 2 · 512 · 4 + indexer compressor 2 · 4 · 2 · 128 · 4) = 21 × 1,905,712 = 40,019,952 B;
// 20 HCA layers × (⌊10,000/128⌋ = 78 entries × 584 + 74,752 + 2 · 128 · 512 · 4) = 12,891,840 B;
// 2 SWA layers × 74,752 = 149,504 B: 53,061,296 B, the same at every attention TP (no state is
// sharded). DeepSeek-V3: 61 MLA layers × 576 BF16 values × 10,000 = 702,720,000 B at every TP.
TEST(Numbers, V4FlashAndV3KvBytesAtAttentionTpOneTwoAndEight) {
  const ModelSpec flash = test::model("deepseek-v4-flash"), v3 = test::model("deepseek-v3");
  for (int tp : {1, 2, 8}) {
    EXPECT_DOUBLE_EQ(kv_bytes(flash, 10000, tp), 53061296.0) << "tp " << tp;
    EXPECT_DOUBLE_EQ(kv_bytes(v3, 10000, tp), 702720000.0) << "tp " << tp;
  }
}

// The model's context limit is inclusive: tiny-moe's 4,096 tokens as 4,000 prompt + 96 output are
// served; 4,001 + 96 = 4,097 are rejected, the reason naming both numbers.
TEST(Numbers, AContextOfExactlyTheModelsMaximumIsServed) {
  const DeploymentSpec d = test::tiny(1000);
  test::Records rec;
  Simulation sim(d, std::make_unique<test::ListSource>(std::vector<Request>{test::req(0, 0.0, 4000, 96), test::req(1, 0.0, 4001, 96)}),
                 std::make_shared<test::ZeroCost>(), rec, {});
  const RunTotals t = sim.run();
  EXPECT_EQ(rec.by_id.at(0).status, RequestStatus::completed);
  EXPECT_EQ(rec.by_id.at(1).status, RequestStatus::rejected);
  EXPECT_EQ(rec.by_id.at(1).reason, "context exceeds the model's 4096 tokens: 4097 tokens");
  EXPECT_EQ(t.completed, 1);
  EXPECT_EQ(t.rejected, 1);
}

// summary.json counts rejections by the reason's class (the text before ": "): three oversized
// requests of three different contexts and one over the decode KV budget make two classes, 3 + 1.
TEST(Numbers, RejectionsAreCountedByTheirReasonsClass) {
  MetricsCollector m({2.0, 0.1}, 1, 1);
  for (const char* why : {"context exceeds the model's 4096 tokens: 4097 tokens", "context exceeds the model's 4096 tokens: 5000 tokens",
                          "context exceeds the model's 4096 tokens: 9223372036854775807 tokens", "prompt+output KV exceeds a decode rank's KV budget"}) {
    RequestRecord r;
    r.status = RequestStatus::rejected, r.reason = why;
    m.on_request(r);
  }
  m.on_end(1);
  const auto& by = m.summary().rejected_reasons;
  ASSERT_EQ(by.size(), 2u);
  EXPECT_EQ(by.at("context exceeds the model's 4096 tokens"), 3);
  EXPECT_EQ(by.at("prompt+output KV exceeds a decode rank's KV budget"), 1);
  EXPECT_EQ(m.summary().rejected, 4);
}

// A request still decoding at the horizon reports the tokens it has: the prefill's one plus one per
// finished decode step. tiny: prefill 10 ms, KV flow 6 µs + 1,000 × 1,152 B / 50 GB/s = 29.04 µs,
// decode steps of 2 ms; a horizon 10.1 ms after the first token leaves 5 steps done: 6 tokens.
TEST(Numbers, AnInFlightRequestReportsTheTokensGeneratedByTheHorizon) {
  const DeploymentSpec d = test::tiny(1000);
  test::Records rec;
  RunOptions o;
  const double first = 0.010 + 6e-6 + 1000 * 1152.0 / 50e9;
  o.horizon_s = first + 0.0101;
  Simulation sim(d, std::make_unique<test::ListSource>(std::vector<Request>{test::req(0, 0.0, 1000, 100)}), std::make_shared<test::ZeroCost>(), rec, o);
  const RunTotals t = sim.run();
  EXPECT_EQ(t.in_flight, 1);
  const RequestRecord& r = rec.by_id.at(0);
  EXPECT_EQ(r.status, RequestStatus::in_flight);
  EXPECT_NEAR(r.first_token_s, first, 1e-9);
  EXPECT_EQ(r.generated_tokens, 6);
}

// The summary's hit-rate split: a request that found 100 tokens cached, 60 of them loaded back
// from host DRAM (L2), counts 40 for L1 and 60 for L2.
TEST(Numbers, CachedTokensSplitIntoGpuAndHostHits) {
  MetricsCollector m({2.0, 0.1}, 1, 1);
  RequestRecord r;
  r.status = RequestStatus::completed, r.arrival_s = 0, r.admit_s = 0, r.prefill_end_s = 1, r.first_token_s = 1, r.done_s = 1;
  r.input_tokens = 500, r.cached_tokens = 100, r.loaded_tokens = 60, r.load_tier = 2, r.output_tokens = r.generated_tokens = 1;
  m.on_request(r);
  m.on_end(10);
  EXPECT_EQ(m.summary().tokens_l1, 40);
  EXPECT_EQ(m.summary().tokens_l2, 60);
  EXPECT_EQ(m.summary().tokens_l3, 0);
}

// The KV peak a pool reports is its busiest rank's, not the ranks' mean: ranks holding 1 and 3 GB
// (mean 2 GB) peak at 3 GB.
TEST(Numbers, KvPeakIsTheBusiestRanks) {
  MetricsCollector m({2.0, 0.1}, 1, 1);
  MemoryEvent e;
  e.role = Phase::decode, e.instance = 0, e.t_s = 0, e.kv_bytes_mean = 2e9, e.kv_bytes_max = 3e9;
  m.on_memory(e);
  e.role = Phase::prefill, e.kv_bytes_mean = 1e9, e.kv_bytes_max = 1.5e9;
  m.on_memory(e);
  m.on_end(10);
  EXPECT_DOUBLE_EQ(m.summary().decode_kv_peak, 3e9);
  EXPECT_DOUBLE_EQ(m.summary().prefill_kv_peak, 1.5e9);
}

// A decode rank runs at most max_running sequences: with max_running = 1 the second request's
// first decode step waits for the first request's last. tiny: request 0's first token at
// 10 ms + 29.04 µs (6 µs + 1,000 × 1,152 B / 50 GB/s), then 49 steps of 2 ms; request 1 (arrived
// at 1 ms) is prefilled by 20 ms and transferred by 20.029 ms but joins only at request 0's end.
// The 49 steps run as one SimGrid wait (RunOptions::decode_steps_per_event), whose wake-up SimGrid
// rounds to its timing precision (precision/timing, 1e-9 s): those times are checked to 1e-8 s.
TEST(Numbers, DecodeRunsAtMostMaxRunningSequences) {
  DeploymentSpec d = test::tiny(1000);
  d.decode.max_running = 1;
  test::Records rec;
  Simulation sim(d, std::make_unique<test::ListSource>(std::vector<Request>{test::req(0, 0.0, 1000, 50), test::req(1, 0.001, 1000, 50)}),
                 std::make_shared<test::ZeroCost>(), rec, {});
  sim.run();
  const RequestRecord &a = rec.by_id.at(0), &b = rec.by_id.at(1);
  const double first = 0.010 + 6e-6 + 1000 * 1152.0 / 50e9;
  EXPECT_NEAR(a.first_token_s, first, 1e-9);
  EXPECT_NEAR(a.done_s, first + 49 * 0.002, 1e-8);
  EXPECT_NEAR(b.transfer_end_s, 0.020 + 6e-6 + 1000 * 1152.0 / 50e9, 1e-9);
  EXPECT_NEAR(b.first_token_s, a.done_s, 1e-9);
  EXPECT_NEAR(b.done_s, a.done_s + 49 * 0.002, 1e-8);
}

// Shortest-first prefill: prompts of 900, 300 and 600 tokens queued at t = 0 with a 1,000-token
// budget: the first step takes 300 + 600 and 100 of the 900 (all three end or advance in it); the
// 300 and 600 finish at 10 ms, the 900 at 20 ms (FCFS would finish the 900 first).
TEST(Numbers, ShortestFirstPrefillTakesTheShortPromptsFirst) {
  DeploymentSpec d = test::tiny(1000);
  d.batch_scheduler = "shortest_first";
  test::Records rec;
  Simulation sim(d, std::make_unique<test::ListSource>(std::vector<Request>{test::req(0, 0.0, 900, 2), test::req(1, 0.0, 300, 2), test::req(2, 0.0, 600, 2)}),
                 std::make_shared<test::ZeroCost>(), rec, {});
  sim.run();
  EXPECT_NEAR(rec.by_id.at(1).prefill_end_s, 0.010, 1e-9);
  EXPECT_NEAR(rec.by_id.at(2).prefill_end_s, 0.010, 1e-9);
  EXPECT_NEAR(rec.by_id.at(0).prefill_end_s, 0.020, 1e-9);
}

// Warm-up 10 s, end 19 s. The GPU time is the window's, so are the tokens (review finding: $/M
// tokens 7x too high when a warm-up arrival's tokens made in the window were left out).
//  - warm-up arrival, prefill ended at 7, decoding 8 → 18 with 11 tokens: (18 − 10)/(18 − 8) × 11 = 8.8 → 9
//  - warm-up arrival, prefill ended at 12 (1,000 prompt tokens count), in flight since its first
//    token at 9 with 6 tokens by the end: (19 − 10)/(19 − 9) × 6 = 5.4 → 5
//  - window arrival: its 3 tokens and 500 prompt tokens, whole
//  - warm-up arrival done before the window: nothing
TEST(Numbers, TokensMadeInTheWindowCountAgainstTheWindowsGpuTime) {
  MetricsCollector m({2.0, 0.1}, 1, 1, 10.0);
  RequestRecord a;
  a.status = RequestStatus::completed, a.arrival_s = 1, a.admit_s = 1, a.prefill_end_s = 7, a.first_token_s = 8, a.done_s = 18;
  a.input_tokens = 700, a.output_tokens = a.generated_tokens = 11;
  RequestRecord b;
  b.status = RequestStatus::in_flight, b.arrival_s = 2, b.admit_s = 2, b.prefill_end_s = 12, b.first_token_s = 9;
  b.input_tokens = 1000, b.output_tokens = 50, b.generated_tokens = 6;
  RequestRecord c;
  c.status = RequestStatus::completed, c.arrival_s = 11, c.admit_s = 11, c.prefill_end_s = 12, c.first_token_s = 12, c.done_s = 13;
  c.input_tokens = 500, c.output_tokens = c.generated_tokens = 3;
  RequestRecord d;
  d.status = RequestStatus::completed, d.arrival_s = 0, d.admit_s = 0, d.prefill_end_s = 1, d.first_token_s = 1, d.done_s = 5;
  d.input_tokens = 400, d.output_tokens = d.generated_tokens = 4;
  for (const auto* r : {&a, &b, &c, &d}) m.on_request(*r);
  m.on_end(19);
  EXPECT_EQ(m.summary().output_tokens, 9 + 5 + 3);
  EXPECT_EQ(m.summary().input_tokens, 1000 + 500);
  EXPECT_EQ(m.summary().arrived, 1);  // the measured requests are still the window's arrivals
  EXPECT_EQ(m.summary().warmup_arrived, 3);
}
