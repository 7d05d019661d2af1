#include "scenarios/scenario.hpp"


#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#ifndef SERVESIM_SOURCE_DATA_DIR
#define SERVESIM_SOURCE_DATA_DIR "scenarios"
#endif

namespace servesim {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ScenarioError(path + ": cannot open the file (check the path)");
  std::ostringstream o;
  o << in.rdbuf();
  return o.str();
}

// Parses JSON text; a syntax error names the line and column.
json parse_json(const std::string& text, const std::string& origin) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    long line = 1, col = 1;
    for (size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {  // e.byte is 1-based: the offending character
      if (text[i] == '\n') ++line, col = 1;
      else ++col;
    }
    std::string msg = e.what();
    const auto p = msg.find("parse error");
    throw ScenarioError(origin + ":" + std::to_string(line) + ":" + std::to_string(col) + ": malformed JSON (" +
                        (p == std::string::npos ? msg : msg.substr(p)) + ")");
  }
}

std::string describe(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// Levenshtein distance (for "did you mean" on unknown keys).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// A JSON object being read: remembers its path for messages and which keys were used, so that
// unknown keys are reported instead of ignored.
class Obj {
 public:
  Obj(const json& j, std::string origin, std::string path) : j_(j), origin_(std::move(origin)), path_(std::move(path)) {
    if (!j_.is_object()) fail("", "expected a JSON object, got " + describe(j_));
  }
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    std::string where = path_;
    if (!key.empty()) where += (where.empty() ? "" : ".") + key;
    throw ScenarioError(origin_ + ": " + (where.empty() ? "" : where + ": ") + msg);
  }
  bool has(const std::string& k) const {
    asked_.insert(k);
    return j_.contains(k);
  }
  const json& raw(const std::string& k) {
    used_.insert(k);
    return j_.at(k);
  }
  double num(const std::string& k, std::optional<double> def, double min = -std::numeric_limits<double>::infinity(),
             double max = std::numeric_limits<double>::infinity()) {
    if (!has(k)) {
      if (!def) fail(k, "missing (a number is required)");
      return *def;
    }
    const json& v = raw(k);
    if (!v.is_number()) fail(k, "expected a number, got " + describe(v));
    const double x = v.get<double>();
    if (x < min || x > max) {
      std::ostringstream o;
      o << "must be in [" << min << ", " << max << "], got " << x;
      fail(k, o.str());
    }
    return x;
  }
  long long integer(const std::string& k, std::optional<long long> def, long long min = std::numeric_limits<long long>::min()) {
    if (!has(k)) {
      if (!def) fail(k, "missing (an integer is required)");
      return *def;
    }
    const json& v = raw(k);
    if (!v.is_number_integer()) fail(k, "expected an integer, got " + describe(v));
    const long long x = v.get<long long>();
    if (x < min) fail(k, "must be ≥ " + std::to_string(min) + ", got " + std::to_string(x));
    return x;
  }
  int int32(const std::string& k, std::optional<long long> def, long long min = 0) { return static_cast<int>(integer(k, def, min)); }
  std::string str(const std::string& k, std::optional<std::string> def) {
    if (!has(k)) {
      if (!def) fail(k, "missing (a string is required)");
      return *def;
    }
    const json& v = raw(k);
    if (!v.is_string()) fail(k, "expected a string, got " + describe(v));
    return v.get<std::string>();
  }
  bool boolean(const std::string& k, bool def) {
    if (!has(k)) return def;
    const json& v = raw(k);
    if (!v.is_boolean()) fail(k, "expected true or false, got " + describe(v));
    return v.get<bool>();
  }
  DType dtype(const std::string& k, std::optional<DType> def) {
    if (!has(k)) {
      if (!def) fail(k, "missing (a dtype is required)");
      return *def;
    }
    const std::string s = str(k, std::nullopt);
    try {
      return parse_dtype(s);
    } catch (const std::invalid_argument& e) {
      fail(k, e.what());
    }
  }
  template <class E>
  E choice(const std::string& k, std::optional<E> def, std::initializer_list<std::pair<const char*, E>> options) {
    if (!has(k)) {
      if (!def) fail(k, "missing");
      return *def;
    }
    const std::string s = str(k, std::nullopt);
    std::string known;
    for (const auto& [name, v] : options) {
      if (s == name) return v;
      known += (known.empty() ? "" : ", ") + std::string(name);
    }
    fail(k, "unknown value \"" + s + "\" (expected one of: " + known + ")");
  }
  Obj child(const std::string& k) {
    const json& v = raw(k);
    return Obj(v, origin_, path_.empty() ? k : path_ + "." + k);
  }
  /// Call when every known key was read: any other key is an error.
  void done() const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (!used_.count(it.key()) && it.key().rfind("_comment", 0) != 0 && it.key() != "source" && it.key() != "sources") {
        std::string known, closest;
        size_t best = 3;  // suggest a key at most 2 edits away
        for (const auto& u : asked_) {
          known += (known.empty() ? "" : ", ") + u;
          const size_t d = edit_distance(it.key(), u);
          if (d < best) best = d, closest = u;
        }
        fail(it.key(), "unknown key" + (closest.empty() ? std::string() : " (did you mean \"" + closest + "\"?)") +
                           "; keys accepted here: " + (known.empty() ? std::string("none") : known));
      }
  }
  const std::string& origin() const { return origin_; }
  const std::string& path() const { return path_; }

 private:
  const json& j_;
  std::string origin_, path_;
  std::set<std::string> used_;
  mutable std::set<std::string> asked_;  // every key this object was asked for, present or not
};

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
      a.chunk_tokens = o.int32("chunk_tokens", 64, 1);
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
    f.shared_experts = o.int32("shared_experts", 0, 0);
    f.shared_intermediate = o.int32("shared_intermediate", 0, 0);
    f.latent_dim = o.int32("latent_dim", 0, 0);
    f.router = o.choice<RouterKind>("router", RouterKind::softmax,
                                    {{"softmax", RouterKind::softmax}, {"sigmoid_bias", RouterKind::sigmoid_bias},
                                     {"sqrt_softplus_bias", RouterKind::sqrt_softplus_bias}, {"hash", RouterKind::hash}});
    f.expert_dtype = o.dtype("expert_dtype", DType::bf16);
    f.shared_dtype = o.dtype("shared_dtype", DType::bf16);
    f.latent_dtype = o.dtype("latent_dtype", DType::bf16);
    f.router_dtype = o.dtype("router_dtype", DType::bf16);
    f.dispatch_dtype = o.dtype("dispatch_dtype", DType::bf16);
    f.combine_dtype = o.dtype("combine_dtype", DType::bf16);
    o.num("routed_scaling_factor", 1.0);  // accepted for completeness; no cost effect
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
  m.max_context_tokens = o.integer("max_context_tokens", std::nullopt, 1);
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
  g.nvlink_call_overhead_s = o.num("nvlink_call_overhead_s", 0.0, 0);
  g.nic_call_overhead_s = o.num("nic_call_overhead_s", 0.0, 0);
  g.pcie_bytes_per_s_per_direction = o.num("pcie_bytes_per_s_per_direction", std::nullopt, 1);
  g.host_dram_bytes_per_node = o.num("host_dram_bytes_per_node", 0.0, 0);
  g.fitted_models = o.str("fitted_models", std::string());  // kernel-fitted cost-model parameters, relative to this file
  if (!g.fitted_models.empty()) {
    fs::path p(g.fitted_models);
    if (p.is_relative()) p = fs::path(origin).parent_path() / p;
    g.fitted_models_path = p.lexically_normal().string();
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

Dist read_dist(Obj d) {
  Dist x;
  x.kind = d.choice<Dist::Kind>("dist", std::nullopt,
                                {{"constant", Dist::Kind::constant}, {"lognormal", Dist::Kind::lognormal},
                                 {"exponential", Dist::Kind::exponential}, {"uniform", Dist::Kind::uniform}});
  switch (x.kind) {
    case Dist::Kind::constant: x.value = d.num("value", std::nullopt, 0); break;
    case Dist::Kind::lognormal:
      x.mu = d.num("mu", std::nullopt);
      x.sigma = d.num("sigma", std::nullopt, 0);
      break;
    case Dist::Kind::exponential: x.mean = d.num("mean", std::nullopt, 0); break;
    case Dist::Kind::uniform: break;
  }
  x.min = d.num("min", x.kind == Dist::Kind::uniform ? std::nullopt : std::optional<double>(0.0), 0);
  x.max = d.num("max", x.kind == Dist::Kind::uniform ? std::nullopt : std::optional<double>(1e18), x.min);
  d.done();
  return x;
}

Dist lognormal(double mu, double sigma, double min, double max) {
  Dist d;
  d.kind = Dist::Kind::lognormal, d.mu = mu, d.sigma = sigma, d.min = min, d.max = max;
  return d;
}

WorkloadSpec read_workload(Obj o, const std::string& base_dir) {
  using K = WorkloadSpec::Kind;
  WorkloadSpec w;
  w.kind = o.choice<K>("kind", std::nullopt,
                       {{"synthetic", K::synthetic}, {"mooncake", K::mooncake}, {"azure", K::azure}, {"burstgpt", K::burstgpt},
                        {"tracelab_replay", K::tracelab_replay}, {"tracelab_rounds", K::tracelab_rounds}, {"agent", K::agent}});
  w.block_tokens = o.int32("block_tokens", 512, 1);
  w.max_requests = o.integer("max_requests", 0, 0);
  const bool trace = w.kind != K::synthetic && w.kind != K::agent;
  if (trace) {
    const std::string t = o.str("trace", std::nullopt);
    w.trace_path = fs::path(t).is_absolute() ? t : (fs::path(base_dir) / t).lexically_normal().string();
    // the shared public traces may live elsewhere: $SERVESIM_SHARED_TRACES replaces everything up to
    // and including ".../shared/traces" (the same variable the tests read)
    const char* shared = std::getenv("SERVESIM_SHARED_TRACES");
    const auto at = w.trace_path.find("shared/traces/");
    if (shared && *shared && at != std::string::npos)
      w.trace_path = (fs::path(shared) / w.trace_path.substr(at + std::string("shared/traces/").size())).string();
    w.time_scale = o.num("time_scale", 1.0, 1e-9);
    w.skip_bad_rows = o.boolean("skip_bad_rows", false);
    if (w.kind == K::mooncake) w.jitter_s = o.num("jitter_s", 0.0, 0);
  } else if (w.kind == K::synthetic) {
    w.requests = o.integer("requests", std::nullopt, 1);
    w.rate_per_s = o.num("rate_per_s", std::nullopt, 1e-12);
    w.arrival = o.choice<WorkloadSpec::Arrival>("arrival", WorkloadSpec::Arrival::poisson,
                                                {{"poisson", WorkloadSpec::Arrival::poisson}, {"gamma", WorkloadSpec::Arrival::gamma}});
    w.burstiness = o.num("burstiness", 1.0, 1e-6);
    w.shared_prefix_tokens = o.integer("shared_prefix_tokens", 0, 0);
    w.input = read_dist(o.child("input_tokens"));
    w.output = read_dist(o.child("output_tokens"));
  } else {
    // agent sessions; defaults and their sources: README.md "Agent sessions"
    w.loop = o.choice<WorkloadSpec::Loop>("loop", WorkloadSpec::Loop::closed, {{"open", WorkloadSpec::Loop::open}, {"closed", WorkloadSpec::Loop::closed}});
    w.concurrency = o.integer("concurrency", 100, 1);
    w.rate_per_s = o.num("rate_per_s", 1.0, 1e-12);
    w.ramp_s = o.num("ramp_s", 0.0, 0);
    w.duration_s = o.num("duration_s", 0.0, 0);
    w.requests = o.integer("sessions", 0, 0);
    w.shared_prefix_tokens = o.integer("shared_prefix_tokens", 0, 0);
    w.rounds = o.has("rounds") ? read_dist(o.child("rounds")) : lognormal(std::log(157.0) - 0.5, 1.0, 1, 2000);
    w.first_prompt_tokens = o.has("first_prompt_tokens") ? read_dist(o.child("first_prompt_tokens")) : lognormal(std::log(4000.0), 1.0, 16, 65536);
    w.append_tokens = o.has("append_tokens") ? read_dist(o.child("append_tokens")) : lognormal(std::log(429.0) - 0.5, 1.0, 1, 32768);
    w.output_tokens = o.has("output_tokens") ? read_dist(o.child("output_tokens")) : lognormal(5.7737, 1.1312, 1, 8192);
    w.think_s = o.has("think_s") ? read_dist(o.child("think_s")) : lognormal(-0.7606, 2.3555, 0, 600);
  }
  o.done();
  return w;
}

PoolSpec read_pool(Obj o, const PoolSpec& def) {
  PoolSpec p = def;
  p.instances = o.int32("instances", def.instances, 1);
  p.ep = o.int32("ep", def.ep, 1);
  p.attn_tp = o.int32("attn_tp", def.attn_tp, 1);
  p.max_batch_tokens = o.integer("max_batch_tokens", def.max_batch_tokens, 1);
  p.chunk_tokens = o.integer("chunk_tokens", def.chunk_tokens, 1);
  p.max_running = o.int32("max_running", def.max_running, 1);
  p.redundant_experts = o.int32("redundant_experts", def.redundant_experts, 0);
  p.expert_imbalance = o.num("expert_imbalance", def.expert_imbalance, 1.0);
  p.two_batch_overlap = o.boolean("two_batch_overlap", def.two_batch_overlap);
  p.step_overhead_s = o.num("step_overhead_s", def.step_overhead_s, 0);
  p.ep_dispatch = o.choice<EpDispatch>("ep_dispatch", def.ep_dispatch, {{"hierarchical", EpDispatch::hierarchical}, {"direct", EpDispatch::direct}});
  p.all_to_all_on_fabric = o.boolean("all_to_all_on_fabric", def.all_to_all_on_fabric);
  o.done();
  return p;
}

DeploymentSpec read_deployment(Obj o, const std::string& base_dir) {
  DeploymentSpec d;
  d.name = o.str("name", std::nullopt);
  try {
    d.model = load_model(resolve_data_file(o.str("model", std::nullopt), "models", base_dir));
    d.gpu = load_hardware(resolve_data_file(o.str("hardware", std::nullopt), "hardware", base_dir));
  } catch (const ScenarioError& e) {
    throw ScenarioError(o.origin() + ": " + o.path() + ": " + e.what());
  }
  if (o.has("kv_cache_dtype")) {
    const DType t = o.dtype("kv_cache_dtype", std::nullopt);
    for (auto& a : d.model.attention_kinds)
      if (a.op == AttentionOp::mla) a.kv_dtype = t;
  }
  PoolSpec pdef, ddef;
  pdef.max_batch_tokens = 16384, pdef.chunk_tokens = 8192, pdef.max_running = 64;
  ddef.max_batch_tokens = 256, ddef.chunk_tokens = 1, ddef.max_running = 128, ddef.ep_dispatch = EpDispatch::direct;
  d.prefill = o.has("prefill") ? read_pool(o.child("prefill"), pdef) : pdef;
  d.decode = o.has("decode") ? read_pool(o.child("decode"), ddef) : ddef;
  d.decode.max_batch_tokens = std::max<long long>(d.decode.max_batch_tokens, d.decode.max_running);
  d.cluster.nodes = 0;  // 0 = as many as the pools need
  if (o.has("cluster")) {
    Obj c = o.child("cluster");
    d.cluster.nodes = c.int32("nodes", 0, 0);
    d.cluster.fabric = c.choice<FabricKind>("fabric", FabricKind::rail_optimized,
                                            {{"rail_optimized", FabricKind::rail_optimized}, {"fat_tree", FabricKind::fat_tree}});
    d.cluster.oversubscription = c.num("oversubscription", 1.0, 1.0);
    if (d.cluster.fabric != FabricKind::fat_tree && d.cluster.oversubscription != 1.0)
      c.fail("oversubscription", "applies to \"fabric\": \"fat_tree\" only (a rail-optimized fabric is non-blocking)");
    c.done();
  }
  if (d.cluster.nodes == 0) d.cluster.nodes = required_nodes(d);
  // policies are chosen by name; the validate step (sim/validate.hpp) checks the names against
  // the policy registries, naming the field
  d.router = o.str("router", d.router);
  d.decode_router = o.str("decode_router", d.decode_router);
  d.batch_scheduler = o.str("batch_scheduler", d.batch_scheduler);
  d.decode_batcher = o.str("decode_batcher", d.decode_batcher);
  d.eviction = o.str("eviction", d.eviction);
  d.memory_utilization = o.num("memory_utilization", d.memory_utilization, 0.01, 1.0);
  d.reserved_bytes_per_gpu = o.num("reserved_gb_per_gpu", d.reserved_bytes_per_gpu / 1e9, 0) * 1e9;
  if (o.has("slo")) {
    Obj s = o.child("slo");
    d.slo.ttft_s = s.num("ttft_s", d.slo.ttft_s, 1e-9);
    d.slo.tpot_s = s.num("tpot_s", d.slo.tpot_s, 1e-9);
    s.done();
  }
  if (o.has("kv_tiers")) {
    Obj t = o.child("kv_tiers");
    d.kv_tiers.enabled = t.boolean("enabled", true);
    // defaults: half the node's host DRAM (hardware file) for KV; storage: TierSpec's
    TierSpec& k = d.kv_tiers;
    k.host_bytes_per_node = t.num("host_gb_per_node", d.gpu.host_dram_bytes_per_node / 2 / 1e9, 0) * 1e9;
    if (t.has("storage")) {
      Obj st = t.child("storage");
      k.storage_enabled = st.boolean("enabled", k.storage_enabled);
      k.storage_bytes_per_node = st.num("tb_per_node", k.storage_bytes_per_node / 1e12, 0) * 1e12;
      k.storage_bytes_per_s = st.num("gb_per_s", k.storage_bytes_per_s / 1e9, 1e-6) * 1e9;
      k.storage_latency_s = st.num("latency_s", k.storage_latency_s, 0);
      st.done();
    }
    t.done();
  }
  if (o.has("prefix_cache")) {
    Obj s = o.child("prefix_cache");
    d.prefix_cache.enabled = s.boolean("enabled", d.prefix_cache.enabled);
    d.prefix_cache.block_tokens = s.int32("block_tokens", d.prefix_cache.block_tokens, 1);
    s.done();
  }
  o.done();
  return d;
}

}  // namespace

