#include "costmodels/capacity.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace servesim {
namespace {

long round_step(double x, bool down_when_covering, Rounding r) {
  if (r == Rounding::article) return std::lround(x);
  return down_when_covering ? static_cast<long>(std::floor(x + 1e-9)) : static_cast<long>(std::ceil(x - 1e-9));
}

double round_to(double x, double q) { return std::round(x / q) * q; }

std::string fmt(double v, int prec = 1) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(prec);
  o << v;
  return o.str();
}

}  // namespace

CapacityResult derive_nodes(const CapacityInputs& in, Rounding r) {
  CapacityResult c;
  c.kv_gb_per_gpu = in.hbm_gb_per_gpu - in.weights_gb_per_gpu - in.overhead_gb_per_gpu;
  if (c.kv_gb_per_gpu <= 0)
    throw std::invalid_argument(in.label + ": no memory left for KV (" + fmt(in.hbm_gb_per_gpu) + " GB HBM − " + fmt(in.weights_gb_per_gpu) +
                                " GB weights − " + fmt(in.overhead_gb_per_gpu) + " GB overhead ≤ 0)");
  c.kv_gb_per_unit = c.kv_gb_per_gpu * in.unit_gpus / in.kv_replicas;
  c.requests_per_unit_exact = c.kv_gb_per_unit / in.kv_gb_per_request;
  c.requests_per_unit = round_step(c.requests_per_unit_exact, true, r);
  if (c.requests_per_unit < 1) throw std::invalid_argument(in.label + ": a unit holds no request at this context length");
  c.units_exact = static_cast<double>(in.concurrency) / c.requests_per_unit;
  c.units = round_step(c.units_exact, false, r);
  c.d_nodes = c.units * in.unit_gpus / in.gpus_per_node;
  c.p_nodes_exact = c.d_nodes / in.d_per_p;
  c.p_nodes = round_step(c.p_nodes_exact, false, r);
  c.total_nodes = c.d_nodes + c.p_nodes;
  c.total_gpus = c.total_nodes * in.gpus_per_node;
  return c;
}

BareCards bare_cards(double weights_tb, double kv_tb, double hbm_gb) {
  BareCards b;
  b.weight_cards = static_cast<long>(std::ceil(weights_tb * 1000 / hbm_gb - 1e-9));
  b.kv_cards = std::lround(kv_tb * 1000 / hbm_gb);
  b.total = b.weight_cards + b.kv_cards;
  return b;
}

double ArticleSection3::value(const std::string& what) const {
  for (const auto& l : lines)
    if (l.what == what) return l.value;
  throw std::out_of_range("no derivation line " + what);
}

const CapacityResult& ArticleSection3::result(const std::string& key) const {
  for (const auto& [k, v] : results)
    if (k == key) return v;
  throw std::out_of_range("no capacity result " + key);
}

