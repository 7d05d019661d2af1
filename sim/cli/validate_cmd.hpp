// servesim cli: `servesim validate [--quick] [--dir DIR]`: every validation case against its
// published numbers, one table (sim/cli/validate_case.hpp). Exit status 0 when every row that is
// not marked expected-to-fail is within its bound, 1 when one is not, 2 on bad input.
#pragma once
#include <string>

namespace servesim::cli {

struct ValidateArgs {
  bool quick = false;  ///< only the rows marked "quick" (the CI subset)
  std::string dir;     ///< folder of case files (default: data_dir()/validation, i.e. scenarios/validation)
};

int validate(const ValidateArgs& a);

}  // namespace servesim::cli
