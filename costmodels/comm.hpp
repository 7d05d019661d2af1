// servesim costmodels: analytic communication times on an HGX-style fabric (8 GPUs per node on a
// non-blocking NVSwitch, one NIC per GPU into a rail-optimized or oversubscribed fabric). These are
// the closed forms that the engine charges inside batch-step times; tests/test_alltoall.cpp checks
// them against pairwise SimGrid flows on 8-32 GPUs.
#pragma once
#include <vector>

#include "scenarios/cluster_spec.hpp"

namespace servesim {

/// Link figures for the communication model. Bandwidths in bytes/s per GPU per direction;
/// latencies in seconds. `*_efficiency` = achievable fraction of link bandwidth (1.0 = the fluid
/// model; calibrated against measurements in issue 5).
/// Per-GPU traffic of one all-to-all: bytes the most loaded GPU sends (or receives) to GPUs of its
/// own node and to GPUs of other nodes.
struct AllToAllLoad {
  double intra_bytes = 0;       ///< busiest GPU's NVLink bytes (sent or received)
  double inter_bytes = 0;       ///< busiest GPU's NIC bytes (sent or received)
  double node_inter_bytes = 0;  ///< busiest node's uplink bytes (sent or received by its GPUs)
};

/// Time of an all-to-all whose busiest GPU moves `load`: the NVLink and NIC phases run
/// concurrently on independent links, so
///   t = max(intra / (η_nvl·BW_nvl) + 2·lat_nvl,
///           max(inter / (η_nic·BW_nic), node_inter / (η_nic·uplink)) + 2·lat_nic)
/// with uplink = gpus_per_node · BW_nic / oversubscription, and each phase plus its per-call cost
/// (nvlink_call_s, nic_call_s)
/// (a phase with no bytes costs nothing; a message crosses the sender's and the receiver's link,
/// each with its latency; node uplinks add none). Seconds.
double alltoall_time(const FabricParams& f, const AllToAllLoad& load);

/// Load of a uniform all-to-all among `group` GPUs (consecutive GPUs filling nodes of
/// f.gpus_per_node) in which every GPU sends `bytes_per_peer` to every other GPU.
AllToAllLoad uniform_alltoall_load(const FabricParams& f, int group, double bytes_per_peer);

/// Load of the busiest GPU for an arbitrary traffic matrix bytes[i][j] (GPU i → GPU j, GPUs
/// numbered consecutively, f.gpus_per_node per node): the largest NVLink volume any GPU sends or
/// receives, and the largest NIC volume any GPU sends or receives.
AllToAllLoad busiest_load(const FabricParams& f, const std::vector<std::vector<double>>& bytes);

/// All-reduce of `bytes` among `tp` GPUs of one node over NVLink: the ring
///   t = 2·(tp−1)/tp · bytes / (η_nvl·BW_nvl) + 2·(tp−1)·lat_nvl
/// plus the per-call cost c = f.allreduce_call_s, or the one-shot custom all-reduce
/// c + bytes / f.allreduce_bytes_per_s where that is faster (small messages): the minimum of the
/// two (fitted in the hardware file to SGLang's custom all-reduce, TP8 H100). 0 when tp == 1. Seconds.
double allreduce_time(const FabricParams& f, int tp, double bytes);

/// Expected number of distinct GPUs that one token's top_k experts land on, when `experts`
/// experts are split evenly over `group` GPUs and the top_k are a uniform random subset:
///   group · (1 − C(experts − experts/group, top_k) / C(experts, top_k)).
double expected_destination_gpus(int experts, int top_k, int group);

}  // namespace servesim
