#include "workloads/tracelab.hpp"
#include "scenarios/file_names.hpp"

#include "workloads/csv.hpp"

#include <cstdio>
#include "workloads/json_row.hpp"
#include "workloads/text_input.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <sstream>

namespace servesim {

namespace {
const char* kReplayHeader = "session_id,arrival_time,round_idx,prefix_len,input_len,output_len,tool_wait_after_ms";
}

// ----------------------------------------------------------------------------- replay CSV

TraceLabReplayReader::TraceLabReplayReader(std::string path, double time_scale, long long max_sessions, int block_tokens, bool skip_bad_rows,
                                           double wait_scale)
    : path_(std::move(path)), in_(path_), time_scale_(time_scale), wait_scale_(wait_scale > 0 ? wait_scale : time_scale), max_sessions_(max_sessions), block_tokens_(block_tokens), skip_(skip_bad_rows) {
  if (is_folder(path_)) throw std::runtime_error("trace " + path_ + " is a folder, not a file");
  if (!in_) throw std::runtime_error("cannot open trace " + path_ + kTraceHint);
  skip_bom(in_);
  // the header is the first line that is not blank; a file of blank lines only is an empty trace
  std::string header;
  line_ = 0;
  while (header.find_first_not_of(" \t\r") == std::string::npos) {
    if (!std::getline(in_, header)) return;  // empty: next() has no rows (run refuses an empty trace)
    ++line_;
  }
  if (!header.empty() && header.back() == '\r') header.pop_back();
  refuse_nul(header, path_, line_);
  if (header != kReplayHeader) throw TraceError(path_, line_, "header \"" + header + "\" is not \"" + kReplayHeader + "\"");
}

namespace {
std::string fmt_ms(double ms) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", ms);
  return buf;
}
}  // namespace

bool TraceLabReplayReader::read_row(Row& r) {
  std::string line;
  while (std::getline(in_, line)) {
    ++line_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    try {
      refuse_nul(line, path_, line_);
      const auto f = split_csv(line);
      if (f.size() != 7) throw TraceError(path_, line_, "expected 7 columns (" + std::string(kReplayHeader) + "), got " + std::to_string(f.size()));
      Row x;
      x.line = line_;
      x.session = csv_int(f[0], path_, line_, "session_id", 0);
      // time 0 is the first session's arrival_time (README "Input rules")
      const double ms = csv_double(f[1], path_, line_, "arrival_time", 0);
      x.arrival_s = (ms - (have_t0_ ? t0_ms_ : ms)) / 1000.0 * time_scale_;
      if (x.arrival_s > kMaxSeconds) throw TraceError(path_, line_, "arrival_time is more than 1e9 s (× time_scale) after the first session's");
      x.round = csv_int(f[2], path_, line_, "round_idx", 0, std::numeric_limits<int>::max());
      x.prefix = csv_int(f[3], path_, line_, "prefix_len", 0, kMaxTokens);
      x.input = csv_int(f[4], path_, line_, "input_len", 1, kMaxTokens);
      if (x.prefix + x.input > kMaxTokens) throw TraceError(path_, line_, "prefix_len + input_len (the prompt) must be ≤ 2^40 tokens");
      x.output = csv_int(f[5], path_, line_, "output_len", 1, kMaxTokens);
      x.wait_s = csv_double(f[6], path_, line_, "tool_wait_after_ms", 0, kMaxSeconds * 1000) / 1000.0 * wait_scale_;
      if (x.wait_s > kMaxSeconds) throw TraceError(path_, line_, "tool_wait_after_ms × wait_scale is more than 1e9 s");
      if (x.session != last_session_) {
        if (seen_.count(x.session))  // before the round check: a later round of a started session is this case (review)
          throw TraceError(path_, line_, "session " + std::to_string(x.session) + " starts again (a session's rows must be contiguous)");
        if (x.round != 0)
          throw TraceError(path_, line_, "round " + std::to_string(x.round) + " of session " + std::to_string(x.session) +
                                             " refers to a session that has not started (its round 0 must come first)");
        if (x.arrival_s < last_arrival_) throw TraceError(path_, line_, "arrival_time goes backwards (sessions must be in arrival order)");
      } else {
        if (x.round != expect_round_)
          throw TraceError(path_, line_, "round_idx " + std::to_string(x.round) + " of session " + std::to_string(x.session) + ": expected " +
                                             std::to_string(expect_round_));
        // a session's rows repeat its arrival_time, and each round's prefix is the history so far
        // (the round before's prefix + input + output): the reader takes the arrival from round 0 and
        // the cached tokens from prefix_len, so a row that disagrees would be simulated silently
        // otherwise (review; the shipped trace holds both for all 255 later rounds)
        if (ms != session_ms_)
          throw TraceError(path_, line_, "arrival_time " + std::string(f[1]) + " differs from the session's (" + fmt_ms(session_ms_) +
                                             "): every row of a session repeats its start");
        if (x.prefix != expect_prefix_)
          throw TraceError(path_, line_, "prefix_len " + std::to_string(x.prefix) + " of round " + std::to_string(x.round) + ": the session's history is " +
                                             std::to_string(expect_prefix_) + " tokens (the round before's prefix_len + input_len + output_len)");
      }
      if (!have_t0_) t0_ms_ = ms, have_t0_ = true;
      if (x.session != last_session_) {
        seen_[x.session] = true;
        last_session_ = x.session;
        last_arrival_ = x.arrival_s;
        session_ms_ = ms;
      }
      expect_round_ = x.round + 1;
      expect_prefix_ = x.prefix + x.input + x.output;  // each ≤ 2^40: no overflow
      r = x;
      return true;
    } catch (const TraceError&) {
      if (!skip_) throw;
      ++skipped_;
    }
  }
  return false;
}

