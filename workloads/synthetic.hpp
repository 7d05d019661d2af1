// servesim workloads: seeded synthetic request generator (Poisson or Gamma arrivals, lengths from
// LengthDist). Prefix blocks: every request starts with the shared system prompt
// (`shared_prefix_tokens`, whole blocks with ids 0..k-1, common to all requests); its other blocks
// get fresh ids, so only the system prompt is ever reused.
#pragma once
#include "workloads/request.hpp"
#include "scenarios/rng.hpp"
#include "scenarios/workload_spec.hpp"

namespace servesim {

class SyntheticSource final : public RequestSource {
 public:
  /// Throws std::invalid_argument on a non-positive rate, burstiness or request count.
  SyntheticSource(const WorkloadSpec& spec, std::uint64_t seed);
  std::optional<Request> next() override;
  std::string describe() const override;

 private:
  WorkloadSpec spec_;
  Rng rng_;
  long long emitted_ = 0;
  double t_ = 0;
  std::uint64_t next_block_ = 0;
};

}  // namespace servesim
