#include "costmodels/calibration/fit.hpp"
#include "costmodels/calibration/samples.hpp"
#include "costmodels/percentile.hpp"

#include "costmodels/comm.hpp"
#include "costmodels/deepep_bench.hpp"
#include "costmodels/step_cost.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace servesim {

using ojson = nlohmann::ordered_json;

ErrorStats error_stats(std::vector<double> e) {
  ErrorStats s;
  s.n = static_cast<int>(e.size());
  if (e.empty()) return s;
  std::sort(e.begin(), e.end());
  auto q = [&](double p) { return percentile_sorted(e, p); };
  s.median = q(0.5), s.p95 = q(0.95), s.max = e.back();
  return s;
}


FittedFamily fit_family(Family f, const std::vector<Sample>& samples) {
  const FamilyInfo& info = family_info(f);
  const int d = static_cast<int>(info.features.size());
  if (samples.empty()) throw std::runtime_error("kernel family " + info.name + ": no measured rows");
  std::vector<std::array<double, kMaxGridDims>> x;
  std::vector<double> y;
  double floor_s = samples.front().seconds;
  for (const auto& s : samples) {
    std::array<double, kMaxGridDims> l{};
    transform_features(info, s.x.data(), l.data());
    for (int a = 0; a < d; ++a) l[a] = std::log2(l[a]);
    x.push_back(l);
    y.push_back(std::log2(s.seconds));
    floor_s = std::min(floor_s, s.seconds);
  }
  GridFitOptions o;
  o.min_gap = info.min_gap, o.monotone = info.monotone, o.smooth = info.smooth, o.lambda = info.lambda;
  FittedFamily ff;
  ff.grid = fit_log_grid(x, y, d, o);
  ff.floor_s = floor_s;
  if (!info.series.empty()) {
    std::map<std::vector<double>, FittedFamily::SeriesRange> ranges;
    for (size_t i = 0; i < x.size(); ++i) {
      const auto& l = x[i];
      std::vector<double> key;
      for (int a : info.series) key.push_back(l[a]);
      auto it = ranges.find(key);
      if (it == ranges.end()) {
        FittedFamily::SeriesRange r;
        r.key = key, r.lo.assign(l.begin(), l.begin() + d), r.hi = r.lo, r.floor_s = samples[i].seconds;
        ranges.emplace(key, std::move(r));
      } else {
        for (int a = 0; a < d; ++a) it->second.lo[a] = std::min(it->second.lo[a], l[a]), it->second.hi[a] = std::max(it->second.hi[a], l[a]);
        it->second.floor_s = std::min(it->second.floor_s, samples[i].seconds);
      }
    }
    for (auto& [k, r] : ranges) ff.ranges.push_back(std::move(r));
  }
  return ff;
}

namespace {

std::string shape_key(const FamilyInfo& info, const Sample& s) {
  std::string k;
  char buf[32];
  for (int a : info.series) {
    std::snprintf(buf, sizeof buf, "%.6g|", s.x[a]);
    k += buf;
  }
  return k;
}

}  // namespace

