#include "workloads/blocks.hpp"

#include <stdexcept>

namespace servesim {

namespace {
std::uint64_t mix(std::uint64_t id, std::uint64_t j) {
  std::uint64_t z = id * 0x9e3779b97f4a7c15ULL + (j + 1) * 0xd1b54a32d192ed03ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

void remap_blocks(Request& r, int to) {
  const int from = r.block_tokens;
  if (from == to || from <= 0 || r.block_hashes.empty()) return;
  if (to <= 0) throw std::invalid_argument("remap_blocks: block size must be ≥ 1");
  std::vector<std::uint64_t> out;
  const long long blocks = (r.input_tokens + to - 1) / to;
  out.reserve(static_cast<size_t>(blocks));
  if (to % from == 0) {
    const long long k = to / from;
    for (long long b = 0; b < blocks; ++b) {
      const long long last = std::min<long long>((b + 1) * k, static_cast<long long>(r.block_hashes.size())) - 1;
      out.push_back(r.block_hashes[static_cast<size_t>(last)]);
    }
  } else if (from % to == 0) {
    const long long k = from / to;
    for (long long b = 0; b < blocks; ++b) out.push_back(mix(r.block_hashes[static_cast<size_t>(b / k)], static_cast<std::uint64_t>(b % k)));
  } else {
    throw std::invalid_argument("the trace's " + std::to_string(from) + "-token blocks cannot be re-expressed as " + std::to_string(to) +
                                "-token blocks (one size must divide the other)");
  }
  r.block_hashes = std::move(out);
  r.block_tokens = to;
}

namespace {
std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30, x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27, x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

bool BlockIdSet::insert(std::uint64_t id) {
  if (id == 0) {
    const bool fresh = !zero_;
    zero_ = true;
    return fresh;
  }
  if (2 * (n_ + 1) > slots_.size()) grow();
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = mix(id) & mask;; i = (i + 1) & mask) {
    if (slots_[i] == id) return false;
    if (slots_[i] == 0) {
      slots_[i] = id;
      ++n_;
      return true;
    }
  }
}

void BlockIdSet::grow() {
  std::vector<std::uint64_t> old(slots_.empty() ? 1024 : 2 * slots_.size(), 0);
  old.swap(slots_);  // slots_: the empty larger table; old: the ids to re-insert
  const std::size_t mask = slots_.size() - 1;
  for (std::uint64_t id : old)
    if (id != 0)
      for (std::size_t i = mix(id) & mask;; i = (i + 1) & mask)
        if (slots_[i] == 0) {
          slots_[i] = id;
          break;
        }
}

}  // namespace servesim
