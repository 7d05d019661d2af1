#include "sim/prefix_cache.hpp"

#include <stdexcept>

namespace servesim {

void LruEviction::make_evictable(std::uint64_t id, int depth, double t_s) {
  forget(id);
  const auto k = std::make_tuple(t_s, -depth, id);
  order_.insert(k);
  key_.emplace(id, k);
}

void LruEviction::forget(std::uint64_t id) {
  auto it = key_.find(id);
  if (it == key_.end()) return;
  order_.erase(it->second);
  key_.erase(it);
}

bool LruEviction::victim(std::uint64_t& id) const {
  if (order_.empty()) return false;
  id = std::get<2>(*order_.begin());
  return true;
}

std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name) {
  if (name == "lru") return std::make_unique<LruEviction>();
  throw std::invalid_argument("unknown eviction policy \"" + name + "\" (known: lru)");
}

PrefixCache::PrefixCache(int block_tokens, double block_bytes, double checkpoint_bytes, std::unique_ptr<EvictionPolicy> eviction)
    : block_tokens_(block_tokens), block_bytes_(block_bytes), checkpoint_bytes_(checkpoint_bytes), eviction_(std::move(eviction)) {}

int PrefixCache::match(const Request& r) const {
  if (r.block_tokens != block_tokens_ || r.block_hashes.empty()) return 0;
  const long long whole = std::min<long long>(r.input_tokens / block_tokens_, static_cast<long long>(r.block_hashes.size()));
  int usable = 0;
  for (long long i = 0; i < whole; ++i) {
    auto it = blocks_.find(r.block_hashes[static_cast<size_t>(i)]);
    if (it == blocks_.end()) break;
    if (checkpoint_bytes_ <= 0 || it->second.checkpoint) usable = static_cast<int>(i + 1);
  }
  if (static_cast<long long>(usable) * block_tokens_ >= r.input_tokens) --usable;  // compute at least one token
  return usable;
}

void PrefixCache::pin(const Request& r, int n) {
  for (int i = 0; i < n; ++i) {
    const std::uint64_t id = r.block_hashes[static_cast<size_t>(i)];
    Entry& e = blocks_.at(id);
    if (e.pins++ == 0) eviction_->forget(id);
  }
}

void PrefixCache::unpin(const Request& r, int n, double t_s) {
  for (int i = 0; i < n; ++i) {
    const std::uint64_t id = r.block_hashes[static_cast<size_t>(i)];
    Entry& e = blocks_.at(id);
    if (--e.pins == 0) eviction_->make_evictable(id, e.depth, t_s);
  }
}

double PrefixCache::release_and_insert(const Request& r, int pinned, double t_s) {
  const double before = bytes_;
  if (r.block_tokens == block_tokens_) {
    const long long whole = std::min<long long>(r.input_tokens / block_tokens_, static_cast<long long>(r.block_hashes.size()));
    for (long long i = 0; i < whole; ++i) {
      const std::uint64_t id = r.block_hashes[static_cast<size_t>(i)];
      auto [it, fresh] = blocks_.try_emplace(id);
      Entry& e = it->second;
      if (fresh) {
        e.depth = static_cast<int>(i);
        bytes_ += block_bytes_;
      }
      if (i < pinned) --e.pins;
      if (i == whole - 1 && checkpoint_bytes_ > 0 && !e.checkpoint) {
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
    freed += block_bytes_ + (it->second.checkpoint ? checkpoint_bytes_ : 0.0);
    blocks_.erase(it);
  }
  bytes_ -= freed;
  return freed;
}

}  // namespace servesim
