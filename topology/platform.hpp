// servesim topology: builds the SimGrid platform programmatically (no XML).
//
//   root "fabric" (star zone) ── per node: uplink (split duplex, gpus_per_node × NIC / oversub)
//     node zone "nN" (full zone): GPU hosts nNgI, NVSwitch endpoint nNsw, host memory nNcpu,
//       gateway router nNgw.
//       nNgI → nNgJ : {nvl_I UP, nvl_J DOWN}     (NVLink through the NVSwitch)
//       nNgI ↔ nNsw : {nvl_I UP} / {nvl_I DOWN}  (aggregate all-to-all endpoint)
//       nNgI ↔ nNgw : {nic_I UP} / {nic_I DOWN}  (one NIC per GPU)
//       nNgI ↔ nNcpu: {pcie_I UP} / {pcie_I DOWN} (PCIe to host memory)
//     "spine": a host past every node uplink (aggregate inter-node endpoint); "frontend": the
//     host the controller actors run on (never on a data path).
// Link figures: GpuSpec (bytes/s per direction, seconds). Requires a live simgrid::s4u::Engine.
#pragma once
#include "topology/cluster_spec.hpp"

#include <simgrid/s4u.hpp>

#include <vector>

namespace servesim {

struct Platform {
  int gpus_per_node = 8;
  std::vector<simgrid::s4u::Host*> gpus;      ///< node-major: index = node × gpus_per_node + local
  std::vector<simgrid::s4u::Host*> switches;  ///< per node
  std::vector<simgrid::s4u::Host*> cpus;      ///< per node (host DRAM endpoint)
  simgrid::s4u::Host* spine = nullptr;
  simgrid::s4u::Host* frontend = nullptr;
  simgrid::s4u::Host* gpu(int node, int local) const { return gpus[static_cast<size_t>(node * gpus_per_node + local)]; }
};

/// Sets SimGrid's network model to CM02 without cross-traffic (exact bytes/bandwidth fluid model,
/// simgrid-notes.md §2) unless the user chose otherwise with --cfg. Call before build_platform.
void configure_network_model();

/// Builds the platform for `cluster` nodes of `gpu`. Throws std::invalid_argument on nodes < 1.
Platform build_platform(const ClusterSpec& cluster, const GpuSpec& gpu);

}  // namespace servesim
