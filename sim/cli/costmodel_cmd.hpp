// servesim cli: `servesim costmodel fit | report` (costmodels/fit.hpp). Exit status 0 ok, 1 failure.
#pragma once
#include <string>

namespace servesim::cli {

struct CostModelArgs {
  std::string data;              ///< folder of kernel tables (default: next to the parameter file)
  std::string params;            ///< parameter file (default: the hardware file's "fitted_models")
  std::string hardware = "h200"; ///< GPU the tables were measured on
  bool no_validate = false;      ///< fit only (skip the held-out validation)
  bool no_shape_out = false;     ///< k-fold validation only (skip leave-one-shape-out, most of the time)
  int worst = 0;                 ///< print the N worst held-out rows of each family
  std::string family;            ///< restrict --worst to this family
};

int costmodel_fit(const CostModelArgs& a);
int costmodel_report(const CostModelArgs& a);

}  // namespace servesim::cli
