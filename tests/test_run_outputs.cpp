// `servesim run` outputs at scale (issue 14): --requests csv|csv.gz|none, --timeline-window,
// --quiet and the progress line (a terminal only).
#include "helpers.hpp"

#include "cli_run.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <filesystem>

namespace fs = std::filesystem;

namespace {

std::string gunzip(const fs::path& p) {
  gzFile f = gzopen(p.string().c_str(), "rb");
  std::string out;
  if (!f) return out;
  char buf[65536];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return out;
}

struct Dir {
  fs::path p = fs::temp_directory_path() / ("servesim-outputs-" + std::to_string(::getpid()));
  Dir() { fs::remove_all(p); }
  ~Dir() { fs::remove_all(p); }
};

std::string run(const std::string& extra, const fs::path& out) {
  const auto o = ::test::sh("run " + servesim::test::data("scenarios/default.json") + " --only k3-h200 --out " + out.string() + " " + extra);
  EXPECT_EQ(o.status, 0) << o.text;
  return o.text;
}

}  // namespace

// csv.gz holds the csv's bytes, the same file every run; none writes no requests file.
TEST(RunOutputs, RequestsCsvGzAndNone) {
  Dir d;
  run("--no-timeline", d.p / "csv");
  run("--no-timeline --requests csv.gz", d.p / "gz1");
  run("--no-timeline --requests csv.gz", d.p / "gz2");
  run("--no-timeline --requests none", d.p / "none");
  const std::string csv = ::test::slurp(d.p / "csv" / "k3-h200" / "requests.csv");
  ASSERT_GT(csv.size(), 1000u);
  EXPECT_EQ(gunzip(d.p / "gz1" / "k3-h200" / "requests.csv.gz"), csv);
  EXPECT_FALSE(fs::exists(d.p / "gz1" / "k3-h200" / "requests.csv"));
  EXPECT_LT(fs::file_size(d.p / "gz1" / "k3-h200" / "requests.csv.gz"), csv.size() / 2);
  EXPECT_EQ(::test::slurp(d.p / "gz1" / "k3-h200" / "requests.csv.gz"), ::test::slurp(d.p / "gz2" / "k3-h200" / "requests.csv.gz"));
  EXPECT_FALSE(fs::exists(d.p / "none" / "k3-h200" / "requests.csv"));
  EXPECT_FALSE(fs::exists(d.p / "none" / "k3-h200" / "requests.csv.gz"));
  // the summary does not depend on the requests file
  EXPECT_EQ(::test::slurp(d.p / "none" / "k3-h200" / "summary.json"), ::test::slurp(d.p / "csv" / "k3-h200" / "summary.json"));
  EXPECT_EQ(::test::sh("run --requests zip --out " + (d.p / "x").string()).status, 2);
}

// Only step slices overlapping [20 s, 40 s] are written (with their all-to-all slices), and the
// window is stated.
TEST(RunOutputs, TimelineWindow) {
  Dir d;
  run("--requests none", d.p / "all");
  run("--requests none --timeline-window 20:40", d.p / "win");
  auto slices = [](const nlohmann::json& t, bool check) {
    long long n = 0;
    for (const auto& e : t["traceEvents"])
      if (e["ph"] == "X" && e["pid"].get<int>() <= 2) {  // step slices (pid 3: their all-to-all parts)
        ++n;
        const double a = e["ts"].get<double>() / 1e6, b = a + e["dur"].get<double>() / 1e6;
        if (check) EXPECT_TRUE(b >= 20.0 - 1e-9 && a <= 40.0 + 1e-9) << a << " " << b;
      }
    return n;
  };
  const auto all = nlohmann::json::parse(::test::slurp(d.p / "all" / "k3-h200" / "timeline.json"));
  const auto win = nlohmann::json::parse(::test::slurp(d.p / "win" / "k3-h200" / "timeline.json"));
  const long long n_all = slices(all, false), n_win = slices(win, true);
  EXPECT_GT(n_win, 0);
  EXPECT_LT(n_win, n_all);
  // independently: the full timeline's slices that overlap the window
  long long expect = 0;
  for (const auto& e : all["traceEvents"])
    if (e["ph"] == "X" && e["pid"].get<int>() <= 2) {
      const double a = e["ts"].get<double>() / 1e6, b = a + e["dur"].get<double>() / 1e6;
      expect += b >= 20.0 && a <= 40.0;
    }
  EXPECT_EQ(n_win, expect);
  EXPECT_DOUBLE_EQ(win["metadata"]["window_start_s"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(win["metadata"]["window_end_s"].get<double>(), 40.0);
  EXPECT_FALSE(all["metadata"].contains("window_start_s"));
  for (const char* bad : {"40:20", "abc", "5", "-1:3"})
    EXPECT_EQ(::test::sh(std::string("run --timeline-window ") + bad + " --out " + (d.p / "x").string()).status, 2) << bad;
}

// Not on a terminal: no progress line; --quiet: no info lines either.
TEST(RunOutputs, QuietAndNoProgressOffATerminal) {
  Dir d;
  const std::string loud = run("--no-timeline --requests none", d.p / "a");
  const std::string quiet = run("--no-timeline --requests none --quiet", d.p / "b");
  EXPECT_EQ(loud.find('\r'), std::string::npos);
  EXPECT_NE(loud.find("[info]"), std::string::npos) << loud;
  EXPECT_EQ(quiet.find("[info]"), std::string::npos) << quiet;
  EXPECT_NE(quiet.find("ttft p50"), std::string::npos) << quiet;  // the table still prints
}
