// servesim workloads: what workload to run, as plain data (the scenario loader fills it), and the
// factory that turns it into a RequestSource.
#pragma once
#include "workloads/request.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace servesim {

/// A token-length distribution. lognormal: exp(N(mu, sigma²)) rounded to an integer and clamped to
/// [min, max]; constant: `value`.
struct LengthDist {
  enum class Kind { lognormal, constant } kind = Kind::constant;
  double mu = 0, sigma = 0;
  long long min = 1, max = 1 << 20;
  long long value = 1;
};

struct WorkloadSpec {
  enum class Kind { synthetic, mooncake } kind = Kind::synthetic;
  // mooncake: a Mooncake FAST'25 JSONL trace {timestamp ms, input_length, output_length, hash_ids}
  std::string trace_path;
  double time_scale = 1.0;     ///< arrival times are multiplied by this (0.5 = twice the rate)
  double jitter_s = 0.0;       ///< add U[0, jitter_s) to each arrival (Mooncake times are quantised ~3 s)
  long long max_requests = 0;  ///< stop after this many requests (0 = whole trace / `requests`)
  int block_tokens = 512;      ///< tokens per hash id (Mooncake: 512)
  // synthetic
  enum class Arrival { poisson, gamma } arrival = Arrival::poisson;
  double rate_per_s = 1.0;     ///< mean arrival rate
  double burstiness = 1.0;     ///< gamma arrivals: squared coefficient of variation of gaps (1 = Poisson)
  long long requests = 100;    ///< number of requests generated
  LengthDist input, output;
  long long shared_prefix_tokens = 0;  ///< a system prompt every request starts with (whole blocks)
};

/// Builds the source for a spec. `seed` drives every random choice (synthetic draws, jitter).
/// Throws std::runtime_error when a trace file cannot be opened (naming it).
std::unique_ptr<RequestSource> make_source(const WorkloadSpec& spec, std::uint64_t seed);

}  // namespace servesim
