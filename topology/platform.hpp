// servesim topology: builds the SimGrid platform programmatically (no XML).
//
//   root "fabric" (star zone) ── per node: uplink (split duplex, gpus_per_node × NIC / oversub)
//     node zone "nN" (full zone): GPU hosts nNgI, NVSwitch endpoint nNsw, host memory nNcpu,
//       gateway router nNgw.
//       nNgI → nNgJ : {nvl_I UP, nvl_J DOWN}     (NVLink through the NVSwitch)
//       nNgI ↔ nNsw : {nvl_I UP} / {nvl_I DOWN}  (aggregate all-to-all endpoint)
//       nNgI ↔ nNgw : {nic_I UP} / {nic_I DOWN}  (one NIC per GPU)
//       nNgI ↔ nNcpu: {pcie_I UP} / {pcie_I DOWN} (PCIe to host memory)
//       nNcpu ↔ nNgw: {hnic UP} / {hnic DOWN}   (host memory to the fabric: the node's NICs, RDMA)
//       nNssd ↔ nNcpu: {ssd}; nNssd ↔ nNgI: {ssd, pcie_I}; nNssd ↔ nNgw: {ssd, hnic}  (storage)
//     nNtF (one per GPU group of size > 1 starting at GPU F): links of size × the members' NVLink,
//       NIC and PCIe; routes to the gateway, host memory, storage, NVSwitch, the node's GPUs and
//       other groups as a GPU's;
//     "spine": a host past every node uplink (aggregate inter-node endpoint); "frontend": the
//     host the controller actors run on (never on a data path).
// Link figures: GpuSpec (bytes/s per direction, seconds). Requires a live simgrid::s4u::Engine.
#pragma once
#include "scenarios/cluster_spec.hpp"

#include <simgrid/s4u.hpp>

#include <map>
#include <vector>

namespace servesim {

/// GPUs that always move data together (an attention-TP group): the platform gives the group one
/// endpoint host whose NVLink, NIC and PCIe links aggregate its members' (size × each), so that a
/// transfer of the whole group is one SimGrid flow instead of `size` symmetric ones.
struct GpuGroup {
  int first_gpu = 0, size = 1;
};

struct Platform {
  int gpus_per_node = 8;
  std::map<int, simgrid::s4u::Host*> groups;  ///< first GPU → group endpoint (size > 1 only)
  /// The host that stands for the group starting at `first_gpu` (the GPU itself for size 1).
  simgrid::s4u::Host* endpoint(int first_gpu) const {
    auto it = groups.find(first_gpu);
    return it != groups.end() ? it->second : gpus[static_cast<size_t>(first_gpu)];
  }
  std::vector<simgrid::s4u::Host*> gpus;      ///< node-major: index = node × gpus_per_node + local
  std::vector<simgrid::s4u::Host*> switches;  ///< per node
  std::vector<simgrid::s4u::Host*> cpus;      ///< per node (host DRAM endpoint)
  std::vector<simgrid::s4u::Host*> storage;   ///< per node (SSD / storage endpoint)
  simgrid::s4u::Host* spine = nullptr;
  simgrid::s4u::Host* frontend = nullptr;
  simgrid::s4u::Host* gpu(int node, int local) const { return gpus[static_cast<size_t>(node * gpus_per_node + local)]; }
};

/// Sets SimGrid's network model to CM02 without cross-traffic and without the TCP window bound
/// (TCP-gamma 1e18 bytes: RDMA, NVLink, PCIe and storage copies are not window-limited) — the exact bytes/bandwidth fluid model,
/// simgrid-notes.md §2) unless the user chose otherwise with --cfg. Call before build_platform.
void configure_network_model();

/// Builds the platform for `cluster` nodes of `gpu`; each node's storage link has
/// `storage_bytes_per_s` (shared by reads and writes) and `storage_latency_s`.
/// Throws std::invalid_argument on nodes < 1.
/// `groups` (each inside one node) get aggregate endpoints (see GpuGroup).
Platform build_platform(const ClusterSpec& cluster, const GpuSpec& gpu, double storage_bytes_per_s = 25e9, double storage_latency_s = 1e-4,
                        const std::vector<GpuGroup>& groups = {});

}  // namespace servesim
