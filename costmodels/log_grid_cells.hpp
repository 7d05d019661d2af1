// servesim costmodels: the grid-cell walk shared by LogGrid::eval (costmodels/log_grid.cpp) and the
// fit's data rows (costmodels/calibration/log_grid_fit.cpp). Internal to those two files.
#pragma once
#include "costmodels/log_grid.hpp"

#include <algorithm>
#include <vector>

namespace servesim::grid_detail {

// Index of the knot interval [k[i], k[i+1]] holding x (x already clamped) and the weight of k[i+1].
inline void locate(const std::vector<double>& k, double x, int& i, double& w) {
  const int n = static_cast<int>(k.size());
  if (n == 1) {
    i = 0, w = 0;
    return;
  }
  auto it = std::upper_bound(k.begin(), k.end(), x);
  i = static_cast<int>(it - k.begin()) - 1;
  if (i < 0) i = 0;
  if (i > n - 2) i = n - 2;
  const double h = k[i + 1] - k[i];
  w = h > 0 ? (x - k[i]) / h : 0.0;
  w = std::clamp(w, 0.0, 1.0);
}

// Multilinear interpolation at x (clamped to the knot range): calls f(offset, weight) for each of
// the up to 2^d corners of x's grid cell with a non-zero weight, offset = Σ index·stride (row-major).
// Axes of a single knot have no upper corner. Shared by eval() and the fit's data rows.
template <class F>
void for_each_corner(const std::vector<std::vector<double>>& knots, const double* x, const int* stride, F&& f) {
  const int d = static_cast<int>(knots.size());
  int idx[kMaxGridDims];
  double w[kMaxGridDims];
  for (int a = 0; a < d; ++a) locate(knots[a], std::clamp(x[a], knots[a].front(), knots[a].back()), idx[a], w[a]);
  for (int c = 0; c < (1 << d); ++c) {
    double wt = 1;
    int off = 0;
    bool skip = false;
    for (int a = 0; a < d; ++a) {
      const bool up = (c >> a) & 1;
      if (up && knots[a].size() == 1) {
        skip = true;
        break;
      }
      wt *= up ? w[a] : 1 - w[a];
      off += (idx[a] + (up ? 1 : 0)) * stride[a];
    }
    if (!skip && wt != 0) f(off, wt);
  }
}

}  // namespace servesim::grid_detail
