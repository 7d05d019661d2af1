// servesim scenarios: what workload to run, as plain data (the scenario loader fills it); the
// readers and generators that turn it into requests are in workloads/ (workloads/source.hpp).
#pragma once
#include "scenarios/dist.hpp"

#include <cstdint>
#include <string>

namespace servesim {

struct WorkloadSpec {
  enum class Kind { synthetic, mooncake, azure, burstgpt, tracelab_replay, tracelab_rounds, agent } kind = Kind::synthetic;
  // trace readers
  std::string trace_path;
  double time_scale = 1.0;     ///< arrival times (and, unless wait_scale is set, TraceLab tool waits) are multiplied by this
  /// TraceLab readers: tool waits between a session's rounds are multiplied by this instead of
  /// time_scale (0 = time_scale), so that sessions days apart can be brought together by time_scale
  /// while their rounds keep the trace's waits (wait_scale 1)
  double wait_scale = 0.0;
  double jitter_s = 0.0;       ///< mooncake: add U[0, jitter_s) to each arrival (times are quantised ~3 s)
  long long max_requests = 0;  ///< stop after this many requests / sessions (0 = whole trace)
  int block_tokens = 512;      ///< tokens per prefix block (Mooncake hash ids: 512)
  bool skip_bad_rows = false;  ///< skip (and count) malformed rows instead of stopping
  // synthetic requests
  enum class Arrival { poisson, gamma } arrival = Arrival::poisson;
  double rate_per_s = 1.0;     ///< mean arrival rate (agent open loop: sessions per second)
  double burstiness = 1.0;     ///< gamma arrivals: squared coefficient of variation of gaps (1 = Poisson)
  long long requests = 100;    ///< number of requests generated (agent: sessions, 0 = unbounded)
  Dist input, output;
  long long shared_prefix_tokens = 0;  ///< a system prompt every request starts with (whole blocks)
  // agent sessions (kind agent)
  enum class Loop { open, closed } loop = Loop::closed;
  long long concurrency = 100;  ///< closed loop: sessions kept active
  double ramp_s = 0;            ///< closed loop: initial sessions start spread over [0, ramp_s)
  /// Closed loop: where the initial sessions begin. ramp: at round 0 (every session young at once,
  /// contexts grow together for a session lifetime); stationary: at a round drawn from the
  /// closed loop's stationary distribution (workloads/agent.hpp), with the history of the rounds
  /// before it already in the KV store when the deployment has KV tiers.
  enum class Start { ramp, stationary } start = Start::ramp;
  double duration_s = 0;        ///< no new session starts after this time (0 = unbounded)
  Dist rounds;                  ///< rounds per session
  Dist first_prompt_tokens;     ///< task prompt of round 0 (after the shared system prompt)
  Dist append_tokens;           ///< tokens each later round appends (tool results, user turn)
  Dist output_tokens;           ///< output tokens per round
  Dist think_s;                 ///< tool/think time between a round's output and the next round
};

/// True for the kinds that replay a trace file (every kind but the generators synthetic and agent).
inline bool is_trace(WorkloadSpec::Kind k) { return k != WorkloadSpec::Kind::synthetic && k != WorkloadSpec::Kind::agent; }

}  // namespace servesim
