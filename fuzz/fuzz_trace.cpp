// One trace reader per build (SERVESIM_FUZZ_KIND): the bytes as a trace file, read through
// make_source (the CLI's source table), every request and every session follow-up drained.
// Contract: a TraceError naming file:line, or requests with finite non-negative times, lengths in
// [1, kMaxTokens] and block ids consistent with the prompt length. Anything else is a finding.
#include "fuzz/fuzz_common.hpp"
#include "scenarios/scenario.hpp"
#include "workloads/source.hpp"

#include <cmath>
#include <deque>

using namespace servesim;

#define SERVESIM_STR2(x) #x
#define SERVESIM_STR(x) SERVESIM_STR2(x)

namespace {

WorkloadSpec::Kind kind_of(const std::string& k) {
  if (k == "mooncake") return WorkloadSpec::Kind::mooncake;
  if (k == "azure") return WorkloadSpec::Kind::azure;
  if (k == "burstgpt") return WorkloadSpec::Kind::burstgpt;
  if (k == "tracelab_replay") return WorkloadSpec::Kind::tracelab_replay;
  return WorkloadSpec::Kind::tracelab_rounds;
}

void check(const Request& r) {
  using fuzz::finding;
  if (!std::isfinite(r.arrival_s) || r.arrival_s < 0) finding(r.origin + ": arrival " + std::to_string(r.arrival_s));
  if (r.input_tokens < 1 || r.input_tokens > kMaxTokens) finding(r.origin + ": input_tokens " + std::to_string(r.input_tokens));
  if (r.output_tokens < 1 || r.output_tokens > kMaxTokens) finding(r.origin + ": output_tokens " + std::to_string(r.output_tokens));
  if (r.history_tokens < 0 || r.history_tokens > r.input_tokens) finding(r.origin + ": history_tokens " + std::to_string(r.history_tokens));
  if (!std::isfinite(r.think_after_s) || r.think_after_s < 0) finding(r.origin + ": think_after_s " + std::to_string(r.think_after_s));
  if (r.block_tokens > 0 && !r.block_hashes.empty()) {
    const long long need = (r.input_tokens + r.block_tokens - 1) / r.block_tokens;
    if ((long long)r.block_hashes.size() > need) finding(r.origin + ": more block ids than prompt blocks");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string kind = SERVESIM_STR(SERVESIM_FUZZ_KIND);
  WorkloadSpec w;
  w.kind = kind_of(kind);
  w.trace_path = fuzz::as_file(data, size, kind == "azure" || kind == "burstgpt" || kind == "tracelab_replay" ? ".csv" : ".jsonl");
  w.block_tokens = 16;
  // The first byte picks skip_bad_rows (both modes are reachable from the CLI); it stays in the file.
  w.skip_bad_rows = size > 0 && (data[0] & 1);
  try {
    auto src = make_source(w, 1);
    std::deque<Request> pending;
    long long n = 0;
    double last = 0;
    for (;;) {
      std::optional<Request> r;
      if (!pending.empty()) {
        r = std::move(pending.front());
        pending.pop_front();
      } else {
        r = src->next();
        if (!r) break;
        if (r->arrival_s + 1e-9 < last && r->session < 0) fuzz::finding(r->origin + ": arrivals out of order");
        last = std::max(last, r->arrival_s);
      }
      check(*r);
      if (++n > 1000000) fuzz::finding("more than 1e6 requests from a small input");
      if (!r->last_round) {
        if (auto f = src->follow_up(*r, r->arrival_s + 1.0)) pending.push_back(std::move(*f));
      }
    }
    if (src->skipped_rows() < 0) fuzz::finding("negative skipped_rows");
    (void)src->describe();
    (void)src->time_origin();
  } catch (const TraceError& e) {
    if (e.line() < 0 || e.file() != w.trace_path) fuzz::finding(std::string("TraceError without file:line: ") + e.what());
  }
  return 0;
}
