// servesim costmodel fit | report: rebuild the kernel-fitted cost model from the measurement
// tables, and print its held-out accuracy and its checks against published numbers.
#include "sim/cli/costmodel_cmd.hpp"

#include "costmodels/calibration/fit.hpp"
#include "costmodels/calibration/fit_report.hpp"
#include "costmodels/fitted.hpp"
#include "scenarios/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

namespace servesim::cli {

namespace fs = std::filesystem;

namespace {

GpuSpec hardware(const std::string& name) { return load_hardware(resolve_data_file(name, "hardware", data_dir())); }

// Bad command-line input (exit 2, README "Input rules"): an unknown hardware name, a --data folder
// or a --params file (report) that does not exist, a --family no kernel family has; checked before
// any fitting (review: these exited 1, and an unknown --family printed nothing after minutes).
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// --data default: the folder of the parameters the measured GPU's hardware file names.
void resolve_paths(const GpuSpec& gpu, std::string& data, std::string& params, bool params_must_exist) {
  if (params.empty()) {
    if (gpu.fitted_models_path.empty()) throw InputError("hardware " + gpu.name + " names no fitted_models file; pass --params");
    params = gpu.fitted_models_path;
  } else if (params_must_exist && !path_exists(params)) {
    throw InputError("--params " + params + ": no such parameter file");
  }
  if (data.empty()) data = fs::path(params).parent_path().string();
  else if (std::error_code ec; !fs::is_directory(data, ec)) throw InputError("--data " + data + ": no such folder");
}

void check_family(const std::string& family, int worst) {
  if (family.empty()) return;
  std::string names;
  bool known = false;
  for (int i = 0; i < kFamilyCount; ++i) {
    const FamilyInfo& f = family_info(static_cast<Family>(i));
    known = known || f.name == family;
    names += (names.empty() ? "" : ", ") + std::string(f.name);
  }
  if (!known) throw InputError("--family " + family + ": no such kernel family (families: " + names + ")");
  // (review, twenty-seventh session: --family without --worst did nothing)
  if (worst <= 0) throw InputError("--family " + family + ": selects the family --worst lists; give --worst N too");
}

GpuSpec input_hardware(const std::string& name) {
  try {
    return hardware(name);
  } catch (const ScenarioError& e) {
    throw InputError(std::string("--hardware ") + name + ": " + e.what());
  }
}

std::string pct(double x) { return fmt::format("{:.1f}", 100 * x); }

void print_validation(const FitSet& fs, const std::vector<HeldOut>& held, int worst = 0, const std::string& only = "") {
  fmt::print("\nHeld-out accuracy per kernel family (absolute percentage error of predicted vs measured latency;\n"
             "k-fold: 5 folds interleaved along each measured series; shape-out: each measured shape (N,K / heads / ...)\n"
             "left out in turn, i.e. how well an unmeasured shape such as a TP-split projection is predicted)\n");
  fmt::print("{:<20}{:<22}{:>6}{:>10}{:>9}{:>9}{:>11}{:>9}{:>10}  {}\n", "family", "op class", "rows", "k-fold", "median", "p95", "shape-out",
             "p95", "in-sample", "target (median ≤ 5%, p95 ≤ 15%)");
  for (const auto& v : fs.validation) {
    const FamilyInfo& f = family_info(v.family);
    const bool ok = v.kfold.median <= kTargetMedianApe && v.kfold.p95 <= kTargetP95Ape;
    std::string verdict = ok ? "met" : "MISSED";
    for (const auto& e : accuracy_exceptions())
      if (e.family == v.family && !ok) verdict = "MISSED (documented exception)";
    fmt::print("{:<20}{:<22}{:>6}{:>10}{:>8}%{:>8}%{:>10}%{:>8}%{:>9}%  {}\n", f.name, f.op_class, v.rows, "", pct(v.kfold.median), pct(v.kfold.p95),
               v.shape_out.n ? pct(v.shape_out.median) : std::string("-"), v.shape_out.n ? pct(v.shape_out.p95) : std::string("-"),
               pct(v.in_sample.median), verdict);
  }
  std::map<std::string, std::vector<double>> by_class;
  for (const auto& h : held) by_class[family_info(h.family).op_class].push_back(h.ape());
  fmt::print("\nPer op class (all k-fold held-out rows of its families):\n{:<22}{:>7}{:>9}{:>9}{:>9}\n", "op class", "rows", "median", "p95", "max");
  for (const auto& [cls, e] : by_class) {
    const ErrorStats s = error_stats(e);
    fmt::print("{:<22}{:>7}{:>8}%{:>8}%{:>8}%\n", cls, s.n, pct(s.median), pct(s.p95), pct(s.max));
  }
  if (worst > 0) {
    fmt::print("\nWorst held-out rows per family (features in the family's order):\n");
    for (int i = 0; i < kFamilyCount; ++i) {
      const FamilyInfo& f = family_info(static_cast<Family>(i));
      if (!only.empty() && f.name != only) continue;
      std::vector<const HeldOut*> v;
      for (const auto& h : held)
        if (h.family == f.id) v.push_back(&h);
      std::sort(v.begin(), v.end(), [](const HeldOut* a, const HeldOut* b) { return a->ape() > b->ape(); });
      fmt::print("  {} ({})\n", f.name, fmt::join(f.features, ", "));
      for (int k = 0; k < worst && k < static_cast<int>(v.size()); ++k) {
        std::vector<std::string> xs;
        for (size_t a = 0; a < f.features.size(); ++a) xs.push_back(fmt::format("{:g}", v[k]->x[a]));
        fmt::print("    {:<48} {:<28} measured {:9.2f} µs  predicted {:9.2f} µs  {:+.1f}%\n", v[k]->table + " " + v[k]->variant, fmt::join(xs, " "),
                   v[k]->measured_s * 1e6, v[k]->predicted_s * 1e6, 100 * (v[k]->predicted_s / v[k]->measured_s - 1));
      }
    }
  }
  if (!accuracy_exceptions().empty()) {
    fmt::print("\nDocumented exceptions to the accuracy target:\n");
    for (const auto& e : accuracy_exceptions())
      fmt::print("  {}: allowed median {}%, p95 {}% — {}\n", family_info(e.family).name, pct(e.median), pct(e.p95), e.why);
  }
}

void print_checks(const std::string& title, const std::vector<CheckRow>& rows) {
  fmt::print("\n{}\n", title);
  std::string group;
  std::map<std::string, std::vector<double>> err, in_range;
  for (const auto& r : rows) {
    if (r.group != group) {
      group = r.group;
      fmt::print("  {}\n", group);
    }
    // note: the extrapolated families, or a remark that already names them ("...; extrapolated: ...")
    std::string tail;
    if (r.extrapolated && r.note.find("extrapolated") == std::string::npos)
      tail = "  (extrapolated" + (r.note.empty() ? std::string() : ": " + r.note) + ")";
    else if (!r.note.empty())
      tail = "  (" + r.note + ")";
    fmt::print("    {:<44}{:>12.1f}{:>12.1f} {:<8}{:>8.2f}x{}\n", r.what, r.reference, r.predicted, r.unit, r.ratio(), tail);
    err[r.group].push_back(std::abs(r.ratio() - 1));
    if (!r.extrapolated) in_range[r.group].push_back(std::abs(r.ratio() - 1));
  }
  fmt::print("  median / p95 |predicted/reference − 1| per group (all rows; rows inside every family's measured range):\n");
  for (const auto& [g, e] : err) {
    const ErrorStats s = error_stats(e), t = error_stats(in_range[g]);
    fmt::print("    {:<56}{:>7}%{:>8}%  ({} rows)", g, pct(s.median), pct(s.p95), s.n);
    if (t.n) fmt::print("{:>9}%{:>8}%  ({} rows)", pct(t.median), pct(t.p95), t.n);
    fmt::print("\n");
  }
}

void print_comm(const CommCalibration& c) {
  fmt::print("\nCommunication calibration (engine closed forms of costmodels/comm.hpp with the calibrated parameters)\n");
  fmt::print("  NVLink: efficiency {:.3f} and per-call cost {:.1f} µs from a 2-parameter fit (intercept {:.1f} µs + bandwidth) to the\n"
             "          2xH200 NCCL all-to-all rows, 1 MiB-1 GiB per peer, the {:.1f} µs two-GPU event handshake removed; the per-call\n"
             "          cost is the intercept beyond two per-hop latencies of {:.1f} µs (the per-hop latency also prices ring all-reduces)\n",
             c.nvlink_efficiency, c.nvlink_call_s * 1e6, c.nvlink_free_intercept_s * 1e6, c.handshake_s * 1e6, c.nvlink_latency_s * 1e6);
  fmt::print("  NIC:    efficiency {:.3f} and per-call cost {:.2f} µs fitted together on DeepEP's internode rows (H800 + CX7 400 Gb/s),\n"
             "          per-hop link latency held at {:.1f} µs\n",
             c.nic_efficiency, c.nic_call_s * 1e6, c.nic_latency_s * 1e6);
  fmt::print("  {:<92}{:>11}{:>11}{:>8}\n", "row", "published", "predicted", "ratio");
  for (const auto& r : c.rows)
    fmt::print("  {:<92}{:>11.1f}{:>11.1f}{:>7.2f}x{}\n", r.what, r.published, r.predicted, r.predicted / r.published, r.fitted ? "" : "  (not fitted)");
}

std::map<std::string, ModelSpec> bench_models() {
  std::map<std::string, ModelSpec> m;
  m["K3"] = load_model(resolve_data_file("kimi-k3", "models", data_dir()));
  m["DSV4-Pro"] = load_model(resolve_data_file("deepseek-v4-pro", "models", data_dir()));
  m["DSV4-Flash"] = load_model(resolve_data_file("deepseek-v4-flash", "models", data_dir()));
  return m;
}

}  // namespace

int costmodel_fit(const CostModelArgs& a) {
  try {
    check_family(a.family, a.worst);
    if (a.no_validate && a.worst > 0) throw InputError("--worst lists held-out rows of the validation, which --no-validate skips");
    const GpuSpec gpu = input_hardware(a.hardware), h800 = hardware("h800");
    std::string data = a.data, params = a.params;
    resolve_paths(gpu, data, params, false);
    const auto t0 = std::chrono::steady_clock::now();
    const auto tables = load_kernel_tables(data);
    FitOptions opt;
    opt.validate = !a.no_validate;
    opt.shape_out = !a.no_shape_out;
    std::vector<HeldOut> held;
    FitSet fs = fit_all(tables, gpu, opt, &held);
    fs.comm = calibrate_comm(tables, gpu, h800);
    write_fit_json(fs, params);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("fitted {} kernel families to {} tables in {} ({} measured on {}) in {:.1f} s\nwrote {}\n", kFamilyCount, fs.tables.size(), data,
               fmt::join(fs.measurement_commits, ", "), fs.measured_on, wall, params);
    if (opt.validate) print_validation(fs, held, a.worst, a.family);
    print_comm(fs.comm);
    fmt::print("\nThe hardware files carry the communication parameters (nvlink_efficiency, nic_efficiency, nic_latency_s,\n"
               "nvlink_call_overhead_s, nic_call_overhead_s);\n"
               "tests/test_costmodel_fit.cpp checks that they equal this calibration.\n");
    return 0;
  } catch (const InputError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

int costmodel_report(const CostModelArgs& a) {
  try {
    check_family(a.family, a.worst);
    const GpuSpec gpu = input_hardware(a.hardware), h800 = hardware("h800");
    std::string data = a.data, params = a.params;
    resolve_paths(gpu, data, params, true);
    const auto tables = load_kernel_tables(data);
    const auto loaded = load_fit_cached(params);
    fmt::print("kernel-fitted cost model: parameters {} (FNV-1a {}), fitted to {} tables of {} measured on {} (commits {})\n", params,
               loaded->file_hash, loaded->tables.size(), data, loaded->measured_on, fmt::join(loaded->measurement_commits, ", "));
    FitOptions opt;
    opt.shape_out = !a.no_shape_out;
    std::vector<HeldOut> held;
    FitSet fresh = fit_all(tables, gpu, opt, &held);
    // staleness: the committed parameters must be what a fit of these tables gives
    double worst = 0;
    for (int i = 0; i < kFamilyCount; ++i) {
      const auto& x = fresh.families[i].grid.values;
      const auto& y = loaded->families[i].grid.values;
      if (x.size() != y.size()) worst = 1e9;
      else
        for (size_t k = 0; k < x.size(); ++k) worst = std::max(worst, std::abs(x[k] - y[k]));
    }
    fmt::print("{}\n", worst < 1e-4 ? "the parameter file matches a fresh fit of these tables"
                                    : fmt::format("WARNING: the parameter file differs from a fresh fit (max |Δlog2 t| = {:.3g}): run `servesim costmodel fit`", worst));
    print_validation(fresh, held, a.worst, a.family);
    const auto models = bench_models();
    print_checks("Composite checks on the " + loaded->measured_on + " (whole measured layers vs the sum of the engine's ops for the same shape):",
                 composite_checks(loaded, gpu, tables, models));
    print_checks("H800: published kernel figures vs our kernels' fits scaled H200 -> H800 per kernel (math by the peak ratio, the HBM stream\nby bytes over achievable bandwidth, latency kept: cross_gpu_seconds)\n"
                 "(the tables measure OUR kernels: FlashMLA / DeepGEMM are production wgmma kernels, kernels/attention/NOTES.md):",
                 published_h800_checks(loaded, h800));
    print_comm(loaded->comm);
    return 0;
  } catch (const InputError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace servesim::cli
