// servesim workloads: field access for JSONL trace rows, with errors that name file and line.
#pragma once
#include "workloads/request.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace servesim {

/// Integer field `k` of a row (≥ min); throws TraceError(file, line, ...) when missing, not an
/// integer, or too small.
inline long long json_int(const nlohmann::json& j, const char* k, long long min, const std::string& file, long line) {
  if (!j.contains(k)) throw TraceError(file, line, std::string("missing field \"") + k + "\"");
  const auto& v = j[k];
  if (!v.is_number_integer()) throw TraceError(file, line, std::string("\"") + k + "\" must be an integer, got " + v.dump());
  const long long x = v.get<long long>();
  if (x < min) throw TraceError(file, line, std::string("\"") + k + "\" must be ≥ " + std::to_string(min) + ", got " + std::to_string(x));
  return x;
}

}  // namespace servesim
