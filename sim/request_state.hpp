// servesim sim: a request's life inside the engine. Owned by the Simulation from arrival until it
// ends (completed / rejected) or the run stops (in flight).
#pragma once
#include "sim/events.hpp"
#include "workloads/request.hpp"

namespace servesim {

enum class ReqPhase { queued, prefill, wait_decode, transfer, wait_slot, decode, done };
/// The phase's name as requests.csv and summary.json report it for requests in flight at the horizon.
inline const char* to_string(ReqPhase p) {
  switch (p) {
    case ReqPhase::queued: return "queued";
    case ReqPhase::prefill: return "prefill";
    case ReqPhase::wait_decode: return "waiting_for_decode_kv";
    case ReqPhase::transfer: return "kv_transfer";
    case ReqPhase::wait_slot: return "waiting_for_decode_slot";
    case ReqPhase::decode: return "decode";
    case ReqPhase::done: return "done";
  }
  return "?";
}

struct ReqState {
  Request req;
  ReqPhase phase = ReqPhase::queued;
  RequestRecord rec;        ///< filled in as the request progresses; emitted when it ends
  int prefill_rank = -1, decode_rank = -1;
  long long prefilled = 0;  ///< prompt tokens whose KV exists on the prefill rank (cached + computed)
  int pinned_blocks = 0;    ///< prefix-cache blocks pinned while prefilling (and, once cached, until its KV leaves)
  bool cached = false;      ///< its prompt's blocks are in the prefill rank's prefix cache (from its prefill's end)
  bool loading = false;     ///< admitted, its session KV is being loaded back: not yet schedulable
  int active_index = -1;    ///< position in its decode rank's running batch
  long long start_step = 0; ///< decode instance step at which it joined the batch
  double kv_prefill_bytes = 0, kv_decode_bytes = 0;  ///< reserved per GPU on the prefill / decode rank
  double kv_prompt_bytes = 0, kv_whole_bytes = 0;    ///< per GPU: prompt on a prefill rank; prompt + output on a decode rank
  long long remaining_prefill() const { return req.input_tokens - prefilled; }
};

}  // namespace servesim
