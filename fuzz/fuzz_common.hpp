// Shared by the fuzz targets: the input as a file (the readers take paths, as the CLI gives them)
// and a finding that libFuzzer records (abort: the input is saved as crash-*).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace servesim::fuzz {

/// Writes the bytes to a per-process temp file and returns its path (overwritten on each input).
inline std::string as_file(const uint8_t* data, size_t size, const char* ext) {
  static const std::string path = "/tmp/servesim-fuzz-" + std::to_string(::getpid()) + ext;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n", what.c_str());
  std::abort();
}

}  // namespace servesim::fuzz
