// servesim sim/policies: how a decode DP rank fills its running batch (continuous batching: every
// running sequence computes one token per step; between steps, sequences that were admitted, i.e.
// whose KV has arrived, join the batch up to the pool's max_running).
#pragma once
#include "sim/policies/registry.hpp"
#include "sim/request_state.hpp"

#include <deque>
#include <memory>
#include <string>

namespace servesim {

class DecodeBatcher {
 public:
  virtual ~DecodeBatcher() = default;
  virtual std::string name() const = 0;
  /// The next sequence of `ready` (non-empty; in the order their KV arrived) to join a batch of
  /// `running` sequences, removed from `ready`; nullptr when none joins this step (the batch is
  /// full at `max_running`, or the policy holds them back). The answer must depend on `ready`,
  /// `running` and `max_running` alone (not on the time or the step count): the engine runs the
  /// steps between batch changes as one event (RunOptions::decode_steps_per_event) and asks again
  /// only when a sequence became ready or finished.
  virtual ReqState* next(std::deque<ReqState*>& ready, int running, int max_running) = 0;
};

/// "fcfs": in the order their KV arrived, while fewer than max_running run. The decode batcher
/// registry: throws std::invalid_argument for other names, listing the known ones.
std::unique_ptr<DecodeBatcher> make_decode_batcher(const std::string& name);

}  // namespace servesim
