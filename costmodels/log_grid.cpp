#include "costmodels/log_grid.hpp"

#include "costmodels/log_grid_cells.hpp"

namespace servesim {

double LogGrid::eval(const double* x) const {
  const int d = dims();
  int stride[kMaxGridDims];
  int s = 1;
  for (int a = d - 1; a >= 0; --a) {
    stride[a] = s;
    s *= static_cast<int>(knots[a].size());
  }
  double acc = 0;
  grid_detail::for_each_corner(knots, x, stride, [&](int off, double wt) { acc += wt * values[off]; });
  return acc;
}

}  // namespace servesim
