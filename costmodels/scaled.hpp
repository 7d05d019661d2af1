// A cost model that answers another's latencies times a constant factor: `servesim capacity` runs
// the searched deployment at the ends of the fitted model's held-out error band with it
// (sim/cli/capacity_runner.cpp). Depends only on cost_model.hpp.
#pragma once
#include "costmodels/cost_model.hpp"

#include <memory>
#include <string>
#include <utility>

namespace servesim {

/// Every op latency (seconds) of `inner` times `factor` (dimensionless, > 0; not checked: the
/// capacity search passes 1 ± its band), and the part answered outside the measurements
/// (OpLatency::extrapolated_s) scaled alike; provenance and name unchanged. Communication is not a
/// cost-model op and is not scaled. No errors of its own.
class ScaledCostModel final : public CostModel {
 public:
  ScaledCostModel(std::shared_ptr<const CostModel> inner, double factor) : inner_(std::move(inner)), factor_(factor) {}
  std::string name() const override { return inner_->name(); }
  OpLatency latency(const Op& op) const override {
    OpLatency l = inner_->latency(op);
    l.seconds *= factor_;
    if (l.extrapolated_s > 0) l.extrapolated_s *= factor_;  // -1 (the whole op) and 0 kept
    return l;
  }

 private:
  std::shared_ptr<const CostModel> inner_;
  double factor_;
};

}  // namespace servesim
