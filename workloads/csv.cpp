#include "workloads/csv.hpp"

#include <charconv>
#include <cmath>
#include <sstream>

namespace servesim {

namespace {
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '"' || s.front() == '\r' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '"' || s.back() == '\r' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
// a bound as written in a message: 0, 1e+12 (not std::to_string's 0.000000)
std::string fmt_num(double x) {
  std::ostringstream o;
  o << x;
  return o.str();
}
}  // namespace

void refuse_nul(std::string_view text, const std::string& file, long line) {
  const size_t at = text.find('\0');
  if (at != std::string_view::npos) throw TraceError(file, line, "a NUL byte (U+0000) at column " + std::to_string(at + 1));
}

std::vector<std::string_view> split_csv(std::string_view line) {
  // RFC 4180: a field in double quotes may hold commas ("" is a quote inside it; the view keeps it
  // doubled, which no numeric column accepts). rev25d: "1,087" was split into two columns, which
  // shifted the row silently. An unterminated quote runs to the end of the line.
  std::vector<std::string_view> out;
  size_t start = 0;
  bool quoted = false;
  for (size_t i = 0; i <= line.size(); ++i) {
    if (i < line.size() && line[i] == '"') {
      if (quoted && i + 1 < line.size() && line[i + 1] == '"') ++i;  // "" inside a quoted field
      else quoted = !quoted;
      continue;
    }
    if (i == line.size() || (line[i] == ',' && !quoted)) {
      out.push_back(trim(line.substr(start, i - start)));
      start = i + 1;
    }
  }
  return out;
}

long long csv_int(std::string_view f, const std::string& file, long line, std::string_view column, long long min, long long max) {
  long long v = 0;
  const auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
  const bool whole = p == f.data() + f.size() && !f.empty();
  if (ec == std::errc::result_out_of_range && whole)
    throw TraceError(file, line, "column " + std::string(column) + ": must be ≤ " + std::to_string(max) + ", got " + std::string(f));
  if (ec != std::errc() || !whole)
    throw TraceError(file, line, "column " + std::string(column) + ": expected an integer, got \"" + std::string(f) + "\"");
  if (v < min) throw TraceError(file, line, "column " + std::string(column) + ": must be ≥ " + std::to_string(min) + ", got " + std::to_string(v));
  if (v > max) throw TraceError(file, line, "column " + std::string(column) + ": must be ≤ " + std::to_string(max) + ", got " + std::to_string(v));
  return v;
}

double csv_double(std::string_view f, const std::string& file, long line, std::string_view column, double min, double max) {
  double v = 0;
  const auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
  // from_chars reads "inf" and "nan" too, and reports 1e400 as out of range: all refused here
  if (ec != std::errc() || p != f.data() + f.size() || f.empty() || !std::isfinite(v))
    throw TraceError(file, line, "column " + std::string(column) + ": expected a finite number, got \"" + std::string(f) + "\"");
  if (v < min) throw TraceError(file, line, "column " + std::string(column) + ": must be ≥ " + fmt_num(min) + ", got " + std::string(f));
  if (v > max) throw TraceError(file, line, "column " + std::string(column) + ": must be ≤ " + fmt_num(max) + ", got " + std::string(f));
  return v;
}

double csv_datetime(std::string_view f, const std::string& file, long line, std::string_view column) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0;
  double sec = 0;
  auto bad = [&] {
    return TraceError(file, line, "column " + std::string(column) + ": expected \"YYYY-MM-DD HH:MM:SS.fff\", got \"" + std::string(f) + "\"");
  };
  if (f.size() < 19 || f[4] != '-' || f[7] != '-' || (f[10] != ' ' && f[10] != 'T') || f[13] != ':' || f[16] != ':') throw bad();
  auto num = [&](size_t pos, size_t len, int& out) {
    const auto [p, ec] = std::from_chars(f.data() + pos, f.data() + pos + len, out);
    if (ec != std::errc() || p != f.data() + pos + len) throw bad();
  };
  // digits only where digits go (from_chars takes a '-': "18:18:-5.0" read as 18:17:55, rev25d)
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18})
    if (f[i] < '0' || f[i] > '9') throw bad();
  num(0, 4, y), num(5, 2, mo), num(8, 2, d), num(11, 2, h), num(14, 2, mi);
  const std::string_view s = f.substr(17);
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), sec);
  // a real calendar day (2023-11-31 read as 1 Dec, rev25d), no leap second
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  const int days_in[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (ec != std::errc() || p != s.data() + s.size() || mo < 1 || mo > 12 || d < 1 || d > days_in[mo - 1] || h > 23 || mi > 59 || sec >= 60) throw bad();
  // days from civil (H. Hinnant's algorithm)
  const int yy = y - (mo <= 2);
  const int era = (yy >= 0 ? yy : yy - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(yy - era * 400);
  const unsigned doy = (153 * static_cast<unsigned>(mo + (mo > 2 ? -3 : 9)) + 2) / 5 + static_cast<unsigned>(d) - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const long long days = static_cast<long long>(era) * 146097 + static_cast<long long>(doe) - 719468;
  return static_cast<double>(days) * 86400.0 + h * 3600.0 + mi * 60.0 + sec;
}

}  // namespace servesim