FamilyValidation validate_family(Family f, const std::vector<Sample>& samples, const Ceilings& ref, const FitOptions& opt,
                                 std::vector<HeldOut>* held_out) {
  const FamilyInfo& info = family_info(f);
  const int d = static_cast<int>(info.features.size());
  FamilyValidation v;
  v.family = f;
  v.rows = static_cast<int>(samples.size());
  auto predict = [&](const FittedFamily& fit, const Sample& s) { return family_seconds(info, fit, s.x.data(), ref, nullptr); };
  {
    const FittedFamily full = fit_family(f, samples);
    std::vector<double> e;
    for (const auto& s : samples) e.push_back(std::abs(predict(full, s) / s.seconds - 1));
    v.in_sample = error_stats(e);
  }
  // k-fold, interleaved: order by the other features, then the first one, and deal the points
  // round-robin, so every held-out point has measured neighbours along its series.
  std::vector<int> order(samples.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    for (int k = d - 1; k >= 1; --k)
      if (samples[a].x[k] != samples[b].x[k]) return samples[a].x[k] < samples[b].x[k];
    return samples[a].x[0] < samples[b].x[0];
  });
  const int K = std::max(2, opt.folds);
  std::vector<double> e;
  for (int fold = 0; fold < K; ++fold) {
    std::vector<Sample> train;
    std::vector<const Sample*> test;
    for (size_t r = 0; r < order.size(); ++r) (static_cast<int>(r) % K == fold ? (void)test.push_back(&samples[order[r]]) : train.push_back(samples[order[r]]));
    if (test.empty() || train.empty()) continue;
    const FittedFamily fit = fit_family(f, train);
    for (const Sample* s : test) {
      const double p = predict(fit, *s);
      e.push_back(std::abs(p / s->seconds - 1));
      if (held_out) held_out->push_back({f, s->table, s->variant, s->x, s->seconds, p});
    }
  }
  v.kfold = error_stats(e);
  if (opt.shape_out && !info.series.empty()) {
    std::map<std::string, std::vector<int>> groups;
    for (size_t i = 0; i < samples.size(); ++i) groups[shape_key(info, samples[i])].push_back(static_cast<int>(i));
    if (groups.size() > 1) {
      std::vector<double> g;
      for (const auto& [key, idx] : groups) {
        std::vector<Sample> train;
        std::set<int> out(idx.begin(), idx.end());
        for (size_t i = 0; i < samples.size(); ++i)
          if (!out.count(static_cast<int>(i))) train.push_back(samples[i]);
        const FittedFamily fit = fit_family(f, train);
        for (int i : idx) g.push_back(std::abs(predict(fit, samples[i]) / samples[i].seconds - 1));
      }
      v.shape_out = error_stats(g);
    }
  }
  return v;
}

FitSet fit_all(const std::map<std::string, KernelTable>& tables, const GpuSpec& measured_on, const FitOptions& opt,
               std::vector<HeldOut>* held_out) {
  FitSet fs;
  fs.measured_on = measured_on.name;
  fs.reference = datasheet_ceilings(measured_on);
  std::set<std::string> used;
  fs.launch_gap_s = launch_gap_s(tables);
  for (int i = 0; i < kFamilyCount; ++i) {
    const Family f = static_cast<Family>(i);
    const std::vector<Sample> s = family_samples(f, tables, fs.launch_gap_s);
    fs.families[i] = fit_family(f, s);
    fs.rows[i] = static_cast<int>(s.size());
    for (const auto& x : s) used.insert(x.table);
    if (opt.validate) fs.validation.push_back(validate_family(f, s, fs.reference, opt, held_out));
  }
  std::set<std::string> commits;
  for (const auto& [file, t] : tables) {
    if (!used.count(file)) continue;
    fs.tables.push_back({file, t.op, t.commit, t.content_hash, static_cast<int>(t.rows.size())});
    if (!t.commit.empty()) commits.insert(t.commit.substr(0, 7));
    for (const auto& r : t.rows)
      if (!r.commit.empty()) commits.insert(r.commit.substr(0, 7));
  }
  fs.measurement_commits.assign(commits.begin(), commits.end());
  return fs;
}

// ------------------------------------------------------------------------ communication

