// servesim sim/policies: which cached KV goes first when room is needed (the GPU prefix cache's
// leaves, sim/kvcache/prefix_cache.hpp; the L2/L3 tiers' idle sessions, sim/kvcache/kv_store.hpp).
#pragma once
#include "sim/policies/registry.hpp"

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

namespace servesim {

/// Chooses which evictable leaf node to evict. Nodes in use by a running request (pinned) or with
/// children are never offered.
class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual std::string name() const = 0;
  /// Node `key` (ending `depth` blocks from the root, last used at t_s) became evictable or was used.
  virtual void make_evictable(std::uint64_t key, int depth, double t_s) = 0;
  /// Node `key` is pinned, has children again, or was removed: no longer a candidate.
  virtual void forget(std::uint64_t key) = 0;
  /// The next victim, or false when nothing is evictable.
  virtual bool victim(std::uint64_t& key) const = 0;
};

/// Least recently used leaf first; among leaves last used at the same time, the deepest first.
class LruEviction final : public EvictionPolicy {
 public:
  std::string name() const override { return "lru"; }
  void make_evictable(std::uint64_t key, int depth, double t_s) override;
  void forget(std::uint64_t key) override;
  bool victim(std::uint64_t& key) const override;

 private:
  std::set<std::tuple<double, int, std::uint64_t>> order_;
  std::unordered_map<std::uint64_t, std::tuple<double, int, std::uint64_t>> pos_;
};

/// The eviction registry: a policy by name ("lru"). Throws std::invalid_argument for an unknown
/// name, listing the known ones.
std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name);

}  // namespace servesim
