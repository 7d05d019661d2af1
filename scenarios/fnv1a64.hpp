// servesim: FNV-1a 64-bit hashing, the one implementation behind every provenance hash the product
// prints (cost-model tables and parameter files, trace files). Constants from the FNV specification
// (Fowler, Noll, Vo; IETF draft-eastlake-fnv): offset basis 0xcbf29ce484222325 = 14695981039346656037,
// prime 0x100000001b3 = 1099511628211. Test vectors: "" -> cbf29ce484222325, "abc" -> e71fa2190541574b.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace servesim {

/// Incremental FNV-1a 64 over bytes fed in any number of pieces. No errors.
class Fnv1a64 {
 public:
  void add(const char* bytes, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      h_ ^= static_cast<unsigned char>(bytes[i]);
      h_ *= 1099511628211ULL;
    }
  }
  /// The hash so far as 16 lower-case hex digits.
  std::string hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h_));
    return buf;
  }

 private:
  std::uint64_t h_ = 14695981039346656037ULL;
};

/// A whole file's FNV-1a 64 (16 hex digits) and size in bytes.
struct FileDigest {
  std::string fnv1a64;
  long long bytes = 0;
};

/// Reads the file at `path` in 1 MiB pieces. Throws std::runtime_error "<path>: cannot open the
/// <what>" or "<path>: read error".
inline FileDigest fnv1a64_file(const std::string& path, const std::string& what = "file") {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open the " + what);
  Fnv1a64 h;
  FileDigest d;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.add(buf.data(), static_cast<std::size_t>(in.gcount()));
    d.bytes += in.gcount();
  }
  if (in.bad()) throw std::runtime_error(path + ": read error");
  d.fnv1a64 = h.hex();
  return d;
}

}  // namespace servesim
