// Inputs the fuzz targets (fuzz/, issue 16) found crashing, kept as regressions: each is fed through
// the normal parser for its kind (the file name's prefix) and must end in the project's clean error
// (ScenarioError, TraceError) or a valid result, never another exception.
#include "scenarios/scenario.hpp"
#include "workloads/source.hpp"

#include "cli_run.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

using namespace servesim;
namespace fs = std::filesystem;

namespace {

using test::slurp;

// Returns "" for a clean outcome, else what went wrong.
std::string feed(const fs::path& p) {
  const std::string name = p.filename().string();
  const std::map<std::string, WorkloadSpec::Kind> traces = {
      {"mooncake-", WorkloadSpec::Kind::mooncake},       {"azure-", WorkloadSpec::Kind::azure},
      {"burstgpt-", WorkloadSpec::Kind::burstgpt},       {"tracelab_replay-", WorkloadSpec::Kind::tracelab_replay},
      {"tracelab_rounds-", WorkloadSpec::Kind::tracelab_rounds}};
  try {
    if (name.rfind("scenario-", 0) == 0) {
      (void)parse_scenario(slurp(p), p.string(), data_dir());
      return "";
    }
    if (name.rfind("model-", 0) == 0) return (void)load_model(p.string()), "";
    if (name.rfind("hardware-", 0) == 0) return (void)load_hardware(p.string()), "";
    for (const auto& [prefix, kind] : traces) {
      if (name.rfind(prefix, 0) != 0) continue;
      WorkloadSpec w;
      w.kind = kind;
      w.trace_path = p.string();
      w.block_tokens = 16;
      auto src = make_source(w, 1);
      for (int n = 0; n < 1000000; ++n) {
        auto r = src->next();
        if (!r) break;
        for (auto f = r->last_round ? std::nullopt : src->follow_up(*r, r->arrival_s + 1); f && n < 1000000; ++n)
          f = f->last_round ? std::nullopt : src->follow_up(*f, f->arrival_s + 1);
      }
      return "";
    }
    return "no parser for this file name";
  } catch (const ScenarioError&) {
    return "";
  } catch (const TraceError& e) {
    return e.line() >= 0 ? "" : std::string("TraceError without a line: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("unexpected exception: ") + e.what();
  }
}

}  // namespace

TEST(FuzzRegressions, EveryInputEndsInACleanError) {
  const fs::path dir = fs::path(SERVESIM_SOURCE_DIR) / "tests/data/fuzz-regressions";
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename() == "README.md") continue;
    ++n;
    EXPECT_EQ(feed(e.path()), "") << e.path();
  }
  EXPECT_GT(n, 0);
}
