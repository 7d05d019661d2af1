// servesim costmodels: assembling one step's time from its ops (StepCostModel::step). The
// per-rank attention half (attention_part) is independent of the step's expert loads; finish()
// adds the FFN/MoE layers at a sampled load, the EP all-to-alls with two-batch overlap, the logits
// and the host time. Sources of the serving behaviours: ../shared/reference/serving-overheads.md.
#include "costmodels/step_cost.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace servesim {
namespace {

constexpr double kAct = 2.0;  // activations are BF16 (bytes per element)
// Kernels of one layer outside the priced ops: two RMSNorms fused with the residual adds, RoPE and
// the activation quantisation before the FP8 GEMMs (an assumption: SGLang's DeepSeek layer).
constexpr int kLayerElementwiseKernels = 4;

Provenance worse(Provenance a, Provenance b) { return static_cast<int>(a) > static_cast<int>(b) ? a : b; }
int kernels_of(const Op& o) { return std::max(1, o.gemm_count); }

}  // namespace

double StepCostModel::sum_ops(const std::vector<Op>& ops, StepTime& st, double& extra) const {
  double s = 0;
  extra = 0;
  for (const auto& o : ops) {
    const OpLatency l = cost_->latency(o);
    s += l.seconds;
    st.source = worse(st.source, l.source);
    if (l.source == Provenance::extrapolated) extra += l.outside_s(), st.extrapolated_ops |= 1u << static_cast<unsigned>(o.kind);
  }
  return s;
}

int StepCostModel::draw_sample(Rng& rng) const {
  for (const auto& l : loads_)
    if (l && !l->balanced()) return ExpertLoad::pick(rng);
  return -1;
}

double StepCostModel::expert_load(int f, double tokens, double seqs, int sample) const {
  if (shape_.expert_imbalance > 0) return shape_.expert_imbalance;
  const auto& l = loads_[static_cast<size_t>(f)];
  if (!l || l->balanced()) return 1.0;
  return sample < 0 ? l->expected(tokens, seqs) : l->samples(tokens, seqs)[static_cast<size_t>(sample)];
}

StepParts StepCostModel::attention_part(const std::vector<std::vector<SeqWork>>& per_rank, Phase phase) const {
  const int dp = shape_.dp();
  if (static_cast<int>(per_rank.size()) != dp)
    throw std::invalid_argument("StepCostModel::step: expected " + std::to_string(dp) + " DP ranks");
  StepParts p;
  const size_t kinds = model_.attention_kinds.size();
  p.attn.assign(kinds, 0.0), p.attn_extra.assign(kinds, 0.0), p.attn_kernels.assign(kinds, 0);
  std::vector<double> Tr(static_cast<size_t>(dp), 0.0);
  double sq = 0;  // Σ t_i·(t_i − 1) over the step's sequences: pairs of tokens of one sequence
  for (int r = 0; r < dp; ++r) {
    double lg = 0;
    // decode: every new token (with MTP, each verified one) has logits; prefill: the last chunk's
    for (const auto& s : per_rank[static_cast<size_t>(r)]) {
      Tr[static_cast<size_t>(r)] += s.new_tokens, lg += phase == Phase::decode ? (s.emits_logits ? s.new_tokens : 0) : s.emits_logits;
      sq += static_cast<double>(s.new_tokens) * static_cast<double>(s.new_tokens - 1);
    }
    p.Tmax = std::max(p.Tmax, Tr[static_cast<size_t>(r)]);
    p.Smax = std::max(p.Smax, static_cast<double>(per_rank[static_cast<size_t>(r)].size()));
    p.Ttot += Tr[static_cast<size_t>(r)];
    p.logits_max = std::max(p.logits_max, lg);
  }
  if (p.Ttot <= 0) return p;
  p.seqs_eff = sq > 0 ? p.Ttot * p.Ttot / sq : 0.0;
  StepTime st;
  // with two-batch overlap a decode rank's sequences run their attention as two micro-batches
  // (alternate sequences), each priced on its own: at small batches a half costs nearly what the
  // whole does (SGLang's TBO ablation: -27% at 32 tokens per GPU, "small decode batch sizes hinder
  // kernel efficiency"). Prefill keeps whole-batch pricing (long prompts: the halves add up).
  const bool split = splits_attention(phase, p.Smax);
  // multi-token prediction's k − 1 draft passes run one query token per sequence (the verify
  // pass's k + 1 attend as k + 1 queries): their attention is priced on its own (attn_draft)
  const bool drafts = phase == Phase::decode && shape_.mtp_draft_tokens > 1;
  if (drafts) p.attn_draft.assign(kinds, 0.0), p.attn_draft_extra.assign(kinds, 0.0);
  // attention time of each kind = slowest DP rank (the MoE layer after it synchronises the group)
  for (size_t a = 0; a < kinds; ++a) {
    if (model_.count_attention(static_cast<int>(a)) == 0) continue;
    for (int r = 0; r < dp; ++r) {
      const auto& seqs = per_rank[static_cast<size_t>(r)];
      double extra = 0;
      int k = 0;
      if (drafts) {
        draft_.clear();
        for (const auto& s : seqs) draft_.push_back({1, s.context_before + s.new_tokens - 1, s.emits_logits});
        const double td = rank_attention_s(static_cast<int>(a), draft_, phase, split, st, extra, k);
        if (td > p.attn_draft[a]) p.attn_draft[a] = td, p.attn_draft_extra[a] = extra;
        extra = 0, k = 0;
      }
      const double tr = rank_attention_s(static_cast<int>(a), seqs, phase, split, st, extra, k);
      p.attn_kernels[a] = std::max(p.attn_kernels[a], k);
      if (tr > p.attn[a]) p.attn[a] = tr, p.attn_extra[a] = extra;
    }
  }
  p.source = st.source, p.extrapolated_ops = st.extrapolated_ops;
  return p;
}

