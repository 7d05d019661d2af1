#include "costmodels/memory.hpp"

#include <cmath>
#include <stdexcept>

namespace servesim {

double mla_latent_bytes(const AttentionSpec& a) {
  if (a.kv_dtype == DType::fp8) return a.kv_lora_rank + 4.0 * std::ceil(a.kv_lora_rank / 128.0) + 2.0 * a.qk_rope_dim;
  return (a.kv_lora_rank + a.qk_rope_dim) * bytes_per_element(a.kv_dtype);
}
namespace {

// Weight elements of one attention layer of kind `a` (model-facts §1 tensor shapes).
struct AttnParams {
  double proj = 0;   // projections in proj_dtype
  // the part of proj every attention-TP rank holds whole: the low-rank down-projections that
  // step_cost.cpp prices at full width on each rank (kda_proj_gemms, mla_gemms, v4_proj_gemms)
  double replicated = 0;
  double fp32 = 0;   // small fp32 tensors (conv weights, dt_bias, A_log, attention sinks)
  double norm = 0;   // norm weights (bf16)
};

AttnParams attention_params(const AttentionSpec& a, int hidden) {
  AttnParams p;
  const double D = hidden;
  switch (a.op) {
    case AttentionOp::kda: {
      const double hd = static_cast<double>(a.heads) * a.head_dim;
      p.proj = 4 * D * hd                                  // q, k, v, o
               + (a.full_rank_output_gate ? D * hd : 0)    // g (sigmoid-gated RMSNorm input)
               + D * a.gate_rank + a.gate_rank * hd        // decay gate f_a, f_b
               + D * a.heads;                              // beta (b_proj)
      p.replicated = D * a.gate_rank;                      // f_a
      p.fp32 = 3 * hd * a.conv_kernel + hd + a.head_dim;   // conv q/k/v, dt_bias, A_log [128]
      p.norm = a.head_dim + D;                             // o_norm, input norm
      break;
    }
    case AttentionOp::mla: {
      const double qk = a.qk_nope_dim + a.qk_rope_dim;
      const double q = a.q_lora_rank > 0 ? D * a.q_lora_rank + a.q_lora_rank * a.heads * qk : D * a.heads * qk;
      p.proj = q + D * (a.kv_lora_rank + a.qk_rope_dim)                   // kv_a (with MQA rope part)
               + static_cast<double>(a.kv_lora_rank) * a.heads * (a.qk_nope_dim + a.v_head_dim)  // kv_b
               + static_cast<double>(a.heads) * a.v_head_dim * D         // o_proj
               + (a.output_gate ? D * a.heads * a.v_head_dim : 0);       // g_proj
      p.norm = a.q_lora_rank + a.kv_lora_rank + D;
      p.replicated = (a.q_lora_rank > 0 ? D * a.q_lora_rank : 0) + D * (a.kv_lora_rank + a.qk_rope_dim);  // q_a, kv_a
      break;
    }
    case AttentionOp::csa:
    case AttentionOp::hca:
    case AttentionOp::swa: {
      const double hd = a.head_dim;
      p.proj = D * a.q_lora_rank + static_cast<double>(a.q_lora_rank) * a.heads * hd  // wq_a, wq_b
               + D * hd                                                             // wkv
               + static_cast<double>(a.heads) * hd * a.o_lora_rank                  // wo_a (G groups)
               + static_cast<double>(a.o_groups) * a.o_lora_rank * D;               // wo_b
      p.replicated = D * a.q_lora_rank + D * hd;                                   // wq_a, wkv
      if (a.compress_ratio > 0) {
        const double coff = a.compressor_overlap ? 2 : 1;
        p.proj += 2 * D * coff * hd;                    // compressor wkv + wgate
        p.replicated += 2 * D * coff * hd;
        p.fp32 += a.compress_ratio * coff * hd;         // positional bias ape
      }
      if (a.indexer_heads > 0) {
        const double id = a.indexer_head_dim;
        p.proj += static_cast<double>(a.q_lora_rank) * a.indexer_heads * id  // indexer wq_b
                  + D * a.indexer_heads                                      // weights_proj
                  + 2 * D * 2 * id;                                          // indexer compressor (overlap)
        p.replicated += 2 * D * 2 * id;
        p.norm += id;
      }
      p.fp32 += a.heads;  // attention sink
      p.norm += a.q_lora_rank + hd + D;
      break;
    }
  }
  return p;
}

constexpr double kBf16 = 2.0;

}  // namespace

double expert_params(const FfnSpec& f, int hidden) {
  const double d = f.latent_dim > 0 ? f.latent_dim : hidden;
  return 3.0 * d * f.expert_intermediate;
}

double attention_projection_params(const AttentionSpec& a, int hidden) { return attention_params(a, hidden).proj; }
double attention_replicated_params(const AttentionSpec& a, int hidden) { return attention_params(a, hidden).replicated; }

double ParamBreakdown::total_params() const {
  double s = 0;
  for (const auto& g : groups) s += g.params;
  return s;
}
double ParamBreakdown::expert_bytes() const {
  double s = 0;
  for (const auto& g : groups) s += g.expert ? g.bytes : 0;
  return s;
}
double ParamBreakdown::non_expert_bytes() const {
  double s = 0;
  for (const auto& g : groups) s += g.expert ? 0 : g.bytes;
  return s;
}

namespace {

// The model's tensor groups as count_params fills them, layer by layer.
struct ParamCounter {
  const ModelSpec& m;
  ParamGroup attn{"attention"}, small{"norms_and_small_fp32"}, dense{"dense_ffn"}, routed{"routed_experts", 0, 0, true},
      shared{"shared_experts"}, latent{"latent_moe_projections"}, router{"routers"}, emb{"embeddings_and_lm_head"},
      mhc{"mhc_mixing"};
  double replicated = 0;  // bytes every attention-TP rank holds whole (ParamBreakdown::replicated_bytes)

