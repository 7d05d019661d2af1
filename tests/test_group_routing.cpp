// Group-limited expert routing (DeepSeek-V3's n_group / topk_group) in the EP all-to-all, and
// DeepEP's benchmarks read the way they count (costmodels/comm.hpp expected_parts_reached,
// costmodels/deepep_bench.hpp). Expected values are closed forms worked by hand below.
#include "costmodels/comm.hpp"
#include "costmodels/deepep_bench.hpp"
#include "costmodels/step_cost.hpp"
#include "cli_run.hpp"
#include "helpers.hpp"
#include "scenarios/scenario.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

using namespace servesim;

namespace {

// C(n − m, k) / C(n, k) = Π_{i<k} (n − m − i) / (n − i): the chance that k of n items miss m given ones
double miss(double n, double m, int k) {
  double p = 1;
  for (int i = 0; i < k; ++i) p *= (n - m - i) / (n - i);
  return p;
}

// C(n, j) by Pascal's rule (independent of the product form the code uses)
double choose(int n, int j) {
  if (j < 0 || j > n) return 0;
  if (j == 0 || j == n) return 1;
  return choose(n - 1, j - 1) + choose(n - 1, j);
}

}  // namespace

TEST(GroupRouting, ExpectedPartsReachedByHand) {
  // DeepSeek-V3 at EP32 on 4 nodes: 8 groups, 2 whole groups per node, 4 groups per token, each
  // chosen group reached: a node is missed when none of its 2 groups is among the 4 chosen,
  // C(6,4)/C(8,4) = 15/70, so 4 · 55/70 = 22/7 nodes, 22/7 · 3/4 = 2.357 of them other nodes
  EXPECT_NEAR(expected_parts_reached(256, 8, 8, 4, 4), 22.0 / 7.0, 1e-12);
  // uniform top-8 of 256 over 4 nodes: 4 · (1 − C(192,8)/C(256,8)) = 3.614 (2.711 other nodes)
  EXPECT_NEAR(expected_parts_reached(256, 8, 1, 1, 4), 4 * (1 - miss(256, 64, 8)), 1e-12);
  EXPECT_NEAR(expected_parts_reached(256, 8, 1, 1, 4), 3.614, 5e-4);
  // the same 8 groups over 32 GPUs (each group of 32 experts spans 4 GPUs of 8): each of the 4
  // chosen groups holds 1 + X experts, X ~ Binomial(4, 1/4); a group with k of its experts reaches
  // 4 · (1 − C(24, k) / C(32, k)) of its GPUs
  double gpus = 0;
  for (int j = 0; j <= 4; ++j) gpus += choose(4, j) * std::pow(0.25, j) * std::pow(0.75, 4 - j) * 4 * (1 - choose(24, 1 + j) / choose(32, 1 + j));
  EXPECT_NEAR(expected_parts_reached(256, 8, 8, 4, 32), 4 * gpus, 1e-9);
  EXPECT_NEAR(expected_parts_reached(256, 8, 8, 4, 32), 6.835, 0.01);  // Monte Carlo (review): 6.82-6.84
  // an uneven split (256 experts over 72 GPUs, 3.56 each): the miss chance with a real-valued share
  EXPECT_NEAR(expected_destination_gpus(256, 8, 72), 72 * (1 - miss(256, 256.0 / 72, 8)), 1e-12);
  // no limit when every group may be chosen, or when the token has fewer experts than groups
  EXPECT_DOUBLE_EQ(expected_parts_reached(256, 8, 8, 8, 4), expected_destination_gpus(256, 8, 4));
  EXPECT_DOUBLE_EQ(expected_parts_reached(256, 2, 8, 4, 4), expected_destination_gpus(256, 2, 4));
  // groups that straddle parts (240 experts: 30 per group, 40 per GPU over 6 GPUs): uniform
  // routing, the documented approximation
  EXPECT_DOUBLE_EQ(expected_parts_reached(240, 8, 8, 4, 6), expected_destination_gpus(240, 8, 6));
  EXPECT_DOUBLE_EQ(expected_parts_reached(256, 8, 8, 4, 1), 1.0);
}


