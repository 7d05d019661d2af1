// Decode attention when a sequence brings more than one query token (MTP verification of k drafts:
// k + 1 tokens per sequence): the op's FLOPs count every query token over its context, and the
// fitted model prices the kernel the way the kernels run it. Hand arithmetic from model-facts.md §2
// and the packing rules stated in costmodels/fitted.cpp.
#include "costmodels/expert_load.hpp"
#include "costmodels/fitted.hpp"
#include "costmodels/step_cost.hpp"
#include "costmodel_test_helpers.hpp"
#include "helpers.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace servesim;
using namespace servesim::costmodel_test;

namespace {

std::vector<Op> decode_ops(const std::string& model, AttentionOp op, const std::vector<SeqWork>& seqs) {
  const ModelSpec m = test::model(model);
  const StepCostModel step(m, std::make_shared<RooflineCostModel>(test::gpu("h200")), FabricParams{}, {8, 1}, 0.0);  // EP 8, attention TP 1: all heads on the GPU
  std::vector<Op> ops;
  step.attention_ops(attention_kind(m, op), seqs, Phase::decode, ops);
  return ops;
}

// the components of `op` of one family
std::vector<FittedCostModel::Component> of(const FittedCostModel& f, const Op& op, Family fam) {
  std::vector<FittedCostModel::Component> out;
  for (const auto& c : f.components(op))
    if (c.family == fam) out.push_back(c);
  return out;
}

}  // namespace

TEST(MtpAttention, MlaDecodeAttendsEveryVerifiedTokenOverItsContext) {
  // K3 MLA (96 heads, TP 1): one sequence verifying 3 tokens after 4,093 cached, L = 4,096.
  // §2.2: 2·H·(N·L)·(576+512) attention + absorption 2·H·512·(128+128) per token; the latent is
  // read once (L·576·2 B), W_UK/W_UV once, q/o latents per token.
  const auto ops = decode_ops("kimi-k3", AttentionOp::mla, {{3, 4093, true}});
  const Op& o = find_op(ops, OpKind::mla_decode);
  EXPECT_DOUBLE_EQ(o.flops, 2 * 96 * (3 * 4096.0) * 1088 + 3 * (2.0 * 96 * 512 * 256));
  EXPECT_DOUBLE_EQ(o.bytes, 4096 * 1152.0 + 512.0 * 96 * 256 * 2 + 3 * 96 * 1088 * 2.0);
  // one token per sequence is unchanged: 2·H·L·1088
  const auto ops1 = decode_ops("kimi-k3", AttentionOp::mla, {{1, 4095, true}});
  const Op& one = find_op(ops1, OpKind::mla_decode);
  EXPECT_DOUBLE_EQ(one.flops, 2 * 96 * 4096.0 * 1088 + 2.0 * 96 * 512 * 256);
}

TEST(MtpAttention, MlaQueryTokensArePackedAsHeadsUpTo128RowsPerRead) {
  const FittedCostModel f(committed(), test::gpu("h200"));
  Op o;
  o.kind = OpKind::mla_decode, o.cls = OpClass::attention_decode, o.decode = true;
  // 32 heads, 4 sequences of 3 query tokens, mean context 8,192: 96 query rows per sequence fit one
  // read, so the kernel is (batch 4, context 8,192, 96 heads)
  o.heads = 32, o.seqs = 4, o.tokens = 12, o.ctx_sum = 4 * 8192.0;
  auto c = of(f, o, Family::mla_decode);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_DOUBLE_EQ(c[0].x[0], 4);
  EXPECT_DOUBLE_EQ(c[0].x[2], 96);
  // 128 heads, 2 sequences of 3 tokens at 67,584: 384 rows = 3 reads of 128 rows, priced as 6
  // sequences of 128 heads (each read is a sequence's context again)
  o.heads = 128, o.seqs = 2, o.tokens = 6, o.ctx_sum = 2 * 67584.0;
  c = of(f, o, Family::mla_decode);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_DOUBLE_EQ(c[0].x[0], 6);
  EXPECT_DOUBLE_EQ(c[0].x[2], 128);
  // the kernel's mean context is the sequences', whatever the packing (the transform t_mqa_plan
  // turns it into rows of the busiest SM, so compare with the same op at one token per sequence)
  Op single = o;
  single.seqs = 6, single.tokens = 6, single.ctx_sum = 6 * 67584.0;
  const auto s = of(f, single, Family::mla_decode);
  ASSERT_EQ(s.size(), 1u);
  for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(c[0].x[i], s[0].x[i]) << i;
  // one token per sequence: batch and heads as given
  o.tokens = 2;
  c = of(f, o, Family::mla_decode);
  EXPECT_DOUBLE_EQ(c[0].x[0], 2);
  EXPECT_DOUBLE_EQ(c[0].x[2], 128);
}

