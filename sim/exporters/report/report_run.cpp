// servesim report of a run's folder: latency CDFs (requests.csv), per-GPU HBM breakdown, KV
// occupancy over time and transfer volume per link class (timeline.json, summary.json), unit cost.
#include "sim/exporters/report/report.hpp"

#include "scenarios/file_names.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <optional>

namespace fs = std::filesystem;

namespace servesim::report {

namespace {

using Dep = RunDeployment;

std::optional<fs::path> first_existing(const fs::path& dir, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (fs::exists(dir / n)) return dir / n;
  return std::nullopt;
}

void latency_cdfs(Report& r, const std::vector<Dep>& deps) {
  struct Metric {
    const char* key;
    const char* title;
    bool log;
  };
  const Metric metrics[] = {{"ttft", "TTFT", true}, {"tpot", "TPOT", false}, {"e2e", "End-to-end latency", true}};
  std::vector<std::optional<Latencies>> lat;
  std::vector<std::string> missing;
  for (const auto& d : deps) {
    const auto f = first_existing(fs::path(d.dir), {"requests.csv", "requests.csv.gz"});
    if (!f) {  // (a run with --requests none) its lines are missing from every CDF: listed as left out too (rev25)
      lat.emplace_back(), missing.push_back(d.name + " (no requests.csv)");
      r.omitted.emplace_back("TTFT / TPOT / end-to-end CDF lines of " + d.name, "no requests.csv or requests.csv.gz in " + d.dir);
      continue;
    }
    try {
      const ojson& w = at(d.summary, {"window", "warmup_s"});
      lat.emplace_back(read_latencies(f->string(), w.is_number() ? w.get<double>() : 0.0));
    } catch (const ReportError& e) {
      lat.emplace_back(), missing.push_back(d.name + " (" + e.what() + ")");
      // its lines are missing from every CDF: listed among the charts left out, not only in a caption
      r.omitted.emplace_back("TTFT / TPOT / end-to-end CDF lines of " + d.name, e.what());
    }
  }
  for (const auto& m : metrics) {
    ojson ds = ojson::array();
    size_t n_total = 0;
    for (size_t i = 0; i < deps.size(); ++i) {
      if (!lat[i]) continue;
      const auto& v = m.key[0] == 't' ? (m.key[1] == 't' ? lat[i]->ttft_ms : lat[i]->tpot_ms) : lat[i]->e2e_ms;
      std::vector<double> pos;
      for (double x : v)
        if (!m.log || x > 0) pos.push_back(x);
      if (pos.empty()) continue;
      n_total += pos.size();
      ds.push_back(line_dataset(fmt::format("{} ({} requests)", deps[i].name, pos.size()), cdf_points(pos), i));
    }
    const std::string title = fmt::format("{} CDF", m.title);
    if (ds.empty()) {
      r.omitted.emplace_back(title, "no completed request with a " + std::string(m.key) + "_ms value in any requests.csv" +
                                        (missing.empty() ? "" : " (missing or unreadable for: " + fmt::format("{}", fmt::join(missing, ", ")) + ")"));
      continue;
    }
    Chart c{std::string("cdf-") + m.key, title,
            fmt::format("Fraction of completed requests with {} at most x (requests.csv, nearest rank, at most 200 points a line; {} requests){}{}",
                        m.title, n_total, m.log ? "; x on a log scale" : "",
                        missing.empty() ? "" : "; no lines for " + fmt::format("{}", fmt::join(missing, ", "))),
            xy_chart(ds, fmt::format("{} (ms)", m.title), "fraction of requests", m.log, false)};
    c.config["options"]["scales"]["y"]["max"] = 1;
    c.config["options"]["scales"]["y"]["min"] = 0;
    r.charts.push_back(std::move(c));
  }
}

void hbm_breakdown(Report& r, const std::vector<Dep>& deps) {
  // usable = weights + workspace + reserved + KV budget (costmodels/memory); HBM − usable is held back
  struct Part {
    const char* label;
    std::vector<double> v;
  };
  std::vector<std::string> labels;
  std::vector<Part> parts = {{"routed expert weights", {}}, {"other weights (split + whole)", {}}, {"activation workspace", {}},
                             {"reserved (context, buffers)", {}}, {"KV + per-sequence state at peak (KDA, compressor)", {}},
                             {"KV budget not used at peak", {}}, {"held back (HBM − usable)", {}}};
  for (const auto& d : deps)
    for (const char* pool : {"prefill", "decode"}) {
      const ojson& m = at(d.summary, {"memory_per_gpu", pool});
      if (!m.is_object() || !at(m, {"hbm_gb"}).is_number()) continue;
      labels.push_back(d.name + " " + pool);
      const double kv_peak = num(m, {"kv_peak_gb"}), budget = num(m, {"kv_budget_gb"});
      const double vals[] = {num(m, {"routed_expert_weights_gb"}), num(m, {"other_weights_gb"}), num(m, {"activation_workspace_gb"}),
                             num(m, {"reserved_gb"}), kv_peak, std::max(0.0, budget - kv_peak), num(m, {"hbm_gb"}) - num(m, {"usable_gb"})};
      for (size_t k = 0; k < parts.size(); ++k) parts[k].v.push_back(vals[k]);
    }
  if (labels.empty()) {
    r.omitted.emplace_back("HBM per GPU", "no deployment's summary.json has memory_per_gpu");
    return;
  }
  ojson ds = ojson::array();
  for (size_t k = 0; k < parts.size(); ++k) ds.push_back(bar_dataset(parts[k].label, parts[k].v, k));
  r.charts.push_back({"hbm", "HBM per GPU",
                      "One GPU of each pool (summary.json memory_per_gpu): weights, workspace, reserved and the KV budget fill the usable "
                      "HBM; the KV part is the run's peak on the busiest GPU, which includes the fixed per-sequence state (KDA recurrent "
                      "and conv state for K3, compressor state for V4; `servesim plan` gives it per sequence: summary.json does not split it)",
                      bar_chart(labels, ds, "GB per GPU", true)});
}

void kv_over_time(Report& r, const Dep& d, const TimelineSeries& t, size_t index) {
  const std::string title = "KV occupancy over time: " + d.name;
  if (!t.has_prefill && !t.has_decode && !t.has_tiers) {
    r.omitted.emplace_back(title, "timeline.json has no KV counters");
    return;
  }
  auto pts = [&](const std::vector<double>& v) {
    ojson p = ojson::array();
    for (size_t k = 0; k < v.size(); ++k) p.push_back({{"x", t.t_s[k]}, {"y", v[k]}});
    return p;
  };
  ojson ds = ojson::array();
  if (t.has_prefill) ds.push_back(line_dataset("L1 HBM, prefill: KV GB per GPU", pts(t.prefill_kv_gb), 0, false, "y"));
  if (t.has_decode) ds.push_back(line_dataset("L1 HBM, decode: KV GB per GPU", pts(t.decode_kv_gb), 1, false, "y"));
  if (t.has_tiers) {
    ds.push_back(line_dataset("L2 host DRAM: GB, all nodes", pts(t.l2_gb), 2, true, "y2"));
    ds.push_back(line_dataset("L3 storage: GB, all nodes", pts(t.l3_gb), 3, true, "y2"));
  }
  ojson cfg = xy_chart(ds, "simulated time (s)", "HBM KV, GB per GPU (mean over GPUs and instances)");
  if (t.has_tiers) cfg["options"]["scales"]["y2"] = {{"type", "linear"}, {"position", "right"}, {"title", {{"display", true}, {"text", "L2 / L3, GB (all nodes)"}}},
                                                      {"grid", {{"drawOnChartArea", false}}}};
  r.charts.push_back({fmt::format("kv-time-{}", index), title,
                      fmt::format("timeline.json counters, sampled at {} even times {} (the latest value of each instance, averaged over the "
                                  "pool's instances{}){}",
                                  t.t_s.size(), t.span(), t.windowed ? "; each counter starts at the value it had when the window opened" : "",
                                  t.has_tiers ? "; L2 and L3 on the right axis" : "; no KV tiers in this deployment"),
                      cfg});
}

void transfer_volume(Report& r, const std::vector<Dep>& deps, const std::vector<std::optional<TimelineSeries>>& tl) {
  // link classes: P→D KV over the NIC / NVLink (timeline, else one figure from summary.json), GPU→host
  // offloads and host→GPU load-backs (PCIe), host→storage demotions and storage→GPU load-backs
  const char* classes[] = {"KV P→D, inter-node (NIC)", "KV P→D, intra-node (NVLink)", "KV P→D (link not recorded: no timeline)",
                           "offload GPU→host DRAM (PCIe)",  "demote host→storage",          "load-back host→GPU (PCIe)",
                           "load-back storage→GPU"};
  std::vector<std::vector<double>> v(7);
  std::vector<std::string> labels;
  bool any = false;
  for (size_t i = 0; i < deps.size(); ++i) {
    const ojson& s = deps[i].summary;
    labels.push_back(deps[i].name);
    // summary.json's P→D bytes (the window's), split in the proportion of the timeline's slices (rev25:
    // the slices' own bytes, warm-up or a --timeline-window span, were shown as the run's)
    const double pd = num(s, {"kv_transfer", "bytes"});
    const bool split = tl[i] && (tl[i]->kv_bytes_nic + tl[i]->kv_bytes_nvlink) > 0;
    const double nic = split ? tl[i]->kv_bytes_nic / (tl[i]->kv_bytes_nic + tl[i]->kv_bytes_nvlink) : 0;
    const double vals[] = {split ? pd * nic : 0, split ? pd * (1 - nic) : 0, split ? 0 : pd,
                           num(s, {"kv_tiers", "bytes_offload_copies_started"}), num(s, {"kv_tiers", "bytes_demoted_L2_to_L3"}),
                           num(s, {"kv_tiers", "bytes_loaded_from_L2"}), num(s, {"kv_tiers", "bytes_loaded_from_L3"})};
    for (size_t k = 0; k < 7; ++k) v[k].push_back(vals[k] / 1e9), any = any || vals[k] > 0;
  }
  if (!any) {
    r.omitted.emplace_back("Transfer volume per link class", "no KV transfer, offload or load-back bytes in summary.json");
  } else {
    ojson ds = ojson::array();
    for (size_t k = 0; k < 7; ++k)
      if (std::any_of(v[k].begin(), v[k].end(), [](double x) { return x > 0; })) ds.push_back(bar_dataset(classes[k], v[k], k));
    r.charts.push_back({"transfer-volume", "Transfer volume per link class",
                        "Bytes moved, per deployment: prefill→decode KV of the transfers that started in the measured window (summary.json "
                        "kv_transfer.bytes; split between NIC and NVLink in the proportion of timeline.json's KV transfer slices when "
                        "there is one), and KV tier offloads, demotions and load-backs over the whole run, warm-up included "
                        "(summary.json kv_tiers); log scale",
                        bar_chart(labels, ds, "GB moved", false, true)});
  }
  ojson ds = ojson::array();
  std::vector<double> pre, dec, pre_x, dec_x;
  bool a2a = false;
  for (size_t i = 0; i < deps.size(); ++i) {
    const auto& t = tl[i];
    pre.push_back(t ? t->a2a_s_prefill : 0), dec.push_back(t ? t->a2a_s_decode : 0);
    pre_x.push_back(t ? t->a2a_exposed_s_prefill : 0), dec_x.push_back(t ? t->a2a_exposed_s_decode : 0);
    a2a = a2a || (t && (t->a2a_s_prefill + t->a2a_s_decode) > 0);
  }
  if (!a2a) {
    r.omitted.emplace_back("EP all-to-all time per pool", "no timeline.json with all-to-all slices (run without --no-timeline and with EP > 1)");
    return;
  }
  ds.push_back(bar_dataset("prefill: all-to-all + TP all-reduce", pre, 0));
  ds.push_back(bar_dataset("prefill: exposed (not hidden by two-batch overlap)", pre_x, 1));
  ds.push_back(bar_dataset("decode: all-to-all + TP all-reduce", dec, 2));
  ds.push_back(bar_dataset("decode: exposed", dec_x, 3));
  std::string spans;
  for (size_t i = 0; i < deps.size(); ++i)
    if (tl[i]) {
      spans += fmt::format("{}{}: {}", spans.empty() ? "" : "; ", deps[i].name, tl[i]->span());
      // (rev26: with max_step_events 10 the chart said "whole run" over 10 of 4,568 steps)
      if (tl[i]->slices_dropped > 0)
        spans += fmt::format(", but of its {} steps written only: {} more were dropped past timeline.max_step_events, so its "
                             "sums are a lower bound",
                             tl[i]->slices_written, tl[i]->slices_dropped);
    }
  r.charts.push_back({"a2a-time", "EP all-to-all time per pool",
                      "Seconds of communication slices in timeline.json per pool (summed over its instances), and the part the step "
                      "waited for (" + spans + "; summary.json's engine figures cover the measured window); the timeline records "
                      "times, not bytes, of the all-to-all",
                      bar_chart(labels, ds, "seconds in the timeline", false)});
}

void unit_cost(Report& r, const std::vector<Dep>& deps) {
  std::vector<std::string> labels;
  std::vector<double> in, out, all;
  Table t{"Unit cost (summary.json cost)", {{"deployment", "$/GPU-hour", "$ per M input tokens", "$ per M output tokens", "$ per M tokens",
                                             "J per input token", "J per output token"}}};
  auto cell = [](const ojson& c, const char* k) { return c.contains(k) && c[k].is_number() ? fmt::format("{:.4g}", c[k].get<double>()) : std::string("-"); };
  for (const auto& d : deps) {
    const ojson& c = at(d.summary, {"cost"});
    if (!c.is_object() || !at(c, {"usd_per_million_output_tokens"}).is_number()) continue;
    labels.push_back(d.name);
    in.push_back(num(c, {"usd_per_million_input_tokens"})), out.push_back(num(c, {"usd_per_million_output_tokens"}));
    all.push_back(num(c, {"usd_per_million_tokens"}));
    t.rows.push_back({d.name, cell(c, "gpu_hour_usd"), cell(c, "usd_per_million_input_tokens"), cell(c, "usd_per_million_output_tokens"),
                      cell(c, "usd_per_million_tokens"), cell(c, "joules_per_input_token"), cell(c, "joules_per_output_token")});
  }
  if (labels.empty()) {
    r.omitted.emplace_back("Unit cost", "summary.json has no cost figures (a hardware file without gpu_hour_usd, or an older servesim)");
    return;
  }
  ojson ds = ojson::array({bar_dataset("$ per million input tokens (prefill GPUs)", in, 0), bar_dataset("$ per million output tokens (decode GPUs)", out, 1),
                           bar_dataset("$ per million tokens (all GPUs)", all, 2)});
  r.charts.push_back({"unit-cost", "Unit cost", "summary.json cost: the pools' GPU-hours at the hardware file's gpu_hour_usd over the tokens served; log scale",
                      bar_chart(labels, ds, "US$ per million tokens", false, true)});
  r.tables.push_back(std::move(t));
}

void key_table(Report& r, const std::vector<Dep>& deps) {
  Table t{"Deployments (summary.json)", {{"deployment", "model", "hardware", "nodes used", "completed", "TTFT p99 (ms)", "TPOT p99 (ms)",
                                           "goodput (% of finished)", "output tok/s per GPU"}}};
  auto f = [](const ojson& s, std::initializer_list<const char*> k, const char* spec) {
    const ojson& v = at(s, k);
    return v.is_number() ? fmt::format(fmt::runtime(spec), v.get<double>()) : std::string("-");
  };
  for (const auto& d : deps)
    t.rows.push_back({d.name, at(d.summary, {"model"}).is_string() ? d.summary["model"].get<std::string>() : "-",
                      at(d.summary, {"hardware"}).is_string() ? d.summary["hardware"].get<std::string>() : "-", f(d.summary, {"cluster", at(d.summary, {"cluster", "nodes_used"}).is_number() ? "nodes_used" : "nodes"}, "{:.0f}"),
                      f(d.summary, {"requests", "completed"}, "{:.0f}"), f(d.summary, {"latency", "ttft", "p99_ms"}, "{:.1f}"),
                      f(d.summary, {"latency", "tpot", "p99_ms"}, "{:.1f}"),
                      at(d.summary, {"goodput", "fraction_of_finished"}).is_number()
                          ? fmt::format("{:.1f}", 100 * num(d.summary, {"goodput", "fraction_of_finished"}))
                          : std::string("-"),
                      f(d.summary, {"throughput", "output_tokens_per_s_per_gpu"}, "{:.1f}")});
  r.tables.push_back(std::move(t));
}

}  // namespace

Report build_run_report(const std::string& dir, const ojson& summary) {
  std::vector<Dep> deps;
  const ojson& list = at(summary, {"deployments"});
  if (!list.is_array() || list.empty()) throw ReportError(dir + "/summary.json: no \"deployments\" (not a servesim run's summary)");
  for (const auto& d : list) {
    const std::string name = d.contains("deployment") && d["deployment"].is_string() ? d["deployment"].get<std::string>() : "?";
    // the name becomes a folder under `dir`: one that could leave it ("../x", "/abs") is refused,
    // as the scenario reader refuses it (review: a hand-edited summary.json read files outside)
    if (!is_safe_file_name(name)) throw ReportError(dir + "/summary.json: deployment \"" + name + "\": " + safe_file_name_rule());
    deps.push_back({name, d, (fs::path(dir) / name).string()});
  }
  return build_run_report("servesim run: " + (summary.contains("scenario") && summary["scenario"].is_string() ? summary["scenario"].get<std::string>() : dir),
                          deps);
}

Report build_run_report(const std::string& title, const std::vector<RunDeployment>& deps) {
  Report r;
  r.kind = "run";
  r.title = title;
  key_table(r, deps);
  latency_cdfs(r, deps);
  hbm_breakdown(r, deps);
  std::vector<std::optional<TimelineSeries>> tl;
  for (size_t i = 0; i < deps.size(); ++i) {
    const auto f = first_existing(fs::path(deps[i].dir), {"timeline.json", "timeline.json.gz"});
    if (!f) {
      tl.emplace_back();
      r.omitted.emplace_back("KV occupancy over time: " + deps[i].name, "no timeline.json (the run had --no-timeline or timeline.enabled false)");
      continue;
    }
    try {
      tl.emplace_back(read_timeline(f->string()));
    } catch (const ReportError& e) {
      tl.emplace_back();
      r.omitted.emplace_back("KV occupancy over time: " + deps[i].name, e.what());
      continue;
    }
    kv_over_time(r, deps[i], *tl.back(), i);
  }
  transfer_volume(r, deps, tl);
  unit_cost(r, deps);
  return r;
}

}  // namespace servesim::report
