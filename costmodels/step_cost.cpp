#include "costmodels/step_cost.hpp"
#include "costmodels/kernel_families.hpp"

#include "costmodels/memory.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace servesim {
namespace {

constexpr double kAct = 2.0;  // activations are BF16 (bytes per element)

Op make(OpKind k, OpClass c, DType math, double flops, double bytes, double tokens, double seqs, double ctx_sum,
        double ctx_max, double heads) {
  Op o;
  o.kind = k, o.cls = c, o.math = math, o.flops = flops, o.bytes = bytes;
  o.tokens = tokens, o.seqs = seqs, o.ctx_sum = ctx_sum, o.ctx_max = ctx_max, o.heads = heads;
  return o;
}

void set_gemms(Op& o, double m, const std::vector<GemmShape>& g) {
  o.gemm_m = m;
  o.gemms = g.data();
  o.gemm_count = static_cast<int>(g.size());
}

Activation activation_of(const std::string& name) {
  return name.find("situ") != std::string::npos ? Activation::situ : Activation::swiglu;
}

// GEMM shapes of one attention kind's ops on one GPU of an attention-TP group of `t` (model-facts
// §1 tensor shapes). Column-parallel projections split n, row-parallel ones (o_proj, wo_b) split k;
// the low-rank down-projections (q_a, kv_a, wq_a, wkv, f_a, V4 compressors) are replicated on
// every TP rank.
void kda_proj_gemms(const AttentionSpec& a, double t, double D, std::vector<GemmShape>& proj) {
  const DType w = a.proj_dtype;
  auto add = [&](std::vector<GemmShape>& v, double n, double k, double batch = 1) { v.push_back({n, k, batch, w}); };
  const double hd = static_cast<double>(a.heads) * a.head_dim;
  add(proj, (3 + (a.full_rank_output_gate ? 1 : 0)) * hd / t, D);  // q, k, v (, g) fused
  add(proj, a.heads / t, D);                                           // beta (b_proj)
  add(proj, a.gate_rank, D);                                           // decay gate f_a
  add(proj, hd / t, a.gate_rank);                                      // decay gate f_b
  add(proj, D, hd / t);                                                // o_proj
}

void mla_gemms(const AttentionSpec& a, double t, double D, std::vector<GemmShape>& proj, std::vector<GemmShape>& kv_b,
               std::vector<GemmShape>& absorb) {
  const DType w = a.proj_dtype;
  auto add = [&](std::vector<GemmShape>& v, double n, double k, double batch = 1) { v.push_back({n, k, batch, w}); };
  const double qk = a.qk_nope_dim + a.qk_rope_dim, H = a.heads / t;
  if (a.q_lora_rank > 0) {
    add(proj, a.q_lora_rank, D);
    add(proj, H * qk, a.q_lora_rank);
  } else {
    add(proj, H * qk, D);
  }
  add(proj, a.kv_lora_rank + a.qk_rope_dim, D);
  if (a.output_gate) add(proj, H * a.v_head_dim, D);
  add(proj, D, H * a.v_head_dim);
  add(kv_b, H * (a.qk_nope_dim + a.v_head_dim), a.kv_lora_rank);
  absorb.push_back({static_cast<double>(a.kv_lora_rank), static_cast<double>(a.qk_nope_dim), H, DType::bf16});  // W_UK
  absorb.push_back({static_cast<double>(a.v_head_dim), static_cast<double>(a.kv_lora_rank), H, DType::bf16});   // W_UV
}

/// csa / hca / swa projections (with the compressor's and the indexer's).
void v4_proj_gemms(const AttentionSpec& a, double t, double D, std::vector<GemmShape>& proj) {
  const DType w = a.proj_dtype;
  auto add = [&](std::vector<GemmShape>& v, double n, double k, double batch = 1) { v.push_back({n, k, batch, w}); };
  const double hd = a.head_dim, H = a.heads / t;
  add(proj, a.q_lora_rank, D);                                                     // wq_a
  add(proj, H * hd, a.q_lora_rank);                                                // wq_b
  add(proj, hd, D);                                                                // wkv
  add(proj, a.o_lora_rank, static_cast<double>(a.heads) * hd / a.o_groups, a.o_groups / t);  // wo_a (grouped)
  add(proj, D, static_cast<double>(a.o_groups) * a.o_lora_rank / t);               // wo_b
  if (a.compress_ratio > 0) add(proj, 2 * (a.compressor_overlap ? 2 : 1) * hd, D);  // compressor wkv + wgate
  if (a.indexer_heads > 0) {
    add(proj, a.indexer_heads / t * a.indexer_head_dim, a.q_lora_rank);  // indexer wq_b
    add(proj, a.indexer_heads / t, D);                                   // indexer weights_proj
    add(proj, 2 * 2 * a.indexer_head_dim, D);                            // indexer compressor wkv + wgate
  }
}

/// One attention kind's batch on one GPU: the sequences and their totals.
struct AttnBatch {
  const AttentionSpec& a;
  const std::vector<SeqWork>& seqs;
  double t, H;  // attention TP, heads on this GPU
  double T = 0, S = 0, ctx_sum = 0, ctx_max = 0;
  bool decode = false;
};

void kda_ops(const AttnBatch& c, std::vector<Op>& out) {
  const AttentionSpec& a = c.a;
  const double T = c.T, S = c.S, H = c.H;
  const bool decode = c.decode;
  // §2.1: prefill ≈ (6D²+8CD+12C²) FLOP per token per head, ≈10·N·H·D B + state in/out;
  // decode ≈ 7D² FLOP per token per head, state read+write 2·H·D²·s B per sequence.
  const double D = a.head_dim, C = a.kda_chunk_tokens > 0 ? a.kda_chunk_tokens : 64;
  const double sbytes = bytes_per_element(a.state_dtype);
  const double conv_state = 3 * H * D * (a.conv_kernel - 1) * kAct;
  out.push_back(make(OpKind::kda_conv_norm, OpClass::elementwise, DType::bf16, T * H * D * (6.0 * a.conv_kernel + 10),
                     T * H * D * 18 + 2 * S * conv_state, T, S, c.ctx_sum, c.ctx_max, H));
  out.back().decode = decode, out.back().head_dim = D;
  if (decode)
    out.push_back(make(OpKind::kda_decode, OpClass::kda_decode, DType::fp32, S * H * 7 * D * D,
                       S * 2 * H * D * D * sbytes + T * H * D * 5 * kAct, T, S, c.ctx_sum, c.ctx_max, H));
  else
    out.push_back(make(OpKind::kda_prefill, OpClass::kda_prefill, DType::bf16, T * H * (6 * D * D + 8 * C * D + 12 * C * C),
                       10 * T * H * D + S * 2 * H * D * D * sbytes, T, S, c.ctx_sum, c.ctx_max, H));
  out.back().decode = decode, out.back().head_dim = D, out.back().state_bytes = sbytes;
}

void mla_ops(const AttnBatch& c, const std::vector<GemmShape>& absorb, const std::vector<GemmShape>& kv_b, std::vector<Op>& out) {
  const AttentionSpec& a = c.a;
  const double T = c.T, S = c.S, H = c.H, ctx_sum = c.ctx_sum, ctx_max = c.ctx_max;
  const double lat = a.kv_lora_rank + a.qk_rope_dim;  // 576
  const double kvb = mla_latent_bytes(a) / lat;  // bytes per latent value (FP8: 656 / 576)
  const double qk = a.qk_nope_dim + a.qk_rope_dim, v = a.v_head_dim;
  const double kv_b_w = a.kv_lora_rank * H * (a.qk_nope_dim + v) * bytes_per_element(a.proj_dtype);
  if (c.decode) {
    // §2.2 decode: absorb q (2·H·nope·kv_lora) and o (2·H·kv_lora·v) per token; attend
    // 2·H·L·(576+512) FLOP per query token (a sequence verifying k + 1 tokens under MTP attends
    // k + 1 queries over its context: Σ N·L); read L·576·s B of latent per sequence once
    // (replicated per TP rank: the sequence's query tokens share the read, as FlashMLA packs
    // s_q × h_q query rows per KV head).
    double attend = 0;  // Σ N·L over the sequences: (query token, cached key) pairs
    for (const auto& s : c.seqs) attend += static_cast<double>(s.new_tokens) * static_cast<double>(s.context_before + s.new_tokens);
    const double flops = 2 * H * attend * (lat + a.kv_lora_rank) + T * 2 * H * a.kv_lora_rank * (a.qk_nope_dim + v);
    const double bytes = ctx_sum * lat * kvb + kv_b_w + T * H * (lat + a.kv_lora_rank) * kAct;
    out.push_back(make(OpKind::mla_decode, OpClass::attention_decode, DType::bf16, flops, bytes, T, S, ctx_sum, ctx_max, H));
    set_gemms(out.back(), T, absorb);
    out.back().decode = true, out.back().kv_elem_bytes = kvb, out.back().head_dim = lat;
  } else {
    // §2.2 prefill (MHA mode): up-project P+N latents through kv_b, then causal attention
    // 2·H·N·(P+N/2)·(qk+v) FLOP.
    double pairs = 0;
    for (const auto& s : c.seqs) pairs += s.new_tokens * (s.context_before + (s.new_tokens + 1) / 2.0);
    const double flops = 2 * ctx_sum * a.kv_lora_rank * H * (a.qk_nope_dim + v) + 2 * H * pairs * (qk + v);
    const double bytes = ctx_sum * (lat * kvb + H * (qk + v) * kAct * 2) + kv_b_w + T * H * (qk + v) * kAct;
    out.push_back(make(OpKind::mla_prefill, OpClass::attention_prefill, DType::bf16, flops, bytes, T, S, ctx_sum, ctx_max, H));
    set_gemms(out.back(), ctx_sum, kv_b);
    out.back().pairs = pairs;
  }
}

/// The csa lightning indexer over `idx_pairs` (query, compressed key) pairs.
void csa_indexer_op(const AttnBatch& c, double idx_pairs, std::vector<Op>& out) {
  const AttentionSpec& a = c.a;
  // §2.3 c: logits 2·ih·id per (query, compressed key); FP8 keys 132 B; logits written and
  // re-read by top-k (4 B each).
  const double ih = a.indexer_heads / c.t;
  double key_bytes = 0;
  for (const auto& s : c.seqs) key_bytes += std::floor((s.context_before + s.new_tokens) / 4.0) * a.indexer_entry_bytes;
  out.push_back(make(OpKind::csa_indexer, OpClass::indexer, DType::fp8, 2 * ih * a.indexer_head_dim * idx_pairs,
                     key_bytes + idx_pairs * 4 * 2, c.T, c.S, c.ctx_sum, c.ctx_max, ih));
  Op& o = out.back();
  o.decode = c.decode, o.keys = idx_pairs, o.top_k = a.indexer_topk, o.head_dim = a.indexer_head_dim, o.compress_ratio = a.compress_ratio;
}

/// Σ_{L=0}^{n} min(w, L), for n ≥ −1 (0 when n < 1).
double sum_min_upto(double w, double n) {
  if (n < 1) return 0;
  return n <= w ? n * (n + 1) / 2 : w * (w + 1) / 2 + (n - w) * w;
}
/// Σ_{L=0}^{n} floor(L / r), for n ≥ −1, r ≥ 1: floor(L/r) = j on r consecutive L, so with m = n + 1
/// values, q = floor(m / r) whole runs (0..q−1) and m − q·r values of q.
double sum_floor_upto(double r, double n) {
  if (n < 0) return 0;
  const double m = n + 1, q = std::floor(m / r);
  return r * q * (q - 1) / 2 + (m - q * r) * q;
}
/// Σ_{L=0}^{n} min(k, floor(L / r)): floor(L/r) reaches k at L = k·r.
double sum_capped_floor_upto(double r, double k, double n) {
  const double edge = k * r - 1;
  return n <= edge ? sum_floor_upto(r, n) : sum_floor_upto(r, edge) + (n - edge) * k;
}

/// csa / hca / swa: the csa indexer (csa only) and the attention core.
void v4_attention_ops(const AttnBatch& c, std::vector<Op>& out) {
  const AttentionSpec& a = c.a;
  const double T = c.T, H = c.H;
  const bool decode = c.decode;
  const double hd = a.head_dim, w = a.window_tokens, r = a.compress_ratio, e = a.kv_entry_bytes;
  // keys attended by one query at context length L (§2.3 d, §2.4)
  const double ratio = a.op == AttentionOp::swa ? 0 : r, topk = a.op == AttentionOp::csa ? a.indexer_topk : 0;
  auto keys = [&](double L) { return v4_rows_per_query(L, w, ratio, topk); };
  // Σ_{L=0}^{n} keys(L), closed form: the query at position i of a prefill chunk after P cached
  // tokens attends keys(P + i + 1), so the chunk's rows are keys_upto(P + N) − keys_upto(P), the
  // kernel tables' rows_total exactly (e.g. V4-Pro CSA, chunk 4,096 at prefix 0: 2,612,288)
  auto keys_upto = [&](double n) {
    const double win = sum_min_upto(w, n);
    if (a.op == AttentionOp::swa) return win;
    return (a.op == AttentionOp::csa ? sum_capped_floor_upto(r, a.indexer_topk, n) : sum_floor_upto(r, n)) + win;
  };
  double attn_keys = 0, stored = 0, idx_pairs = 0, keys_last = 0;
  for (const auto& s : c.seqs) {
    const double P = static_cast<double>(s.context_before), N = static_cast<double>(s.new_tokens);
    attn_keys += decode ? N * keys(P + N) : keys_upto(P + N) - keys_upto(P);
    if (N > 0) keys_last += N * keys(P + N);
    stored += (r > 0 ? std::floor((P + N) / r) : 0) + std::min(w, P + N);
    idx_pairs += N * (decode ? std::floor((P + N) / 4) : (P + N / 2) / 4);
  }
  if (a.op == AttentionOp::csa) csa_indexer_op(c, idx_pairs, out);
  // §2.3 d / §2.4: 2·H·n·(512+512) FLOP per query; n·584 B gathered (decode) or the stored rows
  // read once (prefill).
  const double flops = 2 * H * attn_keys * (hd + hd);
  const double bytes = (decode ? attn_keys : stored) * e + T * H * hd * kAct * 2;
  const OpKind k = a.op == AttentionOp::csa ? OpKind::csa_attn : a.op == AttentionOp::hca ? OpKind::hca_attn : OpKind::swa_attn;
  const OpClass cls = a.op == AttentionOp::csa ? OpClass::sparse_attention : decode ? OpClass::attention_decode : OpClass::attention_prefill;
  out.push_back(make(k, cls, DType::bf16, flops, bytes, T, c.S, c.ctx_sum, c.ctx_max, H));
  out.back().decode = decode, out.back().keys = attn_keys, out.back().keys_last = T > 0 ? keys_last / T : 0, out.back().head_dim = hd;
  out.back().compress_ratio = r;
}

}  // namespace

