#include "sim/engine/a2a_reservations.hpp"

#include <algorithm>

namespace servesim {

void LinkReservations::apply(simgrid::s4u::Link* l) {
  const Link& s = links_.at(l);
  l->set_bandwidth(std::max(s.nominal - s.held, kFloor * s.nominal));
}

void LinkReservations::hold(int holder, std::vector<std::pair<simgrid::s4u::Link*, double>> rates) {
  auto& mine = holders_[holder];
  if (mine == rates) {
    if (mine.empty()) holders_.erase(holder);
    return;  // a decode batch whose price did not move: nothing to update
  }
  // the old rates come off, the new ones go on; each touched link is set once
  const unsigned long long call = ++calls_;
  std::vector<simgrid::s4u::Link*> touched;
  auto touch = [&](simgrid::s4u::Link* l, Link& s) {
    if (s.stamp != call) s.stamp = call, touched.push_back(l);
  };
  for (const auto& [l, r] : mine) {
    Link& s = links_.at(l);
    s.held -= r;
    touch(l, s);
  }
  for (const auto& [l, r] : rates) {
    auto [it, fresh] = links_.try_emplace(l);
    if (fresh) it->second.nominal = l->get_bandwidth();
    it->second.held += r;
    touch(l, it->second);
  }
  mine = std::move(rates);
  for (auto* l : touched) {
    Link& s = links_.at(l);
    if (s.held < 1e-9 * s.nominal) s.held = 0;  // rounding of the subtractions
    apply(l);
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
