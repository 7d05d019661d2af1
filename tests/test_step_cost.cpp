// Op FLOP/byte counts against model-facts.md §2 hand arithmetic, the roofline, the communication
// closed forms, and monotonicity of step times.
#include "costmodels/comm.hpp"
#include "costmodels/cost_model.hpp"
#include "costmodels/fitted.hpp"
#include "costmodels/calibration/kernel_table.hpp"
#include "costmodels/kernel_families.hpp"
#include "costmodels/scaled.hpp"
#include "costmodels/step_cost.hpp"
#include "costmodel_test_helpers.hpp"
#include "helpers.hpp"

#include <gtest/gtest.h>

using namespace servesim;

namespace {

int attention_kind(const ModelSpec& m, AttentionOp op) {
  for (size_t i = 0; i < m.attention_kinds.size(); ++i)
    if (m.attention_kinds[i].op == op) return static_cast<int>(i);
  throw std::runtime_error("no such kind");
}

struct Fixture {
  ModelSpec m;
  GpuSpec g;
  std::shared_ptr<const CostModel> cost;
  std::unique_ptr<StepCostModel> step;
  Fixture(const std::string& model, InstanceShape shape) : m(test::model(model)), g(test::gpu("h200")) {
    cost = std::make_shared<RooflineCostModel>(g);
    step = std::make_unique<StepCostModel>(m, cost, FabricParams{}, shape, 0.0);
  }
};

}  // namespace

TEST(Ops, K3MlaDecodeReadsTheLatentOncePerToken) {
  Fixture f("kimi-k3", {8, 1});
  std::vector<Op> ops;
  f.step->attention_ops(attention_kind(f.m, AttentionOp::mla), {{1, 4095, true}, {1, 999, true}}, Phase::decode, ops);
  const Op& o = costmodel_test::find_op(ops, OpKind::mla_decode);
  const double ctx = 4096 + 1000;
  // §2.2: 2·H·L·(576+512) attention + absorption 2·H·128·512·2 per token; bytes L·576·2 +
  // W_UK/W_UV (512·96·256 BF16) + q/o latents
  EXPECT_DOUBLE_EQ(o.flops, 2 * 96 * ctx * 1088 + 2 * (2.0 * 96 * 512 * 256));
  EXPECT_DOUBLE_EQ(o.bytes, ctx * 1152 + 512.0 * 96 * 256 * 2 + 2 * 96 * 1088 * 2.0);
  EXPECT_EQ(o.cls, OpClass::attention_decode);
}

// At attention TP 8 the roofline reads what each GPU holds (memory.cpp): the TP-split projections'
// 1/8 share and the replicated ones whole (MLA q_a, kv_a; the LatentMoE down + up projections,
// each GPU routing 1/8 of the rank's tokens through them). rev26 review: both were read at 1/8.
TEST(Ops, K3ReplicatedWeightsAreReadWholeOnEachAttentionTpRank) {
  Fixture f("kimi-k3", {32, 8});
  std::vector<Op> ops;
  const int mla = attention_kind(f.m, AttentionOp::mla);
  f.step->attention_ops(mla, {{1, 4095, true}, {1, 999, true}}, Phase::decode, ops);
  const Op& proj = costmodel_test::find_op(ops, OpKind::attn_proj);
  // split: q_b 1536 x 96·192, o_proj 96·128 x 7168, output gate 7168 x 96·128; whole: q_a 7168 x 1536, kv_a 7168 x 576
  const double split = 1536.0 * 96 * 192 + 2.0 * 96 * 128 * 7168, whole = 7168.0 * 1536 + 7168.0 * 576;
  const double p = split / 8 + whole;
  EXPECT_DOUBLE_EQ(proj.flops, 2 * 2 * p);
  const AttentionSpec& a = f.m.attention_kinds[static_cast<size_t>(mla)];
  EXPECT_DOUBLE_EQ(proj.bytes, p * 2 + 2 * (7168 + 12.0 * std::max(a.head_dim, a.v_head_dim) * 4) * 2);
  ops.clear();
  const int moe = static_cast<int>(f.m.main_moe() - f.m.ffn_kinds.data());
  f.step->ffn_ops(moe, 64, 256, ops);
  const Op& lat = costmodel_test::find_op(ops, OpKind::moe_latent_proj);
  // 64 / 8 = 8 tokens through 2 x 7168 x 3584 BF16 weights, activations in and out of both
  EXPECT_DOUBLE_EQ(lat.flops, 2 * 8 * 2 * 7168.0 * 3584);
  EXPECT_DOUBLE_EQ(lat.bytes, 2 * 7168.0 * 3584 * 2 + 8 * 2 * (7168 + 3584) * 2.0);
}

