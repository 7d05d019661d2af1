// servesim costmodels: fitting the kernel families to the measurement tables, held-out
// validation, calibration of the communication parameters, checks against published numbers, and
// the fitted-parameter file (schema servesim.fitted-cost-model/1) that the engine loads.
// `servesim costmodel fit` and `servesim costmodel report` are thin wrappers around this file.
#pragma once
#include "costmodels/gpu_spec.hpp"
#include "costmodels/kernel_families.hpp"
#include "costmodels/kernel_table.hpp"

#include <array>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace servesim {

/// Absolute percentage errors |predicted / measured − 1| of a set of points (fractions, not %).
struct ErrorStats {
  int n = 0;
  double median = 0, p95 = 0, max = 0;
};
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

struct FamilyValidation {
  Family family = Family::gemm_bf16;
  int rows = 0;
  ErrorStats kfold;       ///< k-fold, folds interleaved along the first feature of each measured series
  ErrorStats shape_out;   ///< leave one measured shape (FamilyInfo::series) out; n = 0 if the family has one shape
  ErrorStats in_sample;   ///< the full fit at its own training points
};

/// Communication calibration (published-measurements.md §3.4 and the 2xH200 comm tables).
struct CommRow {
  std::string what;       ///< e.g. "DeepEP LL dispatch EP16 (µs)"
  double published = 0;   ///< as the source states it (µs or GB/s, see `unit`)
  double predicted = 0;   ///< the engine's closed form with the calibrated parameters, same unit
  std::string unit;
  bool fitted = false;    ///< the row was used to fit the parameters
};
struct CommCalibration {
  double nvlink_efficiency = 0;      ///< fitted on the NCCL all-to-all rows, per-hop latency held
  double nvlink_latency_s = 0;       ///< per-hop latency held (hardware file)
  double handshake_s = 0;            ///< two-GPU event handshake subtracted from every measured row
  double nvlink_free_intercept_s = 0, nvlink_free_efficiency = 0;  ///< 2-parameter fit (for information)
  double nic_efficiency = 0;         ///< fitted with nic_call_s on DeepEP's internode rows, link latency held
  double nic_latency_s = 0;          ///< link latency held (hardware file)
  double nvlink_call_s = 0;  ///< per-call cost of an NVLink all-to-all: the NCCL intercept beyond two link hops
  double nic_call_s = 0;     ///< per-call cost of an inter-node all-to-all, fitted with nic_efficiency on DeepEP rows
  std::vector<CommRow> rows;
};

/// Everything the fitted cost model needs, and where it came from.
struct FitSet {
  std::string measured_on;  ///< hardware name of the GPU the tables were measured on ("h200")
  Ceilings reference;       ///< its datasheet ceilings (scenarios/hardware/<measured_on>.json)
  std::array<FittedFamily, kFamilyCount> families{};
  std::array<int, kFamilyCount> rows{};  ///< training rows per family
  double launch_gap_s = 0;  ///< removed from every eagerly timed row (kernel_families.hpp launch_gap_s)
  struct Table {
    std::string file, op, commit, hash;
    int rows = 0;
  };
  std::vector<Table> tables;
  std::vector<std::string> measurement_commits;  ///< distinct table/row commits (binaries that measured)
  std::vector<FamilyValidation> validation;
  CommCalibration comm;
  std::string source;  ///< file it was read from (empty when fitted in memory)
  std::string file_hash;  ///< FNV-1a 64 of that file
};

/// Datasheet ceilings of a GPU (bf16/fp8/fp4 dense FLOP/s, HBM bytes/s).
Ceilings datasheet_ceilings(const GpuSpec& gpu);

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

/// Writes / reads the fitted-parameter file. write: throws std::runtime_error if it cannot write.
/// read: throws std::runtime_error naming the file and what is wrong (missing family, schema).
void write_fit_json(const FitSet& fit, const std::string& path);
FitSet read_fit_json(const std::string& path);

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
