// Model and hardware data files (scenarios/models/*.json, scenarios/hardware/*.json) and where
// they are found.
#include "scenarios/json_reader.hpp"

#ifndef SERVESIM_SOURCE_DATA_DIR
#define SERVESIM_SOURCE_DATA_DIR "scenarios"
#endif

namespace servesim {

using namespace json_reader;

namespace {

std::map<std::string, std::string> read_sources(const json& j) {
  std::map<std::string, std::string> m;
  if (j.contains("sources") && j["sources"].is_object())
    for (auto it = j["sources"].begin(); it != j["sources"].end(); ++it)
      if (it.value().is_string()) m[it.key()] = it.value().get<std::string>();
  return m;
}

AttentionSpec read_attention(Obj o, const std::string& name) {
  AttentionSpec a;
  a.name = name;
  a.op = o.choice<AttentionOp>("op", std::nullopt,
                               {{"kda", AttentionOp::kda}, {"mla", AttentionOp::mla}, {"csa", AttentionOp::csa}, {"hca", AttentionOp::hca}, {"swa", AttentionOp::swa}});
  a.heads = o.int32("heads", std::nullopt, 1);
  a.proj_dtype = o.dtype("proj_dtype", DType::bf16);
  switch (a.op) {
    case AttentionOp::kda:
      a.head_dim = o.int32("head_dim", std::nullopt, 1);
      a.conv_kernel = o.int32("conv_kernel", 4, 1);
      a.gate_rank = o.int32("gate_rank", 0, 0);
      a.kda_chunk_tokens = o.int32("chunk_tokens", 64, 1);
      a.state_dtype = o.dtype("state_dtype", DType::fp32);
      a.full_rank_output_gate = o.boolean("full_rank_output_gate", false);
      break;
    case AttentionOp::mla:
      a.q_lora_rank = o.int32("q_lora_rank", 0, 0);
      a.kv_lora_rank = o.int32("kv_lora_rank", std::nullopt, 1);
      a.qk_nope_dim = o.int32("qk_nope_dim", std::nullopt, 1);
      a.qk_rope_dim = o.int32("qk_rope_dim", std::nullopt, 0);
      a.v_head_dim = o.int32("v_head_dim", std::nullopt, 1);
      a.output_gate = o.boolean("output_gate", false);
      a.kv_dtype = o.dtype("kv_dtype", DType::bf16);
      break;
    case AttentionOp::csa:
    case AttentionOp::hca:
    case AttentionOp::swa:
      a.head_dim = o.int32("head_dim", std::nullopt, 1);
      a.rope_dim = o.int32("rope_dim", 0, 0);
      a.q_lora_rank = o.int32("q_lora_rank", std::nullopt, 1);
      a.o_groups = o.int32("o_groups", std::nullopt, 1);
      a.o_lora_rank = o.int32("o_lora_rank", std::nullopt, 1);
      a.window_tokens = o.int32("window_tokens", std::nullopt, 0);
      a.kv_entry_bytes = o.num("kv_entry_bytes", std::nullopt, 1);
      if (a.op != AttentionOp::swa) {
        a.compress_ratio = o.int32("compress_ratio", std::nullopt, 1);
        a.compressor_overlap = o.boolean("compressor_overlap", false);
      }
      if (a.op == AttentionOp::csa) {
        a.indexer_heads = o.int32("indexer_heads", std::nullopt, 1);
        a.indexer_head_dim = o.int32("indexer_head_dim", std::nullopt, 1);
        a.indexer_topk = o.int32("indexer_topk", std::nullopt, 1);
        a.indexer_entry_bytes = o.num("indexer_entry_bytes", std::nullopt, 0);
      }
      if (a.heads % a.o_groups != 0) o.fail("o_groups", "must divide heads (" + std::to_string(a.heads) + ")");
      break;
  }
  o.done();
  return a;
}

FfnSpec read_ffn(Obj o, const std::string& name) {
  FfnSpec f;
  f.name = name;
  f.op = o.choice<FfnOp>("op", std::nullopt, {{"dense", FfnOp::dense}, {"moe", FfnOp::moe}});
  f.activation = o.str("activation", std::string("swiglu"));
  if (f.op == FfnOp::dense) {
    f.intermediate = o.int32("intermediate", std::nullopt, 1);
    f.dtype = o.dtype("dtype", DType::bf16);
  } else {
    f.experts = o.int32("experts", std::nullopt, 1);
    f.top_k = o.int32("top_k", std::nullopt, 1);
    if (f.top_k > f.experts) o.fail("top_k", "cannot exceed experts (" + std::to_string(f.experts) + ")");
    f.expert_intermediate = o.int32("expert_intermediate", std::nullopt, 1);
    f.expert_groups = o.int32("expert_groups", 1, 1, f.experts);
    if (f.experts % f.expert_groups != 0) o.fail("expert_groups", "must divide experts (" + std::to_string(f.experts) + ")");
    f.topk_groups = o.int32("topk_groups", f.expert_groups, 1, f.expert_groups);
    if (static_cast<long long>(f.topk_groups) * (f.experts / f.expert_groups) < f.top_k)
      o.fail("topk_groups", "its groups hold fewer experts than top_k (" + std::to_string(f.top_k) + ")");
    f.shared_experts = o.int32("shared_experts", 0, 0);
    f.shared_intermediate = o.int32("shared_intermediate", 0, 0);
    f.latent_dim = o.int32("latent_dim", 0, 0);
    f.gate = o.choice<GateKind>("router", GateKind::softmax,
                                    {{"softmax", GateKind::softmax}, {"sigmoid_bias", GateKind::sigmoid_bias},
                                     {"sqrt_softplus_bias", GateKind::sqrt_softplus_bias}, {"hash", GateKind::hash}});
    f.expert_dtype = o.dtype("expert_dtype", DType::bf16);
    f.shared_dtype = o.dtype("shared_dtype", DType::bf16);
    f.latent_dtype = o.dtype("latent_dtype", DType::bf16);
    f.gate_dtype = o.dtype("router_dtype", DType::bf16);
    f.dispatch_dtype = o.dtype("dispatch_dtype", DType::bf16);
    f.combine_dtype = o.dtype("combine_dtype", DType::bf16);
    o.num("routed_scaling_factor", 1.0);  // accepted for completeness; no cost effect
    if (o.has("expert_popularity")) {
      Obj q = o.child("expert_popularity");
      f.popularity.alpha = q.num("alpha", 0.0, 0, 10);
      f.popularity.range = q.num("range", f.popularity.range, 1.0 + 1e-9, 1e12);
      f.popularity.drift_sigma = q.num("drift_sigma", f.popularity.drift_sigma, 0, 5);
      f.popularity.sequence_sigma = q.num("sequence_sigma", 0.0, 0, 20);
      q.str("source", std::string());
      q.done();
    }
  }
  o.done();
  return f;
}

ModelSpec parse_model(const json& j, const std::string& origin) {
  Obj o(j, origin, "");
  ModelSpec m;
  m.name = o.str("name", std::nullopt);
  m.display_name = o.str("display_name", m.name);
  m.sources = read_sources(j);
  m.hidden = o.int32("hidden_size", std::nullopt, 1);
  m.vocab = o.int32("vocab_size", std::nullopt, 1);
  m.tied_embeddings = o.boolean("tied_embeddings", false);
  m.embedding_dtype = o.dtype("embedding_dtype", DType::bf16);
  m.max_context_tokens = o.integer("max_context_tokens", std::nullopt, 1, kMaxTokens);
  m.mtp_layers = o.int32("mtp_layers", 0, 0);
  m.residual_streams = o.int32("residual_streams", 1, 1);
  if (o.has("published_params")) {
    Obj p = o.child("published_params");
    m.published_total_params = p.num("total", 0.0, 0);
    m.published_active_params = p.num("active", 0.0, 0);
    p.done();
  }
  std::map<std::string, int> akind, fkind;
  {
    const json& a = o.raw("attention_kinds");
    if (!a.is_object() || a.empty()) o.fail("attention_kinds", "expected an object of named attention kinds");
    for (auto it = a.begin(); it != a.end(); ++it) {
      akind[it.key()] = static_cast<int>(m.attention_kinds.size());
      m.attention_kinds.push_back(read_attention(Obj(it.value(), origin, "attention_kinds." + it.key()), it.key()));
    }
  }
  {
    const json& f = o.raw("ffn_kinds");
    if (!f.is_object() || f.empty()) o.fail("ffn_kinds", "expected an object of named FFN kinds");
    for (auto it = f.begin(); it != f.end(); ++it) {
      fkind[it.key()] = static_cast<int>(m.ffn_kinds.size());
      m.ffn_kinds.push_back(read_ffn(Obj(it.value(), origin, "ffn_kinds." + it.key()), it.key()));
    }
  }
  const json& layers = o.raw("layers");
  if (!layers.is_array() || layers.empty()) o.fail("layers", "expected a non-empty array of \"attention/ffn\" strings");
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string where = "layers[" + std::to_string(i) + "]";
    if (!layers[i].is_string()) throw ScenarioError(origin + ": " + where + ": expected \"attention_kind/ffn_kind\", got " + describe(layers[i]));
    const std::string s = layers[i].get<std::string>();
    const auto slash = s.find('/');
    const std::string a = s.substr(0, slash), f = slash == std::string::npos ? "" : s.substr(slash + 1);
    if (!akind.count(a)) throw ScenarioError(origin + ": " + where + ": unknown attention kind \"" + a + "\" (defined in attention_kinds)");
    if (!fkind.count(f)) throw ScenarioError(origin + ": " + where + ": unknown ffn kind \"" + f + "\" (defined in ffn_kinds)");
    m.layers.push_back({akind[a], fkind[f]});
  }
  o.done();
  return m;
}

// A path in a form that exists: its lexical form where that exists, else the path as given (through
// a symlinked folder "a/link/../x" exists where the kernel resolves "..", while "a/x" may not);
// "" when neither exists.
std::string existing_form(const fs::path& p) {
  if (std::string lex = p.lexically_normal().string(); path_exists(lex)) return lex;
  return path_exists(p.string()) ? p.string() : std::string();
}

GpuSpec parse_hardware(const json& j, const std::string& origin) {
  Obj o(j, origin, "");
  GpuSpec g;
  g.name = o.str("name", std::nullopt);
  g.display_name = o.str("display_name", g.name);
  g.sources = read_sources(j);
  g.gpus_per_node = o.int32("gpus_per_node", 8, 1);
  g.hbm_bytes = o.num("hbm_bytes", std::nullopt, 1);
  g.hbm_bandwidth_bytes_per_s = o.num("hbm_bandwidth_bytes_per_s", std::nullopt, 1);
  g.hbm_bandwidth_measured_bytes_per_s = o.num("hbm_bandwidth_measured_bytes_per_s", 0.0, 0);
  g.bf16_flop_per_s = o.num("bf16_dense_flop_per_s", std::nullopt, 1);
  g.bf16_measured_flop_per_s = o.num("bf16_dense_measured_flop_per_s", 0.0, 0);
  g.fp8_flop_per_s = o.num("fp8_dense_flop_per_s", std::nullopt, 1);
  g.fp4_flop_per_s = o.num("fp4_dense_flop_per_s", 0.0, 0);
  g.nvlink_bytes_per_s_bidirectional = o.num("nvlink_bytes_per_s_bidirectional", std::nullopt, 1);
  g.nvlink_latency_s = o.num("nvlink_latency_s", 1e-6, 0);
  g.nic_bits_per_s = o.num("nic_bits_per_s", std::nullopt, 1);
  g.nic_latency_s = o.num("nic_latency_s", 3e-6, 0);
  g.nvlink_efficiency = o.num("nvlink_efficiency", 1.0, 1e-3, 1.0);
  g.nic_efficiency = o.num("nic_efficiency", 1.0, 1e-3, 1.0);
  g.kv_transfer_efficiency = o.num("kv_transfer_efficiency", 1.0, 1e-3, 1.0);
  g.nvlink_call_overhead_s = o.num("nvlink_call_overhead_s", 0.0, 0);
  g.allreduce_call_s = o.num("allreduce_call_s", 0.0, 0, 1.0);
  g.allreduce_bytes_per_s = o.num("allreduce_bytes_per_s", 0.0, 0);
  g.kernel_launch_s = o.num("kernel_launch_s", 0.0, 0, 1.0);
  g.graph_launch_s = o.num("graph_launch_s", 0.0, 0, 1.0);
  g.sm_count = o.int32("sm_count", 0, 0);
  g.ep_normal_comm_sms = o.int32("ep_normal_comm_sms", 0, 0);
  if (g.ep_normal_comm_sms >= g.sm_count && g.ep_normal_comm_sms > 0) o.fail("ep_normal_comm_sms", "must be below sm_count");
  g.kernel_fixed_s = o.num("kernel_fixed_s", 0.0, 0, 1.0);
  g.nic_call_overhead_s = o.num("nic_call_overhead_s", 0.0, 0);
  g.pcie_bytes_per_s_per_direction = o.num("pcie_bytes_per_s_per_direction", std::nullopt, 1);
  g.host_dram_bytes_per_node = o.num("host_dram_bytes_per_node", 0.0, 0);
  g.gpu_hour_usd = o.num("gpu_hour_usd", 0.0, 0, 1e6);
  g.board_power_w = o.num("board_power_w", 0.0, 0, 1e6);
  g.fitted_models = o.str("fitted_models", std::string());  // kernel-fitted cost-model parameters, relative to this file
  if (!g.fitted_models.empty()) {
    fs::path p(g.fitted_models);
    if (p.is_relative()) p = fs::path(origin).parent_path() / p;
    g.fitted_models_path = existing_form(p);
    if (g.fitted_models_path.empty()) {
      g.fitted_models_path = p.lexically_normal().string();  // named by the error if no fallback exists either
      for (const auto& f : fitted_models_fallbacks(g.fitted_models))  // a copied data folder: the source tree's costmodels/data/
        if (path_exists(f)) {
          g.fitted_models_path = f;
          break;
        }
    }
  }
  Obj e = o.child("roofline_efficiency");
  for (int c = 0; c < kOpClassCount; ++c) {
    const std::string name(to_string(static_cast<OpClass>(c)));
    Obj x = e.child(name);
    OpEfficiency& f = g.efficiency[c];
    f.compute = x.num("compute", std::nullopt, 1e-6, 1);
    f.memory = x.num("memory", std::nullopt, 1e-6, 1);
    f.fixed_s = x.num("fixed_s", 0.0, 0);
    x.str("why", std::string());
    x.done();
  }
  e.done();
  o.done();
  return g;
}

}  // namespace

