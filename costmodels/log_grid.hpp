// servesim costmodels: the numeric core of the kernel-fitted cost models. A latency surface
// log2(seconds) = g(log2 x_1, ..., log2 x_d) on a tensor-product grid of knots, evaluated by
// multilinear interpolation, and its penalised least-squares fit to scattered measurements
// (Eigen sparse Cholesky). Knots sit at the measured feature values, so a measured series is
// reproduced (up to the smoothing) and shapes between series are interpolated in log space.
#pragma once
#include <array>
#include <vector>

namespace servesim {

/// Most features a surface may have.
constexpr int kMaxGridDims = 4;

/// log2(seconds) on a grid. knots[a]: increasing log2 values of feature a (one knot = the feature
/// was measured at a single value); values: one per grid point, axis 0 slowest.
struct LogGrid {
  std::vector<std::vector<double>> knots;
  std::vector<double> values;

  int dims() const { return static_cast<int>(knots.size()); }
  double lo(int a) const { return knots[a].front(); }
  double hi(int a) const { return knots[a].back(); }
  /// Multilinear interpolation at log2 features x[0..dims()); each coordinate is clamped to its
  /// knot range first (callers handle extrapolation). Returns log2 seconds.
  double eval(const double* x) const;
};

struct GridFitOptions {
  std::vector<double> min_gap;   ///< per axis: distinct data values closer than this (log2) share a knot
  std::vector<bool> monotone;    ///< per axis: fitted values made non-decreasing along it
  std::vector<double> smooth;    ///< per axis: multiplier of λ for curvature along it (default 1; mixed terms √(w_a·w_b))
  double lambda = 1e-3;          ///< weight of the curvature penalty (second and mixed differences) vs the data
};

/// Fits g to points x[i] (log2 features, first `dims` entries used) with targets y[i] (log2
/// seconds): minimises Σ_i (g(x_i) − y_i)² + λ·Σ (discrete second derivatives along each axis and
/// mixed derivatives across axes, scaled to the knot spacing)², then makes the values
/// non-decreasing along the monotone axes: isotonic regression (pool-adjacent-violators) of every
/// grid line, alternating over the axes, then a cumulative maximum that guarantees it.
/// Knots are the distinct data values per axis, thinned by min_gap.
/// Throws std::invalid_argument if x is empty, sizes disagree or dims is outside [1, kMaxGridDims].
LogGrid fit_log_grid(const std::vector<std::array<double, kMaxGridDims>>& x, const std::vector<double>& y, int dims,
                     const GridFitOptions& opt);

}  // namespace servesim
