// servesim costmodels: the capacity-planning arithmetic of the seed article's Section III
// ("10K concurrency" node counts), reproducible under the article's own assumptions and rounding,
// and the same derivation with the real model configs (memory.hpp). Pure functions.
#pragma once
#include "scenarios/model_spec.hpp"

#include <string>
#include <vector>

namespace servesim {

/// How intermediate results are rounded.
///  article:  to the nearest integer at every step, as the article does (69.4 → 69 requests per
///            unit, 10,000/147 = 68.03 → 68 units, 54.4 → 54 prefill nodes);
///  covering: requests per unit rounded down, units and prefill nodes rounded up, so that the
///            cluster really holds the target concurrency.
enum class Rounding { article, covering };

/// Inputs of the "D-node concurrency" derivation (article Steps 2-4). Sizes in GB = 1e9 bytes.
struct CapacityInputs {
  std::string label;
  double hbm_gb_per_gpu = 0;
  double weights_gb_per_gpu = 0;
  double overhead_gb_per_gpu = 0;  ///< "attention/embedding" (article) or workspace (real)
  int unit_gpus = 0;               ///< GPUs per deployment unit (EP size)
  int kv_replicas = 1;             ///< copies of a request's KV inside a unit (attention TP size)
  int gpus_per_node = 8;
  double kv_gb_per_request = 0;    ///< at the average context, per copy
  int concurrency = 10000;
  double d_per_p = 2.5;            ///< decode nodes per prefill node (article: P:D = 1:2.5)
};

struct CapacityResult {
  double kv_gb_per_gpu = 0, kv_gb_per_unit = 0;
  double requests_per_unit_exact = 0;
  long requests_per_unit = 0;
  double units_exact = 0;
  long units = 0;
  long d_nodes = 0;
  double p_nodes_exact = 0;
  long p_nodes = 0;
  long total_nodes = 0;
  long total_gpus = 0;
};

/// Article Steps 2-4: KV per GPU = HBM − weights − overhead; per unit = that × unit GPUs / KV
/// replicas; requests per unit = per unit / KV per request; units = concurrency / that;
/// D nodes = units × GPUs per unit / GPUs per node; P nodes = D nodes / d_per_p.
/// Throws std::invalid_argument when no KV fits (KV per GPU ≤ 0 or requests per unit < 1).
CapacityResult derive_nodes(const CapacityInputs& in, Rounding r);

/// Article "bare memory" card count: weights TB / HBM (rounded up, as the article does) plus
/// KV TB / HBM (rounded to nearest). Sizes in TB = 1e12 bytes, HBM in GB.
struct BareCards {
  long weight_cards = 0, kv_cards = 0, total = 0;
};
BareCards bare_cards(double weights_tb, double kv_tb, double hbm_gb);

/// One printed line of a derivation: what, the formula with numbers, the value.
struct DerivationLine {
  std::string what, formula;
  double value = 0;
};

/// The article's Section III numbers recomputed step by step from its stated assumptions
/// (640-dim ×2 latent for K3 MLA, 207 MB of bf16 KDA state, 12.2 KB/token for V4 as 10% of V3.2,
/// per-card weights 69 / 82 GB, overheads 5 / 3 GB, EP32 / EP16, 500K average context, P:D 1:2.5,
/// 10,000 concurrency, 141 / 288 GB cards), with the article's rounding. Keys of `values` used by
/// tests: "k3_kv_kb_per_token", "k3_kda_state_mb", "dsv4_kv_kb_per_token", "k3_h200_cards",
/// "dsv4_h200_cards", and CapacityResults in `results` keyed "k3_h200", "dsv4_h200", "k3_b300",
/// "dsv4_b300".
struct ArticleSection3 {
  std::vector<DerivationLine> lines;
  std::vector<std::pair<std::string, CapacityInputs>> inputs;
  std::vector<std::pair<std::string, CapacityResult>> results;
  double value(const std::string& what) const;          ///< throws std::out_of_range
  const CapacityResult& result(const std::string& key) const;  ///< throws std::out_of_range
};
ArticleSection3 article_section3(Rounding r);

}  // namespace servesim
