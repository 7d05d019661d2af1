// servesim workloads: the request model every reader and generator produces, and the streaming
// interface the engine pulls from. Readers never know about SimGrid.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace servesim {

/// Most prefix-block ids a generator gives one prompt: ids for its first kMaxBlockIdTokens tokens
/// (2,097,152: twice the longest shipped model context, 1,048,576), and never more than
/// kMaxBlockIds (1,048,576 ids, 8 MB) whatever the block size. Generated prompts may be up to 2^40
/// tokens long (the readers' bound), but the engine rejects a request longer than its model's
/// context before it looks at its blocks, so ids past that could never be used: a generator
/// (synthetic, agent sessions, TraceLab replay) stops there instead of allocating gigabytes for a
/// prompt that will be refused (found by fuzz_tracelab_replay: a 1.8e9-token row took 888 MB; with a
/// cap of 2^22 ids the fuzzers still passed 256 MB, and with 2^20 ids at 16-token blocks a few
/// such rows took over 1 s to generate).
inline constexpr long long kMaxBlockIdTokens = 1LL << 21;
inline constexpr long long kMaxBlockIds = 1LL << 20;
/// Block ids a generator gives a prompt of `prompt_tokens` tokens at `block_tokens` per block (≥ 1).
inline long long capped_block_ids(long long prompt_tokens, long long block_tokens) {
  const auto blocks = [block_tokens](long long tokens) { return tokens / block_tokens + (tokens % block_tokens != 0); };
  return std::min({blocks(prompt_tokens), blocks(kMaxBlockIdTokens), kMaxBlockIds});
}

/// One inference request as the engine sees it.
struct Request {
  std::uint64_t id = 0;          ///< 0-based, in arrival order
  double arrival_s = 0;          ///< seconds since the start of the workload
  long long input_tokens = 0;    ///< prompt length, tokens (≥ 1)
  long long output_tokens = 0;   ///< tokens to generate (≥ 1), the first one by prefill
  /// Prefix-block ids, one per `block_tokens` of the prompt (the last block may be partial); at most
  /// kMaxBlockIds of them from the generators.
  /// Ids are chained: equal ids at position i mean blocks 0..i are equal (Mooncake hash_ids).
  std::vector<std::uint64_t> block_hashes;
  int block_tokens = 0;          ///< tokens per prefix block (0 = no prefix information)
  std::string origin;            ///< "file:line" or "synthetic#N", for messages
  // agent / multi-turn sessions (session < 0: a standalone request)
  long long session = -1;        ///< session id
  int round = 0;                 ///< 0-based round within the session
  long long history_tokens = 0;  ///< leading prompt tokens that are the session's earlier history
  double think_after_s = 0;      ///< tool/think time after this round's output, before the next round
  bool last_round = true;        ///< no round follows this one
  /// A session's first simulated round that starts mid-session (agent workload start "stationary"):
  /// its history_tokens are already in the KV store below the GPUs at arrival (put there without a
  /// copy when the deployment has KV tiers; without tiers they are prefilled like any prompt).
  bool history_stored = false;
};

/// Appended to "cannot open trace PATH": where the public traces are and how to get them.
inline constexpr const char* kTraceHint =
    " (scenario paths under shared/traces/ expect ../shared/traces beside the repository; with the traces elsewhere set "
    "SERVESIM_SHARED_TRACES=DIR (a folder holding mooncake/, tracelab/, azure_llm_2023/; traces/fetch.sh DIR downloads them), "
    "or point the scenario's workload.trace at the file)";

/// A malformed input row: carries the file and 1-based line so the message can name them.
class TraceError : public std::runtime_error {
 public:
  TraceError(const std::string& file, long line, const std::string& what)
      : std::runtime_error(file + ":" + std::to_string(line) + ": " + what), file_(file), line_(line) {}
  const std::string& file() const { return file_; }
  long line() const { return line_; }

 private:
  std::string file_;
  long line_;
};

/// A stream of requests in non-decreasing arrival order. Implementations hold O(1) requests (or a
/// bounded reorder window), never the whole trace. next() returns std::nullopt at the end and
/// throws TraceError on malformed input.
class RequestSource {
 public:
  virtual ~RequestSource() = default;
  virtual std::optional<Request> next() = 0;
  /// Sessions: called when round `done` of a session completed at simulated time t_done; returns
  /// the session's next round (arrival = t_done + done.think_after_s), or, in closed-loop mode,
  /// the first round of a session replacing it. Standalone workloads return std::nullopt.
  /// Requests returned here are not returned by next(); their ids continue the same sequence.
  virtual std::optional<Request> follow_up(const Request& done, double t_done) {
    (void)done, (void)t_done;
    return std::nullopt;
  }
  /// Rows skipped as malformed under skip_bad_rows (0 when rows are never skipped).
  virtual long long skipped_rows() const { return 0; }
  /// Trace readers rebase arrival times to the first arrival (README "Input rules"): what time 0 is
  /// when that moved the trace's own clock ("the first row's timestamp, 1726000000000 ms"); empty
  /// when the first time stamp already was 0, and for generators. run_cmd logs it.
  virtual std::string time_origin() const { return {}; }
  /// Human-readable description for the run summary (file and options, or generator parameters).
  virtual std::string describe() const = 0;
};

}  // namespace servesim
