// The engine against hand arithmetic. A zero-latency cost model makes every step last exactly its
// fixed overhead, and a one-GPU test model (tests/data/tiny-moe.json) has no all-to-all, so
// TTFT and E2E follow from step overheads, the KV bytes and the fabric's link figures alone.
#include "costmodels/factory.hpp"
#include "costmodels/memory.hpp"
#include "helpers.hpp"
#include "workloads/source.hpp"
#include "sim/simulation.hpp"
#include "workloads/synthetic.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <filesystem>
#include <map>

using namespace servesim;

namespace {

using test::ListSource;
using test::Records;
using test::req;

DeploymentSpec tiny() { return test::tiny(1000); }

// tiny-moe's KV: 4 MLA layers × (128 + 16) BF16 latent values = 1,152 B per token (by hand from
// tests/data/tiny-moe.json, not through kv_bytes)
constexpr double kTinyKvPerToken = 4 * (128 + 16) * 2;

// one KV flow from node 0's GPU 0 to node 1's GPU 0: NIC up + NIC down latency, 50 GB/s NIC
double transfer_s(const DeploymentSpec&, long long input) { return 2 * 3e-6 + kTinyKvPerToken * static_cast<double>(input) / 50e9; }

}  // namespace

TEST(Engine, OneRequestTimesAreStepOverheadsPlusTheKvFlow) {
  const DeploymentSpec d = tiny();
  Records rec;
  Simulation sim(d, std::make_unique<ListSource>(std::vector<Request>{req(0, 0.5, 1000, 5)}), std::make_shared<test::ZeroCost>(), rec, {});
  const RunTotals t = sim.run();
  ASSERT_EQ(rec.emitted, 1);
  const RequestRecord& r = rec.by_id.at(0);
  EXPECT_EQ(r.status, RequestStatus::completed);
  EXPECT_NEAR(r.prefill_start_s, 0.5, 1e-9);
  EXPECT_NEAR(r.prefill_end_s, 0.51, 1e-9);
  EXPECT_NEAR(r.first_token_s, 0.51 + transfer_s(d, 1000), 1e-9);
  EXPECT_NEAR(r.ttft_s(), 0.01 + transfer_s(d, 1000), 1e-9);
  EXPECT_NEAR(r.e2e_s() - r.ttft_s(), 4 * 0.002, 1e-9);  // 4 decode steps after the prefill's token
  EXPECT_NEAR(r.tpot_s(), 0.002, 1e-9);
  EXPECT_EQ(t.prefill_steps, 1);
  EXPECT_EQ(t.decode_steps, 4);
  EXPECT_DOUBLE_EQ(t.transfer_bytes, 1152000.0);  // 1,000 tokens × 1,152 B
}

TEST(Engine, ChunkedPrefillAndFcfsQueueing) {
  DeploymentSpec d = tiny();
  d.prefill.chunk_tokens = 400;  // 1,000 tokens = 3 chunks of ≤ 400 (400, 400, 200)
  d.prefill.max_batch_tokens = 400;
  Records rec;
  Simulation sim(d, std::make_unique<ListSource>(std::vector<Request>{req(0, 0, 1000, 2), req(1, 0, 300, 2)}), std::make_shared<test::ZeroCost>(), rec, {});
  sim.run();
  // request 0 runs steps 1-3 (its last chunk of 200 leaves 200 tokens of budget: request 1 starts
  // in step 3 and needs 300, so it finishes in step 4)
  EXPECT_NEAR(rec.by_id.at(0).prefill_end_s, 0.03, 1e-9);
  EXPECT_NEAR(rec.by_id.at(1).prefill_start_s, 0.02, 1e-9);
  EXPECT_NEAR(rec.by_id.at(1).prefill_end_s, 0.04, 1e-9);
  EXPECT_NEAR(rec.by_id.at(1).ttft_s(), 0.04 + transfer_s(d, 300), 1e-9);
}