StepCostModel::StepCostModel(const ModelSpec& model, std::shared_ptr<const CostModel> cost, FabricParams fabric,
                             InstanceShape shape, double step_overhead_s)
    : model_(model), cost_(std::move(cost)), fabric_(fabric), shape_(shape), step_overhead_s_(step_overhead_s) {
  if (shape_.ep < 1 || shape_.attn_tp < 1 || shape_.ep % shape_.attn_tp != 0)
    throw std::invalid_argument("instance shape: ep (" + std::to_string(shape_.ep) + ") must be a multiple of attn_tp (" +
                                std::to_string(shape_.attn_tp) + ")");
  std::map<std::pair<int, int>, int> counts;
  for (const auto& l : model_.layers) ++counts[{l.attention, l.ffn}];
  for (const auto& [k, n] : counts) pairs_.push_back({k.first, k.second, n});
  for (const auto& a : model_.attention_kinds) {
    double p = attention_projection_params(a, model_.hidden);
    if (a.op == AttentionOp::mla)  // kv_b is applied per cached token (prefill) or absorbed (decode): costed there
      p -= static_cast<double>(a.kv_lora_rank) * a.heads * (a.qk_nope_dim + a.v_head_dim);
    attn_proj_params_.push_back(p);
    attn_rep_params_.push_back(attention_replicated_params(a, model_.hidden));
  }
  // GEMM shapes of every op on one GPU of an attention-TP group (model-facts §1 tensor shapes).
  const double t = shape_.attn_tp, D = model_.hidden;
  for (const auto& a : model_.attention_kinds) {
    KindGemms g;
    switch (a.op) {
      case AttentionOp::kda: kda_proj_gemms(a, t, D, g.proj); break;
      case AttentionOp::mla: mla_gemms(a, t, D, g.proj, g.kv_b, g.absorb); break;
      case AttentionOp::csa:
      case AttentionOp::hca:
      case AttentionOp::swa: v4_proj_gemms(a, t, D, g.proj); break;
    }
    attn_gemms_.push_back(std::move(g));
  }
  for (const auto& f : model_.ffn_kinds) {
    FfnGemms g;
    if (f.op == FfnOp::dense) {
      g.dense = {{2 * f.intermediate / t, D, 1, f.dtype}, {D, f.intermediate / t, 1, f.dtype}};
    } else {
      if (f.shared_experts > 0)
        g.shared = {{2 * f.shared_intermediate / t, D, 1, f.shared_dtype}, {D, f.shared_intermediate / t, 1, f.shared_dtype}};
      if (f.latent_dim > 0)  // on the tokens this GPU routes (1/attn_tp of the rank's), full weights
        g.latent = {{static_cast<double>(f.latent_dim), D, 1, f.latent_dtype}, {D, static_cast<double>(f.latent_dim), 1, f.latent_dtype}};
      const double d = f.latent_dim > 0 ? f.latent_dim : D;
      g.experts = {{2.0 * f.expert_intermediate, d, 1, f.expert_dtype}, {d, static_cast<double>(f.expert_intermediate), 1, f.expert_dtype}};
    }
    ffn_gemms_.push_back(std::move(g));
  }
  lm_head_gemm_ = {model_.vocab / t, D, 1, model_.embedding_dtype};
  if (model_.mtp_layers > 0 && !model_.layers.empty())  // dtype as memory.cpp counts eh_proj
    mtp_proj_gemm_ = {D, 2 * D, 1, model_.attention_kinds[static_cast<size_t>(model_.layers.back().attention)].proj_dtype};
  // routed-expert loads per MoE kind (costmodels/expert_load.hpp), unless fixed or balanced
  for (const auto& f : model_.ffn_kinds)
    loads_.push_back(shape_.expert_skew && shape_.expert_imbalance == 0 && f.op == FfnOp::moe
                         ? std::make_unique<ExpertLoad>(f, shape_.ep, shape_.redundant_experts, shape_.eplb || shape_.redundant_experts > 0)
                         : nullptr);
  if (const FfnSpec* m = model_.main_moe()) main_moe_ = static_cast<int>(m - model_.ffn_kinds.data());
}

