// servesim workloads: field access for JSONL trace rows, with errors that name file and line.
#pragma once
#include "scenarios/json_unique.hpp"
#include "workloads/request.hpp"

#include <nlohmann/json.hpp>

#include <limits>
#include <string>

namespace servesim {

/// Integer field `k` of a row, in [min, max]; throws TraceError(file, line, ...) when missing, not
/// an integer, or out of range (also beyond 64-bit integers).
inline long long json_int(const nlohmann::json& j, const char* k, long long min, const std::string& file, long line,
                          long long max = std::numeric_limits<long long>::max()) {
  if (!j.contains(k)) throw TraceError(file, line, std::string("missing field \"") + k + "\"");
  const auto& v = j[k];
  if (!v.is_number_integer()) throw TraceError(file, line, std::string("\"") + k + "\" must be an integer, got " + v.dump());
  if (v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(max))
    throw TraceError(file, line, std::string("\"") + k + "\" must be ≤ " + std::to_string(max) + ", got " + v.dump());
  const long long x = v.get<long long>();
  if (x < min) throw TraceError(file, line, std::string("\"") + k + "\" must be ≥ " + std::to_string(min) + ", got " + std::to_string(x));
  if (x > max) throw TraceError(file, line, std::string("\"") + k + "\" must be ≤ " + std::to_string(max) + ", got " + std::to_string(x));
  return x;
}

/// Parses one JSONL row; a syntax error, a number beyond double range, a key given twice or a NUL
/// byte throws TraceError(file, line).
inline nlohmann::json json_row(const std::string& text, const std::string& file, long line, const std::string& expected = "") {
  try {
    return parse_unique_keys<nlohmann::json>(text);
  } catch (const JsonTextError& e) {  // a key twice, a NUL byte
    throw TraceError(file, line, e.what());
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range 406 (number overflow, e.g. 1e400)
    throw TraceError(file, line, std::string("not valid JSON (") + e.what() + ")" + expected);
  }
}

}  // namespace servesim