TEST(Engine, RequestWaitsForDecodeKvAndTheWaitIsInItsTtft) {
  DeploymentSpec d = tiny();
  const double need = kTinyKvPerToken * (1000 + 50);
  // shrink the decode KV budget to 1.5 requests
  d.reserved_bytes_per_gpu += plan_gpu_memory(d, d.decode).kv_budget - 1.5 * need;
  ASSERT_NEAR(plan_gpu_memory(d, d.decode).kv_budget, 1.5 * need, 1.0);
  Records rec;
  Simulation sim(d, std::make_unique<ListSource>(std::vector<Request>{req(0, 0, 1000, 50), req(1, 0, 1000, 50)}), std::make_shared<test::ZeroCost>(), rec, {});
  sim.run();
  const RequestRecord &a = rec.by_id.at(0), &b = rec.by_id.at(1);
  EXPECT_NEAR(b.prefill_end_s, 0.02, 1e-9);
  EXPECT_NEAR(a.done_s, a.first_token_s + 49 * 0.002, 1e-9);
  // b's transfer can only start when a has finished and freed its KV
  EXPECT_NEAR(b.transfer_start_s, a.done_s, 1e-9);
  EXPECT_NEAR(b.first_token_s, a.done_s + transfer_s(d, 1000), 1e-9);
}

namespace {
  // two single-rank decode instances, each with KV room for 3,675 tokens (tiny-moe: 1,152 B each);
  // requests 0 and 1 (1,000 + 500 tokens) take one rank each; request 2 (1,000 + 2,000) then fits
  // nowhere (2,175 free on each): it waits holding the most free rank (a tie: instance 0, where
  // request 0 is). Requests 3 and 4 (1,000 + 50) finish prefill after it and go straight to the
  // other rank (SGLang: a head that does not fit blocks its own DP rank's queue only); request 2 is
  // admitted where it waited the moment request 0 frees it, not before.
void fits_nowhere_holds_one_rank(const char* router) {  // one simulation per test process
  {
    DeploymentSpec d = tiny();
    d.decode = test::pool(2, 1, 1);
    d.decode.step_overhead_s = 0.002;
    d.decode_router = router;
    d.cluster.nodes = required_nodes(d);
    d.reserved_bytes_per_gpu += plan_gpu_memory(d, d.decode).kv_budget - 3675 * kTinyKvPerToken;
    ASSERT_NEAR(plan_gpu_memory(d, d.decode).kv_budget, 3675 * kTinyKvPerToken, 1.0);
    validate_deployment(d, "tiny");
    Records rec;
    Simulation sim(d,
                   std::make_unique<ListSource>(std::vector<Request>{req(0, 0, 1000, 500), req(1, 0, 1000, 500), req(2, 0, 1000, 2000),
                                                                      req(3, 0, 1000, 50), req(4, 0, 1000, 50)}),
                   std::make_shared<test::ZeroCost>(), rec, {});
    sim.run();
    const RequestRecord &r0 = rec.by_id.at(0), &r1 = rec.by_id.at(1), &r2 = rec.by_id.at(2), &r3 = rec.by_id.at(3), &r4 = rec.by_id.at(4);
    ASSERT_NE(r0.decode_instance, r1.decode_instance) << router;
    for (const RequestRecord* r : {&r3, &r4}) {
      EXPECT_NEAR(r->transfer_start_s, r->prefill_end_s, 1e-9) << router << ": waited behind request 2";
      EXPECT_EQ(r->decode_instance, r1.decode_instance) << router << ": took the held rank";
    }
    EXPECT_GT(r2.transfer_start_s, r4.done_s) << router;
    EXPECT_NEAR(r2.transfer_start_s, r0.done_s, 1e-9) << router;
    EXPECT_EQ(r2.decode_instance, r0.decode_instance) << router;
    EXPECT_EQ(r2.status, RequestStatus::completed) << router;
  }
}
}  // namespace

namespace {
// decode: `ranks` single-rank instances with KV room for 3,000 tiny-moe tokens each
DeploymentSpec decode_ranks(int ranks) {
  DeploymentSpec d = tiny();
  d.decode = test::pool(ranks, 1, 1);
  d.decode.step_overhead_s = 0.002;
  d.cluster.nodes = required_nodes(d);
  d.reserved_bytes_per_gpu += plan_gpu_memory(d, d.decode).kv_budget - 3000 * kTinyKvPerToken;
  validate_deployment(d, "tiny");
  return d;
}
}  // namespace

