// fit_log_grid (costmodels/log_grid.hpp): penalised least squares on the grid, solved with Eigen's
// sparse Cholesky, then made monotone along the axes that ask for it. Offline only.
#include "costmodels/log_grid.hpp"

#include "costmodels/log_grid_cells.hpp"

#include <Eigen/Sparse>
#include <Eigen/SparseCholesky>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace servesim {
namespace {

using grid_detail::for_each_corner;

std::vector<double> make_knots(std::vector<double> v, double gap) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::vector<double> k;
  for (double x : v)
    if (k.empty() || x - k.back() >= gap) k.push_back(x);
  if (k.back() != v.back()) {
    if (k.size() > 1 && v.back() - k.back() < gap / 2) k.back() = v.back();
    else k.push_back(v.back());
  }
  return k;
}

// The sparse least-squares system: one row per data point, then the curvature penalty rows.
struct System {
  const LogGrid& g;
  const GridFitOptions& opt;
  int d, total = 1;
  int n[kMaxGridDims], stride[kMaxGridDims];
  std::vector<Eigen::Triplet<double>> trips;
  std::vector<double> rhs;
  int row = 0;

  System(const LogGrid& grid, const GridFitOptions& o) : g(grid), opt(o), d(grid.dims()) {
    for (int a = d - 1; a >= 0; --a) {
      n[a] = static_cast<int>(g.knots[a].size());
      stride[a] = total;
      total *= n[a];
    }
  }
  void add(int col, double v) { trips.emplace_back(row, col, v); }
  void end_row(double target) { rhs.push_back(target), ++row; }
  // mean knot spacing around knot i of axis a (1 for single-knot axes)
  double spacing(int a, int i) const {
    const auto& k = g.knots[a];
    if (k.size() == 1) return 1.0;
    const double left = i > 0 ? k[i] - k[i - 1] : k[i + 1] - k[i];
    const double right = i + 1 < static_cast<int>(k.size()) ? k[i + 1] - k[i] : left;
    return 0.5 * (left + right);
  }
  double weight(int a) const { return a < static_cast<int>(opt.smooth.size()) ? opt.smooth[a] : 1.0; }

  void data_rows(const std::vector<std::array<double, kMaxGridDims>>& x, const std::vector<double>& y) {
    for (size_t i = 0; i < x.size(); ++i) {
      for_each_corner(g.knots, x[i].data(), stride, [&](int off, double wt) { add(off, wt); });
      end_row(y[i]);
    }
  }
  // curvature penalty rows at grid point p, scaled so that λ weighs an integral of squared derivatives
  void penalty_rows(int p, const std::vector<int>& coord) {
    double vol = 1;
    for (int a = 0; a < d; ++a) vol *= spacing(a, coord[a]);
    for (int a = 0; a < d; ++a) {  // second differences along each axis at interior knots
      const int i = coord[a];
      if (i == 0 || i == n[a] - 1) continue;
      const auto& k = g.knots[a];
      const double h1 = k[i] - k[i - 1], h2 = k[i + 1] - k[i];
      const double s = std::sqrt(opt.lambda * weight(a) * vol);
      const double c0 = 2 / (h1 * (h1 + h2)), c2 = 2 / (h2 * (h1 + h2));
      add(p - stride[a], s * c0), add(p, -s * (c0 + c2)), add(p + stride[a], s * c2);
      end_row(0);
    }
    for (int a = 0; a < d; ++a)  // mixed differences on each cell's corner (a < b)
      for (int b = a + 1; b < d; ++b) {
        if (coord[a] == n[a] - 1 || coord[b] == n[b] - 1) continue;
        const double ha = g.knots[a][coord[a] + 1] - g.knots[a][coord[a]], hb = g.knots[b][coord[b] + 1] - g.knots[b][coord[b]];
        const double s = std::sqrt(2 * opt.lambda * std::sqrt(weight(a) * weight(b)) * ha * hb) / (ha * hb);
        add(p, s), add(p + stride[a], -s), add(p + stride[b], -s), add(p + stride[a] + stride[b], s);
        end_row(0);
      }
  }
  void all_penalty_rows() {
    std::vector<int> coord(d, 0);
    for (int p = 0; p < total; ++p) {
      int rem = p;
      for (int a = 0; a < d; ++a) coord[a] = rem / stride[a], rem %= stride[a];
      penalty_rows(p, coord);
    }
  }
  std::vector<double> solve() const {
    Eigen::SparseMatrix<double> A(row, total);
    A.setFromTriplets(trips.begin(), trips.end());
    Eigen::Map<const Eigen::VectorXd> b(rhs.data(), row);
    Eigen::SparseMatrix<double> N = A.transpose() * A;
    for (int i = 0; i < total; ++i) N.coeffRef(i, i) += 1e-9;  // keeps knots far from any data determined
    const Eigen::VectorXd r = A.transpose() * b;
    Eigen::SimplicialLDLT<Eigen::SparseMatrix<double>> solver(N);
    if (solver.info() != Eigen::Success) throw std::runtime_error("fit_log_grid: factorisation failed");
    const Eigen::VectorXd sol = solver.solve(r);
    return {sol.data(), sol.data() + total};
  }
};

