// servesim costmodels: the fitted-parameter file (schema servesim.fitted-cost-model/1) as the
// engine reads it: every kernel family's fitted surface, the held-out errors measured when it was
// fitted, the communication calibration, and the provenance of the measurements. Written offline
// by `servesim costmodel fit` (costmodels/calibration/fit.hpp).
#pragma once
#include "costmodels/kernel_families.hpp"
#include "scenarios/gpu_spec.hpp"

#include <array>
#include <string>
#include <vector>

namespace servesim {

/// Absolute percentage errors |predicted / measured − 1| of a set of points (fractions, not %).
struct ErrorStats {
  int n = 0;
  double median = 0, p95 = 0, max = 0;
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
  Ceilings reference;       ///< its datasheet ceilings and measured HBM copy bandwidth (scenarios/hardware/<measured_on>.json)
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

/// Datasheet ceilings of a GPU (bf16/fp8/fp4 dense FLOP/s, HBM bytes/s), and its measured HBM
/// bandwidth as hbm_achievable (0 where the hardware file has none).
Ceilings datasheet_ceilings(const GpuSpec& gpu);

/// FNV-1a 64-bit hash of a byte string, as 16 lowercase hex digits (content fingerprints).
std::string fnv1a64_hex(const std::string& bytes);

/// Reads the fitted-parameter file. Throws std::runtime_error naming the file and what is wrong
/// (cannot open, malformed JSON, missing family, wrong schema).
FitSet read_fit_json(const std::string& path);

}  // namespace servesim
