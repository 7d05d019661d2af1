// servesim exporters: output formats. Each writer is an EventSink (streaming, so memory does not
// grow with the run) or a function of the finished Summary. Number formats are fixed, so the same
// run gives byte-identical files.
#pragma once
#include "costmodels/fitted.hpp"
#include "sim/exporters/metrics.hpp"
#include "sim/simulation.hpp"
#include "workloads/source.hpp"

#include <nlohmann/json.hpp>

#include <cmath>

#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <optional>
#include <string>

namespace servesim {

/// requests.csv: one row per request, in the order requests ended (completed, rejected) followed
/// by those in flight at the end, sorted by id. Times in seconds (simulated), latencies in ms.
/// `gzip`: the same bytes through zlib's gzip format (gzopen level 6; the header carries no time
/// stamp, so the file is byte-identical run to run).
class RequestsCsvWriter final : public EventSink {
 public:
  explicit RequestsCsvWriter(const std::string& path, bool gzip = false);  ///< throws std::runtime_error if unwritable
  ~RequestsCsvWriter() override;
  void on_request(const RequestRecord& r) override;
  void on_end(double) override;

 private:
  void put(const char* data, size_t n);
  std::FILE* f_ = nullptr;
  void* gz_ = nullptr;  // gzFile
  std::string path_;
};

/// timeline.json in Chrome Trace Event format (opens in Perfetto / chrome://tracing):
///   pid 1 "prefill instances" / pid 2 "decode instances": one track per instance with a slice per
///     batch step (args: seqs, tokens, attention/ffn/comm ms) and a "KV GB per GPU" counter;
///   pid 3 "EP all-to-all": one track per instance, a slice per step of the step's all-to-all and
///     TP all-reduce time (all layers together, drawn from the step's start);
///   pid 4 "KV transfers": async slices (cat "kv") per prefill→decode transfer, on an "inter-node
///     (NIC)" (tid 0) or "intra-node (NVLink)" (tid 1) track; and async slices (cat "kv-tier") per
///     finished copy to, from or within the KV store: load-backs from L2 (tid 2) and L3 (tid 3),
///     offloads into L2 (tid 4), demotions from L2 to L3 (tid 5), each with args bytes (payload),
///     node, session (and request); their tracks are named when first used;
///   pid 5 "KV store": counters of L2 (host DRAM) and L3 (storage) occupancy over all nodes.
/// Steps beyond `max_events` are counted, not written (the file says how many were dropped).
/// [window_start_s, window_end_s]: only step slices and transfers that overlap it, and counters
/// set inside it, are written (the file's metadata states the window); the default is everything.
class TimelineWriter final : public EventSink {
 public:
  TimelineWriter(const std::string& path, const std::string& title, long long max_events, double window_start_s = 0,
                 double window_end_s = std::numeric_limits<double>::infinity());
  ~TimelineWriter() override;
  void on_step(const StepEvent& e) override;
  void on_transfer(const TransferEvent& e) override;
  void on_memory(const MemoryEvent& e) override;
  void on_tier(const TierEvent& e) override;
  void on_kv_move(const KvMoveEvent& e) override;
  void on_end(double t_s) override;
  /// Step slices dropped past max_step_events, and written. No errors.
  long long dropped() const { return dropped_; }
  long long written() const { return written_; }

 private:
  void write(const std::string& ev);
  void name_track(int pid, int tid, const std::string& name);
  void write_memory(const MemoryEvent& e, double t_s);
  void write_tier(const TierEvent& e, double t_s);
  void flush_before_window();
  /// a --timeline-window's counters as they stood at its start (rev26: they read 0 until each was
  /// next set): the latest value of each before the window, written at the window's start
  std::map<std::pair<int, int>, MemoryEvent> mem_before_;
  std::optional<TierEvent> tier_before_;
  bool flushed_ = false;
  std::set<std::pair<int, int>> named_;
  std::FILE* f_ = nullptr;
  std::string path_;
  long long max_events_, written_ = 0, dropped_ = 0;
  long long kv_moves_ = 0;  ///< id of the next "kv-tier" async slice (unique in the file)
  double from_, to_;
  bool first_ = true;
  bool inside(double a, double b) const { return b >= from_ && a <= to_; }
};

/// Everything summary.json and the printed table report for one deployment.
struct RunReport {
  const DeploymentSpec* deployment = nullptr;
  std::string workload;     ///< RequestSource::describe()
  std::optional<TraceFile> trace;  ///< the trace file read (trace workloads), for provenance
  std::string cost_model;   ///< CostModel::name()
  std::uint64_t seed = 0;
  double horizon_s = 0;
  GpuMemoryPlan prefill_memory, decode_memory;
  RunTotals totals;
  Summary summary;
  long long skipped_rows = 0;         ///< malformed trace rows skipped (--skip-bad-rows)
  std::optional<FitProvenance> fit;   ///< set when the fitted cost model answered: its parameters and measurements
};

/// summary.json content for one deployment (units in key names: _s, _ms, _bytes, _gb, _per_s).
nlohmann::json summary_json(const RunReport& r);

/// The article's DSV4/K3 unit-cost ratio next to the simulated one: for every pair of a DeepSeek
/// V4-Pro and a Kimi K3 deployment on the same hardware among `runs` (summary_json objects with a
/// cost block), V4-Pro's $ per million output tokens over K3's; empty when no such pair. Beside the
/// article's 0.41, `model_facts_ratio` (when finite): the article's formula with this repository's
/// model files (article_decode_bytes of V4-Pro over K3's, costmodels/memory.hpp).
nlohmann::json unit_cost_ratios(const std::vector<nlohmann::json>& runs, double model_facts_ratio = std::nan(""));

/// Dollars with three significant digits in fixed notation (0.0123, 12.3, 18400; up to 6
/// decimals; "n/a" for a non-finite value): the console table's $ per million tokens (review:
/// two decimals flattened ~$0.006 to 0.01, and {:.3g} printed 1.84e+04).
std::string usd_text(double usd);

/// Human-readable table of one or more deployments' summary.json objects (as summary_json gives).
std::string summary_table(const std::vector<nlohmann::json>& runs);

}  // namespace servesim
