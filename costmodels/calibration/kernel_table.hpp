// servesim costmodels: the kernel measurement tables (schema "servesim.kernel-table/1", written by
// kernels/common/bench.cuh; one JSON file per op in costmodels/data/<gpu>/). Only the fitter
// (costmodels/fit.hpp) and `servesim costmodel` read them; the engine never does.
#pragma once
#include "costmodels/fit_set.hpp"
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace servesim {

/// One measured point. Times in microseconds (CUDA-event or CUDA-graph medians, see the table's
/// README); flops and bytes per call as the table's flop_formula / byte_formula define them.
struct KernelRow {
  std::string variant;
  std::map<std::string, double> num;       ///< numeric and boolean shape fields (true = 1)
  std::map<std::string, std::string> str;  ///< string shape fields (e.g. "model", "matrix", "gemm")
  double us_median = 0, us_p10 = 0, us_p90 = 0;
  double us_median_eager = 0;  ///< per-call CUDA-event time where the row was re-timed by graph replay, else 0
  std::string timing;          ///< "cuda_graph_replay", "cuda_events_per_call", or "" (older tables: events per call)
  double flops = 0, bytes = 0;
  std::string commit;  ///< row-level commit where present (rows merged from another run), else empty

  /// Numeric shape field `k`; throws std::out_of_range naming the field if absent.
  double at(const std::string& k) const;
  /// Numeric shape field `k`, or `def` if absent.
  double get(const std::string& k, double def) const;
  /// String shape field `k`, or "" if absent.
  std::string s(const std::string& k) const;
};

struct KernelTable {
  std::string file;     ///< file name (no folder), e.g. "mla_decode.json"
  std::string op;       ///< the table's "op"
  std::string commit;   ///< commit of the binaries that measured it
  std::string gpu;      ///< gpu.name, e.g. "NVIDIA H200"
  std::string content_hash;  ///< FNV-1a 64-bit of the file bytes, 16 hex digits
  std::vector<KernelRow> rows;
};

/// Loads one table. Throws std::runtime_error naming the file if it cannot be read, is not JSON,
/// or its "schema" is not servesim.kernel-table/1.
KernelTable load_kernel_table(const std::string& path);

/// Loads every servesim.kernel-table/1 file of a folder (other JSON files, e.g. fitted parameters,
/// are skipped), keyed by file name. Throws std::runtime_error if the folder has none.
std::map<std::string, KernelTable> load_kernel_tables(const std::string& dir);


}  // namespace servesim