std::string data_dir() {
  if (const char* e = std::getenv("SERVESIM_DATA_DIR")) return e;
  return SERVESIM_SOURCE_DATA_DIR;
}

std::vector<std::string> fitted_models_fallbacks(const std::string& fitted_models) {
  std::vector<std::string> out;
  if (fitted_models.empty() || fs::path(fitted_models).is_absolute()) return out;
  std::vector<fs::path> dirs;
  if (const char* e = std::getenv("SERVESIM_DATA_DIR"); e && *e) dirs.push_back(fs::path(e) / "hardware");
  dirs.push_back(fs::path(SERVESIM_SOURCE_DATA_DIR) / "hardware");
  for (const auto& d : dirs) {
    const std::string p = (d / fitted_models).lexically_normal().string();
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

bool path_exists(const std::string& path) noexcept {
  std::error_code ec;
  return fs::exists(fs::path(path), ec) && !ec;
}

std::string resolve_data_file(const std::string& ref, const std::string& kind, const std::string& base_dir) {
  std::vector<fs::path> tries;
  if (ref.size() > 5 && ref.substr(ref.size() - 5) == ".json") {
    tries.push_back(fs::path(ref).is_absolute() ? fs::path(ref) : fs::path(base_dir) / ref);
  } else {
    tries.push_back(fs::path(base_dir) / kind / (ref + ".json"));
    tries.push_back(fs::path(data_dir()) / kind / (ref + ".json"));
  }
  for (const auto& p : tries)
    if (std::string f = existing_form(p); !f.empty()) return f;
  // the names available, once each and sorted (base_dir and the data folder are often the same:
  // review, "available: h100, b300, h200, h800, h100, b300, h200, h800")
  std::set<std::string> names;
  for (const auto& dir : {fs::path(base_dir) / kind, fs::path(data_dir()) / kind}) {
    std::error_code ec;
    if (fs::is_directory(dir, ec))
      for (const auto& f : fs::directory_iterator(dir, ec))
        if (f.path().extension() == ".json") names.insert(f.path().stem().string());
  }
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  const bool two = tries.size() > 1 && tries.back().lexically_normal() != tries.front().lexically_normal();
  throw ScenarioError("no " + kind + " file for \"" + ref + "\" (looked for " + tries.front().string() + (two ? " and " + tries.back().string() : std::string()) +
                      "; available: " + (known.empty() ? "none" : known) + ")");
}

ModelSpec load_model(const std::string& path) { return parse_model(parse_json(read_file(path), path), path); }
GpuSpec load_hardware(const std::string& path) { return parse_hardware(parse_json(read_file(path), path), path); }



}  // namespace servesim