// One DP rank's attention of kind a over `seqs` (with two-batch overlap, `split`: the sequences
// alternate between two micro-batches, each priced on its own): seconds; adds the extrapolated
// seconds to extra and the kernels to kernels.
double StepCostModel::rank_attention_s(int a, const std::vector<SeqWork>& seqs, Phase phase, bool split, StepTime& st, double& extra,
                                       int& kernels) const {
  double t = 0;
  const bool kda = model_.attention_kinds[static_cast<size_t>(a)].op == AttentionOp::kda;
  auto price = [&](const std::vector<SeqWork>& part) {
    double tokens = 0;
    for (const auto& s : part) tokens += static_cast<double>(s.new_tokens);
    // (+ 0.0: the hash reads the bits; the counts are finite and non-negative, and -0.0 becomes +0.0)
    const KdaKey key{a, static_cast<int>(phase), tokens + 0.0, static_cast<double>(part.size())};
    AttnPrice* hit = nullptr;
    if (kda) {
      auto it = kda_memo_.find(key);
      if (it != kda_memo_.end()) hit = &it->second;
    }
    AttnPrice p;
    if (hit) {
      p = *hit;
    } else {
      StepTime pst;
      pst.source = static_cast<Provenance>(0);
      scratch_.clear();
      attention_ops(a, part, phase, scratch_);
      // the attention output's TP all-reduce, one per micro-batch: a split decode half is one
      // micro-batch; prefill with two-batch overlap prices its ops whole but runs (and reduces) the
      // batch as micro_batches() parts, each paying the call's latency floor
      const double calls = split ? 1.0 : micro_batches(phase, static_cast<double>(part.size()));
      p.s = sum_ops(scratch_, pst, p.extra) + calls * allreduce_time(fabric_, shape_.attn_tp, tokens / calls * model_.hidden * kAct);
      for (const auto& o : scratch_) p.kernels += kernels_of(o);
      p.source = pst.source, p.extrapolated_ops = pst.extrapolated_ops;
      if (kda) {
        if (kda_memo_.size() >= kKdaMemoMax) kda_memo_.clear();
        kda_memo_.emplace(key, p);
      }
    }
    t += p.s;
    extra += p.extra;
    kernels += p.kernels;
    st.source = worse(st.source, p.source), st.extrapolated_ops |= p.extrapolated_ops;
  };
  if (!split) {
    price(seqs);
  } else {
    halves_[0].clear(), halves_[1].clear();
    for (size_t i = 0; i < seqs.size(); ++i) halves_[i % 2].push_back(seqs[i]);
    for (const auto& h : halves_)
      if (!h.empty()) price(h);
  }
  return t;
}