namespace {

double sq_log_err(double pred, double meas) {
  const double l = std::log(pred / meas);
  return l * l;
}

// --- NVLink: 2xH200 NCCL all-to-all, each GPU sends b bytes to the other: the closed form's
// busiest-GPU NVLink load is b, t = b / (η·BW) + 2·lat (comm.hpp).
void calibrate_nvlink(const std::map<std::string, KernelTable>& tables, const GpuSpec& h200, CommCalibration& c) {
  const auto p2p = tables.find("comm_p2p_copy.json");
  const auto a2a = tables.find("comm_nvlink_alltoall.json");
  if (p2p == tables.end() || a2a == tables.end()) throw std::runtime_error("communication calibration needs comm_p2p_copy.json and comm_nvlink_alltoall.json");
  double hs_bytes = 1e30;
  for (const auto& r : p2p->second.rows)
    if (r.variant == "sm_uni" && r.at("bytes") < hs_bytes) hs_bytes = r.at("bytes"), c.handshake_s = r.us_median * 1e-6;
  struct Pt {
    double b, t;
  };
  std::vector<Pt> pts;
  for (const auto& r : a2a->second.rows)
    if (r.variant == "nccl_alltoall" && r.at("bytes_per_peer") >= (1 << 20)) pts.push_back({r.at("bytes_per_peer"), r.us_median * 1e-6 - c.handshake_s});
  const double bw = h200.nvlink_bytes_per_s_per_direction();
  c.nvlink_latency_s = h200.nvlink_latency_s;
  // two parameters (per-call intercept, efficiency), relative least squares on a grid
  double best = 1e300;
  for (double c0 = 0; c0 <= 60e-6 + 1e-12; c0 += 0.1e-6)
    for (double eta = 0.3; eta <= 1.0 + 1e-12; eta += 0.001) {
      double s = 0;
      for (const auto& p : pts) s += sq_log_err(c0 + p.b / (eta * bw), p.t);
      if (s < best) best = s, c.nvlink_free_intercept_s = c0, c.nvlink_free_efficiency = eta;
    }
  // The per-hop latency stays the hardware file's (it is also the SimGrid link latency and prices
  // ring all-reduces per hop); the intercept beyond the two hops becomes the per-call cost of an
  // NVLink all-to-all (comm.hpp nvlink_call_s), the slope the bandwidth fraction.
  c.nvlink_efficiency = std::round(c.nvlink_free_efficiency * 1000) / 1000;
  c.nvlink_call_s = std::round(std::max(0.0, c.nvlink_free_intercept_s - 2 * c.nvlink_latency_s) * 1e7) / 1e7;
  for (const auto& p : pts) {
    const double mib = p.b / (1 << 20);
    if (mib != 1 && mib != 4 && mib != 16 && mib != 64 && mib != 256 && mib != 1024) continue;
    char what[96];
    std::snprintf(what, sizeof what, "2xH200 NCCL all-to-all %g MiB/peer (µs, handshake removed)", mib);
    c.rows.push_back({what, p.t * 1e6, (p.b / (c.nvlink_efficiency * bw) + 2 * c.nvlink_latency_s + c.nvlink_call_s) * 1e6, "µs", true});
  }
}

/// A published DeepEP figure and the engine's all-to-all load for its setting. Bandwidth rows
/// compare `counted` bytes (what DeepEP's benchmark divides by its time, deepep_bench.hpp) over
/// the closed form's time.
struct DeepEpRow {
  std::string what;
  double published;
  bool bw;  // published is GB/s over RDMA (normal kernels) else µs (low-latency kernels)
  AllToAllLoad load;
  double counted;  // bw rows: DeepEP's counted bytes per rank
  bool fit;
};

/// DeepEP V1 on H800 + CX7 400 Gb/s (published-measurements.md §3.4): low-latency and normal
/// kernels, each with the load the engine gives it under the benchmark's own routing.
std::vector<DeepEpRow> deepep_rows(const GpuSpec& g) {
  std::vector<DeepEpRow> rows;
  const FabricParams f = fabric_of(g);
  auto row = [&](std::string what, double published, bool bw, int ep, EpDispatch mode, double tokens, DType msg, bool fit) {
    const ModelSpec m = deepep_bench_model(DeepEpLayer{}, ep, mode, f.gpus_per_node);
    rows.push_back({std::move(what), published, bw, deepep_bench_load(m, f, ep, mode, tokens, msg),
                    bw ? deepep_counted_bytes(m, ep, tokens, msg, f.gpus_per_node) : 0.0, fit});
  };
  const int ll_ep[] = {8, 16, 32, 64, 128, 256};
  const double ll_disp[] = {77, 118, 155, 173, 192, 194}, ll_comb[] = {114, 195, 273, 314, 369, 360};
  for (int i = 0; i < 6; ++i) {
    row("DeepEP LL dispatch EP" + std::to_string(ll_ep[i]) + ", 128 tok (µs)", ll_disp[i], false, ll_ep[i], EpDispatch::direct, 128, DType::fp8, ll_ep[i] > 8);
    row("DeepEP LL combine EP" + std::to_string(ll_ep[i]) + ", 128 tok (µs)", ll_comb[i], false, ll_ep[i], EpDispatch::direct, 128, DType::bf16, ll_ep[i] > 8);
  }
  const int nm_ep[] = {16, 32, 64};
  const double nm_disp[] = {43, 58, 51}, nm_comb[] = {43, 57, 50};
  for (int i = 0; i < 3; ++i) {
    row("DeepEP normal dispatch EP" + std::to_string(nm_ep[i]) + ", 4096 tok (RDMA GB/s as counted)", nm_disp[i], true, nm_ep[i], EpDispatch::hierarchical, 4096, DType::fp8, true);
    row("DeepEP normal combine EP" + std::to_string(nm_ep[i]) + ", 4096 tok (RDMA GB/s as counted)", nm_comb[i], true, nm_ep[i], EpDispatch::hierarchical, 4096, DType::bf16, true);
  }
  // a row informs the NIC parameters only if its NIC phase is the bottleneck of the closed form
  // (at line rate); DeepEP normal EP16 is NVLink-bound in the engine's hierarchical model
  for (auto& r : rows) {
    if (!r.fit) continue;
    const double nvl = r.load.intra_bytes / (f.nvlink_efficiency * f.nvlink_bytes_per_s);
    const double nic = std::max(r.load.inter_bytes / f.nic_bytes_per_s, r.load.node_inter_bytes / (f.nic_bytes_per_s * f.gpus_per_node));
    if (nvl >= nic) r.fit = false, r.what += " [NVLink-bound in the model]";
  }
  return rows;
}

/// The closed form's figure for `r` (GB/s or µs, as published) at NIC efficiency, latency and per-call cost.
double predict_deepep(const GpuSpec& g, const DeepEpRow& r, double eta, double lat, double call) {
  FabricParams f = fabric_of(g);
  f.nic_efficiency = eta, f.nic_latency_s = lat, f.nic_call_s = call;
  const double t = alltoall_time(f, r.load);
  return r.bw ? r.counted / t / 1e9 : t * 1e6;
}

// 2 parameters (efficiency, per-call cost) with the hardware file's per-hop link latency held
// (it is also the NIC link latency of the SimGrid platform): the per-call cost is DeepEP's fixed
// overhead (launch, synchronisation), charged once per inter-node all-to-all (comm.hpp nic_call_s)
void fit_nic(const std::vector<DeepEpRow>& rows, const GpuSpec& g, const GpuSpec& h200, CommCalibration& c) {
  c.nic_latency_s = h200.nic_latency_s;
  double best = 1e300;
  for (double eta = 0.2; eta <= 1.0 + 1e-12; eta += 0.001)
    for (double call = 0; call <= 60e-6 + 1e-12; call += 0.25e-6) {
      double s = 0;
      for (const auto& r : rows)
        if (r.fit) s += sq_log_err(predict_deepep(g, r, eta, c.nic_latency_s, call), r.published);
      if (s < best) best = s, c.nic_efficiency = std::round(eta * 1000) / 1000, c.nic_call_s = std::round(call * 4e6) / 4e6;
    }
  for (const auto& r : rows)
    c.rows.push_back({r.what, r.published, predict_deepep(g, r, c.nic_efficiency, c.nic_latency_s, c.nic_call_s), r.bw ? "GB/s" : "µs", r.fit});
}

/// DeepEP normal intranode EP8 (NVLink bottleneck BW 153 / 158 GB/s as its benchmark counts them,
/// H800): comparison rows only.
void add_intranode_rows(const GpuSpec& g, CommCalibration& c) {
  const FabricParams f = fabric_of(g);
  const ModelSpec m = deepep_bench_model(DeepEpLayer{}, 8, EpDispatch::hierarchical, f.gpus_per_node);
  for (DType msg : {DType::fp8, DType::bf16}) {
    const double t = alltoall_time(f, deepep_bench_load(m, f, 8, EpDispatch::hierarchical, 4096, msg));
    c.rows.push_back({std::string("DeepEP normal ") + (msg == DType::fp8 ? "dispatch" : "combine") + " EP8 intranode, 4096 tok (NVLink GB/s as counted)",
                      msg == DType::fp8 ? 153.0 : 158.0, deepep_counted_bytes(m, 8, 4096, msg, f.gpus_per_node) / t / 1e9, "GB/s", false});
  }
}

}  // namespace