Request TraceLabReplayReader::make(Session& s, const Row& row, double arrival_s) {
  Request r;
  r.id = next_id_++;
  r.arrival_s = arrival_s;
  r.input_tokens = row.prefix + row.input;
  r.output_tokens = row.output;
  r.session = row.session;
  r.round = static_cast<int>(row.round);
  r.history_tokens = row.prefix;
  r.think_after_s = row.wait_s;
  r.last_round = s.rows.empty();
  r.block_tokens = block_tokens_;
  r.block_hashes = s.blocks.assign(r.input_tokens, row.prefix);
  r.origin = path_ + ":" + std::to_string(row.line);
  return r;
}

std::optional<Request> TraceLabReplayReader::next() {
  if (max_sessions_ > 0 && sessions_ >= max_sessions_) return std::nullopt;
  Row first;
  if (lookahead_) {
    first = *lookahead_;
    lookahead_.reset();
  } else if (!read_row(first)) {
    return std::nullopt;
  }
  // read the session's other rows (they are contiguous)
  Session s{{}, SessionBlocks(first.session, block_tokens_)};
  Row x;
  while (read_row(x)) {
    if (x.session != first.session) {
      lookahead_ = x;
      break;
    }
    s.rows.push_back(x);
  }
  ++sessions_;
  auto [it, fresh] = active_.emplace(first.session, std::move(s));
  (void)fresh;
  return make(it->second, first, first.arrival_s);
}

std::optional<Request> TraceLabReplayReader::follow_up(const Request& done, double t_done) {
  auto it = active_.find(done.session);
  if (it == active_.end()) return std::nullopt;
  if (it->second.rows.empty() || done.last_round) {  // last_round: the engine ended the session early
    active_.erase(it);
    return std::nullopt;
  }
  const Row row = it->second.rows.front();
  it->second.rows.pop_front();
  return make(it->second, row, t_done + done.think_after_s);
}

std::string TraceLabReplayReader::time_origin() const {
  if (!have_t0_ || t0_ms_ == 0) return {};
  std::ostringstream o;
  o << "time 0 is the first session's arrival_time, " << t0_ms_ << " ms (" << path_ << ")";
  return o.str();
}

std::string TraceLabReplayReader::describe() const {
  return "tracelab replay " + path_ + " (time_scale " + std::to_string(time_scale_) +
         (wait_scale_ != time_scale_ ? ", wait_scale " + std::to_string(wait_scale_) : std::string()) + ", " + std::to_string(block_tokens_) + "-token blocks)";
}

// ----------------------------------------------------------------------------- round JSONL

namespace {

double iso_time(const nlohmann::json& v, const std::string& file, long line, const char* what) {
  if (!v.is_string()) throw TraceError(file, line, std::string(what) + ": expected an ISO timestamp string");
  std::string s = v.get<std::string>();
  if (!s.empty() && s.back() == 'Z') s.pop_back();
  return csv_datetime(s, file, line, what);
}

}  // namespace

