// servesim report: Chart.js 4 configurations as JSON (https://www.chartjs.org/docs/4.5.1/): line
// charts over numeric axes and bar charts over categories, with a fixed palette.
#include "sim/exporters/report/report.hpp"

namespace servesim::report {

std::string colour(size_t i) {
  // Okabe-Ito colour-blind-safe palette, then darker variants
  static const char* p[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
                            "#004C7A", "#8F3F00", "#006B4E", "#8A5170", "#9A6B00", "#3A7A9E", "#555555", "#A39B2C"};
  return p[i % (sizeof p / sizeof *p)];
}

ojson line_dataset(const std::string& label, ojson points, size_t colour_index, bool dashed, const char* y_axis) {
  ojson d = {{"label", label},      {"data", std::move(points)}, {"borderColor", colour(colour_index)}, {"backgroundColor", colour(colour_index)},
             {"borderWidth", 2},    {"pointRadius", 0},          {"spanGaps", false},                   {"fill", false},
             {"stepped", false},    {"tension", 0}};
  if (dashed) d["borderDash"] = {6, 4};
  if (y_axis) d["yAxisID"] = y_axis;
  return d;
}

namespace {

ojson axis(const std::string& title, bool log, bool stacked = false) {
  ojson a = {{"type", log ? "logarithmic" : "linear"}, {"title", {{"display", true}, {"text", title}}}};
  if (stacked) a["stacked"] = true;
  return a;
}

ojson base_options() {
  return {{"animation", false},
          {"responsive", false},
          {"plugins", {{"legend", {{"position", "bottom"}}}}}};
}

}  // namespace

ojson xy_chart(ojson datasets, const std::string& x_title, const std::string& y_title, bool x_log, bool y_log) {
  for (auto& d : datasets)
    if (!d.contains("pointRadius") || d["pointRadius"] == 0) d["pointRadius"] = d["data"].size() <= 40 ? 3 : 0;
  ojson o = base_options();
  o["scales"] = {{"x", axis(x_title, x_log)}, {"y", axis(y_title, y_log)}};
  o["interaction"] = {{"mode", "nearest"}, {"intersect", false}};
  return {{"type", "line"}, {"data", {{"datasets", std::move(datasets)}}}, {"options", o}};
}

ojson bar_dataset(const std::string& label, std::vector<double> values, size_t colour_index) {
  ojson data = ojson::array();
  for (double v : values) data.push_back(v);
  return {{"label", label}, {"data", data}, {"backgroundColor", colour(colour_index)}, {"borderColor", colour(colour_index)}, {"borderWidth", 1}};
}

ojson bar_chart(std::vector<std::string> labels, ojson datasets, const std::string& y_title, bool stacked, bool y_log) {
  ojson o = base_options();
  ojson x = {{"type", "category"}};
  if (stacked) x["stacked"] = true;
  o["scales"] = {{"x", x}, {"y", axis(y_title, y_log, stacked)}};
  return {{"type", "bar"}, {"data", {{"labels", labels}, {"datasets", std::move(datasets)}}}, {"options", o}};
}

}  // namespace servesim::report
