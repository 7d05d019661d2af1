#include "sim/prefix_cache.hpp"

#include <algorithm>
#include <stdexcept>

namespace servesim {

void LruEviction::make_evictable(std::uint64_t id, int, double) {
  auto it = pos_.find(id);
  if (it != pos_.end()) {
    order_.splice(order_.end(), order_, it->second);
    return;
  }
  order_.push_back(id);
  pos_.emplace(id, std::prev(order_.end()));
}

void LruEviction::forget(std::uint64_t id) {
  auto it = pos_.find(id);
  if (it == pos_.end()) return;
  order_.erase(it->second);
  pos_.erase(it);
}

bool LruEviction::victim(std::uint64_t& id) const {
  if (order_.empty()) return false;
  id = order_.front();
  return true;
}

std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name) {
  if (name == "lru") return std::make_unique<LruEviction>();
  throw std::invalid_argument("unknown eviction policy \"" + name + "\" (known: lru)");
}

PrefixCache::PrefixCache(int block_tokens, double block_bytes, double checkpoint_bytes, std::unique_ptr<EvictionPolicy> eviction)
    : block_tokens_(block_tokens), block_bytes_(block_bytes), checkpoint_bytes_(checkpoint_bytes), eviction_(std::move(eviction)) {}

int PrefixCache::block_len(const Request& r, long long i) const {
  return static_cast<int>(std::min<long long>(block_tokens_, r.input_tokens - i * block_tokens_));
}

PrefixMatch PrefixCache::match(const Request& r) const {
  PrefixMatch m;
  if (!usable(r)) return m;
  const long long n = static_cast<long long>(r.block_hashes.size());
  // cached blocks form a leading run: binary search for its length
  long long lo = 0, hi = n;
  while (lo < hi) {
    const long long mid = (lo + hi + 1) / 2;
    if (blocks_.count(r.block_hashes[static_cast<size_t>(mid - 1)])) lo = mid;
    else hi = mid - 1;
  }
  m.present_blocks = static_cast<int>(lo);
  long long usable_blocks = lo;
  if (checkpoint_bytes_ > 0) {  // deepest checkpointed block, leaving at least one token to compute
    usable_blocks = 0;
    for (long long i = lo; i > 0; --i) {
      const Entry& e = blocks_.at(r.block_hashes[static_cast<size_t>(i - 1)]);
      if (e.checkpoint && i * block_tokens_ < r.input_tokens) {
        usable_blocks = i;
        break;
      }
    }
    m.tokens = usable_blocks * block_tokens_;
  } else {
    // only the last block of a leading run can be partial (a partial block ends its chain)
    if (usable_blocks > 0)
      m.tokens = (usable_blocks - 1) * block_tokens_ + blocks_.at(r.block_hashes[static_cast<size_t>(usable_blocks - 1)]).tokens;
    m.tokens = std::min(m.tokens, r.input_tokens - 1);
  }
  m.pin_blocks = static_cast<int>(usable_blocks);
  return m;
}

void PrefixCache::pin(const Request& r, int n) {
  for (int i = 0; i < n; ++i) {
    const std::uint64_t id = r.block_hashes[static_cast<size_t>(i)];
    Entry& e = blocks_.at(id);
    if (e.pins++ == 0) eviction_->forget(id);
  }
}

void PrefixCache::unpin(const Request& r, int n, double t_s) {
  for (int i = n - 1; i >= 0; --i) {
    const std::uint64_t id = r.block_hashes[static_cast<size_t>(i)];
    Entry& e = blocks_.at(id);
    if (--e.pins == 0) eviction_->make_evictable(id, e.depth, t_s);
  }
}

double PrefixCache::release_and_insert(const Request& r, int pinned, double t_s) {
  const double before = bytes_;
  if (usable(r)) {
    const long long n = static_cast<long long>(r.block_hashes.size());
    const long long last_whole = r.input_tokens / block_tokens_ - 1;
    for (long long i = n - 1; i >= 0; --i) {  // deepest first: leaves become the older entries
      const std::uint64_t id = r.block_hashes[static_cast<size_t>(i)];
      auto [it, fresh] = blocks_.try_emplace(id);
      Entry& e = it->second;
      if (fresh) {
        e.depth = static_cast<int>(i);
        e.tokens = block_len(r, i);
        bytes_ += block_bytes_ * e.tokens / block_tokens_;
      }
      if (i < pinned) --e.pins;
      if (i == last_whole && checkpoint_bytes_ > 0 && !e.checkpoint) {
        e.checkpoint = true;
        bytes_ += checkpoint_bytes_;
      }
      if (e.pins == 0) eviction_->make_evictable(id, e.depth, t_s);
    }
  }
  return bytes_ - before;
}

double PrefixCache::evict(double want) {
  double freed = 0;
  std::uint64_t id = 0;
  while (freed < want && eviction_->victim(id)) {
    eviction_->forget(id);
    auto it = blocks_.find(id);
    freed += block_bytes_ * it->second.tokens / block_tokens_ + (it->second.checkpoint ? checkpoint_bytes_ : 0.0);
    blocks_.erase(it);
  }
  bytes_ -= freed;
  return freed;
}

}  // namespace servesim
