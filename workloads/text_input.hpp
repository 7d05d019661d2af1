// servesim workloads: what every text trace reader does with the start of its file, and the bounds
// of trace fields (README "Input rules").
#pragma once
#include "scenarios/scenario.hpp"

#include <istream>

namespace servesim {

/// Skips a UTF-8 byte-order mark (EF BB BF) at the stream's current position (a file's start): a
/// trace that begins with one is read as without it.
inline void skip_bom(std::istream& in) {
  const auto start = in.tellg();
  char b[3] = {};
  if (in.read(b, 3) && b[0] == '\xEF' && b[1] == '\xBB' && b[2] == '\xBF') return;
  in.clear();
  in.seekg(start);
}

}  // namespace servesim
