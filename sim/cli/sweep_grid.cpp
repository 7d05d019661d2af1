// servesim sweep: grid expansion (dotted JSON paths into the base scenario) and the results table.
#include "sim/cli/sweep_grid.hpp"
#include "costmodels/feasibility.hpp"
#include "scenarios/file_names.hpp"
#include "scenarios/fnv1a64.hpp"

#include "scenarios/json_unique.hpp"
#include "scenarios/scenario.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace servesim::cli {

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& what) { throw std::runtime_error(file + ": " + what); }

ojson read_json(const std::string& path, const std::string& who) {
  std::ifstream in(path);
  if (is_folder(path)) fail(who, std::string(path).append(" is a folder, not a file"));
  if (!in) fail(who, "cannot read " + path);
  try {
    std::stringstream text;
    text << in.rdbuf();
    return parse_unique_keys<ojson>(text.str());
  } catch (const std::exception& e) {
    fail(path, std::string("not valid JSON: ") + e.what());
  }
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream ss(path);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  return parts;
}

// an array index: decimal digits without a leading zero ("01" is refused: it reads as 1, review)
bool is_index(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos && (s.size() == 1 || s[0] != '0');
}

// The field at a dotted path (array elements by index), or nullptr when it does not exist.
ojson* find_field(ojson& root, const std::string& path) {
  ojson* cur = &root;
  for (const auto& part : split_path(path)) {
    if (cur->is_array() && is_index(part)) {
      const size_t i = std::stoul(part);
      if (i >= cur->size()) return nullptr;
      cur = &(*cur)[i];
    } else if (cur->is_object() && cur->contains(part)) {
      cur = &(*cur)[part];
    } else {
      return nullptr;
    }
  }
  return cur;
}

bool same_kind(const ojson& a, const ojson& b) {
  if (a.is_number() && b.is_number()) return !(a.is_number_integer() && b.is_number_float());
  return a.type() == b.type();
}

// Paths in the scenario that are read relative to its folder: made absolute in every point, whose
// file lives elsewhere (the trace; a model or hardware given as a .json file).
// A trace path relative to base_dir whatever its extension; a model or hardware reference (a name
// or a file) resolved as `run` of the base scenario resolves it (rev26 review: a bare name was left
// for the point's run to look up beside points/.tmp-*/ and so fell back to the repository's file
// where the scenario's folder had its own; a .csv trace was left relative). A reference no file
// answers is left as written, for the scenario reader to refuse naming it.
void absolutize(ojson& s, const fs::path& base_dir) {
  if (s.contains("workload") && s["workload"].is_object())
    for (auto& [k, v] : s["workload"].items())
      if ((k == "trace" || k == "path" || k == "file") && v.is_string() && fs::path(v.get<std::string>()).is_relative())
        v = (base_dir / v.get<std::string>()).lexically_normal().string();
  if (s.contains("deployments") && s["deployments"].is_array())
    for (auto& d : s["deployments"])
      for (const char* k : {"model", "hardware"})
        if (d.is_object() && d.contains(k) && d[k].is_string()) try {
            d[k] = resolve_data_file(d[k].get<std::string>(), std::string(k) == "model" ? "models" : "hardware", base_dir.string());
          } catch (const std::exception&) {
          }
}

// A value's identity on an axis: numbers by value (2 and 2.0 are one), integers exactly (two seeds
// above 2^53 stay two: rev25b), other values by their JSON text.
std::string number_key(const ojson& v) {
  if (v.is_number_integer()) return v.dump();
  if (v.is_number_float()) {
    const double x = v.get<double>();
    if (std::floor(x) == x && std::fabs(x) <= 9007199254740992.0) return fmt::format("{}", static_cast<long long>(x));
    return fmt::format("{}", x);
  }
  return v.dump();
}