ArticleSection3 article_section3(Rounding r) {
  ArticleSection3 a;
  auto line = [&](std::string what, std::string formula, double v) { a.lines.push_back({std::move(what), std::move(formula), v}); };
  // KV per token and state, as the article computes them (it mixes KB = 1000 B and KiB/MiB).
  const double k3_layer_b = 640.0 * 2 * 2;                       // "640-dim latent × 2 (K/V) × 2 bytes"
  const double k3_kv_kb = round_to(24 * k3_layer_b / 1000, 0.1);  // 61,440 B → 61.4 KB
  line("k3_kv_kb_per_token", "24 MLA layers × 640 × 2 (K/V) × 2 B = " + fmt(24 * k3_layer_b, 0) + " B", k3_kv_kb);
  const double k3_state_mb = round_to(69.0 * 96 * 128 * 128 * 2 / (1 << 20), 1);  // 217,055,232 B = 207 MiB
  line("k3_kda_state_mb", "69 KDA layers × 96 × 128² × 2 B (bf16) = 217,055,232 B", k3_state_mb);
  const double v32_kb = round_to(61.0 * 2048 / 1024, 1);  // 124,928 B = 122 KiB
  const double dsv4_kv_kb = round_to(v32_kb * 0.10, 0.1);  // "compressed to 10% of V3.2"
  line("dsv4_kv_kb_per_token", "10% of V3.2's 61 × 2,048 B = " + fmt(v32_kb, 0) + " KB", dsv4_kv_kb);
  // 1M-token request and 10K concurrency
  const double k3_req_1m_gb = round_to(k3_kv_kb * 1e6 / 1e6 + k3_state_mb / 1000, 0.1);  // 61.4 + 0.207 → 61.6 GB
  line("k3_gb_per_1m_request", fmt(k3_kv_kb) + " KB × 1M + " + fmt(k3_state_mb, 0) + " MB", k3_req_1m_gb);
  const double dsv4_req_1m_gb = round_to(dsv4_kv_kb, 0.1);
  line("dsv4_gb_per_1m_request", fmt(dsv4_kv_kb) + " KB × 1M", dsv4_req_1m_gb);
  const double k3_kv_tb = k3_req_1m_gb * 10000 / 1000, dsv4_kv_tb = dsv4_req_1m_gb * 10000 / 1000;
  line("k3_kv_tb_10k", "10,000 × " + fmt(k3_req_1m_gb) + " GB", k3_kv_tb);
  line("dsv4_kv_tb_10k", "10,000 × " + fmt(dsv4_req_1m_gb) + " GB", dsv4_kv_tb);
  const BareCards k3c = bare_cards(2.8, k3_kv_tb, 141), dc = bare_cards(1.6, dsv4_kv_tb, 141);
  line("k3_weight_cards", "⌈2.8 TB / 141 GB⌉", static_cast<double>(k3c.weight_cards));
  line("k3_kv_cards", fmt(k3_kv_tb, 0) + " TB / 141 GB, nearest", static_cast<double>(k3c.kv_cards));
  line("k3_h200_cards", "weights + KV cards (article: \"≈ 4,390\")", static_cast<double>(k3c.total));
  line("dsv4_weight_cards", "⌈1.6 TB / 141 GB⌉", static_cast<double>(dc.weight_cards));
  line("dsv4_kv_cards", fmt(dsv4_kv_tb, 0) + " TB / 141 GB, nearest", static_cast<double>(dc.kv_cards));
  line("dsv4_h200_cards", "weights + KV cards (article: 877)", static_cast<double>(dc.total));
  // Steps 2-4 at 500K average context
  const double k3_req_gb = round_to(k3_state_mb / 1000 + k3_kv_kb * 500e3 / 1e6, 0.1);  // 0.207 + 30.7 → 30.9
  const double dsv4_req_gb = round_to(dsv4_kv_kb * 500e3 / 1e6, 0.1);                 // 6.1
  line("k3_gb_per_500k_request", fmt(k3_state_mb, 0) + " MB + " + fmt(k3_kv_kb) + " KB × 500K", k3_req_gb);
  line("dsv4_gb_per_500k_request", fmt(dsv4_kv_kb) + " KB × 500K", dsv4_req_gb);
  auto in = [&](std::string label, double hbm, double w, double ovh, int ep, double req) {
    CapacityInputs c;
    c.label = std::move(label), c.hbm_gb_per_gpu = hbm, c.weights_gb_per_gpu = w, c.overhead_gb_per_gpu = ovh;
    c.unit_gpus = ep, c.kv_gb_per_request = req;
    return c;
  };
  a.inputs = {{"k3_h200", in("K3 on H200 (article)", 141, 69, 5, 32, k3_req_gb)},
              {"dsv4_h200", in("DSV4 on H200 (article)", 141, 82, 3, 16, dsv4_req_gb)},
              {"k3_b300", in("K3 on B300 (article)", 288, 69, 5, 32, k3_req_gb)},
              {"dsv4_b300", in("DSV4 on B300 (article)", 288, 82, 3, 16, dsv4_req_gb)}};
  for (const auto& [k, c] : a.inputs) a.results.push_back({k, derive_nodes(c, r)});
  return a;
}

}  // namespace servesim
