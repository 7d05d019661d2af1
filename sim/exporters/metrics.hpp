// servesim exporters: the metrics collector. Subscribes to engine events and reduces them to the
// run's summary figures (latency percentiles, throughput, goodput, memory, cache hit rates).
#pragma once
#include "scenarios/deployment.hpp"
#include "sim/events.hpp"
#include "sim/exporters/quantiles.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace servesim {

/// p50/p90/p99 (linear interpolation between order statistics, as numpy's default) and mean.
struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;
  long long n = 0;
};
Percentiles percentiles(std::vector<double> v);

struct Summary {
  double end_s = 0;
  /// Steady-state window [warmup_s, end_s]: requests that arrived before warmup_s, and steps,
  /// transfers, memory and tier occupancy before it, are left out of every figure below; the
  /// warm-up requests are only counted (warmup_*), so arrivals = measured + warm-up.
  double warmup_s = 0;
  long long warmup_arrived = 0, warmup_completed = 0, warmup_rejected = 0, warmup_in_flight = 0;
  long long arrived = 0, completed = 0, rejected = 0, in_flight = 0;
  /// rejected_reasons: by the reason's class (RequestRecord::reason before ": "); in_flight_phases: by phase
  std::map<std::string, long long> rejected_reasons, in_flight_phases;
  Percentiles ttft_s, tpot_s, e2e_s;
  /// Some latency had more than LatencyQuantiles::kExactValues values: its quantiles were read from
  /// a log histogram (within 0.093% of the exact ones; summary.json says so)
  bool quantiles_approximate = false;
  /// TTFT over completed requests and those in flight at the end: an in-flight request with a
  /// first token counts its TTFT, one without counts end − arrival (a lower bound of its TTFT), so
  /// a backlog at the horizon shows (completed-only percentiles hide it)
  Percentiles ttft_with_in_flight_s;
  long long in_flight_without_first_token = 0;
  /// Tokens made in the window (throughput and unit cost divide them by the window's time and GPU
  /// time): prompt tokens of requests whose prefill finished (warm-up arrivals: finished in the
  /// window), and output tokens generated (completed and in flight; a warm-up arrival's pro rata of
  /// its decode time inside the window)
  long long input_tokens = 0;
  long long cached_tokens = 0;  ///< of input_tokens, served by the prefix cache or loaded back (not computed)
  long long output_tokens = 0;
  long long slo_met = 0;        ///< completed requests with TTFT ≤ slo.ttft_s and TPOT ≤ slo.tpot_s
  long long slo_met_output_tokens = 0;
  long long transfers = 0;
  double transfer_bytes = 0;
  Percentiles transfer_s;
  // KV bytes per GPU, per pool: peak (busiest rank) and time-weighted mean (over ranks and time)
  double prefill_kv_peak = 0, prefill_kv_mean = 0, decode_kv_peak = 0, decode_kv_mean = 0;
  double prefill_busy_s = 0, decode_busy_s = 0;  ///< Σ step time over instances
  long long prefill_steps = 0, decode_steps = 0;
  double decode_batch_mean = 0;  ///< sequences per decode step
  double comm_s = 0;             ///< Σ exposed all-to-all time inside steps
  double comm_total_s = 0;       ///< Σ all-to-all time inside steps, hidden by two-batch overlap or not
  double host_s = 0;             ///< Σ exposed host time inside steps (scheduler, launches)
  /// Busiest/mean routed expert load per pool (StepTime::expert_load): mean and largest over steps.
  double prefill_expert_load_sum = 0, prefill_expert_load_max = 0, decode_expert_load_sum = 0, decode_expert_load_max = 0;
  Provenance worst_source = Provenance::roofline;
  double extrapolated_s = 0;           ///< Σ step time of the kernels answered `extrapolated` (StepTime::extrapolated_s)
  std::uint32_t extrapolated_ops = 0;  ///< OpKinds answered `extrapolated` at least once
  // TTFT split of completed requests, the parts add up to TTFT: queueing (arrival → KV reserved on
  // a prefill rank), load-back of the session's KV from L2/L3, prefill (→ last chunk), waiting for
  // KV room on a decode rank, the P→D KV transfer itself, waiting for a slot in a decode batch
  Percentiles ttft_queue_s, ttft_load_s, ttft_prefill_s, ttft_decode_kv_wait_s, ttft_transfer_s, ttft_slot_wait_s;
  // where the skipped prompt tokens came from, over the requests that arrived in the window and
  // were admitted to prefill; prompt_tokens_admitted: those requests' prompt tokens (the shares'
  // denominator, kv_tiers.token_hit_rate)
  long long tokens_l1 = 0, tokens_l2 = 0, tokens_l3 = 0, prompt_tokens_admitted = 0;
  // sessions
  long long sessions = 0, sessions_completed = 0;
  double session_rounds = 0, session_life_s = 0, session_gpu_s = 0, session_decode_s = 0, session_idle_s = 0;
  // KV store occupancy (bytes over all nodes): time-weighted mean and peak
  double l2_mean = 0, l2_peak = 0, l3_mean = 0, l3_peak = 0;
};

