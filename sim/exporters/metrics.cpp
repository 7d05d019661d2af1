#include "sim/exporters/metrics.hpp"

#include "costmodels/percentile.hpp"

#include <algorithm>
#include <cmath>

namespace servesim {

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  p.n = static_cast<long long>(v.size());
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto q = [&](double f) { return percentile_sorted(v, f); };
  p.p50 = q(0.5), p.p90 = q(0.9), p.p99 = q(0.99);
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  return p;
}

// Steps, transfers, memory and tiers count inside the window [warmup_s, end]; a step that straddles
// warmup_s counts its part after it.
void MetricsCollector::on_step(const StepEvent& e) {
  if (e.end_s <= warmup_ && warmup_ > 0) return;
  const double dt = e.end_s - std::max(e.start_s, warmup_);
  if (e.role == Phase::prefill) s_.prefill_busy_s += dt, ++s_.prefill_steps;
  else s_.decode_busy_s += dt, ++s_.decode_steps, decode_seq_sum_ += static_cast<double>(e.seqs);
  // a step straddling the end of the warm-up adds its in-window part to the busy time, and the
  // same part of its time splits (communication, host, extrapolated), so that their shares of the
  // busy time stay shares of the same seconds
  const double len = e.end_s - e.start_s, w = len > 0 && dt < len ? dt / len : 1.0;
  s_.comm_s += w * e.time.comm_s;
  s_.comm_total_s += w * e.time.comm_total_s;
  s_.host_s += w * e.time.host_s;
  if (e.role == Phase::prefill)
    s_.prefill_expert_load_sum += e.time.expert_load, s_.prefill_expert_load_max = std::max(s_.prefill_expert_load_max, e.time.expert_load);
  else
    s_.decode_expert_load_sum += e.time.expert_load, s_.decode_expert_load_max = std::max(s_.decode_expert_load_max, e.time.expert_load);
  s_.extrapolated_s += w * e.time.extrapolated_s;
  s_.extrapolated_ops |= e.time.extrapolated_ops;
  if (static_cast<int>(e.time.source) > static_cast<int>(s_.worst_source)) s_.worst_source = e.time.source;
}

void MetricsCollector::on_transfer(const TransferEvent& e) {
  if (e.start_s < warmup_) return;
  ++s_.transfers;
  s_.transfer_bytes += e.bytes;
  xfer_.add(e.end_s - e.start_s);
}

long long MetricsCollector::output_in_window(double first_token_s, double end_s, long long generated) const {
  if (end_s <= first_token_s) return first_token_s >= warmup_ ? generated : 0;
  const double inside = std::clamp((end_s - std::max(first_token_s, warmup_)) / (end_s - first_token_s), 0.0, 1.0);
  return std::llround(static_cast<double>(generated) * inside);
}

void MetricsCollector::on_request(const RequestRecord& r) {
  if (r.arrival_s < warmup_) {  // warm-up: counted, not measured
    ++s_.warmup_arrived;
    s_.warmup_completed += r.status == RequestStatus::completed;
    s_.warmup_rejected += r.status == RequestStatus::rejected;
    s_.warmup_in_flight += r.status == RequestStatus::in_flight;
    // ... but the work the GPUs do on it inside the window is in the window's GPU time, so its tokens
    // made there count toward throughput and unit cost: its prompt if its prefill ended in the window,
    // its output pro rata of its decode time in the window (tokens come at a steady TPOT)
    if (r.prefill_end_s >= warmup_) s_.input_tokens += r.input_tokens, s_.cached_tokens += r.cached_tokens;
    if (r.first_token_s >= 0 && r.generated_tokens > 0) {
      if (r.done_s >= 0) s_.output_tokens += output_in_window(r.first_token_s, r.done_s, r.generated_tokens);
      else warmup_decoding_.emplace_back(r.first_token_s, r.generated_tokens);
    }
    return;
  }
  ++s_.arrived;
  if (r.prefill_end_s >= 0) s_.input_tokens += r.input_tokens, s_.cached_tokens += r.cached_tokens;
  if (r.admit_s >= 0) {
    s_.prompt_tokens_admitted += r.input_tokens;
    s_.tokens_l1 += r.cached_tokens - r.loaded_tokens;
    if (r.load_tier == 2) s_.tokens_l2 += r.loaded_tokens;
    if (r.load_tier == 3) s_.tokens_l3 += r.loaded_tokens;
  }
  s_.output_tokens += r.generated_tokens;
  switch (r.status) {
    case RequestStatus::rejected:
      ++s_.rejected;
      // counted by the reason's class: the text before ": " (the request's own figures follow it,
      // in requests.csv only), so ten thousand oversized prompts make one line, not ten thousand
      ++s_.rejected_reasons[r.reason.substr(0, r.reason.find(": "))];
      return;
    case RequestStatus::in_flight:
      ++s_.in_flight;
      ++s_.in_flight_phases[r.reason];
      if (r.first_token_s >= 0) ttft_with_.add(r.ttft_s());
      else waiting_arrivals_.push_back(r.arrival_s);
      return;
    case RequestStatus::completed: break;
  }
  ++s_.completed;
  ttft_.add(r.ttft_s());
  ttft_with_.add(r.ttft_s());
  const double load = r.load_start_s >= 0 ? r.load_end_s - r.load_start_s : 0.0;
  queue_.add(r.admit_s - r.arrival_s);
  load_.add(load);
  prefill_.add(r.prefill_end_s - (r.load_end_s >= 0 ? r.load_end_s : r.admit_s));
  const bool moved = r.transfer_start_s >= 0;  // a single-token answer never goes to decode
  kv_wait_.add(moved ? r.transfer_start_s - r.prefill_end_s : 0.0);
  transfer_.add(moved ? r.transfer_end_s - r.transfer_start_s : 0.0);
  slot_wait_.add(moved ? r.first_token_s - r.transfer_end_s : 0.0);
  e2e_.add(r.e2e_s());
  const double tpot = r.tpot_s();
  if (tpot >= 0) tpot_.add(tpot);
  if (r.ttft_s() <= slo_.ttft_s && tpot <= slo_.tpot_s) {
    ++s_.slo_met;
    s_.slo_met_output_tokens += r.output_tokens;
  }
}

