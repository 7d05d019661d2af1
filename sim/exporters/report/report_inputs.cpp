// servesim report: reading a run's files (JSON, requests.csv[.gz], timeline.json) into the series
// the charts draw.
#include "sim/exporters/report/report.hpp"

#include "scenarios/json_unique.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace servesim::report {

ojson read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ReportError(path + ": cannot be read");
  try {
    std::ostringstream os;
    os << in.rdbuf();
    const std::string text = os.str();
    refuse_nul_bytes(text);  // json::parse would stop at one (json_unique.hpp)
    return ojson::parse(text);
  } catch (const std::exception& e) {
    throw ReportError(path + ": not valid JSON: " + e.what());
  }
}

const ojson& at(const ojson& j, std::initializer_list<const char*> keys) {
  static const ojson null_value;
  const ojson* cur = &j;
  for (const char* k : keys) {
    if (!cur->is_object() || !cur->contains(k)) return null_value;
    cur = &(*cur)[k];
  }
  return *cur;
}

double num(const ojson& j, std::initializer_list<const char*> keys, double fallback) {
  const ojson& v = at(j, keys);
  return v.is_number() ? v.get<double>() : fallback;
}

namespace {

double round_to(double x, int decimals) {
  const double s = std::pow(10.0, decimals);
  return std::round(x * s) / s;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') cur += '"', ++i;
      else if (c == '"') quoted = false;
      else cur += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur), cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// Lines of a plain or gzip-compressed text file (zlib reads both).
class Lines {
 public:
  explicit Lines(const std::string& path) : f_(gzopen(path.c_str(), "rb")) {
    if (!f_) throw ReportError(path + ": cannot be read");
  }
  ~Lines() { gzclose(f_); }
  Lines(const Lines&) = delete;
  Lines& operator=(const Lines&) = delete;
  /// The next line without its '\n'; false at the end. Read by gzread, not gzgets, so that a NUL
  /// byte stays in the line (gzgets' C string ended at it and glued the next line on: review).
  bool next(std::string& line) {
    line.clear();
    for (;;) {
      if (pos_ == len_) {
        const int n = gzread(f_, buf_, sizeof buf_);
        if (n <= 0) return !line.empty();
        pos_ = 0, len_ = static_cast<size_t>(n);
      }
      const char* nl = static_cast<const char*>(std::memchr(buf_ + pos_, '\n', len_ - pos_));
      const size_t end = nl ? static_cast<size_t>(nl - buf_) : len_;
      line.append(buf_ + pos_, end - pos_);
      pos_ = nl ? end + 1 : len_;
      if (nl) return true;
    }
  }

 private:
  gzFile f_;
  char buf_[65536];
  size_t pos_ = 0, len_ = 0;
};

}  // namespace

ojson cdf_points(std::vector<double> values, size_t max_points) {
  ojson pts = ojson::array();
  if (values.empty() || max_points == 0) return pts;
  std::sort(values.begin(), values.end());
  const size_t n = values.size(), m = std::min(n, max_points);
  for (size_t k = 1; k <= m; ++k) {
    const double f = static_cast<double>(k) / static_cast<double>(m);
    const size_t rank = static_cast<size_t>(std::ceil(f * static_cast<double>(n) - 1e-9));  // 1-based nearest rank
    pts.push_back({{"x", round_to(values[std::min(n, std::max<size_t>(rank, 1)) - 1], 3)}, {"y", round_to(f, 5)}});
  }
  return pts;
}