TEST(Ops, K3KdaDecodeIsStateBandwidth) {
  Fixture f("kimi-k3", {8, 2});
  std::vector<Op> ops;
  f.step->attention_ops(attention_kind(f.m, AttentionOp::kda), {{1, 100, true}, {1, 5000, true}, {1, 7, true}}, Phase::decode, ops);
  const Op& o = costmodel_test::find_op(ops, OpKind::kda_decode);
  // §2.1: 7·D² FLOP per head per token and a read+write of the fp32 state per sequence; TP 2 halves heads
  EXPECT_DOUBLE_EQ(o.flops, 3 * 48 * 7.0 * 128 * 128);
  EXPECT_DOUBLE_EQ(o.bytes, 3 * 2 * 48 * 128.0 * 128 * 4 + 3 * 48 * 128 * 5 * 2.0);
}

TEST(Ops, V4ProCsaAndHcaKeyCountsMatchModelFacts) {
  Fixture f("deepseek-v4-pro", {16, 1});
  std::vector<Op> ops;
  // CSA at L = 100,000: n = min(1024, 25,000) + 128 = 1,152 keys → 2·128·1152·1024 = 302 MFLOP (§2.3 d)
  f.step->attention_ops(attention_kind(f.m, AttentionOp::csa), {{1, 99999, true}}, Phase::decode, ops);
  EXPECT_DOUBLE_EQ(costmodel_test::find_op(ops, OpKind::csa_attn).flops, 2.0 * 128 * 1152 * 1024);
  EXPECT_NEAR(costmodel_test::find_op(ops, OpKind::csa_attn).flops / 1e6, 302, 0.1);
  EXPECT_DOUBLE_EQ(costmodel_test::find_op(ops, OpKind::csa_attn).bytes, 1152 * 584.0 + 128 * 512 * 2 * 2.0);
  // indexer: 2·64·128 FLOP per compressed key, 132 B per key (§2.3 c)
  EXPECT_DOUBLE_EQ(costmodel_test::find_op(ops, OpKind::csa_indexer).flops, 2.0 * 64 * 128 * 25000);
  ops.clear();
  // HCA at L = 2^20: n = 8,192 + 128 = 8,320 → 2.18 GFLOP, 4.9 MB (§2.4)
  f.step->attention_ops(attention_kind(f.m, AttentionOp::hca), {{1, (1 << 20) - 1, true}}, Phase::decode, ops);
  EXPECT_DOUBLE_EQ(costmodel_test::find_op(ops, OpKind::hca_attn).flops, 2.0 * 128 * 8320 * 1024);
  // 4.9 MB: the 8,320 entries of 584 B (+ q and o, 128 heads × 512 BF16 each)
  EXPECT_DOUBLE_EQ(costmodel_test::find_op(ops, OpKind::hca_attn).bytes, 8320 * 584.0 + 128 * 512 * 2 * 2.0);
}