// Host time the GPU waits for (serving-overheads.md §2): the scheduler's per-step time; then a
// captured graph's one launch, or eager launches, which hide behind the GPU work except where
// they outrun it and after each host synchronisation (DeepEP normal dispatch blocks the host until
// its peers' counts arrive, so the GPU idles one launch gap per hierarchical dispatch).
double StepCostModel::host_seconds(int kernels, double gpu_s, int syncs) const {
  double h = step_overhead_s_;
  if (shape_.cuda_graph) return h + shape_.graph_launch_s;
  return h + std::max(0.0, kernels * shape_.kernel_launch_s - gpu_s) + syncs * shape_.kernel_launch_s;
}

namespace {
// Hash of a memo key: two doubles by their bits (finite, non-negative, so one bit pattern per
// value) and the key's integer fields folded into `tag`, then a 64-bit mix.
size_t key_hash(double x, double y, std::uint64_t tag) {
  static_assert(sizeof(double) == sizeof(std::uint64_t));
  std::uint64_t a, b;
  std::memcpy(&a, &x, sizeof a), std::memcpy(&b, &y, sizeof b);
  std::uint64_t h = a * 0x9E3779B97F4A7C15ULL ^ (b + 0x632BE59BD9B4E019ULL) ^ tag;
  h ^= h >> 29, h *= 0xBF58476D1CE4E5B9ULL, h ^= h >> 32;
  return static_cast<size_t>(h);
}
std::uint64_t u32(int v) { return static_cast<std::uint32_t>(v); }
}  // namespace

size_t StepCostModel::KdaKeyHash::operator()(const KdaKey& k) const {
  return key_hash(k.tokens, k.seqs, (u32(k.kind) << 40) ^ u32(k.phase));
}

size_t StepCostModel::FfnKeyHash::operator()(const FfnKey& k) const {
  return key_hash(k.tm, k.tt, (u32(k.ffn) << 40) ^ (u32(k.sample) << 8) ^ static_cast<std::uint64_t>(k.mb) ^ (u32(k.seq) << 52));
}

// The FFN half of one layer pair (what finish() adds per layer before composing it with the
// attention): the FFN ops at the sampled load with their attention-TP all-reduce, and the EP
// all-to-all (time and the busiest GPU's NIC bytes of dispatch and combine).
StepCostModel::FfnLayer StepCostModel::ffn_layer(int f, double mb, double Tm, double Tt, double seqs, int sample) const {
  const auto& el = loads_[static_cast<size_t>(f)];
  // (+ 0.0: the slot is chosen from the bits; Tm and Tt are finite, non-negative, -0.0 made +0.0)
  const FfnKey key{f, static_cast<int>(mb), sample, el ? el->seq_key(seqs) : 0, Tm + 0.0, Tt + 0.0};
  if (ffn_memo_.empty()) ffn_memo_.resize(kFfnMemoSlots);
  FfnSlot& slot = ffn_memo_[FfnKeyHash{}(key) & (kFfnMemoSlots - 1)];
  if (slot.key == key) return slot.layer;
  const FfnSpec& spec = model_.ffn_kinds[static_cast<size_t>(f)];
  const double load = expert_load(f, Tt, seqs, sample);
  FfnLayer l;
  StepTime st;
  st.source = static_cast<Provenance>(0);
  double extra = 0;
  scratch_.clear();
  ffn_ops(f, Tm / mb, Tt / mb, scratch_, load);
  l.ffn = mb * sum_ops(scratch_, st, extra);
  l.ffn_extra = mb * extra;
  for (const auto& o : scratch_) l.kernels += kernels_of(o);
  // the dense / shared-expert output's TP all-reduce: one per micro-batch, as the ops above
  if (spec.op == FfnOp::dense || spec.shared_experts > 0) l.ffn += mb * allreduce_time(fabric_, shape_.attn_tp, Tm / mb * model_.hidden * kAct);
  // each micro-batch dispatches and combines its own tokens: mb calls, each paying the per-call
  // latency floor (alltoall_time), as the FFN ops above are priced per micro-batch
  l.comm = mb * moe_comm_s(f, Tm / mb, Tt / mb, load);
  if (l.comm > 0) {
    l.a2a_dispatch = moe_alltoall_load(f, Tm, Tt, spec.dispatch_dtype, load).inter_bytes;
    l.a2a_combine = moe_alltoall_load(f, Tm, Tt, spec.combine_dtype, load).inter_bytes;
  }
  l.source = st.source, l.extrapolated_ops = st.extrapolated_ops;
  slot.key = key, slot.layer = l;
  return l;
}

