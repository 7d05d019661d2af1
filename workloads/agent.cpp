#include "workloads/agent.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace servesim {

AgentSessionSource::AgentSessionSource(const WorkloadSpec& spec, std::uint64_t seed) : spec_(spec), seed_(seed), starts_(seed) {
  if (spec_.block_tokens < 1) throw std::invalid_argument("workload.block_tokens must be ≥ 1");
  for (long long b = 0; b < spec_.shared_prefix_tokens / spec_.block_tokens; ++b) system_blocks_.push_back(static_cast<std::uint64_t>(b));
  if (spec_.loop == WorkloadSpec::Loop::closed) {
    if (spec_.concurrency < 1) throw std::invalid_argument("workload.concurrency must be ≥ 1");
    for (long long i = 0; i < spec_.concurrency; ++i) closed_starts_.push_back(spec_.ramp_s > 0 ? starts_.uniform() * spec_.ramp_s : 0.0);
    std::sort(closed_starts_.begin(), closed_starts_.end());
  } else if (!(spec_.rate_per_s > 0)) {
    throw std::invalid_argument("workload.rate_per_s must be > 0");
  }
}

bool AgentSessionSource::may_start(double t) const {
  if (spec_.requests > 0 && started_ >= spec_.requests) return false;
  return spec_.duration_s <= 0 || t < spec_.duration_s;
}

Request AgentSessionSource::round_request(long long id, Session& s, double t, long long prompt, long long shared) {
  Request r;
  r.id = next_id_++;
  r.arrival_s = t;
  r.session = id;
  r.round = s.round;
  r.input_tokens = prompt;
  r.history_tokens = shared;
  r.output_tokens = std::max<long long>(1, spec_.output_tokens.sample_tokens(s.rng));
  r.think_after_s = std::max(0.0, spec_.think_s.sample(s.rng));
  r.last_round = s.round + 1 >= s.rounds;
  r.block_tokens = spec_.block_tokens;
  r.block_hashes = s.blocks.assign(prompt, shared);
  // (no origin string: a generated request is named by its session and round)
  s.history = prompt + r.output_tokens;
  return r;
}

// Total rounds of a session seen at a random time: P(R) ∝ R · f(R) (a long session is caught R
// times as often), by rejection from the rounds distribution against its largest value. A bound
// on the draws keeps a distribution with a huge max from looping long: the last draw is taken then.
long long AgentSessionSource::length_biased_rounds(Rng& rng) const {
  const double top = std::max(1.0, std::min(spec_.rounds.max, 1e6));
  long long r = 1;
  for (int i = 0; i < 1000000; ++i) {
    r = std::max<long long>(1, spec_.rounds.sample_tokens(rng));
    if (rng.uniform() * top < static_cast<double>(r)) break;
  }
  return r;
}

Request AgentSessionSource::start_session(double t, bool stationary) {
  const long long id = started_++;
  Rng rng(seed_ ^ (0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(id + 1)));
  const long long rounds = stationary ? length_biased_rounds(rng) : std::max<long long>(1, spec_.rounds.sample_tokens(rng));
  long long prompt = spec_.shared_prefix_tokens + std::max<long long>(1, spec_.first_prompt_tokens.sample_tokens(rng));
  auto it = active_.emplace(id, Session{rounds, 0, 0, SessionBlocks(id, spec_.block_tokens, system_blocks_), rng}).first;
  Session& s = it->second;
  if (!stationary) return round_request(id, s, t, prompt, 0);
  // the rounds before the current one, drawn in round_request's and follow_up's order
  const long long k = std::min(rounds - 1, static_cast<long long>(s.rng.uniform() * static_cast<double>(rounds)));
  long long history = 0;
  for (long long j = 0; j < k; ++j) {
    const long long out = std::max<long long>(1, spec_.output_tokens.sample_tokens(s.rng));
    (void)spec_.think_s.sample(s.rng);
    history = prompt + out;
    prompt = history + std::max<long long>(1, spec_.append_tokens.sample_tokens(s.rng));
  }
  s.round = static_cast<int>(k);
  s.blocks.assign(history, 0);  // the stored history's blocks, so round k keeps them as its prefix
  Request r = round_request(id, s, t, prompt, history);
  r.history_stored = history > 0;
  return r;
}

std::optional<Request> AgentSessionSource::next() {
  if (spec_.loop == WorkloadSpec::Loop::closed) {
    if (next_start_ >= closed_starts_.size()) return std::nullopt;
    const double t = closed_starts_[next_start_++];
    if (!may_start(t)) return std::nullopt;
    return start_session(t, spec_.start == WorkloadSpec::Start::stationary);
  }
  if (!may_start(open_t_)) return std::nullopt;
  const double t = open_t_;
  open_t_ += starts_.exponential(1.0 / spec_.rate_per_s);
  return start_session(t);
}

std::optional<Request> AgentSessionSource::follow_up(const Request& done, double t_done) {
  auto it = active_.find(done.session);
  if (it == active_.end()) return std::nullopt;
  Session& s = it->second;
  const double t = t_done + done.think_after_s;
  if (!done.last_round) {
    ++s.round;
    const long long append = std::max<long long>(1, spec_.append_tokens.sample_tokens(s.rng));
    const long long history = s.history;
    return round_request(done.session, s, t, history + append, history);
  }
  active_.erase(it);
  if (spec_.loop == WorkloadSpec::Loop::closed && may_start(t)) return start_session(t);
  return std::nullopt;
}

std::string AgentSessionSource::describe() const {
  std::ostringstream o;
  o << "agent sessions, " << (spec_.loop == WorkloadSpec::Loop::closed ? "closed loop of " + std::to_string(spec_.concurrency) + " active"
                                                                       : "open loop at " + std::to_string(spec_.rate_per_s) + "/s")
    << (spec_.requests > 0 ? ", " + std::to_string(spec_.requests) + " sessions in all" : "")  // (rev27: a cap of 3 read as "closed loop of 100")
    << ", mean " << spec_.rounds.nominal_mean() << " rounds, " << spec_.append_tokens.nominal_mean() << " appended and "
    << spec_.output_tokens.nominal_mean() << " output tokens per round, think " << spec_.think_s.nominal_mean() << " s"
    << (spec_.start == WorkloadSpec::Start::stationary ? ", stationary start" : "");
  return o.str();
}

}  // namespace servesim
