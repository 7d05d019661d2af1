// servesim sweep: grid expansion (count and order), the bad-field error (exit 2, naming the grid
// file and the field), one results row per point with its parameter values, and resume (a second
// run re-runs nothing: the table and the points' files are unchanged), the same table whatever --jobs.
#include "cli_run.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {
using test::Out;
using test::sh;
using test::slurp;


fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("servesim-sweep-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

fs::path write_grid(const fs::path& dir, const std::string& grid) {
  const fs::path f = dir / "grid.json";
  std::ofstream(f) << "{\"scenario\": \"" << SERVESIM_SOURCE_DIR << "/scenarios/default.json\", \"only\": \"k3-h200\", \"grid\": " << grid
                   << "}\n";
  return f;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST(Sweep, BadFieldExits2NamingGridAndField) {
  const fs::path d = scratch("bad");
  const fs::path g = write_grid(d, R"({"deployments.0.decode.no_such_limit": [1, 2]})");
  const Out o = sh("sweep " + g.string() + " --out " + (d / "out").string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find(g.string()), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("deployments.0.decode.no_such_limit"), std::string::npos) << o.text;
  const fs::path g2 = write_grid(d, R"({"deployments.0.decode.max_running": ["many"]})");
  const Out o2 = sh("sweep " + g2.string() + " --out " + (d / "out").string());
  EXPECT_EQ(o2.status, 2) << o2.text;
  EXPECT_NE(o2.text.find("deployments.0.decode.max_running"), std::string::npos) << o2.text;
  const fs::path g3 = write_grid(d, R"({"deployments.0.decode.max_running": [2.5]})");
  const Out o3 = sh("sweep " + g3.string() + " --out " + (d / "out").string());
  EXPECT_EQ(o3.status, 2) << o3.text;
  EXPECT_NE(o3.text.find("value 2.5 is a number, the scenario's is an integer (64)"), std::string::npos) << o3.text;
  fs::remove_all(d);
}

// Review, twenty-second session: a grid of 10^12 points aborted with bad_alloc (exit 134), an
// "only" naming no deployment failed every point (exit 1), a key twice in the grid file kept the
// last. Each is refused up front: exit 2 naming the grid file.
TEST(Sweep, HugeGridsUnknownOnlyAndDuplicateKeysExit2) {
  const fs::path d = scratch("refused");
  // 1,000 x 1,000 x 1,000 points: over the 100,000 bound
  std::string axis = "[";
  for (int i = 1; i <= 1000; ++i) {
    if (i > 1) axis.push_back(',');
    axis.append(std::to_string(i));
  }
  axis += "]";
  const fs::path g = write_grid(d, "{\"seed\": " + axis + ", \"deployments.0.decode.ep\": " + axis + ", \"deployments.0.decode.max_running\": " + axis + "}");
  Out o = sh("sweep " + g.string() + " --out " + (d / "out").string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find(g.string() + ": the grid has more than 100000 points"), std::string::npos) << o.text;
  EXPECT_FALSE(fs::exists(d / "out" / "points")) << "a point was started";
  const fs::path g2 = d / "only.json";
  std::ofstream(g2) << "{\"scenario\": \"" << SERVESIM_SOURCE_DIR << "/scenarios/default.json\", \"only\": \"nosuch\", \"grid\": {\"seed\": [1, 2]}}\n";
  o = sh("sweep " + g2.string() + " --out " + (d / "out2").string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("\"only\": no deployment \"nosuch\""), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("(it has: k3-h200, v4pro-h200)"), std::string::npos) << o.text;
  const fs::path g3 = write_grid(d, R"({"seed": [1, 2], "seed": [3]})");
  o = sh("sweep " + g3.string() + " --out " + (d / "out3").string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("key \"seed\" appears twice in \"grid\""), std::string::npos) << o.text;
  fs::remove_all(d);
}

// Review, twenty-third session: values the scenario refuses ("workload.requests": [-10], a
// deployment name escaping the output folder) failed each point in its run.log (exit 1); a value
// twice and a leading-zero index were taken silently. All refused before any point runs: exit 2
// naming the grid file, the point, its values and the scenario's own message.
TEST(Sweep, PointsTheScenarioRefusesExit2BeforeAnyRun) {
  const fs::path d = scratch("points");
  fs::path g = write_grid(d, R"({"seed": [1, 2], "deployments.0.prefill.max_batch_tokens": [8192, -10]})");
  Out o = sh("sweep " + g.string() + " --out " + (d / "o1").string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find(g.string() + ": point p0001 (seed = 1, deployments.0.prefill.max_batch_tokens = -10): "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("max_batch_tokens"), std::string::npos) << o.text;
  EXPECT_FALSE(fs::exists(d / "o1" / "points")) << "a point was started";
  g = d / "evil.json";  // (no "only": a grid renaming "only"'s deployment is refused for that first)
  std::ofstream(g) << "{\"scenario\": \"" << SERVESIM_SOURCE_DIR << "/scenarios/default.json\", \"grid\": {\"deployments.0.name\": [\"ok\", \"../../evil\"]}}\n";
  o = sh("sweep " + g.string() + " --out " + (d / "o2").string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("point p0001 (deployments.0.name = \"../../evil\"): "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("deployments[0].name"), std::string::npos) << o.text;
  // a policy name no registry has (commit review: found only when the point ran)
  g = write_grid(d, R"({"deployments.0.router": ["cache_aware", "bogus"]})");
  o = sh("sweep " + g.string() + " --out " + (d / "o5").string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("point p0001 (deployments.0.router = \"bogus\"): "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("deployments[0].router: "), std::string::npos) << o.text;
  EXPECT_FALSE(fs::exists(d / "o5" / "points")) << "a point was started";
  g = write_grid(d, R"({"seed": [1, 1]})");
  o = sh("sweep " + g.string() + " --out " + (d / "o3").string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("grid field \"seed\": value 1 appears twice"), std::string::npos) << o.text;
  // rev25: a value twice as 2 and 2.0; a layout run refuses (attn TP 8 does not divide EP 7, found at
  // run time, exit 1); an axis over the deployment "only" leaves out; a grid renaming "only"'s
  // deployment; an empty "only"
  g = write_grid(d, R"({"workload.rate_per_s": [2, 2.0]})");
  o = sh("sweep " + g.string() + " --out " + (d / "o6").string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("grid field \"workload.rate_per_s\": value 2.0 appears twice"), std::string::npos) << o.text;
  g = write_grid(d, R"({"deployments.0.decode.ep": [32, 7]})");
  o = sh("sweep " + g.string() + " --out " + (d / "o7").string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("point p0001 (deployments.0.decode.ep = 7): deployments[0].decode.attn_tp: 8 must divide ep = 7"), std::string::npos) << o.text;
  EXPECT_FALSE(fs::exists(d / "o7" / "points")) << "a point was started";
  g = write_grid(d, R"({"deployments.1.decode.max_running": [1, 64]})");  // deployments[1] is v4pro-h200; "only" is k3-h200
  o = sh("sweep " + g.string() + " --out " + (d / "o8").string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("varies deployment \"v4pro-h200\", which \"only\": \"k3-h200\" leaves out"), std::string::npos) << o.text;
  g = write_grid(d, R"({"deployments.0.name": ["x", "y"]})");
  o = sh("sweep " + g.string() + " --out " + (d / "o9").string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("point p0000 (deployments.0.name = \"x\"): \"only\": no deployment \"k3-h200\" in this point"), std::string::npos) << o.text;
  std::ofstream(d / "empty-only.json") << "{\"scenario\": \"" << SERVESIM_SOURCE_DIR << "/scenarios/default.json\", \"only\": \"\", \"grid\": {\"seed\": [1]}}\n";
  o = sh("sweep " + (d / "empty-only.json").string() + " --out " + (d / "o10").string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("\"only\" is empty"), std::string::npos) << o.text;
  g = write_grid(d, R"({"deployments.00.decode.max_running": [8]})");
  o = sh("sweep " + g.string() + " --out " + (d / "o4").string());
  EXPECT_EQ(o.status, 2) << o.text;
  EXPECT_NE(o.text.find("grid field \"deployments.00.decode.max_running\": no such field"), std::string::npos) << o.text;
  fs::remove_all(d);
}

// An axis of paths reads them relative to the base scenario's folder, as the scenario's own paths
// (rev26: a trace axis ["a.jsonl", "b.jsonl"] passed the up-front check and every point's run then
// looked for points/.tmp-*/a.jsonl: 2 failed, exit 1). Two 3-row Mooncake traces beside the scenario;
// the second's prompts are twice as long, so the two rows must differ.
TEST(Sweep, PathAxesAreReadRelativeToTheScenario) {
  const fs::path d = scratch("paths");
  // the default scenario with a Mooncake trace named relative to this folder
  nlohmann::json sc = nlohmann::json::parse(std::ifstream(std::string(SERVESIM_SOURCE_DIR) + "/scenarios/default.json"));
  sc["workload"] = {{"kind", "mooncake"}, {"trace", "a.jsonl"}, {"block_tokens", 512}};
  std::ofstream(d / "s.json") << sc.dump();
  for (const auto& [name, len] : std::vector<std::pair<std::string, int>>{{"a.jsonl", 1000}, {"b.jsonl", 2000}}) {
    std::ofstream t(d / name);
    for (int i = 0; i < 3; ++i)
    {  // one hash id per 512-token block
      t << "{\"timestamp\": " << i * 100 << ", \"input_length\": " << len << ", \"output_length\": 20, \"hash_ids\": [";
      for (int b = 0; b < (len + 511) / 512; ++b) t << (b ? ", " : "") << 10 * i + b;
      t << "]}\n";
    }
  }
  std::ofstream(d / "grid.json") << R"({"scenario": "s.json", "only": "v4pro-h200", "grid": {"workload.trace": ["a.jsonl", "b.jsonl"]}})";
  const Out o = sh("sweep " + (d / "grid.json").string() + " --out " + (d / "out").string() + " --jobs 1");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("2/2 points done"), std::string::npos) << o.text;
  const auto rows = lines(slurp(d / "out" / "results.csv"));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].rfind("p0000,a.jsonl,ok,v4pro-h200,", 0), 0u) << rows[1];
  EXPECT_EQ(rows[2].rfind("p0001,b.jsonl,ok,v4pro-h200,", 0), 0u) << rows[2];
  EXPECT_NE(rows[1].substr(rows[1].find("v4pro-h200")), rows[2].substr(rows[2].find("v4pro-h200")));
  // resume reads the inputs' bytes: a.jsonl changed (one more request), so p0000 runs again and
  // p0001 resumes (rev26: a changed model file resumed the old results)
  const Out same = sh("sweep " + (d / "grid.json").string() + " --out " + (d / "out").string() + " --jobs 1");
  EXPECT_NE(same.text.find("2 resumed"), std::string::npos) << same.text;
  std::ofstream(d / "a.jsonl", std::ios::app) << "{\"timestamp\": 300, \"input_length\": 1000, \"output_length\": 20, \"hash_ids\": [90, 91]}\n";
  const Out changed = sh("sweep " + (d / "grid.json").string() + " --out " + (d / "out").string() + " --jobs 1");
  ASSERT_EQ(changed.status, 0) << changed.text;
  EXPECT_NE(changed.text.find("1 to run"), std::string::npos) << changed.text;
  const auto rows2 = lines(slurp(d / "out" / "results.csv"));
  ASSERT_EQ(rows2.size(), 3u);
  EXPECT_NE(rows2[1], rows[1]);  // 4 requests now
  EXPECT_EQ(rows2[2], rows[2]);
  // a model named bare is looked up as `run` of the scenario looks it up: the scenario folder's
  // models/ first (rev26 review: the point ran the repository's file, and a name only the folder
  // has failed every point); v4x is V4-Pro with a 4x vocabulary, so its weights per GPU differ
  nlohmann::json m = nlohmann::json::parse(std::ifstream(std::string(SERVESIM_SOURCE_DIR) + "/scenarios/models/deepseek-v4-pro.json"));
  m["name"] = "v4x", m["vocab_size"] = 4 * m["vocab_size"].get<long long>();
  fs::create_directories(d / "models");
  std::ofstream(d / "models" / "v4x.json") << m.dump();
  std::ofstream(d / "g2.json") << R"({"scenario": "s.json", "only": "v4pro-h200", "grid": {"deployments.1.model": ["v4x", "deepseek-v4-pro"]}})";
  const Out o2 = sh("sweep " + (d / "g2.json").string() + " --out " + (d / "o2").string() + " --jobs 1");
  ASSERT_EQ(o2.status, 0) << o2.text;
  auto weights = [&](const char* id) {
    return nlohmann::json::parse(std::ifstream(d / "o2" / "points" / id / "v4pro-h200" / "summary.json"))["memory_per_gpu"]["decode"]["other_weights_gb"].get<double>();
  };
  EXPECT_GT(weights("p0000"), weights("p0001") + 1.0);
  EXPECT_NE(slurp(d / "o2" / "points" / "p0000" / "inputs.txt").find((d / "models" / "v4x.json").string()), std::string::npos);
  fs::remove_all(d);
}

TEST(Sweep, TableHasOneRowPerPointInGridOrderAndResumes) {
  const fs::path d = scratch("run");
  const fs::path g = write_grid(d, R"({"deployments.0.decode.max_running": [32, 64], "workload.rate_per_s": [2.0, 3.4], "workload.requests": [12]})");
  const fs::path out = d / "out";
  const Out o = sh("sweep " + g.string() + " --out " + out.string() + " --jobs 2");
  ASSERT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("4/4 points done"), std::string::npos) << o.text;
  const std::string csv = slurp(out / "results.csv");
  const auto rows = lines(csv);
  ASSERT_EQ(rows.size(), 5u) << csv;  // header + 4 points (one deployment each)
  EXPECT_EQ(rows[0].rfind("point,deployments.0.decode.max_running,workload.rate_per_s,workload.requests,status,deployment,", 0), 0u) << rows[0];
  EXPECT_EQ(rows[1].rfind("p0000,32,2.0,12,ok,k3-h200,", 0), 0u) << rows[1];
  EXPECT_EQ(rows[2].rfind("p0001,32,3.4,12,ok,k3-h200,", 0), 0u) << rows[2];
  EXPECT_EQ(rows[3].rfind("p0002,64,2.0,12,ok,k3-h200,", 0), 0u) << rows[3];
  EXPECT_EQ(rows[4].rfind("p0003,64,3.4,12,ok,k3-h200,", 0), 0u) << rows[4];
  const std::string json = slurp(out / "results.json");
  const auto summary_time = fs::last_write_time(out / "points" / "p0002" / "summary.json");
  const std::string summary = slurp(out / "points" / "p0002" / "summary.json");
  // Resume: nothing re-runs; the table is byte-identical and the points' files untouched.
  const Out o2 = sh("sweep " + g.string() + " --out " + out.string() + " --jobs 1");
  ASSERT_EQ(o2.status, 0) << o2.text;
  EXPECT_NE(o2.text.find("4 resumed"), std::string::npos) << o2.text;
  EXPECT_EQ(slurp(out / "results.csv"), csv);
  EXPECT_EQ(slurp(out / "results.json"), json);
  EXPECT_EQ(fs::last_write_time(out / "points" / "p0002" / "summary.json"), summary_time);
  EXPECT_EQ(slurp(out / "points" / "p0002" / "summary.json"), summary);
  // The same grid from scratch one point at a time: the same table, byte for byte.
  const Out o3 = sh("sweep " + g.string() + " --out " + (d / "out1").string() + " --jobs 1");
  ASSERT_EQ(o3.status, 0) << o3.text;
  EXPECT_EQ(slurp(d / "out1" / "results.csv"), csv);
  EXPECT_EQ(slurp(d / "out1" / "results.json"), json);
  // The same points with another "only" (not in point.json) run again: rev25 found the old
  // deployment's rows resumed under the new grid. And a truncated deployment summary re-runs its point.
  // (here: "only" left out, so both deployments run; the grid's axis is deployments[0]'s)
  const std::string with_only = slurp(g);
  std::string other = with_only;
  other.erase(other.find("\"only\": \"k3-h200\", "), 19);
  std::ofstream(g) << other;
  {
    std::ofstream trunc(d / "out1" / "points" / "p0001" / "k3-h200" / "summary.json");
    trunc << "{\"deployment\": \"k3";
  }
  const Out o4 = sh("sweep " + g.string() + " --out " + out.string() + " --jobs 1");
  ASSERT_EQ(o4.status, 0) << o4.text;
  EXPECT_NE(o4.text.find("4 to run"), std::string::npos) << o4.text;
  const auto rows4 = lines(slurp(out / "results.csv"));
  ASSERT_EQ(rows4.size(), 9u);  // header + 4 points x 2 deployments
  for (size_t i = 1; i < rows4.size(); ++i) EXPECT_NE(rows4[i].find(i % 2 ? ",ok,k3-h200," : ",ok,v4pro-h200,"), std::string::npos) << rows4[i];
  std::ofstream(g) << with_only;
  const Out o5 = sh("sweep " + g.string() + " --out " + (d / "out1").string() + " --jobs 1");
  ASSERT_EQ(o5.status, 0) << o5.text;
  EXPECT_NE(o5.text.find("1 to run"), std::string::npos) << o5.text;  // p0001, whose k3-h200/summary.json was cut
  EXPECT_EQ(slurp(d / "out1" / "results.csv"), csv);
  fs::remove_all(d);
}