void MetricsCollector::on_memory(const MemoryEvent& e) {
  static_assert(static_cast<int>(Phase::prefill) == 0 && static_cast<int>(Phase::decode) == 1, "track_index_ has one row per phase");
  const int role = static_cast<int>(e.role);
  // the instances the constructor was told of are indexed; any other id takes the maps' path
  std::pair<Track*, Track*>* slot = role >= 0 && role < 2 && e.instance >= 0 && static_cast<size_t>(e.instance) < track_index_[role].size()
                                        ? &track_index_[role][static_cast<size_t>(e.instance)]
                                        : nullptr;
  if (!slot || !slot->first) {
    const std::pair<int, int> key{role, e.instance};
    Track* mean = &tracks_[key];
    auto [it, fresh] = busiest_.try_emplace(key);
    if (fresh) it->second.from = warmup_;
    if (!slot) {
      mean->set(e.t_s, e.kv_bytes_mean), it->second.set(e.t_s, e.kv_bytes_max);
      return;
    }
    *slot = {mean, &it->second};
  }
  slot->first->set(e.t_s, e.kv_bytes_mean);
  slot->second->set(e.t_s, e.kv_bytes_max);
}

// Sessions active at some time in the window (ended at or after warmup_s) count, whole: their
// rounds and residency ratios include the part before warmup_s.
void MetricsCollector::on_session(const SessionRecord& e) {
  if (e.end_s < warmup_) return;
  ++s_.sessions;
  s_.sessions_completed += e.status == RequestStatus::completed;
  s_.session_rounds += e.rounds;
  s_.session_life_s += e.end_s - e.start_s;
  s_.session_gpu_s += e.gpu_s;
  s_.session_decode_s += e.decode_s;
  s_.session_idle_s += e.idle_s;
}

void MetricsCollector::on_tier(const TierEvent& e) {
  l2_.set(e.t_s, e.l2_bytes);
  l3_.set(e.t_s, e.l3_bytes);
}

void MetricsCollector::on_end(double t_s) {
  s_.ttft_queue_s = queue_.result();
  s_.ttft_load_s = load_.result();
  s_.ttft_prefill_s = prefill_.result();
  s_.ttft_decode_kv_wait_s = kv_wait_.result();
  s_.ttft_transfer_s = transfer_.result();
  s_.ttft_slot_wait_s = slot_wait_.result();
  const double window = t_s - warmup_;
  l2_.set(t_s, l2_.last_mean);
  l3_.set(t_s, l3_.last_mean);
  s_.l2_mean = window > 0 ? l2_.area / window : 0, s_.l2_peak = l2_.peak;
  s_.l3_mean = window > 0 ? l3_.area / window : 0, s_.l3_peak = l3_.peak;
  s_.end_s = t_s;
  for (auto [first, generated] : warmup_decoding_) s_.output_tokens += output_in_window(first, t_s, generated);
  for (double a : waiting_arrivals_) ttft_with_.add(t_s - a);
  s_.in_flight_without_first_token = static_cast<long long>(waiting_arrivals_.size());
  s_.ttft_with_in_flight_s = ttft_with_.result();
  s_.ttft_s = ttft_.result();
  s_.tpot_s = tpot_.result();
  s_.e2e_s = e2e_.result();
  s_.transfer_s = xfer_.result();
  for (const LatencyQuantiles* q : {&ttft_, &ttft_with_, &tpot_, &e2e_, &xfer_, &queue_, &load_, &prefill_, &kv_wait_, &transfer_, &slot_wait_})
    s_.quantiles_approximate |= q->approximate();
  s_.decode_batch_mean = s_.decode_steps ? decode_seq_sum_ / static_cast<double>(s_.decode_steps) : 0.0;
  double psum = 0, dsum = 0;
  int pn = 0, dn = 0;
  for (auto& [key, t] : tracks_) {
    t.set(t_s, t.last_mean);
    const double mean = window > 0 ? t.area / window : 0.0;
    if (key.first == static_cast<int>(Phase::prefill)) psum += mean, ++pn;
    else dsum += mean, ++dn;
  }
  for (auto& [key, t] : busiest_) {
    t.set(t_s, t.last_mean);
    double& peak = key.first == static_cast<int>(Phase::prefill) ? s_.prefill_kv_peak : s_.decode_kv_peak;
    peak = std::max(peak, t.peak);
  }
  s_.prefill_kv_mean = pn ? psum / pn : 0.0;
  s_.decode_kv_mean = dn ? dsum / dn : 0.0;
}

}  // namespace servesim
