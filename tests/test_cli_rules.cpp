// Options and files the product would accept and then ignore, or that would destroy its own
// inputs, are refused with exit status 2 and a message naming the option or key (user review,
// twenty-seventh session: each case below ran to exit 0 before).
#include "cli_run.hpp"
#include "helpers.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using servesim::test::Out;
using servesim::test::sh;

namespace {

fs::path tmp(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("servesim_rules_" + name);
  fs::remove_all(p);
  return p;
}

void expect_refused(const std::string& args, const std::string& want) {
  const Out o = sh(args);
  EXPECT_EQ(o.status, 2) << args << ": " << o.text.substr(0, 400);
  EXPECT_NE(o.text.find(want), std::string::npos) << args << ": " << o.text.substr(0, 400);
}

}  // namespace

TEST(CliRules, OptionsThatWouldDoNothingAreRefused) {
  const std::string def = servesim::test::data("scenarios/default.json"), out = tmp("x").string();
  expect_refused("run " + def + " --no-timeline --timeline-window 1:5 --out " + out, "--timeline-window: no timeline is written (--no-timeline)");
  expect_refused("run " + def + " --skip-bad-rows --out " + out, "--skip-bad-rows applies to trace replays");
  expect_refused("capacity " + def + " --only v4pro-h200 --rate 1 --horizon 30 --seeds 1 --max-nodes 8 --max-running 1,1 --out " + out,
                 "--max-running: 1 is given twice");
  expect_refused("capacity " + def + " --only v4pro-h200 --rate 1 --horizon 30 --seeds 1 --max-nodes 8 --attn-tp 1,2,1 --out " + out, "--attn-tp: 1 is given twice");
  expect_refused("costmodel report --family gemm_fp8", "--family gemm_fp8: selects the family --worst lists");
  expect_refused("costmodel fit --no-validate --worst 3", "--worst lists held-out rows of the validation, which --no-validate skips");
  EXPECT_FALSE(fs::exists(out)) << "a refused command wrote its output folder";
}

TEST(CliRules, ReportDoesNotOverwriteTheFilesItReads) {
  const fs::path dir = tmp("report");
  ASSERT_EQ(sh("run " + servesim::test::data("scenarios/default.json") + " --horizon 5 --only v4pro-h200 --out " + dir.string()).status, 0);
  const std::string before = servesim::test::slurp(dir / "summary.json");
  expect_refused("report " + dir.string() + " --out " + (dir / "summary.json").string(), "is summary.json, a file of the output the report reads");
  expect_refused("report " + dir.string() + " --json " + (dir / "v4pro-h200" / "requests.csv").string(), "a file of the output the report reads");
  expect_refused("report " + dir.string() + " --out " + (dir / "r.html").string() + " --json " + (dir / "r.html").string(), "it is also the other output");
  std::ofstream(dir / "v4pro-h200" / "timeline.json.gz") << "x";  // (a compressed input is one too)
  expect_refused("report " + dir.string() + " --out " + (dir / "v4pro-h200" / "timeline.json.gz").string(), "a file of the output the report reads");
  fs::remove(dir / "v4pro-h200" / "timeline.json.gz");
  EXPECT_EQ(servesim::test::slurp(dir / "summary.json"), before);
  const Out ok = sh("report " + dir.string() + " --json " + (dir / "report.json").string());  // its own outputs may be rewritten
  EXPECT_EQ(ok.status, 0) << ok.text;
  EXPECT_EQ(sh("report " + dir.string() + " --json " + (dir / "report.json").string()).status, 0);
}

TEST(CliRules, ValidationCaseKeysAreChecked) {
  const fs::path dir = tmp("cases");
  fs::create_directories(dir);
  const std::string src = servesim::test::slurp(servesim::test::data("scenarios/validation/mooncake-fast25-table2.json"));
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = src;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    std::ofstream(dir / "c.json") << t;
  };
  with("\"rows\"", "\"bogus_top\": 1, \"rows\"");
  expect_refused("validate --dir " + dir.string(), "c.json: bogus_top: not a key of a trace_statistics case");
  with("\"metric\"", "\"publishd\": 1, \"metric\"");  // (the first row's)
  expect_refused("validate --dir " + dir.string(), "c.json: rows[0].publishd: not a key of a trace_statistics case");
  // a decode step row's "tokens" (decode computes one token per sequence) was read and ignored
  fs::remove(dir / "c.json");
  std::string step = servesim::test::slurp(servesim::test::data("scenarios/validation/sglang-dsv3-96xh100.json"));
  step.replace(step.find("\"phase\": \"decode\""), 17, "\"phase\": \"decode\", \"tokens\": 4096");
  const auto scen = step.find("\"scenario\": \"");
  ASSERT_NE(scen, std::string::npos);
  step.insert(scen + 13, servesim::test::data("scenarios/validation") + "/");
  std::ofstream(dir / "s.json") << step;
  expect_refused("validate --dir " + dir.string(), ".tokens: a decode step computes 1 new token per sequence");
}
