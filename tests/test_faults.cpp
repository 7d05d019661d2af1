// Faults found by replaying other serving simulators' bug reports (issue #10), each against a
// value worked out by hand. The engine tests use the one-GPU tiny model with a zero-latency cost
// model, so every step lasts exactly its fixed overhead (prefill 10 ms, decode 2 ms).
#include "costmodels/memory.hpp"
#include "helpers.hpp"
#include "sim/exporters/metrics.hpp"
#include "sim/exporters/writers.hpp"
#include "sim/kvcache/prefix_cache.hpp"
#include "sim/simulation.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <map>

using namespace servesim;

namespace {

using test::ListSource;
using test::req;

class Records final : public test::Records {
 public:
  void on_step(const StepEvent& e) override {
    if (e.role == Phase::prefill) prefill_steps.push_back(e);
  }
  std::vector<StepEvent> prefill_steps;
};

Records simulate(const DeploymentSpec& d, std::vector<Request> rs) {
  Records rec;
  Simulation sim(d, std::make_unique<ListSource>(std::move(rs)), std::make_shared<test::ZeroCost>(), rec, {});
  sim.run();
  return rec;
}

}  // namespace

// Item 1. One decode slot (max_running 1). r0 (512 in, 200 out) prefills 0-10 ms, its KV moves
// (x s), it decodes 199 steps of 2 ms: done = 10 ms + x + 398 ms. r1 (512 in, 4 out) arrives at
// 1 ms, prefills 10-20 ms, its KV arrives at 20 ms + x, then waits for the slot until r0 is done:
// its first token is out when its first decode step starts, at r0's done time; 3 more steps:
// TPOT = 6 ms / 3 = 2 ms exactly; TTFT = done(r0) − 1 ms; the slot wait = 388 ms.
TEST(Faults, WaitForADecodeSlotCountsInTtftNotInTpot) {
  DeploymentSpec d = test::tiny(512);
  d.decode.max_running = 1;
  const Records rec = simulate(d, {req(0, 0.0, 512, 200), req(1, 0.001, 512, 4)});
  const RequestRecord &a = rec.by_id.at(0), &b = rec.by_id.at(1);
  const double x = a.transfer_end_s - a.transfer_start_s;
  EXPECT_NEAR(a.done_s, 0.010 + x + 0.398, 1e-9);
  EXPECT_NEAR(a.tpot_s(), 0.002, 1e-9);
  EXPECT_NEAR(b.prefill_end_s, 0.020, 1e-9);
  EXPECT_NEAR(b.transfer_end_s, 0.020 + x, 1e-9);
  EXPECT_NEAR(b.first_token_s, a.done_s, 1e-12);
  EXPECT_NEAR(b.ttft_s(), a.done_s - 0.001, 1e-9);
  EXPECT_NEAR(b.tpot_s(), 0.002, 1e-9);
  EXPECT_NEAR(b.first_token_s - b.transfer_end_s, 0.388, 1e-9);  // decode_slot_wait
}

// Item 2. max_batch_tokens = chunk = 8; rows of 4 and 8 tokens at t = 0: the first step takes
// 4 + the first 4 of the second prompt (8 tokens), the second step the last 4.
TEST(Faults, ArrivalsOfOneInstantAreBatchedTogether) {
  const Records rec = simulate(test::tiny(8), {req(0, 0.0, 4, 2), req(1, 0.0, 8, 2)});
  ASSERT_EQ(rec.prefill_steps.size(), 2u);
  EXPECT_EQ(rec.prefill_steps[0].tokens, 8);
  EXPECT_EQ(rec.prefill_steps[0].seqs, 2);
  EXPECT_EQ(rec.prefill_steps[1].tokens, 4);
  EXPECT_NEAR(rec.by_id.at(0).prefill_end_s, 0.010, 1e-12);
  EXPECT_NEAR(rec.by_id.at(1).prefill_end_s, 0.020, 1e-12);
}

// Item 2, second example: two 512-token rows at t = 0 with an ample budget: one step of 1024.
TEST(Faults, TwoSameInstantPromptsTakeOneStepWhenTheBudgetAllows) {
  DeploymentSpec d = test::tiny(1024);
  d.prefill.chunk_tokens = 512;
  const Records rec = simulate(d, {req(0, 0.0, 512, 2), req(1, 0.0, 512, 2)});
  ASSERT_EQ(rec.prefill_steps.size(), 1u);
  EXPECT_EQ(rec.prefill_steps[0].tokens, 1024);
  EXPECT_NEAR(rec.by_id.at(1).prefill_end_s, 0.010, 1e-12);
}

