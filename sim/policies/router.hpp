// servesim sim: request placement policies. The engine offers candidates; a Router picks one.
#pragma once
#include "sim/policies/registry.hpp"
#include "workloads/request.hpp"

#include <memory>
#include <string>
#include <vector>

namespace servesim {

/// A prefill DP rank that could take a request.
struct PrefillCandidate {
  int instance = 0, rank = 0;
  double queued_tokens = 0;    ///< tokens waiting or still to prefill on that rank
  long long cached_tokens = 0; ///< tokens of this request its prefix cache would serve
};

/// A decode DP rank with room for the request's whole KV.
struct DecodeCandidate {
  int instance = 0, rank = 0;
  double free_bytes = 0;  ///< KV bytes still free on one GPU of the rank
  int running = 0;        ///< sequences decoding or admitted there
};

class Router {
 public:
  virtual ~Router() = default;
  virtual std::string name() const = 0;
  /// True when pick_prefill reads PrefillCandidate::cached_tokens: the engine then looks each
  /// request up in every prefill rank's prefix cache (otherwise it skips the lookups, and
  /// cached_tokens holds only what the KV store offers).
  virtual bool uses_prefix_matches() const { return false; }
  /// Index into `c` (non-empty) of the prefill rank that takes request r.
  virtual std::size_t pick_prefill(const Request& r, const std::vector<PrefillCandidate>& c) = 0;
  /// Index into `c` (non-empty) of the decode rank that takes request r.
  virtual std::size_t pick_decode(const Request& r, const std::vector<DecodeCandidate>& c) = 0;
  /// True when pick_decode is least_loaded's rule (fewest running, then most free KV, ties
  /// rotating in candidate order): the engine may then find that rank in its own index of the
  /// ranks instead of building the candidate vector (DecodePool), asking only rotate_decode_tie.
  virtual bool decode_least_loaded() const { return false; }
  /// Which of `ties` (>= 2) tied best decode candidates, in candidate order, takes the request
  /// (0-based); advances the cursor pick_decode uses. Only called when decode_least_loaded().
  virtual std::size_t rotate_decode_tie(std::size_t /*ties*/) { return 0; }
};

/// "round_robin": cycles through the candidates;
/// "least_loaded": prefill: fewest queued tokens; decode: fewest running sequences, then most free KV;
/// "cache_aware": prefill: fewest tokens to compute before this request is done,
///   queued_tokens + input − cached_tokens (prefix hits weighed against load, like SGLang's
///   cache-aware router); decode: as least_loaded.
/// Ties (equal keys) rotate among the tied candidates: round-robin among the tied, one cursor per
/// router and phase, so tied instances share the work and the choice is deterministic. The router registry: throws std::invalid_argument
/// for other names, listing the known ones.
std::unique_ptr<Router> make_router(const std::string& name);

}  // namespace servesim
