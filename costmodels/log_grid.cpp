#include "costmodels/log_grid.hpp"

#include <Eigen/Sparse>
#include <Eigen/SparseCholesky>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace servesim {

namespace {

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

}  // namespace

double LogGrid::eval(const double* x) const {
  const int d = dims();
  int stride[kMaxGridDims];
  int s = 1;
  for (int a = d - 1; a >= 0; --a) {
    stride[a] = s;
    s *= static_cast<int>(knots[a].size());
  }
  double acc = 0;
  for_each_corner(knots, x, stride, [&](int off, double wt) { acc += wt * values[off]; });
  return acc;
}

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
  int n[kMaxGridDims], stride[kMaxGridDims];
  int total = 1;
  for (int a = d - 1; a >= 0; --a) {
    n[a] = static_cast<int>(g.knots[a].size());
    stride[a] = total;
    total *= n[a];
  }
  using Trip = Eigen::Triplet<double>;
  std::vector<Trip> trips;
  std::vector<double> rhs;
  int row = 0;
  // data rows
  for (size_t i = 0; i < x.size(); ++i) {
    for_each_corner(g.knots, x[i].data(), stride, [&](int off, double wt) { trips.emplace_back(row, off, wt); });
    rhs.push_back(y[i]);
    ++row;
  }
  // curvature penalty rows, scaled so that λ weighs an integral of squared derivatives
  auto spacing = [&](int a, int i) {  // mean knot spacing around knot i of axis a (1 for single-knot axes)
    const auto& k = g.knots[a];
    if (k.size() == 1) return 1.0;
    const double left = i > 0 ? k[i] - k[i - 1] : k[i + 1] - k[i];
    const double right = i + 1 < static_cast<int>(k.size()) ? k[i + 1] - k[i] : left;
    return 0.5 * (left + right);
  };
  auto weight = [&](int a) { return a < static_cast<int>(opt.smooth.size()) ? opt.smooth[a] : 1.0; };
  std::vector<int> coord(d, 0);
  for (int p = 0; p < total; ++p) {
    int rem = p;
    for (int a = 0; a < d; ++a) {
      coord[a] = rem / stride[a];
      rem %= stride[a];
    }
    double vol = 1;
    for (int a = 0; a < d; ++a) vol *= spacing(a, coord[a]);
    // second differences along each axis at interior knots
    for (int a = 0; a < d; ++a) {
      const int i = coord[a];
      if (i == 0 || i == n[a] - 1) continue;
      const auto& k = g.knots[a];
      const double h1 = k[i] - k[i - 1], h2 = k[i + 1] - k[i];
      const double s = std::sqrt(opt.lambda * weight(a) * vol);
      const double c0 = 2 / (h1 * (h1 + h2)), c2 = 2 / (h2 * (h1 + h2));
      trips.emplace_back(row, p - stride[a], s * c0);
      trips.emplace_back(row, p, -s * (c0 + c2));
      trips.emplace_back(row, p + stride[a], s * c2);
      rhs.push_back(0);
      ++row;
    }
    // mixed differences on each cell's corner (a < b)
    for (int a = 0; a < d; ++a)
      for (int b = a + 1; b < d; ++b) {
        if (coord[a] == n[a] - 1 || coord[b] == n[b] - 1) continue;
        const double ha = g.knots[a][coord[a] + 1] - g.knots[a][coord[a]], hb = g.knots[b][coord[b] + 1] - g.knots[b][coord[b]];
        const double s = std::sqrt(2 * opt.lambda * std::sqrt(weight(a) * weight(b)) * ha * hb) / (ha * hb);
        trips.emplace_back(row, p, s);
        trips.emplace_back(row, p + stride[a], -s);
        trips.emplace_back(row, p + stride[b], -s);
        trips.emplace_back(row, p + stride[a] + stride[b], s);
        rhs.push_back(0);
        ++row;
      }
  }
  Eigen::SparseMatrix<double> A(row, total);
  A.setFromTriplets(trips.begin(), trips.end());
  Eigen::Map<const Eigen::VectorXd> b(rhs.data(), row);
  Eigen::SparseMatrix<double> N = A.transpose() * A;
  for (int i = 0; i < total; ++i) N.coeffRef(i, i) += 1e-9;  // keeps knots far from any data determined
  const Eigen::VectorXd r = A.transpose() * b;
  Eigen::SimplicialLDLT<Eigen::SparseMatrix<double>> solver(N);
  if (solver.info() != Eigen::Success) throw std::runtime_error("fit_log_grid: factorisation failed");
  const Eigen::VectorXd sol = solver.solve(r);
  g.values.assign(sol.data(), sol.data() + total);
  // monotone axes: isotonic regression of every line, alternating over the axes, then a
  // cumulative maximum (which keeps the axes already processed monotone) to guarantee it
  auto mono = [&](int a) { return a < static_cast<int>(opt.monotone.size()) && opt.monotone[a] && n[a] > 1; };
  std::vector<double> line, w;
  for (int round = 0; round < 8; ++round)
    for (int a = 0; a < d; ++a) {
      if (!mono(a)) continue;
      for (int p = 0; p < total; ++p) {
        if ((p / stride[a]) % n[a] != 0) continue;  // start of a line along axis a
        // pool adjacent violators (equal weights)
        line.clear(), w.clear();
        std::vector<int> len;
        for (int i = 0; i < n[a]; ++i) {
          line.push_back(g.values[p + i * stride[a]]), w.push_back(1), len.push_back(1);
          while (line.size() > 1 && line[line.size() - 2] > line.back()) {
            const size_t j = line.size() - 1;
            line[j - 1] = (line[j - 1] * w[j - 1] + line[j] * w[j]) / (w[j - 1] + w[j]);
            w[j - 1] += w[j], len[j - 1] += len[j];
            line.pop_back(), w.pop_back(), len.pop_back();
          }
        }
        int i = 0;
        for (size_t blk = 0; blk < line.size(); ++blk)
          for (int r = 0; r < len[blk]; ++r, ++i) g.values[p + i * stride[a]] = line[blk];
      }
    }
  for (int a = 0; a < d; ++a) {
    if (!mono(a)) continue;
    for (int p = 0; p < total; ++p) {
      if ((p / stride[a]) % n[a] != 0) continue;
      double m = g.values[p];
      for (int i = 1; i < n[a]; ++i) {
        double& v = g.values[p + i * stride[a]];
        m = std::max(m, v);
        v = m;
      }
    }
  }
  return g;
}

}  // namespace servesim
