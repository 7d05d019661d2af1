#include "workloads/mooncake.hpp"
#include "scenarios/file_names.hpp"

#include "workloads/json_row.hpp"
#include "workloads/text_input.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

namespace servesim {

MooncakeReader::MooncakeReader(std::string path, double time_scale, double jitter_s, int block_tokens,
                               long long max_requests, std::uint64_t seed, bool skip_bad_rows)
    : path_(std::move(path)), in_(path_), time_scale_(time_scale), jitter_s_(jitter_s), block_tokens_(block_tokens),
      max_requests_(max_requests), rng_(seed), skip_(skip_bad_rows) {
  if (is_folder(path_)) throw std::runtime_error("trace " + path_ + " is a folder, not a file");
  if (!in_) throw std::runtime_error("cannot open trace " + path_ + kTraceHint);
  skip_bom(in_);
}

std::optional<Request> MooncakeReader::read_row() {
  for (;;) {
    try {
      return parse_row();
    } catch (const TraceError&) {
      if (!skip_) throw;
      ++skipped_;
    }
  }
}

std::optional<Request> MooncakeReader::parse_row() {
  std::string s;
  while (std::getline(in_, s)) {
    ++line_;
    if (s.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
    const nlohmann::json j =
        json_row(s, path_, line_, "; expected {\"timestamp\": ms, \"input_length\": n, \"output_length\": n, \"hash_ids\": [...]}");
    if (!j.is_object()) throw TraceError(path_, line_, "expected a JSON object per line");
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "timestamp" && it.key() != "input_length" && it.key() != "output_length" && it.key() != "hash_ids")
        throw TraceError(path_, line_, "unknown field \"" + it.key() + "\" (a Mooncake row has timestamp, input_length, output_length, hash_ids)");
    Request r;
    const long long ts = json_int(j, "timestamp", 0, path_, line_);
    r.input_tokens = json_int(j, "input_length", 1, path_, line_, kMaxTokens);
    r.output_tokens = json_int(j, "output_length", 1, path_, line_, kMaxTokens);
    // time 0 is the first row's timestamp (README "Input rules": epoch milliseconds work)
    const long long origin = read_ > 0 ? ts0_ : ts;
    const double raw_s = static_cast<double>(ts - origin) / 1000.0 * time_scale_;
    if (read_ > 0 && raw_s < last_raw_s_)
      throw TraceError(path_, line_, "timestamp " + std::to_string(ts) + " ms is earlier than the previous row's (rows must be in arrival order)");
    if (raw_s > kMaxSeconds)
      throw TraceError(path_, line_, "timestamp " + std::to_string(ts) + " ms is more than 1e9 s (× time_scale) after the first row's " + std::to_string(origin));
    last_raw_s_ = raw_s;
    if (j.contains("hash_ids")) {
      const auto& h = j["hash_ids"];
      if (!h.is_array()) throw TraceError(path_, line_, "\"hash_ids\" must be an array of integers");
      const long long want = (r.input_tokens + block_tokens_ - 1) / block_tokens_;
      if (static_cast<long long>(h.size()) != want)
        throw TraceError(path_, line_, "\"hash_ids\" has " + std::to_string(h.size()) + " ids but input_length " + std::to_string(r.input_tokens) +
                                           " needs ceil(" + std::to_string(r.input_tokens) + "/" + std::to_string(block_tokens_) + ") = " + std::to_string(want));
      r.block_hashes.reserve(h.size());
      for (const auto& x : h) {
        if (!x.is_number_unsigned()) throw TraceError(path_, line_, "\"hash_ids\" entries must be non-negative integers, got " + x.dump());
        r.block_hashes.push_back(x.get<std::uint64_t>());
      }
      r.block_tokens = block_tokens_;
    }
    r.arrival_s = raw_s + (jitter_s_ > 0 ? rng_.uniform() * jitter_s_ : 0.0);
    r.origin = path_ + ":" + std::to_string(line_);
    if (read_ == 0) ts0_ = ts;
    ++read_;
    return r;
  }
  return std::nullopt;
}

std::optional<Request> MooncakeReader::next() {
  if (max_requests_ > 0 && emitted_ >= max_requests_) return std::nullopt;
  // keep reading until the earliest buffered row cannot be overtaken: every later row arrives at
  // ≥ its raw time, which is ≥ the last raw time read
  while (!eof_ && (window_.empty() || window_.top().arrival_s > last_raw_s_)) {
    auto r = read_row();
    if (!r) {
      eof_ = true;
      break;
    }
    window_.push(std::move(*r));
  }
  if (window_.empty()) return std::nullopt;
  Request r = window_.top();
  window_.pop();
  r.id = static_cast<std::uint64_t>(emitted_++);
  return r;
}

std::string MooncakeReader::time_origin() const {
  return read_ > 0 && ts0_ != 0 ? "time 0 is the first row's timestamp, " + std::to_string(ts0_) + " ms (" + path_ + ")" : std::string();
}

std::string MooncakeReader::describe() const {
  std::ostringstream o;
  o << "mooncake trace " << path_ << " (time_scale " << time_scale_ << ", jitter " << jitter_s_ << " s, " << block_tokens_ << "-token blocks";
  if (max_requests_ > 0) o << ", first " << max_requests_ << " requests";
  o << ")";
  return o.str();
}

}  // namespace servesim
