#include "sim/kvcache/prefix_index.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace servesim {

PrefixIndex::PrefixIndex(const std::vector<PrefixCache*>& caches) : caches_(caches), gen_(caches.size(), 1), memo_(caches.size()), last_(versions_.end()) {
  for (std::size_t g = 0; g < caches_.size(); ++g) {
    if (caches_[g]->bytes() > 0) throw std::logic_error("PrefixIndex: rank " + std::to_string(g) + "'s cache already holds blocks");
    caches_[g]->attach_index(this, static_cast<int>(g));
  }
  if (!caches_.empty()) indexed_blocks_ = static_cast<int>(std::max<long long>(1, kIndexedTokens / caches_[0]->block_tokens()));
}

void PrefixIndex::add(int rank, const std::vector<std::uint64_t>& ids, int first) {
  const std::size_t count = static_cast<std::size_t>(std::clamp(indexed_blocks_ - first, 0, static_cast<int>(ids.size())));
  for (std::size_t i = 0; i < count; ++i) {
    auto& h = holders_[ids[i]];
    h.insert(std::upper_bound(h.begin(), h.end(), rank), rank);
  }
}

void PrefixIndex::remove(int rank, const std::vector<std::uint64_t>& ids, int first) {
  const std::size_t count = static_cast<std::size_t>(std::clamp(indexed_blocks_ - first, 0, static_cast<int>(ids.size())));
  for (std::size_t i = 0; i < count; ++i) {
    auto it = holders_.find(ids[i]);
    if (it == holders_.end()) continue;
    auto& h = it->second;
    auto at = std::lower_bound(h.begin(), h.end(), rank);
    if (at != h.end() && *at == rank) h.erase(at);
    if (h.empty()) holders_.erase(it);
  }
}

const PrefixIndex::Holders* PrefixIndex::holder_list(std::uint64_t id) const {
  auto it = holders_.find(id);
  return it == holders_.end() ? nullptr : &it->second;
}

std::size_t PrefixIndex::holders(std::uint64_t id) const {
  const auto* h = holder_list(id);
  return h ? h->size() : 0;
}

// The popular prefix's version: equal ids ⇒ equal version (compared whole, no hashing), so a memo
// walked for one prefix is never used for another.
std::uint64_t PrefixIndex::prefix_version(const std::uint64_t* ids, int n) {
  if (last_ != versions_.end() && last_->first.size() == static_cast<std::size_t>(n) && std::equal(ids, ids + n, last_->first.begin()))
    return last_->second;  // the common case: the same popular prefix as the arrival before
  std::vector<std::uint64_t> key(ids, ids + n);
  last_ = versions_.find(key);
  if (last_ != versions_.end()) return last_->second;
  if (versions_.size() >= kPrefixVersions) versions_.clear();  // later versions are new numbers: old memos miss
  last_ = versions_.emplace(std::move(key), next_version_++).first;
  return last_->second;
}

void PrefixIndex::match_all(const Request& r, std::vector<long long>& out) {
  const std::size_t ranks = caches_.size();
  out.assign(ranks, 0);
  if (ranks == 0 || !caches_[0]->usable(r)) return;
  const auto& ids = r.block_hashes;
  const int n = static_cast<int>(ids.size());
  // J: the first position whose block few ranks hold (holder counts never grow along the prompt)
  const int m = std::min(n, indexed_blocks_);
  int lo = 0, hi = m;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (holders(ids[static_cast<std::size_t>(mid)]) <= kFewHolders) hi = mid;
    else lo = mid + 1;
  }
  const int J = lo;
  if (J == m) {  // every indexed block popular: ask every rank
    for (std::size_t g = 0; g < ranks; ++g) out[g] = caches_[g]->match(r).tokens;
    return;
  }
  const Holders* few = holder_list(ids[static_cast<std::size_t>(J)]);
  auto ask = [&](std::size_t g) { out[g] = caches_[g]->match(r).tokens; };
  if (J == 0) {  // nobody but the few holds the first block
    if (few)
      for (int g : *few) ask(static_cast<std::size_t>(g));
    return;
  }
  const std::uint64_t version = prefix_version(ids.data(), J);
  std::size_t next_few = 0;
  for (std::size_t g = 0; g < ranks; ++g) {
    if (few && next_few < few->size() && static_cast<std::size_t>((*few)[next_few]) == g) {
      while (next_few < few->size() && static_cast<std::size_t>((*few)[next_few]) == g) ++next_few;
      ask(g);
      continue;
    }
    Memo& m = memo_[g];
    if (m.version != version || m.gen != gen_[g]) {
      m.walk = caches_[g]->walk(ids.data(), J);
      m.version = version, m.gen = gen_[g];
    }
    const long long t = caches_[0]->tokens_from_walk(m.walk, r);  // (the same rule for every rank of the pool)
    if (t < 0) ask(g);
    else out[g] = t;
  }
}

}  // namespace servesim
