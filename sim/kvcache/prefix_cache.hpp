// servesim sim: prefix cache of one DP rank: a radix tree over chained block ids (as SGLang's
// radix cache, with edges labelled by runs of blocks), with a pluggable eviction policy over its
// leaves. Block ids are chained (Mooncake hash_ids): equal id at position i ⇒ equal blocks 0..i.
// The partial last block of a prompt is cached too (it is reused only by an identical prompt).
//
// Models with per-sequence state (KDA recurrent state, SWA windows) can resume only at a block
// boundary where that state was saved: one checkpoint is kept at the last whole block of every
// prefilled prompt (the engine snapshots the state at that chunk boundary, as SGLang's Mamba radix
// cache keeps one state per cached sequence), costing `checkpoint_bytes`. Pure-MLA models resume
// at any cached block.
//
// Cost: a lookup compares the prompt's ids along the tree (sequential, no hashing per block); an
// insert adds one node for the new suffix; eviction removes whole leaf nodes.
#pragma once
#include "sim/policies/eviction.hpp"
#include "workloads/request.hpp"

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace servesim {

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
  ~PrefixCache();

  PrefixMatch match(const Request& r) const;
  /// Pins blocks [0, blocks) of r (which must be cached) while its prefill runs.
  void pin(const Request& r, int blocks);
  /// Releases the pins of `pin` without inserting anything (the request did not start).
  void unpin(const Request& r, int blocks, double t_s);
  /// Releases the pins of `pin` and inserts r's blocks not yet cached, with a checkpoint at its
  /// last whole block. Returns the bytes this added to the cache.
  double release_and_insert(const Request& r, int pinned_blocks, double t_s);
  /// Evicts leaf nodes until at least `bytes` were freed or nothing is evictable; returns bytes freed.
  double evict(double bytes);
  double bytes() const { return bytes_; }
  /// Bytes eviction could free now: everything not pinned (a pinned node's ancestors are pinned
  /// too, so every unpinned node is in an evictable subtree).
  double evictable_bytes() const { return bytes_ - pinned_bytes_; }

 private:
  struct Node {
    std::uint64_t key = 0;
    Node* parent = nullptr;
    std::vector<std::uint64_t> ids;  ///< blocks on the edge into this node
    int last_tokens = 0;             ///< tokens of the edge's last block (block_tokens unless partial)
    int end = 0;                     ///< blocks from the root to the end of this node
    bool checkpoint = false;         ///< a state checkpoint at this node's end
    int pins = 0;
    double last_use = 0;
    bool offered = false;    ///< the eviction policy holds it as a candidate, at time offered_s
    double offered_s = 0;
    /// children by first block id; allocated with the first child (most nodes are leaves: an empty
    /// map inline would cost 56 bytes each)
    struct Children {
      std::unique_ptr<std::unordered_map<std::uint64_t, Node*>> m;
      Node* find(std::uint64_t id) const {
        if (!m) return nullptr;
        auto it = m->find(id);
        return it == m->end() ? nullptr : it->second;
      }
      void set(std::uint64_t id, Node* n) {
        if (!m) m = std::make_unique<std::unordered_map<std::uint64_t, Node*>>();
        (*m)[id] = n;
      }
      void erase(std::uint64_t id) {
        if (!m) return;
        m->erase(id);
        if (m->empty()) m.reset();
      }
      bool empty() const { return !m; }
    } children;
  };
  bool usable(const Request& r) const { return r.block_tokens == block_tokens_ && !r.block_hashes.empty(); }
  double node_bytes(const Node& n) const;
  /// Splits n so that its first `k` blocks become a new parent node; returns that parent.
  Node* split(Node* n, int k);
  /// Walks r's first `blocks` blocks, splitting so that they end on a node boundary; returns the
  /// nodes on the path (root excluded), shallowest first.
  std::vector<Node*> path(const Request& r, int blocks);
  void refresh(Node* n);  ///< tell the policy whether n is an evictable leaf
  int block_tokens_;
  double block_bytes_, checkpoint_bytes_;
  std::unique_ptr<EvictionPolicy> eviction_;
  Node root_;
  std::unordered_map<std::uint64_t, std::unique_ptr<Node>> nodes_;
  std::uint64_t next_key_ = 1;
  void add_pins(Node* n, int delta);
  double bytes_ = 0, pinned_bytes_ = 0;
};

}  // namespace servesim