TraceLabRoundsReader::TraceLabRoundsReader(std::string path, double time_scale, long long max_sessions, int block_tokens, bool skip_bad_rows,
                                           double wait_scale)
    : path_(std::move(path)), in_(path_), time_scale_(time_scale), wait_scale_(wait_scale > 0 ? wait_scale : time_scale), block_tokens_(block_tokens) {
  if (is_folder(path_)) throw std::runtime_error("trace " + path_ + " is a folder, not a file");
  if (!in_) throw std::runtime_error("cannot open trace " + path_ + kTraceHint);
  skip_bom(in_);
  std::map<std::string, size_t> by_name;
  std::string s;
  long line = 0;
  for (;;) {
    const std::streamoff off = in_.tellg();
    if (!std::getline(in_, s)) break;
    ++line;
    if (s.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      const nlohmann::json j = json_row(s, path_, line);
      if (!j.contains("session_id") || !j["session_id"].is_string()) throw TraceError(path_, line, "missing string field \"session_id\"");
      const long long round = json_int(j, "round_index", 0, path_, line, std::numeric_limits<int>::max());
      const std::string name = j["session_id"].get<std::string>();
      auto [it, fresh] = by_name.emplace(name, sessions_.size());
      if (fresh) sessions_.push_back({name, std::numeric_limits<double>::infinity(), {}, {}});
      SessionIndex& si = sessions_[it->second];
      if (round == 0) {
        if (!j.contains("timing_events") || !j["timing_events"].is_array() || j["timing_events"].empty())
          throw TraceError(path_, line, "round 0 needs timing_events with a timestamp (the session start)");
        // const json::operator[] of a missing key is undefined (read after free): check first (issue 16)
        const nlohmann::json& ev = j["timing_events"][0];
        if (!ev.is_object() || !ev.contains("timestamp"))
          throw TraceError(path_, line, "timing_events[0].timestamp: missing (round 0 needs the session start)");
        si.start = iso_time(ev["timestamp"], path_, line, "timing_events[0].timestamp");
        si.start_text = ev["timestamp"].get<std::string>();
      }
      parse_round(j, line);  // every field is checked now, so that a bad row stops (or is skipped) before the run
      si.rows.push_back({round, off, line});
    } catch (const TraceError&) {
      if (!skip_bad_rows) throw;
      ++skipped_;
    }
  }
  // every session needs rounds 0..n-1 without gaps
  std::vector<SessionIndex> ok;
  for (auto& si : sessions_) {
    std::sort(si.rows.begin(), si.rows.end(), [](const RowRef& a, const RowRef& b) { return a.round < b.round; });
    for (size_t i = 0; i < si.rows.size(); ++i)
      if (si.rows[i].round != static_cast<long long>(i)) {
        if (!skip_bad_rows)
          throw TraceError(path_, si.rows[i].line, "round " + std::to_string(si.rows[i].round) + " of session " + si.name + ": expected round " +
                                                       std::to_string(i) + " (a round refers to a session whose earlier rounds are missing)");
        skipped_ += static_cast<long long>(si.rows.size() - i);
        si.rows.resize(i);
        break;
      }
    if (!si.rows.empty()) ok.push_back(std::move(si));
  }
  sessions_ = std::move(ok);
  std::stable_sort(sessions_.begin(), sessions_.end(), [](const SessionIndex& a, const SessionIndex& b) { return a.start < b.start; });
  if (max_sessions > 0 && static_cast<long long>(sessions_.size()) > max_sessions) sessions_.resize(static_cast<size_t>(max_sessions));
  // time 0 is the earliest session start (README "Input rules"); none may start 1e9 s or more after it
  t0_ = sessions_.empty() ? 0.0 : sessions_.front().start;
  for (size_t i = 0; i < sessions_.size(); ++i)
    if ((sessions_[i].start - t0_) * time_scale_ > kMaxSeconds) {
      if (!skip_bad_rows)
        throw TraceError(path_, sessions_[i].rows.front().line, "session " + sessions_[i].name + " starts more than 1e9 s (× time_scale) after the first one");
      for (size_t k = i; k < sessions_.size(); ++k) skipped_ += static_cast<long long>(sessions_[k].rows.size());
      sessions_.resize(i);
      break;
    }
  in_.clear();
}

