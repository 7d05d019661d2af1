#include "costmodels/expert_load.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace servesim {
namespace {

// Fixed seeds: the popularity profiles and the bucket tables are properties of the model and the
// placement, not of a run; the engine's per-step choice among them uses the scenario's seed.
constexpr std::uint64_t kProfileSeed = 0x45504c42'70726f66ULL;  // "EPLBprof"
constexpr std::uint64_t kBucketSeed = 0x45504c42'62756b74ULL;   // "EPLBbukt"

int bucket_of(double tokens) { return static_cast<int>(std::lround(8.0 * std::log2(std::max(1.0, tokens)))); }
// sequence buckets: 2 per doubling (σ² steps by at most √2 in its sequence term), capped at 2^24
// sequences (beyond, sequence_sigma²/S is nil)
int seq_bucket_of(double seqs) { return static_cast<int>(std::lround(2.0 * std::log2(std::clamp(seqs, 1.0, 16777216.0)))); }

}  // namespace

double cap_shares(std::vector<double>& p, double tot, double cap) {
  // water-filling: experts above the cap are pinned at it and the rest scaled up to fill 1, until
  // no share exceeds it (at most one pass per pinned expert; feasible because p.size() * cap >= 1)
  if (p.empty() || tot <= 0 || cap >= 1 || *std::max_element(p.begin(), p.end()) <= cap * tot) return tot;  // the common case: no allocation
  std::vector<char> pinned(p.size(), 0);
  double free_mass = tot, pinned_share = 0;
  for (bool again = true; again;) {
    again = false;
    const double scale = (1 - pinned_share) / free_mass;  // share of one unit of unpinned mass
    for (size_t e = 0; e < p.size(); ++e)
      if (!pinned[e] && p[e] * scale > cap) pinned[e] = 1, free_mass -= p[e], pinned_share += cap, again = true;
    if (free_mass <= 0) break;
  }
  if (pinned_share == 0) return tot;
  // rewrite p as shares of 1 (pinned ones at the cap)
  const double scale = free_mass > 0 ? (1 - pinned_share) / free_mass : 0;
  for (size_t e = 0; e < p.size(); ++e) p[e] = pinned[e] ? cap : p[e] * scale;
  return 1.0;
}

double power_law_draw(double u, double alpha, double lo, double hi) {
  if (std::abs(alpha - 1.0) < 1e-9) return lo * std::pow(hi / lo, u);
  const double a = 1.0 - alpha;
  return std::pow((std::pow(hi, a) - std::pow(lo, a)) * u + std::pow(lo, a), 1.0 / a);
}

std::vector<std::vector<std::pair<int, double>>> eplb_placement(const std::vector<double>& w, int gpus, int redundant) {
  const int E = static_cast<int>(w.size());
  std::vector<int> rep(static_cast<size_t>(E), 1);
  for (int r = 0; r < redundant; ++r) {
    int best = 0;
    for (int e = 1; e < E; ++e)
      if (w[static_cast<size_t>(e)] / rep[static_cast<size_t>(e)] > w[static_cast<size_t>(best)] / rep[static_cast<size_t>(best)]) best = e;
    ++rep[static_cast<size_t>(best)];
  }
  struct Slot {
    double load;
    int expert;
  };
  std::vector<Slot> slots;
  for (int e = 0; e < E; ++e)
    for (int r = 0; r < rep[static_cast<size_t>(e)]; ++r) slots.push_back({w[static_cast<size_t>(e)] / rep[static_cast<size_t>(e)], e});
  std::stable_sort(slots.begin(), slots.end(), [](const Slot& a, const Slot& b) { return a.load > b.load; });
  const size_t per = (slots.size() + static_cast<size_t>(gpus) - 1) / static_cast<size_t>(gpus);
  std::vector<double> load(static_cast<size_t>(gpus), 0.0);
  std::vector<std::vector<std::pair<int, double>>> out(static_cast<size_t>(gpus));
  for (const Slot& s : slots) {
    int g = -1;
    for (int i = 0; i < gpus; ++i)
      if (out[static_cast<size_t>(i)].size() < per && (g < 0 || load[static_cast<size_t>(i)] < load[static_cast<size_t>(g)])) g = i;
    load[static_cast<size_t>(g)] += s.load;
    out[static_cast<size_t>(g)].push_back({s.expert, 1.0 / rep[static_cast<size_t>(s.expert)]});
  }
  return out;
}

