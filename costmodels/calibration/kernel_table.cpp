#include "costmodels/calibration/kernel_table.hpp"
#include "scenarios/json_unique.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace servesim {

namespace fs = std::filesystem;
using nlohmann::json;

double KernelRow::at(const std::string& k) const {
  const auto it = num.find(k);
  if (it == num.end()) throw std::out_of_range("kernel table row (" + variant + "): no shape field \"" + k + "\"");
  return it->second;
}

double KernelRow::get(const std::string& k, double def) const {
  const auto it = num.find(k);
  return it == num.end() ? def : it->second;
}

std::string KernelRow::s(const std::string& k) const {
  const auto it = str.find(k);
  return it == str.end() ? std::string() : it->second;
}


namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open the kernel table");
  std::ostringstream o;
  o << in.rdbuf();
  return o.str();
}

KernelTable parse_table(const std::string& path, const std::string& text, const json& j) {
  KernelTable t;
  t.file = fs::path(path).filename().string();
  t.op = j.value("op", std::string());
  t.commit = j.value("commit", std::string());
  if (j.contains("gpu") && j["gpu"].is_object()) t.gpu = j["gpu"].value("name", std::string());
  t.content_hash = fnv1a64_hex(text);
  if (!j.contains("rows") || !j["rows"].is_array()) throw std::runtime_error(path + ": no \"rows\" array");
  for (const auto& r : j["rows"]) {
    KernelRow k;
    k.variant = r.value("variant", std::string());
    k.us_median = r.at("us_median").get<double>();
    k.us_p10 = r.value("us_p10", k.us_median);
    k.us_p90 = r.value("us_p90", k.us_median);
    k.flops = r.value("flops", 0.0);
    k.bytes = r.value("bytes", 0.0);
    k.commit = r.value("commit", std::string());
    k.timing = r.value("timing", std::string());
    k.us_median_eager = r.value("us_median_eager", 0.0);
    if (r.contains("shape"))
      for (const auto& [key, v] : r["shape"].items()) {
        if (v.is_number()) k.num[key] = v.get<double>();
        else if (v.is_boolean()) k.num[key] = v.get<bool>() ? 1.0 : 0.0;
        else if (v.is_string()) k.str[key] = v.get<std::string>();
      }
    if (r.contains("m_padded_to") && r["m_padded_to"].is_number()) k.num["m_padded_to"] = r["m_padded_to"].get<double>();
    t.rows.push_back(std::move(k));
  }
  return t;
}

}  // namespace

KernelTable load_kernel_table(const std::string& path) {
  const std::string text = read_all(path);
  json j;
  try {
    j = parse_unique_keys<json>(text);  // a key twice in a row is refused, as in every input file
  } catch (const JsonTextError& e) {
    throw std::runtime_error(path + ": " + e.what());
  } catch (const json::parse_error& e) {
    throw std::runtime_error(path + ": malformed JSON (" + std::string(e.what()) + ")");
  }
  if (j.value("schema", std::string()) != "servesim.kernel-table/1")
    throw std::runtime_error(path + ": schema is not servesim.kernel-table/1");
  return parse_table(path, text, j);
}

std::map<std::string, KernelTable> load_kernel_tables(const std::string& dir) {
  std::map<std::string, KernelTable> out;
  if (!fs::is_directory(dir)) throw std::runtime_error(dir + ": not a folder of kernel tables");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& p : files) {
    const std::string text = read_all(p.string());
    json j;
    try {
      j = parse_unique_keys<json>(text);  // one parse; a file that is not a kernel table may repeat keys
    } catch (const JsonTextError& e) {
      // refused only in a kernel table (a key twice: which value counts is undefined; a NUL byte:
      // json::parse reads up to it); other files are skipped
      try {
        const json other = json::parse(text);
        if (other.is_object() && other.value("schema", std::string()) == "servesim.kernel-table/1") throw std::runtime_error(p.string() + ": " + e.what());
      } catch (const json::parse_error&) {
      }
      continue;
    } catch (const json::parse_error&) {
      continue;
    }
    if (!j.is_object() || j.value("schema", std::string()) != "servesim.kernel-table/1") continue;  // not a kernel table: skipped
    KernelTable t = parse_table(p.string(), text, j);
    out.emplace(t.file, std::move(t));
  }
  if (out.empty()) throw std::runtime_error(dir + ": no servesim.kernel-table/1 files");
  return out;
}

}  // namespace servesim