void StepCostModel::attention_ops(int ai, const std::vector<SeqWork>& seqs, Phase phase, std::vector<Op>& out) const {
  const AttentionSpec& a = model_.attention_kinds[ai];
  const double t = shape_.attn_tp;
  AttnBatch c{a, seqs, t, a.heads / t};  // heads on this GPU
  for (const auto& s : seqs) {
    c.T += s.new_tokens;
    c.S += 1;
    const double L = static_cast<double>(s.context_before + s.new_tokens);
    c.ctx_sum += L;
    c.ctx_max = std::max(c.ctx_max, L);
  }
  if (c.S == 0) return;
  // KDA's recurrent state has a fixed size: none of its ops depends on the context, and they
  // carry none, so that their price is a function of (tokens, sequences) (StepCostModel::KdaKey)
  if (a.op == AttentionOp::kda) c.ctx_sum = 0, c.ctx_max = 0;
  const double T = c.T, S = c.S, H = c.H, ctx_sum = c.ctx_sum, ctx_max = c.ctx_max;
  const double hidden = model_.hidden;
  const bool decode = c.decode = phase == Phase::decode;

  // Projections (model-facts §2.1-2.4 "Projections"): 2 FLOP per weight per token; weights read once.
  {
    // the TP-split projections' 1/t share and the replicated down-projections whole (each rank
    // runs them over all T tokens)
    const double p = (attn_proj_params_[ai] - attn_rep_params_[ai]) / t + attn_rep_params_[ai];
    out.push_back(make(OpKind::attn_proj, OpClass::gemm, a.proj_dtype, 2 * T * p,
                       p * bytes_per_element(a.proj_dtype) + T * (hidden + H * std::max(a.head_dim, a.v_head_dim) * 4) * kAct,
                       T, S, ctx_sum, ctx_max, H));
    set_gemms(out.back(), T, attn_gemms_[ai].proj);
    out.back().decode = decode;
  }
  switch (a.op) {
    case AttentionOp::kda: kda_ops(c, out); break;
    case AttentionOp::mla: mla_ops(c, attn_gemms_[ai].absorb, attn_gemms_[ai].kv_b, out); break;
    case AttentionOp::csa:
    case AttentionOp::hca:
    case AttentionOp::swa: v4_attention_ops(c, out); break;
  }
  // the layer's two RMSNorms with their residual adds (every decoder layer has them; memory-bound:
  // read x and the residual, write both, per norm: 8·D bytes per token)
  out.push_back(make(OpKind::layer_norm, OpClass::elementwise, DType::bf16, T * 2 * 4 * hidden, T * 2 * 4 * hidden * kAct, T, S, ctx_sum, ctx_max, 0));
  out.back().decode = decode, out.back().hidden = hidden;
  if (model_.residual_streams > 1) {
    // §2.4 mHC: per sublayer two [S·D → (2+S)·S] mixes, Sinkhorn on S×S, and a read+write of the
    // S-stream residual (memory-bound). Two sublayers per layer; charged with the attention sublayer.
    const double s = model_.residual_streams;
    out.push_back(make(OpKind::mhc_mix, OpClass::elementwise, DType::fp32, T * 2 * 2 * s * hidden * (2 + s) * s,
                       T * 2 * (2 * s * hidden * kAct + hidden * kAct), T, S, ctx_sum, ctx_max, 0));
    out.back().decode = decode, out.back().hidden = hidden;
  }
}

