#include "sim/policies/eviction.hpp"

namespace servesim {

void LruEviction::make_evictable(std::uint64_t key, int depth, double t_s) {
  const auto k = std::make_tuple(t_s, -depth, key);
  auto [it, fresh] = pos_.try_emplace(key, k);
  if (!fresh) {
    if (it->second == k) return;  // already a candidate at this place (refreshes repeat often)
    order_.erase(it->second);
    it->second = k;
  }
  order_.insert(k);
}

void LruEviction::forget(std::uint64_t key) {
  auto it = pos_.find(key);
  if (it == pos_.end()) return;
  order_.erase(it->second);
  pos_.erase(it);
}

bool LruEviction::victim(std::uint64_t& key) const {
  if (order_.empty()) return false;
  key = std::get<2>(*order_.begin());
  return true;
}

std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name) {
  static const Registry<EvictionPolicy> registry("eviction policy", {
                                                                        {"lru", [] { return std::make_unique<LruEviction>(); }},
                                                                    });
  return registry.make(name);
}

}  // namespace servesim