TEST(MtpAttention, V4SparseDecodeGathersOneListPerQueryToken) {
  // V4-Pro CSA at L = 100,000 (§2.3 d): 1,152 keys per query. Two query tokens of one sequence
  // attend 2 x 1,152 keys; the kernel's batch is the 2 query tokens (as FlashMLA's sparse decode
  // at s_q 2 counts b·s_q rows), 1,152 rows each; the indexer packs the 2 tokens as 2 x 64 heads
  // over one read of the 25,000 compressed keys; top-k runs once per query token.
  const auto ops = decode_ops("deepseek-v4-pro", AttentionOp::csa, {{2, 99998, true}});
  const Op& a = find_op(ops, OpKind::csa_attn);
  EXPECT_DOUBLE_EQ(a.keys, 2 * 1152.0);
  EXPECT_DOUBLE_EQ(a.flops, 2 * 2.0 * 128 * 1152 * 1024);
  const FittedCostModel f(committed(), test::gpu("h200"));
  auto c = of(f, a, Family::v4_attn_decode);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_DOUBLE_EQ(c[0].x[0], 2);
  EXPECT_DOUBLE_EQ(c[0].x[1], 1152);
  const Op& idx = find_op(ops, OpKind::csa_indexer);
  c = of(f, idx, Family::indexer_decode);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_DOUBLE_EQ(c[0].x[0], 1);
  EXPECT_DOUBLE_EQ(c[0].x[1], 25000);
  EXPECT_DOUBLE_EQ(c[0].x[2], 2 * 64.0);
  c = of(f, idx, Family::topk_decode);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_DOUBLE_EQ(c[0].x[0], 2);
}

TEST(MtpAttention, DraftPassesAttendOneQueryTokenPerSequence) {
  // MLA decode priced at 1 ms per query token (Op::tokens), nothing else costs. tiny-moe has 4
  // layers; with k = 3 drafts one sequence verifies 4 tokens: 4 layers + the draft-extend pass at 4
  // query tokens, and k − 1 = 2 draft passes at 1: (4 × 4 + 4 + 2 × 1) ms = 22 ms (28 ms if the
  // draft passes were priced as the verify pass).
  class QueryCost final : public CostModel {
   public:
    std::string name() const override { return "queries"; }
    OpLatency latency(const Op& o) const override { return {o.kind == OpKind::mla_decode ? 1e-3 * o.tokens : 0.0, Provenance::roofline}; }
  };
  const ModelSpec m = load_model(test::data("tests/data/tiny-moe.json"));
  InstanceShape s;
  s.ep = 1, s.mtp_draft_tokens = 3;
  const StepCostModel sc(m, std::make_shared<QueryCost>(), FabricParams{}, s, 0.0);
  EXPECT_NEAR(sc.step({{{4, 100, true}}}, Phase::decode).attention_s, 22e-3, 1e-12);
  // one draft (k = 1): no draft pass, 4 layers + draft-extend at 2 tokens: 10 ms
  s.mtp_draft_tokens = 1;
  const StepCostModel one(m, std::make_shared<QueryCost>(), FabricParams{}, s, 0.0);
  EXPECT_NEAR(one.step({{{2, 100, true}}}, Phase::decode).attention_s, 10e-3, 1e-12);
}

TEST(MtpAttention, MlaRowsBeyond128ArePricedAsTheKernelsHeadGroups) {
  // 64 heads x 3 tokens = 192 rows = 3 head groups of 64 (odd): 3 reads of 64 rows per sequence;
  // 128 heads x 3 = 384 rows = 6 groups (even): 3 reads of 128 rows. Either way the CTAs counted per
  // sequence are the kernel's (one per 64-row group): 3 x 1 and 3 x 2.
  const FittedCostModel f(committed(), test::gpu("h200"));
  Op o;
  o.kind = OpKind::mla_decode, o.cls = OpClass::attention_decode, o.decode = true;
  o.heads = 64, o.seqs = 2, o.tokens = 6, o.ctx_sum = 2 * 8192.0;
  auto c = of(f, o, Family::mla_decode);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_DOUBLE_EQ(c[0].x[0], 6);
  EXPECT_DOUBLE_EQ(c[0].x[2], 64);
  // 2 tokens at 64 heads: 128 rows, one read
  o.tokens = 4;
  c = of(f, o, Family::mla_decode);
  EXPECT_DOUBLE_EQ(c[0].x[0], 2);
  EXPECT_DOUBLE_EQ(c[0].x[2], 128);
}

TEST(MtpAttention, TheIndexerPacksAtMostTwoQueryTokensPerKeyRead) {
  // V4-Pro CSA at L = 100,000, one sequence verifying 3 tokens: 2 reads of the 25,000 compressed keys
  // (DeepGEMM's paged logits take next_n 1 or 2), each at 2 x 64 heads; top-k per query token (3)
  const auto ops = decode_ops("deepseek-v4-pro", AttentionOp::csa, {{3, 99997, true}});
  const FittedCostModel f(committed(), test::gpu("h200"));
  const Op& idx = find_op(ops, OpKind::csa_indexer);
  auto c = of(f, idx, Family::indexer_decode);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_DOUBLE_EQ(c[0].x[0], 2);
  EXPECT_DOUBLE_EQ(c[0].x[1], 25000);
  EXPECT_DOUBLE_EQ(c[0].x[2], 128);
  c = of(f, idx, Family::topk_decode);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_DOUBLE_EQ(c[0].x[0], 3);
}

