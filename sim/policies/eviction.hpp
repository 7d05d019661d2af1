// servesim sim/policies: which cached KV goes first when room is needed (the GPU prefix cache's
// leaves, sim/kvcache/prefix_cache.hpp; the L2/L3 tiers' idle sessions, sim/kvcache/kv_store.hpp).
#pragma once
#include "sim/policies/registry.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

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

/// Least recently used leaf first; among leaves last used at the same time, the deepest first
/// (then the lower key: a total order, so the victim never depends on the order of the calls).
/// A binary min-heap with lazy deletion: a refresh or a forget leaves the old entry in the heap,
/// and victim() drops such stale entries from the top; the heap is rebuilt from the live entries
/// when stale ones outnumber them (no tree node allocated per refresh, unlike an ordered set).
class LruEviction final : public EvictionPolicy {
 public:
  std::string name() const override { return "lru"; }
  void make_evictable(std::uint64_t key, int depth, double t_s) override;
  void forget(std::uint64_t key) override;
  bool victim(std::uint64_t& key) const override;
  /// Live candidates, and heap entries including stale ones (tests: the heap is rebuilt from the
  /// live entries once it holds 2 x live + 64).
  std::size_t size() const { return pos_.size(); }
  std::size_t heap_entries() const { return heap_.size(); }

 private:
  using Entry = std::tuple<double, int, std::uint64_t>;  // (last use s, -depth, key)
  mutable std::vector<Entry> heap_;                      // min-heap (std::greater) incl. stale entries
  std::unordered_map<std::uint64_t, Entry> pos_;         // the live entry of each candidate
};

/// The eviction registry: a policy by name ("lru"). Throws std::invalid_argument for an unknown
/// name, listing the known ones.
std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name);

}  // namespace servesim
