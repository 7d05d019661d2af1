#include "sim/validate.hpp"

#include "costmodels/feasibility.hpp"
#include "sim/policies/batch_scheduler.hpp"
#include "sim/policies/decode_batcher.hpp"
#include "sim/kvcache/prefix_cache.hpp"
#include "sim/policies/router.hpp"

#include <stdexcept>

namespace servesim {

void validate_policy_names(const DeploymentSpec& d, const std::string& where) {
  auto policy = [&](const char* key, const std::string& name, const auto& make) {
    try {
      make(name);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + "." + key + ": " + e.what());
    }
  };
  policy("router", d.router, make_router);
  policy("decode_router", d.decode_router, make_router);
  // cache_aware places a prompt by its prefill ranks' prefix-cache hits; decode instances keep no
  // prefix cache here, so it would route decode exactly as least_loaded (rev26: accepted silently)
  if (d.decode_router == "cache_aware")
    throw std::invalid_argument(where + ".decode_router: cache_aware ranks prefill instances by prefix-cache hits and decode instances have "
                                "none; use least_loaded or round_robin");
  policy("batch_scheduler", d.batch_scheduler, make_batch_scheduler);
  policy("decode_batcher", d.decode_batcher, make_decode_batcher);
  policy("eviction", d.eviction, make_eviction_policy);
}

void validate_deployment_and_policies(const DeploymentSpec& d, const std::string& where) {
  validate_policy_names(d, where);
  validate_deployment(d, where);
}

void validate_scenario(const Scenario& s) {
  for (size_t i = 0; i < s.deployments.size(); ++i) {
    try {
      validate_deployment_and_policies(s.deployments[i], "deployments[" + std::to_string(i) + "]");
    } catch (const std::invalid_argument& e) {
      throw ScenarioError(s.path + ": " + e.what());
    }
  }
}

}  // namespace servesim
