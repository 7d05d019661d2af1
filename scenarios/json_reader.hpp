// servesim scenarios: reading JSON data files with errors that name the file, the line:column of a
// syntax error, or the field path ("deployments[1].decode.ep"), what was found and what was
// expected. Internal to the scenario and data-file parsers (scenario.cpp, data_files.cpp).
#pragma once
#include "scenarios/json_unique.hpp"
#include "scenarios/scenario.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace servesim::json_reader {

namespace fs = std::filesystem;
using nlohmann::json;

// The file's text; a UTF-8 byte-order mark at its start is dropped (README "Input rules").
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (is_folder(path)) throw ScenarioError(path + ": is a folder, not a file");
  if (!in) throw ScenarioError(path + ": cannot open the file (check the path)");
  std::ostringstream o;
  o << in.rdbuf();
  std::string s = o.str();
  if (s.rfind("\xEF\xBB\xBF", 0) == 0) s.erase(0, 3);
  return s;
}

// "line:column" of byte offset `byte` (0-based) in `text`.
inline std::string line_col(const std::string& text, size_t byte) {
  long line = 1, col = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') ++line, col = 1;
    else ++col;
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

// Parses JSON text; a syntax error names the line and column, a key given twice in one object its
// object's path (json_unique.hpp).
inline json parse_json(const std::string& text, const std::string& origin) {
  try {
    return parse_unique_keys<json>(text);
  } catch (const JsonTextError& e) {
    throw ScenarioError(origin + ": " + e.what());  // names the object's path, or the NUL byte's line and column
  } catch (const json::parse_error& e) {
    std::string msg = e.what();
    const auto p = msg.find("parse error");
    // e.byte is 1-based: the offending character
    throw ScenarioError(origin + ":" + line_col(text, e.byte > 0 ? e.byte - 1 : 0) + ": malformed JSON (" + (p == std::string::npos ? msg : msg.substr(p)) + ")");
  } catch (const json::out_of_range& e) {  // 406: a number beyond double range ("number overflow parsing '1e400'")
    const std::string msg = e.what();
    const auto a = msg.find('\''), b = msg.rfind('\'');
    const size_t at = a != std::string::npos && b > a ? text.find(msg.substr(a + 1, b - a - 1)) : std::string::npos;
    throw ScenarioError(origin + (at == std::string::npos ? "" : ":" + line_col(text, at)) + ": a number is out of range (" +
                        msg.substr(msg.find(']') == std::string::npos ? 0 : msg.find(']') + 2) + "): numbers must be finite doubles");
  }
}

inline std::string describe(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// Levenshtein distance (for "did you mean" on unknown keys).
inline size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// A JSON object being read: remembers its path for messages and which keys were used, so that
// unknown keys are reported instead of ignored.
class Obj {
 public:
  Obj(const json& j, std::string origin, std::string path) : j_(j), origin_(std::move(origin)), path_(std::move(path)) {
    if (!j_.is_object()) fail("", "expected a JSON object, got " + describe(j_));
  }
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    std::string where = path_;
    if (!key.empty()) where += (where.empty() ? "" : ".") + key;
    throw ScenarioError(origin_ + ": " + (where.empty() ? "" : where + ": ") + msg);
  }
  bool has(const std::string& k) const {
    asked_.insert(k);
    return j_.contains(k);
  }
  const json& raw(const std::string& k) {
    used_.insert(k), asked_.insert(k);  // a key read as a whole (child objects, arrays) is accepted too
    if (!j_.contains(k)) fail(k, "missing (required)");  // not json::at's out_of_range (issue 16)
    return j_.at(k);
  }
  double num(const std::string& k, std::optional<double> def, double min = -std::numeric_limits<double>::infinity(),
             double max = std::numeric_limits<double>::infinity()) {
    if (!has(k)) {
      if (!def) fail(k, "missing (a number is required)");
      return *def;
    }
    const json& v = raw(k);
    if (!v.is_number()) fail(k, "expected a number, got " + describe(v));
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < min || x > max) {
      // the value as written (rev25d: 2^40 + 1 printed as 1.09951e+12, which looked in range)
      // the bounds to as many digits as they need (no fmt here: this library links only nlohmann_json)
      auto full = [](double b) {
        std::string t;
        for (int digits = 6; digits <= 17; ++digits) {
          std::ostringstream o;
          o.precision(digits);
          o << b;
          t = o.str();
          if (std::strtod(t.c_str(), nullptr) == b) break;
        }
        return t;
      };
      fail(k, "must be in [" + full(min) + ", " + full(max) + "], got " + v.dump());
    }
    return x;
  }
  long long integer(const std::string& k, std::optional<long long> def, long long min = std::numeric_limits<long long>::min(),
                    long long max = std::numeric_limits<long long>::max()) {
    if (!has(k)) {
      if (!def) fail(k, "missing (an integer is required)");
      return *def;
    }
    const json& v = raw(k);
    if (!v.is_number_integer()) fail(k, "expected an integer, got " + describe(v));
    if (v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(max))
      fail(k, "must be ≤ " + std::to_string(max) + ", got " + describe(v));
    const long long x = v.get<long long>();
    if (x < min) fail(k, "must be ≥ " + std::to_string(min) + ", got " + std::to_string(x));
    if (x > max) fail(k, "must be ≤ " + std::to_string(max) + ", got " + std::to_string(x));
    return x;
  }
  /// An int field: within [min, max], at most INT_MAX (its type).
  int int32(const std::string& k, std::optional<long long> def, long long min = 0, long long max = std::numeric_limits<int>::max()) {
    return static_cast<int>(integer(k, def, min, std::min<long long>(max, std::numeric_limits<int>::max())));
  }
  std::string str(const std::string& k, std::optional<std::string> def) {
    if (!has(k)) {
      if (!def) fail(k, "missing (a string is required)");
      return *def;
    }
    const json& v = raw(k);
    if (!v.is_string()) fail(k, "expected a string, got " + describe(v));
    return v.get<std::string>();
  }
  bool boolean(const std::string& k, bool def) {
    if (!has(k)) return def;
    const json& v = raw(k);
    if (!v.is_boolean()) fail(k, "expected true or false, got " + describe(v));
    return v.get<bool>();
  }
  DType dtype(const std::string& k, std::optional<DType> def) {
    if (!has(k)) {
      if (!def) fail(k, "missing (a dtype is required)");
      return *def;
    }
    const std::string s = str(k, std::nullopt);
    try {
      return parse_dtype(s);
    } catch (const std::invalid_argument& e) {
      fail(k, e.what());
    }
  }
  template <class E>
  E choice(const std::string& k, std::optional<E> def, std::initializer_list<std::pair<const char*, E>> options) {
    if (!has(k)) {
      if (!def) fail(k, "missing");
      return *def;
    }
    const std::string s = str(k, std::nullopt);
    std::string known;
    for (const auto& [name, v] : options) {
      if (s == name) return v;
      known += (known.empty() ? "" : ", ") + std::string(name);
    }
    fail(k, "unknown value \"" + s + "\" (expected one of: " + known + ")");
  }
  Obj child(const std::string& k) {
    const json& v = raw(k);
    return Obj(v, origin_, path_.empty() ? k : path_ + "." + k);
  }
  /// Call when every known key was read: any other key is an error.
  void done() const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (!used_.count(it.key()) && it.key().rfind("_comment", 0) != 0 && it.key() != "source" && it.key() != "sources") {
        std::string known, closest;
        size_t best = 3;  // suggest a key at most 2 edits away
        for (const auto& u : asked_) {
          known += (known.empty() ? "" : ", ") + u;
          const size_t d = edit_distance(it.key(), u);
          if (d < best) best = d, closest = u;
        }
        fail(it.key(), "unknown key" + (closest.empty() ? std::string() : " (did you mean \"" + closest + "\"?)") +
                           "; keys accepted here: " + (known.empty() ? std::string("none") : known));
      }
  }
  const std::string& origin() const { return origin_; }
  const std::string& path() const { return path_; }

 private:
  const json& j_;
  std::string origin_, path_;
  std::set<std::string> used_;
  mutable std::set<std::string> asked_;  // every key this object was asked for, present or not
};

}  // namespace servesim::json_reader
