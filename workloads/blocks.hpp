// servesim workloads: re-expressing a request's chained prefix-block ids at another block size
// (the cache's), keeping the chain property (equal id at position i ⇒ equal prefix up to there).
//  coarser (to = k × from): a new block is k old ones; its id is the id of the last old block in it
//    (which already names the whole prefix up to its end);
//  finer (from = k × to): old block b becomes k sub-blocks with ids mixed from (b, j).
// Throws std::invalid_argument when neither size divides the other.
//
// BlockIdSet: the distinct block ids seen (a trace's own reuse), open addressing with linear
// probing at a load of at most 1/2: 16-32 bytes per id instead of ~48 in a std::unordered_set.
#pragma once
#include "workloads/request.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace servesim {

void remap_blocks(Request& r, int to_block_tokens);

class BlockIdSet {
 public:
  /// Adds id; true when it was not there yet.
  bool insert(std::uint64_t id);
  std::size_t size() const { return n_ + (zero_ ? 1 : 0); }

 private:
  void grow();
  std::vector<std::uint64_t> slots_;  // 0 = empty (id 0 is kept in zero_)
  std::size_t n_ = 0;
  bool zero_ = false;
};

}  // namespace servesim
