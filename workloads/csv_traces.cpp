#include "workloads/csv_traces.hpp"

#include "workloads/csv.hpp"

namespace servesim {

namespace {
const char* kAzureHeader = "TIMESTAMP,ContextTokens,GeneratedTokens";
const char* kBurstHeader = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type";
}  // namespace

CsvRequestReader::CsvRequestReader(Format format, std::string path, double time_scale, long long max_requests, bool skip_bad_rows)
    : format_(format), path_(std::move(path)), in_(path_), time_scale_(time_scale), max_requests_(max_requests), skip_(skip_bad_rows) {
  if (!in_) throw std::runtime_error("cannot open trace " + path_ + kTraceHint);
  std::string header;
  std::getline(in_, header);
  if (!header.empty() && header.back() == '\r') header.pop_back();
  const std::string want = format_ == Format::azure ? kAzureHeader : kBurstHeader;
  if (header.rfind(want, 0) != 0) throw TraceError(path_, 1, "header \"" + header + "\" is not \"" + want + "\"" + (format_ == Format::burstgpt ? " (optionally followed by ,Session ID,Elapsed time)" : ""));
}

Request CsvRequestReader::parse(const std::string& line) {
  const auto f = split_csv(line);
  Request r;
  double t = 0;
  if (format_ == Format::azure) {
    if (f.size() != 3) throw TraceError(path_, line_, "expected 3 columns (" + std::string(kAzureHeader) + "), got " + std::to_string(f.size()));
    t = csv_datetime(f[0], path_, line_, "TIMESTAMP");
    r.input_tokens = csv_int(f[1], path_, line_, "ContextTokens", 1);
    r.output_tokens = csv_int(f[2], path_, line_, "GeneratedTokens", 1);
  } else {
    if (f.size() != 6 && f.size() != 8)
      throw TraceError(path_, line_, "expected 6 or 8 columns (" + std::string(kBurstHeader) + "[,Session ID,Elapsed time]), got " + std::to_string(f.size()));
    t = csv_double(f[0], path_, line_, "Timestamp", 0);
    r.input_tokens = csv_int(f[2], path_, line_, "Request tokens", 1);
    r.output_tokens = csv_int(f[3], path_, line_, "Response tokens", 1);
  }
  if (!have_t0_) t0_ = t, have_t0_ = true;
  const double rel = (t - t0_) * time_scale_;
  if (rel < last_) throw TraceError(path_, line_, "time goes backwards (rows must be in arrival order)");
  r.arrival_s = rel;
  r.origin = path_ + ":" + std::to_string(line_);
  return r;
}

std::optional<Request> CsvRequestReader::next() {
  if (max_requests_ > 0 && emitted_ >= max_requests_) return std::nullopt;
  std::string line;
  while (std::getline(in_, line)) {
    ++line_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    Request r;
    try {
      r = parse(line);
    } catch (const TraceError&) {
      if (!skip_) throw;
      ++skipped_;
      continue;
    }
    last_ = r.arrival_s;
    r.id = static_cast<std::uint64_t>(emitted_++);
    return r;
  }
  return std::nullopt;
}

std::string CsvRequestReader::describe() const {
  return std::string(format_ == Format::azure ? "azure" : "burstgpt") + " trace " + path_ + " (time_scale " + std::to_string(time_scale_) + ")" +
         (skip_ ? ", skipping bad rows" : "");
}

}  // namespace servesim
