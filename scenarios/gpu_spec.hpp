// servesim scenarios: a GPU (and its node) as plain data, loaded from scenarios/hardware/*.json.
// Every figure's source (datasheet or measurement) is recorded in that file's "sources".
#pragma once
#include <array>
#include <map>
#include <string>

namespace servesim {

/// Op classes of the roofline model; each has its own efficiency pair and fixed latency.
enum class OpClass {
  gemm,
  grouped_gemm,
  attention_decode,
  attention_prefill,
  sparse_attention,
  indexer,
  kda_prefill,
  kda_decode,
  elementwise,
  count_
};
constexpr int kOpClassCount = static_cast<int>(OpClass::count_);
std::string_view to_string(OpClass c);

/// Fraction of the ceilings an op class reaches, and a fixed per-kernel latency (seconds).
struct OpEfficiency {
  double compute = 1.0;
  double memory = 1.0;
  double fixed_s = 0.0;
};

struct GpuSpec {
  std::string name, display_name;
  int gpus_per_node = 8;
  double hbm_bytes = 0;                  ///< bytes
  double hbm_bandwidth_bytes_per_s = 0;  ///< datasheet
  double hbm_bandwidth_measured_bytes_per_s = 0;  ///< 0 = not measured
  double bf16_flop_per_s = 0, bf16_measured_flop_per_s = 0, fp8_flop_per_s = 0, fp4_flop_per_s = 0;
  double nvlink_bytes_per_s_bidirectional = 0;  ///< per GPU, both directions together
  double nvlink_latency_s = 0;
  double nic_bits_per_s = 0;  ///< per GPU, per direction
  double nic_latency_s = 0;
  double nvlink_efficiency = 1.0;  ///< achievable fraction of NVLink bandwidth in all-to-alls
  double nic_efficiency = 1.0;     ///< achievable fraction of NIC bandwidth in all-to-alls
  /// Achievable fraction of NIC line rate for KV cache copies between nodes (prefill -> decode
  /// transfers, load-backs from another node's host memory or storage): such a flow carries its bytes
  /// / this on the links. Hardware files: 0.475, the Mooncake transfer engine moving 40 GB at 190 GB/s
  /// over 8 x 400 Gb/s (FAST'25; ../shared/reference/published-measurements.md §3.8). 1 = line rate.
  double kv_transfer_efficiency = 1.0;
  double nvlink_call_overhead_s = 0;  ///< fixed cost of one intra-node all-to-all call (calibrated)
  double nic_call_overhead_s = 0;     ///< fixed cost of one inter-node all-to-all call (calibrated)
  // Small intra-node all-reduce (one-shot/two-shot custom kernels): t = call + bytes / rate, the
  // floor under the ring formula (costmodels/comm.hpp allreduce_time). 0 = ring only.
  double allreduce_call_s = 0;
  double allreduce_bytes_per_s = 0;
  // Host and launch figures (issue 11; serving-overheads.md §2):
  double kernel_launch_s = 0;  ///< eager launch gap per kernel (seconds)
  double graph_launch_s = 0;   ///< launch of one captured CUDA graph (seconds)
  int sm_count = 0;            ///< streaming multiprocessors
  int ep_normal_comm_sms = 0;  ///< SMs DeepEP normal dispatch/combine kernels take while running
  /// Part of each kernel's time that a faster GPU does not shrink (launch, ramp, tail): scaling a
  /// measured latency to this GPU scales only the rest (costmodels/fitted.cpp). Seconds.
  double kernel_fixed_s = 0;
  double pcie_bytes_per_s_per_direction = 0;
  double host_dram_bytes_per_node = 0;
  /// Unit cost (issue 14): rental price of one GPU for one hour in US dollars (0 = unknown: no $
  /// figures), and the board power in watts (0 = unknown: no energy figures); the hardware file's
  /// "sources" cite both; a deployment may override them ("gpu_hour_usd", "board_power_w").
  double gpu_hour_usd = 0, board_power_w = 0;
  std::array<OpEfficiency, kOpClassCount> efficiency{};
  std::map<std::string, std::string> sources;
  /// Kernel-fitted cost-model parameters (costmodels/fitted.hpp): the hardware file's
  /// "fitted_models" as written (relative to that file) and its resolved path; both empty if the
  /// file names none (then only the roofline cost model is available for this GPU).
  std::string fitted_models, fitted_models_path;

  /// Ceilings the roofline uses: the measured figure where one exists, else the datasheet.
  double hbm_ceiling_bytes_per_s() const {
    return hbm_bandwidth_measured_bytes_per_s > 0 ? hbm_bandwidth_measured_bytes_per_s : hbm_bandwidth_bytes_per_s;
  }
  double bf16_ceiling_flop_per_s() const { return bf16_measured_flop_per_s > 0 ? bf16_measured_flop_per_s : bf16_flop_per_s; }
  /// FP8 ceiling scaled by the same measured/datasheet ratio as BF16 (no FP8 measurement yet).
  double fp8_ceiling_flop_per_s() const { return fp8_flop_per_s * bf16_ceiling_flop_per_s() / bf16_flop_per_s; }
  double nvlink_bytes_per_s_per_direction() const { return nvlink_bytes_per_s_bidirectional / 2.0; }
  double nic_bytes_per_s() const { return nic_bits_per_s / 8.0; }
  const OpEfficiency& eff(OpClass c) const { return efficiency[static_cast<int>(c)]; }
};

}  // namespace servesim
