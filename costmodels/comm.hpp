// servesim costmodels: analytic communication times on an HGX-style fabric (8 GPUs per node on a
// non-blocking NVSwitch, one NIC per GPU into a rail-optimized or oversubscribed fabric). These are
// the closed forms that the engine charges inside batch-step times; tests/test_alltoall.cpp checks
// them against pairwise SimGrid flows on 8-32 GPUs.
#pragma once
#include <vector>

#include "scenarios/cluster_spec.hpp"
#include "scenarios/dtype.hpp"

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
/// experts are split evenly over `group` GPUs (m = experts / group each, real-valued where the
/// split is not whole, e.g. redundant experts taking slots) and the top_k are a uniform random
/// subset: group · (1 − C(experts − m, top_k) / C(experts, top_k)), the binomial ratio as the
/// product Π_{i<top_k} (experts − m − i) / (experts − i). group ≤ 1: 1. No errors thrown.
double expected_destination_gpus(int experts, int top_k, int group);

/// Expected number of distinct parts (GPUs or nodes) that hold at least one of a token's top_k
/// experts, the sender's own part included, when `experts` experts are split evenly and in order
/// over `parts` parts and routing is group-limited: the experts form `groups` equal groups of
/// consecutive experts and a token takes its top_k inside `topk_groups` of them (DeepSeek-V3:
/// 8 / 4; scenarios/model_spec.hpp FfnSpec::expert_groups).
///  - no limit (groups ≤ 1 or topk_groups ≥ groups), topk_groups > top_k, or groups not dividing
///    experts: uniform routing, expected_destination_gpus(experts, top_k, parts);
///  - every part holds whole groups (groups % parts == 0): each chosen group holds at least one of
///    the token's experts (a group is chosen for its best experts: in a Monte Carlo with i.i.d.
///    expert scores, 3.96 of DeepSeek-V3's 4 chosen groups (top-2-sum group score) and 3.98 of the
///    4 chosen of 8 in DeepEP's internode benchmark (max group score) are reached), and the groups
///    are chosen uniformly: expected_destination_gpus(groups, topk_groups, parts);
///  - every group spans whole parts (parts % groups == 0): each chosen group holds 1 + X of the
///    token's experts, X ~ Binomial(top_k − topk_groups, 1 / topk_groups), uniform inside it:
///    topk_groups · Σ_j P(X = j) · s · (1 − C(n − n/s, 1 + j) / C(n, 1 + j)), n = experts / groups,
///    s = parts / groups (DeepSeek-V3 at EP32: 6.84 GPUs, as a Monte Carlo gives; the uniform
///    spread over the chosen groups' experts would give 6.60);
///  - otherwise (groups straddle parts): uniform routing, an approximation.
/// Assumes experts placed in order (EPLB that scatters a group over a node's GPUs moves the GPU
/// count back toward uniform) and a group score that makes every chosen group count (with top_k
/// close to topk_groups, e.g. 6 / 3, "every chosen group reached" overestimates). parts ≤ 1: 1.
/// Dimensionless (an expected count); no errors thrown.
double expected_parts_reached(int experts, int top_k, int groups, int topk_groups, int parts);

/// Bytes one hidden value of an EP dispatch or combine message occupies: BF16 2; FP8 1 + 4/128
/// (DeepEP quantises a token in groups of 128 values with one FP32 scale each; its benchmarks
/// count FP8 messages as (1 + 4/128) / 2 of the BF16 bytes, DeepEP tests/test_internode.py
/// `fp8_factor`); other types their element size. Bytes. (FP32 scales: UE8M0-packed scales, as
/// DeepGEMM uses on Blackwell, would be 1 + 1/128.)
double ep_message_bytes_per_value(DType t);

}  // namespace servesim
