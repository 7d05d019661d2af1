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
// rank; "unit" says what is compared: "µs" (time per call), "RDMA GB/s" (the busiest GPU's NIC
// bytes / time), "NVLink GB/s" (its NVLink bytes / time).
#include "sim/cli/validate_case.hpp"

#include "costmodels/comm.hpp"
#include "costmodels/step_cost.hpp"
#include "scenarios/scenario.hpp"

namespace servesim::cli::validation {

namespace {

ModelSpec bench_layer(const Case& c) {
  const std::string where = c.file + ": layer";
  if (!c.j.contains("layer")) throw CaseError(c.file + ": missing \"layer\"");
  const nlohmann::json& l = c.j.at("layer");
  ModelSpec m;
  m.name = "deepep-bench";
  m.hidden = static_cast<int>(integer(l, "hidden", where));
  FfnSpec f;
  f.op = FfnOp::moe;
  f.experts = static_cast<int>(integer(l, "experts", where));
  f.top_k = static_cast<int>(integer(l, "top_k", where));
  f.expert_intermediate = 2048;  // not used by the all-to-all
  f.dispatch_dtype = DType::fp8, f.combine_dtype = DType::bf16;
  if (m.hidden < 1 || f.experts < 1 || f.top_k < 1 || f.top_k > f.experts) throw CaseError(where + ": hidden, experts ≥ 1, 1 ≤ top_k ≤ experts");
  m.ffn_kinds.push_back(f);
  return m;
}

}  // namespace

std::vector<Row> eval_deepep(const Case& c, bool quick) {
  GpuSpec gpu;
  try {
    gpu = load_hardware(resolve_data_file(str(c.j, "hardware", c.file), "hardware", c.dir));
  } catch (const ScenarioError& e) {
    throw CaseError(c.file + ": hardware: " + e.what());
  }
  const ModelSpec m = bench_layer(c);
  const FabricParams f = fabric_of(gpu);
  std::vector<Row> out;
  for (auto& r : selected_rows(c, quick)) {
    const std::string mode = str(*r.j, "mode", r.where), op = str(*r.j, "op", r.where);
    const long long ep = integer(*r.j, "ep", r.where);
    const double tokens = num(*r.j, "tokens", r.where);
    if (mode != "normal" && mode != "low_latency") throw CaseError(r.where + ".mode: normal or low_latency, got \"" + mode + "\"");
    if (op != "dispatch" && op != "combine") throw CaseError(r.where + ".op: dispatch or combine, got \"" + op + "\"");
    if (ep < 1 || ep > 4096 || m.ffn_kinds[0].experts % ep != 0 || tokens < 1)
      throw CaseError(r.where + ": ep must divide the experts (1-4096), tokens ≥ 1");
    InstanceShape sh;
    sh.ep = static_cast<int>(ep), sh.attn_tp = 1;
    sh.dispatch = mode == "normal" ? EpDispatch::hierarchical : EpDispatch::direct;
    const StepCostModel sc(m, nullptr, f, sh, 0.0);
    const AllToAllLoad load = sc.moe_alltoall_load(0, tokens, tokens * ep, op == "dispatch" ? DType::fp8 : DType::bf16);
    const double t = alltoall_time(f, load);
    if (r.row.unit == "µs") r.row.simulated = t * 1e6;
    else if (r.row.unit == "RDMA GB/s") r.row.simulated = load.inter_bytes / t / 1e9;
    else if (r.row.unit == "NVLink GB/s") r.row.simulated = load.intra_bytes / t / 1e9;
    else throw CaseError(r.where + ".unit: µs, RDMA GB/s or NVLink GB/s, got \"" + r.row.unit + "\"");
    out.push_back(r.row);
  }
  return out;
}

}  // namespace servesim::cli::validation
