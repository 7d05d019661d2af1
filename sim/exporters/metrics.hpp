// servesim exporters: the metrics collector. Subscribes to engine events and reduces them to the
// run's summary figures (latency percentiles, throughput, goodput, memory, cache hit rates).
#pragma once
#include "sim/deployment.hpp"
#include "sim/events.hpp"

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
  long long arrived = 0, completed = 0, rejected = 0, in_flight = 0;
  std::map<std::string, long long> rejected_reasons, in_flight_phases;
  Percentiles ttft_s, tpot_s, e2e_s;
  long long input_tokens = 0;   ///< prompt tokens of requests whose prefill finished
  long long cached_tokens = 0;  ///< of those, served by the prefix cache
  long long output_tokens = 0;  ///< tokens generated (completed and in flight)
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
  double comm_s = 0;             ///< Σ all-to-all / all-reduce time inside steps
  Provenance worst_source = Provenance::roofline;
};

class MetricsCollector final : public EventSink {
 public:
  /// Instances of each pool, so that an instance that never held KV counts as 0 in the means.
  MetricsCollector(SloSpec slo, int prefill_instances, int decode_instances) : slo_(slo) {
    for (int i = 0; i < prefill_instances; ++i) tracks_[{static_cast<int>(Role::prefill), i}];
    for (int i = 0; i < decode_instances; ++i) tracks_[{static_cast<int>(Role::decode), i}];
  }
  void on_step(const StepEvent& e) override;
  void on_transfer(const TransferEvent& e) override;
  void on_request(const RequestRecord& r) override;
  void on_memory(const MemoryEvent& e) override;
  void on_end(double t_s) override;
  const Summary& summary() const { return s_; }

 private:
  struct Track {
    double last_t = 0, last_mean = 0, area = 0;
  };
  SloSpec slo_;
  Summary s_;
  std::vector<double> ttft_, tpot_, e2e_, xfer_;
  std::map<std::pair<int, int>, Track> tracks_;  // (role, instance)
  double decode_seq_sum_ = 0;
};

}  // namespace servesim
