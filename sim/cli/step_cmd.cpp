// `servesim step`: one batch step's time for a uniform batch and the throughput it implies.
#include "sim/cli/commands.hpp"
#include "sim/cli/common.hpp"

#include "costmodels/factory.hpp"
#include "costmodels/feasibility.hpp"
#include "costmodels/memory.hpp"
#include "costmodels/step_cost.hpp"

#include <cmath>

namespace servesim::cli {


namespace {

/// `servesim step --ops`: every op of one layer of each attention and FFN kind on one GPU (DP rank
/// 0 for attention; the busiest rank for the FFN), priced as the step prices it: with two-batch
/// overlap each micro-batch on its own (decode attention: the sequences alternate between two
/// halves; the FFN: two halves of the tokens), the row the sum over the micro-batches. Then what the
/// step adds beyond those ops, so that the rows add up to the step (rev25: with overlap the rows
/// were priced at the whole batch and summed to 47% of the step): the rest of attention and of the
/// FFN (the attention-TP all-reduces, and with MTP the draft passes), the exposed all-to-all, and
/// the LM head with host time.
void print_step_ops(const StepCostModel& m, const std::vector<SeqWork>& rank, Phase phase, double rank_tokens,
                    double all_tokens, double seqs_eff, const StepTime& t) {
  const ModelSpec& model = m.model();
  const double step_s = t.total_s;
  fmt::print("\n  {:<22}{:<27}{:>7}{:>14}{:>14}{:>9}  {}\n", "layer kind", "op", "layers", "µs per layer", "ms per step", "share", "answered");
  auto row = [&](const std::string& kind, const std::string& op, const std::string& layers, const std::string& per_layer, double per_step_s,
                 const std::string& answered) {
    if (std::fabs(per_step_s) < 1e-12) per_step_s = 0;  // a residual of rounding, not -0.000
    fmt::print("  {:<22}{:<27}{:>7}{:>14}{:>14.3f}{:>8.1f}%  {}\n", kind, op, layers, per_layer, per_step_s * 1e3, 100 * per_step_s / step_s, answered);
  };
  // one row per op: the sum of its latency over the micro-batches' op lists (the same ops in order)
  auto rows = [&](const std::string& kind, int layers, const std::vector<std::vector<Op>>& parts, double factor) {
    double sum = 0;
    for (size_t i = 0; i < parts.front().size(); ++i) {
      double sec = 0, outside = 0;
      Provenance src = static_cast<Provenance>(0);
      for (const auto& ops : parts) {
        if (i >= ops.size()) continue;
        const OpLatency l = m.cost_model().latency(ops[i]);
        sec += factor * l.seconds, outside += factor * l.outside_s();
        if (static_cast<int>(l.source) > static_cast<int>(src)) src = l.source;
      }
      // an op of several kernels of which only some were answered outside the measurements:
      // the share of its time those take
      std::string answered(to_string(src));
      if (src == Provenance::extrapolated && outside < sec * (1 - 1e-9)) answered += fmt::format(" ({:.0f}% of its time)", 100 * outside / sec);
      row(kind, std::string(to_string(parts.front()[i].kind)), std::to_string(layers), fmt::format("{:.1f}", sec * 1e6), layers * sec, answered);
      sum += layers * sec;
    }
    return sum;
  };
  const double seqs = static_cast<double>(rank.size());
  std::vector<std::vector<SeqWork>> halves;
  if (m.splits_attention(phase, seqs)) {
    halves.resize(2);
    for (size_t i = 0; i < rank.size(); ++i) halves[i % 2].push_back(rank[i]);
  } else {
    halves.push_back(rank);
  }
  double attn = 0, ffn = 0;
  for (size_t i = 0; i < model.attention_kinds.size(); ++i) {
    const int n = model.count_attention(static_cast<int>(i));
    if (n == 0) continue;
    std::vector<std::vector<Op>> parts(halves.size());
    for (size_t h = 0; h < halves.size(); ++h) m.attention_ops(static_cast<int>(i), halves[h], phase, parts[h]);
    attn += rows(model.attention_kinds[i].name, n, parts, 1.0);
  }
  const double mb = m.micro_batches(phase, seqs);
  for (size_t i = 0; i < model.ffn_kinds.size(); ++i) {
    const int n = model.count_ffn(static_cast<int>(i));
    if (n == 0) continue;
    std::vector<std::vector<Op>> parts(1);
    // at the step's expected busiest/mean load, as the step itself is priced; mb micro-batches of half the tokens
    m.ffn_ops(static_cast<int>(i), rank_tokens / mb, all_tokens / mb, parts[0], m.expert_load(static_cast<int>(i), all_tokens, seqs_eff, -1));
    ffn += rows(model.ffn_kinds[i].name, n, parts, mb);
  }
  const bool mtp = phase == Phase::decode && m.shape().mtp_draft_tokens > 0;
  const std::string also = mtp ? " + MTP passes" : "";
  row("rest of attention", "TP all-reduce" + also, "", "", t.attention_s - attn, "");
  row("rest of FFN", "TP all-reduce" + also, "", "", t.ffn_s - ffn, "");
  row("all-to-all", "exposed", "", "", t.comm_s, "");
  row("other", "LM head + host", "", "", t.other_s, "");
  fmt::print("  {:<22}{:<27}{:>7}{:>14}{:>14.3f}{:>8.1f}%\n", "step", "", "", "", step_s * 1e3, 100.0);
}

// A batch the deployment could not run is still priced (what-if), with a warning naming the limit
// it passes: KV per GPU, the pool's batch limits, the model's context.
void warn_what_if(const DeploymentSpec& d, const PoolSpec& pool, const StepArgs& a, bool decode, long long context, long long tokens) {
  // (review: `step --seqs-per-rank 300 --context 32768` on K3 printed a throughput no rank reaches)
  const double kv_need = static_cast<double>(a.seqs_per_rank) * kv_bytes(d.model, context + tokens, pool.attn_tp);
  const GpuMemoryPlan mem = plan_gpu_memory(d, pool);
  if (kv_need > mem.kv_budget)
    fmt::print(stderr, "warning: {} sequences of {} tokens need {} of KV per GPU, the {} pool's GPUs hold {} (servesim plan): "
               "no rank of this deployment runs this batch; priced anyway\n",
               a.seqs_per_rank, context + tokens, gb(kv_need), a.phase, gb(mem.kv_budget));
  // a context past the model's limit, which `run` rejects (rev25: priced without a word)
  if (d.model.max_context_tokens > 0 && context + tokens > d.model.max_context_tokens)
    fmt::print(stderr, "warning: {} cached + {} new = {} tokens of context, above {}'s {} (run rejects such requests): priced anyway\n", context, tokens,
               context + tokens, d.model.name, d.model.max_context_tokens);
  if (decode && a.seqs_per_rank > pool.max_running)
    fmt::print(stderr, "warning: {} sequences per rank is above the decode pool's max_running {}: priced anyway\n", a.seqs_per_rank, pool.max_running);
  if (!decode && a.seqs_per_rank * tokens > pool.max_batch_tokens)
    fmt::print(stderr, "warning: {} new tokens per rank is above the prefill pool's max_batch_tokens {}: priced anyway\n", a.seqs_per_rank * tokens,
               pool.max_batch_tokens);
}

}  // namespace

int step(const StepArgs& a) {
  auto s = load_or_report(a.scenario.empty() ? default_scenario() : a.scenario);
  if (!s) return 2;
  const DeploymentSpec* d = &s->deployments.front();
  if (!a.deployment.empty()) {
    d = nullptr;
    for (const auto& x : s->deployments)
      if (x.name == a.deployment) d = &x;
    if (!d) {
      fmt::print(stderr, "error: --deployment {}: no such deployment in {} (it has: {})\n", a.deployment, s->path, deployment_names(*s));
      return 2;
    }
  }
  const bool decode = a.phase == "decode";
  const PoolSpec& pool = decode ? d->decode : d->prefill;
  if (decode && a.tokens > 1) {
    fmt::print(stderr, "error: --tokens {}: a decode step computes 1 new token per sequence (use --phase prefill for chunks)\n", a.tokens);
    return 2;
  }
  const long long tokens = decode ? 1 : (a.tokens < 0 ? pool.chunk_tokens : a.tokens);
  const long long context = a.context < 0 ? (decode ? 2048 : 0) : a.context;
  if (a.seqs_per_rank < 1 || tokens < 1) {
    fmt::print(stderr, "error: --seqs-per-rank and --tokens must be ≥ 1, --context ≥ 0\n");
    return 2;
  }
  if (tokens * a.seqs_per_rank > kMaxTokens) {  // each ≤ 2^40 and 2^20 (args.cpp): the product cannot overflow
    fmt::print(stderr, "error: --tokens {} × --seqs-per-rank {}: a rank's batch must be at most 2^40 tokens\n", tokens, a.seqs_per_rank);
    return 2;
  }
  std::shared_ptr<const CostModel> cost;
  try {
    const std::string cost_model = a.cost_model.empty() ? s->cost_model : a.cost_model;
    if (auto missing = missing_fitted_parameters(cost_model, d->gpu)) throw std::runtime_error(*missing);
    cost = make_cost_model(cost_model, d->gpu);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }
  warn_what_if(*d, pool, a, decode, context, tokens);
  const UniformStep u = uniform_step(*d, cost, decode, a.seqs_per_rank, tokens, context);
  const StepTime& t = u.time;
  const double all_tokens = u.tokens;
  const std::string mtp = decode && pool.mtp_draft_tokens > 0
                              ? fmt::format(" (MTP: {} verified, {:.3f} made per step on average)", u.verified, pool.tokens_per_step())
                              : "";
  fmt::print("{} {} step of one instance (EP{}, attn TP{}, DP{}): {} sequence{} per DP rank, {} new token{} each{}, {} cached\n", d->name,
             a.phase, pool.ep, pool.attn_tp, pool.dp(), a.seqs_per_rank, a.seqs_per_rank == 1 ? "" : "s", tokens,
             tokens == 1 ? "" : "s", mtp, context);
  fmt::print("  step time      {:10.3f} ms  (attention {:.3f}, FFN {:.3f}, exposed communication {:.3f}, other {:.3f})\n", t.total_s * 1e3,
             t.attention_s * 1e3, t.ffn_s * 1e3, t.comm_s * 1e3, t.other_s * 1e3);
  fmt::print("  throughput     {:10.0f} {} tokens/s per node, {:.0f} per GPU (cost model {}, answers {})\n", u.tokens_per_s_per_node(),
             decode ? "output" : "input", all_tokens / t.total_s / pool.ep, cost->name(), std::string(to_string(t.source)));
  fmt::print("  extrapolated     {:8.1f}% of the step time was answered outside the measured range\n",
             t.total_s > 0 ? 100 * t.extrapolated_s / t.total_s : 0.0);
  fmt::print("  between kernels  expert load {:.3f} busiest/mean GPU ({}), host {:.3f} ms ({}), all-to-all {:.3f} ms of which {:.3f} exposed\n",
             t.expert_load,
             pool.expert_imbalance > 0 ? "fixed in the scenario"
                                       : pool.eplb ? fmt::format("expected, EPLB, {} redundant experts", pool.redundant_experts)
                                                    : std::string("expected, experts in id order (no EPLB)"),
             t.host_s * 1e3, pool.cuda_graph ? "CUDA graph" : "eager launches", t.comm_total_s * 1e3, t.comm_s * 1e3);
  const double seqs_eff = u.model.attention_part(u.ranks, decode ? Phase::decode : Phase::prefill).seqs_eff;
  const double rank_computed = static_cast<double>(u.verified * a.seqs_per_rank);  // (with MTP: verified tokens, not made ones)
  if (a.ops) print_step_ops(u.model, u.ranks.front(), decode ? Phase::decode : Phase::prefill, rank_computed, rank_computed * pool.dp(), seqs_eff, t);
  return 0;
}

}  // namespace servesim::cli
