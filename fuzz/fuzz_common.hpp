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
/// In /dev/shm (memory) where it exists: on a loaded machine an open() on the disk's /tmp stalled
/// past libFuzzer's 1 s per input (a false "timeout" with the stack in __open; campaign of Dec 1).
inline std::string as_file(const uint8_t* data, size_t size, const char* ext) {
  static const std::string path = std::string(::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + "/servesim-fuzz-" +
                                  std::to_string(::getpid()) + ext;
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