CommCalibration calibrate_comm(const std::map<std::string, KernelTable>& tables, const GpuSpec& h200, const GpuSpec& h800) {
  CommCalibration c;
  calibrate_nvlink(tables, h200, c);
  // --- NIC: DeepEP V1 on H800 + CX7 400 Gb/s (published-measurements.md §3.4), through the
  // engine's own EP all-to-all loads (StepCostModel::moe_alltoall_load).
  GpuSpec g = h800;
  g.nvlink_efficiency = c.nvlink_efficiency;
  g.nvlink_call_overhead_s = c.nvlink_call_s;
  const std::vector<DeepEpRow> rows = deepep_rows(g);
  fit_nic(rows, g, h200, c);
  add_intranode_rows(g, c);
  return c;
}

// ------------------------------------------------------------------------ JSON

namespace {

double round_sig(double v, int digits) {
  if (v == 0 || !std::isfinite(v)) return v;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return std::strtod(buf, nullptr);
}

ojson stats_json(const ErrorStats& s) {
  return ojson{{"n", s.n}, {"median_ape", round_sig(s.median, 4)}, {"p95_ape", round_sig(s.p95, 4)}, {"max_ape", round_sig(s.max, 4)}};
}

}  // namespace

void write_fit_json(const FitSet& fs, const std::string& path) {
  ojson j;
  j["schema"] = "servesim.fitted-cost-model/1";
  j["_comment"] =
      "Written by `servesim costmodel fit`; do not edit. Per kernel family: log2(seconds) on a grid of knots in log2 of "
      "each feature (knots_log2), multilinear interpolation inside the measured range, roofline-bound scaling outside "
      "(costmodels/kernel_families.hpp). The engine loads this file at start-up and never refits.";
  j["measured_on"] = fs.measured_on;
  j["reference_ceilings"] = {{"bf16_flop_per_s", fs.reference.bf16},
                             {"fp8_flop_per_s", fs.reference.fp8},
                             {"fp4_flop_per_s", fs.reference.fp4},
                             {"hbm_bytes_per_s", fs.reference.hbm},
                             {"hbm_achievable_bytes_per_s", fs.reference.hbm_achievable},
                             {"source", "datasheet figures of scenarios/hardware/" + fs.measured_on + ".json; hbm_achievable_bytes_per_s: its "
                                        "measured HBM copy bandwidth (0: none)"}};
  ojson tabs = ojson::array();
  for (const auto& t : fs.tables)
    tabs.push_back({{"file", t.file}, {"op", t.op}, {"commit", t.commit}, {"fnv1a64", t.hash}, {"rows", t.rows}});
  j["tables"] = tabs;
  j["measurement_commits"] = fs.measurement_commits;
  j["launch_gap_s"] = round_sig(fs.launch_gap_s, 6);
  j["launch_gap_note"] =
      "median (events-per-call − CUDA-graph) time of the rows measured both ways; removed once from every eagerly timed row "
      "(MoE and comm tables) before fitting, as a CUDA-graph serving engine does not pay it";
  ojson fam = ojson::object();
  for (int i = 0; i < kFamilyCount; ++i) {
    const FamilyInfo& info = family_info(static_cast<Family>(i));
    const FittedFamily& f = fs.families[i];
    ojson k = ojson::array();
    for (const auto& axis : f.grid.knots) {
      ojson a = ojson::array();
      for (double v : axis) a.push_back(v);  // exact: range checks compare against them
      k.push_back(a);
    }
    ojson vals = ojson::array();
    for (double v : f.grid.values) vals.push_back(round_sig(v, 7));
    ojson ranges = ojson::array();
    for (const auto& r : f.ranges)
      ranges.push_back({{"key_log2", r.key}, {"lo_log2", r.lo}, {"hi_log2", r.hi}, {"floor_s", round_sig(r.floor_s, 7)}});
    fam[info.name] = {{"kernel", info.kernel}, {"features", info.features}, {"lambda", info.lambda}, {"rows", fs.rows[i]},
                      {"floor_s", round_sig(f.floor_s, 7)}, {"knots_log2", k}, {"shape_ranges", ranges}, {"values_log2_s", vals}};
  }
  j["families"] = fam;
  if (!fs.validation.empty()) {
    ojson v = ojson::object();
    for (const auto& x : fs.validation)
      v[family_info(x.family).name] = {{"rows", x.rows}, {"kfold", stats_json(x.kfold)}, {"leave_one_shape_out", stats_json(x.shape_out)},
                                       {"in_sample", stats_json(x.in_sample)}};
    j["validation"] = {{"method", "5-fold, folds interleaved along each measured series; leave-one-shape-out per FamilyInfo::series"},
                       {"families", v}};
  }
  const CommCalibration& c = fs.comm;
  ojson rows = ojson::array();
  for (const auto& r : c.rows)
    rows.push_back({{"what", r.what}, {"published", round_sig(r.published, 5)}, {"predicted", round_sig(r.predicted, 5)}, {"unit", r.unit}, {"fitted", r.fitted}});
  j["communication"] = {{"nvlink_efficiency", c.nvlink_efficiency},
                        {"nvlink_latency_s", c.nvlink_latency_s},
                        {"handshake_s", round_sig(c.handshake_s, 5)},
                        {"nvlink_free_fit", {{"intercept_s", round_sig(c.nvlink_free_intercept_s, 4)}, {"efficiency", round_sig(c.nvlink_free_efficiency, 4)}}},
                        {"nic_efficiency", c.nic_efficiency},
                        {"nic_latency_s", c.nic_latency_s},
                        {"nvlink_call_overhead_s", c.nvlink_call_s},
                        {"nic_call_overhead_s", c.nic_call_s},
                        {"rows", rows}};
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error(path + ": cannot write the fitted parameters");
  out << j.dump(1) << "\n";
  if (!out) throw std::runtime_error(path + ": error writing the fitted parameters");
}

