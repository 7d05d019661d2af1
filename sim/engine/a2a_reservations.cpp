#include "sim/engine/a2a_reservations.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace servesim {

double LinkReservations::left_over(double C, std::vector<double> rates) {
  double sum = 0;
  for (double r : rates) sum += r;
  if (sum <= 0) return C;
  // water-filling: the smallest capped flows keep their caps, the rest share equally with the copy
  std::sort(rates.begin(), rates.end());
  double below = 0;  // Σ of the caps under the level
  const size_t k = rates.size();
  double x = C / static_cast<double>(k + 1);
  for (size_t j = 0; j < k; ++j) {
    x = (C - below) / static_cast<double>(k - j + 1);
    if (x <= rates[j]) break;
    below += rates[j];
    x = C - below;  // every cap below the level: the copy gets the rest
  }
  return std::max(C - sum, x);
}

void LinkReservations::hold(int holder, std::vector<std::pair<simgrid::s4u::Link*, double>> rates) {
  for (const auto& [l, r] : rates)
    if (!(r >= 0) || !std::isfinite(r)) throw std::invalid_argument("LinkReservations::hold: rate must be finite and >= 0");
  auto& mine = holders_[holder];
  if (mine == rates) {
    if (mine.empty()) holders_.erase(holder);
    return;  // a decode batch whose price did not move: nothing to update
  }
  // the old flows come off, the new ones go on; each touched link is set once
  const unsigned long long call = ++calls_;
  std::vector<simgrid::s4u::Link*> touched;
  auto touch = [&](simgrid::s4u::Link* l, Link& s) {
    if (s.stamp != call) s.stamp = call, touched.push_back(l);
  };
  for (const auto& [l, r] : mine) {
    Link& s = links_.at(l);
    auto it = std::find(s.rates.begin(), s.rates.end(), r);  // the same double that was pushed
    if (it != s.rates.end()) s.rates.erase(it);
    touch(l, s);
  }
  for (const auto& [l, r] : rates) {
    auto [it, fresh] = links_.try_emplace(l);
    if (fresh) it->second.nominal = l->get_bandwidth();
    it->second.rates.push_back(r);
    touch(l, it->second);
  }
  mine = std::move(rates);
  for (auto* l : touched) {
    const Link& s = links_.at(l);
    l->set_bandwidth(left_over(s.nominal, s.rates));
  }
  if (mine.empty()) holders_.erase(holder);
}

double LinkReservations::held(int holder, const simgrid::s4u::Link* link) const {
  auto it = holders_.find(holder);
  if (it == holders_.end()) return 0;
  double r = 0;
  for (const auto& [l, x] : it->second)
    if (l == link) r += x;
  return r;
}

}  // namespace servesim
