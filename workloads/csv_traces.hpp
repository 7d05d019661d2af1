// servesim workloads: streaming readers of request-level CSV traces (no sessions, no prefix ids).
//
// Azure LLM inference 2023 (Splitwise): header TIMESTAMP,ContextTokens,GeneratedTokens;
//   TIMESTAMP "YYYY-MM-DD HH:MM:SS.fffffff" → arrival_s = (TIMESTAMP − first row's) × time_scale;
//   ContextTokens → input_tokens (≥ 1); GeneratedTokens → output_tokens (≥ 1).
// BurstGPT: header Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
//   [,Session ID,Elapsed time]; Timestamp (s) → arrival_s (relative to the first row) × time_scale;
//   Request tokens → input_tokens; Response tokens → output_tokens (BurstGPT logs failed requests
//   with 0 response tokens: such rows are malformed here, so they stop the run or, with
//   skip_bad_rows, are skipped and counted).
// Rows must be in non-decreasing time order; time 0 is the first row's (README "Input rules"), and no
// row may come more than 1e9 s (× time_scale) after it; token counts are at most 2^40. A UTF-8
// byte-order mark and blank lines before the header are skipped; a file without rows is empty.
#pragma once
#include "workloads/request.hpp"

#include <fstream>
#include <functional>

namespace servesim {

class CsvRequestReader : public RequestSource {
 public:
  enum class Format { azure, burstgpt };
  /// Opens `path` and checks the header; throws std::runtime_error (cannot open) or TraceError
  /// (wrong header, naming line 1 and the expected columns).
  CsvRequestReader(Format format, std::string path, double time_scale, long long max_requests, bool skip_bad_rows);
  std::optional<Request> next() override;
  std::string describe() const override;
  std::string time_origin() const override;
  long long skipped_rows() const override { return skipped_; }

 private:
  Request parse(const std::string& line);
  Format format_;
  std::string path_;
  std::ifstream in_;
  double time_scale_;
  long long max_requests_;
  bool skip_;
  long line_ = 1;
  long long emitted_ = 0, skipped_ = 0;
  bool have_t0_ = false;
  double t0_ = 0, last_ = 0;
  std::string t0_text_;  ///< the first row's time stamp as written
};

}  // namespace servesim
