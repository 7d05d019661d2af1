// servesim sim: block-level prefix cache of one DP rank (a radix cache over chained block ids), with
// a pluggable eviction policy. Block ids are chained (Mooncake hash_ids): equal id at position i ⇒
// equal blocks 0..i, so the cached blocks of a prompt always form a leading run (eviction takes
// leaves first), found by binary search. The partial last block of a prompt is cached too (it is
// reused only by an identical prompt).
//
// Models with per-sequence state (KDA recurrent state, SWA windows) can resume only at a block
// boundary where that state was saved: one checkpoint is kept at the last whole block of every
// prefilled prompt (the engine snapshots the state at that chunk boundary, as SGLang's Mamba radix
// cache keeps one state per cached sequence), costing `checkpoint_bytes`. Pure-MLA models resume
// at any cached block.
#pragma once
#include "workloads/request.hpp"

#include <cstdint>
#include <memory>
#include <list>
#include <string>
#include <unordered_map>

namespace servesim {

/// Chooses which unpinned block to evict. Blocks in use by a running request are never offered.
class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual std::string name() const = 0;
  /// Block `id` at prefix depth `depth` became evictable (or was used again) at time t_s. Calls
  /// come in use order; blocks used together come deepest first.
  virtual void make_evictable(std::uint64_t id, int depth, double t_s) = 0;
  /// Block `id` is pinned or removed: no longer a candidate.
  virtual void forget(std::uint64_t id) = 0;
  /// The next victim, or false when no block is evictable.
  virtual bool victim(std::uint64_t& id) const = 0;
};

/// Least recently used first, O(1) per operation (a list in use order). The cache makes a chain's
/// blocks evictable deepest first, so among blocks used together the deepest go first (leaves
/// before their ancestors: chains are cut from the end).
class LruEviction final : public EvictionPolicy {
 public:
  std::string name() const override { return "lru"; }
  void make_evictable(std::uint64_t id, int depth, double t_s) override;
  void forget(std::uint64_t id) override;
  bool victim(std::uint64_t& id) const override;

 private:
  std::list<std::uint64_t> order_;  // front = least recently used
  std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> pos_;
};

/// Throws std::invalid_argument for an unknown name (known: "lru").
std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name);

/// What the cache holds of a prompt.
struct PrefixMatch {
  int present_blocks = 0;  ///< leading blocks of the prompt in the cache (hit statistics)
  long long tokens = 0;    ///< prompt tokens the prefill can skip (resumable, ≤ input − 1)
  int pin_blocks = 0;      ///< blocks those tokens occupy (to pin while prefilling)
};

class PrefixCache {
 public:
  /// block_bytes: KV bytes of one cached block on one GPU; checkpoint_bytes: resume state saved at
  /// a checkpointed block (0 = any block boundary is resumable).
  PrefixCache(int block_tokens, double block_bytes, double checkpoint_bytes, std::unique_ptr<EvictionPolicy> eviction);

  PrefixMatch match(const Request& r) const;
  /// Pins blocks [0, blocks) of r while its prefill runs (they cannot be evicted).
  void pin(const Request& r, int blocks);
  /// Releases the pins of `pin` without inserting anything (the request did not start).
  void unpin(const Request& r, int blocks, double t_s);
  /// Releases the pins of `pin` and inserts r's blocks not yet cached, with a checkpoint at its
  /// last whole block. Returns the bytes this added to the cache.
  double release_and_insert(const Request& r, int pinned_blocks, double t_s);
  /// Evicts until at least `bytes` were freed or nothing is evictable; returns bytes freed.
  double evict(double bytes);
  double bytes() const { return bytes_; }
  std::size_t blocks() const { return blocks_.size(); }

 private:
  struct Entry {
    int depth = 0;
    int pins = 0;
    int tokens = 0;
    bool checkpoint = false;
  };
  bool usable(const Request& r) const { return r.block_tokens == block_tokens_ && !r.block_hashes.empty(); }
  int block_len(const Request& r, long long i) const;
  int block_tokens_;
  double block_bytes_, checkpoint_bytes_;
  std::unique_ptr<EvictionPolicy> eviction_;
  std::unordered_map<std::uint64_t, Entry> blocks_;
  double bytes_ = 0;
};

}  // namespace servesim
