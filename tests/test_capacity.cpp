// The seed article's Section III, reproduced under its own assumptions and rounding, and the
// covering rounding (hand arithmetic in the comments).
#include "costmodels/capacity.hpp"

#include <gtest/gtest.h>

using namespace servesim;

TEST(Article, KvPerTokenStateAndBareCardCounts) {
  const ArticleSection3 a = article_section3(Rounding::article);
  EXPECT_DOUBLE_EQ(a.value("k3_kv_kb_per_token"), 61.4);   // 24 × 640 × 2 × 2 B = 61,440 B
  EXPECT_DOUBLE_EQ(a.value("k3_kda_state_mb"), 207.0);     // 69 × 96 × 128² × 2 B = 207.0 MiB
  EXPECT_DOUBLE_EQ(a.value("dsv4_kv_kb_per_token"), 12.2); // 10% of 61 × 2,048 B = 122 KiB
  EXPECT_DOUBLE_EQ(a.value("k3_weight_cards"), 20);        // ⌈2,800 / 141⌉
  EXPECT_DOUBLE_EQ(a.value("k3_kv_cards"), 4369);          // 616,000 / 141 = 4,368.8
  EXPECT_DOUBLE_EQ(a.value("k3_h200_cards"), 4389);        // the article's "≈ 4,390"
  EXPECT_DOUBLE_EQ(a.value("dsv4_weight_cards"), 12);      // ⌈1,600 / 141⌉ = ⌈11.3⌉
  EXPECT_DOUBLE_EQ(a.value("dsv4_kv_cards"), 865);         // 122,000 / 141 = 865.2
  EXPECT_DOUBLE_EQ(a.value("dsv4_h200_cards"), 877);
  EXPECT_DOUBLE_EQ(a.value("k3_gb_per_500k_request"), 30.9);   // 0.207 + 30.7
  EXPECT_DOUBLE_EQ(a.value("dsv4_gb_per_500k_request"), 6.1);
}

TEST(Article, NodeCountsRoundedAsTheArticleDoes) {
  const ArticleSection3 a = article_section3(Rounding::article);
  struct Want {
    const char* key;
    long req, units, d, p, total;
  } want[] = {
      {"k3_h200", 69, 145, 580, 232, 812},   // 67×32 = 2,144 GB / 30.9 = 69.4; 10,000/69 = 144.9; 580/2.5 = 232
      {"dsv4_h200", 147, 68, 136, 54, 190},  // 56×16 = 896 / 6.1 = 146.9; 10,000/147 = 68.03; 136/2.5 = 54.4
      {"k3_b300", 222, 45, 180, 72, 252},    // 214×32 = 6,848 / 30.9 = 221.6; 45.05; 72
      {"dsv4_b300", 532, 19, 38, 15, 53},    // 203×16 = 3,248 / 6.1 = 532.5 → 532 (round half to even is not used: 532.46); 18.8; 15.2
  };
  for (const auto& w : want) {
    const CapacityResult& r = a.result(w.key);
    EXPECT_EQ(r.requests_per_unit, w.req) << w.key;
    EXPECT_EQ(r.units, w.units) << w.key;
    EXPECT_EQ(r.d_nodes, w.d) << w.key;
    EXPECT_EQ(r.p_nodes, w.p) << w.key;
    EXPECT_EQ(r.total_nodes, w.total) << w.key;
  }
}

TEST(Article, CoveringRoundingReallyHoldsTenThousand) {
  const ArticleSection3 a = article_section3(Rounding::covering);
  // DSV4 H200: ⌊146.9⌋ = 146 per unit, ⌈10,000/146⌉ = ⌈68.49⌉ = 69 units → 138 D nodes, ⌈55.2⌉ = 56 P
  const CapacityResult& d = a.result("dsv4_h200");
  EXPECT_EQ(d.requests_per_unit, 146);
  EXPECT_EQ(d.units, 69);
  EXPECT_EQ(d.total_nodes, 138 + 56);
  for (const auto& [key, r] : a.results) EXPECT_GE(r.units * r.requests_per_unit, 10000) << key;
  // K3 B300: ⌊221.6⌋ = 221, ⌈45.25⌉ = 46 units → 184 D, ⌈73.6⌉ = 74 P = 258
  EXPECT_EQ(a.result("k3_b300").total_nodes, 258);
}

TEST(Capacity, NoRoomForKvIsAnError) {
  CapacityInputs c;
  c.label = "x";
  c.hbm_gb_per_gpu = 80, c.weights_gb_per_gpu = 79, c.overhead_gb_per_gpu = 2, c.unit_gpus = 8, c.kv_gb_per_request = 1;
  EXPECT_THROW(derive_nodes(c, Rounding::covering), std::invalid_argument);
}
