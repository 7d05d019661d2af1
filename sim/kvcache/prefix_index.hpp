// servesim sim: a pool-wide index over the prefix caches of every prefill rank, so that the
// cache-aware router's per-arrival lookups do not walk every rank's radix tree (issue 15: 2,856
// prefill ranks at 10,000 nodes, ~0.12 µs of CPU per rank per arrival). Same answers as asking each
// rank's PrefixCache::match; the tests compare the two on random caches and on whole runs.
//
// What it keeps:
//   - for every block id cached anywhere within a prompt's first kIndexedTokens tokens, which ranks
//     hold it (a sorted list of rank ordinals; a rank appears once per node that holds the id);
//   - per rank, a generation counter that the rank's cache bumps on every change that can alter a
//     match (insert, checkpoint, split, eviction);
//   - per rank, the memo of one walk: the rank's walk along the last popular prefix it was asked about.
//
// How it answers, for a prompt with blocks b_0 .. b_{n-1}: take a position J whose block is held by at
// most kFewHolders ranks. Only the ranks S that hold b_J can match past J blocks: their match is
// computed as before (|S| <= kFewHolders). Every other rank's match of the prompt is its walk along
// b_0 .. b_{J-1} (the popular prefix: the system prompt every request shares, say), which the memo
// keeps until the rank's cache changes or a prompt with another popular prefix comes. Any such J
// gives the same answers; the first one is cheapest, and with chained block ids (holders of b_j hold
// b_0 .. b_{j-1}, so holder counts never grow along a prompt) a binary search finds it. An arrival
// then costs O(|S| + log n) tree and table steps plus O(ranks) memo reads, instead of O(ranks) tree
// walks. When every indexed block of the prompt is popular or a memo cannot tell
// (PrefixCache::tokens_from_walk), that rank is asked directly.
//
// The memo holds one popular prefix per rank: prompts alternating between several system prompts
// miss it more often (a reviewer's micro-benchmark, 1,024 ranks, 8-block prefixes, per arrival: one
// prefix 3.8 us, two alternating 13.2, four 18.4, against 46-63 us asking every rank).
#pragma once
#include "sim/kvcache/prefix_cache.hpp"
#include "workloads/request.hpp"

#include <boost/container/small_vector.hpp>

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

namespace servesim {

class PrefixIndex {
 public:
  // The three constants are chosen, not tuned (no sweep was run): they bound work and memory, and
  // no choice changes an answer.
  /// A block held by at most this many ranks ends the popular prefix (those ranks are asked
  /// directly, each as one tree walk: a small fraction of the thousands of ranks the index is for).
  static constexpr std::size_t kFewHolders = 32;
  /// Distinct popular prefixes remembered (each a version number the memos refer to); past this the
  /// table starts again (the memos then miss once).
  static constexpr std::size_t kPrefixVersions = 4096;
  /// Only block positions within a prompt's first this many tokens (128 blocks of 512) are indexed:
  /// popular prefixes, system prompts, sit at the start; the holder lists cost a hash-table entry
  /// per block and rank, which past here would be spent on blocks that only their own session reuses.
  static constexpr long long kIndexedTokens = 65536;

  /// `caches[g]`: the prefix cache of rank ordinal g (not null; all of one pool: the same block size
  /// and checkpoint bytes); this
  /// attaches the index to each (PrefixCache::attach_index), which must happen before any insert.
  /// Throws std::logic_error when a cache already holds blocks.
  explicit PrefixIndex(const std::vector<PrefixCache*>& caches);
  PrefixIndex(const PrefixIndex&) = delete;  // the caches point at this object
  PrefixIndex& operator=(const PrefixIndex&) = delete;

  /// out[g] = caches[g]->match(r).tokens for every rank ordinal g (out is resized to the rank count).
  void match_all(const Request& r, std::vector<long long>& out);

  /// Ranks holding block `id` (with repeats for a rank holding it in several nodes); for tests.
  std::size_t holders(std::uint64_t id) const;

 private:
  friend class PrefixCache;  // the caches report their changes:
  /// rank now holds ids, the first at block position `first` of their prompts
  void add(int rank, const std::vector<std::uint64_t>& ids, int first);
  /// rank no longer holds ids (one node's), the first at block position `first`
  void remove(int rank, const std::vector<std::uint64_t>& ids, int first);
  void touched(int rank) { ++gen_[static_cast<std::size_t>(rank)]; }
  struct Memo {
    std::uint64_t version = 0;  ///< popular-prefix version it was walked for (0 = none)
    std::uint64_t gen = 0;      ///< the rank's generation then
    PrefixWalk walk;
  };
  /// a block's holders, sorted; most blocks (a session's own) have one or two: stored inline
  using Holders = boost::container::small_vector<int, 3>;
  const Holders* holder_list(std::uint64_t id) const;
  std::uint64_t prefix_version(const std::uint64_t* ids, int n);
  std::vector<PrefixCache*> caches_;
  int indexed_blocks_ = 1;  ///< positions [0, this) are indexed
  std::unordered_map<std::uint64_t, Holders> holders_;
  std::vector<std::uint64_t> gen_;
  std::vector<Memo> memo_;
  std::map<std::vector<std::uint64_t>, std::uint64_t> versions_;
  std::map<std::vector<std::uint64_t>, std::uint64_t>::iterator last_;  ///< the version asked last (or end)
  std::uint64_t next_version_ = 1;
};

}  // namespace servesim
