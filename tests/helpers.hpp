// Shared test helpers: paths to the source tree's data and the shared traces.
#pragma once
#include "costmodels/cost_model.hpp"
#include "scenarios/scenario.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>

namespace servesim::test {

inline std::string source_dir() { return SERVESIM_SOURCE_DIR; }
inline std::string data(const std::string& rel) { return source_dir() + "/" + rel; }
inline std::string shared_traces() {
  const char* e = std::getenv("SERVESIM_SHARED_TRACES");
  return e ? e : SERVESIM_SHARED_TRACES;
}
inline ModelSpec model(const std::string& name) { return load_model(data("scenarios/models/" + name + ".json")); }
inline GpuSpec gpu(const std::string& name) { return load_hardware(data("scenarios/hardware/" + name + ".json")); }

/// A deployment of `model` on `hw` with the given pools (not validated).
inline DeploymentSpec deployment(const std::string& m, const std::string& hw, PoolSpec prefill, PoolSpec decode) {
  DeploymentSpec d;
  d.name = m + "-" + hw;
  d.model = model(m);
  d.gpu = gpu(hw);
  d.prefill = prefill;
  d.decode = decode;
  d.cluster.nodes = required_nodes(d);
  return d;
}

/// A cost model that answers 0 s for every op: steps then last exactly their fixed overhead, so
/// engine timings follow from overheads, KV bytes and link figures alone (hand arithmetic).
class ZeroCost final : public CostModel {
 public:
  std::string name() const override { return "zero"; }
  OpLatency latency(const Op&) const override { return {0.0, Provenance::roofline}; }
};

inline PoolSpec pool(int instances, int ep, int attn_tp) {
  PoolSpec p;
  p.instances = instances, p.ep = ep, p.attn_tp = attn_tp;
  return p;
}

}  // namespace servesim::test
