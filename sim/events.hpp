// servesim sim: what the engine emits. Exporters and the metrics collector subscribe through
// EventSink; the engine knows no output format. Times are simulated seconds.
#pragma once
#include "costmodels/step_cost.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace servesim {

inline const char* to_string(Phase p) { return p == Phase::prefill ? "prefill" : "decode"; }

/// One batch step of one instance (the engine's unit of work).
struct StepEvent {
  Phase role = Phase::prefill;
  int instance = 0;
  double start_s = 0, end_s = 0;
  long long seqs = 0;    ///< sequences in the step over all DP ranks
  long long tokens = 0;  ///< new tokens over all DP ranks
  StepTime time;         ///< breakdown (attention / ffn / comm / other)
};

/// One prefill→decode KV transfer (possibly several parallel flows, one per attention-TP rank).
struct TransferEvent {
  std::uint64_t request = 0;
  int prefill_instance = 0, decode_instance = 0;
  bool inter_node = true;
  double start_s = 0, end_s = 0;
  double bytes = 0;  ///< total over the flows
};

/// Final state of a request. Every request that arrived ends as exactly one of these.
enum class RequestStatus { completed, rejected, in_flight };

struct RequestRecord {
  std::uint64_t id = 0;
  RequestStatus status = RequestStatus::in_flight;
  /// rejected: why, as "class" or "class: this request's figures" (summary.json counts by class);
  /// in_flight: the phase it was in at the horizon
  std::string reason;
  double arrival_s = 0;
  double admit_s = -1;                              ///< KV reserved on a prefill rank
  double load_start_s = -1, load_end_s = -1;        ///< load-back of the session's KV from L2/L3
  double prefill_start_s = -1, prefill_end_s = -1;  ///< first chunk start, last chunk end
  double transfer_start_s = -1, transfer_end_s = -1;  ///< P→D KV transfer; -1: none (output of 1 token)
  /// The first token reaches the user: when the request joins a decode batch (its first decode step
  /// starts), or at the end of its prefill when it has a single output token. TTFT ends here; waits
  /// for decode KV room and for a batch slot count in TTFT, never in TPOT.
  double first_token_s = -1;
  double done_s = -1;
  long long input_tokens = 0, output_tokens = 0, cached_tokens = 0, generated_tokens = 0;
  long long loaded_tokens = 0;  ///< of cached_tokens, loaded back from the store
  int load_tier = 0;            ///< 2 (host DRAM) or 3 (storage) when loaded back, else 0
  int prefill_instance = -1, decode_instance = -1;
  long long session = -1;
  int round = 0;
  double ttft_s() const { return first_token_s >= 0 ? first_token_s - arrival_s : -1; }
  double e2e_s() const { return done_s >= 0 ? done_s - arrival_s : -1; }
  /// mean time per output token after the first; -1 when fewer than 2 tokens
  double tpot_s() const { return done_s >= 0 && output_tokens > 1 ? (done_s - first_token_s) / (output_tokens - 1) : -1; }
};

/// KV memory held on an instance's GPUs changed (bytes per GPU: reservations of running requests
/// plus, on prefill ranks, the prefix cache).
struct MemoryEvent {
  Phase role = Phase::prefill;
  int instance = 0;
  double t_s = 0;
  double kv_bytes_mean = 0;  ///< mean over the instance's DP ranks
  double kv_bytes_max = 0;   ///< busiest DP rank
};

/// One agent/multi-turn session, emitted when it ends (last round done, a round rejected, or the
/// run's end). Times in seconds.
struct SessionRecord {
  long long session = 0;
  RequestStatus status = RequestStatus::completed;  ///< completed: its last round completed
  int rounds = 0;                                   ///< rounds that arrived
  double start_s = 0, end_s = 0;                    ///< first arrival, last completion (or run end)
  double gpu_s = 0;     ///< time its KV was on a GPU (admission on prefill → free on decode, per round)
  double decode_s = 0;  ///< Σ (last token − first token) over rounds: W_decode
  double idle_s = 0;    ///< Σ (next arrival − previous completion): tool/think time taken, W_idle
};

/// Occupancy of the KV store below the GPUs changed (bytes summed over nodes).
struct TierEvent {
  double t_s = 0;
  double l2_bytes = 0, l3_bytes = 0;
};

/// One copy of a session's KV to, from or within the store below the GPUs (README "KV tiers"):
/// a load-back from L2 host DRAM or L3 storage of `node` into the prefill rank's GPUs, an offload
/// from the decode GPUs into `node`'s L2, or a demotion from `node`'s L2 to its L3. Emitted when
/// the copy ends (a copy still running at the end of the run has no event). P→D copies are
/// TransferEvent.
enum class KvMoveKind { load_l2, load_l3, offload, demote };

struct KvMoveEvent {
  KvMoveKind kind = KvMoveKind::offload;
  long long session = -1;
  std::uint64_t request = 0;  ///< the round's request id (load-back, offload); 0 for a demotion
  int node = 0;               ///< the store's node: source of a load-back, destination of an offload or demotion
  double start_s = 0, end_s = 0;
  double bytes = 0;  ///< payload (the KV and states), without the transfer engine's wire overhead
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void on_step(const StepEvent&) {}
  virtual void on_transfer(const TransferEvent&) {}
  virtual void on_request(const RequestRecord&) {}
  virtual void on_memory(const MemoryEvent&) {}
  virtual void on_session(const SessionRecord&) {}
  virtual void on_tier(const TierEvent&) {}
  virtual void on_kv_move(const KvMoveEvent&) {}
  /// End of the run at simulated time t (after every request record was emitted).
  virtual void on_end(double /*t_s*/) {}
};

/// Forwards every event to several sinks in order.
class SinkFanout final : public EventSink {
 public:
  void add(EventSink* s) { sinks_.push_back(s); }
  void on_step(const StepEvent& e) override { for (auto* s : sinks_) s->on_step(e); }
  void on_transfer(const TransferEvent& e) override { for (auto* s : sinks_) s->on_transfer(e); }
  void on_request(const RequestRecord& e) override { for (auto* s : sinks_) s->on_request(e); }
  void on_memory(const MemoryEvent& e) override { for (auto* s : sinks_) s->on_memory(e); }
  void on_session(const SessionRecord& e) override { for (auto* s : sinks_) s->on_session(e); }
  void on_tier(const TierEvent& e) override { for (auto* s : sinks_) s->on_tier(e); }
  void on_kv_move(const KvMoveEvent& e) override { for (auto* s : sinks_) s->on_kv_move(e); }
  void on_end(double t) override { for (auto* s : sinks_) s->on_end(t); }

 private:
  std::vector<EventSink*> sinks_;
};

}  // namespace servesim
