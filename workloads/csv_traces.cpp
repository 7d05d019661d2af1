#include "workloads/csv_traces.hpp"
#include "scenarios/file_names.hpp"

#include "workloads/csv.hpp"
#include "workloads/text_input.hpp"

namespace servesim {

namespace {
const char* kAzureHeader = "TIMESTAMP,ContextTokens,GeneratedTokens";
const char* kBurstHeader = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type";
}  // namespace

CsvRequestReader::CsvRequestReader(Format format, std::string path, double time_scale, long long max_requests, bool skip_bad_rows)
    : format_(format), path_(std::move(path)), in_(path_), time_scale_(time_scale), max_requests_(max_requests), skip_(skip_bad_rows) {
  if (is_folder(path_)) throw std::runtime_error("trace " + path_ + " is a folder, not a file");
  if (!in_) throw std::runtime_error("cannot open trace " + path_ + kTraceHint);
  skip_bom(in_);
  // the header is the first line that is not blank; a file of blank lines only is an empty trace
  std::string header;
  line_ = 0;
  while (header.find_first_not_of(" \t\r") == std::string::npos) {
    if (!std::getline(in_, header)) return;  // empty: next() has no rows (run refuses an empty trace)
    ++line_;
  }
  if (!header.empty() && header.back() == '\r') header.pop_back();
  refuse_nul(header, path_, line_);
  const std::string want = format_ == Format::azure ? kAzureHeader : kBurstHeader;
  // the whole header (rev25d: a prefix match took "GeneratedTokensXYZ"); BurstGPT may add its two
  // session columns. A wrong header is a wrong file, not a bad row: --skip-bad-rows does not apply
  const std::string burst_long = std::string(kBurstHeader) + ",Session ID,Elapsed time";
  const bool ok = header == want || (format_ == Format::burstgpt && header == burst_long);
  if (!ok)
    throw TraceError(path_, line_, "header \"" + header + "\" is not \"" + want + "\"" + (format_ == Format::burstgpt ? " (or that followed by ,Session ID,Elapsed time)" : "") +
                                       ": is the file in the format of workload.kind? (--skip-bad-rows skips rows, not a header)");
}

Request CsvRequestReader::parse(const std::string& line) {
  refuse_nul(line, path_, line_);  // before the fields: unchecked columns (BurstGPT's Model, Log Type) would keep it
  const auto f = split_csv(line);
  Request r;
  double t = 0;
  if (format_ == Format::azure) {
    if (f.size() != 3) throw TraceError(path_, line_, "expected 3 columns (" + std::string(kAzureHeader) + "), got " + std::to_string(f.size()));
    t = csv_datetime(f[0], path_, line_, "TIMESTAMP");
    r.input_tokens = csv_int(f[1], path_, line_, "ContextTokens", 1, kMaxTokens);
    r.output_tokens = csv_int(f[2], path_, line_, "GeneratedTokens", 1, kMaxTokens);
  } else {
    if (f.size() != 6 && f.size() != 8)
      throw TraceError(path_, line_, "expected 6 or 8 columns (" + std::string(kBurstHeader) + "[,Session ID,Elapsed time]), got " + std::to_string(f.size()));
    t = csv_double(f[0], path_, line_, "Timestamp", 0);
    r.input_tokens = csv_int(f[2], path_, line_, "Request tokens", 1, kMaxTokens);
    r.output_tokens = csv_int(f[3], path_, line_, "Response tokens", 1, kMaxTokens);
  }
  if (!have_t0_) t0_ = t, t0_text_ = f[0], have_t0_ = true;  // time 0 is the first row (README "Input rules")
  const double rel = (t - t0_) * time_scale_;
  if (rel < last_) throw TraceError(path_, line_, "time goes backwards (rows must be in arrival order)");
  if (rel > kMaxSeconds) throw TraceError(path_, line_, "time is more than 1e9 s (× time_scale) after the first row's (" + t0_text_ + ")");
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

std::string CsvRequestReader::time_origin() const {
  if (!have_t0_ || t0_ == 0) return {};
  return std::string("time 0 is the first row's ") + (format_ == Format::azure ? "TIMESTAMP, " : "Timestamp, ") + t0_text_ + " (" + path_ + ")";
}

std::string CsvRequestReader::describe() const {
  return std::string(format_ == Format::azure ? "azure" : "burstgpt") + " trace " + path_ + " (time_scale " + std::to_string(time_scale_) + ")" +
         (skip_ ? ", skipping bad rows" : "");
}

}  // namespace servesim
