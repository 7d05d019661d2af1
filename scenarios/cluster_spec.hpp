// servesim scenarios: the cluster and its fabric as plain data. Link figures come from the GPU's
// hardware file (scenarios/hardware/*.json, each figure with its source there).
#pragma once
#include "scenarios/gpu_spec.hpp"

#include <string>

namespace servesim {

/// rail_optimized: every GPU's NIC reaches any other node at full NIC rate (non-blocking fabric;
///   cross-rail forwarding is not modelled separately).
/// fat_tree: one leaf uplink per node of gpus_per_node × NIC / oversubscription (per direction).
enum class FabricKind { rail_optimized, fat_tree };

struct ClusterSpec {
  int nodes = 1;
  FabricKind fabric = FabricKind::rail_optimized;
  double oversubscription = 1.0;  ///< fat_tree only; 1 = non-blocking
};

/// Link rates (bytes/s per direction), latencies (s), efficiencies and per-call costs (s) of the
/// fabric, as the communication model (costmodels/comm.hpp) and the platform builder use them.
struct FabricParams {
  int gpus_per_node = 8;
  double nvlink_bytes_per_s = 450e9;  ///< H200: 900 GB/s bidirectional / 2 (hardware.md)
  double nvlink_latency_s = 1e-6;
  double nic_bytes_per_s = 50e9;      ///< 400 Gb/s (hardware.md)
  double nic_latency_s = 3e-6;
  double oversubscription = 1.0;      ///< node uplink = gpus_per_node × NIC / oversubscription
  double nvlink_efficiency = 1.0;
  double nic_efficiency = 1.0;
  /// Fixed cost of one all-to-all call (kernel launch, synchronisation, handshakes) on top of the
  /// link latencies, by the phase it applies to: NVLink (intra-node) and NIC (inter-node). Seconds.
  /// 0 = the fluid model alone; calibrated values live in the hardware files (issue #5).
  double nvlink_call_s = 0;
  double nic_call_s = 0;
  /// Small-message all-reduce floor (custom one-shot/two-shot kernels): call + bytes / rate.
  /// 0 = the ring formula alone (costmodels/comm.hpp allreduce_time).
  double allreduce_call_s = 0;
  double allreduce_bytes_per_s = 0;
};

/// The fabric of a node of GPU `g` on a non-blocking network (oversubscription 1): bandwidths,
/// latencies, efficiencies and per-call costs as the hardware file gives them. No errors.
FabricParams fabric_of(const GpuSpec& g);

/// The same for a cluster: fabric_of(g) with the cluster's oversubscription (fat_tree only). No errors.
FabricParams fabric_params(const ClusterSpec& c, const GpuSpec& g);

}  // namespace servesim