TEST(GroupRouting, DeepSeekV3PrefillSendsOneRdmaCopyPerOtherNodeOfItsGroups) {
  const ModelSpec m = test::model("deepseek-v3");
  ModelSpec flat = m;
  int fi = -1;
  for (size_t i = 0; i < m.ffn_kinds.size(); ++i)
    if (m.ffn_kinds[i].op == FfnOp::moe) fi = static_cast<int>(i);
  ASSERT_GE(fi, 0);
  EXPECT_EQ(m.ffn_kinds[static_cast<size_t>(fi)].expert_groups, 8);
  EXPECT_EQ(m.ffn_kinds[static_cast<size_t>(fi)].topk_groups, 4);
  flat.ffn_kinds[static_cast<size_t>(fi)].expert_groups = flat.ffn_kinds[static_cast<size_t>(fi)].topk_groups = 1;
  InstanceShape sh;
  sh.ep = 32, sh.attn_tp = 1, sh.dispatch = EpDispatch::hierarchical;
  const FabricParams f;  // 8 GPUs per node: 4 nodes
  const StepCostModel grouped(m, nullptr, f, sh, 0.0), uniform(flat, nullptr, f, sh, 0.0);
  const double T = 4096;  // tokens per rank, expert load 1
  // FP8 dispatch: T tokens × 22/7 · 3/4 other nodes × 7168 values × 1.03125 bytes
  EXPECT_NEAR(grouped.moe_alltoall_load(fi, T, T * 32, DType::fp8).inter_bytes, T * (22.0 / 7.0) * 0.75 * 7168 * 1.03125, 1e-3);
  EXPECT_NEAR(uniform.moe_alltoall_load(fi, T, T * 32, DType::fp8).inter_bytes, T * 4 * (1 - miss(256, 64, 8)) * 0.75 * 7168 * 1.03125, 1e-3);
  // BF16 combine: 2 bytes per value, the same destinations
  EXPECT_NEAR(grouped.moe_alltoall_load(fi, T, T * 32, DType::bf16).inter_bytes, T * (22.0 / 7.0) * 0.75 * 7168 * 2, 1e-3);
  // NVLink forwarding to each destination GPU other than the sender's: 6.835 · 31/32 per token
  EXPECT_NEAR(grouped.moe_alltoall_load(fi, T, T * 32, DType::bf16).intra_bytes,
              T * expected_parts_reached(256, 8, 8, 4, 32) * 31.0 / 32 * 7168 * 2, 1e-3);
  EXPECT_LT(grouped.moe_alltoall_load(fi, T, T * 32, DType::bf16).intra_bytes, uniform.moe_alltoall_load(fi, T, T * 32, DType::bf16).intra_bytes);
  // low-latency (direct) kernels send one message per routed expert: groups change nothing
  sh.dispatch = EpDispatch::direct;
  const StepCostModel gd(m, nullptr, f, sh, 0.0), ud(flat, nullptr, f, sh, 0.0);
  EXPECT_DOUBLE_EQ(gd.moe_alltoall_load(fi, 128, 128 * 32, DType::fp8).inter_bytes, ud.moe_alltoall_load(fi, 128, 128 * 32, DType::fp8).inter_bytes);
  EXPECT_DOUBLE_EQ(gd.moe_alltoall_load(fi, 128, 128 * 32, DType::fp8).inter_bytes, 128 * 8 * 24.0 / 32 * 7168 * 1.03125);
}

