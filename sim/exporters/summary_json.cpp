#include "sim/exporters/writers.hpp"

#include "costmodels/fitted.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace servesim {

namespace {

// fixed-precision number for outputs: rounding the value first keeps files byte-identical
double r6(double x) { return std::round(x * 1e6) / 1e6; }
double r3(double x) { return std::round(x * 1e3) / 1e3; }

// percentiles in ms; null when nothing was measured (count 0), never a made-up 0
nlohmann::json pct_ms(const Percentiles& p) {
  if (p.n == 0) return {{"p50_ms", nullptr}, {"p90_ms", nullptr}, {"p99_ms", nullptr}, {"mean_ms", nullptr}, {"count", 0}};
  return {{"p50_ms", r3(p.p50 * 1e3)}, {"p90_ms", r3(p.p90 * 1e3)}, {"p99_ms", r3(p.p99 * 1e3)}, {"mean_ms", r3(p.mean * 1e3)}, {"count", p.n}};
}

nlohmann::json memory_json(const GpuMemoryPlan& m, double kv_peak, double kv_mean) {
  const double fixed = m.expert_weights + m.other_weights + m.workspace + m.reserved;
  return {{"hbm_gb", r3(m.hbm / 1e9)},
          {"usable_gb", r3(m.usable / 1e9)},
          {"routed_expert_weights_gb", r3(m.expert_weights / 1e9)},
          {"other_weights_gb", r3(m.other_weights / 1e9)},
          {"activation_workspace_gb", r3(m.workspace / 1e9)},
          {"reserved_gb", r3(m.reserved / 1e9)},
          {"kv_budget_gb", r3(m.kv_budget / 1e9)},
          {"kv_peak_gb", r3(kv_peak / 1e9)},
          {"kv_mean_gb", r3(kv_mean / 1e9)},
          {"hbm_peak_gb", r3((fixed + kv_peak) / 1e9)},
          {"hbm_mean_gb", r3((fixed + kv_mean) / 1e9)}};
}

nlohmann::json pool_json(const PoolSpec& p) {
  return {{"instances", p.instances}, {"ep", p.ep}, {"attn_tp", p.attn_tp}, {"dp", p.ep / p.attn_tp},
          {"max_batch_tokens", p.max_batch_tokens}, {"chunk_tokens", p.chunk_tokens}, {"max_running", p.max_running},
          {"two_batch_overlap", p.two_batch_overlap}, {"expert_imbalance", p.expert_imbalance}, {"redundant_experts", p.redundant_experts},
          {"eplb", p.eplb}, {"step_overhead_s", p.step_overhead_s}, {"cuda_graph", p.cuda_graph}, {"overlap_exposed_fraction", p.overlap_exposed_fraction},
          {"mtp_draft_tokens", p.mtp_draft_tokens}, {"mtp_acceptance", p.mtp_acceptance},
          {"ep_dispatch", p.ep_dispatch == EpDispatch::direct ? "direct" : "hierarchical"}};
}

}  // namespace