void read_axes(Grid& g, const ojson& grid, const ojson& base) {
  if (!grid.is_object() || grid.empty()) fail(g.file, "\"grid\" must be a non-empty object of \"field.path\": [values]");
  for (const auto& [path, values] : grid.items()) {
    ojson probe = base;
    const ojson* field = find_field(probe, path);
    if (!field) fail(g.file, "grid field \"" + path + "\": no such field in the scenario " + g.scenario_file);
    if (!values.is_array() || values.empty()) fail(g.file, "grid field \"" + path + "\": values must be a non-empty array");
    // an integer field given a fraction says so (review: "2.5 is a number, the scenario's is a number (64)")
    auto kind = [](const ojson& x) { return x.is_number_integer() ? std::string("an integer") : std::string("a ").append(x.type_name()); };
    for (const auto& v : values)
      if (!same_kind(*field, v))
        fail(g.file, std::string("grid field \"").append(path).append("\": value ").append(v.dump()).append(" is ").append(kind(v)).append(", the scenario's is ")
                         .append(kind(*field)).append(" (").append(field->dump()).append(")"));
    // by the value's JSON text, numbers by their value (rev25: 2 and 2.0 made two identical runs);
    // linear in the axis' length (review)
    std::set<std::string> seen;
    for (const auto& v : values)
      if (!seen.insert(number_key(v)).second)
        fail(g.file, std::string("grid field \"").append(path).append("\": value ").append(v.dump()).append(" appears twice (two points would be the same run)"));
    g.axes.push_back({path, std::vector<ojson>(values.begin(), values.end())});
  }
}

// At most this many points: each is a whole simulation (at ~1 s each, a day of runs); more is
// refused before the points are built (review: a grid of 10^12 points aborted with bad_alloc).
constexpr size_t kMaxGridPoints = 100000;

void expand(Grid& g, const ojson& base) {
  size_t total = 1;
  for (const auto& a : g.axes) {
    if (a.values.size() > kMaxGridPoints / total)
      fail(g.file, std::string("the grid has more than ").append(std::to_string(kMaxGridPoints)).append(" points (the product of the axes' lengths; each point is a run)"));
    total *= a.values.size();
  }
  for (size_t n = 0; n < total; ++n) {
    SweepPoint p;
    char id[32];
    std::snprintf(id, sizeof id, "p%04zu", n);
    p.id = id;
    p.scenario = base;
    size_t rest = n;
    p.params.resize(g.axes.size());
    for (size_t k = g.axes.size(); k-- > 0;) {  // the last axis varies fastest
      const auto& a = g.axes[k];
      p.params[k] = a.values[rest % a.values.size()];
      rest /= a.values.size();
    }
    for (size_t k = 0; k < g.axes.size(); ++k) *find_field(p.scenario, g.axes[k].path) = p.params[k];
    // an axis of paths (a trace, a model or hardware file) is read relative to the base scenario's
    // folder, as the base's own paths and check_points read them (rev26: the point's run read them
    // relative to points/.tmp-*/ and failed every point the check had passed)
    absolutize(p.scenario, fs::absolute(g.scenario_file).parent_path());
    g.points.push_back(std::move(p));
  }
}

std::string csv_cell(const ojson& v) {
  std::string s = v.is_string() ? v.get<std::string>() : v.is_null() ? std::string() : v.dump();
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

ojson at(const ojson& j, std::initializer_list<const char*> keys) {
  const ojson* cur = &j;
  for (const char* k : keys) {
    if (!cur->is_object() || !cur->contains(k)) return nullptr;
    cur = &(*cur)[k];
  }
  return *cur;
}

const std::vector<std::pair<std::string, std::vector<const char*>>>& metric_keys() {
  static const std::vector<std::pair<std::string, std::vector<const char*>>> keys = {
      {"arrived", {"requests", "arrived"}},
      {"completed", {"requests", "completed"}},
      {"rejected", {"requests", "rejected"}},
      {"in_flight", {"requests", "in_flight"}},
      {"ttft_p50_ms", {"latency", "ttft", "p50_ms"}},
      {"ttft_p99_ms", {"latency", "ttft", "p99_ms"}},
      {"tpot_p50_ms", {"latency", "tpot", "p50_ms"}},
      {"tpot_p99_ms", {"latency", "tpot", "p99_ms"}},
      {"goodput_fraction_of_finished", {"goodput", "fraction_of_finished"}},
      {"goodput_requests_per_s", {"goodput", "requests_per_s"}},
      {"goodput_output_tokens_per_s", {"goodput", "output_tokens_per_s"}},
      {"input_tokens_per_s_per_gpu", {"throughput", "input_tokens_per_s_per_gpu"}},
      {"output_tokens_per_s_per_gpu", {"throughput", "output_tokens_per_s_per_gpu"}},
      {"duration_s", {"throughput", "duration_s"}},
  };
  return keys;
}

}  // namespace