const std::vector<AccuracyException>& accuracy_exceptions() {
  // Measured k-fold errors of the committed tables (rounded up in the last digit); the test fails
  // if a family exceeds them, and also if it meets the target (then the exception must go).
  static const std::vector<AccuracyException> v = {
      {Family::gemm_fp8, 0.027, 0.188,
       "cuBLASLt FP8 block-scaled GEMMs change tile configuration between neighbouring M (wave quantisation: kv_a N=576 takes "
       "26 µs at M=3072, 47 µs at 4096, 50 µs at 6144; V4-Flash wo_b N=4096 K=8192 32 µs at M=512, 67 µs at 768); a held-out point "
       "at such a step cannot be interpolated from its neighbours. Issue 13: each row is the faster of cuBLASLt and the own split-K "
       "wgmma kernel (own at M <= ~128, 2-3x faster at M <= 64 on small N*K), so a series also switches kernel between M 64 and 256 "
       "(median 1.5% -> 2.3%, p95 16.2% -> 17.3%); since the eighteenth session the own kernel's rows are tuned per shape over "
       "128- and 64-row weight tiles with and without programmatic dependent launch (helper pj), one more switch between "
       "neighbouring M (median 2.7%, p95 18.7%). The dense-GEMM class as a whole meets the target (p95 14.1%)"},
      {Family::combine, 0.028, 0.196,
       "eager-timed, µs-scale: 3-7 µs after the launch gap, ±1 µs jitter, and a 2.7x step between 384 and 512 tokens "
       "(5.7 vs 15.5 µs, K3); p95 19.10% with the issue-12 MLA decode rows in the launch-gap median, 19.28% since they are "
       "variant 10's (tenth session), 19.46% since the F16 V4 attention rows moved that median 6.55 -> 6.70 µs (thirteenth session), 19.58% since the "
       "eighteenth session's staged-producer V4 rows and own FP8 GEMM rows moved it 6.67 -> 6.80 µs"},
      {Family::mla_decode, 0.030, 0.175,
       "issue 12, eleventh session: the table of the variant-12 kernel (variant 10, P from registers, plus S1 issued after S0's "
       "first blocks and an FFMA softmax; median 2.0% -> 2.9%, p95 15.8% -> 16.8% against variant 10's table; 17.45% since the "
       "twenty-seventh session re-measured it with the shared-space form, each point once: 31 rows over 2% slower and 41 over 5% "
       "faster than before, a noisier grid). Its worst "
       "held-out rows are batch 1 at 4K and 32K contexts (grid steps of 8x in context: 4K, 32K, 256K), where the kernel goes "
       "from its ~16 µs floor to streaming; a held-out point there is interpolated across the whole step (+104..112% at 4K, all "
       "head counts). With variant 0's table the family met the target; the attention decode class as a whole does (p95 12.5%)"},
      {Family::indexer_prefill, 0.021, 0.219,
       "issue 12: the FP8 wgmma indexer's 78 prefill rows span 5 query lengths x 4 contexts x 4 batch sizes: a held-out corner "
       "(the largest or smallest query length) is an extrapolation along a 2x grid step of a kernel that goes from latency- to "
       "compute-bound there (up to 747 TFLOP/s). The indexer class as a whole meets the target (p95 12.1%)"},
  };
  return v;
}

}  // namespace servesim