StepTime StepCostModel::finish(const StepParts& parts, Phase phase, int sample) const {
  StepTime st;
  st.source = parts.source, st.extrapolated_ops = parts.extrapolated_ops;
  if (parts.Ttot <= 0) return st;
  const double Tmax = parts.Tmax, Ttot = parts.Ttot;
  // two-batch overlap: two micro-batches, each priced at half the tokens; a decode step whose
  // busiest DP rank has a single sequence cannot be split
  const double mb = micro_batches(phase, parts.Smax);
  const bool overlap = mb > 1;
  const bool normal = shape_.dispatch == EpDispatch::hierarchical;
  st.expert_load = main_moe_ >= 0 ? expert_load(main_moe_, Ttot, parts.seqs_eff, sample) : 1.0;
  int kernels = 0, syncs = 0;
  // `count` layers of pair p with Tm / Tt tokens (busiest rank / instance) in their FFN and the
  // attention seconds attn[kind] (extrapolated part attn_extra[kind]) of one layer
  // `seqs` effective sequences (StepParts::seqs_eff; 0 = one token per sequence) route its tokens
  auto add_layers = [&](const LayerPair& p, double Tm, double Tt, int count, const std::vector<double>& attn_s,
                        const std::vector<double>& attn_extra_s, double seqs) {
    const FfnLayer l = ffn_layer(p.ffn, mb, Tm, Tt, seqs, sample);
    st.source = worse(st.source, l.source), st.extrapolated_ops |= l.extrapolated_ops;
    const double ffn = l.ffn, ffn_extra = l.ffn_extra, comm = l.comm;
    const int k = l.kernels;
    if (comm > 0) {
      st.a2a_inter_bytes_gpu += count * l.a2a_dispatch;
      st.a2a_inter_bytes_gpu += count * l.a2a_combine;
      if (normal) syncs += count * static_cast<int>(mb);
    }
    const double attn = attn_s[static_cast<size_t>(p.attention)];
    const double compute = attn + ffn;
    // with overlap, the dispatch/combine kernels of one micro-batch run beside the other's compute;
    // DeepEP normal kernels hold a share s of the SMs meanwhile and a share e of the comm stays
    // exposed (host syncs, slowest peer), so compute C beside comm M takes max(M, C + (s + e)·M)
    // (low-latency kernels use no SMs: s = 0); without overlap they add up
    const double s = (normal ? shape_.comm_sm_fraction : 0.0) + shape_.overlap_exposed_fraction;
    const double layer = overlap ? std::max(comm, compute + s * comm) : compute + comm;
    st.attention_s += count * attn;
    st.ffn_s += count * ffn;
    st.comm_s += count * (layer - compute);
    st.comm_total_s += count * comm;
    st.total_s += count * layer;
    st.extrapolated_s += count * (attn_extra_s[static_cast<size_t>(p.attention)] + ffn_extra);
    kernels += count * (parts.attn_kernels[static_cast<size_t>(p.attention)] + static_cast<int>(mb) * k + kLayerElementwiseKernels);
  };
  for (const auto& p : pairs_) add_layers(p, Tmax, Ttot, p.count, parts.attn, parts.attn_extra, parts.seqs_eff);
  // multi-token prediction: the MTP head (one more layer of the model's main kind) runs k passes a
  // step, as SGLang's EAGLE worker does: k − 1 draft passes at one token per sequence, and after
  // the verify pass one draft-extend pass over the verified tokens (k + 1 per sequence) that drafts
  // the next step's first token. The draft-extend pass's attention is the verifying layer's (each
  // of a sequence's k + 1 query tokens attends the whole context over one read of the cache:
  // step_cost.cpp mla_ops, fitted.cpp map_op); a draft pass's is priced at one query token per
  // sequence (attention_part's attn_draft, filled whenever k > 1).
  const int k = phase == Phase::decode ? shape_.mtp_draft_tokens : 0;
  if (k > 0 && !pairs_.empty()) {
    const LayerPair* main = &pairs_.back();
    for (const auto& p : pairs_)
      if (p.ffn == main_moe_) main = &p;
    // a draft pass routes one token per sequence: no sequence term in its expert load (seqs 0)
    if (k > 1) add_layers(*main, Tmax / (k + 1), Ttot / (k + 1), k - 1, parts.attn_draft, parts.attn_draft_extra, 0.0);
    add_layers(*main, Tmax, Ttot, 1, parts.attn, parts.attn_extra, parts.seqs_eff);
  }
  // logits of the busiest rank: of every verified token, and with MTP one row per sequence in each
  // of the k MTP passes (the draft head shares the model's LM head; the draft-extend pass needs
  // only the last verified token's): k more LM-head GEMMs of the whole vocabulary at L / (k + 1) rows
  double logits = parts.logits_max > 0 ? head_seconds(OpKind::lm_head, parts.logits_max, 1, st, kernels) : 0.0;
  if (k > 0 && parts.logits_max > 0) logits += head_seconds(OpKind::lm_head, parts.logits_max / (k + 1), k, st, kernels);
  // each MTP pass starts with the head's eh_proj over its rows (the draft passes' one token per
  // sequence, the draft-extend pass's k + 1): full weights on every attention-TP rank (a plain
  // replicated linear in SGLang's NextN layer, as memory counts it)
  if (k > 0 && Tmax > 0) {
    if (k > 1) logits += head_seconds(OpKind::mtp_proj, Tmax / (k + 1), k - 1, st, kernels);
    logits += head_seconds(OpKind::mtp_proj, Tmax, 1, st, kernels);
  }
  st.host_s = host_seconds(kernels, st.total_s + logits, syncs);
  st.other_s = logits + st.host_s;
  st.total_s += st.other_s;
  if (!scale_.identity()) {  // what-if: the step as much slower (faster) as real serving was in its regime
    const double f = scale_.of(phase == Phase::decode, parts.Smax);
    for (double* x : {&st.total_s, &st.attention_s, &st.ffn_s, &st.comm_s, &st.comm_total_s, &st.other_s, &st.host_s, &st.extrapolated_s}) *x *= f;
  }
  return st;
}