// Ranks X and Y hold requests 0 (1,000 + 1,000 tokens: 1,000 free) and 1 (2,000 + 500: 500 free).
// Request 2 (1,200) fits nowhere and holds X; request 3 (800) fits only on X: it waits behind
// request 2 and holds nothing; so request 4 (300) goes straight to Y (review of the session's
// commits: request 3 had held Y, where it cannot fit, and request 4 waited).
TEST(Engine, ARequestThatFitsOnlyOnAHeldRankWaitsWithoutHolding) {
  Records rec;
  Simulation sim(decode_ranks(2),
                 std::make_unique<ListSource>(std::vector<Request>{req(0, 0, 1000, 1000), req(1, 0, 2000, 500), req(2, 0, 1100, 100),
                                                                    req(3, 0, 700, 100), req(4, 0, 200, 100)}),
                 std::make_shared<test::ZeroCost>(), rec, {});
  sim.run();
  const RequestRecord &r1 = rec.by_id.at(1), &r3 = rec.by_id.at(3), &r4 = rec.by_id.at(4);
  EXPECT_NEAR(r4.transfer_start_s, r4.prefill_end_s, 1e-9);
  EXPECT_EQ(r4.decode_instance, r1.decode_instance);
  EXPECT_GT(r3.transfer_start_s, r3.prefill_end_s + 0.5);
}

namespace {
// Ten ranks each hold a 2,000-token request (1,000 free); `big` requests of 1,510 tokens fit
// nowhere, then one of 510 that fits anywhere. The first 8 waiting requests each hold a rank;
// behind the eighth a pass stops (kMaxWaits): with 7 big ones the small one takes one of the 3
// ranks still free of holds at once, with 9 it waits behind them.
bool small_one_waits(int big) {
  std::vector<Request> rs;
  for (int i = 0; i < 10; ++i) rs.push_back(req(static_cast<std::uint64_t>(i), 0, 1000, 1000));
  for (int i = 0; i < big; ++i) rs.push_back(req(static_cast<std::uint64_t>(10 + i), 0, 1500, 10));
  rs.push_back(req(99, 0, 500, 10));
  Records rec;
  Simulation sim(decode_ranks(10), std::make_unique<ListSource>(rs), std::make_shared<test::ZeroCost>(), rec, {});
  sim.run();
  const RequestRecord& s = rec.by_id.at(99);
  return s.transfer_start_s > s.prefill_end_s + 1e-9;
}
}  // namespace

TEST(Engine, SevenWaitingRequestsLeaveTheRestOfTheRanksOpen) { EXPECT_FALSE(small_one_waits(7)); }
TEST(Engine, BehindTheEighthWaitingRequestTheQueueWaitsInOrder) { EXPECT_TRUE(small_one_waits(9)); }

TEST(Engine, ARequestThatFitsNowhereHoldsOneDecodeRankNotAll) { fits_nowhere_holds_one_rank("least_loaded"); }
TEST(Engine, ARequestThatFitsNowhereHoldsOneDecodeRankNotAllRoundRobin) { fits_nowhere_holds_one_rank("round_robin"); }

TEST(Engine, EveryRequestEndsCompletedRejectedOrInFlight) {
  DeploymentSpec d = tiny();
  // 3 requests too long for the model (4,096 tokens), a horizon that stops the run mid-way
  std::vector<Request> rs;
  for (int i = 0; i < 40; ++i) rs.push_back(req(static_cast<std::uint64_t>(i), 0.001 + 0.01 * i, i % 13 == 5 ? 4000 : 800, 200));
  Records rec;
  RunOptions o;
  o.horizon_s = 0.3;
  Simulation sim(d, std::make_unique<ListSource>(rs), std::make_shared<test::ZeroCost>(), rec, o);
  const RunTotals t = sim.run();
  EXPECT_EQ(t.arrivals, 30);  // arrivals at 0.001 .. 0.291 s; those after the horizon never arrive
  EXPECT_EQ(rec.emitted, t.arrivals);
  EXPECT_EQ(static_cast<long long>(rec.by_id.size()), t.arrivals);  // each exactly once
  EXPECT_EQ(t.completed + t.rejected + t.in_flight, t.arrivals);
  EXPECT_EQ(t.rejected, 2);  // ids 5 and 18 (4,000 + 200 > 4,096); id 31 arrives after the horizon
  EXPECT_GT(t.in_flight, 0);
  for (const auto& [id, r] : rec.by_id) {
    if (r.status == RequestStatus::rejected) {
      EXPECT_NE(r.reason.find("exceeds the model's 4096"), std::string::npos) << r.reason;
    }
    if (r.status == RequestStatus::in_flight) {
      EXPECT_FALSE(r.reason.empty());
    }
  }
}

