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

}  // namespace servesim