// Pool adjacent violators (equal weights) on the line of n values starting at v[p], step `stride`.
void isotonic_line(std::vector<double>& v, int p, int stride, int n) {
  std::vector<double> line, w;
  std::vector<int> len;
  for (int i = 0; i < n; ++i) {
    line.push_back(v[p + i * stride]), w.push_back(1), len.push_back(1);
    while (line.size() > 1 && line[line.size() - 2] > line.back()) {
      const size_t j = line.size() - 1;
      line[j - 1] = (line[j - 1] * w[j - 1] + line[j] * w[j]) / (w[j - 1] + w[j]);
      w[j - 1] += w[j], len[j - 1] += len[j];
      line.pop_back(), w.pop_back(), len.pop_back();
    }
  }
  int i = 0;
  for (size_t blk = 0; blk < line.size(); ++blk)
    for (int r = 0; r < len[blk]; ++r, ++i) v[p + i * stride] = line[blk];
}

// Monotone axes: isotonic regression of every line, alternating over the axes, then a cumulative
// maximum (which keeps the axes already processed monotone) to guarantee it.
void make_monotone(std::vector<double>& v, const System& s) {
  auto mono = [&](int a) { return a < static_cast<int>(s.opt.monotone.size()) && s.opt.monotone[a] && s.n[a] > 1; };
  auto line_start = [&](int p, int a) { return (p / s.stride[a]) % s.n[a] == 0; };
  for (int round = 0; round < 8; ++round)
    for (int a = 0; a < s.d; ++a)
      if (mono(a))
        for (int p = 0; p < s.total; ++p)
          if (line_start(p, a)) isotonic_line(v, p, s.stride[a], s.n[a]);
  for (int a = 0; a < s.d; ++a)
    if (mono(a))
      for (int p = 0; p < s.total; ++p) {
        if (!line_start(p, a)) continue;
        double m = v[p];
        for (int i = 1; i < s.n[a]; ++i) {
          double& x = v[p + i * s.stride[a]];
          m = std::max(m, x);
          x = m;
        }
      }
}

}  // namespace

LogGrid fit_log_grid(const std::vector<std::array<double, kMaxGridDims>>& x, const std::vector<double>& y, int d,
                     const GridFitOptions& opt) {
  if (x.empty() || x.size() != y.size()) throw std::invalid_argument("fit_log_grid: need as many targets as points (and at least one)");
  if (d < 1 || d > kMaxGridDims) throw std::invalid_argument("fit_log_grid: dims must be in [1, " + std::to_string(kMaxGridDims) + "]");
  LogGrid g;
  for (int a = 0; a < d; ++a) {
    std::vector<double> v;
    v.reserve(x.size());
    for (const auto& p : x) v.push_back(p[a]);
    g.knots.push_back(make_knots(std::move(v), a < static_cast<int>(opt.min_gap.size()) ? opt.min_gap[a] : 0.0));
  }
  System s(g, opt);
  s.data_rows(x, y);
  s.all_penalty_rows();
  g.values = s.solve();
  make_monotone(g.values, s);
  return g;
}

}  // namespace servesim