void StepCostModel::ffn_ops(int fi, double Tr, double Tt, std::vector<Op>& out, double load) const {
  const FfnSpec& f = model_.ffn_kinds[fi];
  const double t = shape_.attn_tp, hidden = model_.hidden;
  if (Tt <= 0) return;
  if (f.op == FfnOp::dense) {
    const double p = 3 * hidden * f.intermediate / t;
    out.push_back(make(OpKind::dense_ffn, OpClass::gemm, f.dtype, 2 * Tr * p, p * bytes_per_element(f.dtype) + Tr * (2 * hidden + 3 * f.intermediate / t) * kAct,
                       Tr, 0, 0, 0, 0));
    set_gemms(out.back(), Tr, ffn_gemms_[fi].dense);
    out.back().act = activation_of(f.activation), out.back().width = f.intermediate / t;
    return;
  }
  const double E = f.experts, k = f.top_k, N = shape_.ep;
  const double d = f.latent_dim > 0 ? f.latent_dim : hidden;
  const double g_tok = Tr / t;  // tokens this GPU routes and dispatches
  if (f.gate != GateKind::hash) {
    out.push_back(make(OpKind::moe_router, OpClass::gemm, DType::bf16, 2 * g_tok * E * hidden,
                       E * hidden * bytes_per_element(f.gate_dtype) + g_tok * (hidden * kAct + E * 4), g_tok, 0, 0, 0, 0));
    out.back().experts = E, out.back().top_k = k, out.back().hidden = hidden;
  }
  if (f.shared_experts > 0) {
    const double p = 3 * hidden * f.shared_intermediate / t;
    out.push_back(make(OpKind::moe_shared, OpClass::gemm, f.shared_dtype, 2 * Tr * p,
                       p * bytes_per_element(f.shared_dtype) + Tr * (2 * hidden + 3 * f.shared_intermediate / t) * kAct, Tr, 0, 0, 0, 0));
    set_gemms(out.back(), Tr, ffn_gemms_[fi].shared);
    out.back().act = activation_of(f.activation), out.back().width = f.shared_intermediate / t;
  }
  if (f.latent_dim > 0) {
    // full weights (read whole on every rank) over the Tr / t tokens this GPU routes
    const double w = 2 * hidden * f.latent_dim;
    out.push_back(make(OpKind::moe_latent_proj, OpClass::gemm, f.latent_dtype, 2 * Tr / t * w,
                       w * bytes_per_element(f.latent_dtype) + Tr / t * 2 * (hidden + f.latent_dim) * kAct, Tr, 0, 0, 0, 0));
    set_gemms(out.back(), g_tok, ffn_gemms_[fi].latent);
    out.back().width = f.latent_dim, out.back().hidden = hidden;
  }
  // Routed experts on the busiest GPU (§2.5): M = T·k/N·load expert-tokens; the experts it
  // holds that at least one of the T tokens touched are read once (uniform routing:
  // 1 − (1 − k/E)^T of them).
  const double M = Tt * k / N * load;
  const double local = std::ceil((E + shape_.redundant_experts) / N);
  const double touched = local * (1 - std::pow(1 - k / E, Tt));
  const double ep = expert_params(f, model_.hidden);
  out.push_back(make(OpKind::moe_experts, OpClass::grouped_gemm, f.expert_dtype, 2 * M * ep,
                     touched * ep * bytes_per_element(f.expert_dtype) + M * (2 * d + 3 * f.expert_intermediate) * kAct, M, 0, 0, 0, local));
  set_gemms(out.back(), M, ffn_gemms_[fi].experts);
  out.back().experts = touched, out.back().act = activation_of(f.activation), out.back().width = f.expert_intermediate;
  // permute reads each of the M/k routed tokens once and writes its k copies; combine reads the M
  // expert outputs and writes M/k tokens (the moe_permute / moe_combine byte formulas, kernels/moe)
  out.push_back(make(OpKind::moe_permute, OpClass::elementwise, DType::bf16, 2 * M * d, 2 * (M + M / k) * d * kAct, M, 0, 0, 0, 0));
  out.back().top_k = k, out.back().hidden = d;
}

