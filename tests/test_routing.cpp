// Request routing (issue #17): tied instances share the work, deterministically. Two prefill and
// two decode instances of the one-GPU tiny model; six requests 2 s apart, each done long before the
// next arrives (10 ms prefill steps, 2 ms decode steps), so every arrival finds all instances tied.
#include "helpers.hpp"
#include "sim/exporters/writers.hpp"
#include "sim/policies/router.hpp"
#include "sim/simulation.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

using namespace servesim;

namespace {

using test::ListSource;
using test::Records;

// {prefill instance, decode instance} of each request, by id
std::vector<std::pair<int, int>> placements(const std::string& router) {
  DeploymentSpec d = test::tiny(2048);
  d.prefill.instances = d.decode.instances = 2;
  d.cluster.nodes = required_nodes(d);
  d.router = d.decode_router = router;
  std::vector<Request> rs;
  for (int i = 0; i < 6; ++i) {
    Request r;
    r.id = static_cast<std::uint64_t>(i), r.arrival_s = 2.0 * i, r.input_tokens = 1024, r.output_tokens = 8;
    r.block_tokens = 512, r.block_hashes = {static_cast<std::uint64_t>(100 + 2 * i), static_cast<std::uint64_t>(101 + 2 * i)};
    rs.push_back(r);
  }
  Records rec;
  Simulation sim(d, std::make_unique<ListSource>(rs), std::make_shared<test::ZeroCost>(), rec, {});
  sim.run();
  std::vector<std::pair<int, int>> out;
  for (const auto& [id, r] : rec.by_id) {
    EXPECT_EQ(r.status, RequestStatus::completed);
    out.push_back({r.prefill_instance, r.decode_instance});
  }
  return out;
}

// One SimGrid engine per process: each run happens in a child process, which sends back
// "p,d;p,d;..." through a pipe.
std::vector<std::pair<int, int>> placements_in_child(const std::string& router) {
  int fd[2];
  EXPECT_EQ(pipe(fd), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    std::string out;
    for (const auto& [p, d] : placements(router)) out += std::to_string(p) + "," + std::to_string(d) + ";";
    if (write(fd[1], out.data(), out.size()) < 0) _exit(2);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  close(fd[1]);
  std::string text;
  char buf[256];
  for (ssize_t n; (n = read(fd[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  close(fd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << router << ": the child run failed";
  std::vector<std::pair<int, int>> v;
  for (size_t i = 0; i < text.size();) {
    const size_t c = text.find(',', i), e = text.find(';', i);
    v.push_back({std::stoi(text.substr(i, c - i)), std::stoi(text.substr(c + 1, e - c - 1))});
    i = e + 1;
  }
  return v;
}

}  // namespace

TEST(Routing, TiedInstancesShareTheWorkInTurnForEveryPolicy) {
  for (const char* router : {"least_loaded", "cache_aware", "round_robin"}) {
    const auto p = placements_in_child(router);
    ASSERT_EQ(p.size(), 6u) << router;
    // every arrival finds both instances idle and empty: the ties rotate 0, 1, 0, 1, 0, 1
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(p[static_cast<size_t>(i)].first, i % 2) << router << " request " << i;
      EXPECT_EQ(p[static_cast<size_t>(i)].second, i % 2) << router << " request " << i;
    }
    EXPECT_EQ(placements_in_child(router), p) << router << ": same scenario, same choices";
  }
}

// The tie rule itself: a strictly better candidate always wins; among tied ones the choice rotates.
TEST(Routing, ABetterCandidateWinsAndTiesRotate) {
  auto r = make_router("least_loaded");
  Request q;
  const std::vector<PrefillCandidate> c = {{0, 0, 5, 0}, {1, 0, 3, 0}, {2, 0, 3, 0}, {3, 0, 9, 0}};
  EXPECT_EQ(r->pick_prefill(q, c), 1u);
  EXPECT_EQ(r->pick_prefill(q, c), 2u);
  EXPECT_EQ(r->pick_prefill(q, c), 1u);
  const std::vector<PrefillCandidate> one = {{0, 0, 5, 0}, {1, 0, 1, 0}};
  EXPECT_EQ(r->pick_prefill(q, one), 1u);
  auto ca = make_router("cache_aware");
  q.input_tokens = 1000;
  // costs: 0 + 1000 − 600 = 400; 100 + 1000 − 700 = 400; 0 + 1000 − 0 = 1000 → tie of the first two
  const std::vector<PrefillCandidate> cc = {{0, 0, 0, 600}, {1, 0, 100, 700}, {2, 0, 0, 0}};
  EXPECT_EQ(ca->pick_prefill(q, cc), 0u);
  EXPECT_EQ(ca->pick_prefill(q, cc), 1u);
  // decode: fewest running first, then most free KV; equal on both → rotate
  const std::vector<DecodeCandidate> dc = {{0, 0, 5e9, 2}, {1, 0, 5e9, 2}, {2, 0, 9e9, 2}, {3, 0, 9e9, 2}, {4, 0, 1e9, 1}};
  EXPECT_EQ(r->pick_decode(q, dc), 4u);
  const std::vector<DecodeCandidate> dt = {{0, 0, 5e9, 2}, {1, 0, 9e9, 2}, {2, 0, 9e9, 2}};
  EXPECT_EQ(r->pick_decode(q, dt), 1u);
  EXPECT_EQ(r->pick_decode(q, dt), 2u);
}

// Issue 17, item 2: a session's reusable history is what the prefix cache holds at the cache's
// block size. One agent session of two rounds on DeepSeek-V3 (no per-sequence state): round 0 is a
// 1,000-token prompt with 10 output tokens; round 1 appends 100 tokens to the 1,010-token history.
// The prefill rank cached round 0's prompt: at 16-token blocks its 62 whole blocks, 992 tokens
// (the 8-token partial block now holds other tokens), at 512-token blocks 512.
TEST(Routing, SessionHistoryIsReusedAtTheCachesBlockSize) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "servesim_session_blocks";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (int block : {16, 512}) {
    const std::string scen = (dir / ("s" + std::to_string(block) + ".json")).string();
    std::ofstream(scen) << R"({"name":"sb","seed":1,"workload":{"kind":"agent","loop":"closed","concurrency":1,"sessions":1,
      "rounds":{"dist":"constant","value":2},"first_prompt_tokens":{"dist":"constant","value":1000},
      "append_tokens":{"dist":"constant","value":100},"output_tokens":{"dist":"constant","value":10},
      "think_s":{"dist":"constant","value":0}},
      "deployments":[{"name":"v3","model":"deepseek-v3","hardware":"h200","prefill":{"ep":8,"attn_tp":8},"decode":{"ep":8,"attn_tp":8},
      "prefix_cache":{"block_tokens":)" << block << "}}]}";
    const fs::path out = dir / ("out" + std::to_string(block));
    ASSERT_EQ(std::system((std::string(SERVESIM_BINARY) + " run " + scen + " --out " + out.string() + " > /dev/null 2>&1").c_str()), 0);
    std::ifstream csv(out / "v3" / "requests.csv");
    std::string header, row0, row1;
    std::getline(csv, header), std::getline(csv, row0), std::getline(csv, row1);
    auto field = [&](const std::string& row, const std::string& name) {
      std::vector<std::string> h, v;
      for (std::stringstream a(header), b(row); ;) {
        std::string x, y;
        if (!std::getline(a, x, ',')) break;
        std::getline(b, y, ',');
        h.push_back(x), v.push_back(y);
      }
      return v[static_cast<size_t>(std::find(h.begin(), h.end(), name) - h.begin())];
    };
    EXPECT_EQ(field(row0, "round"), "0");
    EXPECT_EQ(field(row0, "cached_tokens"), "0");
    EXPECT_EQ(field(row1, "round"), "1");
    EXPECT_EQ(field(row1, "input_tokens"), "1110");
    EXPECT_EQ(field(row1, "cached_tokens"), block == 16 ? "992" : "512") << "cache blocks of " << block;
  }
}

// Issue 17, item 3: which GPUs the per-GPU throughputs divide by. The tiny deployment's pools take
// one GPU each, on separate nodes: 2 nodes, 16 GPUs used. 1,000 prompt and 200 output tokens in
// 10 s: 1000/10/16 = 6.25 input tok/s per GPU, 1000/10/1 = 100 per prefill GPU, 200/10/1 = 20
// output tok/s per decode GPU, 200/10/2 = 10 per node.
TEST(Routing, PerGpuThroughputsSayWhichGpusTheyDivideBy) {
  const DeploymentSpec d = test::tiny(512);
  Summary s;
  s.end_s = 10, s.input_tokens = 1000, s.output_tokens = 200;
  RunReport rep;
  rep.deployment = &d, rep.summary = s;
  const nlohmann::json j = summary_json(rep);
  EXPECT_EQ(j["cluster"]["gpus_used"].get<int>(), 16);
  EXPECT_DOUBLE_EQ(j["throughput"]["input_tokens_per_s_per_gpu"].get<double>(), 6.25);
  EXPECT_DOUBLE_EQ(j["throughput"]["input_tokens_per_s_per_prefill_gpu"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(j["throughput"]["output_tokens_per_s_per_decode_gpu"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(j["throughput"]["output_tokens_per_s_per_node"].get<double>(), 10.0);
}
