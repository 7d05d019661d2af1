// servesim sim: the validate step between loading a scenario and running it. The parser
// (scenarios/scenario.hpp) checks syntax, keys, types and ranges; this step checks what needs the
// layers below it: that every deployment can exist on its GPUs (costmodels/feasibility.hpp) and
// that every policy name is in its registry (sim/policies/).
#pragma once
#include "scenarios/scenario.hpp"

namespace servesim {

/// Throws ScenarioError naming the scenario file and the field ("deployments[1].decode.ep: ...",
/// "deployments[0].router: unknown ...") of the first deployment that cannot run.
void validate_scenario(const Scenario& s);

/// Only the policy names (router, decode_router, batch_scheduler, decode_batcher, eviction) of one
/// deployment against their registries; `where` prefixes the field path. Throws
/// std::invalid_argument ("<where>.router: unknown router ...").
void validate_policy_names(const DeploymentSpec& d, const std::string& where);

/// The same for one deployment; `where` prefixes the field path. Throws std::invalid_argument.
void validate_deployment_and_policies(const DeploymentSpec& d, const std::string& where);

}  // namespace servesim
