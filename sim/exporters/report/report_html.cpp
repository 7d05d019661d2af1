// servesim report: the self-contained page. Its data (charts as Chart.js configurations, tables,
// omitted charts) is one JSON block; Chart.js and the page script (assets/) are inlined, so the
// page opens with no network. Same report => same bytes.
#include "sim/exporters/report/report.hpp"

#include <filesystem>
#include <string_view>
#include <vector>

namespace servesim::report {

extern const std::string_view kChartJs;   // assets/chart-4.5.1.umd.min.js (embed.cmake)
extern const std::string_view kReportJs;  // assets/report.js

namespace {

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// JSON inside <script>: "</" would end the element early.
std::string script_safe(std::string s) {
  for (size_t k = 0; (k = s.find("</", k)) != std::string::npos; k += 3) s.replace(k, 2, "<\\/");
  return s;
}

// Records uncaught errors and console.error calls before anything else runs (the self-check).
constexpr const char* kErrorHook =
    "window.__servesimCheck={errors:[]};"
    "window.addEventListener('error',function(e){window.__servesimCheck.errors.push(String(e.message||e));});"
    "(function(){var ce=console.error;console.error=function(){window.__servesimCheck.errors.push("
    "Array.prototype.map.call(arguments,String).join(' '));return ce.apply(console,arguments);};})();";

constexpr const char* kStyle =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;max-width:1040px;color:#222}"
    "h1{font-size:1.5em}h2{font-size:1.15em;margin:28px 0 8px}section{margin-bottom:18px}"
    ".caption{color:#555;font-size:.88em;max-width:1000px}table{border-collapse:collapse;font-size:.9em}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;max-width:720px;overflow-wrap:anywhere}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}"
    "#omitted{color:#444;font-size:.92em}#selfcheck{display:none}";

}  // namespace

ojson report_json(const Report& r) {
  ojson charts = ojson::array(), tables = ojson::array(), omitted = ojson::array();
  for (const auto& c : r.charts) charts.push_back({{"id", c.id}, {"title", c.title}, {"caption", c.caption}, {"config", c.config}});
  for (const auto& t : r.tables) tables.push_back({{"title", t.title}, {"rows", t.rows}});
  for (const auto& [t, why] : r.omitted) omitted.push_back({{"title", t}, {"why", why}});
  return {{"kind", r.kind}, {"title", r.title}, {"charts", charts}, {"tables", tables}, {"omitted", omitted}};
}

std::string render_html(const Report& r) {
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + html_escape(r.title) + "</title>\n";
  h += "<style>" + std::string(kStyle) + "</style>\n";
  h += "<script>" + std::string(kErrorHook) + "</script>\n";
  h += "<script>\n" + std::string(kChartJs) + "\n</script>\n</head>\n<body>\n";
  h += "<h1>" + html_escape(r.title) + "</h1>\n";
  h += "<p class=\"caption\">Written by <code>servesim report</code>; charts drawn with Chart.js 4.5.1 (MIT licence), inlined: the file "
       "opens with no network.</p>\n";
  h += "<div id=\"charts\"></div>\n<h2>Charts left out</h2>\n<ul id=\"omitted\"></ul>\n<pre id=\"selfcheck\"></pre>\n";
  h += "<script id=\"report-data\" type=\"application/json\">" + script_safe(report_json(r).dump()) + "</script>\n";
  h += "<script>\n" + std::string(kReportJs) + "\n</script>\n</body>\n</html>\n";
  return h;
}

Report build_report(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw ReportError(dir + ": not a folder");
  // one command's output per folder: two of these files make the folder's kind a guess (rev25: a
  // folder with both summary.json and results.json was reported as a sweep without a word)
  std::vector<std::string> kinds;
  for (const char* f : {"results.json", "summary.json", "capacity.json"})
    if (fs::exists(fs::path(dir) / f)) kinds.push_back(f);
  if (kinds.size() > 1)
    throw ReportError(dir + ": holds " + kinds[0] + " and " + kinds[1] + ", the outputs of two commands (run, sweep, capacity): report one folder per command");
  if (fs::exists(fs::path(dir) / "results.json")) return build_sweep_report(dir, read_json_file((fs::path(dir) / "results.json").string()));
  if (fs::exists(fs::path(dir) / "summary.json")) return build_run_report(dir, read_json_file((fs::path(dir) / "summary.json").string()));
  if (fs::exists(fs::path(dir) / "capacity.json")) return build_capacity_report(dir, read_json_file((fs::path(dir) / "capacity.json").string()));
  throw ReportError(dir + ": neither a run's output (summary.json), a sweep's (results.json) nor a capacity search's (capacity.json)");
}

}  // namespace servesim::report
