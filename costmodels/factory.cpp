#include "costmodels/factory.hpp"

#include "costmodels/fitted.hpp"
#include "scenarios/scenario.hpp"

#include <filesystem>
#include <stdexcept>

namespace servesim {

std::shared_ptr<const CostModel> make_cost_model(const std::string& name, const GpuSpec& gpu) {
  if (name == "roofline") return std::make_shared<RooflineCostModel>(gpu);
  if (name == "fitted") {
    if (gpu.fitted_models_path.empty())
      throw std::invalid_argument("cost model \"fitted\": hardware \"" + gpu.name +
                                  "\" names no fitted parameters (\"fitted_models\" in its hardware file); use --cost-model roofline");
    // a missing file is not a reason to refit (fit_set.cpp's message): say which file is missing
    if (!path_exists(gpu.fitted_models_path))
      throw std::invalid_argument("cost model \"fitted\": hardware \"" + gpu.name + "\": its fitted parameters (\"fitted_models\": \"" + gpu.fitted_models +
                                  "\", relative to the hardware file) are not at " + gpu.fitted_models_path + "; use --cost-model roofline");
    return std::make_shared<FittedCostModel>(load_fit_cached(gpu.fitted_models_path), gpu);
  }
  throw std::invalid_argument("unknown cost model \"" + name + "\" (available: " + std::string(cost_model_names()) + ")");
}

std::string_view cost_model_names() { return "fitted, roofline"; }

}  // namespace servesim