TEST(Ops, V4ProPrefillLongestQueryRowsAndRamp) {
  Fixture f("deepseek-v4-pro", {16, 1});
  std::vector<Op> ops;
  // a 4,096-token chunk at prefix 0: query i attends min(1024, floor((i+1)/4)) + min(128, i+1) rows.
  // Σ floor(L/4), L = 1..4096: 4·(0+1+...+1023) + 1024 = 2,096,128 (never above 1024, the top-k);
  // Σ min(128, L): 128·129/2 + 3968·128 = 516,160; together 2,612,288 = the table's rows_total
  // (csa_sparse_attn_prefill.json, 128 heads, chunk 4096, prefix 0). The last query sees 1024 + 128
  // = 1,152 rows, so the ramp is 1152 / 637.77 = 1.806
  f.step->attention_ops(attention_kind(f.m, AttentionOp::csa), {{4096, 0, false}}, Phase::prefill, ops);
  const Op& c = costmodel_test::find_op(ops, OpKind::csa_attn);
  EXPECT_DOUBLE_EQ(c.keys_last, 1152);
  EXPECT_DOUBLE_EQ(c.keys, 2612288);
  EXPECT_NEAR(v4_prefill_ramp(c.keys_last, c.keys / c.tokens), 1152 / 637.765625, 1e-12);
  ops.clear();
  // the same chunk after a 64K prefix (every query: top-k + window = 1,152 rows, flat) batched with
  // a fresh 16-token prompt (query i: floor(i/4) + i rows, Σ = 28 + 136 = 164; its last query 4 + 16
  // = 20): keys = 4096·1152 + 164, keys_last = (4096·1152 + 16·20) / 4112, so the ramp is
  // (4096·1152 + 320) / (4096·1152 + 164) = 1.00003: the batch is priced as the flat chunk it mostly is,
  // not as a prefix-0 chunk
  f.step->attention_ops(attention_kind(f.m, AttentionOp::csa), {{4096, 65536, false}, {16, 0, false}}, Phase::prefill, ops);
  const Op& b = costmodel_test::find_op(ops, OpKind::csa_attn);
  EXPECT_DOUBLE_EQ(b.keys, 4096.0 * 1152 + 164);
  EXPECT_DOUBLE_EQ(b.keys_last, (4096.0 * 1152 + 16 * 20) / 4112);
  EXPECT_NEAR(v4_prefill_ramp(b.keys_last, b.keys / b.tokens), (4096.0 * 1152 + 320) / (4096.0 * 1152 + 164), 1e-12);
  ops.clear();
  // two fresh prompts of 4,096 and 16 tokens: each sequence's own ramp, weighted by its rows
  f.step->attention_ops(attention_kind(f.m, AttentionOp::csa), {{4096, 0, false}, {16, 0, false}}, Phase::prefill, ops);
  const Op& d = costmodel_test::find_op(ops, OpKind::csa_attn);
  EXPECT_DOUBLE_EQ(d.keys, 2612288.0 + 164);
  EXPECT_NEAR(v4_prefill_ramp(d.keys_last, d.keys / d.tokens), (4096.0 * 1152 + 16 * 20) / (2612288.0 + 164), 1e-12);
  ops.clear();
  // HCA at prefix 0, chunk 4,096: floor(4096/128) + 128 = 160 rows for the last query (§2.4)
  f.step->attention_ops(attention_kind(f.m, AttentionOp::hca), {{4096, 0, false}}, Phase::prefill, ops);
  EXPECT_DOUBLE_EQ(costmodel_test::find_op(ops, OpKind::hca_attn).keys_last, 160);
  ops.clear();
  // HCA, chunk 256 after 4,096 cached tokens: L = 4097..4352, floor(L/128) is 32 for 4097..4223
  // (127 values), 33 for 4224..4351 (128), 34 for 4352 (1): 4064 + 4224 + 34 = 8,322, plus 256·128
  // window rows: 41,090 = hca_attn_prefill.json's rows_total at (chunk 256, prefix 4096)
  f.step->attention_ops(attention_kind(f.m, AttentionOp::hca), {{256, 4096, false}}, Phase::prefill, ops);
  EXPECT_DOUBLE_EQ(costmodel_test::find_op(ops, OpKind::hca_attn).keys, 41090);
  ops.clear();
  // the same chunk at prefix 0: Σ floor(L/128), L = 1..256, = 128·1 + 1·2 = 130; Σ min(128, L) =
  // 8,256 + 128·128 = 24,640; together 24,770 = the table's rows_total at prefix 0 (the midpoint rule
  // this replaced gave 256·129 = 33,024)
  f.step->attention_ops(attention_kind(f.m, AttentionOp::hca), {{256, 0, false}}, Phase::prefill, ops);
  EXPECT_DOUBLE_EQ(costmodel_test::find_op(ops, OpKind::hca_attn).keys, 24770);
  EXPECT_DOUBLE_EQ(v4_prefill_ramp(0, 640), 1.0);    // not known: flat
  EXPECT_DOUBLE_EQ(v4_prefill_ramp(600, 640), 1.0);  // never below 1
}

