// Trace readers and generators: mapping, errors with file:line, determinism, streaming order.
#include "helpers.hpp"
#include "workloads/mooncake.hpp"
#include "workloads/synthetic.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

using namespace servesim;

namespace {

std::string write_tmp(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / ("servesim_" + name);
  std::ofstream(p) << text;
  return p.string();
}

std::string error_reading(const std::string& text) {
  const std::string path = write_tmp("bad.jsonl", text);
  try {
    MooncakeReader r(path, 1.0, 0.0, 512, 0, 1);
    while (r.next()) {
    }
  } catch (const TraceError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Mooncake, MapsFieldsToRequests) {
  const std::string path = write_tmp("ok.jsonl",
                                     "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [0, 1]}\n"
                                     "\n"
                                     "{\"timestamp\": 2500, \"input_length\": 512, \"output_length\": 1, \"hash_ids\": [0]}\n");
  MooncakeReader r(path, 2.0, 0.0, 512, 0, 1);
  auto a = r.next(), b = r.next();
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(r.next());
  EXPECT_EQ(a->id, 0u);
  EXPECT_EQ(a->input_tokens, 1000);
  EXPECT_EQ(a->output_tokens, 5);
  EXPECT_EQ(a->block_hashes, (std::vector<std::uint64_t>{0, 1}));
  EXPECT_DOUBLE_EQ(b->arrival_s, 5.0);  // 2,500 ms × time_scale 2
  EXPECT_EQ(b->origin, path + ":3");
}

TEST(Mooncake, MalformedRowsNameFileAndLine) {
  const std::string ok = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]}\n";
  EXPECT_NE(error_reading(ok + "{\"timestamp\": 1, \"input_length\": -4, \"output_length\": 1, \"hash_ids\": []}\n").find("bad.jsonl:2: \"input_length\" must be ≥ 1, got -4"), std::string::npos);
  EXPECT_NE(error_reading(ok + ok + "{\"timestamp\": \"x\"}\n").find("bad.jsonl:3: \"timestamp\" must be an integer"), std::string::npos);
  EXPECT_NE(error_reading(ok + "{\"timestamp\": 5, \"input_length\": 10\n").find("bad.jsonl:2: not valid JSON"), std::string::npos);
  EXPECT_NE(error_reading("{\"timestamp\": 9, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]}\n" + ok).find("bad.jsonl:2: timestamp 0 ms is earlier"), std::string::npos);
  EXPECT_NE(error_reading("{\"timestamp\": 0, \"input_length\": 10}\n").find("missing field \"output_length\""), std::string::npos);
  EXPECT_NE(error_reading("{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 1, \"hash_ids\": [0]}\n").find("needs ceil(1000/512) = 2"), std::string::npos);
  EXPECT_NE(error_reading("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0], \"user\": 3}\n").find("unknown field \"user\""), std::string::npos);
  EXPECT_THROW(MooncakeReader("/nonexistent/trace.jsonl", 1, 0, 512, 0, 1), std::runtime_error);
}

TEST(Mooncake, JitterKeepsArrivalOrderAndIsSeeded) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "{\"timestamp\": " + std::to_string(i / 20 * 3000) + ", \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [" + std::to_string(i) + "]}\n";
  const std::string path = write_tmp("jitter.jsonl", text);
  auto read_all = [&](std::uint64_t seed) {
    MooncakeReader r(path, 1.0, 3.0, 512, 0, seed);
    std::vector<double> t;
    while (auto q = r.next()) t.push_back(q->arrival_s);
    return t;
  };
  const auto a = read_all(7), b = read_all(7), c = read_all(8);
  ASSERT_EQ(a.size(), 200u);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(std::set<double>(a.begin(), a.end()).size(), 200u);  // the bursts are spread out
}

TEST(Synthetic, SeededAndAtTheRequestedRate) {
  WorkloadSpec w;
  w.requests = 20000;
  w.rate_per_s = 4.0;
  w.input.kind = Dist::Kind::lognormal, w.input.mu = 8.7367, w.input.sigma = 1.1991, w.input.min = 891, w.input.max = 126195;
  w.output.value = 7;
  w.shared_prefix_tokens = 512;
  SyntheticSource a(w, 3), b(w, 3);
  double last = 0, log_sum = 0;
  long long n = 0;
  while (auto r = a.next()) {
    auto s = b.next();
    ASSERT_EQ(r->arrival_s, s->arrival_s);
    ASSERT_EQ(r->input_tokens, s->input_tokens);
    EXPECT_EQ(r->block_hashes.front(), 0u);  // the shared system prompt block
    last = r->arrival_s;
    log_sum += std::log(static_cast<double>(r->input_tokens));
    ++n;
  }
  EXPECT_EQ(n, 20000);
  EXPECT_NEAR(last / (n - 1), 0.25, 0.25 * 0.03);    // mean gap 1/rate, within 3% (σ/√n ≈ 0.7%)
  EXPECT_NEAR(log_sum / n, 8.7367, 0.03);            // log-normal μ (clamping moves it slightly)
  w.arrival = WorkloadSpec::Arrival::gamma;
  w.burstiness = 4.0;
  SyntheticSource g(w, 3);
  std::vector<double> gaps;
  double prev = 0;
  while (auto r = g.next()) gaps.push_back(r->arrival_s - prev), prev = r->arrival_s;
  double m = 0, v = 0;
  for (size_t i = 1; i < gaps.size(); ++i) m += gaps[i];
  m /= static_cast<double>(gaps.size() - 1);
  for (size_t i = 1; i < gaps.size(); ++i) v += (gaps[i] - m) * (gaps[i] - m);
  v /= static_cast<double>(gaps.size() - 2);
  EXPECT_NEAR(m, 0.25, 0.25 * 0.06);
  EXPECT_NEAR(v / (m * m), 4.0, 0.4);  // squared coefficient of variation = burstiness
}

TEST(Mooncake, ConversationTracePrefixReuseClosedForm) {
  // A block is a hit when an earlier request (arrival order) carried it: 36.64% of the
  // conversation trace's blocks and 63.96% of the synthetic trace's (issue #6).
  for (auto [file, want] : {std::pair<const char*, double>{"conversation_trace.jsonl", 0.3664}, {"synthetic_trace.jsonl", 0.6396}}) {
    const std::string path = test::shared_traces() + "/mooncake/" + file;
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent (../shared/traces not available)";
    MooncakeReader r(path, 1.0, 0.0, 512, 0, 1);
    std::set<std::uint64_t> seen;
    long long hits = 0, total = 0;
    while (auto q = r.next()) {
      for (auto h : q->block_hashes) hits += seen.count(h), ++total;
      seen.insert(q->block_hashes.begin(), q->block_hashes.end());
    }
    EXPECT_NEAR(static_cast<double>(hits) / total, want, 0.00005) << file;
  }
}
