// servesim workloads: the source table. Each workload kind (scenarios/workload_spec.hpp) maps to the
// reader or generator that streams its requests; a new trace reader is one file in workloads/ plus
// one row here (and its kind's name in scenarios/workload_spec.hpp).
#pragma once
#include "scenarios/workload_spec.hpp"
#include "workloads/request.hpp"

#include <cstdint>
#include <memory>

namespace servesim {

/// Builds the source for a spec. `seed` drives every random choice (synthetic draws, jitter).
/// Throws std::runtime_error when a trace file cannot be opened (naming it).
std::unique_ptr<RequestSource> make_source(const WorkloadSpec& spec, std::uint64_t seed);

}  // namespace servesim
