#include "costmodels/fit_set.hpp"
#include "scenarios/file_names.hpp"
#include "scenarios/fnv1a64.hpp"
#include "scenarios/json_unique.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace servesim {

using ojson = nlohmann::ordered_json;

namespace {

ErrorStats stats_from(const ojson& j) {
  ErrorStats s;
  s.n = j.at("n").get<int>(), s.median = j.at("median_ape").get<double>(), s.p95 = j.at("p95_ape").get<double>(), s.max = j.at("max_ape").get<double>();
  return s;
}

}  // namespace

std::string fnv1a64_hex(const std::string& bytes) {
  Fnv1a64 h;
  h.add(bytes.data(), bytes.size());
  return h.hex();
}

Ceilings datasheet_ceilings(const GpuSpec& g) {
  Ceilings c;
  c.bf16 = g.bf16_flop_per_s, c.fp8 = g.fp8_flop_per_s, c.fp4 = g.fp4_flop_per_s, c.hbm = g.hbm_bandwidth_bytes_per_s;
  c.hbm_achievable = g.hbm_bandwidth_measured_bytes_per_s;  // 0 where not measured
  return c;
}

FitSet read_fit_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (is_folder(path)) throw std::runtime_error(path + ": is a folder, not a file (\"fitted_models\" must name the parameter file)");
  if (!in) throw std::runtime_error(path + ": cannot open the fitted cost-model parameters (run `servesim costmodel fit`)");
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  ojson j;
  try {
    refuse_nul_bytes(text);  // json::parse would stop at one (json_unique.hpp)
    j = ojson::parse(text);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": malformed JSON (" + std::string(e.what()) + ")");
  }
  if (j.value("schema", std::string()) != "servesim.fitted-cost-model/1")
    throw std::runtime_error(path + ": schema is not servesim.fitted-cost-model/1");
  FitSet fs;
  fs.source = path;
  fs.file_hash = fnv1a64_hex(text);
  try {
    fs.measured_on = j.at("measured_on").get<std::string>();
    const auto& rc = j.at("reference_ceilings");
    fs.reference.bf16 = rc.at("bf16_flop_per_s").get<double>(), fs.reference.fp8 = rc.at("fp8_flop_per_s").get<double>();
    fs.reference.fp4 = rc.at("fp4_flop_per_s").get<double>(), fs.reference.hbm = rc.at("hbm_bytes_per_s").get<double>();
    // absent in files fitted before the cross-GPU rule used it: the datasheet figure then
    fs.reference.hbm_achievable = rc.value("hbm_achievable_bytes_per_s", 0.0);
    for (const auto& t : j.at("tables"))
      fs.tables.push_back({t.at("file").get<std::string>(), t.at("op").get<std::string>(), t.at("commit").get<std::string>(),
                           t.at("fnv1a64").get<std::string>(), t.at("rows").get<int>()});
    fs.measurement_commits = j.at("measurement_commits").get<std::vector<std::string>>();
    fs.launch_gap_s = j.at("launch_gap_s").get<double>();
    const auto& fam = j.at("families");
    for (int i = 0; i < kFamilyCount; ++i) {
      const FamilyInfo& info = family_info(static_cast<Family>(i));
      if (!fam.contains(info.name)) throw std::runtime_error("no family \"" + info.name + "\"");
      const auto& f = fam.at(info.name);
      FittedFamily& ff = fs.families[i];
      ff.floor_s = f.at("floor_s").get<double>();
      ff.grid.knots = f.at("knots_log2").get<std::vector<std::vector<double>>>();
      ff.grid.values = f.at("values_log2_s").get<std::vector<double>>();
      for (const auto& r : f.at("shape_ranges"))
        ff.ranges.push_back({r.at("key_log2").get<std::vector<double>>(), r.at("lo_log2").get<std::vector<double>>(), r.at("hi_log2").get<std::vector<double>>(),
                             r.at("floor_s").get<double>()});
      fs.rows[i] = f.at("rows").get<int>();
      size_t n = 1;
      for (const auto& k : ff.grid.knots) n *= k.size();
      if (ff.grid.dims() != static_cast<int>(info.features.size()) || n != ff.grid.values.size() || n == 0)
        throw std::runtime_error("family \"" + info.name + "\": grid size does not match its features");
    }
    if (j.contains("validation"))
      for (const auto& [name, v] : j["validation"].at("families").items()) {
        FamilyValidation x;
        x.family = family_by_name(name);
        x.rows = v.at("rows").get<int>();
        x.kfold = stats_from(v.at("kfold")), x.shape_out = stats_from(v.at("leave_one_shape_out")), x.in_sample = stats_from(v.at("in_sample"));
        fs.validation.push_back(x);
      }
    if (j.contains("communication")) {
      const auto& c = j["communication"];
      fs.comm.nvlink_efficiency = c.at("nvlink_efficiency").get<double>();
      fs.comm.nvlink_latency_s = c.at("nvlink_latency_s").get<double>();
      fs.comm.handshake_s = c.at("handshake_s").get<double>();
      fs.comm.nvlink_free_intercept_s = c.at("nvlink_free_fit").at("intercept_s").get<double>();
      fs.comm.nvlink_free_efficiency = c.at("nvlink_free_fit").at("efficiency").get<double>();
      fs.comm.nic_efficiency = c.at("nic_efficiency").get<double>();
      fs.comm.nic_latency_s = c.at("nic_latency_s").get<double>();
      fs.comm.nvlink_call_s = c.at("nvlink_call_overhead_s").get<double>();
      fs.comm.nic_call_s = c.at("nic_call_overhead_s").get<double>();
      for (const auto& r : c.at("rows"))
        fs.comm.rows.push_back({r.at("what").get<std::string>(), r.at("published").get<double>(), r.at("predicted").get<double>(),
                                r.at("unit").get<std::string>(), r.at("fitted").get<bool>()});
    }
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": malformed fitted parameters (" + std::string(e.what()) + ")");
  }
  return fs;
}

}  // namespace servesim