TEST(MtpAttention, DraftPassesSplitIntoMicroBatchesAsTheVerifyPass) {
  // MLA decode at 1 ms per call + 1 ms per query token. Two-batch overlap, k = 3, one rank with two
  // sequences of 4 verified tokens: the verify pass's halves (one sequence each) cost 2 x (1 + 4) =
  // 10 ms a layer (4 layers + the draft-extend pass), a draft pass's halves 2 x (1 + 1) = 4 ms
  // (2 passes): 5 x 10 + 2 x 4 = 58 ms (56 if the draft passes were priced as one batch).
  class CallCost final : public CostModel {
   public:
    std::string name() const override { return "calls"; }
    OpLatency latency(const Op& o) const override {
      return {o.kind == OpKind::mla_decode ? 1e-3 * (1 + o.tokens) : 0.0, Provenance::roofline};
    }
  };
  const ModelSpec m = load_model(test::data("tests/data/tiny-moe.json"));
  InstanceShape s;
  s.ep = 1, s.mtp_draft_tokens = 3, s.two_batch_overlap = true;
  const StepCostModel sc(m, std::make_shared<CallCost>(), FabricParams{}, s, 0.0);
  EXPECT_NEAR(sc.step({{{4, 100, true}, {4, 200, true}}}, Phase::decode).attention_s, 58e-3, 1e-12);
}

TEST(MtpAttention, TwoBatchOverlapSplitsSequencesNotVerifiedTokens) {
  // Routed experts at 1 ms per call (per micro-batch), nothing else. tiny-moe: 3 MoE layers, k = 1
  // (+ the draft-extend layer). A rank of one sequence verifying 2 tokens cannot be split into two
  // micro-batches: 4 x 1 ms; two sequences can: 4 x 2 x 1 ms (each micro-batch its own call).
  class CallCost final : public CostModel {
   public:
    std::string name() const override { return "calls"; }
    OpLatency latency(const Op& o) const override { return {o.kind == OpKind::moe_experts ? 1e-3 : 0.0, Provenance::roofline}; }
  };
  const ModelSpec m = load_model(test::data("tests/data/tiny-moe.json"));
  InstanceShape s;
  s.ep = 1, s.mtp_draft_tokens = 1, s.two_batch_overlap = true;
  const StepCostModel sc(m, std::make_shared<CallCost>(), FabricParams{}, s, 0.0);
  EXPECT_NEAR(sc.step({{{2, 100, true}}}, Phase::decode).ffn_s, 4e-3, 1e-12);
  EXPECT_NEAR(sc.step({{{2, 100, true}, {2, 100, true}}}, Phase::decode).ffn_s, 8e-3, 1e-12);
}

TEST(MtpAttention, DraftPassesRouteOneTokenPerSequence) {
  // Routed experts at 1 ms per expert-token on the busiest GPU (M = T·k/N·load), nothing else
  // priced. DeepSeek-V3 (58 MoE layers, top 8) with its expert popularity, EP 32, k = 2 drafts; 32
  // ranks of one sequence verifying 3 tokens: T = 96 tokens whose pairs within a sequence give
  // 96² / (32·3·2) = 48 effective sequences (StepParts::seqs_eff). The 58 layers and the
  // draft-extend pass route those 96; the one draft pass routes 32 tokens, one per sequence, so its
  // expert load has no sequence term (seqs 0), not the verify pass's 48.
  class PerToken final : public CostModel {
   public:
    std::string name() const override { return "per-token"; }
    OpLatency latency(const Op& o) const override { return {o.kind == OpKind::moe_experts ? 1e-3 * o.tokens : 0.0, Provenance::roofline}; }
  };
  const ModelSpec m = test::model("deepseek-v3");
  ASSERT_EQ(m.count_ffn(static_cast<int>(m.main_moe() - m.ffn_kinds.data())), 58);
  InstanceShape s;
  s.ep = 32, s.mtp_draft_tokens = 2, s.expert_skew = true;
  const StepCostModel sc(m, std::make_shared<PerToken>(), FabricParams{}, s, 0.0);
  const ExpertLoad load(*m.main_moe(), 32, 0, false);
  ASSERT_GT(std::abs(load.expected(32, 48) / load.expected(32, 0) - 1), 0.01);  // the two readings differ
  const std::vector<std::vector<SeqWork>> ranks(32, std::vector<SeqWork>(1, SeqWork{3, 1000, true}));
  const double per = 1e-3 * 8.0 / 32.0;  // seconds per routed token at load 1: k / N
  EXPECT_NEAR(sc.step(ranks, Phase::decode).ffn_s, per * (59 * 96 * load.expected(96, 48) + 32 * load.expected(32, 0)), 1e-12);
}