// Every V4 prefill table row (one sequence: chunk after prefix, the measured kernel's own row count
// rows_total) through the engine's rule: the engine's attended rows are the table's, and its
// keys_last is the row's last query (what the fit's ramp feature reads: costmodels/calibration/
// samples.cpp v4_rows_of_last_query), computed here from the row's shape by hand.
TEST(Ops, V4PrefillTableRowsAreTheEnginesRowCounts) {
  const auto tables = load_kernel_tables(test::data("costmodels/data/h200"));
  Fixture pro("deepseek-v4-pro", {16, 1}), flash("deepseek-v4-flash", {8, 1});
  int checked = 0;
  for (const char* file : {"csa_sparse_attn_prefill.json", "hca_attn_prefill.json", "swa_attn_prefill.json"}) {
    for (const KernelRow& r : tables.at(file).rows) {
      const double P = r.at("prefix"), N = r.at("chunk"), ratio = r.at("ratio"), topk = r.at("topk"), w = r.at("window");
      const AttentionOp op = ratio == 4 ? AttentionOp::csa : ratio == 128 ? AttentionOp::hca : AttentionOp::swa;
      // CSA top-k 512 is V4-Flash's, 1024 V4-Pro's (model-facts §2.3); only V4-Flash has SWA-only layers
      Fixture& f = topk == 512 || op == AttentionOp::swa ? flash : pro;
      const AttentionSpec& a = f.m.attention_kinds[attention_kind(f.m, op)];
      ASSERT_EQ(a.window_tokens, w) << file;
      if (op == AttentionOp::csa) {
        ASSERT_EQ(a.indexer_topk, topk) << file;
      }
      std::vector<Op> ops;
      f.step->attention_ops(attention_kind(f.m, op), {{static_cast<long long>(N), static_cast<long long>(P), false}}, Phase::prefill, ops);
      const Op& o = costmodel_test::find_op(ops, op == AttentionOp::csa ? OpKind::csa_attn : op == AttentionOp::hca ? OpKind::hca_attn : OpKind::swa_attn);
      EXPECT_DOUBLE_EQ(o.keys, r.at("rows_total")) << file << " prefix " << P << " chunk " << N;
      const double L = P + N, entries = ratio > 0 ? std::floor(L / ratio) : 0;
      const double last = std::min(w, L) + (topk > 0 ? std::min(topk, entries) : entries);
      EXPECT_DOUBLE_EQ(o.keys_last, last) << file << " prefix " << P << " chunk " << N;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 427);  // 200 + 188 + 39 rows
}

TEST(Roofline, TimeIsFixedPlusTheLargerOfComputeAndMemory) {
  const GpuSpec g = test::gpu("h200");
  RooflineCostModel r(g);
  Op o;
  o.cls = OpClass::gemm;
  o.flops = 1e12;
  o.bytes = 1e6;
  const OpEfficiency& e = g.eff(OpClass::gemm);
  EXPECT_DOUBLE_EQ(r.latency(o).seconds, e.fixed_s + 1e12 / (e.compute * 797e12));  // measured 797 TFLOP/s ceiling
  o.flops = 1e6;
  o.bytes = 1e9;
  EXPECT_DOUBLE_EQ(r.latency(o).seconds, e.fixed_s + 1e9 / (e.memory * 4.3e12));  // measured 4.3 TB/s ceiling
  o.math = DType::fp8;
  o.flops = 1e12;
  o.bytes = 0;
  EXPECT_DOUBLE_EQ(r.latency(o).seconds, e.fixed_s + 1e12 / (e.compute * 1979e12 * 797.0 / 989.0));
  EXPECT_EQ(r.latency(o).source, Provenance::roofline);
}

TEST(Comm, ClosedForms) {
  FabricParams f;  // H200: 450 GB/s NVLink per direction, 50 GB/s NIC, 1 µs / 3 µs
  // uniform all-to-all among 32 GPUs (4 nodes), 1 MB per pair: 7 MB over NVLink, 24 MB over the NIC
  const AllToAllLoad l = uniform_alltoall_load(f, 32, 1e6);
  EXPECT_DOUBLE_EQ(l.intra_bytes, 7e6);
  EXPECT_DOUBLE_EQ(l.inter_bytes, 24e6);
  EXPECT_DOUBLE_EQ(l.node_inter_bytes, 8 * 24e6);
  EXPECT_DOUBLE_EQ(alltoall_time(f, l), 24e6 / 50e9 + 2 * 3e-6);
  // per-call costs join their phase: the NIC phase (480 µs) stays the slower one
  FabricParams c = f;
  c.nvlink_call_s = 25e-6, c.nic_call_s = 44e-6;
  EXPECT_DOUBLE_EQ(alltoall_time(c, l), 24e6 / 50e9 + 2 * 3e-6 + 44e-6);
  // an intra-node all-to-all (8 GPUs, 1 MB per pair: 7 MB over NVLink) pays only the NVLink call
  EXPECT_DOUBLE_EQ(alltoall_time(c, uniform_alltoall_load(c, 8, 1e6)), 7e6 / 450e9 + 2 * 1e-6 + 25e-6);
  EXPECT_DOUBLE_EQ(allreduce_time(f, 8, 8e6), 2.0 * 7 / 8 * 8e6 / 450e9 + 14 * 1e-6);
  EXPECT_DOUBLE_EQ(allreduce_time(f, 1, 8e6), 0.0);
  // 4 experts on 2 GPUs, top-2: a GPU is untouched with probability C(2,2)/C(4,2) = 1/6
  EXPECT_NEAR(expected_destination_gpus(4, 2, 2), 2 * (1 - 1.0 / 6), 1e-12);
  EXPECT_DOUBLE_EQ(expected_destination_gpus(256, 8, 1), 1.0);
}

TEST(StepCost, MoreTokensOrLongerContextIsNeverFaster) {
  for (const char* name : {"kimi-k3", "deepseek-v4-pro", "deepseek-v4-flash", "deepseek-v3"}) {
    Fixture f(name, {8, 1});
    double last = 0;
    for (long long L : {1000LL, 4000LL, 16000LL, 64000LL, 256000LL, 1000000LL}) {
      std::vector<std::vector<SeqWork>> ranks(8);
      for (auto& r : ranks) r = {{1, L, true}, {1, L / 2, true}};
      const double t = f.step->step(ranks, Phase::decode).total_s;
      EXPECT_GE(t, last) << name << " L=" << L;
      last = t;
    }
    last = 0;
    for (long long n : {256LL, 1024LL, 4096LL, 16384LL}) {
      std::vector<std::vector<SeqWork>> ranks(8);
      ranks[0] = {{n, 0, true}};
      const double t = f.step->step(ranks, Phase::prefill).total_s;
      EXPECT_GT(t, last) << name << " N=" << n;
      last = t;
    }
  }
}

TEST(StepCost, TwoBatchOverlapHidesCommunicationUpToCompute) {
  const ModelSpec m = test::model("deepseek-v4-pro");
  auto cost = std::make_shared<RooflineCostModel>(test::gpu("h200"));
  StepCostModel plain(m, cost, FabricParams{}, {16, 1, 0, 1.0, false}, 0.0), tbo(m, cost, FabricParams{}, {16, 1, 0, 1.0, true}, 0.0);
  std::vector<std::vector<SeqWork>> ranks(16, {{4096, 0, true}});
  const StepTime a = plain.step(ranks, Phase::prefill), b = tbo.step(ranks, Phase::prefill);
  EXPECT_GT(a.comm_s, 0);
  EXPECT_NEAR(a.total_s, a.attention_s + a.ffn_s + a.comm_s + a.other_s, 1e-12);
  EXPECT_LT(b.total_s, a.total_s);
  EXPECT_GE(b.total_s, a.total_s - a.comm_s - 1e-12);
}

// Two-batch overlap splits a rank's tokens into two micro-batches: a decode step with one token per
// rank cannot be split, so it costs exactly what it costs without overlap.
TEST(StepCost, TwoBatchOverlapNeedsTwoTokensPerRankInDecode) {
  const ModelSpec m = test::model("deepseek-v4-pro");
  auto cost = std::make_shared<RooflineCostModel>(test::gpu("h200"));
  StepCostModel plain(m, cost, FabricParams{}, {16, 1, 0, 1.0, false}, 0.0), tbo(m, cost, FabricParams{}, {16, 1, 0, 1.0, true}, 0.0);
  const std::vector<std::vector<SeqWork>> one(16, {{1, 4000, true}});
  EXPECT_GT(plain.step(one, Phase::decode).comm_s, 0);
  EXPECT_DOUBLE_EQ(tbo.step(one, Phase::decode).total_s, plain.step(one, Phase::decode).total_s);
}

// finish() memoises each FFN layer's priced parts by (FFN kind, micro-batches, tokens, expert-load
// sample): what it returns must not depend on what was priced before. A model that priced another
// sample, or the same token counts split into two micro-batches (prefill with two-batch overlap),
// gives bit-for-bit what a fresh model gives; and the samples really do price differently, so a key
// that dropped the sample or the micro-batch count would fail here.
TEST(StepCost, FinishIsTheSameWhateverWasPricedBefore) {
  const ModelSpec m = test::model("deepseek-v4-pro");
  auto cost = std::make_shared<RooflineCostModel>(test::gpu("h200"));
  InstanceShape shape{16, 1, 0, 0.0, true};
  shape.expert_skew = true;
  auto same = [](const StepTime& a, const StepTime& b) {
    EXPECT_EQ(a.total_s, b.total_s);
    EXPECT_EQ(a.ffn_s, b.ffn_s);
    EXPECT_EQ(a.comm_s, b.comm_s);
    EXPECT_EQ(a.comm_total_s, b.comm_total_s);
    EXPECT_EQ(a.a2a_inter_bytes_gpu, b.a2a_inter_bytes_gpu);
    EXPECT_EQ(a.expert_load, b.expert_load);
  };
  const std::vector<std::vector<SeqWork>> four(16, std::vector<SeqWork>(4, {1, 4000, true}));
  const std::vector<std::vector<SeqWork>> one(16, {{1, 4000, true}});
  StepCostModel fresh(m, cost, FabricParams{}, shape, 0.0), used(m, cost, FabricParams{}, shape, 0.0);
  const StepParts p4 = fresh.attention_part(four, Phase::decode);
  const StepTime s3 = used.finish(p4, Phase::decode, 3), s5_after = used.finish(p4, Phase::decode, 5);
  const StepTime s5 = fresh.finish(p4, Phase::decode, 5);
  EXPECT_NE(s3.total_s, s5.total_s);  // the samples are different loads
  same(s5_after, s5);
  // one token per rank: decode cannot split it (one micro-batch), prefill with overlap does (two)
  StepCostModel fresh2(m, cost, FabricParams{}, shape, 0.0);
  const StepTime pre = used.finish(used.attention_part(one, Phase::prefill), Phase::prefill, 5);
  const StepTime dec_after = used.finish(used.attention_part(one, Phase::decode), Phase::decode, 5);
  const StepTime dec = fresh2.finish(fresh2.attention_part(one, Phase::decode), Phase::decode, 5);
  EXPECT_NE(pre.ffn_s, dec.ffn_s);
  same(dec_after, dec);
  // the same tokens in different prompts: 2 x 2,048 per rank (S = 32) and 8 x 512 (S = 128) have one
  // token count but different routing drift (sequence_sigma), so pricing one first must not
  // change the other (the sequence bucket is part of the memo key)
  const std::vector<std::vector<SeqWork>> few(16, std::vector<SeqWork>(2, {2048, 0, true}));
  const std::vector<std::vector<SeqWork>> many(16, std::vector<SeqWork>(8, {512, 0, true}));
  StepCostModel fresh3(m, cost, FabricParams{}, shape, 0.0);
  const StepTime few_first = used.finish(used.attention_part(few, Phase::prefill), Phase::prefill, 5);
  const StepTime many_after = used.finish(used.attention_part(many, Phase::prefill), Phase::prefill, 5);
  const StepTime many_fresh = fresh3.finish(fresh3.attention_part(many, Phase::prefill), Phase::prefill, 5);
  EXPECT_GT(few_first.expert_load, many_fresh.expert_load);
  same(many_after, many_fresh);
}

// KDA's recurrent state has a fixed size, so a KDA kind's attention is a function of the tokens
// and sequences alone (StepCostModel::KdaKey memoises it): the same counts at other contexts give
// the same seconds (decode, MTP draft passes, prefill), the MLA kind beside it does not, and
// whatever was priced before, or how many other shapes went through the memos in between (the FFN
// memo is direct-mapped: a collision recomputes), a step's parts and finish() are what a fresh
// model gives, its memo hits included; with the roofline and with the committed fit.
TEST(StepCost, KdaAttentionIgnoresTheContextAndTheMemosChangeNothing) {
  const ModelSpec m = test::model("kimi-k3");
  const GpuSpec g = test::gpu("h200");
  InstanceShape shape{32, 8, 0, 0.0, true};
  shape.expert_skew = true;
  shape.mtp_draft_tokens = 2;  // draft passes priced too (attn_draft)
  const int kda = attention_kind(m, AttentionOp::kda), mla = attention_kind(m, AttentionOp::mla);
  const size_t K = static_cast<size_t>(kda), M = static_cast<size_t>(mla);
  const std::vector<std::shared_ptr<const CostModel>> costs{std::make_shared<RooflineCostModel>(g),
                                                           std::make_shared<FittedCostModel>(load_fit_cached(g.fitted_models_path), g)};
  for (const auto& cost : costs) {
    SCOPED_TRACE(cost->name());
    std::vector<Op> ops;
    StepCostModel probe(m, cost, FabricParams{}, shape, 0.0);
    probe.attention_ops(kda, {{1, 70000, true}, {1, 300, true}}, Phase::decode, ops);
    for (const Op& o : ops) EXPECT_EQ(o.ctx_sum + o.ctx_max, 0.0) << "KDA ops carry no context";
    const int dp = 4;  // EP 32 / attention TP 8
    auto batch = [&](long long ctx0, long long tokens) {
      std::vector<std::vector<SeqWork>> b(dp);
      for (int r = 0; r < dp; ++r)
        for (int i = 0; i < 6 + r; ++i) b[static_cast<size_t>(r)].push_back({tokens, ctx0 + 1000 * i + 37 * r, true});
      return b;
    };
    StepCostModel fresh(m, cost, FabricParams{}, shape, 0.0), used(m, cost, FabricParams{}, shape, 0.0), check(m, cost, FabricParams{}, shape, 0.0);
    auto same_parts = [&](const StepParts& a, const StepParts& b) {
      for (size_t k = 0; k < m.attention_kinds.size(); ++k) {
        EXPECT_EQ(a.attn[k], b.attn[k]) << k;
        EXPECT_EQ(a.attn_extra[k], b.attn_extra[k]) << k;
        EXPECT_EQ(a.attn_kernels[k], b.attn_kernels[k]) << k;
        EXPECT_EQ(a.attn_draft, b.attn_draft);
        EXPECT_EQ(a.attn_draft_extra, b.attn_draft_extra);
      }
      EXPECT_EQ(a.source, b.source);
      EXPECT_EQ(a.extrapolated_ops, b.extrapolated_ops);
    };
    auto same_time = [](const StepTime& u, const StepTime& f) {
      EXPECT_EQ(u.total_s, f.total_s);
      EXPECT_EQ(u.ffn_s, f.ffn_s);
      EXPECT_EQ(u.comm_s, f.comm_s);
      EXPECT_EQ(u.a2a_inter_bytes_gpu, f.a2a_inter_bytes_gpu);
      EXPECT_EQ(u.extrapolated_s, f.extrapolated_s);
    };
    const StepParts short_ctx = used.attention_part(batch(2000, 3), Phase::decode);
    // many other FFN shapes through `used`'s memo (2^17 > its 2^16 slots), every 4096th checked fresh
    StepParts other = used.attention_part(batch(5000, 3), Phase::decode);
    for (int i = 0; i < (1 << 17); ++i) {
      other.Tmax = 1 + i, other.Ttot = 4 * (1 + i);
      const StepTime u = used.finish(other, Phase::decode, i % 7);
      if (i % 4096 == 0) same_time(u, check.finish(other, Phase::decode, i % 7));
    }
    const StepParts long_used = used.attention_part(batch(90000, 3), Phase::decode);
    const StepParts long_fresh = fresh.attention_part(batch(90000, 3), Phase::decode);
    EXPECT_EQ(short_ctx.attn[K], long_used.attn[K]);
    EXPECT_EQ(short_ctx.attn_draft[K], long_used.attn_draft[K]);
    EXPECT_LT(short_ctx.attn[M], long_used.attn[M]);
    same_parts(long_used, long_fresh);
    for (int sample : {0, 3}) {
      const StepTime f = fresh.finish(long_fresh, Phase::decode, sample);
      same_time(used.finish(long_used, Phase::decode, sample), f);
      same_time(used.finish(long_used, Phase::decode, sample), f);  // the memo's hit
    }
    // prefill: the same chunks after no prefix and after 50K tokens
    const StepParts p0 = used.attention_part(batch(0, 2048), Phase::prefill);
    const StepParts p50 = used.attention_part(batch(50000, 2048), Phase::prefill);
    EXPECT_EQ(p0.attn[K], p50.attn[K]);
    EXPECT_LT(p0.attn[M], p50.attn[M]);
    same_parts(p50, fresh.attention_part(batch(50000, 2048), Phase::prefill));
  }
}

// The step's extrapolated seconds (StepTime::extrapolated_s): an op answered `extrapolated` counts
// the part OpLatency::extrapolated_s says (only its kernels outside the measurements), or the
// whole op where the model leaves it at -1; ScaledCostModel (capacity's band runs) scales both.
// tiny-moe, EP 1, one sequence of 1 token: routed experts 1 ms per layer of which 0.25 ms
// extrapolated; the shared expert 2 ms, all of it extrapolated (-1); 3 MoE layers, nothing else.
TEST(StepCost, ExtrapolatedSecondsCountThePartTheModelSays) {
  class Parts final : public CostModel {
   public:
    std::string name() const override { return "parts"; }
    OpLatency latency(const Op& o) const override {
      if (o.kind == OpKind::moe_experts) return {1e-3, Provenance::extrapolated, 0.25e-3};
      if (o.kind == OpKind::moe_shared) return {2e-3, Provenance::extrapolated};
      return {0.0, Provenance::fitted};
    }
  };
  const ModelSpec m = load_model(test::data("tests/data/tiny-moe.json"));
  InstanceShape s;
  s.ep = 1;
  auto inner = std::make_shared<Parts>();
  const StepCostModel sc(m, inner, FabricParams{}, s, 0.0);
  const std::vector<std::vector<SeqWork>> one{{{1, 100, true}}};
  const StepTime t = sc.step(one, Phase::decode);
  EXPECT_NEAR(t.extrapolated_s, 3 * (0.25e-3 + 2e-3), 1e-15);
  // at 1.047 (the band's upper end) every part scales with the op
  const StepCostModel sc2(m, std::make_shared<ScaledCostModel>(inner, 1.047), FabricParams{}, s, 0.0);
  EXPECT_NEAR(sc2.step(one, Phase::decode).extrapolated_s, 1.047 * 3 * (0.25e-3 + 2e-3), 1e-15);
  Op o;
  o.kind = OpKind::moe_experts;
  const OpLatency l = ScaledCostModel(inner, 0.953).latency(o);
  EXPECT_NEAR(l.seconds, 0.953e-3, 1e-15);
  EXPECT_NEAR(l.extrapolated_s, 0.953 * 0.25e-3, 1e-15);
  o.kind = OpKind::moe_shared;
  EXPECT_EQ(ScaledCostModel(inner, 0.953).latency(o).extrapolated_s, -1);
}

TEST(Fitted, LayerNormsAreTwoKernelsOfTwiceTheRows) {
  // a layer's two residual-add + RMSNorm kernels each move twice a plain RMSNorm's bytes: two
  // launches of the measured RMSNorm at 2·T rows. At decode sizes the kernel is flat (a launch
  // floor), so the pair costs about two RMSNorms of T rows (it was priced as four); at prefill
  // sizes it is bandwidth-bound, so it costs what four RMSNorms of T rows move.
  const GpuSpec g = test::gpu("h200");
  const FittedCostModel fit(load_fit_cached(g.fitted_models_path), g);
  Op ln;
  ln.kind = OpKind::layer_norm, ln.cls = OpClass::elementwise, ln.hidden = 3584;  // K3's measured width
  auto one = [&](double rows) {
    const double x[kMaxGridDims] = {rows, 3584};
    return fit.kernel_seconds(Family::latent_rmsnorm, x, nullptr);
  };
  for (double T : {1.0, 8.0, 64.0}) {
    ln.tokens = ln.seqs = T, ln.decode = true, ln.bytes = 16 * T * 3584;  // (an op that moves nothing costs 0)
    const auto c = fit.components(ln);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].family, Family::latent_rmsnorm);
    EXPECT_EQ(c[0].x[0], 2 * T);
    EXPECT_EQ(c[0].count, 2);
    EXPECT_GT(fit.latency(ln).seconds, 1.7 * one(T)) << T;
    EXPECT_LT(fit.latency(ln).seconds, 2.3 * one(T)) << T;  // two floors, not four
  }
  ln.tokens = ln.seqs = 8192, ln.decode = false, ln.bytes = 16 * 8192 * 3584;
  EXPECT_NEAR(fit.latency(ln).seconds / (4 * one(8192)), 1.0, 0.1);
  // the MTP head's input: its two plain RMSNorms of T rows and eh_proj (2·D → D)
  Op mp;
  mp.kind = OpKind::mtp_proj, mp.cls = OpClass::gemm, mp.hidden = 7168, mp.tokens = mp.seqs = mp.gemm_m = 4;
  const GemmShape eh{7168, 2 * 7168, 1, DType::fp8};
  mp.gemms = &eh, mp.gemm_count = 1;
  const auto c = fit.components(mp);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].family, Family::latent_rmsnorm);
  EXPECT_EQ(c[0].count, 2);
  EXPECT_EQ(c[1].family, Family::gemm_fp8);
  EXPECT_EQ(c[1].x[1], 7168);
  EXPECT_EQ(c[1].x[2], 2 * 7168);
}