// Item 3. A prompt cached whole, asked again: every whole block but the one holding the last
// prompt token is reusable (that token's logits must be computed). Models with per-sequence state
// (K3's KDA, V4's compressor/window state) resume only at a state checkpoint, so they reuse
// floor((L − 1) / 512) · 512 tokens; DeepSeek-V3 (no state) reuses L − 1.
TEST(Faults, AFullPrefixHitReusesEveryWholeBlockButTheLastTokensForEveryModel) {
  const int B = 512;
  for (const char* name : {"kimi-k3", "deepseek-v4-pro", "deepseek-v4-flash", "deepseek-v3"}) {
    const ModelSpec m = test::model(name);
    const double cp = resume_state_bytes(m, 1, B);
    const bool state = kv_footprint(m, 1).per_seq_bytes > 0;
    EXPECT_EQ(cp > 0, state) << name;
    for (long long L : {511LL, 512LL, 513LL, 1023LL, 1024LL, 1025LL, 1536LL, 2048LL}) {
      PrefixCache cache(B, 1e6, cp, make_eviction_policy("lru"));
      Request r = req(1, 0, L, 8);
      r.block_tokens = B;
      for (long long b = 0; b * B < L; ++b) r.block_hashes.push_back(static_cast<std::uint64_t>(100 + b));
      cache.release_and_insert(r, 0, 0.0);
      const long long expect = state ? (L - 1) / B * B : L - 1;
      EXPECT_EQ(cache.match(r).tokens, expect) << name << " L = " << L;
      // a longer prompt extending this one resumes at its last whole block
      Request longer = r;
      longer.input_tokens = L + 700;
      while (static_cast<long long>(longer.block_hashes.size()) * B < longer.input_tokens)
        longer.block_hashes.push_back(static_cast<std::uint64_t>(100 + longer.block_hashes.size()));
      const long long ext = state ? L / B * B : L;  // state: the checkpoint at the last whole block; V3: every cached token
      EXPECT_EQ(cache.match(longer).tokens, ext) << name << " extended from L = " << L;
    }
  }
}

// Items 4 and 5 on the summary: no completion ⇒ null percentiles; goodput over finished requests.
TEST(Faults, NoCompletionGivesNullPercentilesAndGoodputIsOverFinishedRequests) {
  SloSpec slo;  // TTFT 2 s, TPOT 0.1 s
  {
    MetricsCollector m(slo, 1, 1);
    RequestRecord r;
    r.id = 0, r.status = RequestStatus::in_flight, r.reason = "prefill";
    m.on_request(r);
    m.on_end(0.001);
    const Summary s = m.summary();
    EXPECT_EQ(s.ttft_s.n, 0);
    DeploymentSpec d = test::tiny(512);
    RunReport rep;
    rep.deployment = &d, rep.summary = s;
    const nlohmann::json j = summary_json(rep);
    EXPECT_TRUE(j["latency"]["ttft"]["p50_ms"].is_null());
    EXPECT_TRUE(j["latency"]["tpot"]["p99_ms"].is_null());
    EXPECT_TRUE(j["goodput"]["fraction_of_finished"].is_null());
    const std::string table = summary_table({j});
    EXPECT_NE(table.find("n/a/n/a/n/a"), std::string::npos) << table;
    EXPECT_NE(table.find("warning: tiny: no request completed"), std::string::npos) << table;
  }
  {
    // a warm-up past the run's end (horizon 0: run until done, here 73 s): the window is empty and
    // the warning names warmup_s, not the horizon (review)
    MetricsCollector m(slo, 1, 1, 1000.0);
    m.on_end(73.0);
    DeploymentSpec d = test::tiny(512);
    RunReport rep;
    rep.deployment = &d, rep.summary = m.summary();
    const std::string table = summary_table({summary_json(rep)});
    EXPECT_NE(table.find("warning: tiny: the measurement window [1000.0, 73.0] s is empty: warmup_s is at or past the run's end"), std::string::npos)
        << table;
    EXPECT_EQ(table.find("a longer --horizon"), std::string::npos) << table;
    // no warm-up and a run that ended at its start (horizon 1e-300 s): the horizon is named (rev26)
    MetricsCollector z(slo, 1, 1, 0.0);
    z.on_end(0.0);
    rep.summary = z.summary();
    const std::string t0 = summary_table({summary_json(rep)});
    EXPECT_NE(t0.find("the measurement window [0.0, 0.0] s is empty: the run ended at its start; raise horizon_s"), std::string::npos) << t0;
  }
  {
    // completed within both bounds; completed with TTFT 3 s (miss); rejected (miss); in flight
    MetricsCollector m(slo, 1, 1);
    auto done = [](std::uint64_t id, double ttft) {
      RequestRecord r;
      r.id = id, r.status = RequestStatus::completed, r.arrival_s = 0, r.admit_s = 0, r.prefill_start_s = 0, r.prefill_end_s = ttft;
      r.first_token_s = ttft, r.done_s = ttft + 0.05 * 9, r.input_tokens = 100, r.output_tokens = 10, r.generated_tokens = 10;
      return r;
    };
    m.on_request(done(0, 0.5));
    m.on_request(done(1, 3.0));
    RequestRecord rej;
    rej.id = 2, rej.status = RequestStatus::rejected, rej.reason = "too long";
    m.on_request(rej);
    RequestRecord fl;
    fl.id = 3, fl.status = RequestStatus::in_flight, fl.reason = "decode";
    m.on_request(fl);
    m.on_end(10.0);
    DeploymentSpec d = test::tiny(512);
    RunReport rep;
    rep.deployment = &d, rep.summary = m.summary();
    const nlohmann::json j = summary_json(rep);
    EXPECT_EQ(j["goodput"]["requests_meeting_slo"].get<long long>(), 1);
    EXPECT_EQ(j["goodput"]["finished"].get<long long>(), 3);
    EXPECT_EQ(j["goodput"]["in_flight_at_horizon"].get<long long>(), 1);
    EXPECT_DOUBLE_EQ(j["goodput"]["fraction_of_finished"].get<double>(), 0.333333);  // 1 / 3, rounded to 6 places
    EXPECT_DOUBLE_EQ(j["goodput"]["fraction_of_arrived"].get<double>(), 0.25);       // 1 / 4
  }
}
