#include "costmodels/factory.hpp"

#include <stdexcept>

namespace servesim {

std::shared_ptr<const CostModel> make_cost_model(const std::string& name, const GpuSpec& gpu) {
  if (name == "roofline") return std::make_shared<RooflineCostModel>(gpu);
  throw std::invalid_argument("unknown cost model \"" + name + "\" (available: roofline)");
}

}  // namespace servesim
