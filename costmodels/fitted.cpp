#include "costmodels/fitted.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

namespace servesim {

namespace {

constexpr int kMaxComponents = 24;
/// Query rows (heads × query tokens) one MLA decode call packs over a single read of a sequence's
/// latent cache: the largest head count of the measured table (costmodels/data/h200/mla_decode.json,
/// DeepSeek-V3's 128 heads), so a packed call stays inside the fitted range.
constexpr double kMlaPackRows = 128;

struct Buf {
  FittedCostModel::Component c[kMaxComponents];
  int n = 0;
  void add(Family f, double a, double b = 1, double c3 = 1, double d = 1, double count = 1) {
    if (n == kMaxComponents) throw std::logic_error("FittedCostModel: too many kernels in one op");
    // The first feature counts rows (tokens, sequences, M). The engine passes expected counts, e.g.
    // 0.25 tokens on one GPU of an attention-TP group of 4 with one decode token per DP rank; a
    // launched kernel runs at least one row (CUDA-graph decode pads the batch), so fewer than one
    // costs what one does, which is measured, not extrapolated. Not for the grouped expert GEMMs:
    // their first feature is the expected number of experts touched, a probability below one,
    // which family_seconds scales by (a G/g share of a measured group).
    if (!is_grouped(f) && a > 0 && a < 1) a = 1;
    c[n].family = f, c[n].x = {a, b, c3, d}, c[n].count = count;
    ++n;
  }
};

void add_gemms(const Op& op, Buf& b) {
  if (op.gemm_m <= 0) return;
  for (int i = 0; i < op.gemm_count; ++i) {
    const GemmShape& g = op.gemms[i];
    if (g.n <= 0 || g.k <= 0 || g.batch <= 0) continue;
    if (g.dtype == DType::fp8)
      b.add(Family::gemm_fp8, op.gemm_m, g.n * g.batch, g.k);
    else if (g.batch > 1)
      b.add(Family::gemm_bf16_batched, op.gemm_m, g.n, g.k, g.batch);
    else  // batch 1, or a fraction of one product per GPU (e.g. V4 wo_a groups / TP < 1): N·batch columns
      b.add(Family::gemm_bf16, op.gemm_m, g.n * g.batch, g.k);
  }
}

void add_act(const Op& op, double rows, Buf& b) {
  if (op.act == Activation::none || op.width <= 0 || rows <= 0) return;
  b.add(op.act == Activation::situ ? Family::act_situ : Family::act_swiglu, rows, op.width);
}

void add_kda_conv_norm(const Op& op, Buf& b) {
  const double T = op.tokens, S = std::max(op.seqs, 1.0), H = op.heads;
  const double channels = 3 * H * (op.head_dim > 0 ? op.head_dim : 128);
  if (op.decode) b.add(Family::short_conv_decode, S, channels);
  else b.add(Family::short_conv_prefill, T * channels);
  b.add(Family::gated_rmsnorm, T, H);
}

void add_mla_prefill(const Op& op, Buf& b) {
  const double T = op.tokens, H = op.heads;
  // the one sequence with the batch's tokens and causal pairs: keys per query = pairs / tokens
  // (when that is below the single-chunk (T+1)/2, many short sequences: the chunk whose own
  // causal triangle has the pairs)
  double chunk = T, keys = T > 0 ? op.pairs / T : 0;
  if (keys < (T + 1) / 2) chunk = std::min(T, std::sqrt(2 * op.pairs)), keys = (chunk + 1) / 2;
  // one call with the cached prefix (our kernel, as production kernels, reads it in the same call)
  b.add(Family::mla_prefill, chunk, keys, H);
  add_gemms(op, b);
}

/// csa / hca / swa attention, and the compressor of the compressed (csa, hca) kinds.
void add_v4_attn(const Op& op, Buf& b) {
  const double T = op.tokens, S = std::max(op.seqs, 1.0), H = op.heads;
  const double rows = T > 0 ? op.keys / T : 0;
  // decode: every query token (k + 1 per sequence under MTP) gathers its own top-k list, so the
  // kernel's batch is the query tokens, as FlashMLA's sparse decode at s_q 2 (fit_report.cpp)
  if (op.decode) b.add(Family::v4_attn_decode, T, rows, H);
  else b.add(Family::v4_attn_prefill, T, rows, H, v4_prefill_ramp(op.keys_last, rows));
  if (op.kind != OpKind::swa_attn && op.compress_ratio > 0) {
    const double hd = op.head_dim > 0 ? op.head_dim : 512;
    if (op.decode) b.add(Family::compressor_decode, S, hd, op.compress_ratio);
    else b.add(Family::compressor_prefill, T, hd, op.compress_ratio);
  }
}

/// The csa indexer: index scores, top-k selection and the indexer's own compressor.
void add_csa_indexer(const Op& op, Buf& b) {
  const double T = op.tokens, S = std::max(op.seqs, 1.0), H = op.heads;
  const double rows = T > 0 ? op.keys / T : 0;
  if (op.decode) {
    // q = T / S query tokens per sequence (k + 1 under MTP): the logits kernel packs up to 2 of
    // them as more query heads over one read of the sequence's keys (DeepGEMM's paged MQA logits
    // take next_n 1 or 2), so ⌈q / 2⌉ reads of min(q, 2)·H heads (the table measures 64 heads only:
    // 128 is extrapolated); each query token then selects its own top-k from its own logits row
    const double q = std::max(1.0, std::round(T / S));
    b.add(Family::indexer_decode, S * std::ceil(q / 2), rows, H * std::min(q, 2.0));
    if (rows > op.top_k) b.add(Family::topk_decode, T, rows, op.top_k);
    else b.add(Family::topk_decode_copy, T, rows);
    b.add(Family::compressor_decode, S, op.head_dim > 0 ? op.head_dim : 128, op.compress_ratio > 0 ? op.compress_ratio : 4);
  } else {
    b.add(Family::indexer_prefill, T, rows, H);
    b.add(Family::topk_prefill, T, rows, op.top_k);
    b.add(Family::compressor_prefill, T, op.head_dim > 0 ? op.head_dim : 128, op.compress_ratio > 0 ? op.compress_ratio : 4);
  }
}

/// expected_padded_rows remembered per thread by its exact arguments (a pure function; the same
/// batch shapes recur step after step).
double padded_rows_memo(Family f, double T, double held, double G) {
  struct Slot {
    double T = -1, held = -1, G = -1, rows = 0;
    int f = -1;
  };
  thread_local std::vector<Slot> memo(1u << 12);
  std::uint64_t h = static_cast<std::uint64_t>(f) * 0x9E3779B97F4A7C15ull;
  for (double v : {T, held, G}) h = (h ^ std::bit_cast<std::uint64_t>(v)) * 0xBF58476D1CE4E5B9ull, h ^= h >> 31;
  Slot& m = memo[h & (memo.size() - 1)];
  if (m.f != static_cast<int>(f) || std::bit_cast<std::uint64_t>(m.T) != std::bit_cast<std::uint64_t>(T) ||
      std::bit_cast<std::uint64_t>(m.held) != std::bit_cast<std::uint64_t>(held) || std::bit_cast<std::uint64_t>(m.G) != std::bit_cast<std::uint64_t>(G))
    m = {T, held, G, expected_padded_rows(f, T, held, G), static_cast<int>(f)};
  return m.rows;
}

void add_moe_experts(const Op& op, Buf& b) {
  const double T = op.tokens;
  const DType w = op.gemm_count > 0 ? op.gemms[0].dtype : DType::mxfp4;
  const Family f = w == DType::mxfp4 ? Family::grouped_w4a16 : w == DType::fp8 ? Family::grouped_fp8 : Family::grouped_bf16;
  const double G = std::max(op.experts, 1e-9);
  const double rows = padded_rows_memo(f, T, std::max(op.heads, G), G);
  for (int i = 0; i < op.gemm_count; ++i) b.add(f, G, rows, op.gemms[i].n, op.gemms[i].k);
  add_act(op, T, b);
}

void add_moe_permute(const Op& op, Buf& b) {
  const double T = op.tokens;
  const double k = std::max(op.top_k, 1.0);
  b.add(Family::permute, T / k, k, op.hidden);
  b.add(Family::combine, T / k, k, op.hidden);
}

void map_op(const Op& op, Buf& b) {
  const double T = op.tokens, S = std::max(op.seqs, 1.0), H = op.heads;
  switch (op.kind) {
    case OpKind::attn_proj:
    case OpKind::lm_head: add_gemms(op, b); break;
    case OpKind::kda_conv_norm: add_kda_conv_norm(op, b); break;
    case OpKind::kda_prefill: b.add(Family::kda_prefill, T, T / S, H); break;
    case OpKind::kda_decode: b.add(op.state_bytes >= 4 ? Family::kda_decode_fp32 : Family::kda_decode_bf16, S, H); break;
    case OpKind::mla_prefill: add_mla_prefill(op, b); break;
    case OpKind::mla_decode: {
      // q = T / S query tokens per sequence (k + 1 under MTP verification) are packed as q × H
      // query rows over one read of the sequence's latent cache (FlashMLA's s_q × h_q rows per KV
      // head). The kernel runs one CTA per 64-row head group (t_mqa_plan), and its measured heads
      // reach kMlaPackRows = 2 groups: up to 128 rows the call is (S, L, q·H); beyond, g = ⌈q·H/64⌉
      // groups are priced as g / 2 reads of 128 rows (g even) or g reads of 64 (g odd), each read
      // priced as another sequence, so the CTAs counted are the kernel's g per sequence
      const double rows = H * std::max(1.0, T / S);
      if (rows <= kMlaPackRows) {
        b.add(Family::mla_decode, S, op.ctx_sum / S, rows);
      } else {
        const double g = std::ceil(rows / 64 - 1e-9);
        const bool even = std::fmod(g, 2) == 0;
        b.add(Family::mla_decode, S * (even ? g / 2 : g), op.ctx_sum / S, even ? 128 : 64);
      }
      add_gemms(op, b);
      break;
    }
    case OpKind::csa_attn:
    case OpKind::hca_attn:
    case OpKind::swa_attn: add_v4_attn(op, b); break;
    case OpKind::csa_indexer: add_csa_indexer(op, b); break;
    case OpKind::mhc_mix: b.add(Family::mhc, T, op.hidden, 1, 1, 2); break;
    case OpKind::dense_ffn:
    case OpKind::moe_shared:
      add_gemms(op, b);
      add_act(op, op.gemm_m, b);
      break;
    case OpKind::moe_router: b.add(Family::router, T, op.experts, op.hidden); break;
    case OpKind::moe_latent_proj:
      add_gemms(op, b);
      if (op.gemm_m > 0) b.add(Family::latent_rmsnorm, op.gemm_m, op.width);
      break;
    case OpKind::moe_experts: add_moe_experts(op, b); break;
    case OpKind::moe_permute: add_moe_permute(op, b); break;
    // two fused residual-add + RMSNorm kernels over the hidden width, each moving twice the bytes
    // of the plain RMSNorm we measured (K3's 3,584-wide LatentMoE norm; other widths are answered
    // by its fitted surface): two launches of it at twice the rows, so that decode pays two launch
    // floors (the kernel is flat at ~3.4 µs from 1 to 256 rows), not four
    case OpKind::layer_norm: b.add(Family::latent_rmsnorm, 2 * T, op.hidden, 1, 1, 2); break;
    // the MTP head's RMSNorms of the token embedding and of the hidden state (one kernel each over
    // the hidden width), then eh_proj (2·D → D)
    case OpKind::mtp_proj:
      b.add(Family::latent_rmsnorm, T, op.hidden, 1, 1, 2);
      add_gemms(op, b);
      break;
    case OpKind::count_: throw std::invalid_argument("FittedCostModel: OpKind::count_ is not an op");
  }
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

FittedCostModel::FittedCostModel(std::shared_ptr<const FitSet> fit, GpuSpec gpu) : fit_(std::move(fit)), gpu_(std::move(gpu)) {
  if (!fit_) throw std::invalid_argument("FittedCostModel: no fitted parameters");
  target_ = datasheet_ceilings(gpu_);
  scaled_ = gpu_.name != fit_->measured_on;
  name_ = scaled_ ? "fitted (extrapolated from " + upper(fit_->measured_on) + ")" : "fitted";
  memo_.assign(kMemoSlots, MemoEntry{{}, 0.0, -1, false});
}

double FittedCostModel::memo_seconds(Family f, const double* x, bool* extrapolated) const {
  std::uint64_t h = static_cast<std::uint64_t>(f) * 0x9E3779B97F4A7C15ull;
  for (int a = 0; a < kMaxGridDims; ++a) {
    h = (h ^ std::bit_cast<std::uint64_t>(x[a])) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  MemoEntry& m = memo_[h & (kMemoSlots - 1)];
  bool same = m.family == static_cast<int>(f);
  for (int a = 0; a < kMaxGridDims && same; ++a) same = std::bit_cast<std::uint64_t>(m.x[a]) == std::bit_cast<std::uint64_t>(x[a]);
  if (!same) {
    bool ex = false;
    m.t = kernel_seconds(f, x, &ex);
    m.extrapolated = ex;
    m.family = static_cast<int>(f);
    std::memcpy(m.x, x, sizeof m.x);
  }
  if (m.extrapolated && extrapolated) *extrapolated = true;
  return m.t;
}

double FittedCostModel::kernel_seconds(Family f, const double* x, bool* extrapolated) const {
  const FamilyInfo& info = family_info(f);
  double t = family_seconds(info, fit_->families[static_cast<int>(f)], x, fit_->reference, extrapolated);
  if (scaled_) {
    // only the part above the kernel's fixed cost (launch, ramp, tail: the target GPU's
    // kernel_fixed_s, capped at t) is scaled (issue 11 item 4): its math path by the peak ratio,
    // its memory path by the HBM as far as the kernel is bandwidth-bound, its latency term kept
    // (cross_gpu_seconds, kernel_families.hpp)
    const double fixed = std::min(t, gpu_.kernel_fixed_s);
    t = fixed + cross_gpu_seconds(t - fixed, info.work(x), fit_->reference, target_);
    if (extrapolated) *extrapolated = true;
  }
  return t;
}

// MLA decode over an FP8 latent cache (issue 11 item 6; FlashMLA supports it): measured only in
// BF16, so the BF16 time is scaled by the roofline bound with the FP8 cache read over the bound
// with the BF16 one (max(FLOP / peak, bytes / bandwidth) at this GPU's datasheet ceilings) and
// answered `extrapolated`.
double FittedCostModel::fp8_kv_ratio(const Op& op) const {
  const double lat = op.head_dim > 0 ? op.head_dim : 576.0;  // latent values per cached token
  const double extra = op.ctx_sum * lat * (2.0 - op.kv_elem_bytes);  // the same latent in BF16
  const double fp8 = std::max(op.flops / target_.bf16, op.bytes / target_.hbm);
  const double bf16 = std::max(op.flops / target_.bf16, (op.bytes + extra) / target_.hbm);
  return bf16 > 0 ? fp8 / bf16 : 1.0;
}

OpLatency FittedCostModel::latency(const Op& op) const {
  if (op.flops <= 0 && op.bytes <= 0) return {0.0, Provenance::fitted};
  Buf b;
  map_op(op, b);
  double s = 0, out = 0;  // out: the seconds of the kernels answered outside the measurements
  bool ex = false;
  for (int i = 0; i < b.n; ++i) {
    bool exi = false;
    double t = b.c[i].count * memo_seconds(b.c[i].family, b.c[i].x.data(), &exi);
    if (b.c[i].family == Family::mla_decode && op.kv_elem_bytes > 0 && op.kv_elem_bytes < 2) t *= fp8_kv_ratio(op), exi = true;
    s += t;
    if (exi) out += t, ex = true;
  }
  return {s, b.n == 0 ? Provenance::fitted : ex ? Provenance::extrapolated : Provenance::fitted, out};
}

std::vector<FittedCostModel::Component> FittedCostModel::components(const Op& op) const {
  Buf b;
  map_op(op, b);
  return std::vector<Component>(b.c, b.c + b.n);
}

std::shared_ptr<const FitSet> load_fit_cached(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const FitSet>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(path);
  if (it != cache.end()) return it->second;
  auto p = std::make_shared<const FitSet>(read_fit_json(path));
  cache.emplace(path, p);
  return p;
}

FitProvenance fitted_provenance(const GpuSpec& gpu) {
  if (gpu.fitted_models_path.empty())
    throw std::invalid_argument("hardware \"" + gpu.name + "\" names no fitted cost-model parameters (\"fitted_models\" in its file)");
  const auto fs = load_fit_cached(gpu.fitted_models_path);
  FitProvenance p;
  p.parameters = gpu.fitted_models;
  p.parameters_hash = fs->file_hash;
  p.measured_on = fs->measured_on;
  p.scaling = gpu.name == fs->measured_on ? "none" : "extrapolated from " + upper(fs->measured_on) + " (per kernel: math by the peak ratio, HBM stream by the achievable-bandwidth difference, latency kept)";
  p.measurement_commits = fs->measurement_commits;
  for (const auto& t : fs->tables) p.tables.push_back(t.file + "@" + t.commit + "#" + t.hash);
  return p;
}

}  // namespace servesim