Latencies read_latencies(const std::string& path, double warmup_s) {
  Lines in(path);
  std::string line;
  if (!in.next(line)) throw ReportError(path + ": empty (no header)");
  // json_unique.hpp's rule, for CSV: a NUL byte is refused with its line and column
  auto refuse_nul = [&](long line_no) {
    if (const size_t at = line.find('\0'); at != std::string::npos)
      throw ReportError(path + ":" + std::to_string(line_no) + ": a NUL byte (U+0000) at column " + std::to_string(at + 1));
  };
  refuse_nul(1);
  const auto header = split_csv(line);
  auto col = [&](const char* name) -> long {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) throw ReportError(path + ": no column \"" + std::string(name) + "\" in the header");
    return it - header.begin();
  };
  const long status = col("status"), arrival = col("arrival_s"), ttft = col("ttft_ms"), tpot = col("tpot_ms"), e2e = col("e2e_ms");
  Latencies l;
  long line_no = 1;
  auto number = [&](const std::vector<std::string>& f, long i) {
    char* end = nullptr;
    const double v = std::strtod(f[static_cast<size_t>(i)].c_str(), &end);
    if (end == f[static_cast<size_t>(i)].c_str() || *end != '\0' || !std::isfinite(v))
      throw ReportError(path + ":" + std::to_string(line_no) + ": column " + header[static_cast<size_t>(i)] + ": \"" + f[static_cast<size_t>(i)] + "\" is not a number");
    return v;
  };
  auto take = [&](const std::vector<std::string>& f, long i, std::vector<double>& out) {
    if (!f[static_cast<size_t>(i)].empty()) out.push_back(number(f, i));
  };
  while (in.next(line)) {
    ++line_no;
    refuse_nul(line_no);
    const auto f = split_csv(line);
    if (f.size() != header.size())
      throw ReportError(path + ":" + std::to_string(line_no) + ": " + std::to_string(f.size()) + " fields, the header has " + std::to_string(header.size()));
    if (f[static_cast<size_t>(status)] != "completed" || number(f, arrival) < warmup_s) continue;
    take(f, ttft, l.ttft_ms), take(f, tpot, l.tpot_ms), take(f, e2e, l.e2e_ms);
  }
  return l;
}

namespace {

struct Counter {
  double t_s;
  int pool;      // 0 prefill, 1 decode, 2 tiers
  int instance;  // pool instance; tiers: 0
  double a, b;   // KV GB per GPU (mean) | L2 GB, L3 GB
};

// The pool's mean over instances of each one's latest value, sampled at `t`.
void resample(const std::vector<Counter>& cs, const std::vector<double>& ts, TimelineSeries& out) {
  std::map<int, double> last[2];
  double l2 = 0, l3 = 0;
  size_t i = 0;
  for (double t : ts) {
    for (; i < cs.size() && cs[i].t_s <= t; ++i) {
      const auto& c = cs[i];
      if (c.pool < 2) last[c.pool][c.instance] = c.a;
      else l2 = c.a, l3 = c.b;
    }
    for (int p = 0; p < 2; ++p) {
      double sum = 0;
      for (const auto& [_, v] : last[p]) sum += v;
      (p == 0 ? out.prefill_kv_gb : out.decode_kv_gb).push_back(last[p].empty() ? 0.0 : round_to(sum / last[p].size(), 4));
    }
    out.l2_gb.push_back(round_to(l2, 4));
    out.l3_gb.push_back(round_to(l3, 4));
  }
}

}  // namespace

// The whole file (plain or gzip) as one string.
static std::string slurp_maybe_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw ReportError(path + ": cannot be read");
  std::string text;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  const bool bad = n < 0;
  gzclose(f);
  if (bad) throw ReportError(path + ": cannot be read (gzip error)");
  return text;
}

