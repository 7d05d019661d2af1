// servesim report of a sweep's folder: throughput, goodput and latency against load (results.json),
// nodes needed per model x GPU, HBM per GPU, KV tiers, transfer volume and unit cost from the
// points' summary.json.
#include "sim/exporters/report/report.hpp"

#include "scenarios/file_names.hpp"
#include "sim/exporters/report/slo.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

namespace fs = std::filesystem;

namespace servesim::report {

namespace {

std::string last_segment(const std::string& path) {
  const auto k = path.rfind('.');
  return k == std::string::npos ? path : path.substr(k + 1);
}

std::string text(const ojson& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// The shortest tail of `path` (whole dotted segments) that no other of `paths` ends with: a legend
// label that tells the axes apart (rev25: deployments.1.prefill.instances and .decode.instances both
// read "instances").
std::string short_name(const std::string& path, const std::vector<std::string>& paths) {
  for (size_t k = path.size(); k != std::string::npos && k > 0; k = path.rfind('.', k - 1)) {
    const std::string tail = k == path.size() ? last_segment(path) : path.substr(path.rfind('.', k - 1) + 1);
    bool unique = true;
    for (const auto& o : paths)
      if (o != path && (o == tail || (o.size() > tail.size() && o.compare(o.size() - tail.size(), tail.size(), tail) == 0 &&
                                      o[o.size() - tail.size() - 1] == '.')))
        unique = false;
    if (unique) return tail;
    if (k == 0 || path.rfind('.', k - 1) == std::string::npos) break;
  }
  return path;
}

// The axis that sets the load: sessions, arrival rate or request count (in that order of preference).
std::string load_axis(const ojson& params) {
  for (const char* want : {"concurrency", "sessions", "rate_per_s", "time_scale", "requests"})
    for (const auto& p : params)
      if (last_segment(p.value("path", "")) == want && p["values"].is_array() && p["values"].size() >= 2 && p["values"][0].is_number())
        return p["path"].get<std::string>();
  return {};
}

struct Row {
  ojson row;
  double load = 0;
  std::string series;  // the other varying axes' values and the deployment
  ojson dep;           // the deployment's entry of the point's summary.json (null when absent)
  std::string model, hardware;
};

struct Sweep {
  std::string load;  // the load axis' path ("" when none)
  std::vector<Row> rows;
  std::vector<std::string> series;  // in first-seen (grid) order
};

Sweep read_rows(const std::string& dir, const ojson& results) {
  Sweep s;
  const ojson& params = at(results, {"parameters"});
  s.load = params.is_array() ? load_axis(params) : "";
  std::vector<std::string> varying;
  if (params.is_array())
    for (const auto& p : params)
      if (p.value("path", "") != s.load && p["values"].is_array() && p["values"].size() >= 2) varying.push_back(p["path"].get<std::string>());
  std::set<std::string> deployments;
  for (const auto& row : at(results, {"rows"}))
    if (row.contains("deployment") && row["deployment"].is_string()) deployments.insert(row["deployment"].get<std::string>());
  std::map<std::string, ojson> summaries;
  for (const auto& row : at(results, {"rows"})) {
    Row r;
    r.row = row;
    if (!s.load.empty() && row.contains(s.load) && row[s.load].is_number()) r.load = row[s.load].get<double>();
    for (const auto& v : varying) r.series += (r.series.empty() ? "" : ", ") + short_name(v, varying) + "=" + text(row.value(v, ojson()));
    if (deployments.size() > 1 || r.series.empty()) r.series += (r.series.empty() ? "" : ", ") + text(row.value("deployment", ojson()));
    const std::string id = row.value("point", "");
    if (!is_safe_file_name(id)) throw ReportError(dir + "/results.json: point \"" + id + "\": " + safe_file_name_rule());
    if (!summaries.count(id)) {
      // a point the table says ran needs its summary (README: an unreadable summary is an error, exit
      // 2; rev25 found a cut one skipped, which moved "nodes needed" from 4 to 6); a failed point has none
      const fs::path f = fs::path(dir) / "points" / id / "summary.json";
      const bool ran = row.value("status", "") == "ok";
      if (ran && !fs::exists(f)) throw ReportError(f.string() + ": missing, but results.json lists point " + id + " as ok");
      summaries[id] = ran || fs::exists(f) ? read_json_file(f.string()) : ojson();
    }
    for (const auto& d : at(summaries[id], {"deployments"}))
      if (text(d.value("deployment", ojson())) == text(row.value("deployment", ojson()))) r.dep = d;
    if (r.dep.is_null() && row.value("status", "") == "ok")  // (rev25b: a summary without the row's deployment was skipped)
      throw ReportError((fs::path(dir) / "points" / id / "summary.json").string() + ": no deployment \"" + text(row.value("deployment", ojson())) +
                        "\", but results.json lists it for point " + id + " as ok");
    r.model = text(at(r.dep, {"model"}));
    r.hardware = text(at(r.dep, {"hardware"}));
    if (std::find(s.series.begin(), s.series.end(), r.series) == s.series.end()) s.series.push_back(r.series);
    s.rows.push_back(std::move(r));
  }
  return s;
}

// A line per series over the load axis of `value(row)`; rows without a number are left out.
template <class F>
ojson per_series(const Sweep& s, F value) {
  ojson ds = ojson::array();
  for (size_t i = 0; i < s.series.size(); ++i) {
    ojson pts = ojson::array();
    for (const auto& r : s.rows)
      if (r.series == s.series[i] && r.row.value("status", "") == "ok")
        if (const auto v = value(r); v) pts.push_back({{"x", r.load}, {"y", *v}});
    if (!pts.empty()) ds.push_back(line_dataset(s.series[i], pts, i));
  }
  return ds;
}

std::optional<double> field(const Row& r, const char* k, double scale = 1) {
  const ojson& v = r.row.value(k, ojson());
  return v.is_number() ? std::optional<double>(v.get<double>() * scale) : std::nullopt;
}

void load_charts(Report& r, const Sweep& s) {
  if (s.load.empty()) {
    for (const char* t : {"Throughput against load", "Goodput against load", "Latency p99 against load", "Nodes needed"})
      r.omitted.emplace_back(t, "the grid varies no load axis (workload.concurrency, sessions, rate_per_s, time_scale or requests with 2+ values)");
    return;
  }
  const std::string x = s.load + " (" + last_segment(s.load) + ")";
  struct Spec {
    const char* id;
    const char* title;
    const char* key;
    double scale;
    const char* y;
    bool log;
  };
  const Spec specs[] = {{"throughput-output", "Output throughput against load", "output_tokens_per_s_per_gpu", 1, "output tokens/s per GPU", false},
                        {"throughput-input", "Input throughput against load", "input_tokens_per_s_per_gpu", 1, "input tokens/s per GPU", false},
                        {"goodput", "Goodput against load", "goodput_fraction_of_finished", 100, "% of finished requests within the SLO", false},
                        {"goodput-tokens", "Goodput tokens against load", "goodput_output_tokens_per_s", 1, "output tokens/s of requests within the SLO", false},
                        {"ttft-p99", "TTFT p99 against load", "ttft_p99_ms", 1, "TTFT p99 (ms)", true},
                        {"tpot-p99", "TPOT p99 against load", "tpot_p99_ms", 1, "TPOT p99 (ms)", true}};
  for (const auto& sp : specs) {
    ojson ds = per_series(s, [&](const Row& row) { return field(row, sp.key, sp.scale); });
    if (ds.empty()) {
      r.omitted.emplace_back(sp.title, std::string("no row of results.json has ") + sp.key);
      continue;
    }
    r.charts.push_back({sp.id, sp.title, fmt::format("results.json: {} of each point (a line per {}){}", sp.key,
                                                     s.series.size() > 1 ? "combination of the other varying fields" : "deployment",
                                                     sp.log ? "; log scale" : ""),
                        xy_chart(ds, x, sp.y, false, sp.log)});
  }
}

// The SLO test of `servesim capacity` (slo.hpp), with each point's own bounds (its deployment's slo,
// summary.json goodput.slo_ttft_s / slo_tpot_s) and capacity's default rejected share.
constexpr double kMaxRejected = 0.01;
constexpr const char* kSloText =
    "in the window, TTFT p99 counting the requests still in flight <= the deployment's slo.ttft_s, TPOT p99 <= slo.tpot_s, "
    "at most 1% of arrivals rejected";

// The fewest nodes among the points of each model x hardware that met the SLO at each load.
void nodes_needed(Report& r, const Sweep& s) {
  if (s.load.empty()) return;
  std::vector<std::string> keys;
  std::map<std::string, std::map<double, double>> best;
  for (const auto& row : s.rows) {
    if (row.model.empty() || row.model == "null" || row.hardware == "null") continue;
    const std::string k = row.model + " on " + row.hardware;
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    // the nodes the pools take (older summaries: cluster.nodes, which then was the same unless declared)
    const double nodes = num(row.dep, {"cluster", "nodes_used"}, num(row.dep, {"cluster", "nodes"}, -1));
    const double ttft = num(row.dep, {"goodput", "slo_ttft_s"}, -1), tpot = num(row.dep, {"goodput", "slo_tpot_s"}, -1);
    if (nodes > 0 && ttft > 0 && tpot > 0 && judge_slo(row.dep, ttft, tpot, kMaxRejected).ok) {
      auto& b = best[k];
      if (!b.count(row.load) || nodes < b[row.load]) b[row.load] = nodes;
    }
  }
  const std::string title = "Nodes needed: model x GPU";
  if (keys.empty()) {
    r.omitted.emplace_back(title, "the points' summary.json files are missing (model, hardware and nodes come from them)");
    return;
  }
  if (best.empty()) {
    r.omitted.emplace_back(title, fmt::format("no point met the SLO (as servesim capacity judges it: {}) at any load, for any of the {} model x GPU "
                                              "pair(s)", kSloText, keys.size()));
    return;
  }
  ojson ds = ojson::array();
  for (size_t i = 0; i < keys.size(); ++i) {
    ojson pts = ojson::array();
    for (const auto& [load, n] : best[keys[i]]) pts.push_back({{"x", load}, {"y", n}});
    ojson d = line_dataset(keys[i] + (pts.empty() ? " (no point met the SLO)" : ""), pts, i);
    d["stepped"] = "before";
    ds.push_back(d);
  }
  r.charts.push_back({"nodes-needed", title,
                      fmt::format("The fewest nodes (summary.json cluster.nodes_used, both pools) among the sweep's points of each model x hardware that "
                                  "met the SLO at each load, as servesim capacity judges a run: {}; a missing point: none of that pair did",
                                  kSloText),
                      xy_chart(ds, s.load, "nodes")});
}

// The row at the highest load of each series (its summary's memory, KV tiers, transfers).
std::vector<const Row*> top_rows(const Sweep& s) {
  std::vector<const Row*> out;
  for (const auto& name : s.series) {
    const Row* best = nullptr;
    for (const auto& row : s.rows)
      if (row.series == name && row.dep.is_object() && (!best || row.load > best->load)) best = &row;
    if (best) out.push_back(best);
  }
  return out;
}

void summaries_charts(Report& r, const Sweep& s, const std::string& dir) {
  const auto top = top_rows(s);
  // latency CDFs, HBM per GPU, transfers and unit cost through the run report's builders, on the
  // point at the highest load of each line
  std::vector<RunDeployment> deps;
  for (const Row* row : top) {
    const std::string name = row->series + (s.load.empty() ? "" : fmt::format(", {}={}", last_segment(s.load), row->load));
    deps.push_back({name, row->dep, (fs::path(dir) / "points" / row->row.value("point", "") / text(row->row.value("deployment", ojson()))).string()});
  }
  if (deps.empty()) {
    r.omitted.emplace_back("Latency CDFs, HBM per GPU, transfer volume, unit cost", "no point's summary.json in points/");
    return;
  }
  const Report sub = build_run_report("", deps);
  const std::string at_top = s.load.empty() ? "One point of each line. " : "At the highest load of each line of the sweep. ";
  for (const auto& c : sub.charts)
    if (c.id.rfind("cdf-", 0) == 0 || c.id == "hbm" || c.id == "transfer-volume" || c.id == "unit-cost") {
      r.charts.push_back(c);
      r.charts.back().caption = at_top + c.caption;
    }
  for (const auto& [t, why] : sub.omitted)
    if (t.find("CDF") != std::string::npos || t == "HBM per GPU" || t == "Transfer volume per link class" || t == "Unit cost") r.omitted.emplace_back(t, why);
  for (const auto& t : sub.tables)
    if (t.title.rfind("Unit cost", 0) == 0) r.tables.push_back(t);
  // KV tiers against load (the points ran without a timeline)
  ojson l2 = per_series(s, [](const Row& row) -> std::optional<double> {
    return at(row.dep, {"kv_tiers", "enabled"}) == true ? std::optional<double>(num(row.dep, {"kv_tiers", "L2_gb_mean"})) : std::nullopt;
  });
  ojson hbm = per_series(s, [](const Row& row) -> std::optional<double> {
    const ojson& v = at(row.dep, {"memory_per_gpu", "decode", "kv_mean_gb"});
    return v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt;
  });
  if (hbm.empty()) {
    r.omitted.emplace_back("KV occupancy against load", "the points' summary.json have no memory_per_gpu.decode.kv_mean_gb");
    return;
  }
  ojson ds = ojson::array();
  for (auto& d : hbm) d["yAxisID"] = "y", d["label"] = "HBM KV per decode GPU: " + d["label"].get<std::string>(), ds.push_back(d);
  for (auto& d : l2) d["yAxisID"] = "y2", d["borderDash"] = {6, 4}, d["label"] = "L2 host DRAM, all nodes: " + d["label"].get<std::string>(), ds.push_back(d);
  ojson cfg = xy_chart(ds, s.load.empty() ? "point" : s.load, "HBM KV per decode GPU, GB (run mean)");
  if (!l2.empty()) cfg["options"]["scales"]["y2"] = {{"type", "linear"}, {"position", "right"}, {"title", {{"display", true}, {"text", "L2 GB (run mean)"}}},
                                                      {"grid", {{"drawOnChartArea", false}}}};
  r.charts.push_back({"kv-load", "KV occupancy against load",
                      std::string("Run means from the points' summary.json (memory_per_gpu.decode.kv_mean_gb; kv_tiers.L2_gb_mean, dashed, right "
                                  "axis, where KV tiers are on); the points ran without a timeline, so no curve over time") +
                          (l2.empty() ? "; no KV tiers in these points" : ""),
                      cfg});
  if (l2.empty()) r.omitted.emplace_back("KV tiers (L2/L3) against load", "KV tiers are off in every point");
}

}  // namespace

Report build_sweep_report(const std::string& dir, const ojson& results) {
  if (!at(results, {"rows"}).is_array()) throw ReportError(dir + "/results.json: no \"rows\" (not a servesim sweep's results)");
  Report r;
  r.kind = "sweep";
  r.title = "servesim sweep: " + text(at(results, {"grid"})) + " (" + text(at(results, {"points"})) + " points of " + text(at(results, {"scenario"})) + ")";
  const Sweep s = read_rows(dir, results);
  Table t{"Grid", {{"field", "values"}}};
  for (const auto& p : at(results, {"parameters"})) t.rows.push_back({text(p.value("path", ojson())) + (p.value("path", "") == s.load ? " (load)" : ""), p["values"].dump()});
  r.tables.push_back(std::move(t));
  load_charts(r, s);
  nodes_needed(r, s);
  summaries_charts(r, s, dir);
  return r;
}

}  // namespace servesim::report
