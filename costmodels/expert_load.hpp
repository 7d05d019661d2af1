// servesim costmodels: how unevenly an EP group's GPUs are loaded by routed experts, per step.
//
// A MoE step waits for its busiest GPU. Each MoE kind carries a per-expert popularity model (model
// data, FfnSpec::popularity): long-run popularity w_e drawn from a bounded power law
// P(x) ∝ x^−α on [1, range] (the form of ai-dynamo/aiconfigurator docs/POWER_LAW_DISTRIBUTION.md),
// jittered every step by a log-normal factor exp(σ·z_e) (popularity drifts away from what the
// placement was balanced for), and multinomial routing noise on the T·k token-expert assignments
// of the step. σ² = drift_sigma² + sequence_sigma² / S, where S = (Σ t_i)² / Σ t_i·(t_i − 1) is the
// step's effective number of sequences (t_i: sequence i's new tokens): tokens of one prompt route
// alike, so a prefill step of a few hundred prompts drifts further from the long-run popularity
// than a decode step, whose sequences add one token each (t_i = 1: no pair of tokens shares a
// sequence, no sequence term; with MTP, t_i = k + 1 gives a small one). sequence_sigma is an
// effective coefficient of the within-prompt covariance (the 1/S form of a mean over independent
// prompts), fitted to a published length trend, not a measured per-prompt spread; below the fitted
// range (S of a few hundred) it is an extrapolation, and at S of 1-8 the cap below decides much of
// the answer. No expert takes more than 1/top_k of the assignments (a token picks top_k distinct
// experts): shares above that are pinned there (cap_shares). Placement: with redundant experts (EPLB) the redundant slots replicate the most
// loaded experts (each replica takes an equal share) and slots are packed onto GPUs heaviest first
// onto the least-loaded GPU with a free slot (DeepSeek EPLB's replicate-then-pack; EPLB with no
// redundant slots only packs, E/N per GPU); without EPLB, experts sit in id order, E/N per GPU,
// and ids are unrelated to popularity.
//
// The figure a step uses is max_g(load_g) / mean_g(load_g) over the GPUs, averaged over
// `kProfiles` independent layer profiles (each MoE layer has its own hot experts). Calibration
// (DeepSeek-V3/R1, α = 1.01 from aiconfigurator; range 1e4 and σ = 0.09 chosen so that EP32,
// 8,192 tokens, top-8 gives max/mean ≈ 2.6 without EPLB and ≈ 1.11 with 32 redundant experts:
// TensorRT-LLM's measured 2.56 and 1.109, NVIDIA/TensorRT-LLM docs/source/blogs/tech_blog/
// blog4_Scaling_Expert_Parallelism_in_TensorRT-LLM.md Table 1; ../shared/reference/serving-overheads.md §1;
// sequence_sigma: the model file's source, fitted to SGLang's prefill with real vs perfectly
// balanced routing).
//
// Draws are precomputed per (token-count bucket, 8 per doubling; sequence bucket, 2 per doubling)
// as kSamples values from a fixed seed that depends on the token bucket only (the same random
// numbers at every sequence count, so a sample changes smoothly with S), so `servesim step` and
// the engine see the same distribution; a step picks one value with the engine's own random
// stream (draw()). No globals; the tables fill lazily (not thread-safe).
#pragma once
#include "scenarios/model_spec.hpp"
#include "scenarios/rng.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <vector>

namespace servesim {

class ExpertLoad {
 public:
  static constexpr int kProfiles = 4;  ///< independent layer popularity profiles averaged per step
  static constexpr int kSamples = 32;  ///< precomputed draws per token bucket

  /// f: a MoE kind (f.experts, f.top_k, f.popularity); ep: GPUs of the group; redundant: EPLB's
  /// extra slots; eplb: experts placed by EPLB (replicate, then pack by load; with redundant 0 only
  /// the packing) rather than in id order. Balanced (every figure exactly 1) when
  /// f.popularity.alpha == 0, ep == 1 or f is not MoE. Throws std::invalid_argument if ep < 1, or
  /// if redundant > 0 without eplb.
  ExpertLoad(const FfnSpec& f, int ep, int redundant, bool eplb);
  /// The same with eplb = (redundant > 0).
  ExpertLoad(const FfnSpec& f, int ep, int redundant) : ExpertLoad(f, ep, redundant, redundant > 0) {}

  bool balanced() const { return balanced_; }
  /// One step's draw for `tokens` tokens routed in the group from `seqs` effective sequences
  /// (StepParts::seqs_eff; 0 = one token per sequence: no sequence term): the busiest GPU's
  /// token-expert assignments / the mean (≥ 1 up to noise), and which of the bucket's samples it was.
  struct Draw {
    double load = 1;
    int index = 0;
  };
  Draw draw(double tokens, Rng& rng, double seqs = 0) const;
  /// One uniform sample index in [0, kSamples): one draw from `rng`.
  static int pick(Rng& rng) { return std::min(kSamples - 1, static_cast<int>(rng.uniform() * kSamples)); }
  /// Mean of the bucket's samples: the expected busiest/mean load (what `servesim step` prices).
  double expected(double tokens, double seqs = 0) const;
  /// The bucket's kSamples values (tests, reports).
  const std::array<double, kSamples>& samples(double tokens, double seqs = 0) const;
  /// 1 + the sequence bucket `seqs` falls in; 0 when there is no sequence term (sequence_sigma 0,
  /// seqs 0 or infinite). Part of a memo key for anything priced at this load.
  int seq_key(double seqs) const;
  /// σ of the per-step log-normal jitter at `seqs` effective sequences (the bucket's value).
  double step_sigma(double seqs) const;

 private:
  struct Profile {
    std::vector<double> w;                          // long-run popularity per expert
    std::vector<std::vector<std::pair<int, double>>> gpu;  // per GPU: (expert, share of its tokens)
  };
  double sample_once(double tokens, double sigma, Rng& rng, std::vector<double>& p) const;
  bool balanced_ = true;
  int experts_ = 0, top_k_ = 0, ep_ = 1;
  double drift_ = 0, seq_sigma_ = 0;
  std::vector<Profile> profiles_;
  mutable std::map<std::pair<int, int>, std::array<double, kSamples>> buckets_;
};

/// Caps every share p[e] / tot at `cap` by water-filling (pinned shares at the cap, the others
/// scaled to fill the rest). Returns the new total: `tot` untouched when no share exceeds the cap,
/// else 1 with p rewritten as shares. Needs p.size() · cap ≥ 1. No errors.
double cap_shares(std::vector<double>& p, double tot, double cap);

/// Bounded power-law draw by inverse transform: x ∈ [lo, hi] with density ∝ x^−alpha
/// (alpha == 1: log-uniform). u ∈ [0, 1). No errors (lo, hi > 0 assumed).
double power_law_draw(double u, double alpha, double lo, double hi);

/// EPLB placement of `w` (per-expert load) on `gpus` GPUs with `redundant` extra slots: per GPU the
/// (expert, share of that expert's tokens) it serves. Replicate: each extra slot goes to the expert
/// with the largest load per replica (ties: lowest id). Pack: slots heaviest first (ties: lowest
/// expert id) onto the GPU with the least load among those with a free slot (ties: lowest GPU), at
/// ceil((E + redundant) / gpus) slots per GPU. No errors.
std::vector<std::vector<std::pair<int, double>>> eplb_placement(const std::vector<double>& w, int gpus, int redundant);

}  // namespace servesim