AllToAllLoad StepCostModel::moe_alltoall_load(int fi, double Tr, double Tt, DType message, double load) const {
  const FfnSpec& f = model_.ffn_kinds[fi];
  const int N = shape_.ep;
  if (f.op != FfnOp::moe || N <= 1 || Tt <= 0) return {};
  const double d = f.latent_dim > 0 ? f.latent_dim : model_.hidden;
  const int local = std::min(N, fabric_.gpus_per_node);
  const int nodes = (N + fabric_.gpus_per_node - 1) / fabric_.gpus_per_node;
  // messages per token leaving the GPU, split into NVLink and NIC traffic
  double intra_msgs, inter_msgs;
  if (shape_.dispatch == EpDispatch::direct) {
    // one message per routed expert; experts spread evenly over the group
    intra_msgs = f.top_k * (local - 1.0) / N;
    inter_msgs = f.top_k * static_cast<double>(N - local) / N;
  } else {
    // one RDMA copy per other node holding any of the token's experts, then NVLink forwarding to
    // each distinct destination GPU (expected counts, group-limited routing where the model has
    // it; by symmetry the sender's own GPU / node is one of them with probability 1/N / 1/nodes)
    const double gpus = expected_parts_reached(f.experts, f.top_k, f.expert_groups, f.topk_groups, N) * (N - 1.0) / N;
    inter_msgs = nodes > 1 ? expected_parts_reached(f.experts, f.top_k, f.expert_groups, f.topk_groups, nodes) * (nodes - 1.0) / nodes : 0.0;
    intra_msgs = gpus;
  }
  // busiest sender dispatches its Tr/t tokens; busiest receiver gets (Tt/N)·load tokens' worth
  const double tokens = std::max(Tr / shape_.attn_tp, Tt / N * load);
  const double b = tokens * d * ep_message_bytes_per_value(message);
  return {intra_msgs * b, inter_msgs * b, inter_msgs * b * local};
}

double StepCostModel::moe_comm_s(int fi, double Tr, double Tt, double load) const {
  const FfnSpec& f = model_.ffn_kinds[fi];
  if (f.op != FfnOp::moe || shape_.ep <= 1 || Tt <= 0) return 0.0;
  double total = 0;
  for (DType m : {f.dispatch_dtype, f.combine_dtype}) total += alltoall_time(fabric_, moe_alltoall_load(fi, Tr, Tt, m, load));
  return total;
}


}  // namespace servesim
