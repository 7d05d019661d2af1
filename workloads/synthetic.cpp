#include "workloads/synthetic.hpp"


#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace servesim {

SyntheticSource::SyntheticSource(const WorkloadSpec& spec, std::uint64_t seed) : spec_(spec), rng_(seed) {
  if (!(spec_.rate_per_s > 0)) throw std::invalid_argument("workload.rate_per_s must be > 0");
  if (!(spec_.burstiness > 0)) throw std::invalid_argument("workload.burstiness must be > 0");
  if (spec_.requests < 1) throw std::invalid_argument("workload.requests must be ≥ 1");
  if (spec_.block_tokens < 1) throw std::invalid_argument("workload.block_tokens must be ≥ 1");
  next_block_ = static_cast<std::uint64_t>(spec_.shared_prefix_tokens / spec_.block_tokens);
}

std::optional<Request> SyntheticSource::next() {
  if (emitted_ >= spec_.requests) return std::nullopt;
  const double mean_gap = 1.0 / spec_.rate_per_s;
  if (emitted_ > 0) {
    // Gamma gaps with shape 1/cv² keep the mean and set the burstiness (cv² = 1: exponential)
    t_ += spec_.arrival == WorkloadSpec::Arrival::poisson ? rng_.exponential(mean_gap)
                                                          : rng_.gamma(1.0 / spec_.burstiness, mean_gap * spec_.burstiness);
  }
  Request r;
  r.id = static_cast<std::uint64_t>(emitted_);
  r.arrival_s = t_;
  r.input_tokens = std::max(spec_.input.sample_tokens(rng_), spec_.shared_prefix_tokens + 1);
  r.output_tokens = std::max<long long>(1, spec_.output.sample_tokens(rng_));
  r.block_tokens = spec_.block_tokens;
  const long long blocks = capped_block_ids(r.input_tokens, spec_.block_tokens);
  const long long shared = spec_.shared_prefix_tokens / spec_.block_tokens;
  for (long long b = 0; b < blocks; ++b) r.block_hashes.push_back(b < shared ? static_cast<std::uint64_t>(b) : next_block_++);
  r.origin = "synthetic#" + std::to_string(emitted_);
  ++emitted_;
  return r;
}

std::string SyntheticSource::describe() const {
  std::ostringstream o;
  o << "synthetic: " << spec_.requests << " requests, "
    << (spec_.arrival == WorkloadSpec::Arrival::poisson ? "Poisson" : "Gamma") << " arrivals at " << spec_.rate_per_s << "/s";
  if (spec_.arrival == WorkloadSpec::Arrival::gamma) o << " (cv² " << spec_.burstiness << ")";
  return o.str();
}


}  // namespace servesim
