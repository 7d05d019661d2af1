// Shared test helpers: paths to the source tree's data and the shared traces.
#pragma once
#include "costmodels/feasibility.hpp"
#include "costmodels/cost_model.hpp"
#include "scenarios/scenario.hpp"
#include "scenarios/deployment.hpp"
#include "sim/events.hpp"
#include "workloads/request.hpp"

#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <filesystem>
#include <string>
#include <vector>

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

/// The tiny MoE model (tests/data/tiny-moe.json) on H200, one single-GPU prefill and one
/// single-GPU decode instance on separate nodes, 10 ms prefill / 2 ms decode step overhead (no launch
/// gaps: the host time is that overhead alone), KV copies at line rate, prefill
/// batches and chunks of `chunk_tokens`, no prefix cache: with ZeroCost every time is hand arithmetic.
inline DeploymentSpec tiny(long long chunk_tokens, bool kv_tiers = false) {
  DeploymentSpec d;
  d.name = "tiny";
  d.model = load_model(data("tests/data/tiny-moe.json"));
  d.gpu = gpu("h200");
  d.prefill = pool(1, 1, 1);
  d.decode = pool(1, 1, 1);
  d.prefill.step_overhead_s = 0.010;
  d.decode.step_overhead_s = 0.002;
  d.gpu.kernel_launch_s = d.gpu.graph_launch_s = 0;  // host time = step_overhead_s alone
  d.gpu.kv_transfer_efficiency = 1.0;                  // KV copies at NIC line rate (AllToAllOnFabric.* test the share)
  d.prefill.max_batch_tokens = d.prefill.chunk_tokens = chunk_tokens;
  d.prefix_cache.enabled = false;
  if (kv_tiers) d.kv_tiers.enabled = true, d.kv_tiers.host_bytes_per_node = 1e12;
  d.cluster.nodes = required_nodes(d);
  validate_deployment(d, "tiny");
  return d;
}

/// The requests of a list, in order (engine tests).
class ListSource final : public RequestSource {
 public:
  explicit ListSource(std::vector<Request> rs) : q_(rs.begin(), rs.end()) {}
  std::optional<Request> next() override {
    if (q_.empty()) return std::nullopt;
    Request r = q_.front();
    q_.pop_front();
    return r;
  }
  std::string describe() const override { return "list"; }

 private:
  std::deque<Request> q_;
};

/// A request arriving at t s with `in` prompt and `out` output tokens.
inline Request req(std::uint64_t id, double t, long long in, long long out) {
  Request r;
  r.id = id, r.arrival_s = t, r.input_tokens = in, r.output_tokens = out;
  return r;
}

/// Every request record the engine emits, by id.
class Records : public EventSink {
 public:
  void on_request(const RequestRecord& r) override { by_id[r.id] = r, ++emitted; }
  std::map<std::uint64_t, RequestRecord> by_id;
  long long emitted = 0;
};

}  // namespace servesim::test
