// servesim workloads: seeded agent-session generator. A session is a chain of rounds: round 0's
// prompt is the shared system prompt + a task prompt; each later round's prompt is the whole
// history (every earlier prompt and output) + newly appended tokens (tool results, user turn); a
// round arrives when the previous round's output is complete plus a tool/think time.
//  open loop:   sessions start as a Poisson process at rate_per_s (until duration_s / requests);
//  closed loop: `concurrency` sessions are kept active — they start spread over [0, ramp_s) and each
//               session that ends is replaced by a new one after its last think time (until
//               duration_s / requests), which is what "N concurrent agents" means.
// Closed loop, start "stationary": each initial session begins mid-life, at the round the closed
// loop's stationary distribution gives (renewal theory, every round taken as equally long): its
// total rounds R drawn length-biased (P ∝ R · f(R), by rejection against the rounds distribution's
// max), its current round k uniform in [0, R). Rounds 0..k−1 are drawn from the session's stream
// as if they had run (same prompts, outputs, think times), so round k's prompt is the whole history
// + an append; its history is marked stored (Request::history_stored). Sessions started later (the
// replacements) begin at round 0 as usual.
// Every session draws from its own random stream, seeded from (seed, session id), so session k has
// the same rounds, lengths and think times whatever deployment runs it; start times come from a
// separate stream. Defaults (scenario loader) and their sources: README.md ("Agent sessions").
#pragma once
#include "workloads/request.hpp"
#include "scenarios/rng.hpp"
#include "workloads/session_blocks.hpp"
#include "scenarios/workload_spec.hpp"

#include <unordered_map>
#include <vector>

namespace servesim {

class AgentSessionSource final : public RequestSource {
 public:
  /// Throws std::invalid_argument on a non-positive rate or concurrency.
  AgentSessionSource(const WorkloadSpec& spec, std::uint64_t seed);
  std::optional<Request> next() override;
  std::optional<Request> follow_up(const Request& done, double t_done) override;
  std::string describe() const override;

 private:
  struct Session {
    long long rounds = 1, history = 0;
    int round = 0;
    SessionBlocks blocks;
    Rng rng;  ///< the session's own stream: its content does not depend on the engine's call order
  };
  bool may_start(double t) const;
  Request start_session(double t, bool stationary = false);
  long long length_biased_rounds(Rng& rng) const;
  Request round_request(long long id, Session& s, double t, long long prompt, long long shared);
  WorkloadSpec spec_;
  std::uint64_t seed_;
  Rng starts_;  ///< session start times (closed-loop ramp, open-loop Poisson process)
  std::vector<std::uint64_t> system_blocks_;
  std::vector<double> closed_starts_;  // closed loop: initial session start times, sorted
  size_t next_start_ = 0;
  double open_t_ = 0;
  long long started_ = 0;
  std::uint64_t next_id_ = 0;
  std::unordered_map<long long, Session> active_;
};

}  // namespace servesim
