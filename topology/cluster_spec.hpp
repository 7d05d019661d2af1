// servesim topology: the cluster as plain data. Link figures come from the GPU's hardware file.
#pragma once
#include "costmodels/comm.hpp"
#include "costmodels/gpu_spec.hpp"

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

/// Communication-model parameters (costmodels/comm.hpp) for this cluster and GPU.
FabricParams fabric_params(const ClusterSpec& c, const GpuSpec& g);

}  // namespace servesim
