// Request routing (issue #17): tied instances share the work, deterministically. Two prefill and
// two decode instances of the one-GPU tiny model; six requests 2 s apart, each done long before the
// next arrives (10 ms prefill steps, 2 ms decode steps), so every arrival finds all instances tied.
#include "helpers.hpp"
#include "sim/policies/router.hpp"
#include "sim/simulation.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <deque>
#include <map>
#include <string>

using namespace servesim;

namespace {

class Records final : public EventSink {
 public:
  void on_request(const RequestRecord& r) override { by_id[r.id] = r; }
  std::map<std::uint64_t, RequestRecord> by_id;
};

class ListSource final : public RequestSource {
 public:
  explicit ListSource(std::vector<Request> rs) : q_(rs.begin(), rs.end()) {}
  std::optional<Request> next() override {
    if (q_.empty()) return std::nullopt;
    Request r = q_.front();
    q_.pop_front();
    return r;
  }
  std::string describe() const override { return "list"; }

 private:
  std::deque<Request> q_;
};

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