TEST(Engine, PrefixCacheServesRepeatedPrefixes) {
  DeploymentSpec d = tiny();
  d.prefix_cache.enabled = true;
  d.prefix_cache.block_tokens = 100;
  // request 1 repeats request 0's first 7 blocks and adds 2; request 2 shares nothing
  auto with_blocks = [](Request r, std::vector<std::uint64_t> b) {
    r.block_hashes = std::move(b);
    r.block_tokens = 100;
    return r;
  };
  Records rec;
  Simulation sim(d,
                 std::make_unique<ListSource>(std::vector<Request>{with_blocks(req(0, 0, 750, 2), {0, 1, 2, 3, 4, 5, 6, 7}),
                                                                  with_blocks(req(1, 1, 900, 2), {0, 1, 2, 3, 4, 5, 6, 8, 9}),
                                                                  with_blocks(req(2, 2, 300, 2), {10, 11, 12})}),
                 std::make_shared<test::ZeroCost>(), rec, {});
  const RunTotals t = sim.run();
  EXPECT_EQ(rec.by_id.at(0).cached_tokens, 0);
  EXPECT_EQ(rec.by_id.at(1).cached_tokens, 700);  // 7 whole blocks (block 7 of request 0 was partial: not cached)
  EXPECT_EQ(rec.by_id.at(2).cached_tokens, 0);
  EXPECT_EQ(t.prefix_lookup_blocks, 8 + 9 + 3);  // every block of each prompt, the partial last ones too
  EXPECT_EQ(t.prefix_hit_blocks, 7);
  EXPECT_EQ(t.trace_reuse_blocks, 7);  // the closed form: request 1 repeats 7 blocks request 0 carried
  EXPECT_EQ(t.trace_blocks, 20);
}