TEST(GroupRouting, DeepEpBenchmarkCountsItsOwnNode) {
  const DeepEpLayer l;
  // internode normal EP64 (8 nodes): groups = nodes, min(8, 4) = 4 chosen, each reached: a token
  // is counted on exactly 4 nodes, its own among them when chosen: 4096 · 4 · 7168 · 1.03125 B
  const ModelSpec m64 = deepep_bench_model(l, 64, EpDispatch::hierarchical, 8);
  EXPECT_EQ(m64.ffn_kinds[0].expert_groups, 8);
  EXPECT_EQ(m64.ffn_kinds[0].topk_groups, 4);
  EXPECT_NEAR(deepep_counted_bytes(m64, 64, 4096, DType::fp8, 8), 121110528.0, 1e-3);
  // ... while the NIC carries only the other nodes' copies: 4 · 7/8 per token
  const FabricParams f;
  EXPECT_NEAR(deepep_bench_load(m64, f, 64, EpDispatch::hierarchical, 4096, DType::fp8).inter_bytes, 4096 * 4 * 7.0 / 8 * 7168 * 1.03125, 1e-3);
  // EP32 (4 nodes): all 4 chosen, the limit is void: uniform, 3.614 nodes counted, 2.711 crossed
  const ModelSpec m32 = deepep_bench_model(l, 32, EpDispatch::hierarchical, 8);
  EXPECT_NEAR(deepep_counted_bytes(m32, 32, 4096, DType::bf16, 8), 4096 * 4 * (1 - miss(256, 64, 8)) * 7168 * 2, 1e-3);
  // intranode EP8: tokens received, its own GPU's included: 8 · (1 − C(224,8)/C(256,8)) = 5.29 per token
  const ModelSpec m8 = deepep_bench_model(l, 8, EpDispatch::hierarchical, 8);
  EXPECT_EQ(m8.ffn_kinds[0].expert_groups, 1);
  EXPECT_NEAR(deepep_counted_bytes(m8, 8, 4096, DType::bf16, 8), 4096 * 8 * (1 - miss(256, 32, 8)) * 7168 * 2, 1e-3);
  // low-latency: uniform routing (top-k of i.i.d. scores)
  EXPECT_EQ(deepep_bench_model(l, 64, EpDispatch::direct, 8).ffn_kinds[0].expert_groups, 1);
  EXPECT_THROW(deepep_bench_model(l, 48, EpDispatch::direct, 8), std::invalid_argument);  // 48 does not divide 256
}

TEST(GroupRouting, ModelFileRejectsGroupsThatDoNotFit) {
  namespace fs = std::filesystem;
  const fs::path d = fs::temp_directory_path() / "servesim_group_routing";
  fs::remove_all(d);
  fs::create_directories(d);
  const std::string base = test::slurp(test::data("scenarios/models/deepseek-v3.json"));
  auto error = [&](const std::vector<std::pair<std::string, std::string>>& edits) {
    std::string s = base;
    for (const auto& [from, to] : edits) {
      const size_t at = s.find(from);
      if (at == std::string::npos) return std::string("pattern not found: ") + from;
      s.replace(at, from.size(), to);
    }
    std::ofstream(d / "m.json") << s;
    try {
      load_model((d / "m.json").string());
    } catch (const ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string e1 = error({{"\"expert_groups\": 8", "\"expert_groups\": 7"}});
  EXPECT_NE(e1.find("expert_groups"), std::string::npos) << e1;
  EXPECT_NE(e1.find("must divide experts (256)"), std::string::npos) << e1;
  // 64 groups of 4 experts: 4 groups per token hold 16 >= 8 experts (accepted), 1 group only 4
  EXPECT_EQ(error({{"\"expert_groups\": 8", "\"expert_groups\": 64"}}), "");
  const std::string e2 = error({{"\"expert_groups\": 8", "\"expert_groups\": 64"}, {"\"topk_groups\": 4", "\"topk_groups\": 1"}});
  EXPECT_NE(e2.find("topk_groups"), std::string::npos) << e2;
  EXPECT_NE(e2.find("fewer experts than top_k (8)"), std::string::npos) << e2;
  const std::string e3 = error({{"\"topk_groups\": 4", "\"topk_groups\": 9"}});
  EXPECT_NE(e3.find("topk_groups"), std::string::npos) << e3;
}
