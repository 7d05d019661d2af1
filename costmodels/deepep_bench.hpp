// servesim costmodels: DeepEP's own benchmarks (deepseek-ai/DeepEP tests/test_intranode.py,
// tests/test_internode.py, tests/test_low_latency.py; published figures in
// shared/reference/published-measurements.md §3.4) as the engine prices them. One definition for
// the NIC calibration (costmodels/calibration/fit.cpp) and `servesim validate`
// (sim/cli/validate_deepep.cpp), so that both read the benchmark the same way.
#pragma once
#include "costmodels/comm.hpp"
#include "scenarios/deployment.hpp"
#include "scenarios/model_spec.hpp"

namespace servesim {

/// The benchmark's layer widths: DeepSeek-V3's (hidden 7168 values, 256 experts, top-8), FP8
/// dispatch and BF16 combine messages.
struct DeepEpLayer {
  int hidden = 7168, experts = 256, top_k = 8;
};

/// The benchmark's MoE layer for one row: `ep` GPUs, `gpus_per_node` per node, kernels `mode`
/// (hierarchical = DeepEP normal, direct = low-latency). The internode normal benchmark routes
/// group-limited with the nodes as groups and min(nodes, 4) groups per token (test_internode.py:
/// the scores viewed per node, group score their max, `--num-topk-groups` default
/// min(num_nodes, 4)); the intranode and low-latency benchmarks take the top-k of i.i.d. scores
/// (uniform routing). Throws std::invalid_argument unless 1 ≤ top_k ≤ experts, ep ≥ 1 divides the
/// experts and gpus_per_node ≥ 1.
ModelSpec deepep_bench_model(const DeepEpLayer& l, int ep, EpDispatch mode, int gpus_per_node);

/// The engine's all-to-all load of one benchmark call, `tokens` per rank, message type `msg`
/// (StepCostModel::moe_alltoall_load of `m`'s only MoE kind with expert load 1). Bytes. `m` must
/// come from deepep_bench_model with the same `ep` and `mode` (the routing is chosen there); throws
/// std::out_of_range if `m` has no FFN kind.
AllToAllLoad deepep_bench_load(const ModelSpec& m, const FabricParams& f, int ep, EpDispatch mode, double tokens, DType msg);

/// The bytes per rank that DeepEP's normal-kernel benchmarks divide by their time to print a
/// bandwidth (not the bytes that cross a link):
///  - internode, "RDMA": tokens × the distinct nodes holding a token's experts, its own node
///    included (`num_rdma_token_sent`) × hidden × bytes per value;
///  - intranode (ep ≤ gpus_per_node), "NVL": the tokens a rank receives, its own included
///    (`recv_x.numel()`): tokens × the distinct GPUs a token reaches × hidden × bytes per value;
/// FP8 (1 + 4/128) bytes per value (`fp8_factor` × 2), BF16 2 (ep_message_bytes_per_value). The
/// own node's (GPU's) share never leaves it: this is how DeepEP V1 prints 58 GB/s "RDMA" on a
/// 50 GB/s NIC. Expected counts from expected_parts_reached with `m`'s routing; `m` must come
/// from deepep_bench_model with the same `ep` (and the normal mode: the low-latency benchmark
/// counts its bytes otherwise, and its rows are compared in µs); throws std::out_of_range if `m`
/// has no FFN kind. Bytes.
double deepep_counted_bytes(const ModelSpec& m, int ep, double tokens, DType msg, int gpus_per_node);

}  // namespace servesim
