#include "sim/exporters/writers.hpp"

#include "costmodels/fitted.hpp"

#include <fmt/format.h>

#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <stdexcept>

namespace servesim {

namespace {

std::FILE* open_or_throw(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write " + path);
  return f;
}

std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

const char* status_name(RequestStatus s) {
  switch (s) {
    case RequestStatus::completed: return "completed";
    case RequestStatus::rejected: return "rejected";
    case RequestStatus::in_flight: return "in_flight";
  }
  return "?";
}


// Simulated seconds as microseconds with three decimals, from whole nanoseconds: a slice's end is
// printed as ts + dur computed from the same integers, so slices that touch in simulated time touch
// in the file too (rounding start and duration separately made them overlap by 1 ns, and Perfetto
// drops overlapping slices that do not nest).
// (a whole number of ns / 1e3 printed with 3 decimals is that number exactly: the division's error
// is far below half a thousandth at any simulated time below 10⁹ s)
long long ns(double s) { return std::llround(s * 1e9); }
double us(long long ns) { return static_cast<double>(ns) / 1e3; }

// A JSON string literal (quotes and escapes) for any name the user chose.
std::string jstr(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

// ------------------------------------------------------------------------- requests.csv

RequestsCsvWriter::RequestsCsvWriter(const std::string& path, bool gzip) : path_(path) {
  if (gzip) {
    gz_ = gzopen(path.c_str(), "wb6");
    if (!gz_) throw std::runtime_error("cannot write " + path);
  } else {
    f_ = open_or_throw(path);
  }
  const char* header =
      "id,status,reason,arrival_s,admit_s,load_start_s,load_end_s,prefill_start_s,prefill_end_s,transfer_start_s,transfer_end_s,first_token_s,done_s,"
      "ttft_ms,tpot_ms,e2e_ms,input_tokens,cached_tokens,loaded_tokens,load_tier,output_tokens,generated_tokens,prefill_instance,"
      "decode_instance,session,round\n";
  put(header, std::strlen(header));
}

RequestsCsvWriter::~RequestsCsvWriter() {
  if (f_) std::fclose(f_);
  if (gz_) gzclose(static_cast<gzFile>(gz_));
}

void RequestsCsvWriter::put(const char* data, size_t n) {
  const bool ok = gz_ ? gzwrite(static_cast<gzFile>(gz_), data, static_cast<unsigned>(n)) == static_cast<int>(n) : std::fwrite(data, 1, n, f_) == n;
  if (!ok) throw std::runtime_error("error writing " + path_);
}

// One row formatted into one buffer and written at once (fmt::format per field made ~14 strings
// per row); the same format specifications, so the same bytes.
void RequestsCsvWriter::on_request(const RequestRecord& r) {
  fmt::memory_buffer b;
  auto out = std::back_inserter(b);
  auto t = [&](double x) {
    if (x >= 0) fmt::format_to(out, "{:.6f}", x);
    b.push_back(',');
  };
  auto ms = [&](double x) {
    if (x >= 0) fmt::format_to(out, "{:.3f}", x * 1e3);
    b.push_back(',');
  };
  fmt::format_to(out, "{},{},{},", r.id, status_name(r.status), csv_quote(r.reason));
  for (double x : {r.arrival_s, r.admit_s, r.load_start_s, r.load_end_s, r.prefill_start_s, r.prefill_end_s, r.transfer_start_s, r.transfer_end_s,
                   r.first_token_s, r.done_s})
    t(x);
  for (double x : {r.ttft_s(), r.tpot_s(), r.e2e_s()}) ms(x);
  fmt::format_to(out, "{},{},{},{},{},{},{},{},", r.input_tokens, r.cached_tokens, r.loaded_tokens, r.load_tier, r.output_tokens, r.generated_tokens,
                 r.prefill_instance, r.decode_instance);
  if (r.session >= 0) fmt::format_to(out, "{},{}", r.session, r.round);
  else b.push_back(',');
  b.push_back('\n');
  put(b.data(), b.size());
}

void RequestsCsvWriter::on_end(double) {
  if (gz_) {
    const int rc = gzclose(static_cast<gzFile>(gz_));
    gz_ = nullptr;
    if (rc != Z_OK) throw std::runtime_error("error writing " + path_);
  } else if (std::fflush(f_) != 0) {
    throw std::runtime_error("error writing " + path_);
  }
}

// ------------------------------------------------------------------------- timeline.json

TimelineWriter::TimelineWriter(const std::string& path, const std::string& title, long long max_events, double window_start_s, double window_end_s)
    : f_(open_or_throw(path)), path_(path), max_events_(max_events), from_(window_start_s), to_(window_end_s) {
  fmt::print(f_, "{{\"displayTimeUnit\":\"ms\",\"otherData\":{{\"title\":{},\"time_unit\":\"simulated microseconds\"}},\"traceEvents\":[\n", jstr(title));
  const char* procs[] = {"", "prefill instances", "decode instances", "EP all-to-all + TP all-reduce", "KV transfers", "KV store (all nodes)"};
  for (int pid = 1; pid <= 5; ++pid)
    write(fmt::format("{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,\"args\":{{\"name\":\"{}\"}}}}", pid, procs[pid]));
  write("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":4,\"tid\":0,\"args\":{\"name\":\"inter-node (NIC)\"}}");
  write("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":4,\"tid\":1,\"args\":{\"name\":\"intra-node (NVLink)\"}}");
}

TimelineWriter::~TimelineWriter() {
  if (f_) std::fclose(f_);
}

void TimelineWriter::write(const std::string& ev) {
  std::fputs(first_ ? "" : ",\n", f_);
  std::fputs(ev.c_str(), f_);
  first_ = false;
}

void TimelineWriter::name_track(int pid, int tid, const std::string& name) {
  if (!named_.insert({pid, tid}).second) return;
  write(fmt::format("{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":{}}}}}", pid, tid, jstr(name)));
}

void TimelineWriter::on_step(const StepEvent& e) {
  if (!inside(e.start_s, e.end_s)) return;
  if (written_ >= max_events_) {
    ++dropped_;
    return;
  }
  ++written_;
  const int pid = e.role == Phase::prefill ? 1 : 2;
  const int tid = e.instance;
  // (the names are formatted only for tracks not named yet: every step asked before)
  if (!named_.count({pid, tid})) name_track(pid, tid, fmt::format("{} instance {}", to_string(e.role), e.instance));
  const int a2a_tid = (e.role == Phase::prefill ? 0 : 1000) + e.instance;
  if (e.time.comm_total_s > 0 && !named_.count({3, a2a_tid}))
    name_track(3, a2a_tid, fmt::format("{} instance {} all-to-all", to_string(e.role), e.instance));
  const long long t0 = ns(e.start_s), t1 = ns(e.end_s);
  write(fmt::format("{{\"ph\":\"X\",\"name\":\"{} step\",\"pid\":{},\"tid\":{},\"ts\":{:.3f},\"dur\":{:.3f},\"args\":{{\"seqs\":{},\"tokens\":{},"
                    "\"attention_ms\":{:.4f},\"ffn_ms\":{:.4f},\"comm_ms\":{:.4f},\"other_ms\":{:.4f},\"host_ms\":{:.4f},\"expert_load\":{:.4f}}}}}",
                    to_string(e.role), pid, tid, us(t0), us(t1 - t0), e.seqs, e.tokens, e.time.attention_s * 1e3, e.time.ffn_s * 1e3,
                    e.time.comm_s * 1e3, e.time.other_s * 1e3, e.time.host_s * 1e3, e.time.expert_load));
  // within its step (with two-batch overlap it runs beside the compute); only when it reaches the
  // window (rev26: a step overlapping the window wrote its all-to-all that ended before it)
  if (e.time.comm_total_s > 0 && inside(e.start_s, e.start_s + e.time.comm_total_s))
    write(fmt::format("{{\"ph\":\"X\",\"name\":\"{} all-to-all\",\"pid\":3,\"tid\":{},\"ts\":{:.3f},\"dur\":{:.3f},\"args\":{{\"exposed_ms\":{:.4f}}}}}",
                      to_string(e.role), (e.role == Phase::prefill ? 0 : 1000) + e.instance, us(t0),
                      us(std::min(ns(e.start_s + e.time.comm_total_s), t1) - t0), e.time.comm_s * 1e3));
}

void TimelineWriter::on_transfer(const TransferEvent& e) {
  if (!inside(e.start_s, e.end_s)) return;
  const int tid = e.inter_node ? 0 : 1;
  write(fmt::format("{{\"ph\":\"b\",\"cat\":\"kv\",\"name\":\"KV P{}→D{}\",\"id\":{},\"pid\":4,\"tid\":{},\"ts\":{:.3f},\"args\":{{\"bytes\":{:.0f}}}}}",
                    e.prefill_instance, e.decode_instance, e.request, tid, us(ns(e.start_s)), e.bytes));
  write(fmt::format("{{\"ph\":\"e\",\"cat\":\"kv\",\"name\":\"KV P{}→D{}\",\"id\":{},\"pid\":4,\"tid\":{},\"ts\":{:.3f}}}", e.prefill_instance,
                    e.decode_instance, e.request, tid, us(ns(e.end_s))));
}

void TimelineWriter::on_kv_move(const KvMoveEvent& e) {
  if (!inside(e.start_s, e.end_s)) return;
  static const char* kTrack[] = {"KV load-back L2 host DRAM → GPU", "KV load-back L3 storage → GPU", "KV offload GPU → L2 host DRAM",
                                 "KV demotion L2 → L3 storage"};
  static const char* kName[] = {"L2→GPU", "L3→GPU", "GPU→L2", "L2→L3"};
  const int k = static_cast<int>(e.kind), tid = 2 + k;
  name_track(4, tid, kTrack[k]);
  const long long id = kv_moves_++;
  const std::string req = e.kind == KvMoveKind::demote ? "" : fmt::format(",\"request\":{}", e.request);
  write(fmt::format("{{\"ph\":\"b\",\"cat\":\"kv-tier\",\"name\":\"{} session {}\",\"id\":{},\"pid\":4,\"tid\":{},\"ts\":{:.3f},"
                    "\"args\":{{\"bytes\":{:.0f},\"node\":{},\"session\":{}{}}}}}",
                    kName[k], e.session, id, tid, us(ns(e.start_s)), e.bytes, e.node, e.session, req));
  write(fmt::format("{{\"ph\":\"e\",\"cat\":\"kv-tier\",\"name\":\"{} session {}\",\"id\":{},\"pid\":4,\"tid\":{},\"ts\":{:.3f}}}", kName[k],
                    e.session, id, tid, us(ns(e.end_s))));
}

// Perfetto keys counter tracks by process and name: each instance's counter gets its own name.
void TimelineWriter::on_memory(const MemoryEvent& e) {
  if (e.t_s < from_) {
    mem_before_[{static_cast<int>(e.role), e.instance}] = e;
    return;
  }
  if (!inside(e.t_s, e.t_s)) return;
  flush_before_window();
  write_memory(e, e.t_s);
}

void TimelineWriter::write_memory(const MemoryEvent& e, double t_s) {
  write(fmt::format("{{\"ph\":\"C\",\"name\":\"{} instance {} KV GB per GPU\",\"pid\":{},\"tid\":{},\"ts\":{:.3f},\"args\":{{\"mean\":{:.4f},\"busiest\":{:.4f}}}}}",
                    to_string(e.role), e.instance, e.role == Phase::prefill ? 1 : 2, e.instance, us(ns(t_s)), e.kv_bytes_mean / 1e9,
                    e.kv_bytes_max / 1e9));
}

void TimelineWriter::on_tier(const TierEvent& e) {
  if (e.t_s < from_) {
    tier_before_ = e;
    return;
  }
  if (!inside(e.t_s, e.t_s)) return;
  flush_before_window();
  write_tier(e, e.t_s);
}

void TimelineWriter::write_tier(const TierEvent& e, double t_s) {
  write(fmt::format("{{\"ph\":\"C\",\"name\":\"KV GB\",\"pid\":5,\"tid\":0,\"ts\":{:.3f},\"args\":{{\"L2 host DRAM\":{:.4f},\"L3 storage\":{:.4f}}}}}",
                    us(ns(t_s)), e.l2_bytes / 1e9, e.l3_bytes / 1e9));
}

// The counters set before a --timeline-window, at the window's start, once.
void TimelineWriter::flush_before_window() {
  if (flushed_) return;
  flushed_ = true;
  for (const auto& [key, e] : mem_before_) write_memory(e, from_);
  if (tier_before_) write_tier(*tier_before_, from_);
  mem_before_.clear();
}

void TimelineWriter::on_end(double t_s) {
  if (t_s >= from_) flush_before_window();
  if (from_ > 0 || std::isfinite(to_))  // a window: stated (files without one keep their bytes)
    fmt::print(f_, "\n],\"metadata\":{{\"end_s\":{:.6f},\"step_slices_written\":{},\"step_slices_dropped\":{},\"window_start_s\":{:.6f},\"window_end_s\":{:.6f}}}}}\n",
               t_s, written_, dropped_, from_, std::min(to_, t_s));
  else
    fmt::print(f_, "\n],\"metadata\":{{\"end_s\":{:.6f},\"step_slices_written\":{},\"step_slices_dropped\":{}}}}}\n", t_s, written_, dropped_);
  if (std::fflush(f_) != 0) throw std::runtime_error("error writing " + path_);
}

}  // namespace servesim
