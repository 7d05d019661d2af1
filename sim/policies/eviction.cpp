#include "sim/policies/eviction.hpp"

#include <algorithm>
#include <functional>

namespace servesim {

void LruEviction::make_evictable(std::uint64_t key, int depth, double t_s) {
  const Entry k{t_s, -depth, key};
  auto [it, fresh] = pos_.try_emplace(key, k);
  if (!fresh) {
    if (it->second == k) return;  // already a candidate at this place (refreshes repeat often)
    it->second = k;               // the old heap entry turns stale
  }
  if (heap_.size() >= 2 * pos_.size() + 64) {  // mostly stale: rebuild from the live entries
    heap_.clear();
    for (const auto& [_, e] : pos_) heap_.push_back(e);
    std::make_heap(heap_.begin(), heap_.end(), std::greater<>{});
    return;
  }
  heap_.push_back(k);
  std::push_heap(heap_.begin(), heap_.end(), std::greater<>{});
}

void LruEviction::forget(std::uint64_t key) { pos_.erase(key); }

bool LruEviction::victim(std::uint64_t& key) const {
  while (!heap_.empty()) {
    const Entry& top = heap_.front();
    const auto it = pos_.find(std::get<2>(top));
    if (it != pos_.end() && it->second == top) {
      key = std::get<2>(top);
      return true;
    }
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>{});
    heap_.pop_back();
  }
  return false;
}

std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name) {
  static const Registry<EvictionPolicy> registry("eviction policy", {
                                                                        {"lru", [] { return std::make_unique<LruEviction>(); }},
                                                                    });
  return registry.make(name);
}

}  // namespace servesim