class MetricsCollector final : public EventSink {
 public:
  /// Instances of each pool, so that an instance that never held KV counts as 0 in the means.
  /// `warmup_s`: start of the measurement window (Summary::warmup_s).
  MetricsCollector(SloSpec slo, int prefill_instances, int decode_instances, double warmup_s = 0)
      : slo_(slo), warmup_(warmup_s) {
    s_.warmup_s = warmup_s;
    l2_.from = l3_.from = warmup_s;
    for (int i = 0; i < prefill_instances; ++i) tracks_[{static_cast<int>(Phase::prefill), i}].from = warmup_s;
    for (int i = 0; i < decode_instances; ++i) tracks_[{static_cast<int>(Phase::decode), i}].from = warmup_s;
    track_index_[static_cast<int>(Phase::prefill)].resize(static_cast<size_t>(std::max(0, prefill_instances)));
    track_index_[static_cast<int>(Phase::decode)].resize(static_cast<size_t>(std::max(0, decode_instances)));
  }
  // not copyable or movable: track_index_ points into this object's maps
  MetricsCollector(const MetricsCollector&) = delete;
  MetricsCollector& operator=(const MetricsCollector&) = delete;
  void on_step(const StepEvent& e) override;
  void on_transfer(const TransferEvent& e) override;
  void on_request(const RequestRecord& r) override;
  void on_memory(const MemoryEvent& e) override;
  void on_session(const SessionRecord& e) override;
  void on_tier(const TierEvent& e) override;
  void on_end(double t_s) override;
  const Summary& summary() const { return s_; }

 private:
  // a time-weighted value over the window [from, ...): area and peak of what held inside it
  struct Track {
    double from = 0, last_t = 0, last_mean = 0, area = 0, peak = 0;
    void set(double t, double v) {
      if (t > from) {
        area += last_mean * (t - std::max(last_t, from));
        if (last_t <= from) peak = std::max(peak, last_mean);  // the value in force when the window opened
      }
      last_t = t, last_mean = v;
      if (t >= from) peak = std::max(peak, v);
    }
  };
  SloSpec slo_;
  double warmup_ = 0;
  Summary s_;
  // per-request latencies: exact up to LatencyQuantiles::kExactValues each, then a log histogram
  LatencyQuantiles ttft_, ttft_with_, tpot_, e2e_, xfer_, queue_, load_, prefill_, kv_wait_, transfer_, slot_wait_;
  Track l2_, l3_;
  std::map<std::pair<int, int>, Track> tracks_;  // (role, instance): mean KV per GPU over the instance's ranks
  std::map<std::pair<int, int>, Track> busiest_;  // (role, instance): busiest rank's KV per GPU (its peak)
  // [role][instance] -> that instance's entries of tracks_ and busiest_ (map nodes do not move), for
  // the instances the constructor was told of (null until the first event): on_memory runs at every
  // KV change; the maps keep the summary's order
  std::vector<std::pair<Track*, Track*>> track_index_[2];
  std::vector<double> waiting_arrivals_;         // in flight without a first token: arrival times
  std::vector<std::pair<double, long long>> warmup_decoding_;  // warm-up requests in flight at the end: first token, tokens made
  /// Of `generated` output tokens made from first_token_s to end_s at a steady rate, those made
  /// at or after warmup_s (rounded).
  long long output_in_window(double first_token_s, double end_s, long long generated) const;
  double decode_seq_sum_ = 0;
};

}  // namespace servesim