std::string data_dir() {
  if (const char* e = std::getenv("SERVESIM_DATA_DIR")) return e;
  return SERVESIM_SOURCE_DATA_DIR;
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
    if (fs::exists(p)) return p.lexically_normal().string();
  std::string known;
  for (const auto& dir : {fs::path(base_dir) / kind, fs::path(data_dir()) / kind})
    if (fs::is_directory(dir))
      for (const auto& f : fs::directory_iterator(dir))
        if (f.path().extension() == ".json") known += (known.empty() ? "" : ", ") + f.path().stem().string();
  throw ScenarioError("no " + kind + " file for \"" + ref + "\" (looked for " + tries.front().string() +
                      (tries.size() > 1 ? " and " + tries.back().string() : std::string()) + "; available: " + (known.empty() ? "none" : known) + ")");
}

ModelSpec load_model(const std::string& path) { return parse_model(parse_json(read_file(path), path), path); }
GpuSpec load_hardware(const std::string& path) { return parse_hardware(parse_json(read_file(path), path), path); }

Scenario parse_scenario(const std::string& text, const std::string& origin, const std::string& base_dir) {
  const json j = parse_json(text, origin);
  Obj o(j, origin, "");
  Scenario s;
  s.path = origin;
  s.name = o.str("name", fs::path(origin).stem().string());
  s.description = o.str("description", std::string());
  s.seed = static_cast<std::uint64_t>(o.integer("seed", 1, 0));
  s.horizon_s = o.num("horizon_s", 0.0, 0);
  s.cost_model = o.str("cost_model", std::string("fitted"));
  if (s.cost_model != "fitted" && s.cost_model != "roofline")
    o.fail("cost_model", "unknown cost model \"" + s.cost_model + "\" (available: fitted, roofline)");
  if (o.has("timeline")) {
    Obj t = o.child("timeline");
    s.timeline = t.boolean("enabled", true);
    s.timeline_max_events = t.integer("max_step_events", s.timeline_max_events, 0);
    t.done();
  }
  s.workload = read_workload(o.child("workload"), base_dir);
  const json& deps = o.raw("deployments");
  if (!deps.is_array() || deps.empty()) o.fail("deployments", "expected a non-empty array of deployments");
  std::set<std::string> names;
  for (size_t i = 0; i < deps.size(); ++i) {
    const std::string where = "deployments[" + std::to_string(i) + "]";
    DeploymentSpec d = read_deployment(Obj(deps[i], origin, where), base_dir);
    if (!names.insert(d.name).second) throw ScenarioError(origin + ": " + where + ".name: \"" + d.name + "\" is used twice (names must be unique)");
    const int a = s.workload.block_tokens, b = d.prefix_cache.block_tokens;
    if (d.prefix_cache.enabled && a % b != 0 && b % a != 0)
      throw ScenarioError(origin + ": " + where + ".prefix_cache.block_tokens: " + std::to_string(b) + " and the workload's " + std::to_string(a) +
                          "-token blocks must divide one another (the trace's block ids are re-expressed at the cache's size)");
    s.deployments.push_back(std::move(d));
  }
  o.done();
  return s;
}

Scenario load_scenario(const std::string& path) {
  return parse_scenario(read_file(path), path, fs::path(path).parent_path().string());
}

}  // namespace servesim
