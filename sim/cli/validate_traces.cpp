// servesim validate, kind "trace_statistics": a trace's statistics as the trace reader delivers them
// (workloads/mooncake.hpp MooncakeReader, time 0 at the first row, no jitter): the number of
// requests, the average input and output lengths, and the prefix-block reuse that summary.json
// reports as prefix_cache.trace_block_reuse (sim/engine/arrivals.cpp: the share of prompt blocks
// that an earlier arrival carried, i.e. the hit rate of an unlimited cache in arrival order), in %.
//
// Row fields: "trace" (relative to the case file; a path through shared/traces/ is read from
// $SERVESIM_SHARED_TRACES when that is set, as in scenarios), "block_tokens" (default 512),
// "statistic": requests | avg_input | avg_output | block_reuse. A trace that is not there makes its
// rows "skipped: trace not found".
#include "sim/cli/validate_case.hpp"
#include "scenarios/scenario.hpp"

#include "workloads/mooncake.hpp"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <unordered_set>

namespace servesim::cli::validation {

namespace {

namespace fs = std::filesystem;

struct TraceStats {
  double requests = 0, avg_input = 0, avg_output = 0, block_reuse_pct = 0;
};

std::string trace_path(const Case& c, const std::string& t) {
  std::string p = fs::path(t).is_absolute() ? t : (fs::path(c.dir) / t).lexically_normal().string();
  const char* shared = std::getenv("SERVESIM_SHARED_TRACES");
  const auto at = p.find("shared/traces/");
  if (shared && *shared && at != std::string::npos) p = (fs::path(shared) / p.substr(at + std::string("shared/traces/").size())).string();
  return p;
}

TraceStats read_stats(const std::string& path, int block_tokens) {
  MooncakeReader r(path, 1.0, 0.0, block_tokens, 0, 1);
  TraceStats s;
  std::unordered_set<std::uint64_t> seen;
  double in = 0, out = 0, blocks = 0, reused = 0;
  while (auto q = r.next()) {
    s.requests += 1, in += static_cast<double>(q->input_tokens), out += static_cast<double>(q->output_tokens);
    for (auto h : q->block_hashes) reused += !seen.insert(h).second;
    blocks += static_cast<double>(q->block_hashes.size());
  }
  if (s.requests > 0) s.avg_input = in / s.requests, s.avg_output = out / s.requests;
  if (blocks > 0) s.block_reuse_pct = 100 * reused / blocks;
  return s;
}

}  // namespace

std::vector<Row> eval_trace_statistics(const Case& c, bool quick) {
  std::map<std::pair<std::string, int>, std::optional<TraceStats>> cache;  // (path, block tokens) → stats; nullopt: absent
  std::vector<Row> out;
  for (auto& r : selected_rows(c, quick)) {
    const std::string path = trace_path(c, str(*r.j, "trace", r.where)), stat = str(*r.j, "statistic", r.where);
    const int block_tokens = r.j->contains("block_tokens") ? static_cast<int>(integer(*r.j, "block_tokens", r.where)) : 512;
    if (block_tokens < 1) throw CaseError(r.where + ".block_tokens: must be ≥ 1");
    auto key = std::make_pair(path, block_tokens);
    if (!cache.count(key)) {
      if (!path_exists(path)) cache[key] = std::nullopt;
      else {
        try {
          cache[key] = read_stats(path, block_tokens);
        } catch (const std::exception& e) {
          throw CaseError(r.where + ": " + e.what());
        }
      }
    }
    // each statistic in its own unit (rev25d: any unit was taken)
    static const std::map<std::string, std::string> unit_of = {{"requests", "requests"}, {"avg_input", "tokens"}, {"avg_output", "tokens"}, {"block_reuse", "%"}};
    if (unit_of.count(stat) && unit_of.at(stat) != r.row.unit)
      throw CaseError(r.where + ".unit: statistic " + stat + " is in \"" + unit_of.at(stat) + "\", got \"" + r.row.unit + "\"");
    const auto& s = cache[key];
    if (!s) r.row.skipped = "trace not found (" + path + ")";
    else if (stat == "requests") r.row.simulated = s->requests;
    else if (stat == "avg_input") r.row.simulated = s->avg_input;
    else if (stat == "avg_output") r.row.simulated = s->avg_output;
    else if (stat == "block_reuse") r.row.simulated = s->block_reuse_pct;
    else throw CaseError(r.where + ".statistic: requests, avg_input, avg_output or block_reuse, got \"" + stat + "\"");
    out.push_back(r.row);
  }
  return out;
}

}  // namespace servesim::cli::validation
