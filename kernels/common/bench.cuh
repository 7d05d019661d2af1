// servesim kernels: the timing harness and the measurement-table writer shared by every kernel
// family. One JSON file per op under costmodels/data/<gpu>/, schema "servesim.kernel-table/1":
//
// { "schema", "op", "model", "description", "flop_formula", "byte_formula",
//   "gpu": {name, driver, cuda_runtime, sm_count, l2_bytes, hbm_bytes, sm_clock_max_mhz,
//           mem_clock_max_mhz, sm_clock_mhz_during_run},
//   "commit", "method": {timer, warmup_runs, min_timed_runs, rotation},
//   "rows": [ {variant, shape{...}, dtypes{...}, us_median, us_p10, us_p90, runs,
//              flops, bytes, tflops, tbps, [optional extra fields, e.g. timing method]} ] }
//
// Units: times in microseconds (us_*), flops in FLOP per call (2 per multiply-add), bytes in
// bytes per call (the fewest bytes the op must move through HBM: every input read once, every
// output written once), tflops = flops / time in 1e12 FLOP/s, tbps = bytes / time in 1e12 B/s.
#pragma once
#include "common/cuda_check.cuh"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace servesim::kernels {

/// Facts about the GPU the table was measured on. Clocks from cudaDeviceGetAttribute (kHz→MHz);
/// driver version and the SM clock under load from `nvidia-smi` when it is on the PATH.
struct GpuInfo {
  std::string name, driver = "unknown";
  int cuda_runtime = 0, sm_count = 0;
  long long l2_bytes = 0, hbm_bytes = 0;
  int sm_clock_max_mhz = 0, mem_clock_max_mhz = 0;
};

/// Integers of a comma-separated command-line list ("8,4,2" -> {8, 4, 2}); empty items are skipped,
/// a non-number reads as 0 (std::atoi).
inline std::vector<int> int_list(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');)
    if (!t.empty()) v.push_back(std::atoi(t.c_str()));
  return v;
}

inline std::string shell_first_line(const char* cmd) {
  std::string out;
  if (FILE* p = popen(cmd, "r")) {
    char buf[256];
    if (fgets(buf, sizeof buf, p)) out = buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) out.pop_back();
  return out;
}

inline GpuInfo query_gpu(int device = 0) {
  GpuInfo g;
  cudaDeviceProp p{};
  SS_CUDA(cudaGetDeviceProperties(&p, device));
  g.name = p.name;
  g.sm_count = p.multiProcessorCount;
  g.l2_bytes = p.l2CacheSize;
  g.hbm_bytes = static_cast<long long>(p.totalGlobalMem);
  int khz = 0;
  SS_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
  g.sm_clock_max_mhz = khz / 1000;
  SS_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device));
  g.mem_clock_max_mhz = khz / 1000;
  SS_CUDA(cudaRuntimeGetVersion(&g.cuda_runtime));
  const std::string d = shell_first_line("nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null");
  if (!d.empty()) g.driver = d;
  return g;
}

/// Current SM clock in MHz as nvidia-smi reports it (0 when unavailable). Read right after a
/// timed loop to record the clock the numbers were taken at.
inline int current_sm_clock_mhz() {
  const std::string s = shell_first_line("nvidia-smi --query-gpu=clocks.sm --format=csv,noheader,nounits 2>/dev/null");
  return s.empty() ? 0 : std::atoi(s.c_str());
}

struct Timing {
  double us_median = 0, us_p10 = 0, us_p90 = 0;
  int runs = 0;
};

/// How many distinct input sets to rotate over so that one pass over all of them exceeds
/// 3x the L2 cache (so timed runs read HBM, not L2). `bytes_per_set` = bytes one call reads.
inline int rotation_sets(double bytes_per_set, long long l2_bytes, int max_sets = 64) {
  if (bytes_per_set <= 0) return 1;
  const int n = static_cast<int>(std::ceil(3.0 * static_cast<double>(l2_bytes) / bytes_per_set));
  return std::clamp(n, 1, max_sets);
}

