// servesim scenarios: JSON parsing that refuses an object with the same key twice. RFC 8259 §4
// leaves what such an object means to the parser ("the names within an object SHOULD be unique");
// nlohmann::json keeps the last value, so `"seed": 42, "seed": 7` ran with seed 7 without a word
// (review, twenty-second session). Used by every reader of user input: scenario, model and hardware
// files (json_reader.hpp), JSONL trace rows (workloads/json_row.hpp), sweep grids and validation
// cases. It also refuses NUL bytes: nlohmann::json's lexer reads a NUL as the end of its input, so
// `{"timestamp": 0, ...}` followed by NUL bytes and anything else parsed as the row alone (review,
// twenty-second session).
#pragma once
#include <nlohmann/json.hpp>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace servesim {

/// What parse_unique_keys refuses beyond J::parse's own errors (the readers catch this one type).
struct JsonTextError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A NUL byte (U+0000) in JSON text: JSON has none outside escapes (RFC 8259 §7 requires control
/// characters in strings to be escaped), and nlohmann::json would stop reading at it. `byte`: its
/// 0-based offset; the message names the line and column (1-based; the column alone on line 1).
struct NulByteError : JsonTextError {
  NulByteError(const std::string& text, size_t at) : JsonTextError(message(text, at)), byte(at) {}
  size_t byte;

 private:
  static std::string message(const std::string& text, size_t at) {
    long line = 1, col = 1;
    for (size_t i = 0; i < at && i < text.size(); ++i) {
      if (text[i] == '\n') ++line, col = 1;
      else ++col;
    }
    std::string m = "a NUL byte (U+0000) at ";
    if (line > 1) m.append("line ").append(std::to_string(line)).append(", ");
    return m.append("column ").append(std::to_string(col)).append(": JSON text has none (a damaged or binary file?)");
  }
};

/// Throws NulByteError if `text` holds a NUL byte; call before J::parse on any input text.
inline void refuse_nul_bytes(const std::string& text) {
  const size_t at = text.find('\0');
  if (at != std::string::npos) throw NulByteError(text, at);
}

/// A key given twice in one JSON object. `key`: the key; `where`: the path of the object that holds
/// it ("deployments[0].prefill"; empty for the top level).
struct DuplicateKeyError : JsonTextError {
  DuplicateKeyError(std::string k, std::string w) : JsonTextError(message(k, w)), key(std::move(k)), where(std::move(w)) {}
  std::string key, where;

 private:
  static std::string message(const std::string& k, const std::string& w) {
    std::string m = "key \"";
    m.append(k).append("\" appears twice in ");
    if (w.empty()) m.append("the top-level object");
    else m.append("\"").append(w).append("\"");
    return m.append(" (which one counts is undefined in JSON: remove one)");
  }
};

/// J::parse(text) (J: nlohmann::json or ordered_json), throwing DuplicateKeyError for a key that
/// appears twice in one object and NulByteError for a NUL byte anywhere in `text` (both
/// JsonTextError); syntax and range errors are J's own exceptions, as J::parse throws.
template <class J>
J parse_unique_keys(const std::string& text) {
  refuse_nul_bytes(text);
  struct Open {
    bool array;
    std::string name;  // the path element of this container ("key", or "[i]" for an array's element)
    std::set<std::string> keys;
    long long next = 0;  // an array's next element index
  };
  std::vector<Open> open;
  std::string key;  // the last key read in the innermost object
  auto path = [&open] {
    std::string p;
    for (size_t i = 1; i < open.size(); ++i) {
      if (open[i].name.empty() || (open[i].name[0] != '[' && !p.empty())) p.push_back('.');
      p.append(open[i].name);
    }
    return p;
  };
  typename J::parser_callback_t cb = [&](int, typename J::parse_event_t ev, J& parsed) {
    using E = typename J::parse_event_t;
    if (ev == E::object_start || ev == E::array_start) {
      std::string name = key;
      if (open.empty()) name.clear();
      else if (open.back().array) name = std::string(1, '[').append(std::to_string(open.back().next++)).append(1, ']');
      open.push_back({ev == E::array_start, name, {}, 0});
    } else if (ev == E::object_end || ev == E::array_end) {
      if (!open.empty()) open.pop_back();
    } else if (ev == E::value) {
      if (!open.empty() && open.back().array) ++open.back().next;  // a scalar element
    } else if (ev == E::key) {
      key = parsed.template get<std::string>();
      if (!open.empty() && !open.back().keys.insert(key).second) throw DuplicateKeyError(key, path());
    }
    return true;
  };
  return J::parse(text, cb);
}

}  // namespace servesim