ExpertLoad::ExpertLoad(const FfnSpec& f, int ep, int redundant, bool eplb) {
  if (ep < 1) throw std::invalid_argument("ExpertLoad: ep must be >= 1");
  if (redundant > 0 && !eplb) throw std::invalid_argument("ExpertLoad: redundant experts are placed by EPLB");
  experts_ = f.experts, top_k_ = f.top_k, ep_ = ep, drift_ = f.popularity.drift_sigma, seq_sigma_ = f.popularity.sequence_sigma;
  balanced_ = f.op != FfnOp::moe || f.popularity.alpha <= 0 || ep == 1 || f.experts < 1;
  if (balanced_) return;
  Rng rng(kProfileSeed ^ (static_cast<std::uint64_t>(experts_) << 32) ^ (static_cast<std::uint64_t>(ep) << 16) ^
          static_cast<std::uint64_t>(redundant));
  for (int l = 0; l < kProfiles; ++l) {
    Profile p;
    for (int e = 0; e < experts_; ++e) p.w.push_back(power_law_draw(rng.uniform(), f.popularity.alpha, 1.0, f.popularity.range));
    if (eplb) {
      p.gpu = eplb_placement(p.w, ep, redundant);
    } else {  // experts in id order, ceil(E / N) per GPU
      p.gpu.resize(static_cast<size_t>(ep));
      const int per = (experts_ + ep - 1) / ep;
      for (int e = 0; e < experts_; ++e) p.gpu[static_cast<size_t>(std::min(ep - 1, e / per))].push_back({e, 1.0});
    }
    profiles_.push_back(std::move(p));
  }
}

// One draw: the mean over the profiles of max_g / mean_g of the GPUs' token-expert assignments.
double ExpertLoad::sample_once(double tokens, double sigma, Rng& rng, std::vector<double>& p) const {
  const double A = tokens * top_k_, mean = A / ep_;
  double sum = 0;
  for (const Profile& pr : profiles_) {
    p.resize(pr.w.size());
    double tot = 0;
    for (size_t e = 0; e < p.size(); ++e) tot += p[e] = pr.w[e] * std::exp(sigma * rng.normal());
    tot = cap_shares(p, tot, 1.0 / top_k_);
    double mx = 0;
    for (const auto& g : pr.gpu) {
      double s = 0;
      for (const auto& [e, share] : g) s += share * p[static_cast<size_t>(e)];
      s /= tot;
      const double load = std::max(0.0, A * s + std::sqrt(A * s * std::max(0.0, 1 - s)) * rng.normal());
      mx = std::max(mx, load);
    }
    sum += mx / mean;
  }
  return sum / static_cast<double>(profiles_.size());
}

int ExpertLoad::seq_key(double seqs) const {
  return seq_sigma_ > 0 && seqs > 0 && std::isfinite(seqs) ? 1 + seq_bucket_of(seqs) : 0;
}

double ExpertLoad::step_sigma(double seqs) const {
  const int k = seq_key(seqs);
  if (k == 0) return drift_;
  return std::sqrt(drift_ * drift_ + seq_sigma_ * seq_sigma_ / std::exp2((k - 1) / 2.0));
}

const std::array<double, ExpertLoad::kSamples>& ExpertLoad::samples(double tokens, double seqs) const {
  const int b = bucket_of(tokens);
  const double t = std::exp2(b / 8.0);
  const std::pair<int, int> key{b, seq_key(seqs)};
  auto it = buckets_.find(key);
  if (it != buckets_.end()) return it->second;
  std::array<double, kSamples> v;
  v.fill(1.0);
  if (!balanced_) {
    Rng rng(kBucketSeed ^ static_cast<std::uint64_t>(b));
    std::vector<double> p;
    const double sigma = step_sigma(seqs);
    for (double& x : v) x = sample_once(t, sigma, rng, p);
  }
  return buckets_.emplace(key, v).first->second;
}

ExpertLoad::Draw ExpertLoad::draw(double tokens, Rng& rng, double seqs) const {
  if (balanced_) return {};
  const auto& v = samples(tokens, seqs);
  const int i = pick(rng);
  return {v[static_cast<size_t>(i)], i};
}

double ExpertLoad::expected(double tokens, double seqs) const {
  if (balanced_) return 1.0;
  const auto& v = samples(tokens, seqs);
  return std::accumulate(v.begin(), v.end(), 0.0) / kSamples;
}

}  // namespace servesim