// n calls of a head op of L rows each: the LM head (the whole vocabulary over attention TP; one
// GEMM) or the MTP head's input (mtp_proj: two RMSNorms and eh_proj, 2·D → D, full weights; three
// kernels). Returns their seconds; adds the extrapolated part to st and the kernels to kernels.
double StepCostModel::head_seconds(OpKind kind, double L, int n, StepTime& st, int& kernels) const {
  const double t = shape_.attn_tp, vocab = model_.vocab, D = model_.hidden;
  scratch_.clear();
  Op o;
  o.kind = kind, o.cls = OpClass::gemm, o.hidden = D;
  o.tokens = L, o.seqs = L, o.gemm_m = L, o.gemm_count = 1;
  int launches = 1;
  if (kind == OpKind::lm_head) {
    o.math = DType::bf16, o.gemms = &lm_head_gemm_;
    o.flops = 2 * L * D * vocab / t;
    o.bytes = vocab * D * bytes_per_element(model_.embedding_dtype) / t + L * vocab / t * 4;
  } else {
    o.math = mtp_proj_gemm_.dtype, o.gemms = &mtp_proj_gemm_, launches = 3;
    o.flops = 2 * L * (2 * D) * D;
    // the weights once; per row: the two norms read and write D each, the GEMM reads 2·D, writes D
    o.bytes = 2 * D * D * bytes_per_element(mtp_proj_gemm_.dtype) + L * (4 * D + 3 * D) * kAct;
  }
  scratch_.push_back(o);
  double extra = 0;
  const double s = sum_ops(scratch_, st, extra);
  st.extrapolated_s += n * extra, kernels += n * launches;
  return n * s;
}

StepTime StepCostModel::step(const std::vector<std::vector<SeqWork>>& per_rank, Phase phase, int sample) const {
  return finish(attention_part(per_rank, phase), phase, sample);
}

StepTime StepCostModel::step(const std::vector<std::vector<SeqWork>>& per_rank, Phase phase) const { return step(per_rank, phase, -1); }

}  // namespace servesim
