// servesim costmodels: cost models by name (the scenario's "cost_model" and --cost-model).
#pragma once
#include "costmodels/cost_model.hpp"

#include <memory>
#include <string>
#include <string_view>

namespace servesim {


/// "fitted": FittedCostModel from the parameters the GPU's hardware file names (costmodels/fitted.hpp;
/// read once per process); "roofline": RooflineCostModel for `gpu`.
/// Throws std::invalid_argument for unknown names or a GPU without fitted parameters, and
/// std::runtime_error if the parameter file cannot be read.
std::shared_ptr<const CostModel> make_cost_model(const std::string& name, const GpuSpec& gpu);

/// "fitted, roofline" (for messages).
std::string_view cost_model_names();

}  // namespace servesim