TraceLabRoundsReader::Round TraceLabRoundsReader::parse_round(const nlohmann::json& j, long line) const {
  Round r;
  r.prompt = json_int(j, "input_tokens_total", 1, path_, line, kMaxTokens);
  r.prefix = json_int(j, "prefix_tokens", 0, path_, line, kMaxTokens);
  if (r.prefix > r.prompt)  // (rev25d: clamped silently)
    throw TraceError(path_, line, "prefix_tokens " + std::to_string(r.prefix) + " is more than input_tokens_total " + std::to_string(r.prompt));
  r.output = std::max<long long>(1, json_int(j, "output_tokens", 0, path_, line, kMaxTokens));
  double first = std::numeric_limits<double>::infinity(), last = -first, sum_ms = 0;
  if (j.contains("tools") && j["tools"].is_array())
    for (const auto& t : j["tools"]) {
      if (t.contains("tool_wall_latency_ms") && t["tool_wall_latency_ms"].is_number()) {
        const double ms = t["tool_wall_latency_ms"].get<double>();
        if (!(ms >= 0 && ms <= kMaxSeconds * 1000))
          throw TraceError(path_, line, "tools[].tool_wall_latency_ms must be in [0, 1e12] ms, got " + t["tool_wall_latency_ms"].dump());
        sum_ms += ms;
      }
      if (t.contains("emitted_at") && t.contains("result_at") && t["emitted_at"].is_string() && t["result_at"].is_string()) {
        const double e = iso_time(t["emitted_at"], path_, line, "tools[].emitted_at"), res = iso_time(t["result_at"], path_, line, "tools[].result_at");
        if (res < e)  // a result before its call (rev25d: taken)
          throw TraceError(path_, line, "tools[].result_at " + t["result_at"].get<std::string>() + " is before its emitted_at " + t["emitted_at"].get<std::string>());
        first = std::min(first, e);
        last = std::max(last, res);
      }
    }
  r.wait_s = (last > first ? last - first : sum_ms / 1000.0) * wait_scale_;
  if (r.wait_s > kMaxSeconds) throw TraceError(path_, line, "the wait after this round (its tool calls' span × wait_scale) is more than 1e9 s");
  return r;
}

TraceLabRoundsReader::Round TraceLabRoundsReader::read_round(const RowRef& ref) {
  in_.clear();
  in_.seekg(ref.offset);
  std::string s;
  std::getline(in_, s);
  return parse_round(nlohmann::json::parse(s), ref.line);  // validated when the file was indexed
}

Request TraceLabRoundsReader::make(long long s, size_t idx, double arrival_s) {
  const SessionIndex& si = sessions_[static_cast<size_t>(s)];
  const Round x = read_round(si.rows[idx]);
  Request r;
  r.id = next_id_++;
  r.arrival_s = arrival_s;
  r.input_tokens = x.prompt;
  r.output_tokens = x.output;
  r.session = s;
  r.round = static_cast<int>(idx);
  r.history_tokens = x.prefix;
  r.think_after_s = x.wait_s;
  r.last_round = idx + 1 == si.rows.size();
  r.block_tokens = block_tokens_;
  auto it = blocks_.try_emplace(s, s, block_tokens_).first;
  r.block_hashes = it->second.assign(r.input_tokens, x.prefix);
  if (r.last_round) blocks_.erase(s);
  r.origin = path_ + ":" + std::to_string(si.rows[idx].line);
  return r;
}

std::optional<Request> TraceLabRoundsReader::next() {
  if (next_session_ >= sessions_.size()) return std::nullopt;
  const size_t s = next_session_++;
  return make(static_cast<long long>(s), 0, (sessions_[s].start - t0_) * time_scale_);
}

std::optional<Request> TraceLabRoundsReader::follow_up(const Request& done, double t_done) {
  if (done.session < 0 || done.last_round) return std::nullopt;
  return make(done.session, static_cast<size_t>(done.round) + 1, t_done + done.think_after_s);
}

std::string TraceLabRoundsReader::time_origin() const {
  return sessions_.empty() ? std::string() : "time 0 is the earliest session start, " + sessions_.front().start_text + " (" + path_ + ")";
}

std::string TraceLabRoundsReader::describe() const {
  return "tracelab rounds " + path_ + " (" + std::to_string(sessions_.size()) + " sessions, time_scale " + std::to_string(time_scale_) +
         (wait_scale_ != time_scale_ ? ", wait_scale " + std::to_string(wait_scale_) : std::string()) + ")";
}

}  // namespace servesim
