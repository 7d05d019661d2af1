// servesim scenarios: a deployment (model × GPU × cluster × PD pools × policies) as plain data,
// with every default in this file. The scenario loader fills these structs; the engine never parses
// JSON. Whether a deployment can exist (memory, divisibility) is costmodels/feasibility.hpp.
#pragma once
#include "scenarios/gpu_spec.hpp"
#include "scenarios/model_spec.hpp"
#include "scenarios/cluster_spec.hpp"

#include <string>
#include <vector>

namespace servesim {

/// How EP dispatch/combine move tokens (DeepEP's two kernel families, published-measurements §3.4):
///  hierarchical: one RDMA copy per destination node, then NVLink forwarding to the GPUs there
///                (DeepEP "normal" kernels, used for prefill);
///  direct:       one message per (token, routed expert) straight to the expert's GPU
///                (DeepEP "low-latency" kernels, used for decode with CUDA graphs).
enum class EpDispatch { hierarchical, direct };

/// KV tiers below the GPUs (sim/kvcache/kv_store.hpp): L2 host DRAM and L3 storage per node.
struct TierSpec {
  bool enabled = false;
  double host_bytes_per_node = 0;  ///< L2 capacity per node (bytes); the parser's default: half the node's host DRAM (hardware file)
  bool storage_enabled = true;     ///< L3 present when the tiers are (kv_tiers.storage.enabled)
  // L3 per node: 30 TB at 25 GB/s and 100 µs (4 NVMe Gen5 drives; an assumption, stated in README.md)
  double storage_bytes_per_node = 30e12;  ///< L3 capacity per node (bytes)
  double storage_bytes_per_s = 25e9;      ///< L3 read/write bandwidth per node (bytes/s)
  double storage_latency_s = 1e-4;        ///< L3 access latency (s)
};

/// One pool of identical instances (prefill or decode). An instance is an EP group of `ep` GPUs
/// whose attention runs with tensor parallelism `attn_tp` over DP = ep / attn_tp groups ("ranks").
struct PoolSpec {
  int instances = 1;
  int ep = 8;
  int attn_tp = 1;
  long long max_batch_tokens = 16384;  ///< new tokens per DP rank per step (prefill chunk budget)
  long long chunk_tokens = 8192;       ///< prefill: most tokens of one request per step (chunked prefill)
  int max_running = 128;               ///< decode: most sequences per DP rank per step (continuous batching)
  int redundant_experts = 0;           ///< EPLB extra expert copies per MoE layer
  /// Experts placed by an expert-parallel load balancer (DeepSeek EPLB: replicate the most loaded
  /// experts into the redundant slots, then pack slots heaviest first onto the least-loaded GPU)
  /// instead of in id order. Scenario default: true when redundant_experts > 0, else false; SGLang's
  /// --enable-eplb without --ep-num-redundant-experts is eplb true with 0 redundant experts (the
  /// 384 experts of Kimi K2 rebalanced 12 per GPU, no copies). Redundant copies need EPLB.
  bool eplb = false;
  /// Busiest GPU's routed load / mean: 0 (default) = sampled per step from the model's expert
  /// popularity and the EPLB placement (costmodels/expert_load.hpp); ≥ 1 = fixed at this value.
  double expert_imbalance = 0;
  bool two_batch_overlap = false;      ///< overlap all-to-all with compute (SGLang TBO)
  /// With two-batch overlap, the fraction of the all-to-all time that stays on the critical path
  /// (host syncs at dispatch, waits for the slowest peer). Defaults (default_*_pool below) are
  /// calibrated to SGLang's published DeepSeek-V3 figures: see there.
  double overlap_exposed_fraction = 0;
  /// Per-step host time of the scheduler (batch formation, sampling), seconds. Default 0.5 ms: an
  /// assumption, not a measurement (no public per-step figure for a scheduler that overlaps its CPU
  /// work with the GPU, as SGLang's overlap scheduler and DeepSeek's do; without overlap scheduling
  /// SGLang's MTP case implies 6.1 ms more per step: scenarios/dsv3-sglang-mtp-16xh200.json).
  double step_overhead_s = 5e-4;
  /// The step replays a captured CUDA graph (one launch per step) instead of launching each kernel
  /// (a host gap per kernel). Default: decode yes, prefill no (SGLang: DeepEP normal dispatch has
  /// dynamic shapes, so prefill runs eagerly; serving-overheads.md §2).
  bool cuda_graph = false;
  /// Decode only: multi-token prediction (speculative decoding with the model's MTP head). Each step
  /// verifies 1 + mtp_draft_tokens tokens per sequence; draft i is accepted with probability
  /// mtp_acceptance if draft i − 1 was (DeepSeek-V3 report §5.4.3: 85-90% for the 2nd token), so a
  /// step yields 1 + a + … + a^k tokens on average. 0 = off (default).
  int mtp_draft_tokens = 0;
  double mtp_acceptance = 0;
  /// Expected tokens a sequence gains per decode step: 1 + a + a² + … + a^k.
  double tokens_per_step() const {
    double t = 1, p = 1;
    for (int i = 0; i < mtp_draft_tokens; ++i) t += p *= mtp_acceptance;
    return t;
  }
  EpDispatch ep_dispatch = EpDispatch::hierarchical;  ///< prefill default; decode default: direct
  /// Put each step's inter-node all-to-all bytes on the fabric as background flows (one per
  /// attention-TP group and direction, rate-capped to last the step's all-to-all time), so that KV
  /// transfers, offloads and load-backs compete with EP traffic. The step time itself stays the
  /// closed form. Off by default: it adds 2 flows per TP group per step.
  bool all_to_all_on_fabric = false;
  int dp() const { return ep / attn_tp; }  ///< attention data-parallel groups (ranks) per instance
};

/// The defaults of each pool when the scenario does not say (the only place they are written):
/// prefill 16,384 tokens per step in chunks of at most 8,192 per request, 64 sequences (workspace
/// sizing), hierarchical EP dispatch (DeepEP normal); decode 128 sequences per DP rank, 256 tokens
/// per step, one token per sequence, direct dispatch (DeepEP low-latency).
/// overlap_exposed_fraction: prefill 0.29 makes two-batch overlap gain 1.31x over no overlap for
/// DeepSeek-V3 EP32 at 8,192 tokens per GPU (2 x 4,096) on H100 (SGLang measured +27-35%, LMSYS
/// large-scale-EP blog "Ablation Study: TBO"; with 0 the engine's overlap gains 1.58x, with 0.16
/// 1.42x; 0.27 gave 1.31x before the models' expert-popularity sequence_sigma made the prefill
/// expert load, and so the all-to-all to hide, grow with fewer prompts per step; still 1.31x after
/// the fourteenth session's NIC recalibration); decode 0.40 makes it gain 1.257x at 256 sequences
/// per GPU, 2,000-token context, EP72 on H100 (the same ablation: 22,310 output tok/s per node with
/// TBO, +25.5%; with 0.16 the engine gained 1.57x; each micro-batch's attention priced on its own
/// half of the sequences, StepCostModel::attention_part; 0.34 gave 1.255x before DeepEP's
/// benchmarks were read as they count (costmodels/deepep_bench.hpp), which moved the NIC fit from
/// efficiency 1.0 / 43.75 µs per call to 0.878 / 22.75 µs and the gain at 0.34 to 1.314x).
/// The decode DeepEP low-latency kernels wait for their data on the compute stream (the blog:
/// dispatch ~0.17 ms per layer busy-waiting against a 0.06 ms unit test, combine 2x DeepSeek's), so
/// about half of their time stays exposed; serving-overheads.md §3.
inline PoolSpec default_prefill_pool() {
  PoolSpec p;
  p.overlap_exposed_fraction = 0.29;
  p.max_batch_tokens = 16384, p.chunk_tokens = 8192, p.max_running = 64, p.ep_dispatch = EpDispatch::hierarchical;
  return p;
}
inline PoolSpec default_decode_pool() {
  PoolSpec p;
  p.overlap_exposed_fraction = 0.40;
  p.max_batch_tokens = 256, p.chunk_tokens = 1, p.max_running = 128, p.ep_dispatch = EpDispatch::direct, p.cuda_graph = true;
  return p;
}

struct SloSpec {
  double ttft_s = 2.0;  ///< time to first token bound, seconds
  double tpot_s = 0.1;  ///< time per output token bound (mean over the request's decode), seconds
};

struct PrefixCacheSpec {
  bool enabled = true;
  int block_tokens = 512;  ///< tokens per cached KV block (Mooncake hash ids: 512)
};

struct DeploymentSpec {
  std::string name;
  ModelSpec model;
  GpuSpec gpu;
  ClusterSpec cluster;  ///< nodes: derived from the pools when 0 in the scenario
  PoolSpec prefill, decode;
  std::string router = "cache_aware";         ///< prefill placement policy (sim/policies/router.hpp)
  std::string decode_router = "least_loaded";  ///< decode placement policy
  std::string batch_scheduler = "fcfs";        ///< prefill batch formation (sim/policies/batch_scheduler.hpp)
  std::string decode_batcher = "fcfs";         ///< decode batch formation (sim/policies/decode_batcher.hpp)
  std::string eviction = "lru";                ///< prefix-cache and KV-tier eviction (sim/policies/eviction.hpp)
  double memory_utilization = 0.90;  ///< fraction of HBM the engine may use (vLLM gpu_memory_utilization default 0.9)
  double reserved_bytes_per_gpu = 2.0 * (1ULL << 30);  ///< CUDA context, cuBLAS/NCCL/EP buffers (assumption)
  SloSpec slo;
  PrefixCacheSpec prefix_cache;
  TierSpec kv_tiers;  ///< session KV offload to host DRAM / storage (disabled by default)
};

/// Where each instance's GPUs are: instance i of a pool owns GPUs [first_gpu[i], first_gpu[i] + ep);
/// prefill instances from GPU 0 on, the decode pool from the next node boundary on; within an
/// instance, DP rank r's attention-TP group is GPUs first_gpu + r·attn_tp … + attn_tp − 1.
struct GpuLayout {
  std::vector<int> prefill_first_gpu, decode_first_gpu;
  int gpus = 0;  ///< GPUs the pools take, each pool rounded up to whole nodes
};
GpuLayout gpu_layout(const DeploymentSpec& d);

/// GPUs the pools need (gpu_layout(d).gpus) and nodes.
int required_gpus(const DeploymentSpec& d);
int required_nodes(const DeploymentSpec& d);

}  // namespace servesim
