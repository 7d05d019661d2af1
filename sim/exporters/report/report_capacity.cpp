// servesim report of a capacity search's folder (capacity.json; README "servesim capacity"): the
// answer and its band, the nodes at the serving error, every run as a table, and each run's TTFT /
// TPOT p99 against its nodes beside the SLO's bounds.
#include "sim/exporters/report/report.hpp"

#include <fmt/format.h>

#include <cmath>

namespace servesim::report {

namespace {

std::string cell(const ojson& v, const char* spec = "{:.3f}") {
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) return fmt::format(fmt::runtime(spec), v.get<double>());
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  return "-";
}

std::string factors(const ojson& r) {
  const double k = num(r, {"kernel_factor"}, 1), p = num(r, {"step_factors", "prefill"}, 1), dl = num(r, {"step_factors", "decode_large"}, 1),
               ds = num(r, {"step_factors", "decode_small"}, 1);
  if (k == 1 && p == 1 && dl == 1 && ds == 1) return "-";
  std::string s;
  if (k != 1) s += fmt::format("kernels x{:.3f}", k);
  if (p != 1 || dl != 1 || ds != 1) s += fmt::format("{}steps x{:.3f} / x{:.3f} / x{:.3f}", s.empty() ? "" : ", ", p, dl, ds);
  return s;
}

// p99 against nodes, one dataset for the runs that met the SLO and one for those that missed (no
// lines between points), and the bound as a dashed line across the nodes tried.
ojson p99_chart(const ojson& runs, const char* key, double scale, double bound, const std::string& y_title) {
  ojson met = ojson::array(), missed = ojson::array();
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& r : runs) {
    const ojson& v = at(r, {key});
    if (!v.is_number() || !at(r, {"nodes"}).is_number()) continue;
    const double n = r["nodes"].get<double>();
    lo = std::min(lo, n), hi = std::max(hi, n);
    (r.value("meets_slo", false) ? met : missed).push_back({{"x", n}, {"y", v.get<double>() * scale}});
  }
  ojson ds = ojson::array();
  ojson a = line_dataset("met the SLO", met, 2), b = line_dataset("missed", missed, 3);
  for (ojson* d : {&a, &b}) (*d)["showLine"] = false, (*d)["pointRadius"] = 4;
  ds.push_back(a), ds.push_back(b);
  if (std::isfinite(lo) && bound > 0) ds.push_back(line_dataset("SLO bound", ojson::array({{{"x", lo}, {"y", bound * scale}}, {{"x", hi}, {"y", bound * scale}}}), 0, true));
  return xy_chart(ds, "nodes (both pools)", y_title, false, true);
}

}  // namespace

