// servesim costmodels/calibration (offline; links Eigen): fitting the kernel families to the measurement tables, held-out
// validation, calibration of the communication parameters, checks against published numbers, and
// writing the fitted-parameter file (schema servesim.fitted-cost-model/1) that the engine loads
// (costmodels/fit_set.hpp reads it).
// `servesim costmodel fit` and `servesim costmodel report` are thin wrappers around this file.
#pragma once
#include "costmodels/calibration/kernel_table.hpp"
#include "costmodels/fit_set.hpp"

#include <array>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace servesim {

/// Median and p95 (linear interpolation between order statistics) of `ape`.
ErrorStats error_stats(std::vector<double> ape);

/// One held-out prediction.
struct HeldOut {
  Family family = Family::gemm_bf16;
  std::string table, variant;
  std::array<double, kMaxGridDims> x{};
  double measured_s = 0, predicted_s = 0;
  double ape() const { return std::abs(predicted_s / measured_s - 1); }
};

struct FitOptions {
  int folds = 5;
  bool validate = true;        ///< k-fold and leave-one-shape-out (most of the fitting time)
  bool shape_out = true;
};

/// Fits every family to the tables; measured_on is the GPU's spec (its datasheet ceilings are the
/// reference for extrapolation and scaling). With opt.validate, also the held-out errors.
/// `held_out` (optional) receives every k-fold prediction. Deterministic.
FitSet fit_all(const std::map<std::string, KernelTable>& tables, const GpuSpec& measured_on, const FitOptions& opt,
               std::vector<HeldOut>* held_out = nullptr);

/// Held-out validation of one family on `samples` (k-fold interleaved; leave-one-shape-out).
FamilyValidation validate_family(Family f, const std::vector<Sample>& samples, const Ceilings& ref, const FitOptions& opt,
                                 std::vector<HeldOut>* held_out);

/// Fits one family to its samples.
FittedFamily fit_family(Family f, const std::vector<Sample>& samples);

/// NVLink (2xH200 NCCL all-to-all) and NIC (DeepEP internode, H800) calibration. `h800` gives
/// the fabric of the published rows; `h200` the per-hop NVLink latency held in the fit.
CommCalibration calibrate_comm(const std::map<std::string, KernelTable>& tables, const GpuSpec& h200, const GpuSpec& h800);

/// Writes the fitted-parameter file (read back by read_fit_json, costmodels/fit_set.hpp). Throws
/// std::runtime_error if it cannot write.
void write_fit_json(const FitSet& fit, const std::string& path);

/// The accuracy targets of issue #5 and the families measured to miss them (with the measured
/// numbers, kept in sync with the committed data by tests/test_costmodel_fit.cpp).
constexpr double kTargetMedianApe = 0.05, kTargetP95Ape = 0.15;
struct AccuracyException {
  Family family;
  double median, p95;  ///< the measured k-fold errors the exception allows (upper bounds)
  const char* why;
};
const std::vector<AccuracyException>& accuracy_exceptions();

}  // namespace servesim
