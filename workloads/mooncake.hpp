// servesim workloads: streaming reader of Mooncake FAST'25 JSONL traces.
// Mapping: timestamp (ms, integer) → arrival_s = (timestamp − the first row's)/1000 × time_scale
// (+ jitter): time 0 is the first row, so absolute epoch milliseconds work (README "Input rules");
// input_length → input_tokens; output_length → output_tokens; hash_ids → block_hashes with
// block_tokens = 512 (each id is one 512-token block, chained by prefix; shared/traces/README.md).
#pragma once
#include "workloads/request.hpp"
#include "scenarios/rng.hpp"

#include <fstream>
#include <queue>
#include <vector>

namespace servesim {

class MooncakeReader final : public RequestSource {
 public:
  /// Opens `path` (a UTF-8 byte-order mark is skipped); throws std::runtime_error if it cannot be
  /// read. Rows must have non-decreasing timestamps; a row that is not a JSON object with integer
  /// timestamp ≥ 0 (at most 1e9 s × time_scale after the first row's), input_length and
  /// output_length in [1, 2^40] and an array hash_ids of ceil(input_length / block_tokens) non-negative
  /// integers, or that has other keys, throws TraceError naming the file and line — or, with
  /// skip_bad_rows, is skipped and counted (skipped_rows()).
  MooncakeReader(std::string path, double time_scale, double jitter_s, int block_tokens, long long max_requests,
                 std::uint64_t seed, bool skip_bad_rows = false);
  std::optional<Request> next() override;
  std::string describe() const override;
  std::string time_origin() const override;
  long long skipped_rows() const override { return skipped_; }

 private:
  std::optional<Request> read_row();
  std::optional<Request> parse_row();
  struct Later {
    bool operator()(const Request& a, const Request& b) const {
      return a.arrival_s != b.arrival_s ? a.arrival_s > b.arrival_s : a.origin > b.origin;
    }
  };
  std::string path_;
  std::ifstream in_;
  double time_scale_, jitter_s_;
  int block_tokens_;
  long long max_requests_;
  Rng rng_;
  long line_ = 0;
  long long read_ = 0, emitted_ = 0, skipped_ = 0;
  bool skip_ = false;
  double last_raw_s_ = 0;
  long long ts0_ = 0;  ///< the first row's timestamp (ms): time 0
  bool eof_ = false;
  // reorder window for jitter: rows wait until no later row can arrive before them
  std::priority_queue<Request, std::vector<Request>, Later> window_;
};

}  // namespace servesim
