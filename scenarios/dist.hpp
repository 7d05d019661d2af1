// servesim scenarios: distributions of token counts and times, as scenario data. Sampling takes
// any generator with normal(), exponential(mean) and uniform() (scenarios/rng.hpp's Rng).
#pragma once

#include <algorithm>
#include <cmath>

namespace servesim {

/// constant: `value`; lognormal: exp(N(mu, sigma²)); exponential: mean `mean`; uniform: U[min, max].
/// Draws are clamped to [min, max]; token counts round to the nearest integer.
struct Dist {
  enum class Kind { constant, lognormal, exponential, uniform } kind = Kind::constant;
  double value = 1, mu = 0, sigma = 0, mean = 1;
  double min = 0, max = 1e18;

  template <class Rng>
  double sample(Rng& rng) const {
    double x = value;
    switch (kind) {
      case Kind::constant: x = value; break;
      case Kind::lognormal: x = std::exp(mu + sigma * rng.normal()); break;
      case Kind::exponential: x = rng.exponential(mean); break;
      case Kind::uniform: x = min + (max - min) * rng.uniform(); break;
    }
    return std::clamp(x, min, max);
  }
  template <class Rng>
  long long sample_tokens(Rng& rng) const { return std::llround(sample(rng)); }
  /// Mean of the distribution before clamping (for documentation and Little's-law estimates).
  double nominal_mean() const {
    switch (kind) {
      case Kind::constant: return value;
      case Kind::lognormal: return std::exp(mu + sigma * sigma / 2);
      case Kind::exponential: return mean;
      case Kind::uniform: return (min + max) / 2;
    }
    return value;
  }
};

}  // namespace servesim
