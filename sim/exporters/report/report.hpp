// servesim report DIR: one self-contained HTML page (Chart.js 4.5.1 inlined, assets/README.md) of a
// run's output folder (summary.json, <deployment>/requests.csv[.gz], <deployment>/timeline.json)
// or a sweep's (results.json, points/<id>/summary.json) or a capacity search's (capacity.json). Every chart is built here as a Chart.js
// configuration (JSON) from the files; a chart whose data is missing is left out with a note
// saying which file or field was absent, never an error. Reads only files: no simulator code.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace servesim::report {

using ojson = nlohmann::ordered_json;

/// One chart: a Chart.js configuration ({type, data, options}) and the words around it.
struct Chart {
  std::string id;       ///< unique in the page, [a-z0-9-]
  std::string title;
  std::string caption;  ///< how the numbers were computed, from which file
  ojson config;
};

/// A table of text cells (the first row is the header).
struct Table {
  std::string title;
  std::vector<std::vector<std::string>> rows;
};

struct Report {
  std::string kind;   ///< "run", "sweep" or "capacity"
  std::string title;
  std::vector<Chart> charts;
  std::vector<Table> tables;
  std::vector<std::pair<std::string, std::string>> omitted;  ///< chart title, why it is not there
};

/// Thrown when DIR is none of a run's, a sweep's or a capacity search's output, or its summary/results file is not
/// valid JSON (the command exits 2 with the message, which names the file).
struct ReportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The report of a run's or a sweep's output folder.
Report build_report(const std::string& dir);
Report build_run_report(const std::string& dir, const ojson& summary);
/// One deployment's summary.json entry and the folder of its requests.csv / timeline.json.
struct RunDeployment {
  std::string name;
  ojson summary;
  std::string dir;
};
/// The run report's charts of these deployments (a sweep draws some of them for chosen points).
Report build_run_report(const std::string& title, const std::vector<RunDeployment>& deps);
Report build_sweep_report(const std::string& dir, const ojson& results);
/// The report of a capacity search's folder (capacity.json): the answer, the nodes at the serving
/// error, every run, each run's p99s against its nodes (report_capacity.cpp).
Report build_capacity_report(const std::string& dir, const ojson& capacity);

/// The page: the report's data as JSON, Chart.js and the page script inlined; no external reference.
std::string render_html(const Report& r);
/// The report's data as the page embeds it (charts, tables, omitted), for tests and --json.
ojson report_json(const Report& r);

// ---- inputs (report_inputs.cpp) -------------------------------------------------------------

/// A CDF as at most `max_points` points {x: value, y: F}: the sorted values at F = k/m, k = 1..m,
/// m = min(n, max_points), each the smallest value v with (#values <= v)/n >= F (nearest rank).
ojson cdf_points(std::vector<double> values, size_t max_points = 200);

/// Latency columns of a requests.csv (or .csv.gz) of completed requests that arrived at or after
/// `warmup_s` (the run's window.warmup_s: the same requests as summary.json's latency figures), in
/// ms: ttft, tpot, e2e (empty cells skipped). Throws ReportError naming the file and line on a file
/// without those columns, a row shorter than the header, or a cell that is not a finite number.
struct Latencies {
  std::vector<double> ttft_ms, tpot_ms, e2e_ms;
};
Latencies read_latencies(const std::string& path, double warmup_s = 0);

/// What report charts use of a timeline.json (sim/exporters/event_writers.cpp writes one event per
/// line): HBM KV per GPU (mean over the pool's instances of each instance's mean GPU), L2/L3 GB,
/// sampled at `samples` evenly spaced times from 0 to the end; KV transfer bytes by link class;
/// all-to-all seconds per pool (the slice, and its exposed part).
struct TimelineSeries {
  std::vector<double> t_s, prefill_kv_gb, decode_kv_gb, l2_gb, l3_gb;
  bool has_prefill = false, has_decode = false, has_tiers = false;
  double kv_bytes_nic = 0, kv_bytes_nvlink = 0;
  double a2a_s_prefill = 0, a2a_s_decode = 0, a2a_exposed_s_prefill = 0, a2a_exposed_s_decode = 0;
  /// the file's --timeline-window (metadata window_start_s / window_end_s, seconds): the samples
  /// span it; windowed = false for a whole-run timeline
  bool windowed = false;
  double window_start_s = 0, window_end_s = 0;
  /// step slices the writer dropped past timeline.max_step_events (metadata step_slices_dropped)
  /// and those it wrote: with drops, the all-to-all sums cover only the written steps
  long long slices_dropped = 0, slices_written = 0;
  /// "over the whole run (warm-up included)" or "over the timeline's window [a, b] s": what the
  /// sums above cover, for captions
  std::string span() const;
};
TimelineSeries read_timeline(const std::string& path, size_t samples = 400);

/// A JSON file, or throws ReportError naming it.
ojson read_json_file(const std::string& path);
/// j[k0][k1]... or null when a key is missing.
const ojson& at(const ojson& j, std::initializer_list<const char*> keys);
/// The number at j[k0][k1]..., or `fallback` when missing or not a number.
double num(const ojson& j, std::initializer_list<const char*> keys, double fallback = 0);

// ---- Chart.js configurations (report_chartjs.cpp) -------------------------------------------

/// The i-th colour of a fixed palette (deterministic output).
std::string colour(size_t i);
/// {label, data, borderColor, ...} of a line through {x, y} points.
ojson line_dataset(const std::string& label, ojson points, size_t colour_index, bool dashed = false, const char* y_axis = nullptr);
/// A line chart over numeric x (linear or logarithmic axes).
ojson xy_chart(ojson datasets, const std::string& x_title, const std::string& y_title, bool x_log = false, bool y_log = false);
/// A bar chart over category labels; `stacked` stacks the datasets.
ojson bar_chart(std::vector<std::string> labels, ojson datasets, const std::string& y_title, bool stacked, bool y_log = false);
ojson bar_dataset(const std::string& label, std::vector<double> values, size_t colour_index);

/// "1.2 GB", "35.0 TB": decimal units for captions and tables.
std::string bytes_text(double bytes);

}  // namespace servesim::report
