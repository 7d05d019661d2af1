// servesim validate, kind "deepep_alltoall": DeepEP's published dispatch/combine figures against
// the engine's EP all-to-all: the busiest GPU's load as a step prices it
// (StepCostModel::moe_alltoall_load) and the closed form's time (costmodels/comm.hpp
// alltoall_time) with the fabric of the hardware file, i.e. the communication parameters the
// engine uses (calibrated by `servesim costmodel fit`, whose report prints the same rows with a
// fresh calibration).
//
// Case fields: "hardware" (a hardware file name), "layer": {"hidden", "experts", "top_k"}
// (DeepEP's benchmark layer). Row fields: "ep", "mode" (normal: hierarchical NVLink + RDMA;
// low_latency: direct, pure RDMA), "op" (dispatch: FP8 messages; combine: BF16), "tokens" per
// rank; "unit" says what is compared: "µs" (time per call), "RDMA GB/s" / "NVLink GB/s" (the
// bytes DeepEP's benchmark counts, costmodels/deepep_bench.hpp deepep_counted_bytes, over the
// engine's time). Routing as the benchmark draws it (deepep_bench_model).
#include "sim/cli/validate_case.hpp"

#include "costmodels/comm.hpp"
#include "costmodels/deepep_bench.hpp"
#include "scenarios/scenario.hpp"

namespace servesim::cli::validation {

namespace {

DeepEpLayer bench_layer(const Case& c) {
  const std::string where = c.file + ": layer";
  if (!c.j.contains("layer")) throw CaseError(c.file + ": missing \"layer\"");
  const nlohmann::json& l = c.j.at("layer");
  DeepEpLayer b;
  b.hidden = static_cast<int>(integer(l, "hidden", where));
  b.experts = static_cast<int>(integer(l, "experts", where));
  b.top_k = static_cast<int>(integer(l, "top_k", where));
  if (b.hidden < 1 || b.experts < 1 || b.top_k < 1 || b.top_k > b.experts) throw CaseError(where + ": hidden, experts ≥ 1, 1 ≤ top_k ≤ experts");
  return b;
}

}  // namespace

std::vector<Row> eval_deepep(const Case& c, bool quick) {
  GpuSpec gpu;
  try {
    gpu = load_hardware(resolve_data_file(str(c.j, "hardware", c.file), "hardware", c.dir));
  } catch (const ScenarioError& e) {
    throw CaseError(c.file + ": hardware: " + e.what());
  }
  const DeepEpLayer layer = bench_layer(c);
  const FabricParams f = fabric_of(gpu);
  std::vector<Row> out;
  for (auto& r : selected_rows(c, quick)) {
    const std::string mode = str(*r.j, "mode", r.where), op = str(*r.j, "op", r.where);
    const long long ep = integer(*r.j, "ep", r.where);
    const double tokens = num(*r.j, "tokens", r.where);
    if (mode != "normal" && mode != "low_latency") throw CaseError(r.where + ".mode: normal or low_latency, got \"" + mode + "\"");
    if (op != "dispatch" && op != "combine") throw CaseError(r.where + ".op: dispatch or combine, got \"" + op + "\"");
    if (ep < 1 || ep > 4096 || layer.experts % ep != 0 || tokens < 1)
      throw CaseError(r.where + ": ep must divide the experts (1-4096), tokens ≥ 1");
    // a bandwidth is DeepEP's normal benchmark's: NVLink within a node, RDMA across nodes
    if (r.row.unit == "NVLink GB/s" && (mode != "normal" || ep < 2 || ep > f.gpus_per_node))
      throw CaseError(r.where + ".unit: \"NVLink GB/s\" is the intranode normal benchmark's (mode normal, 2 ≤ ep ≤ " + std::to_string(f.gpus_per_node) + ")");
    if (r.row.unit == "RDMA GB/s" && (mode != "normal" || ep <= f.gpus_per_node))
      throw CaseError(r.where + ".unit: \"RDMA GB/s\" is the internode normal benchmark's (mode normal, ep > " + std::to_string(f.gpus_per_node) + ")");
    const EpDispatch d = mode == "normal" ? EpDispatch::hierarchical : EpDispatch::direct;
    const ModelSpec m = deepep_bench_model(layer, static_cast<int>(ep), d, f.gpus_per_node);
    const DType msg = op == "dispatch" ? DType::fp8 : DType::bf16;
    const double t = alltoall_time(f, deepep_bench_load(m, f, static_cast<int>(ep), d, tokens, msg));
    // bandwidths as DeepEP's benchmark counts them (its own node's / GPU's share included)
    if (r.row.unit == "µs") r.row.simulated = t * 1e6;
    else if (r.row.unit == "RDMA GB/s" || r.row.unit == "NVLink GB/s") r.row.simulated = deepep_counted_bytes(m, static_cast<int>(ep), tokens, msg, f.gpus_per_node) / t / 1e9;
    else throw CaseError(r.where + ".unit: µs, RDMA GB/s or NVLink GB/s, got \"" + r.row.unit + "\"");
    out.push_back(r.row);
  }
  return out;
}

}  // namespace servesim::cli::validation
