#include "scenarios/json_reader.hpp"

namespace servesim {

using namespace json_reader;

namespace {

// `hi`: the largest meaningful value (kMaxTokens for token counts, kMaxSeconds for times), also
// the default clamp.
// A length distribution; `count` (tokens, rounds): every draw must be able to be >= 1 (rev26: a
// constant 0 or an exponential of mean 0 was silently made 1 token per request).
Dist read_dist(Obj d, double hi, bool count = false) {
  Dist x;
  x.kind = d.choice<Dist::Kind>("dist", std::nullopt,
                                {{"constant", Dist::Kind::constant}, {"lognormal", Dist::Kind::lognormal},
                                 {"exponential", Dist::Kind::exponential}, {"uniform", Dist::Kind::uniform}});
  switch (x.kind) {
    case Dist::Kind::constant: x.value = d.num("value", std::nullopt, count ? 1 : 0, hi); break;
    case Dist::Kind::lognormal:
      x.mu = d.num("mu", std::nullopt, -std::log(hi), std::log(hi));
      x.sigma = d.num("sigma", std::nullopt, 0, 100);
      break;
    case Dist::Kind::exponential:
      x.mean = d.num("mean", std::nullopt, 0, hi);
      if (count && !(x.mean > 0)) d.fail("mean", "must be > 0 (a count of tokens or rounds: every draw would be 0)");
      break;
    case Dist::Kind::uniform: break;
  }
  x.min = d.num("min", x.kind == Dist::Kind::uniform ? std::nullopt : std::optional<double>(0.0), 0, hi);
  x.max = d.num("max", x.kind == Dist::Kind::uniform ? std::nullopt : std::optional<double>(hi), count ? std::max(1.0, x.min) : x.min, hi);
  d.done();
  return x;
}

constexpr double kTok = static_cast<double>(kMaxTokens);

Dist lognormal(double mu, double sigma, double min, double max) {
  Dist d;
  d.kind = Dist::Kind::lognormal, d.mu = mu, d.sigma = sigma, d.min = min, d.max = max;
  return d;
}

// The agent-session keys of a workload (read_workload's agent branch).
void read_agent_workload(Obj& o, WorkloadSpec& w) {
  // agent sessions; defaults and their sources: README.md "Agent sessions"
  w.loop = o.choice<WorkloadSpec::Loop>("loop", WorkloadSpec::Loop::closed, {{"open", WorkloadSpec::Loop::open}, {"closed", WorkloadSpec::Loop::closed}});
  // a closed loop keeps `concurrency` sessions active, an open loop starts sessions at
  // `rate_per_s`: the other loop's key would be ignored (rev27 user review), so it is refused
  const bool closed = w.loop == WorkloadSpec::Loop::closed;
  if (closed && o.has("rate_per_s"))
    o.fail("rate_per_s", "applies to \"loop\": \"open\" (a closed loop keeps \"concurrency\" sessions active; the loop is closed unless \"loop\" says \"open\")");
  if (!closed && o.has("concurrency"))
    o.fail("concurrency", "applies to \"loop\": \"closed\" (an open loop starts sessions at \"rate_per_s\")");
  if (closed) w.concurrency = o.integer("concurrency", 100, 1, kMaxSessions);
  else w.rate_per_s = o.num("rate_per_s", 1.0, 1e-12, 1e12);
  if (!closed && o.has("ramp_s")) o.fail("ramp_s", "applies to \"loop\": \"closed\" (an open loop's sessions arrive at \"rate_per_s\" from the start)");
  w.ramp_s = o.num("ramp_s", 0.0, 0, kMaxSeconds);
  w.start = o.choice<WorkloadSpec::Start>("start", WorkloadSpec::Start::ramp,
                                          {{"ramp", WorkloadSpec::Start::ramp}, {"stationary", WorkloadSpec::Start::stationary}});
  if (w.start == WorkloadSpec::Start::stationary && w.loop != WorkloadSpec::Loop::closed)
    o.fail("start", "\"stationary\" applies to \"loop\": \"closed\" (an open loop's sessions start at round 0 as they arrive)");
  w.duration_s = o.num("duration_s", 0.0, 0, kMaxSeconds);
  w.requests = o.integer("sessions", 0, 0);
  if (w.loop == WorkloadSpec::Loop::open && static_cast<double>(w.requests) / w.rate_per_s > kMaxSeconds)
    o.fail("rate_per_s", "sessions / rate_per_s is more than 1e9 s: the sessions' arrivals would span past the bound on times (raise the rate or lower sessions)");
  w.shared_prefix_tokens = o.integer("shared_prefix_tokens", 0, 0, kMaxTokens);
  // shared in whole blocks (review, twenty-seventh session: 500 at 512-token blocks shared nothing)
  if (w.shared_prefix_tokens % w.block_tokens != 0)
    o.fail("shared_prefix_tokens", std::to_string(w.shared_prefix_tokens) + " is not a multiple of block_tokens (" + std::to_string(w.block_tokens) + "): the prefix is shared in whole blocks");
  // a session's history sums its rounds' tokens: at most 1e6 rounds of 2 × 2^40 stays below 2^63
  w.rounds = o.has("rounds") ? read_dist(o.child("rounds"), 1e6, true) : lognormal(std::log(157.0) - 0.5, 1.0, 1, 2000);
  w.first_prompt_tokens = o.has("first_prompt_tokens") ? read_dist(o.child("first_prompt_tokens"), kTok, true) : lognormal(std::log(4000.0), 1.0, 16, 65536);
  w.append_tokens = o.has("append_tokens") ? read_dist(o.child("append_tokens"), kTok, true) : lognormal(std::log(429.0) - 0.5, 1.0, 1, 32768);
  w.output_tokens = o.has("output_tokens") ? read_dist(o.child("output_tokens"), kTok, true) : lognormal(5.7737, 1.1312, 1, 8192);
  w.think_s = o.has("think_s") ? read_dist(o.child("think_s"), kMaxSeconds) : lognormal(-0.7606, 2.3555, 0, 600);
}

WorkloadSpec read_workload(Obj o, const std::string& base_dir) {
  using K = WorkloadSpec::Kind;
  WorkloadSpec w;
  w.kind = o.choice<K>("kind", std::nullopt,
                       {{"synthetic", K::synthetic}, {"mooncake", K::mooncake}, {"azure", K::azure}, {"burstgpt", K::burstgpt},
                        {"tracelab_replay", K::tracelab_replay}, {"tracelab_rounds", K::tracelab_rounds}, {"agent", K::agent}});
  w.block_tokens = o.int32("block_tokens", 512, 1);
  const bool trace = w.kind != K::synthetic && w.kind != K::agent;
  // max_requests caps a trace's rows; generated workloads have their own count (rev27 user review:
  // it was read for every kind and ignored by these two)
  if (!trace && o.has("max_requests"))
    o.fail("max_requests", w.kind == K::synthetic ? "applies to trace replays (a synthetic workload's count is \"requests\")"
                                                  : "applies to trace replays (an agent workload's count is \"sessions\")");
  if (trace) {
    w.max_requests = o.integer("max_requests", 0, 0);
    const std::string t = o.str("trace", std::nullopt);
    w.trace_path = fs::path(t).is_absolute() ? t : (fs::path(base_dir) / t).lexically_normal().string();
    // the shared public traces may live elsewhere: $SERVESIM_SHARED_TRACES replaces everything up to
    // and including ".../shared/traces" (the same variable the tests read)
    const char* shared = std::getenv("SERVESIM_SHARED_TRACES");
    const auto at = w.trace_path.find("shared/traces/");
    if (shared && *shared && at != std::string::npos)
      w.trace_path = (fs::path(shared) / w.trace_path.substr(at + std::string("shared/traces/").size())).string();
    w.time_scale = o.num("time_scale", 1.0, 1e-9, 1e9);
    if (w.kind == K::tracelab_replay || w.kind == K::tracelab_rounds) w.wait_scale = o.num("wait_scale", 0.0, 0, 1e9);
    w.skip_bad_rows = o.boolean("skip_bad_rows", false);
    if (w.kind == K::mooncake) w.jitter_s = o.num("jitter_s", 0.0, 0, kMaxSeconds);
  } else if (w.kind == K::synthetic) {
    w.requests = o.integer("requests", std::nullopt, 1);
    w.rate_per_s = o.num("rate_per_s", std::nullopt, 1e-12, 1e12);
    // the arrivals' expected span within the input bound on times (rev26: rate 1e-12 put arrivals
    // at 5e12 s); a Poisson draw may pass it by a few sqrt(requests) / rate
    if (static_cast<double>(w.requests) / w.rate_per_s > kMaxSeconds)
      o.fail("rate_per_s", "requests / rate_per_s is more than 1e9 s: the arrivals would span past the bound on times (raise the rate or lower requests)");
    w.arrival = o.choice<WorkloadSpec::Arrival>("arrival", WorkloadSpec::Arrival::poisson,
                                                {{"poisson", WorkloadSpec::Arrival::poisson}, {"gamma", WorkloadSpec::Arrival::gamma}});
    if (w.arrival != WorkloadSpec::Arrival::gamma && o.has("burstiness"))  // (review, twenty-seventh session: ignored)
      o.fail("burstiness", "applies to \"arrival\": \"gamma\" (Poisson arrivals have cv² 1)");
    w.burstiness = o.num("burstiness", 1.0, 1e-6, 1e6);
    w.shared_prefix_tokens = o.integer("shared_prefix_tokens", 0, 0, kMaxTokens);
    // shared in whole blocks (review, twenty-seventh session: 500 at 512-token blocks shared nothing)
    if (w.shared_prefix_tokens % w.block_tokens != 0)
      o.fail("shared_prefix_tokens", std::to_string(w.shared_prefix_tokens) + " is not a multiple of block_tokens (" + std::to_string(w.block_tokens) + "): the prefix is shared in whole blocks");
    w.input = read_dist(o.child("input_tokens"), kTok, true);
    w.output = read_dist(o.child("output_tokens"), kTok, true);
    // a prompt drawn shorter than the shared prefix + 1 is lengthened to it: a prefix at or past the
    // distribution's max would make every prompt prefix + 1 tokens, above that max (rev27 user review)
    const double top = w.input.kind == Dist::Kind::constant ? std::min(w.input.value, w.input.max) : w.input.max;  // the longest draw
    if (w.shared_prefix_tokens > 0 && static_cast<double>(w.shared_prefix_tokens) >= top)
      o.fail("shared_prefix_tokens", std::to_string(w.shared_prefix_tokens) + " is not below input_tokens' longest draw (" + std::to_string(static_cast<long long>(top)) +
                                         "): every prompt would be the prefix + 1 tokens, past the distribution (the prefix is part of each prompt's drawn length)");
  } else {
    read_agent_workload(o, w);
  }
  o.done();
  return w;
}

PoolSpec read_pool(Obj o, const PoolSpec& def, bool decode) {
  PoolSpec p = def;
  p.instances = o.int32("instances", def.instances, 1);
  p.ep = o.int32("ep", def.ep, 1);
  p.attn_tp = o.int32("attn_tp", def.attn_tp, 1);
  p.max_batch_tokens = o.integer("max_batch_tokens", def.max_batch_tokens, 1, kMaxTokens);
  // chunked prefill is the prefill pool's, the running-sequence limit the decode pool's (rev27 user
  // review: each was accepted in the other pool, echoed in summary.json and ignored)
  if (decode && o.has("chunk_tokens")) o.fail("chunk_tokens", "applies to the prefill pool (chunked prefill); a decode step takes one token per sequence");
  if (!decode && o.has("max_running"))
    o.fail("max_running", "applies to the decode pool (sequences in a decode batch); a prefill step is bounded by max_batch_tokens");
  p.chunk_tokens = o.integer("chunk_tokens", def.chunk_tokens, 1, kMaxTokens);
  p.max_running = o.int32("max_running", def.max_running, 1);
  p.redundant_experts = o.int32("redundant_experts", def.redundant_experts, 0);
  p.eplb = o.boolean("eplb", p.redundant_experts > 0);
  if (p.redundant_experts > 0 && !p.eplb) o.fail("eplb", "redundant experts are placed by EPLB: set eplb to true or redundant_experts to 0");
  p.expert_imbalance = o.num("expert_imbalance", def.expert_imbalance, 0.0, 1e6);
  if (p.expert_imbalance > 0 && p.expert_imbalance < 1) o.fail("expert_imbalance", "must be 0 (sampled from the model) or >= 1 (busiest GPU / mean)");
  p.cuda_graph = o.boolean("cuda_graph", def.cuda_graph);
  p.overlap_exposed_fraction = o.num("overlap_exposed_fraction", def.overlap_exposed_fraction, 0.0, 1.0);
  if (o.has("mtp")) {
    Obj m = o.child("mtp");
    p.mtp_draft_tokens = m.int32("draft_tokens", 1, 0, 8);
    p.mtp_acceptance = m.num("acceptance", std::nullopt, 0.0, 1.0);
    m.str("source", std::string());
    m.done();
  }
  p.two_batch_overlap = o.boolean("two_batch_overlap", def.two_batch_overlap);
  p.step_overhead_s = o.num("step_overhead_s", def.step_overhead_s, 0, kMaxSeconds);
  p.ep_dispatch = o.choice<EpDispatch>("ep_dispatch", def.ep_dispatch, {{"hierarchical", EpDispatch::hierarchical}, {"direct", EpDispatch::direct}});
  p.all_to_all_on_fabric = o.boolean("all_to_all_on_fabric", def.all_to_all_on_fabric);
  o.done();
  return p;
}

// The deployment's model and hardware files; the field whose file failed is named (rev25d:
// "deployments[0]: no models file", not ".model").
void read_model_and_gpu(Obj& o, const std::string& base_dir, DeploymentSpec& d) {
  for (const char* field : {"model", "hardware"}) {
    const bool model = field == std::string("model");
    const std::string ref = o.str(field, std::nullopt);  // (a missing field names itself)
    try {
      const std::string f = resolve_data_file(ref, model ? "models" : "hardware", base_dir);
      if (model) d.model = load_model(f);
      else d.gpu = load_hardware(f);
    } catch (const ScenarioError& e) {
      throw ScenarioError(o.origin() + ": " + o.path() + "." + field + ": " + e.what());
    }
  }
}

DeploymentSpec read_deployment(Obj o, const std::string& base_dir) {
  DeploymentSpec d;
  d.name = o.str("name", std::nullopt);
  read_model_and_gpu(o, base_dir, d);
  if (o.has("kv_cache_dtype")) {
    const DType t = o.dtype("kv_cache_dtype", std::nullopt);
    bool mla = false;
    for (auto& a : d.model.attention_kinds)
      if (a.op == AttentionOp::mla) a.kv_dtype = t, mla = true;
    // (rev26: accepted and ignored for DeepSeek V4, whose KV entries the model file fixes)
    if (!mla) o.fail("kv_cache_dtype", "sets the dtype of MLA latent caches; " + d.model.name + " has no MLA layer (its KV format is the model file's)");
  }
  const PoolSpec pdef = default_prefill_pool(), ddef = default_decode_pool();
  d.prefill = o.has("prefill") ? read_pool(o.child("prefill"), pdef, false) : pdef;
  d.decode = o.has("decode") ? read_pool(o.child("decode"), ddef, true) : ddef;
  d.decode.max_batch_tokens = std::max<long long>(d.decode.max_batch_tokens, d.decode.max_running);
  const long long gpus = static_cast<long long>(d.prefill.instances) * d.prefill.ep + static_cast<long long>(d.decode.instances) * d.decode.ep;
  if (gpus > kMaxClusterGpus)
    o.fail(o.has("decode") ? "decode" : "prefill", "prefill.instances x prefill.ep + decode.instances x decode.ep = " + std::to_string(gpus) +
                                                       " GPUs; at most " + std::to_string(kMaxClusterGpus) + " (README \"Input rules\")");
  d.cluster.nodes = 0;  // 0 = as many as the pools need
  if (o.has("cluster")) {
    Obj c = o.child("cluster");
    d.cluster.nodes = c.int32("nodes", 0, 0, kMaxClusterNodes);
    d.cluster.fabric = c.choice<FabricKind>("fabric", FabricKind::rail_optimized,
                                            {{"rail_optimized", FabricKind::rail_optimized}, {"fat_tree", FabricKind::fat_tree}});
    d.cluster.oversubscription = c.num("oversubscription", 1.0, 1.0, 1e6);
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
  d.gpu.gpu_hour_usd = o.num("gpu_hour_usd", d.gpu.gpu_hour_usd, 0, 1e6);  // the hardware file's unless set here
  d.gpu.board_power_w = o.num("board_power_w", d.gpu.board_power_w, 0, 1e6);
  d.reserved_bytes_per_gpu = o.num("reserved_gb_per_gpu", d.reserved_bytes_per_gpu / 1e9, 0, 1e6) * 1e9;
  if (o.has("slo")) {
    Obj s = o.child("slo");
    d.slo.ttft_s = s.num("ttft_s", d.slo.ttft_s, 1e-9, kMaxSeconds);
    d.slo.tpot_s = s.num("tpot_s", d.slo.tpot_s, 1e-9, kMaxSeconds);
    s.done();
  }
  if (o.has("kv_tiers")) {
    Obj t = o.child("kv_tiers");
    d.kv_tiers.enabled = t.boolean("enabled", true);
    // defaults: half the node's host DRAM (hardware file) for KV; storage: TierSpec's
    TierSpec& k = d.kv_tiers;
    k.host_bytes_per_node = t.num("host_gb_per_node", d.gpu.host_dram_bytes_per_node / 2 / 1e9, 0, 1e9) * 1e9;
    if (t.has("storage")) {
      Obj st = t.child("storage");
      k.storage_enabled = st.boolean("enabled", k.storage_enabled);
      k.storage_bytes_per_node = st.num("tb_per_node", k.storage_bytes_per_node / 1e12, 0, 1e9) * 1e12;
      k.storage_bytes_per_s = st.num("gb_per_s", k.storage_bytes_per_s / 1e9, 1e-6, 1e9) * 1e9;
      k.storage_latency_s = st.num("latency_s", k.storage_latency_s, 0, kMaxSeconds);
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

Scenario parse_scenario(const std::string& text, const std::string& origin, const std::string& base_dir) {
  const json j = parse_json(text, origin);
  Obj o(j, origin, "");
  Scenario s;
  s.path = origin;
  s.name = o.str("name", fs::path(origin).stem().string());
  s.description = o.str("description", std::string());
  s.seed = static_cast<std::uint64_t>(o.integer("seed", 1, 0));
  s.horizon_s = o.num("horizon_s", 0.0, 0, kMaxSeconds);
  s.warmup_s = o.num("warmup_s", 0.0, 0, kMaxSeconds);
  if (s.horizon_s > 0 && s.warmup_s >= s.horizon_s) o.fail("warmup_s", "must be below horizon_s (the window [warmup_s, horizon_s] would be empty)");
  s.cost_model = o.str("cost_model", s.cost_model);
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
    if (!is_safe_file_name(d.name))  // it names the deployment's output folder (out/<scenario>/<name>/)
      throw ScenarioError(origin + ": " + where + ".name: \"" + d.name + "\" cannot be a folder name: " + safe_file_name_rule());
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

std::string never_ending_workload(const Scenario& s) {
  const WorkloadSpec& w = s.workload;
  if (s.horizon_s > 0 || w.kind != WorkloadSpec::Kind::agent || w.requests > 0 || w.duration_s > 0) return "";
  return "workload: agent sessions with neither \"sessions\" nor \"duration_s\" start new sessions without end, and horizon_s 0 "
         "runs until every request ends: set horizon_s (or --horizon), workload.duration_s or workload.sessions";
}

}  // namespace servesim

