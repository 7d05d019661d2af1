#include "costmodels/kernel_families.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <stdexcept>

namespace servesim {

double Ceilings::peak(DType t) const {
  switch (t) {
    case DType::fp8: return fp8;
    case DType::mxfp4: return fp4 > 0 ? fp4 : bf16;
    default: return bf16;
  }
}

double Ceilings::bound(const Work& w) const { return std::max(w.flops / peak(w.math), w.bytes / hbm); }

double cross_gpu_seconds(double s, const Work& w, const Ceilings& src, const Ceilings& dst) {
  const double bs = src.bound(w);
  if (!(s > 0) || !(bs > 0)) return s;
  const double c = s * (w.flops / dst.peak(w.math)) / bs;
  if (!(w.bytes > 0)) return c;
  const double a_src = src.hbm_achievable > 0 ? src.hbm_achievable : src.hbm;
  const double a_dst = dst.hbm_achievable > 0 ? dst.hbm_achievable : dst.hbm * a_src / src.hbm;
  const double k = std::max(1.0, src.hbm * bs / s / a_src);  // achieved above the achievable: bandwidth-bound
  const double m = s * (w.bytes / src.hbm) / bs + w.bytes / (k * a_dst) - w.bytes / (k * a_src);
  return std::max(c, m);
}

namespace {

// ------------------------------------------------------------------ work (table formulas)
// f[] are the family's features in linear units, in the order of FamilyInfo::features.

Work w_gemm_bf16(const double* f) {  // M, N, K (one product; batched ones: w_gemm_bf16_batched): 2MNK; (MK + NK)·2 + 2MN
  return {2 * f[0] * f[1] * f[2], (f[0] * f[2] + f[1] * f[2]) * 2 + 2 * f[0] * f[1], DType::bf16};
}
// batched: M, N, K, batch; every batch entry has its own A, B and C
Work w_gemm_bf16_batched(const double* f) {
  return {2 * f[0] * f[1] * f[2] * f[3], 2 * f[3] * (f[0] * f[2] + f[1] * f[2] + f[0] * f[1]), DType::bf16};
}
Work w_gemm_fp8(const double* f) {  // (MK + NK)·1 + 2MN
  return {2 * f[0] * f[1] * f[2], f[0] * f[2] + f[1] * f[2] + 2 * f[0] * f[1], DType::fp8};
}
// grouped: G, rows, N, K
Work w_grouped_w4a16(const double* f) {
  return {2 * f[1] * f[2] * f[3], f[0] * (f[2] * f[3] / 2 + f[2] * f[3] / 32) + 2 * f[1] * (f[3] + f[2]), DType::mxfp4};
}
Work w_grouped_fp8(const double* f) { return {2 * f[1] * f[2] * f[3], f[0] * f[2] * f[3] + f[1] * f[3] + 2 * f[1] * f[2], DType::fp8}; }
Work w_grouped_bf16(const double* f) { return {2 * f[1] * f[2] * f[3], 2 * f[0] * f[2] * f[3] + 2 * f[1] * (f[3] + f[2]), DType::bf16}; }
// kda_prefill: tokens T, seq_len L, heads H (D = 128, C = 16)
Work w_kda_prefill(const double* f) {
  const double T = f[0], H = f[2], D = 128, C = 16, N = T / f[1];
  return {T * H * (6 * D * D + 8 * C * D + 12 * C * C), 2 * (4 * T * H * D + T * H + T * H * D) + 2 * N * H * D * D * 4, DType::bf16};
}
// kda_decode: batch B, heads H
Work w_kda_decode_s(const double* f, double s) {
  const double B = f[0], H = f[1], D = 128;
  return {7 * D * D * B * H, 2 * B * H * D * D * s + B * H * (4 * D * 2 + 2 + D * 2), DType::fp32};
}
Work w_kda_decode_fp32(const double* f) { return w_kda_decode_s(f, 4); }
Work w_kda_decode_bf16(const double* f) { return w_kda_decode_s(f, 2); }
// short conv: tokens (or batch) T, channels C; prefill one sequence, decode one state per row
Work w_conv_decode(const double* f) { return {8 * f[0] * f[1], f[0] * f[1] * 4 + f[0] * f[1] * 12 + f[1] * 16, DType::bf16}; }
// gated rmsnorm: tokens, heads (128 per head)
Work w_gated_rmsnorm(const double* f) { return {6 * f[0] * f[1] * 128, 3 * f[0] * f[1] * 128 * 2, DType::bf16}; }
// mla decode: batch B, mean context L, heads H
Work w_mla_decode(const double* f) {
  const double ctx_sum = f[0] * f[1];
  return {2 * f[2] * ctx_sum * 1088, ctx_sum * 1152 + f[0] * f[2] * 1088 * 2, DType::bf16};
}
// mla prefill: chunk N, keys per query P + (N+1)/2, heads H
Work w_mla_prefill(const double* f) {
  const double N = f[0], H = f[2], P = std::max(0.0, f[1] - (N + 1) / 2);
  return {2 * H * N * f[1] * 320, 2 * (N * H * 192 + (P + N) * H * 320 + N * H * 128), DType::bf16};
}
// v4 attention decode: batch B, rows per query n, heads H
Work w_v4_decode(const double* f) {
  const double B = f[0], n = f[1], H = f[2];
  return {2 * H * n * 1024 * B, B * (n * 584 + 4 * n + H * 512 * 2 * 2), DType::bf16};
}
// v4 attention prefill: chunk N, mean rows per query n, heads H (rows read once ≈ n·584)
Work w_v4_prefill(const double* f) {
  const double N = f[0], n = f[1], H = f[2];
  return {2 * H * N * n * 1024, n * 584 + N * n * 4 + N * H * 512 * 2 * 2, DType::bf16};
}
// indexer decode: batch B, keys per query n, heads H (dim 128)
Work w_indexer_decode(const double* f) {
  const double B = f[0], n = f[1], H = f[2];
  return {2 * H * 128 * B * n, B * n * 132 + B * (H * 128 + H * 4) + B * n * 4, DType::fp8};
}
// indexer prefill: chunk N, mean keys per query n, heads H
Work w_indexer_prefill(const double* f) {
  const double N = f[0], n = f[1], H = f[2];
  return {2 * H * 128 * N * n, n * 132 + N * (H * 128 + H * 4) + N * n * 4, DType::fp8};
}
// top-k: rows (batch or chunk), row length, k
Work w_topk(const double* f) { return {0, f[0] * f[1] * 4 + f[0] * f[2] * 4, DType::bf16}; }
// compressors: tokens (or batch), head_dim D, ratio r; ratio 4 entries pool 8 rows (overlap)
Work w_compressor_prefill(const double* f) {
  const double T = f[0], D = f[1], r = f[2], coff = r <= 4 ? 2 : 1;
  return {T * D * coff * 6, T * coff * D * 2 * 2 + T / r * (D + 72), DType::bf16};
}
Work w_compressor_decode(const double* f) {
  const double B = f[0], D = f[1], r = f[2], coff = r <= 4 ? 2 : 1;
  return {B * D * coff * r * 6, B * coff * r * D * 2 * 2 * 2 + B * (D + 72), DType::bf16};
}
Work w_act_situ(const double* f) { return {30 * f[0] * f[1], 6 * f[0] * f[1], DType::bf16}; }
Work w_act_swiglu(const double* f) { return {10 * f[0] * f[1], 6 * f[0] * f[1], DType::bf16}; }
Work w_latent_rmsnorm(const double* f) { return {4 * f[0] * f[1], 4 * f[0] * f[1], DType::bf16}; }
// router: tokens T, experts E, hidden D (top-k ≈ 16 in the byte count)
Work w_router(const double* f) {
  const double T = f[0], E = f[1], D = f[2];
  return {2 * T * D * E + 10 * T * E, 2 * E * D + 2 * T * D + 8 * T * E + 8 * T * 16, DType::bf16};
}
// permute / combine: tokens T, top_k k, width D
Work w_permute(const double* f) { return {0, 2 * f[0] * f[2] + 2 * f[0] * f[1] * f[2] + 12 * f[0] * f[1], DType::bf16}; }
Work w_combine(const double* f) { return {2 * f[0] * f[1] * f[2], 2 * f[0] * f[1] * f[2] + 2 * f[0] * f[2] + 8 * f[0] * f[1], DType::bf16}; }
// mHC one sublayer (pre + post): tokens T, hidden D
Work w_mhc(const double* f) { return {248 * f[0] * f[1], 28 * f[0] * f[1], DType::bf16}; }

// --------------------------------------------------------------- feature transforms (tiles, waves)
// f[0] experts G, f[1] rows: rows → G · pad(rows / G)
// kernels/moe W4A16: token tile bt = next power of two ≥ the mean rows per active expert, in [8, 256]
double w4a16_tile(double mean) { return std::clamp(std::exp2(std::ceil(std::log2(std::max(mean, 1.0)) - 1e-9)), 8.0, 256.0); }
// FP8 grouped GEMM, the faster instrument per shape (own kernels kernels/moe/gemm_fp8.cu and
// gemm_fp8_tm.cu, or per-expert cuBLASLt above a few hundred rows): rows padded to the own kernel's
// token tile, the next power of two ≥ m in [8, 128], then to multiples of 128 (the 128-token tile
// of the tokens-as-M kernel, which runs above one tile per expert; t_fp8_waves counts its waves)
double pad_fp8(double m) { return m <= 128 ? w4a16_tile(m) : 128 * std::ceil(m / 128 - 1e-9); }
double pad_bf16(double m) { return m <= 64 ? m : 64 * std::ceil(m / 64 - 1e-9); }  // cublasGemmGroupedBatchedEx: 64-row steps (measured)
// top-k: one 1024-thread block per row, one block per SM (132 SMs on the H200): rows run in waves
void t_waves(double* f) { f[0] = f[0] <= 132 ? f[0] : 132 * std::ceil(f[0] / 132 - 1e-9); }
// Absorbed MLA decode (kernels/attention/mqa.cu mla_decode_plan, the wgmma/TMA kernel): one CTA per
// (64-head group, work item), G = ⌈H/64⌉ groups, W = ⌊132/G⌋ CTAs of a group per wave. A context of
// t = ⌈L/64⌉ tiles is cut into ⌈t/per⌉ items of `per` tiles, per = max(4, ⌈t/s⌉) over s = 1, 2, …
// minimising ⌈items/W⌉·(per + 2); each item then covers ⌈⌈L/ns⌉/64⌉·64 rows. Feature 1 becomes the
// rows of the busiest SM: ⌈B·ns/W⌉ waves × rows per item.
// The per minimising the cost (a pure function of B, tmax, W, remembered per thread: the decode
// context moves every step but tmax only every 64 tokens).
double mqa_best_per(double B, double tmax, double W) {
  struct Slot {
    double B = -1, tmax = -1, W = -1, per = 0;
  };
  thread_local std::vector<Slot> memo(1u << 12);
  const auto key = static_cast<std::uint64_t>(B) * 0x9E3779B97F4A7C15ull ^ static_cast<std::uint64_t>(tmax) * 0xBF58476D1CE4E5B9ull ^
                   static_cast<std::uint64_t>(W);
  Slot& m = memo[(key ^ (key >> 29)) & (memo.size() - 1)];
  if (m.B == B && m.tmax == tmax && m.W == W) return m.per;
  double best_per = tmax, best_cost = 1e300;
  // s = 1, 2, ... visiting only the first s of each run of equal ⌈tmax/s⌉ (the others repeat its
  // cost, which never strictly improves): after q = ⌈tmax/s⌉ > 4 the next new value is at
  // s = ⌈tmax/(q−1)⌉ (all integers below 2^53: the double quotients round to the exact ceilings)
  for (double s = 1; s <= std::min(tmax, 1024.0);) {
    const double q = std::ceil(tmax / s), per = std::max(4.0, q);
    const double items = B * std::max(1.0, std::ceil(tmax / per));
    const double cost = std::ceil(items / W) * (per + 2);
    if (cost < best_cost - 1e-9) best_cost = cost, best_per = per;
    if (per == 4) break;
    s = std::ceil(tmax / (q - 1));
  }
  m = {B, tmax, W, best_per};
  return best_per;
}
void t_mqa_plan(double* f) {
  const double B = std::max(1.0, std::round(f[0])), L = std::max(1.0, f[1]), H = f[2];
  const double G = std::max(1.0, std::ceil(H / 64)), W = std::max(1.0, std::floor(132 / G));
  const double tmax = std::max(1.0, std::ceil(L / 64));
  const double best_per = mqa_best_per(B, tmax, W);
  const double ns = std::max(1.0, std::ceil(L / (best_per * 64)));
  const double len = 64 * std::ceil(std::ceil(L / ns) / 64);
  f[1] = std::ceil(B * ns / W) * len;
}
// MHA prefill (our wgmma kernel, kernels/attention/mla_prefill_wg.cu: a block per (128 query rows,
// head), one block per SM, 213 KB of shared memory): H · ⌈N/128⌉ tiles over 132 SMs, the time
// follows the tiles of the busiest SM; the chunk becomes the chunk that many tiles per SM could hold
// (below one tile per SM every SM still takes a whole tile). cuDNN's fused attention, the earlier
// instrument, tiles the same way.
void t_prefill_waves(double* f) {
  const double H = std::max(1.0, f[2]), tiles = H * std::ceil(f[0] / 128 - 1e-9);
  f[0] = std::max(f[0], 132 * std::ceil(tiles / 132 - 1e-9) * 128 / H);
}
// FP8 grouped GEMM above one token tile per expert (mean padded rows per expert > 128): the
// tokens-as-M kernel (kernels/moe/gemm_fp8_tm.cu, variant 5: a CTA per 128 token rows × 256 weight
// rows, 192 KB of shared memory, one CTA per SM) runs ⌈rows/128⌉ · ⌈N/256⌉ tiles over 132 SMs, and
// its time steps with the waves ⌈tiles/132⌉ (measured, N 4096 K 7168: 2 experts × 384 or 512 rows,
// 96 or 128 tiles, one wave, 54-56 µs; × 768 or 1024, 192 or 256 tiles, two waves, 103 µs; per-expert
// cuBLASLt steps at the same points). From the second wave on, the rows become those that the
// waves hold when full, 132 · 128 / ⌈N/256⌉ rows per wave (the form of t_prefill_waves); inside
// the first wave they stay as they are (the time there grows slowly with the rows, 47 → 50 µs over
// 2 × 192 → 2 × 512 at that shape, after the launch gap), and so do they at most one token tile per
// expert (the weights-as-M kernel, bound by the weight reads).
void t_fp8_waves(double* f) {
  const double G = std::max(f[0], 1e-9), rows = f[1];
  if (rows / G <= 128 * (1 + 1e-9)) return;
  const double n_tiles = std::max(1.0, std::ceil(f[2] / 256 - 1e-9));
  const double waves = std::ceil(std::ceil(rows / 128 - 1e-9) * n_tiles / 132 - 1e-9);
  if (waves > 1) f[1] = std::max(rows, 132 * waves * 128 / n_tiles);
}
// short conv prefill: elements (tokens · channels) over a fixed grid
Work w_conv_elements(const double* f) { return {8 * f[0], f[0] * 4, DType::bf16}; }

using WorkFn = Work (*)(const double*);

void set_family(std::vector<FamilyInfo>& v, Family id, std::string name, std::string cls, std::string kernel, std::vector<std::string> feats,
                std::vector<double> gap, std::vector<bool> mono, std::vector<int> series, double lambda, WorkFn work) {
  FamilyInfo& f = v[static_cast<int>(id)];
  f.id = id, f.name = std::move(name), f.op_class = std::move(cls), f.kernel = std::move(kernel);
  f.features = std::move(feats), f.min_gap = std::move(gap), f.monotone = std::move(mono), f.series = std::move(series);
  f.lambda = lambda, f.work = work;
  // curvature is penalised fully along the swept features and 100x less across the measured
  // shapes (series), so a held-out point follows its own series rather than its neighbours
  f.smooth.assign(f.features.size(), 1.0);
  for (int a : f.series) f.smooth[a] = 0.01;
}

// λ: curvature weight vs the data (log2 units). 1e-2 everywhere (chosen on the k-fold error of
// every family among 1e-4..1e-1; 1e-5 is ill-conditioned), 1e-3 for indexer_decode.
constexpr double kLambda = 1e-2;

/// Dense and grouped-expert GEMMs.
void set_gemm_families(std::vector<FamilyInfo>& v) {
  // gemm_bf16 is not monotone in N: cuBLAS at N = 12 (K3 b_proj at attention TP 8, 24-byte output
  // rows) measured 21.7 µs at M = 3072 against 11.6 µs at N = 24 (TP 4).
  set_family(v, Family::gemm_bf16, "gemm_bf16", "dense GEMM",
      "cuBLASLt/cuBLAS BF16: dense_proj_* */bf16 at batch 1, moe_shared_expert and dense_ffn_k3 w13/w2, latentmoe_proj down/up, "
      "moe_grouped_gemm_bf16 cublas_dense_same_flops, the 8192^3 ceilings",
      {"M", "N", "K"}, {0.2, 0.1, 0.1}, {true, false, true}, {1, 2}, kLambda, w_gemm_bf16);
  set_family(v, Family::gemm_bf16_batched, "gemm_bf16_batched", "dense GEMM",
      "cuBLAS strided-batched BF16: dense_proj_k3_mla w_uk_absorb, w_uv (one product per head on the GPU), "
      "dense_proj_v4* wo_a_grouped/bf16 (one per output group)",
      {"M", "N", "K", "batch"}, {0.2, 0.1, 0.1, 0.1}, {true, true, true, true}, {1, 2, 3}, kLambda, w_gemm_bf16_batched);
  set_family(v, Family::gemm_fp8, "gemm_fp8", "dense GEMM", "FP8 e4m3, 1x128 act / 128x128 weight scales, the faster per shape of cuBLASLt and the own split-K wgmma kernel (kernels/attention/proj_fp8.cu, issue 13; since the eighteenth session its rows are timed with programmatic dependent launch between back-to-back calls, as an engine whose kernels all allow PDL runs them: ~1-2 us per call less than without at decode sizes): dense_proj_* */fp8_block_scale and */fp8_block_scale_own",
      {"M", "N", "K"}, {0.2, 0.1, 0.1}, {true, true, true}, {1, 2}, kLambda, w_gemm_fp8);
  set_family(v, Family::grouped_w4a16, "grouped_w4a16", "grouped expert GEMM",
      "own MXFP4 W4A16 grouped wgmma kernel (variant 4): moe_grouped_gemm_w4a16 w4a16, uniform routing; rows padded to the token tile",
      {"experts", "rows", "N", "K"}, {0.1, 0.2, 0.1, 0.1}, {true, true, true, true}, {2, 3}, kLambda, w_grouped_w4a16);
  set_family(v, Family::grouped_fp8, "grouped_fp8", "grouped expert GEMM",
      "FP8 block-scaled grouped GEMM, the fastest at each shape of the own wgmma kernel (kernels/moe/gemm_fp8.cu, masked / contiguous layouts) and one cuBLASLt matmul per expert: moe_grouped_gemm_fp8; rows per expert padded to the own kernel's token tile (8-128), then to multiples of 128; above one tile per expert "
      "the rows follow the waves of the tokens-as-M kernel (gemm_fp8_tm.cu, 128x256 tiles, one CTA per SM): ceil(rows/128) x ceil(N/256) "
      "tiles over 132 SMs; from two waves on, rows := the rows ceil(tiles/132) full waves hold (132 x 128 / ceil(N/256) per wave)",
      {"experts", "rows", "N", "K"}, {0.1, 0.2, 0.1, 0.1}, {true, true, true, true}, {2, 3}, kLambda, w_grouped_fp8);
  v[static_cast<int>(Family::grouped_fp8)].transform = t_fp8_waves;
  set_family(v, Family::grouped_bf16, "grouped_bf16", "grouped expert GEMM",
      "cublasGemmGroupedBatchedEx BF16: moe_grouped_gemm_bf16 cublas_grouped; rows per expert padded to 64 as measured",
      {"experts", "rows", "N", "K"}, {0.1, 0.2, 0.1, 0.1}, {true, true, true, true}, {2, 3}, kLambda, w_grouped_bf16);
}

/// KDA prefill/decode and its short conv and gated RMSNorm.
void set_kda_families(std::vector<FamilyInfo>& v) {
  set_family(v, Family::kda_prefill, "kda_prefill", "KDA", "KDA chunked prefill K1+K2 (C=16, D=128): kda_prefill k1+k2",
      {"tokens", "seq_len", "heads"}, {0.2, 0.2, 0.1}, {true, true, true}, {2}, kLambda, w_kda_prefill);
  set_family(v, Family::kda_decode_fp32, "kda_decode_fp32", "KDA", "KDA recurrent step, fp32 state: kda_decode state_fp32", {"batch", "heads"},
      {0.2, 0.1}, {true, true}, {1}, kLambda, w_kda_decode_fp32);
  set_family(v, Family::kda_decode_bf16, "kda_decode_bf16", "KDA", "KDA recurrent step, bf16 state: kda_decode state_bf16", {"batch", "heads"},
      {0.2, 0.1}, {true, true}, {1}, kLambda, w_kda_decode_bf16);
  set_family(v, Family::short_conv_prefill, "short_conv_prefill", "elementwise",
      "KDA width-4 causal conv + SiLU: kda_short_conv prefill (time follows tokens x channels: both channel counts on one curve)",
      {"elements"}, {0.1}, {true}, {}, kLambda, w_conv_elements);
  set_family(v, Family::short_conv_decode, "short_conv_decode", "elementwise", "KDA conv state update: kda_short_conv decode", {"batch", "channels"},
      {0.2, 0.1}, {true, true}, {1}, kLambda, w_conv_decode);
  set_family(v, Family::gated_rmsnorm, "gated_rmsnorm", "elementwise", "KDA RMSNorm(128)·w·sigmoid(gate): kda_gated_rmsnorm fused", {"tokens", "heads"},
      {0.2, 0.1}, {true, true}, {1}, kLambda, w_gated_rmsnorm);
}

/// Attention cores: MLA decode/prefill and the V4 sparse/compressed core.
void set_attention_families(std::vector<FamilyInfo>& v) {
  set_family(v, Family::mla_decode, "mla_decode", "attention decode",
      "absorbed-MQA decode over the BF16 latent cache: mla_decode wgmma_tma_m64_tn64_seesaw_rsp_fastsm (variant 12, sm_90a, 64-head groups, P from registers, S1 issued after S0 blocks 0-3, FFMA softmax; H 12-128), mixed contexts",
      {"batch", "sm_rows", "heads"}, {0.2, 0.2, 0.1}, {false, true, false}, {2}, kLambda, w_mla_decode);
  v[static_cast<int>(Family::mla_decode)].transform = t_mqa_plan;
  set_family(v, Family::mla_prefill, "mla_prefill", "attention prefill",
      "MHA-mode causal attention core: mla_prefill wgmma_tma_bm128_bn128_pingpong (sm_90a, kernels/attention/mla_prefill_wg.cu; a cached prefix in the same call; 12/24/48/96 heads); keys_mean = prefix + (chunk+1)/2 keys per query",
      {"chunk", "keys_mean", "heads"}, {0.2, 0.2, 0.1}, {true, true, true}, {2}, kLambda, w_mla_prefill);
  v[static_cast<int>(Family::mla_prefill)].transform = t_prefill_waves;
  set_family(v, Family::v4_attn_decode, "v4_attn_decode", "attention decode",
      "V4 attention core over FP8 584-B rows: csa_sparse_attn_decode, hca_attn_decode, swa_attn_decode (current tile configs; *_r1 rows only where no current row has the shape)",
      {"batch", "rows_per_query", "heads"}, {0.2, 0.1, 0.1}, {true, true, false}, {2}, kLambda, w_v4_decode);
  set_family(v, Family::v4_attn_prefill, "v4_attn_prefill", "attention prefill",
      "same core, one index list per query: csa_sparse_attn_prefill, hca_attn_prefill, swa_attn_prefill (*_r1 rows only for shapes not measured otherwise); ramp = longest query's rows / mean rows (1 after a long prefix, up to ~1.8 at prefix 0)",
      {"chunk", "rows_mean", "heads", "ramp"}, {0.2, 0.1, 0.1, 0.1}, {true, true, false, true}, {2}, kLambda, w_v4_prefill);
}

/// V4 lightning indexer, top-k and the compressors.
void set_indexer_families(std::vector<FamilyInfo>& v) {
  set_family(v, Family::indexer_decode, "indexer_decode", "indexer", "lightning-indexer logits, FP8, 64 heads x 128: csa_indexer decode",
      {"batch", "keys_per_query", "heads"}, {0.2, 0.2, 0.1}, {true, true, true}, {}, 1e-3, w_indexer_decode);
  set_family(v, Family::indexer_prefill, "indexer_prefill", "indexer", "csa_indexer prefill", {"chunk", "keys_mean", "heads"}, {0.2, 0.1, 0.1},
      {true, true, true}, {}, kLambda, w_indexer_prefill);
  set_family(v, Family::topk_decode, "topk_decode", "indexer",
      "top-k of the logits: csa_topk decode, rows longer than k (the shared-memory row select at batch 133-264 x rows 3,072-12,288 logits (192 rows and more) or 2,048-12,288 (below 192), the one-read threshold filter at batch >= 192 or rows >= 49,152 logits elsewhere, the one-CTA radix select otherwise: kernels/attention/dsv4_topk*.cuh v4_topk_uses_row); batch in waves of 132 rows",
      {"batch", "row_len", "topk"}, {0.2, 0.2, 0.1}, {true, true, false}, {2}, kLambda, w_topk);
  v[static_cast<int>(Family::topk_decode)].transform = t_waves;
  set_family(v, Family::topk_decode_copy, "topk_decode_copy", "indexer", "csa_topk decode, rows of at most k logits (copied)", {"batch", "row_len"},
      {0.2, 0.1}, {true, true}, {}, kLambda, w_topk);
  set_family(v, Family::topk_prefill, "topk_prefill", "indexer", "csa_topk prefill", {"chunk", "len_mean", "topk"}, {0.2, 0.1, 0.1}, {true, true, false},
      {2}, kLambda, w_topk);
  set_family(v, Family::compressor_prefill, "compressor_prefill", "elementwise",
      "V4 compressors (pool, RMSNorm, RoPE, FP8): csa_compressor main/indexer_prefill, hca_compressor main_prefill",
      {"tokens", "head_dim", "ratio"}, {0.2, 0.1, 0.1}, {true, true, false}, {1, 2}, kLambda, w_compressor_prefill);
  set_family(v, Family::compressor_decode, "compressor_decode", "elementwise", "csa_compressor main/indexer_decode, hca_compressor main_decode",
      {"batch", "head_dim", "ratio"}, {0.2, 0.1, 0.1}, {true, true, false}, {1, 2}, kLambda, w_compressor_decode);
}

/// Activations, latent RMSNorm, router, permute/combine and mHC.
void set_elementwise_families(std::vector<FamilyInfo>& v) {
  set_family(v, Family::act_situ, "act_situ", "elementwise", "K3 SiTU GLU: moe_act_situ routed/shared/dense", {"rows", "I"}, {0.2, 0.1}, {true, true},
      {1}, kLambda, w_act_situ);
  set_family(v, Family::act_swiglu, "act_swiglu", "elementwise", "DeepSeek SwiGLU clamped at 10: moe_act_swiglu", {"rows", "I"}, {0.2, 0.1},
      {true, true}, {1}, kLambda, w_act_swiglu);
  set_family(v, Family::latent_rmsnorm, "latent_rmsnorm", "elementwise", "K3 RMSNorm(3584): latentmoe_proj rmsnorm", {"tokens", "width"}, {0.2, 0.1},
      {true, true}, {}, kLambda, w_latent_rmsnorm);
  set_family(v, Family::router, "router", "router", "cuBLAS gate GEMM + scoring + top-k: moe_router_k3 / moe_router_dsv4 gemm_topk",
      {"tokens", "experts", "hidden"}, {0.2, 0.1, 0.1}, {true, true, true}, {1, 2}, kLambda, w_router);
  set_family(v, Family::permute, "permute", "elementwise", "histogram + scan + gather to expert slots: moe_permute (uniform routing)",
      {"tokens", "top_k", "width"}, {0.2, 0.1, 0.1}, {true, true, true}, {1, 2}, kLambda, w_permute);
  set_family(v, Family::combine, "combine", "elementwise", "weighted combine of the k expert outputs: moe_combine combine (uniform routing)",
      {"tokens", "top_k", "width"}, {0.2, 0.1, 0.1}, {true, true, true}, {1, 2}, kLambda, w_combine);
  set_family(v, Family::mhc, "mhc", "elementwise", "V4 mHC, one sublayer (pre GEMM + Sinkhorn kernel + post): mhc_mix pre_post", {"tokens", "hidden"},
      {0.2, 0.1}, {true, true}, {1}, kLambda, w_mhc);
}

std::vector<FamilyInfo> build() {
  std::vector<FamilyInfo> v(kFamilyCount);
  set_gemm_families(v);
  set_kda_families(v);
  set_attention_families(v);
  set_indexer_families(v);
  set_elementwise_families(v);
  return v;
}

const std::vector<FamilyInfo>& all() {
  static const std::vector<FamilyInfo> v = build();
  return v;
}


}  // namespace

double v4_rows_per_query(double L, double window, double ratio, double topk) {
  const double win = std::min(window, L);
  if (ratio <= 0) return win;
  const double entries = std::floor(L / ratio);
  return (topk > 0 ? std::min(topk, entries) : entries) + win;
}

double v4_prefill_ramp(double rows_max, double rows_mean) {
  return rows_max > 0 && rows_mean > 0 ? std::max(1.0, rows_max / rows_mean) : 1.0;
}

const FamilyInfo& family_info(Family f) { return all()[static_cast<int>(f)]; }

Family family_by_name(std::string_view name) {
  std::string names;
  for (const auto& f : all()) {
    if (f.name == name) return f.id;
    names += (names.empty() ? "" : ", ") + f.name;
  }
  throw std::invalid_argument("unknown kernel family \"" + std::string(name) + "\" (known: " + names + ")");
}

double pad_rows(Family f, double m, double mean_active) {
  switch (f) {
    case Family::grouped_w4a16: {
      const double bt = w4a16_tile(mean_active);
      return bt * std::ceil(m / bt - 1e-9);
    }
    case Family::grouped_fp8: return pad_fp8(m);
    case Family::grouped_bf16: return pad_bf16(m);
    default: return m;
  }
}

double expected_padded_rows(Family f, double rows, double held, double active) {
  if (rows <= 0 || held <= 0) return 0;
  const double lambda = rows / held, mean_active = rows / std::max(active, 1e-9);
  // Poisson(λ) pmf walked outwards from its mode by the ratio p(j±1)/p(j) (one lgamma per call)
  const long mode = std::max(1L, static_cast<long>(std::floor(lambda)));
  const double p_mode = std::exp(mode * std::log(lambda) - lambda - std::lgamma(mode + 1.0));
  double e = p_mode * pad_rows(f, static_cast<double>(mode), mean_active);
  double p = p_mode;
  for (long j = mode + 1; p > 1e-13 * p_mode || j <= lambda + 12; ++j) {
    p *= lambda / j;
    e += p * pad_rows(f, static_cast<double>(j), mean_active);
  }
  p = p_mode;
  for (long j = mode - 1; j >= 1; --j) {
    p *= (j + 1) / lambda;
    if (p < 1e-13 * p_mode) break;
    e += p * pad_rows(f, static_cast<double>(j), mean_active);
  }
  return held * e;
}

void transform_features(const FamilyInfo& f, const double* x, double* out) {
  const int d = static_cast<int>(f.features.size());
  for (int a = 0; a < d; ++a) out[a] = x[a];
  if (f.transform) f.transform(out);
}

double family_seconds(const FamilyInfo& f, const FittedFamily& fit, const double* x, const Ceilings& ref, bool* extrapolated) {
  const int d = fit.grid.dims();
  // Grouped expert GEMMs outside the measured expert counts: the same kernel over G/G_edge copies
  // of a G_edge-expert group, each with its share of the rows (roofline-consistent: weights scale
  // with G, FLOPs with the rows; and monotone in both, unlike a bound ratio at a clamped G).
  if (is_grouped(f.id) && x[0] > 0) {
    const double G = x[0], ge = std::clamp(G, std::exp2(fit.grid.lo(0)), std::exp2(fit.grid.hi(0)));
    if (std::abs(std::log2(G / ge)) > 1e-9) {
      const double y[4] = {ge, x[1] * ge / G, x[2], x[3]};
      if (extrapolated) *extrapolated = true;
      return G / ge * family_seconds(f, fit, y, ref, extrapolated);
    }
  }
  double lx[kMaxGridDims] = {}, xc[kMaxGridDims] = {}, xq[kMaxGridDims] = {};
  transform_features(f, x, xq);
  bool out = false;
  for (int a = 0; a < d; ++a) xq[a] = std::max(xq[a], 1e-30), lx[a] = std::log2(xq[a]);
  const FittedFamily::SeriesRange* range = nullptr;
  for (const auto& r : fit.ranges) {
    bool match = true;
    for (size_t k = 0; k < f.series.size() && match; ++k) match = std::abs(r.key[k] - lx[f.series[k]]) < 1e-6;
    if (match) {
      range = &r;
      break;
    }
  }
  bool beyond_shape = false;
  for (int a = 0; a < d; ++a) {
    // above a measured shape's own range the grid value is the smooth fill between shapes: kept,
    // but flagged as extrapolated
    if (range && lx[a] > range->hi[a] + 1e-9) beyond_shape = true;
    const double c = std::clamp(lx[a], fit.grid.lo(a), fit.grid.hi(a));
    xc[a] = xq[a];
    if (std::abs(c - lx[a]) > 1e-9) out = true, xc[a] = std::exp2(c);
    lx[a] = c;
  }
  double t = std::exp2(fit.grid.eval(lx));
  if (out) {
    const double rq = ref.bound(f.work(xq)), rc = ref.bound(f.work(xc));
    const double ratio = rc > 0 ? rq / rc : 1.0;
    t = ratio >= 1 ? t * ratio : std::max(t * ratio, std::min(t, fit.floor_s));
  }
  if (extrapolated && (out || beyond_shape)) *extrapolated = true;
  return t;
}

}  // namespace servesim
