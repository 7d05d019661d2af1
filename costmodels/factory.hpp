// servesim costmodels: cost models by name (the scenario's "cost_model" and --cost-model).
#pragma once
#include "costmodels/cost_model.hpp"

#include <memory>
#include <string>

namespace servesim {

/// "roofline": RooflineCostModel for `gpu`. Throws std::invalid_argument for unknown names.
std::shared_ptr<const CostModel> make_cost_model(const std::string& name, const GpuSpec& gpu);

}  // namespace servesim
