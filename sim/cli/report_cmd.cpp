// servesim report: build the report of a folder, write the page (and optionally its data).
#include "sim/cli/report_cmd.hpp"

#include "sim/exporters/report/report.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <filesystem>
#include <tuple>
#include <fstream>

namespace servesim::cli {

namespace {
// An empty --out / --json is refused, not read as the default (as args.cpp's options).
const CLI::Validator kNotEmpty(
    [](std::string& v) { return v.empty() ? std::string("must not be empty (leave the option out for its default)") : std::string(); }, "");
}  // namespace

CLI::App* add_report(CLI::App& app, ReportArgs& a) {
  auto* r = app.add_subcommand("report", "one self-contained HTML report (charts, no network needed) of a run's, a sweep's or a capacity search's output folder");
  r->add_option("dir", a.dir, "a run's output folder (summary.json), a sweep's (results.json) or a capacity search's (capacity.json)")->required();
  r->add_option("--out", a.out, "the HTML file to write (default DIR/report.html)")
      ->check(kNotEmpty);
  r->add_option("--json", a.json, "also write the report's data (Chart.js configurations, tables, omitted charts) to this JSON file")
      ->check(kNotEmpty);
  return r;
}

// An output that would overwrite a file of the folder the report reads (its summary / results /
// capacity JSON, requests.csv, timeline.json: the .json and .csv files under DIR), or the other
// output: its why, else "" (rev27 user review: `--out DIR/summary.json` replaced the run's summary
// with HTML and the next report failed).
static std::string clobbers(const std::string& dir, const std::string& path, const std::string& other) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(path, ec), d = fs::weakly_canonical(dir, ec);
  if (!other.empty() && p == fs::weakly_canonical(other, ec)) return "it is also the other output";
  // (.gz: requests.csv.gz and timeline.json.gz are read too)
  const fs::path ext = p.extension() == ".gz" ? p.stem().extension() : p.extension();
  if (!fs::is_regular_file(p, ec) || (ext != ".json" && ext != ".csv") || p.filename() == "report.json") return "";
  const auto rel = p.lexically_relative(d);
  if (rel.empty() || *rel.begin() == "..") return "";
  return "it is " + rel.string() + ", a file of the output the report reads";
}

int report(const ReportArgs& a) {
  for (const auto& [flag, path, other] : {std::tuple<const char*, std::string, std::string>{"--out", a.out, a.json}, {"--json", a.json, ""}}) {
    if (path.empty()) continue;
    const std::string why = clobbers(a.dir, path, other);
    if (!why.empty()) {
      fmt::print(stderr, "error: report {}: {} would be overwritten: {} (choose another path)\n", flag, path, why);
      return 2;
    }
  }
  report::Report r;
  try {
    r = report::build_report(a.dir);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: report: {}\n", e.what());
    return 2;
  }
  const std::string out = a.out.empty() ? (std::filesystem::path(a.dir) / "report.html").string() : a.out;
  std::ofstream f(out, std::ios::binary);
  f << report::render_html(r);
  if (!f.flush()) {
    fmt::print(stderr, "error: report: cannot write {}\n", out);
    return 2;
  }
  if (!a.json.empty()) {
    std::ofstream j(a.json, std::ios::binary);
    j << report::report_json(r).dump(1) << "\n";
    if (!j.flush()) {
      fmt::print(stderr, "error: report: cannot write {}\n", a.json);
      return 2;
    }
  }
  fmt::print("report: {} ({} charts, {} left out: {}{})\n", out, r.charts.size(), r.omitted.size(),
             r.omitted.empty() ? "none" : r.omitted.front().first, r.omitted.size() > 1 ? ", ..." : "");
  return 0;
}

}  // namespace servesim::cli
