// servesim workloads: the source table. Each workload kind (scenarios/workload_spec.hpp) maps to the
// reader or generator that streams its requests; a new trace reader is one file in workloads/ plus
// one row here (and its kind's name in scenarios/workload_spec.hpp).
#pragma once
#include "scenarios/deployment.hpp"
#include "scenarios/workload_spec.hpp"
#include "workloads/request.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace servesim {

/// Builds the source for a spec. `seed` drives every random choice (synthetic draws, jitter).
/// Throws std::runtime_error when a trace file cannot be opened (naming it).
std::unique_ptr<RequestSource> make_source(const WorkloadSpec& spec, std::uint64_t seed);

/// Provenance of a trace file: what summary.json records so that a run can be tied to the bytes it read.
struct TraceFile {
  std::string path;   ///< absolute (std::filesystem::absolute of the scenario's resolved path)
  long long bytes = 0;
  std::string fnv1a64;  ///< FNV-1a 64 of the whole file, 16 hex digits (the hash the cost-model tables use)
};

/// Reads the file once in 1 MiB chunks. Throws std::runtime_error naming it when it cannot be read.
TraceFile trace_file(const std::string& path);

/// The workload as one deployment sees it. Sessions (agent generator, TraceLab replay and rounds)
/// get their prefix-block ids synthesised, so they are made at the prefix cache's own block size:
/// a round then reuses every whole cache block of the history the cache holds, not only whole
/// trace blocks (a 1,000-token round 0 gives 992 reusable tokens at 16-token blocks, not 512).
/// Traces that carry their own block ids (Mooncake) keep theirs; the engine re-expresses them at the
/// cache's size. No errors.
WorkloadSpec workload_for(WorkloadSpec w, const PrefixCacheSpec& cache);

}  // namespace servesim
