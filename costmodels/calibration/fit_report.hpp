// servesim costmodels: checks of the fitted cost model beyond held-out kernel rows, printed by
// `servesim costmodel report` and asserted by tests/test_costmodel_fit.cpp:
//  - composite checks: whole measured layers (moe_layer_*, dense_ffn_k3 / moe_shared_expert
//    "total") against the sum of the engine's ops for the same shape, on the measured GPU;
//  - published H800 kernel numbers (published-measurements.md §3.6-3.7, model-facts §3) against
//    our kernels' fits scaled to the H800 per kernel (cross_gpu_seconds, kernel_families.hpp).
#pragma once
#include "costmodels/calibration/fit.hpp"
#include "scenarios/model_spec.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace servesim {

struct CheckRow {
  std::string group;      ///< e.g. "moe_layer_k3 vs engine ops"
  std::string what;       ///< the shape
  double reference = 0;   ///< measured (composite checks, see composite_checks) or published (H800 checks), in `unit`
  double predicted = 0;   ///< same unit
  std::string unit;       ///< "µs", "TFLOP/s", "GB/s"
  bool extrapolated = false;  ///< the prediction left a family's measured range
  std::string note;           ///< the families that were extrapolated, or a remark on the reference (then naming them after "; extrapolated: ")
  double ratio() const { return predicted / reference; }
};

/// Engine op sums vs measured whole layers on the measured GPU `gpu` (fit.measured_on). `models`
/// maps the tables' model labels ("K3", "DSV4-Pro", "DSV4-Flash") to the model specs. Rows: the
/// whole MoE layer (moe_layer_*), the dense FFN and the shared experts (incl. the K3 rows split
/// over attention TP, field attn_tp: one GPU's share). The reference is the measured total less one
/// launch gap for eagerly timed rows; where that exceeds the sum of its own kernels timed alone by
/// at most one launch gap (host launch stalls), the sum of the kernels, with a note saying so.
std::vector<CheckRow> composite_checks(std::shared_ptr<const FitSet> fit, const GpuSpec& gpu, const std::map<std::string, KernelTable>& tables,
                                       const std::map<std::string, ModelSpec>& models);

/// Published H800 kernel figures vs our fitted kernels scaled to `h800`.
std::vector<CheckRow> published_h800_checks(std::shared_ptr<const FitSet> fit, const GpuSpec& h800);

}  // namespace servesim
