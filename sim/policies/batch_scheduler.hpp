// servesim sim/policies: how a prefill DP rank forms its next chunked-prefill batch (one policy
// interface; decode batch formation is sim/policies/decode_batcher.hpp).
#pragma once
#include "sim/policies/registry.hpp"
#include "sim/request_state.hpp"

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace servesim {

struct PrefillItem {
  ReqState* req = nullptr;
  long long tokens = 0;  ///< prompt tokens this step computes for it
};

class BatchScheduler {
 public:
  virtual ~BatchScheduler() = default;
  virtual std::string name() const = 0;
  /// Fills `out` with at most `budget` tokens for one DP rank: requests already prefilling
  /// (`running`, in start order) continue first; then requests from `waiting` start, each only if
  /// `admit(r)` reserves its KV (false: it stays queued). A request gets at most `chunk` tokens per
  /// step. Admitted requests move from `waiting` to the back of `running`; a request whose KV is
  /// being loaded back (`loading`) is skipped until it is ready.
  virtual void form_prefill_batch(std::deque<ReqState*>& running, std::deque<ReqState*>& waiting, long long budget, long long chunk,
                                  const std::function<bool(ReqState*)>& admit, std::vector<PrefillItem>& out) = 0;
};

/// "fcfs": waiting requests start in arrival order; the first that does not fit stops admission
///   (no overtaking, so no starvation).
/// "shortest_first": waiting requests start shortest remaining prompt first (lower mean TTFT,
///   long prompts can starve under load).
/// Throws std::invalid_argument for other names.
std::unique_ptr<BatchScheduler> make_batch_scheduler(const std::string& name);

}  // namespace servesim
