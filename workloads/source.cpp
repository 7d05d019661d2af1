#include "workloads/source.hpp"
#include "scenarios/fnv1a64.hpp"

#include "workloads/agent.hpp"
#include "workloads/csv_traces.hpp"
#include "workloads/mooncake.hpp"
#include "workloads/synthetic.hpp"
#include "workloads/tracelab.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <stdexcept>
#include <vector>

namespace servesim {

namespace {

using Factory = std::function<std::unique_ptr<RequestSource>(const WorkloadSpec&, std::uint64_t seed)>;
using K = WorkloadSpec::Kind;

// The source table: one row per workload kind.
const std::map<K, Factory>& sources() {
  static const std::map<K, Factory> table = {
      {K::synthetic, [](const WorkloadSpec& s, std::uint64_t seed) { return std::make_unique<SyntheticSource>(s, seed); }},
      {K::agent, [](const WorkloadSpec& s, std::uint64_t seed) { return std::make_unique<AgentSessionSource>(s, seed); }},
      {K::mooncake,
       [](const WorkloadSpec& s, std::uint64_t seed) {
         return std::make_unique<MooncakeReader>(s.trace_path, s.time_scale, s.jitter_s, s.block_tokens, s.max_requests, seed, s.skip_bad_rows);
       }},
      {K::azure,
       [](const WorkloadSpec& s, std::uint64_t) {
         return std::make_unique<CsvRequestReader>(CsvRequestReader::Format::azure, s.trace_path, s.time_scale, s.max_requests, s.skip_bad_rows);
       }},
      {K::burstgpt,
       [](const WorkloadSpec& s, std::uint64_t) {
         return std::make_unique<CsvRequestReader>(CsvRequestReader::Format::burstgpt, s.trace_path, s.time_scale, s.max_requests, s.skip_bad_rows);
       }},
      {K::tracelab_replay,
       [](const WorkloadSpec& s, std::uint64_t) {
         return std::make_unique<TraceLabReplayReader>(s.trace_path, s.time_scale, s.max_requests, s.block_tokens, s.skip_bad_rows, s.wait_scale);
       }},
      {K::tracelab_rounds,
       [](const WorkloadSpec& s, std::uint64_t) {
         return std::make_unique<TraceLabRoundsReader>(s.trace_path, s.time_scale, s.max_requests, s.block_tokens, s.skip_bad_rows, s.wait_scale);
       }},
  };
  return table;
}

}  // namespace

WorkloadSpec workload_for(WorkloadSpec w, const PrefixCacheSpec& cache) {
  const bool sessions = w.kind == K::agent || w.kind == K::tracelab_replay || w.kind == K::tracelab_rounds;
  if (sessions && cache.enabled) w.block_tokens = cache.block_tokens;
  return w;
}

TraceFile trace_file(const std::string& path) {
  const FileDigest d = fnv1a64_file(path, "trace");
  TraceFile t;
  t.path = std::filesystem::absolute(path).lexically_normal().string();
  t.bytes = d.bytes, t.fnv1a64 = d.fnv1a64;
  return t;
}

std::unique_ptr<RequestSource> make_source(const WorkloadSpec& spec, std::uint64_t seed) { return sources().at(spec.kind)(spec, seed); }

}  // namespace servesim