// Every point parsed as `run` will parse it, before any run starts (review, twenty-third session: a
// bad value, e.g. "workload.requests": [-10] or a deployment name escaping the output folder,
// surfaced only in each point's run.log, exit 1): the first bad point exits 2 naming the grid file,
// the point and its values; `check` adds the command's own (policy names), and the deployments the
// sweep runs are checked as `run` checks them (layout, node and HBM fit: validate_deployment), so a
// point `run` would refuse with exit 2 is refused here. What only a simulation finds stays a failed point.
void check_points(Grid& g, const std::function<void(const Scenario&)>& check) {
  const std::string base_dir = fs::absolute(g.scenario_file).parent_path().string();
  std::map<std::string, std::string> hashed;  // path -> FNV-1a 64 of its bytes (each file read once)
  auto line = [&](const std::string& what, const std::string& path) {
    if (path.empty()) return std::string();
    auto it = hashed.find(path);
    if (it == hashed.end()) {
      std::string hex;
      try {
        hex = fnv1a64_file(path).fnv1a64;
      } catch (const std::runtime_error&) {
        hex = "unreadable";  // the point's run names the file
      }
      it = hashed.emplace(path, hex).first;
    }
    return what + " " + path + " " + it->second + "\n";
  };
  for (auto& p : g.points) {
    try {
      const Scenario sc = parse_scenario(p.scenario.dump(), g.scenario_file, base_dir);
      p.inputs.clear();
      if (!sc.workload.trace_path.empty()) p.inputs += line("trace", sc.workload.trace_path);
      const ojson& ds = p.scenario.at("deployments");
      for (size_t i = 0; i < sc.deployments.size() && i < ds.size(); ++i) {
        p.inputs += line("model", resolve_data_file(ds[i].at("model").get<std::string>(), "models", base_dir));
        p.inputs += line("hardware", resolve_data_file(ds[i].at("hardware").get<std::string>(), "hardware", base_dir));
        p.inputs += line("fitted", sc.deployments[i].gpu.fitted_models_path);
      }
      if (check) check(sc);
      if (const std::string why = never_ending_workload(sc); !why.empty()) throw std::invalid_argument(why);
      // the deployments this sweep runs, as `run` checks them before simulating (layout, node and
      // HBM fit: rev25 found "decode.ep": [7] failing at run time, exit 1) and "only" still naming
      // one of them (a grid that renames it failed every point)
      bool only_found = g.only.empty();
      for (size_t i = 0; i < sc.deployments.size(); ++i) {
        if (!g.only.empty() && sc.deployments[i].name != g.only) continue;
        only_found = true;
        validate_deployment(sc.deployments[i], "deployments[" + std::to_string(i) + "]");
      }
      if (!only_found) throw std::invalid_argument("\"only\": no deployment \"" + g.only + "\" in this point (does the grid rename it?)");
    } catch (const std::exception& e) {
      std::string values;
      for (size_t k = 0; k < g.axes.size(); ++k) values.append(k ? ", " : "").append(g.axes[k].path).append(" = ").append(p.params[k].dump());
      fail(g.file, "point " + p.id + " (" + values + "): " + e.what());
    }
  }
}