// A prompt's blocks are in its prefill rank's cache from the end of its prefill, not from when its
// KV leaves for decode (SGLang's radix cache holds them from the prefill on; user review,
// twenty-seventh session). Decode holds 2,000 tokens: request 0 (1,000 + 500) decodes for ~1 s,
// so request 1 (950 tokens, blocks 0-9) ends its prefill at 0.02 s and waits for decode room;
// request 2, the same prompt, arrives at 0.1 s, while request 1 still waits, and finds all of it
// but the last token, whose logits it must compute (949 tokens, all 10 blocks looked up and hit).
// Before, it found nothing.
TEST(Engine, APromptIsCachedFromTheEndOfItsPrefillNotFromItsCopy) {
  DeploymentSpec d = tiny();
  d.prefix_cache.enabled = true;
  d.prefix_cache.block_tokens = 100;
  d.reserved_bytes_per_gpu += plan_gpu_memory(d, d.decode).kv_budget - 2000 * kTinyKvPerToken;
  auto with_blocks = [](Request r, std::vector<std::uint64_t> b) {
    r.block_hashes = std::move(b);
    r.block_tokens = 100;
    return r;
  };
  const std::vector<std::uint64_t> shared{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  Records rec;
  Simulation sim(d,
                 std::make_unique<ListSource>(std::vector<Request>{with_blocks(req(0, 0, 1000, 500), {20, 21, 22, 23, 24, 25, 26, 27, 28, 29}),
                                                                  with_blocks(req(1, 0, 950, 10), shared), with_blocks(req(2, 0.1, 950, 10), shared)}),
                 std::make_shared<test::ZeroCost>(), rec, {});
  const RunTotals t = sim.run();
  const RequestRecord &r0 = rec.by_id.at(0), &r1 = rec.by_id.at(1), &r2 = rec.by_id.at(2);
  ASSERT_NEAR(r1.prefill_end_s, 0.02, 1e-9);
  ASSERT_GT(r1.transfer_start_s, r0.first_token_s);  // request 1 waited for decode room...
  ASSERT_LT(r2.prefill_start_s, r1.transfer_start_s);  // ...while request 2 was admitted
  EXPECT_EQ(r1.cached_tokens, 0);
  EXPECT_EQ(r2.cached_tokens, 949);
  EXPECT_EQ(t.prefix_hit_blocks, 10);
  EXPECT_EQ(t.completed, 3);
}

// The trace-level reuse closed form remembers at most RunOptions::trace_reuse_max_block_ids
// distinct ids, then stops. With room for 17: request 0 brings 8 ids, request 1 9 (7 repeated: 10
// distinct), request 2 3 (13 distinct); request 3's 9 ids would pass 17 (13 + 9 > 17, the check
// counts a request's ids before looking them up), so the closed form covers the first 3 arrivals:
// 7 of 20 blocks reused (request 3 repeats 4 blocks that are not counted).
TEST(Engine, TraceReuseClosedFormStopsAtItsBound) {
  auto with_blocks = [](Request r, std::vector<std::uint64_t> b) {
    r.block_hashes = std::move(b);
    r.block_tokens = 100;
    return r;
  };
  const std::vector<Request> rs{with_blocks(req(0, 0, 750, 2), {0, 1, 2, 3, 4, 5, 6, 7}), with_blocks(req(1, 1, 900, 2), {0, 1, 2, 3, 4, 5, 6, 8, 9}),
                                with_blocks(req(2, 2, 300, 2), {10, 11, 12}), with_blocks(req(3, 3, 900, 2), {0, 1, 2, 3, 20, 21, 22, 23, 24})};
  DeploymentSpec d = tiny();
  d.prefix_cache.enabled = true;
  d.prefix_cache.block_tokens = 100;
  Records rec;
  RunOptions opt;
  opt.trace_reuse_max_block_ids = 17;
  const RunTotals t = Simulation(d, std::make_unique<ListSource>(rs), std::make_shared<test::ZeroCost>(), rec, opt).run();
  EXPECT_EQ(t.arrivals, 4);
  EXPECT_EQ(t.trace_reuse_arrivals, 3);
  EXPECT_EQ(t.trace_reuse_blocks, 7);
  EXPECT_EQ(t.trace_blocks, 20);
}

namespace {

void replay_mooncake(const std::string& model, PoolSpec p, PoolSpec q) {
  const std::string path = test::shared_traces() + "/mooncake/conversation_trace.jsonl";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent: ../shared/traces is not available here";
  DeploymentSpec d = test::deployment(model, "h200", p, q);
  validate_deployment(d, "d");
  WorkloadSpec w;
  w.kind = WorkloadSpec::Kind::mooncake;
  w.trace_path = path;
  Records rec;
  Simulation sim(d, make_source(w, 1), make_cost_model("roofline", d.gpu), rec, {});
  const RunTotals t = sim.run();
  EXPECT_EQ(t.arrivals, 12031);
  EXPECT_EQ(rec.emitted, 12031);
  EXPECT_EQ(t.completed + t.rejected + t.in_flight, 12031);
  EXPECT_EQ(t.completed, 12031);  // the trace's longest prompt (126,195 tokens) fits both deployments
  for (const auto& [id, r] : rec.by_id) {
    ASSERT_EQ(r.status, RequestStatus::completed);
    ASSERT_GE(r.first_token_s, r.prefill_end_s);
    ASSERT_GE(r.done_s, r.first_token_s);
    ASSERT_EQ(r.generated_tokens, r.output_tokens);
  }
  EXPECT_GT(t.prefix_hit_blocks, 0);
}

}  // namespace

TEST(EngineReplay, WholeMooncakeConversationTraceThroughKimiK3) {
  PoolSpec p = test::pool(2, 32, 8), q = test::pool(1, 32, 8);
  p.two_batch_overlap = q.two_batch_overlap = true;
  replay_mooncake("kimi-k3", p, q);
}

TEST(EngineReplay, WholeMooncakeConversationTraceThroughDeepSeekV4Pro) {
  PoolSpec p = test::pool(2, 16, 1), q = test::pool(1, 16, 1);
  p.two_batch_overlap = q.two_batch_overlap = true;
  replay_mooncake("deepseek-v4-pro", p, q);
}
