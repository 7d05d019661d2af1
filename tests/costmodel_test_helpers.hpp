// Shared by the cost-model test files: the committed kernel tables and fitted parameters, and
// the datasheet roofline bound of an engine op.
#pragma once
#include "costmodels/calibration/fit.hpp"
#include "costmodels/fitted.hpp"
#include "costmodels/step_cost.hpp"
#include "helpers.hpp"

#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

namespace servesim::costmodel_test {

inline const std::map<std::string, KernelTable>& tables() {
  static const auto t = load_kernel_tables(test::data("costmodels/data/h200"));
  return t;
}
inline std::shared_ptr<const FitSet> committed() { return load_fit_cached(test::gpu("h200").fitted_models_path); }

inline double rel(double a, double b) { return std::abs(a / b - 1); }

// Datasheet roofline bound of an engine op (its own FLOP and byte formulas), seconds.
inline double roofline_bound(const Op& o, const GpuSpec& g) {
  // MXFP4 on FP4 tensor cores where the GPU has them (B300), else as W4A16 on BF16 ones (Hopper)
  const double peak = o.math == DType::fp8                              ? g.fp8_flop_per_s
                      : o.math == DType::mxfp4 && g.fp4_flop_per_s > 0 ? g.fp4_flop_per_s
                                                                         : g.bf16_flop_per_s;
  return std::max(o.flops / peak, o.bytes / g.hbm_bandwidth_bytes_per_s);
}

// The first op of kind k in ops (std::runtime_error if none).
inline const Op& find_op(const std::vector<Op>& ops, OpKind k) {
  for (const auto& o : ops)
    if (o.kind == k) return o;
  throw std::runtime_error("op not found");
}

inline int attention_kind(const ModelSpec& m, AttentionOp op) {
  for (size_t i = 0; i < m.attention_kinds.size(); ++i)
    if (m.attention_kinds[i].op == op) return static_cast<int>(i);
  return -1;
}


}  // namespace servesim::costmodel_test