namespace {

// what ran: deployment, model, workload, seed, and which cost model answered (with the fitted
// parameters' provenance when the cost model was the fitted one)
void header_json(const RunReport& r, nlohmann::json& j) {
  const DeploymentSpec& d = *r.deployment;
  const Summary& s = r.summary;
  j["deployment"] = d.name;
  j["model"] = d.model.name;
  j["hardware"] = d.gpu.name;
  j["workload"] = r.workload;
  if (r.trace) j["trace_file"] = {{"path", r.trace->path}, {"bytes", r.trace->bytes}, {"fnv1a64", r.trace->fnv1a64}};
  j["seed"] = r.seed;
  j["horizon_s"] = r.horizon_s;
  j["cost_model"] = {{"name", r.cost_model}, {"provenance", std::string(to_string(s.worst_source))}};
  {
    nlohmann::json ops = nlohmann::json::array();
    for (int k = 0; k < static_cast<int>(OpKind::count_); ++k)
      if (s.extrapolated_ops & (1u << k)) ops.push_back(std::string(to_string(static_cast<OpKind>(k))));
    const double busy = s.prefill_busy_s + s.decode_busy_s;
    j["cost_model"]["extrapolated_ops"] = ops;
    j["cost_model"]["extrapolated_share_of_step_time"] = busy > 0 ? r6(s.extrapolated_s / busy) : 0.0;
  }
  if (r.fit) {
    // which fitted parameters and which measurements produced the numbers (issue #5)
    const FitProvenance& p = *r.fit;
    j["cost_model"]["parameters"] = p.parameters;
    j["cost_model"]["parameters_fnv1a64"] = p.parameters_hash;
    j["cost_model"]["measured_on"] = p.measured_on;
    j["cost_model"]["scaling"] = p.scaling;
    j["cost_model"]["measurement_commits"] = p.measurement_commits;
    j["cost_model"]["tables"] = p.tables;
  }
}

// the cluster, the pools and policies, what happened to the requests, latency, throughput, goodput
void load_json(const RunReport& r, nlohmann::json& j) {
  const DeploymentSpec& d = *r.deployment;
  const Summary& s = r.summary;
  // per-node figures divide by the nodes the pools take, not cluster.nodes, which may declare spare
  // nodes (review, twenty-third session: 100 declared nodes for 8 used gave 12.5x too little per node)
  const int gpus = required_gpus(d), nodes = required_nodes(d);
  const double dur = s.end_s - s.warmup_s > 0 ? s.end_s - s.warmup_s : 1.0;  // the measurement window
  j["cluster"] = {{"nodes", d.cluster.nodes}, {"nodes_used", nodes}, {"gpus_used", gpus}, {"fabric", d.cluster.fabric == FabricKind::fat_tree ? "fat_tree" : "rail_optimized"},
                  {"oversubscription", d.cluster.oversubscription}};
  j["prefill_pool"] = pool_json(d.prefill);
  j["decode_pool"] = pool_json(d.decode);
  j["policies"] = {{"router", d.router}, {"decode_router", d.decode_router}, {"batch_scheduler", d.batch_scheduler}, {"eviction", d.eviction}};
  j["window"] = {{"warmup_s", s.warmup_s},
                 {"start_s", s.warmup_s},
                 {"end_s", r6(s.end_s)},
                 {"duration_s", r6(std::max(0.0, s.end_s - s.warmup_s))},
                 {"note", "every figure of this file but window.warmup_requests and the engine's own counters (prefix_cache.block_hit_rate, "
                          "kv_tiers counts and bytes) covers the window: requests that arrived at or after start_s (latencies, requests, "
                          "goodput), the part of steps, transfers, memory and tier occupancy inside it; sessions active in it (ended at or after "
                          "start_s) count whole; throughput and cost count tokens by when they were made: prompts whose prefill ended and "
                          "output tokens generated within [start_s, end_s], of warm-up arrivals too"}};
  j["window"]["warmup_requests"] = {{"arrived", s.warmup_arrived}, {"completed", s.warmup_completed}, {"rejected", s.warmup_rejected},
                                    {"in_flight", s.warmup_in_flight}};
  j["requests"] = {{"arrived", s.arrived},
                   {"completed", s.completed},
                   {"rejected", s.rejected},
                   {"in_flight", s.in_flight},
                   {"rejected_reasons", s.rejected_reasons},
                   {"in_flight_phases", s.in_flight_phases}};
  j["latency"] = {{"ttft", pct_ms(s.ttft_s)}, {"tpot", pct_ms(s.tpot_s)}, {"e2e", pct_ms(s.e2e_s)}};
  j["latency"]["ttft_with_in_flight"] = pct_ms(s.ttft_with_in_flight_s);
  j["latency"]["ttft_with_in_flight"]["in_flight_without_first_token"] = s.in_flight_without_first_token;
  j["latency"]["ttft_with_in_flight"]["note"] = "completed requests and those in flight at the end: with a first token its TTFT, without one end - arrival (a lower bound)";
  if (s.quantiles_approximate)  // only past 2^20 values of one latency (sim/exporters/quantiles.hpp)
    j["latency"]["quantiles"] = "percentiles of a latency with more than 1,048,576 values (here, in ttft_split and in kv_transfer.time) are read from a histogram of 20,000 log bins over [1e-9, 1e7] s: each within 0.093% of the exact one; means and counts exact";
  j["throughput"] = {{"duration_s", r6(std::max(0.0, s.end_s - s.warmup_s))},  // 0 when the warm-up outlasts the run
                     {"input_tokens", s.input_tokens},
                     {"output_tokens", s.output_tokens},
                     {"input_tokens_per_s_per_gpu", r3(s.input_tokens / dur / gpus)},
                     {"computed_input_tokens", s.input_tokens - s.cached_tokens},
                     {"computed_input_tokens_per_s_per_gpu", r3((s.input_tokens - s.cached_tokens) / dur / gpus)},
                     {"note", "input tokens: prompt tokens of requests whose prefill finished, cached ones included; computed: without the tokens served by a prefix cache or loaded back"},
                     {"output_tokens_per_s_per_gpu", r3(s.output_tokens / dur / gpus)},
                     {"input_tokens_per_s_per_node", r3(s.input_tokens / dur / nodes)},
                     {"output_tokens_per_s_per_node", r3(s.output_tokens / dur / nodes)},
                     {"input_tokens_per_s_per_prefill_gpu", r3(s.input_tokens / dur / (d.prefill.instances * d.prefill.ep))},
                     {"output_tokens_per_s_per_decode_gpu", r3(s.output_tokens / dur / (d.decode.instances * d.decode.ep))},
                     {"per_gpu_note", "_per_gpu and _per_node divide by every GPU and node the pools take (cluster.gpus_used, cluster.nodes_used: "
                                      "both pools, each rounded up to whole nodes; cluster.nodes may declare more); _per_prefill_gpu by the prefill pool's GPUs (instances x ep), "
                                      "_per_decode_gpu by the decode pool's"}};
  j["goodput"] = {{"slo_ttft_s", d.slo.ttft_s},
                  {"slo_tpot_s", d.slo.tpot_s},
                  {"requests_meeting_slo", s.slo_met},
                  {"finished", s.completed + s.rejected},
                  {"in_flight_at_horizon", s.in_flight},
                  {"fraction_of_finished", s.completed + s.rejected ? nlohmann::json(r6(static_cast<double>(s.slo_met) / (s.completed + s.rejected))) : nlohmann::json()},
                  {"fraction_of_arrived", s.arrived ? r6(static_cast<double>(s.slo_met) / s.arrived) : 0.0},
                  {"note", "a request meets the SLO when it completed with TTFT <= slo_ttft_s and TPOT <= slo_tpot_s (single-token answers: TTFT only); "
                           "fraction_of_finished = requests_meeting_slo / (completed + rejected): requests in flight at the horizon are neither hits nor misses"},
                  {"requests_per_s", r6(s.slo_met / dur)},
                  {"output_tokens_per_s", r3(s.slo_met_output_tokens / dur)}};
}

// memory per GPU, prefix cache, KV transfers and where TTFT went
void cache_json(const RunReport& r, nlohmann::json& j) {
  const DeploymentSpec& d = *r.deployment;
  const Summary& s = r.summary;
  j["memory_per_gpu"] = {{"prefill", memory_json(r.prefill_memory, s.prefill_kv_peak, s.prefill_kv_mean)},
                         {"decode", memory_json(r.decode_memory, s.decode_kv_peak, s.decode_kv_mean)}};
  const double lookups = static_cast<double>(r.totals.prefix_lookup_blocks);
  j["prefix_cache"] = {{"enabled", d.prefix_cache.enabled},
                       {"block_tokens", d.prefix_cache.block_tokens},
                       {"block_hit_rate", lookups > 0 ? r6(r.totals.prefix_hit_blocks / lookups) : 0.0},
                       {"token_hit_rate", s.input_tokens > 0 ? r6(static_cast<double>(s.cached_tokens) / s.input_tokens) : 0.0}};
  // not computed (null) when no arrival carried prefix block ids: synthetic prompts, or session
  // workloads, whose reuse within a session is the simulated caches' to find (arrivals.cpp)
  if (r.totals.trace_blocks > 0)
    j["prefix_cache"]["trace_block_reuse"] = r6(static_cast<double>(r.totals.trace_reuse_blocks) / r.totals.trace_blocks);
  else
    j["prefix_cache"]["trace_block_reuse"] = nullptr;
  j["prefix_cache"]["trace_block_reuse_note"] = "closed form: share of prompt blocks an earlier arrival carried (unlimited cache, arrival order); "
                                                "null when not computed (no arrival carried prefix block ids, or a session workload); "
                                                "block_hit_rate is what the simulated L1 caches found";
  if (r.totals.trace_reuse_arrivals >= 0) {  // bounded memory: only past 2^22 distinct block ids
    j["prefix_cache"]["trace_block_reuse_arrivals"] = r.totals.trace_reuse_arrivals;
    j["prefix_cache"]["trace_block_reuse_note"] = j["prefix_cache"]["trace_block_reuse_note"].get<std::string>() +
                                                  "; over the first trace_block_reuse_arrivals arrivals only (the engine remembers at most 4,194,304 distinct block ids)";
  }
  j["kv_transfer"] = {{"count", s.transfers}, {"bytes", s.transfer_bytes}, {"time", pct_ms(s.transfer_s)}};
  j["ttft_split"] = {{"queue", pct_ms(s.ttft_queue_s)},
                     {"load_back", pct_ms(s.ttft_load_s)},
                     {"prefill", pct_ms(s.ttft_prefill_s)},
                     {"decode_kv_wait", pct_ms(s.ttft_decode_kv_wait_s)},
                     {"transfer", pct_ms(s.ttft_transfer_s)},
                     {"decode_slot_wait", pct_ms(s.ttft_slot_wait_s)}};
}

// KV tiers below the GPUs
void tiers_json(const RunReport& r, nlohmann::json& j) {
  const DeploymentSpec& d = *r.deployment;
  const Summary& s = r.summary;
  // numerators and denominator over the same requests: those that arrived in the window (after any
  // warm-up) and were admitted (the whole run's admitted prompts made the shares too small, rev25)
  const double admitted = static_cast<double>(s.prompt_tokens_admitted);
  auto share = [&](long long x) { return admitted > 0 ? r6(x / admitted) : 0.0; };
  const RunTotals& t = r.totals;
  const bool l3 = d.kv_tiers.enabled && d.kv_tiers.storage_enabled;  // no tiers: no storage either
  j["kv_tiers"] = {{"enabled", d.kv_tiers.enabled},
                   {"host_gb_per_node", r3(d.kv_tiers.host_bytes_per_node / 1e9)},
                   {"storage_enabled", l3},
                   {"storage_tb_per_node", l3 ? r3(d.kv_tiers.storage_bytes_per_node / 1e12) : 0.0},
                   {"token_hit_rate", {{"L1_gpu", share(s.tokens_l1)}, {"L2_host", share(s.tokens_l2)}, {"L3_storage", share(s.tokens_l3)},
                                       {"note", "shares of the prompt tokens of the requests that arrived in the window and were admitted to prefill "
                                                "(their prefill finished or not), so they need not add up to prefix_cache.token_hit_rate, whose denominator is "
                                                "the prompts whose prefill finished; the counts and bytes below cover the whole run, warm-up included; "
                                                "bytes_loaded_from_L2/L3 count a load when it starts (in flight at the end included), tokens and "
                                                "bytes_left_store when it ends"}}},
                   {"offloads", t.offloads},
                   {"offloads_in_flight_at_end", t.offloads_in_flight},
                   {"loads_from_L2", t.loads_l2},
                   {"loads_from_L3", t.loads_l3},
                   {"bytes_offload_copies_started", t.offload_bytes},
                   {"bytes_offload_abandoned", t.offload_abandoned_bytes},
                   {"preloaded_histories", t.preloads},
                   {"bytes_preloaded_into_store", t.preload_bytes},
                   {"bytes_offloaded_into_store", t.store_offloaded_bytes},
                   {"bytes_demoted_L2_to_L3", t.demote_bytes},
                   {"bytes_loaded_from_L2", t.load_l2_bytes},
                   {"bytes_loaded_from_L3", t.load_l3_bytes},
                   {"bytes_dropped", t.store_dropped_bytes},
                   {"bytes_held_at_end", t.store_held_bytes},
                   {"bytes_left_store", t.store_left_bytes},
                   {"ledger_note", "bytes_offloaded_into_store = bytes_held_at_end + bytes_left_store (loaded back, dropped or released); "
                                   "bytes_offload_copies_started + bytes_preloaded_into_store (stationary-start histories, put in at arrival without a "
                                   "copy) = into store + abandoned (the session had ended) + copies in flight at the end"},
                   {"L2_gb_mean", r3(s.l2_mean / 1e9)},
                   {"L2_gb_peak", r3(s.l2_peak / 1e9)},
                   {"L3_gb_mean", r3(s.l3_mean / 1e9)},
                   {"L3_gb_peak", r3(s.l3_peak / 1e9)}};
}

// agent sessions (when there were any) and the engine's own counters
void sessions_json(const RunReport& r, nlohmann::json& j) {
  const DeploymentSpec& d = *r.deployment;
  const Summary& s = r.summary;
  const double dur = s.end_s - s.warmup_s > 0 ? s.end_s - s.warmup_s : 1.0;
  if (s.sessions > 0) {
    const double rho = s.session_life_s > 0 ? s.session_gpu_s / s.session_life_s : 0.0;
    const double little = s.session_decode_s + s.session_idle_s > 0 ? s.session_decode_s / (s.session_decode_s + s.session_idle_s) : 0.0;
    j["sessions"] = {{"count", s.sessions},
                     {"completed", s.sessions_completed},
                     {"mean_rounds", r3(s.session_rounds / s.sessions)},
                     {"mean_lifetime_s", r3(s.session_life_s / s.sessions)},
                     {"mean_W_decode_s", r3(s.session_decode_s / s.sessions)},
                     {"mean_W_idle_s", r3(s.session_idle_s / s.sessions)},
                     {"gpu_residency_measured", r6(rho)},
                     {"gpu_residency_littles_law", r6(little)},
                     {"note", "measured: time a session's KV is on a GPU (prefill admission to the end of its decode and offload, per round) / session lifetime; "
                              "Little's law (the article): W_decode / (W_decode + W_idle) with W_decode = Σ(last token − first token) and W_idle = Σ tool/think gaps"}};
  }
  j["engine"] = {{"prefill_steps", s.prefill_steps},
                 {"decode_steps", s.decode_steps},
                 {"decode_steps_per_event", r.totals.decode_steps_per_event},
                 {"decode_step_events", r.totals.decode_step_events},
                 {"mean_decode_batch", r3(s.decode_batch_mean)},
                 {"prefill_busy_fraction", r6(s.prefill_busy_s / dur / d.prefill.instances)},
                 {"decode_busy_fraction", r6(s.decode_busy_s / dur / d.decode.instances)},
                 {"comm_s", r6(s.comm_s)},
                 {"host_s", r6(s.host_s)},
                 {"note", "over the window, summed over the instances of both pools: steps and step events (a decode event covers up to "
                          "decode_steps_per_event steps); mean_decode_batch = sequences per decode step of one instance (all its DP ranks); "
                          "busy fractions = busy step seconds / window / instances; comm_s = exposed communication seconds, host_s = host "
                          "(scheduling, launch) seconds inside the steps"},
                 {"expert_load_busiest_over_mean",
                  {{"prefill", {{"mean", r6(s.prefill_steps ? s.prefill_expert_load_sum / s.prefill_steps : 0.0)}, {"max", r6(s.prefill_expert_load_max)}}},
                   {"decode", {{"mean", r6(s.decode_steps ? s.decode_expert_load_sum / s.decode_steps : 0.0)}, {"max", r6(s.decode_expert_load_max)}}},
                   {"note", "routed token-expert assignments of the busiest GPU / the mean, per step (costmodels/expert_load.hpp: the model's expert popularity with a drift that grows as a step holds fewer whole prompts, at most 1/top_k of a step's tokens per expert, EPLB placement of the pool's redundant experts, routing noise); mean and largest over steps"}}}};
  }

// Unit cost (issue 14) over the window: the prefill pool's GPU-hours priced per input token (the
// disaggregated pools split the bill: prefill computes the prompts, decode the outputs), the
// decode pool's per output token, every GPU the pools take per token of either kind; energy =
// board power × busy step time × the pool's GPUs per instance (idle power not counted).
void cost_json(const RunReport& r, nlohmann::json& j) {
  const DeploymentSpec& d = *r.deployment;
  const Summary& s = r.summary;
  const double hours = std::max(0.0, s.end_s - s.warmup_s) / 3600.0, usd = d.gpu.gpu_hour_usd, w = d.gpu.board_power_w;
  const double p_gpus = d.prefill.instances * d.prefill.ep, d_gpus = d.decode.instances * d.decode.ep, all_gpus = required_gpus(d);
  auto per_million = [](double dollars, long long tokens) { return tokens > 0 ? nlohmann::json(r6(dollars / tokens * 1e6)) : nlohmann::json(); };
  auto per_token = [](double joules, long long tokens) { return tokens > 0 ? nlohmann::json(r6(joules / tokens)) : nlohmann::json(); };
  nlohmann::json c = {{"gpu_hour_usd", usd}, {"board_power_w", w}};
  if (usd > 0) {
    c["window_usd"] = r6(all_gpus * usd * hours);
    c["usd_per_million_input_tokens"] = per_million(p_gpus * usd * hours, s.input_tokens);
    c["usd_per_million_output_tokens"] = per_million(d_gpus * usd * hours, s.output_tokens);
    c["usd_per_million_tokens"] = per_million(all_gpus * usd * hours, s.input_tokens + s.output_tokens);
  }
  if (w > 0) {
    c["prefill_energy_j"] = r3(s.prefill_busy_s * d.prefill.ep * w);
    c["decode_energy_j"] = r3(s.decode_busy_s * d.decode.ep * w);
    c["joules_per_input_token"] = per_token(s.prefill_busy_s * d.prefill.ep * w, s.input_tokens);
    c["joules_per_output_token"] = per_token(s.decode_busy_s * d.decode.ep * w, s.output_tokens);
  }
  c["note"] = "over the window: usd_per_million_input_tokens = prefill GPUs (instances x ep) x gpu_hour_usd x hours / input tokens (cached ones "
              "included) x 1e6; _output_tokens the same with the decode GPUs and output tokens; usd_per_million_tokens = every GPU the pools "
              "take (cluster.gpus_used) / all tokens; joules = board_power_w x busy step seconds x GPUs per instance (idle power not "
              "counted); null when no token of that kind; no $ or J figure when the price or power is 0 (unknown)";
  j["cost"] = c;
}

}  // namespace