/// Times `launch(i)` (which must enqueue the op on `stream` using input set i % sets) with CUDA
/// events: `warmup` untimed calls, then at least `min_runs` calls each timed on its own, and more
/// until `min_total_ms` of timed work has accumulated (capped at 10*min_runs). Returns
/// median/p10/p90 in microseconds. Throws on any CUDA error.
inline Timing time_op(const std::function<void(int)>& launch, cudaStream_t stream = 0, int warmup = 5,
                      int min_runs = 20, double min_total_ms = 20.0) {
  for (int i = 0; i < warmup; ++i) launch(i);
  SS_LAUNCH_CHECK();
  SS_CUDA(cudaStreamSynchronize(stream));
  cudaEvent_t a, b;
  SS_CUDA(cudaEventCreate(&a));
  SS_CUDA(cudaEventCreate(&b));
  std::vector<double> us;
  double total_ms = 0;
  for (int i = 0; i < 10 * min_runs; ++i) {
    if (i >= min_runs && total_ms >= min_total_ms) break;
    SS_CUDA(cudaEventRecord(a, stream));
    launch(warmup + i);
    SS_CUDA(cudaEventRecord(b, stream));
    SS_CUDA(cudaEventSynchronize(b));
    SS_LAUNCH_CHECK();
    float ms = 0;
    SS_CUDA(cudaEventElapsedTime(&ms, a, b));
    us.push_back(1000.0 * ms);
    total_ms += ms;
  }
  SS_CUDA(cudaEventDestroy(a));
  SS_CUDA(cudaEventDestroy(b));
  std::sort(us.begin(), us.end());
  auto q = [&](double f) { return us[static_cast<size_t>(std::lround(f * (us.size() - 1)))]; };
  return Timing{q(0.5), q(0.1), q(0.9), static_cast<int>(us.size())};
}

/// One op's measurement table. Rows are appended as a sweep runs; write() creates
/// `<dir>/<op>.json`. The commit comes from the SERVESIM_COMMIT environment variable (the
/// benchmark script sets it from `git rev-parse HEAD` on the machine that built the binary).
class Table {
 public:
  Table(std::string op, std::string model, std::string description, std::string flop_formula,
        std::string byte_formula, const GpuInfo& gpu)
      : op_(std::move(op)) {
    j_["schema"] = "servesim.kernel-table/1";
    j_["op"] = op_;
    j_["model"] = std::move(model);
    j_["description"] = std::move(description);
    j_["flop_formula"] = std::move(flop_formula);
    j_["byte_formula"] = std::move(byte_formula);
    j_["gpu"] = {{"name", gpu.name},
                 {"driver", gpu.driver},
                 {"cuda_runtime", gpu.cuda_runtime},
                 {"sm_count", gpu.sm_count},
                 {"l2_bytes", gpu.l2_bytes},
                 {"hbm_bytes", gpu.hbm_bytes},
                 {"sm_clock_max_mhz", gpu.sm_clock_max_mhz},
                 {"mem_clock_max_mhz", gpu.mem_clock_max_mhz}};
    const char* c = std::getenv("SERVESIM_COMMIT");
    j_["commit"] = c ? c : "unknown";
    j_["method"] = {{"timer", "cudaEventElapsedTime around each call"},
                    {"statistic", "median, p10, p90 over timed runs after warm-up"},
                    {"rotation", "inputs rotated over sets whose total exceeds 3x L2"}};
    j_["rows"] = nlohmann::json::array();
  }

  /// Appends one measured shape with extra per-row fields (e.g. {"timing": "graph", ...}) merged
  /// into the row object; keys already written by add() are not overwritten.
  void add(const std::string& variant, nlohmann::json shape, nlohmann::json dtypes, const Timing& t,
           double flops, double bytes, const nlohmann::json& extra) {
    add(variant, std::move(shape), std::move(dtypes), t, flops, bytes);
    for (auto it = extra.begin(); it != extra.end(); ++it)
      if (!j_["rows"].back().contains(it.key())) j_["rows"].back()[it.key()] = it.value();
  }

  /// Appends one measured shape. `flops` and `bytes` are per call (see the file header).
  void add(const std::string& variant, nlohmann::json shape, nlohmann::json dtypes, const Timing& t,
           double flops, double bytes) {
    const double s = t.us_median * 1e-6;
    j_["rows"].push_back({{"variant", variant},
                          {"shape", std::move(shape)},
                          {"dtypes", std::move(dtypes)},
                          {"us_median", t.us_median},
                          {"us_p10", t.us_p10},
                          {"us_p90", t.us_p90},
                          {"runs", t.runs},
                          {"flops", flops},
                          {"bytes", bytes},
                          {"tflops", s > 0 ? flops / s / 1e12 : 0.0},
                          {"tbps", s > 0 ? bytes / s / 1e12 : 0.0}});
  }

  void write(const std::string& dir) {
    j_["gpu"]["sm_clock_mhz_after_sweep"] = current_sm_clock_mhz();
    std::filesystem::create_directories(dir);
    std::ofstream f(dir + "/" + op_ + ".json");
    f << j_.dump(1) << "\n";
    if (!f) throw std::runtime_error("cannot write " + dir + "/" + op_ + ".json");
  }

 private:
  std::string op_;
  nlohmann::json j_;
};

}  // namespace servesim::kernels
