// servesim workloads: TraceLab agent traces (uw-syfi/TraceLab), both formats, as sessions.
//
// Replay CSV (replay/examples/*.csv): header
//   session_id,arrival_time,round_idx,prefix_len,input_len,output_len,tool_wait_after_ms
//   A session's rows are contiguous with round_idx 0, 1, 2, ...; sessions appear in non-decreasing
//   arrival_time (ms). Round 0 arrives at (arrival_time − the first session's)/1000 × time_scale
//   (time 0 is the first session, README "Input rules"); round r+1 arrives when
//   round r's last token is out plus its tool_wait_after_ms × time_scale. The round's prompt is
//   prefix_len + input_len tokens, of which prefix_len are the session history (its earlier prompts
//   and outputs); output_len → output_tokens.
// Round JSONL (example_sessions/sanitized/round_trace.jsonl): one object per LLM step with
//   session_id (string), round_index, input_tokens_total, prefix_tokens, output_tokens,
//   timing_events[] (ISO timestamps), tools[] (emitted_at, result_at, tool_wall_latency_ms), ...
//   A session starts at its round 0's first timing event (sessions are replayed in start order,
//   relative to the earliest); the prompt is input_tokens_total, of which prefix_tokens (the
//   provider-reported cached prefix) are history; the wait after a round is the span of its tool
//   calls (first emitted_at → last result_at; the sum of tool_wall_latency_ms when timestamps are
//   missing; 0 without tools) × time_scale. Unknown fields are ignored (the format is rich).
// Both: a UTF-8 byte-order mark is skipped; token counts are at most 2^40 and times (session starts
// after time 0, waits) at most 1e9 s after time_scale. Prefix blocks follow workloads/session_blocks.hpp.
#pragma once
#include "workloads/request.hpp"
#include "workloads/session_blocks.hpp"

#include <nlohmann/json.hpp>

#include <deque>
#include <fstream>
#include <map>
#include <unordered_map>

namespace servesim {

class TraceLabReplayReader final : public RequestSource {
 public:
  /// Throws std::runtime_error if the file cannot be opened, TraceError on a wrong header.
  /// `wait_scale` multiplies the tool waits (<= 0: time_scale does).
  TraceLabReplayReader(std::string path, double time_scale, long long max_sessions, int block_tokens, bool skip_bad_rows,
                       double wait_scale = 0);
  std::optional<Request> next() override;
  std::optional<Request> follow_up(const Request& done, double t_done) override;
  std::string describe() const override;
  std::string time_origin() const override;
  long long skipped_rows() const override { return skipped_; }

 private:
  struct Row {
    long long session = 0, round = 0, prefix = 0, input = 0, output = 0;
    double arrival_s = 0, wait_s = 0;
    long line = 0;
  };
  struct Session {
    std::deque<Row> rows;
    SessionBlocks blocks;
  };
  bool read_row(Row& r);
  Request make(Session& s, const Row& row, double arrival_s);
  std::string path_;
  std::ifstream in_;
  double time_scale_, wait_scale_;
  long long max_sessions_;
  int block_tokens_;
  bool skip_;
  long line_ = 1;
  long long skipped_ = 0, sessions_ = 0;
  std::uint64_t next_id_ = 0;
  std::optional<Row> lookahead_;
  long long last_session_ = -1, expect_round_ = 0;
  double last_arrival_ = 0;
  double session_ms_ = 0;          // the current session's arrival_time (every row of a session repeats it)
  long long expect_prefix_ = 0;    // the current session's history after the row before: its prefix + input + output
  bool have_t0_ = false;
  double t0_ms_ = 0;  ///< the first session's arrival_time: time 0
  std::unordered_map<long long, bool> seen_;
  std::unordered_map<long long, Session> active_;
};

class TraceLabRoundsReader final : public RequestSource {
 public:
  /// Indexes the file (session start times and row offsets: O(rows) small integers), then streams
  /// sessions in start order. Throws std::runtime_error / TraceError (file:line) on malformed rows.
  /// `wait_scale` multiplies the tool waits (<= 0: time_scale does).
  TraceLabRoundsReader(std::string path, double time_scale, long long max_sessions, int block_tokens, bool skip_bad_rows,
                       double wait_scale = 0);
  std::optional<Request> next() override;
  std::optional<Request> follow_up(const Request& done, double t_done) override;
  std::string describe() const override;
  std::string time_origin() const override;
  long long skipped_rows() const override { return skipped_; }

 private:
  struct RowRef {
    long long round = 0;
    std::streamoff offset = 0;
    long line = 0;
  };
  struct SessionIndex {
    std::string name;
    double start = 0;
    std::vector<RowRef> rows;  // sorted by round
    std::string start_text;    // round 0's first timing event as written
  };
  struct Round {
    long long prompt = 0, prefix = 0, output = 0;
    double wait_s = 0;
  };
  Round parse_round(const nlohmann::json& j, long line) const;
  Round read_round(const RowRef& ref);
  Request make(long long s, size_t idx, double arrival_s);
  std::string path_;
  std::ifstream in_;
  double time_scale_, wait_scale_;
  int block_tokens_;
  long long skipped_ = 0;
  std::vector<SessionIndex> sessions_;  // in start order
  size_t next_session_ = 0;
  double t0_ = 0;
  std::uint64_t next_id_ = 0;
  std::unordered_map<long long, SessionBlocks> blocks_;
};

}  // namespace servesim
