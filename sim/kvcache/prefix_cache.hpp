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

class PrefixIndex;

/// What the cache holds of a prompt.
struct PrefixMatch {
  int present_blocks = 0;  ///< leading blocks of the prompt in the cache (hit statistics)
  long long tokens = 0;    ///< prompt tokens the prefill can skip (resumable, ≤ input − 1)
  int pin_blocks = 0;      ///< blocks those tokens occupy (to pin while prefilling)
};

/// What a walk down the tree along a run of block ids found, before any request-specific rule:
/// `present` leading blocks held; `last_tokens`: tokens of the last of them as match() counts it
/// (the node's last_tokens where the walk ended at a node's end, else block_tokens); `checkpoint_end`:
/// the deepest state checkpoint (in blocks from the root) at a node end on the walked path, 0 = none.
struct PrefixWalk {
  int present = 0, last_tokens = 0, checkpoint_end = 0;
};

class PrefixCache {
 public:
  /// block_bytes: KV bytes of one cached block on one GPU; checkpoint_bytes: resume state saved at
  /// a checkpointed block (0 = any block boundary is resumable).
  PrefixCache(int block_tokens, double block_bytes, double checkpoint_bytes, std::unique_ptr<EvictionPolicy> eviction);
  ~PrefixCache();

  PrefixMatch match(const Request& r) const;
  /// The walk along ids[0, n) (n ≤ the ids' length): what match() finds of a prompt whose first n
  /// blocks these are, for a rank that does not hold the prompt's block n (sim/kvcache/prefix_index.hpp).
  PrefixWalk walk(const std::uint64_t* ids, int n) const;
  /// match(r).tokens from the walk of r's first blocks, valid when this cache does not hold r's
  /// block at w's end (so that match(r) stops there too); −1 when the walk cannot tell (its deepest
  /// checkpoint lies at or past r's prompt end: match(r) would take a shallower one).
  long long tokens_from_walk(const PrefixWalk& w, const Request& r) const;
  /// True when r's block ids can be looked up here (same block size, at least one block).
  bool usable(const Request& r) const { return r.block_tokens == block_tokens_ && !r.block_hashes.empty(); }
  /// Reports this cache's blocks and changes to a pool-wide index as rank `rank` (before any insert).
  void attach_index(PrefixIndex* index, int rank) { index_ = index, index_rank_ = rank; }
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
  int block_tokens() const { return block_tokens_; }
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
    /// children by first block id: the first one inline (a radix chain's inner nodes have one
    /// child, and the per-arrival lookup at the root then costs no hash-table probe), the others in
    /// a map allocated with the second (most nodes are leaves: an empty map inline would cost 56
    /// bytes each). Invariant: the map is non-empty only while the inline slot is taken.
    struct Children {
      std::uint64_t id0 = 0;
      Node* n0 = nullptr;
      std::unique_ptr<std::unordered_map<std::uint64_t, Node*>> m;
      Node* find(std::uint64_t id) const {
        if (n0 && id0 == id) return n0;
        if (!m) return nullptr;
        auto it = m->find(id);
        return it == m->end() ? nullptr : it->second;
      }
      void set(std::uint64_t id, Node* n) {
        if (n0 && id0 == id) {
          n0 = n;
          return;
        }
        if (!n0) {  // (the map is empty then)
          id0 = id, n0 = n;
          return;
        }
        if (!m) m = std::make_unique<std::unordered_map<std::uint64_t, Node*>>();
        (*m)[id] = n;
      }
      void erase(std::uint64_t id) {
        if (n0 && id0 == id) {
          n0 = nullptr;
          if (m) {  // keep the invariant: one of the others moves inline
            auto it = m->begin();
            id0 = it->first, n0 = it->second;
            m->erase(it);
            if (m->empty()) m.reset();
          }
          return;
        }
        if (!m) return;
        m->erase(id);
        if (m->empty()) m.reset();
      }
      bool empty() const { return !n0; }
    } children;
  };
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
  /// Follows ids[0, n) down the tree; on_full_node(c) for each node whose whole edge matched.
  /// Returns the blocks matched; sets last_len as match() counts the last of them.
  template <class F>
  int descend(const std::uint64_t* ids, int n, int& last_len, F&& on_full_node) const;
  /// match()'s tokens without checkpoints, from the blocks found and the last one's tokens
  long long resumable_tokens(int present, int last_len, const Request& r) const;
  void changed();  ///< tells the index (if any) that match results may differ from now on
  double bytes_ = 0, pinned_bytes_ = 0;
  PrefixIndex* index_ = nullptr;
  int index_rank_ = 0;
};

}  // namespace servesim