  static void add(ParamGroup& g, double n, DType t) { g.params += n, g.bytes += n * bytes_per_element(t); }

  // One layer's parameters into the groups (or, for an MTP layer, into mtp's extra counts);
  // returns its active parameters.
  double layer(const LayerSpec& l, ParamBreakdown* mtp) {
    const AttentionSpec& a = m.attention_kinds[l.attention];
    const FfnSpec& f = m.ffn_kinds[l.ffn];
    const AttnParams ap = attention_params(a, m.hidden);
    const double D = m.hidden;
    double act = ap.proj + ap.fp32 + ap.norm;
    double exp_bytes = 0, nonexp_bytes = 0, rep_bytes = 0;
    auto put = [&](ParamGroup& g, double n, DType t) {
      if (mtp) {
        (g.expert ? exp_bytes : nonexp_bytes) += n * bytes_per_element(t);
        mtp->mtp_params += n;
      } else {
        add(g, n, t);
      }
    };
    // tensors every attention-TP rank holds whole (as step_cost.cpp prices them): the attention's
    // down-projections, norms, LatentMoE projections, routers, mHC mixing
    auto whole = [&](double n, DType t) { rep_bytes += n * bytes_per_element(t); };
    put(attn, ap.proj, a.proj_dtype);
    whole(ap.replicated, a.proj_dtype);
    put(small, ap.fp32, DType::fp32);
    put(small, ap.norm + D, DType::bf16);  // + post-attention norm
    whole(ap.norm + D, DType::bf16);
    if (f.op == FfnOp::dense) {
      put(dense, 3 * D * f.intermediate, f.dtype);
      act += 3 * D * f.intermediate;
    } else {
      const double e = expert_params(f, m.hidden);
      put(routed, e * f.experts, f.expert_dtype);
      act += e * f.top_k;
      if (f.shared_experts > 0) {
        put(shared, 3 * D * f.shared_intermediate, f.shared_dtype);
        act += 3 * D * f.shared_intermediate;
      }
      if (f.latent_dim > 0) {
        put(latent, 2 * D * f.latent_dim + f.latent_dim, f.latent_dtype);
        whole(2 * D * f.latent_dim + f.latent_dim, f.latent_dtype);
        act += 2 * D * f.latent_dim + f.latent_dim;
      }
      if (f.gate != GateKind::hash) {
        put(router, f.experts * D + f.experts, f.gate_dtype);
        whole(f.experts * D + f.experts, f.gate_dtype);
        act += f.experts * D;
      }
    }
    if (m.residual_streams > 1) {
      // mHC: per sublayer a [S*D -> (2+S)*S] mixing projection (model-facts §1.2 mHC)
      const double s = m.residual_streams;
      const double n = 2 * (s * D * (2 + s) * s + (2 + s) * s);
      put(mhc, n, DType::fp32);
      whole(n, DType::fp32);
      act += n;
    }
    if (mtp) {
      mtp->mtp_expert_bytes += exp_bytes, mtp->mtp_other_bytes += nonexp_bytes, mtp->mtp_replicated_bytes += rep_bytes;
    } else {
      replicated += rep_bytes;
    }
    return act;
  }
};

}  // namespace

ParamBreakdown count_params(const ModelSpec& m) {
  ParamCounter c{m};
  ParamBreakdown pb;
  const double D = m.hidden;
  double active = 0;
  for (const auto& l : m.layers) active += c.layer(l, nullptr);
  // embeddings (the input lookup touches one row per token: not counted as active) and lm_head
  const double ev = static_cast<double>(m.vocab) * D;
  ParamCounter::add(c.emb, m.tied_embeddings ? ev : 2 * ev, m.embedding_dtype);
  ParamCounter::add(c.small, D, DType::bf16);  // final norm
  c.replicated += D * kBf16;
  active += ev;  // lm_head
  // MTP: one extra decoder layer of the last layer's kinds plus its projection (2D -> D) and norms
  for (int i = 0; i < m.mtp_layers && !m.layers.empty(); ++i) {
    c.layer(m.layers.back(), &pb);
    pb.mtp_params += 2 * D * D + 3 * D;
    const double eh_norms = (2 * D * D) * bytes_per_element(m.attention_kinds[m.layers.back().attention].proj_dtype) + 3 * D * kBf16;
    pb.mtp_other_bytes += eh_norms;
    pb.mtp_replicated_bytes += eh_norms;  // eh_proj is a plain (replicated) linear in SGLang's NextN layer
  }
  for (ParamGroup* g : {&c.attn, &c.routed, &c.shared, &c.latent, &c.dense, &c.router, &c.mhc, &c.emb, &c.small})
    if (g->params > 0) pb.groups.push_back(*g);
  pb.active_params = active;
  pb.replicated_bytes = c.replicated;
  return pb;
}

WeightsPerGpu weights_per_gpu(const ModelSpec& m, int ep, int attn_tp, int redundant_experts) {
  if (ep < 1 || attn_tp < 1) throw std::invalid_argument("weights_per_gpu: ep and attn_tp must be >= 1");
  const ParamBreakdown pb = count_params(m);
  WeightsPerGpu w;
  // routed experts: per MoE layer (experts + redundant) / ep experts per GPU
  for (const auto& l : m.layers) {
    const FfnSpec& f = m.ffn_kinds[l.ffn];
    if (f.op != FfnOp::moe) continue;
    const double per_gpu = std::ceil(static_cast<double>(f.experts + redundant_experts) / ep);
    w.expert_bytes += per_gpu * expert_params(f, m.hidden) * bytes_per_element(f.expert_dtype);
  }
  if (m.mtp_layers > 0) {
    const FfnSpec& f = m.ffn_kinds[m.layers.back().ffn];
    const double frac = f.op == FfnOp::moe ? std::ceil(static_cast<double>(f.experts + redundant_experts) / ep) / f.experts : 1.0;
    w.expert_bytes += pb.mtp_expert_bytes * frac;
  }
  const double whole = pb.replicated_bytes + pb.mtp_replicated_bytes;
  w.replicated_bytes = whole;
  w.non_expert_bytes = (pb.non_expert_bytes() + pb.mtp_other_bytes - whole) / attn_tp + whole;
  return w;
}

namespace {

// KV bytes of one layer of kind a: {per token (average), fixed per sequence} on one GPU, TP 1.
// with_note = false skips the kind's name and the wording (the engine asks per request and per
// transfer: building strings there cost more than the arithmetic).
KvLayerRow kv_layer(const AttentionSpec& a, int hidden, bool with_note = true) {
  KvLayerRow r;
  if (with_note) r.kind = a.name;
  switch (a.op) {
    case AttentionOp::kda: {
      const double hd = static_cast<double>(a.heads) * a.head_dim;
      const double state = hd * a.head_dim * bytes_per_element(a.state_dtype);
      const double conv = 3 * hd * (a.conv_kernel - 1) * kBf16;  // q/k/v conv windows of K-1 columns
      r.per_seq_bytes_per_layer = state + conv;
      if (with_note) r.note = "recurrent state [H,D,D] " + std::string(to_string(a.state_dtype)) + " + conv state (K-1 columns of q/k/v, bf16)";
      break;
    }
    case AttentionOp::mla:
      r.per_token_bytes_per_layer = mla_latent_bytes(a);
      if (with_note) r.note = std::to_string(a.kv_lora_rank + a.qk_rope_dim) + "-value latent, " + std::string(to_string(a.kv_dtype));
      break;
    case AttentionOp::csa:
    case AttentionOp::hca:
    case AttentionOp::swa: {
      const double window = a.window_tokens * a.kv_entry_bytes;
      double comp = 0;
      if (a.compress_ratio > 0) {
        const double coff = a.compressor_overlap ? 2 : 1;
        r.per_token_bytes_per_layer = (a.kv_entry_bytes + a.indexer_entry_bytes) / a.compress_ratio;
        // fp32 kv + score buffers of `ratio` pending tokens (model-facts §2.4)
        comp = 2.0 * a.compress_ratio * coff * a.head_dim * 4;
        if (a.indexer_heads > 0) comp += 2.0 * a.compress_ratio * coff * a.indexer_head_dim * 4;
      }
      r.per_seq_bytes_per_layer = window + comp;
      if (with_note) r.note = a.compress_ratio > 0 ? "1 entry of " + std::to_string(static_cast<int>(a.kv_entry_bytes)) + " B" +
                                          (a.indexer_heads > 0 ? " + indexer key " + std::to_string(static_cast<int>(a.indexer_entry_bytes)) + " B" : "") +
                                          " per " + std::to_string(a.compress_ratio) + " tokens; window " +
                                          std::to_string(a.window_tokens) + " entries + compressor state"
                                    : "window " + std::to_string(a.window_tokens) + " entries only";
      break;
    }
  }
  (void)hidden;
  return r;
}

}  // namespace

std::vector<KvLayerRow> kv_breakdown(const ModelSpec& m) {
  std::vector<KvLayerRow> rows;
  for (size_t i = 0; i < m.attention_kinds.size(); ++i) {
    KvLayerRow r = kv_layer(m.attention_kinds[i], m.hidden);
    r.layers = m.count_attention(static_cast<int>(i));
    if (r.layers > 0) rows.push_back(r);
  }
  return rows;
}

KvFootprint kv_footprint(const ModelSpec& m, int attn_tp) {
  KvFootprint f;
  for (size_t i = 0; i < m.attention_kinds.size(); ++i) {
    const AttentionSpec& a = m.attention_kinds[i];
    const KvLayerRow r = kv_layer(a, m.hidden, false);
    const int n = m.count_attention(static_cast<int>(i));
    const double shard = a.op == AttentionOp::kda ? attn_tp : 1;
    f.per_token_bytes += n * r.per_token_bytes_per_layer;
    f.per_seq_bytes += n * r.per_seq_bytes_per_layer / shard;
  }
  return f;
}

double kv_bytes(const ModelSpec& m, long long L, int attn_tp) {
  double b = 0;
  for (size_t i = 0; i < m.attention_kinds.size(); ++i) {
    const AttentionSpec& a = m.attention_kinds[i];
    const int n = m.count_attention(static_cast<int>(i));
    if (n == 0) continue;
    const KvLayerRow r = kv_layer(a, m.hidden, false);
    if (a.op == AttentionOp::kda) {
      b += n * r.per_seq_bytes_per_layer / attn_tp;
    } else if (a.op == AttentionOp::mla) {
      b += n * r.per_token_bytes_per_layer * static_cast<double>(L);
    } else {
      const double entries = a.compress_ratio > 0 ? static_cast<double>(L / a.compress_ratio) : 0.0;
      b += n * (entries * (a.kv_entry_bytes + a.indexer_entry_bytes) + r.per_seq_bytes_per_layer);
    }
  }
  return b;
}

double resume_state_bytes(const ModelSpec& m, int attn_tp, int block_tokens) {
  double b = 0;
  for (size_t i = 0; i < m.attention_kinds.size(); ++i) {
    const AttentionSpec& a = m.attention_kinds[i];
    const int n = m.count_attention(static_cast<int>(i));
    if (n == 0 || a.op == AttentionOp::mla) continue;
    const KvLayerRow r = kv_layer(a, m.hidden, false);
    if (a.op == AttentionOp::kda) {
      b += n * r.per_seq_bytes_per_layer / attn_tp;
      continue;
    }
    const double window = a.window_tokens * a.kv_entry_bytes;
    const bool aligned = a.compress_ratio == 0 || block_tokens % a.compress_ratio == 0;
    b += n * (aligned ? window : r.per_seq_bytes_per_layer);
  }
  return b;
}

double activation_workspace_bytes(const ModelSpec& m, long long tokens, long long logit_rows, int attn_tp) {
  const FfnSpec* moe = m.main_moe();
  const double d = moe ? (moe->latent_dim > 0 ? moe->latent_dim : m.hidden) : 0.0;
  const double k = moe ? moe->top_k : 0.0;
  const double per_token = 16.0 * m.hidden * kBf16 + 2.0 * k * d * kBf16 / attn_tp;
  return static_cast<double>(tokens) * per_token + static_cast<double>(logit_rows) * m.vocab * 4.0 / attn_tp;
}

double article_decode_bytes(const ModelSpec& m, long long context_tokens) {
  return m.published_active_params + kv_bytes(m, context_tokens, 1);
}

}  // namespace servesim