Grid load_grid(const std::string& path, const std::function<void(const Scenario&)>& check) {
  Grid g;
  g.file = path;
  const ojson doc = read_json(path, path);
  if (!doc.is_object() || !doc.contains("scenario") || !doc["scenario"].is_string())
    fail(path, "needs \"scenario\": the base scenario file (relative to the grid file)");
  for (const auto& [k, v] : doc.items())
    if (k != "scenario" && k != "grid" && k != "only" && k != "description" && k != "_comment") fail(path, "unknown key \"" + k + "\"");
  const fs::path grid_dir = fs::path(path).parent_path();
  const fs::path sc = doc["scenario"].get<std::string>();
  g.scenario_file = (sc.is_absolute() ? sc : (grid_dir / sc)).lexically_normal().string();
  if (doc.contains("only")) {
    if (!doc["only"].is_string()) fail(path, std::string("\"only\" must be a deployment's name (a string), got ").append(doc["only"].dump()));
    g.only = doc["only"].get<std::string>();
    if (g.only.empty()) fail(path, "\"only\" is empty: name a deployment, or leave the key out to run every deployment");
  }
  ojson base = read_json(g.scenario_file, path);
  if (!g.only.empty()) {  // a name no deployment has would fail every point (review): refused here
    std::string names;
    bool found = false;
    if (base.contains("deployments") && base["deployments"].is_array())
      for (const auto& d : base["deployments"])
        if (d.is_object() && d.contains("name") && d["name"].is_string()) {
          names += (names.empty() ? "" : ", ") + d["name"].get<std::string>();
          found = found || d["name"].get<std::string>() == g.only;
        }
    if (!found) fail(path, std::string("\"only\": no deployment \"").append(g.only).append("\" in ").append(g.scenario_file).append(" (it has: ").append(names).append(")"));
  }
  absolutize(base, fs::absolute(g.scenario_file).parent_path());
  read_axes(g, doc.contains("grid") ? doc["grid"] : ojson(), base);
  // an axis over a deployment "only" leaves out changes no run (rev25: two identical rows, no word)
  if (!g.only.empty())
    for (const auto& a : g.axes) {
      if (a.path.rfind("deployments.", 0) != 0) continue;
      const std::string idx = a.path.substr(12, a.path.find('.', 12) == std::string::npos ? std::string::npos : a.path.find('.', 12) - 12);
      const size_t k = static_cast<size_t>(std::stoul(idx));  // read_axes checked it is an index of the array
      const ojson& d = base["deployments"][k];
      if (d.contains("name") && d["name"].is_string() && d["name"].get<std::string>() != g.only)
        fail(path, std::string("grid field \"").append(a.path).append("\" varies deployment \"").append(d["name"].get<std::string>())
                       .append("\", which \"only\": \"").append(g.only).append("\" leaves out (the points would be the same run)"));
    }
  expand(g, base);
  check_points(g, check);
  return g;
}

ojson point_rows(const Grid& g, const SweepPoint& p, const ojson& summary, bool ok) {
  ojson rows = ojson::array();
  const ojson deps = ok && summary.contains("deployments") ? summary["deployments"] : ojson::array({ojson::object()});
  for (const auto& d : deps) {
    ojson row;
    row["point"] = p.id;
    for (size_t k = 0; k < g.axes.size(); ++k) row[g.axes[k].path] = p.params[k];
    row["status"] = ok ? "ok" : "failed";
    row["deployment"] = at(d, {"deployment"});
    for (const auto& [name, keys] : metric_keys()) {
      ojson v = d;
      for (const char* k : keys) v = v.is_object() && v.contains(k) ? v[k] : ojson();
      row[name] = v;
    }
    rows.push_back(row);
  }
  return rows;
}

std::string rows_csv(const Grid& g, const ojson& rows) {
  std::string out = "point";
  for (const auto& a : g.axes) out.append(",").append(csv_cell(a.path));
  out += ",status,deployment";
  for (const auto& [name, keys] : metric_keys()) out.append(",").append(name);
  out += "\n";
  for (const auto& r : rows) {
    bool first = true;
    for (const auto& [k, v] : r.items()) {
      if (!first) out.push_back(',');
      out.append(csv_cell(v));
      first = false;
    }
    out += "\n";
  }
  return out;
}

}  // namespace servesim::cli
