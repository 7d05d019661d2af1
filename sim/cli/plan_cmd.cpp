// `servesim plan` (memory per GPU, KV per request, capacity; the article next to the real configs)
// and `servesim topology` (GPUs, links, bandwidths of each deployment's cluster).
#include "sim/cli/commands.hpp"
#include "sim/cli/common.hpp"

#include "costmodels/capacity.hpp"
#include "costmodels/feasibility.hpp"
#include "costmodels/memory.hpp"
#include "topology/graph.hpp"

namespace servesim::cli {


namespace {

void print_memory(const DeploymentSpec& d) {
  const ParamBreakdown pb = count_params(d.model);
  fmt::print("\n== {}: {} on {} ==\n", d.name, d.model.display_name, d.gpu.display_name);
  fmt::print("parameters: {:.4g}T total (published {:.4g}T), {:.1f}B active (published {:.1f}B); MTP layers hold {:.1f}B more\n",
             pb.total_params() / 1e12, d.model.published_total_params / 1e12, pb.active_params / 1e9, d.model.published_active_params / 1e9,
             pb.mtp_params / 1e9);
  fmt::print("{:<28}{:>14}{:>14}\n", "weights by group", "params", "bytes");
  for (const auto& g : pb.groups) fmt::print("  {:<26}{:>13.2f}B{:>14}\n", g.name, g.params / 1e9, gb(g.bytes));
  fmt::print("\nper GPU                          {:>24}{:>24}\n", fmt::format("prefill EP{}/attnTP{}", d.prefill.ep, d.prefill.attn_tp),
             fmt::format("decode EP{}/attnTP{}", d.decode.ep, d.decode.attn_tp));
  const GpuMemoryPlan p = plan_gpu_memory(d, d.prefill), q = plan_gpu_memory(d, d.decode);
  auto row = [](const char* what, double a, double b) { fmt::print("  {:<31}{:>24}{:>24}\n", what, gb(a), gb(b)); };
  row("HBM", p.hbm, q.hbm);
  row(fmt::format("usable (x{})", d.memory_utilization).c_str(), p.usable, q.usable);
  row("routed experts", p.expert_weights, q.expert_weights);
  row("other weights (split + whole)", p.other_weights, q.other_weights);
  row("activation workspace", p.workspace, q.workspace);
  row("reserved (context, buffers)", p.reserved, q.reserved);
  row("KV budget", p.kv_budget, q.kv_budget);
  fmt::print("\nKV cache per sequence, one GPU (attn TP 1)\n  {:<8}{:>7}{:>16}{:>18}  {}\n", "kind", "layers", "B/token/layer", "fixed B/seq/layer", "what");
  for (const auto& r : kv_breakdown(d.model))
    fmt::print("  {:<8}{:>7}{:>16.2f}{:>18.0f}  {}\n", r.kind, r.layers, r.per_token_bytes_per_layer, r.per_seq_bytes_per_layer, r.note);
  const KvFootprint f = kv_footprint(d.model, 1);
  fmt::print("  total: {:.1f} B/token + {:.2f} MB fixed per sequence\n", f.per_token_bytes, f.per_seq_bytes / 1e6);
  fmt::print("  decode rank capacity (sequences of one context length, attn TP {}):", d.decode.attn_tp);
  for (long long L : {8192LL, 32768LL, 131072LL, 500000LL, 1000000LL}) {
    const double per = kv_bytes(d.model, L, d.decode.attn_tp);
    fmt::print("  {}K: {:.0f}", L / 1000, std::floor(q.kv_budget / per));
  }
  fmt::print("\n");
}

void print_capacity_table(const std::vector<std::pair<std::string, CapacityInputs>>& in, Rounding r) {
  fmt::print("  {:<28}{:>9}{:>9}{:>9}{:>14}{:>7}{:>8}{:>8}{:>8}{:>8}\n", "", "KV/card", "KV/unit", "GB/req", "req/unit", "units",
             "D nodes", "P nodes", "nodes", "GPUs");
  for (const auto& [key, c] : in) {
    try {
      const CapacityResult x = derive_nodes(c, r);
      fmt::print("  {:<28}{:>8.0f}G{:>8.0f}G{:>9.2f}{:>14}{:>7}{:>8}{:>8}{:>8}{:>8}\n", c.label, x.kv_gb_per_gpu, x.kv_gb_per_unit, c.kv_gb_per_request,
                 fmt::format("{:.1f}→{}", x.requests_per_unit_exact, x.requests_per_unit), x.units, x.d_nodes, x.p_nodes, x.total_nodes,
                 x.total_gpus);
    } catch (const std::exception& e) {
      fmt::print("  {:<28} {}\n", c.label, e.what());
    }
  }
}

// The article's derivation with this repository's model data: the same deployment units (EP32 for
// K3, EP16 for V4-Pro) with the smallest attention TP that fits, real weights and real KV bytes.
std::vector<std::pair<std::string, CapacityInputs>> real_inputs(double context) {
  std::vector<std::pair<std::string, CapacityInputs>> v;
  for (const auto& [model, ep] : {std::pair<std::string, int>{"kimi-k3", 32}, {"deepseek-v4-pro", 16}})
    for (const std::string hw : {"h200", "b300"}) {
      DeploymentSpec d;
      d.model = load_model(resolve_data_file(model, "models", data_dir()));
      d.gpu = load_hardware(resolve_data_file(hw, "hardware", data_dir()));
      d.decode.ep = ep;
      d.decode.max_running = 128;
      d.decode.max_batch_tokens = 128;
      GpuMemoryPlan m;
      for (int tp = 1; tp <= 8; tp *= 2) {
        d.decode.attn_tp = tp;
        m = plan_gpu_memory(d, d.decode);
        if (m.fits()) break;
      }
      CapacityInputs c;
      c.label = fmt::format("{} {} EP{} TP{}", model == "kimi-k3" ? "K3" : "V4-Pro", hw, ep, d.decode.attn_tp);
      c.hbm_gb_per_gpu = m.usable / 1e9;
      c.weights_gb_per_gpu = (m.expert_weights + m.other_weights) / 1e9;
      c.overhead_gb_per_gpu = (m.workspace + m.reserved) / 1e9;
      c.unit_gpus = ep;
      c.kv_replicas = d.decode.attn_tp;
      c.gpus_per_node = d.gpu.gpus_per_node;
      c.kv_gb_per_request = kv_bytes(d.model, static_cast<long long>(context), d.decode.attn_tp) / 1e9;
      v.push_back({model + "_" + hw, c});
    }
  return v;
}

void print_article() {
  fmt::print("\n== The article's Section III under its own assumptions ==\n");
  fmt::print("(K3 MLA as \"640-dim latent x2 K/V\" in BF16, 207 MB bf16 KDA state, V4 at 12.2 KB/token = 10% of V3.2,\n"
             " 69/82 GB weights and 5/3 GB overhead per card, EP32/EP16 units, 500K average context, P:D = 1:2.5, 10,000 concurrent)\n");
  const ArticleSection3 art = article_section3(Rounding::article);
  for (const auto& l : art.lines) fmt::print("  {:<26} {:>10.1f}   {}\n", l.what, l.value, l.formula);
  fmt::print("\n  nodes for 10,000 concurrent requests, rounded to the nearest integer at every step (as the article):\n");
  print_capacity_table(art.inputs, Rounding::article);
  fmt::print("\n  same, rounded so that the cluster really covers 10,000 (requests per unit down, units and P nodes up):\n");
  print_capacity_table(art.inputs, Rounding::covering);
  fmt::print("\n== The same derivation with the real configs (scenarios/models, memory plan of servesim) ==\n");
  fmt::print("(K3 MLA latent 576 values = 1,152 B/token/layer in BF16 over 24 layers = 27,648 B/token, not 61.4 KB;\n"
             " KDA state fp32 as TRT-LLM keeps it; V4-Pro 584 B entries + 132 B FP8 indexer keys ≈ 5.5 KB/token, top-6 routing;\n"
             " usable HBM = 0.9 × capacity; overhead = activation workspace + 2 GB reserved; covering rounding)\n");
  print_capacity_table(real_inputs(500000), Rounding::covering);
}

}  // namespace

int plan(const std::string& path) {
  auto s = load_or_report(path);
  if (!s) return 2;
  try {
    for (const auto& d : s->deployments) print_memory(d);
    print_article();
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}

// ----------------------------------------------------------------------------- topology

int topology(const std::string& path) {
  auto s = load_or_report(path);
  if (!s) return 2;
  for (const auto& d : s->deployments) {
    const TopologyReport r = analyze_topology(d.cluster, d.gpu);
    fmt::print("\n== {}: {} nodes of {} x {} ({}), {} ==\n", d.name, r.nodes, d.gpu.gpus_per_node, d.gpu.name, d.gpu.display_name,
               d.cluster.fabric == FabricKind::fat_tree ? fmt::format("fat tree, oversubscription {}", d.cluster.oversubscription)
                                                        : std::string("rail-optimized, non-blocking"));
    fmt::print("GPUs: {} ({} used by the pools: prefill {} x EP{}, decode {} x EP{})\n", r.gpus, required_gpus(d), d.prefill.instances, d.prefill.ep,
               d.decode.instances, d.decode.ep);
    fmt::print("{:<14}{:>8}{:>20}\n", "links", "count", "GB/s per direction");
    for (const auto& l : r.links) fmt::print("{:<14}{:>8}{:>20.1f}\n", l.name, l.count, l.bytes_per_s / 1e9);
    fmt::print("per node: NVLink {:.0f} GB/s, NICs {:.0f} GB/s, uplink {:.0f} GB/s (per direction)\n", r.node_nvlink_bytes_per_s / 1e9,
               r.node_nic_bytes_per_s / 1e9, r.node_uplink_bytes_per_s / 1e9);
    fmt::print("bisection bandwidth: {:.0f} GB/s per direction (max-flow between nodes [0,{}) and [{},{}) on the Boost graph: {} vertices, {} links)\n",
               r.bisection_bytes_per_s / 1e9, r.nodes / 2, r.nodes / 2, r.nodes, r.graph_vertices, r.graph_edges);
  }
  return 0;
}

}  // namespace servesim::cli