nlohmann::json unit_cost_ratios(const std::vector<nlohmann::json>& runs, double model_facts_ratio) {
  nlohmann::json out = nlohmann::json::array();
  auto usd_out = [](const nlohmann::json& j) -> const nlohmann::json& { return j["cost"]["usd_per_million_output_tokens"]; };
  // the decode pools' GPU counts: when neither deployment is at capacity, the $ ratio is about this
  auto decode_gpus = [](const nlohmann::json& j) {
    const auto& p = j["decode_pool"];
    return p.contains("ep") && p.contains("instances") ? p["ep"].get<double>() * p["instances"].get<double>() : 0.0;
  };
  for (const auto& v4 : runs)
    for (const auto& k3 : runs) {
      if (v4["model"] != "deepseek-v4-pro" || k3["model"] != "kimi-k3" || v4["hardware"] != k3["hardware"]) continue;
      if (!v4.contains("cost") || !usd_out(v4).is_number() || !usd_out(k3).is_number() || usd_out(k3).get<double>() <= 0) continue;
      out.push_back({{"hardware", v4["hardware"]},
                     {"dsv4_deployment", v4["deployment"]},
                     {"k3_deployment", k3["deployment"]},
                     {"simulated_usd_per_million_output_tokens_ratio", r6(usd_out(v4).get<double>() / usd_out(k3).get<double>())},
                     {"decode_gpu_ratio", r6(decode_gpus(v4) / std::max(1.0, decode_gpus(k3)))},
                     {"article_ratio", 0.41},
                     {"article_basis", "decode bandwidth per token, (49 + 6.1) / (104 + 30.7): active parameters + KV read at 500K context "
                                       "(shared/seed/two-paths-k3-vs-dsv4.txt, 'Unit Inference Cost')"},
                     {"model_facts_ratio", std::isfinite(model_facts_ratio) ? nlohmann::json(r6(model_facts_ratio)) : nlohmann::json()},
                     {"model_facts_basis", "the article's formula with the model files (model-facts.md): published active parameters at 1 B "
                                           "each + the KV of one 500K-token sequence (K3: 27,648 B/token + 449 MB of KDA and conv state, not "
                                           "61.4 KB/token; V4-Pro: ~5.5 KB/token + windows and compressor state, not 12.2 KB/token)"},
                     {"note", "simulated: DeepSeek V4-Pro's $ per million output tokens / Kimi K3's, each from its decode pool's GPU-hours over "
                              "the output tokens it served in the window; a like-for-like comparison only when both deployments serve the same "
                              "workload at their own capacity (servesim capacity): below capacity both serve the same tokens and the ratio is "
                              "about decode_gpu_ratio, the deployments' sizes, not their efficiency"}});
    }
  return out;
}

nlohmann::json summary_json(const RunReport& r) {
  nlohmann::json j;
  header_json(r, j);
  load_json(r, j);
  cache_json(r, j);
  tiers_json(r, j);
  sessions_json(r, j);
  cost_json(r, j);
  j["requests"]["skipped_bad_rows"] = r.skipped_rows;
  return j;
}

}  // namespace servesim