Report build_capacity_report(const std::string& dir, const ojson& c) {
  Report r;
  r.kind = "capacity";
  r.title = fmt::format("servesim capacity: {} ({})", cell(at(c, {"deployment"})), dir);
  const ojson& a = at(c, {"answer"});
  Table ans{"Answer (capacity.json)", {{"found", "nodes", "prefill x decode instances", "attn TP", "decode batch limit", "TTFT p99 (s)",
                                         "TPOT p99 (ms)", "requests in the window", "band p10-p90 (nodes)"}}};
  const ojson& b = at(c, {"band"});
  if (!at(c, {"found"}).is_boolean()) throw ReportError(dir + "/capacity.json: found: must be true or false (got " + at(c, {"found"}).dump() + ")");
  if (!c.value("found", false)) {
    // why, from the configurations searched: bound by one request's latency, or not within the node bound
    std::string why;
    for (const auto& cf : at(c, {"configurations"}))
      if (cf.is_object())
        why += (why.empty() ? "" : "; ") + (cf.contains("why") ? cell(cf["why"])
                                                               : "attn TP " + cell(at(cf, {"attn_tp"})) + ", decode batch limit " +
                                                                     cell(at(cf, {"max_running"})) + ": not within the node bound");
    ans.rows.push_back({"no: no configuration met the SLO" + (why.empty() ? std::string(" (every run below says why)") : ": " + why), "-", "-", "-", "-",
                        "-", "-", "-", "-"});
  } else {
    ans.rows.push_back({cell(at(c, {"found"})), cell(at(a, {"nodes"})), cell(at(a, {"prefill_instances"})) + " x " + cell(at(a, {"decode_instances"})),
                      cell(at(a, {"attn_tp"})), cell(at(a, {"max_running"})), cell(at(a, {"ttft_p99_s"})),
                      at(a, {"tpot_p99_s"}).is_number() ? fmt::format("{:.1f}", 1e3 * a["tpot_p99_s"].get<double>()) : "-", cell(at(a, {"arrived"})),
                      cell(at(b, {"nodes_p10"})) + " - " + cell(at(b, {"nodes_p90"}))});
  }
  r.tables.push_back(std::move(ans));
  const ojson& se = at(c, {"nodes_at_serving_error"});
  if (se.is_object() && se.contains("least")) {
    Table t{"At the engine's error against published deployments (nodes_at_serving_error)", {{"end", "step factors (prefill / decode > 32 / <= 32)", "nodes", "what was found"}}};
    for (const char* end : {"least", "largest"}) {
      const ojson& e = at(se, {end});
      t.rows.push_back({end, fmt::format("x{:.3f} / x{:.3f} / x{:.3f}", num(e, {"step_factors", "prefill"}, 1), num(e, {"step_factors", "decode_large"}, 1),
                                         num(e, {"step_factors", "decode_small"}, 1)),
                        at(e, {"nodes"}).is_number() ? cell(e["nodes"]) : "none met up to " + cell(at(e, {"candidates_missed_up_to"})), cell(at(e, {"text"}))});
    }
    r.tables.push_back(std::move(t));
  }
  const ojson& runs = at(c, {"runs"});
  // a run's figures are numbers (a p99 may be null: no finished request); anything else is refused,
  // naming the field (rev25: "abc" and -5 nodes were taken, and the run left the charts unsaid)
  if (runs.is_array())
    for (size_t i = 0; i < runs.size(); ++i) {
      auto bad = [&](const char* k, const std::string& why) {
        throw ReportError(dir + "/capacity.json: runs[" + std::to_string(i) + "]." + k + ": " + why + " (got " + at(runs[i], {k}).dump() + ")");
      };
      if (!at(runs[i], {"meets_slo"}).is_boolean()) bad("meets_slo", "must be true or false");
      const ojson& n = at(runs[i], {"nodes"});
      if (!n.is_number_integer() || n.get<long long>() < 1) bad("nodes", "must be a whole number of nodes, at least 1");
      for (const char* k : {"ttft_p99_s", "tpot_p99_s"}) {
        const ojson& v = at(runs[i], {k});
        if (!v.is_null() && (!v.is_number() || v.get<double>() < 0)) bad(k, "must be seconds (a number >= 0) or null");
      }
    }
  if (!runs.is_array() || runs.empty()) {
    r.omitted.push_back({"runs", "capacity.json has no \"runs\""});
    return r;
  }
  Table t{"Every run (capacity.json runs, in the order they finished)",
          {{"prefill x decode", "nodes", "attn TP", "batch limit", "seed", "factors", "TTFT p99 (s)", "TPOT p99 (ms)", "requests", "verdict"}}};
  for (const auto& x : runs)
    t.rows.push_back({cell(at(x, {"prefill_instances"})) + " x " + cell(at(x, {"decode_instances"})), cell(at(x, {"nodes"})), cell(at(x, {"attn_tp"})),
                      cell(at(x, {"max_running"})), cell(at(x, {"seed"})), factors(x), cell(at(x, {"ttft_p99_s"})),
                      at(x, {"tpot_p99_s"}).is_number() ? fmt::format("{:.1f}", 1e3 * x["tpot_p99_s"].get<double>()) : "-", cell(at(x, {"arrived"})),
                      x.value("meets_slo", false) ? "meets" : "misses: " + cell(at(x, {"missed"}))});
  r.tables.push_back(std::move(t));
  const double ttft = num(c, {"asked", "slo", "ttft_p99_s"}), tpot = num(c, {"asked", "slo", "tpot_p99_s"});
  r.charts.push_back({"capacity-ttft", "TTFT p99 of every run against its nodes",
                      "capacity.json runs: TTFT p99 counting the requests in flight at the end (README \"servesim capacity\"), runs with kernel "
                      "or step factors included; the dashed line is the SLO's bound",
                      p99_chart(runs, "ttft_p99_s", 1.0, ttft, "TTFT p99 (s)")});
  r.charts.push_back({"capacity-tpot", "TPOT p99 of every run against its nodes", "capacity.json runs; the dashed line is the SLO's bound",
                      p99_chart(runs, "tpot_p99_s", 1e3, tpot, "TPOT p99 (ms)")});
  return r;
}

}  // namespace servesim::report
