// servesim workloads: prefix-block ids for a session's prompts. A session's prompts grow by
// appending (history + new turn), so block i of a round's prompt equals block i of the previous
// round's prompt when it lies inside the tokens the two share; other blocks are new content and get
// fresh ids. Ids are chained in the Mooncake sense (equal id ⇒ equal prefix up to that block), never
// collide with small trace ids (top bit set), and depend only on (session, order of assignment).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "workloads/request.hpp"

namespace servesim {

class SessionBlocks {
 public:
  /// `fixed`: ids of leading blocks common to every session (a shared system prompt).
  SessionBlocks(long long session, int block_tokens, std::vector<std::uint64_t> fixed = {})
      : key_(static_cast<std::uint64_t>(session)), block_tokens_(block_tokens), fixed_(std::move(fixed)) {}

  /// Block ids of a prompt of `prompt_tokens` tokens whose first `shared_tokens` tokens equal the
  /// previous prompt's (or the previous prompt + its output: the session history).
  std::vector<std::uint64_t> assign(long long prompt_tokens, long long shared_tokens) {
    const long long blocks = capped_block_ids(prompt_tokens, block_tokens_);
    // only whole blocks of the previous prompt can be kept: its partial last block now holds other
    // (more) tokens, so it is new content
    const long long keep = std::min(shared_tokens / block_tokens_, prev_tokens_ / block_tokens_);
    std::vector<std::uint64_t> ids;
    ids.reserve(static_cast<size_t>(blocks));
    for (long long i = 0; i < blocks; ++i) {
      const bool whole = (i + 1) * block_tokens_ <= prompt_tokens;
      if (i < keep) ids.push_back(prev_[static_cast<size_t>(i)]);
      else if (whole && i < static_cast<long long>(fixed_.size())) ids.push_back(fixed_[static_cast<size_t>(i)]);
      else ids.push_back(fresh());
    }
    prev_ = ids;
    prev_tokens_ = prompt_tokens;
    return ids;
  }

 private:
  std::uint64_t fresh() {
    std::uint64_t z = key_ * 0x9e3779b97f4a7c15ULL + (++counter_) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (z ^ (z >> 31)) | (1ULL << 63);
  }
  std::uint64_t key_, counter_ = 0;
  long long prev_tokens_ = 0;
  int block_tokens_;
  std::vector<std::uint64_t> fixed_, prev_;
};

}  // namespace servesim
