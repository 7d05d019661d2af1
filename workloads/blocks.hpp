// servesim workloads: re-expressing a request's chained prefix-block ids at another block size
// (the cache's), keeping the chain property (equal id at position i ⇒ equal prefix up to there).
//  coarser (to = k × from): a new block is k old ones; its id is the id of the last old block in it
//    (which already names the whole prefix up to its end);
//  finer (from = k × to): old block b becomes k sub-blocks with ids mixed from (b, j).
// Throws std::invalid_argument when neither size divides the other.
#pragma once
#include "workloads/request.hpp"

namespace servesim {

void remap_blocks(Request& r, int to_block_tokens);

}  // namespace servesim