// Parsed as JSON (nlohmann), whatever its layout: each element of "traceEvents" is read when its
// object ends and then dropped (a parser callback), so a timeline of millions of events is never
// held as one document; "metadata" is kept.
TimelineSeries read_timeline(const std::string& path, size_t samples) {
  const std::string text = slurp_maybe_gz(path);
  TimelineSeries s;
  std::vector<Counter> cs;
  double end_s = 0;
  bool in_events = false;
  auto event = [&](const ojson& e) {
    const std::string ph = e.value("ph", ""), name = e.value("name", ""), cat = e.value("cat", "");
    const double t = num(e, {"ts"}) / 1e6;
    if (ph == "C" && name == "KV GB") {
      cs.push_back({t, 2, 0, num(e, {"args", "L2 host DRAM"}), num(e, {"args", "L3 storage"})});
      s.has_tiers = true;
    } else if (ph == "C" && name.find(" KV GB per GPU") != std::string::npos) {
      const int pool = name.rfind("prefill", 0) == 0 ? 0 : 1;
      (pool == 0 ? s.has_prefill : s.has_decode) = true;
      cs.push_back({t, pool, static_cast<int>(num(e, {"tid"})), num(e, {"args", "mean"}), 0});
    } else if (ph == "b" && cat == "kv") {
      (num(e, {"tid"}) == 0 ? s.kv_bytes_nic : s.kv_bytes_nvlink) += num(e, {"args", "bytes"});
    } else if (ph == "X" && num(e, {"pid"}) == 3 && name.size() > 11 && name.compare(name.size() - 11, 11, " all-to-all") == 0) {
      const bool prefill = name.rfind("prefill", 0) == 0;
      (prefill ? s.a2a_s_prefill : s.a2a_s_decode) += num(e, {"dur"}) / 1e6;
      (prefill ? s.a2a_exposed_s_prefill : s.a2a_exposed_s_decode) += num(e, {"args", "exposed_ms"}) / 1e3;
      end_s = std::max(end_s, t + num(e, {"dur"}) / 1e6);
    }
    if (ph != "M") end_s = std::max(end_s, t);
  };
  // depth 0: the document; 1: its members ("traceEvents", "metadata"); 2: the events
  const ojson::parser_callback_t cb = [&](int depth, ojson::parse_event_t ev, ojson& parsed) {
    if (depth == 1 && ev == ojson::parse_event_t::key) in_events = parsed == "traceEvents";
    if (depth == 2 && in_events && ev == ojson::parse_event_t::object_end) {
      event(parsed);
      return false;  // read; not kept
    }
    return true;
  };
  ojson doc;
  try {
    refuse_nul_bytes(text);  // json::parse would stop at one (json_unique.hpp)
    doc = ojson::parse(text, cb);
  } catch (const std::exception& e) {
    throw ReportError(path + ": not valid JSON: " + e.what());
  }
  if (!doc.is_object() || !doc.contains("traceEvents")) throw ReportError(path + ": no \"traceEvents\" array (not a servesim timeline)");
  end_s = std::max(end_s, num(doc, {"metadata", "end_s"}));
  s.slices_dropped = static_cast<long long>(num(doc, {"metadata", "step_slices_dropped"}));
  s.slices_written = static_cast<long long>(num(doc, {"metadata", "step_slices_written"}));
  // a --timeline-window file: sample its window only (before it the counters are not in the file)
  double from = 0, to = end_s;
  if (at(doc, {"metadata", "window_start_s"}).is_number()) {
    s.windowed = true;
    s.window_start_s = from = std::min(num(doc, {"metadata", "window_start_s"}), end_s);
    s.window_end_s = to = std::clamp(num(doc, {"metadata", "window_end_s"}, end_s), from, end_s);
  }
  std::stable_sort(cs.begin(), cs.end(), [](const Counter& x, const Counter& y) { return x.t_s < y.t_s; });
  if (samples < 2) samples = 2;
  for (size_t k = 0; k < samples; ++k)
    s.t_s.push_back(round_to(from + (to - from) * static_cast<double>(k) / static_cast<double>(samples - 1), 3));
  resample(cs, s.t_s, s);
  return s;
}

std::string TimelineSeries::span() const {
  return windowed ? fmt::format("over the timeline's --timeline-window [{:g}, {:g}] s only", window_start_s, window_end_s)
                  : std::string("over the whole run, warm-up included");
}

std::string bytes_text(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (std::fabs(bytes) >= 1000 && u < 5) bytes /= 1000, ++u;
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(u == 0 ? 0 : 1);
  o << bytes << " " << units[u];
  return o.str();
}

}  // namespace servesim::report
