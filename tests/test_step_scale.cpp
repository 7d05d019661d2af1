// StepScale (costmodels/step_cost.hpp): every step's time times its regime's factor, the what-if
// `servesim capacity` runs at the engine's error against published deployments. Expected values
// are hand arithmetic on a cost model of constant op times, never the code's own sums.
#include "costmodels/step_cost.hpp"
#include "helpers.hpp"
#include "sim/simulation.hpp"

#include <gtest/gtest.h>

#include <memory>

using namespace servesim;

namespace {

// 1 ms per attention core, 3 ms per routed-expert GEMM, 0 for everything else.
class KindCost final : public CostModel {
 public:
  std::string name() const override { return "kind"; }
  OpLatency latency(const Op& o) const override {
    if (o.kind == OpKind::mla_decode || o.kind == OpKind::mla_prefill) return {1e-3, Provenance::roofline};
    if (o.kind == OpKind::moe_experts) return {3e-3, Provenance::roofline};
    return {0.0, Provenance::roofline};
  }
};

}  // namespace

// tiny-moe (tests/data): 4 layers, each an MLA attention core (1 ms), the last three MoE layers
// with a routed-expert GEMM (3 ms at EP 1), no host time: an unscaled step is 4 x 1 + 3 x 3 = 13 ms
// in both phases; scaled,
// a prefill step x2, a decode step of 33 sequences (one DP rank) x3, of 32 x5: the edge
// kSmallDecodeBatchSeqs (32) is on the small side, as validate's regime "decode <= 32 seq/rank".
TEST(StepScale, EachRegimeGetsItsOwnFactorAndTheEdgeIsThirtyTwoSequences) {
  const ModelSpec m = load_model(test::data("tests/data/tiny-moe.json"));
  InstanceShape s;
  s.ep = 1;
  StepCostModel c(m, std::make_shared<KindCost>(), FabricParams{}, s, 0.0);
  auto batch = [](int seqs, long long tokens) { return std::vector<std::vector<SeqWork>>(1, std::vector<SeqWork>(seqs, {tokens, 100, true})); };
  ASSERT_NEAR(c.step(batch(1, 512), Phase::prefill).total_s, 13e-3, 1e-12);  // the unscaled step, by hand
  ASSERT_NEAR(c.step(batch(33, 1), Phase::decode).total_s, 13e-3, 1e-12);
  c.set_scale({2, 3, 5});
  const StepTime p = c.step(batch(1, 512), Phase::prefill), large = c.step(batch(33, 1), Phase::decode), small = c.step(batch(32, 1), Phase::decode);
  EXPECT_NEAR(p.total_s, 26e-3, 1e-12);
  EXPECT_NEAR(large.total_s, 39e-3, 1e-12);
  EXPECT_NEAR(small.total_s, 65e-3, 1e-12);
  // every part alike: attention 4 x 1 ms and FFN 3 x 3 ms, times the factor
  EXPECT_NEAR(small.attention_s, 5 * 4e-3, 1e-12);
  EXPECT_NEAR(small.ffn_s, 5 * 9e-3, 1e-12);
  EXPECT_NEAR(large.attention_s + large.ffn_s + large.comm_s + large.other_s, large.total_s, 1e-12);
  // the identity scale is the engine's own price
  c.set_scale({});
  EXPECT_NEAR(c.step(batch(32, 1), Phase::decode).total_s, 13e-3, 1e-12);
}

// A whole run (Simulation) honours RunOptions::step_scale: one 1,000-token prompt, 100 output
// tokens, on the tiny deployment (ZeroCost: a prefill step is its 10 ms host overhead, a decode
// step its 2 ms). Prefill x3: the prompt's one prefill step ends at 30 ms. Decode of one sequence
// is the small-batch regime: 99 steps of 2 ms x 1.5 (the large-batch factor 9 must not apply).
TEST(StepScale, ARunTakesEachStepAtItsRegimesFactor) {
  const DeploymentSpec d = test::tiny(1000);
  test::Records rec;
  RunOptions opt;
  opt.step_scale = {3, 9, 1.5};
  Simulation sim(d, std::make_unique<test::ListSource>(std::vector<Request>{test::req(0, 0, 1000, 100)}), std::make_shared<test::ZeroCost>(), rec, opt);
  const RunTotals t = sim.run();
  const RequestRecord& r = rec.by_id.at(0);
  ASSERT_EQ(r.status, RequestStatus::completed);
  EXPECT_EQ(t.decode_steps, 99);
  EXPECT_NEAR(r.prefill_end_s, 3 * 0.010, 1e-9);
  EXPECT_NEAR(r.e2e_s() - r.ttft_s(), 99 * 0.002 * 1.5, 1e-9);
}
