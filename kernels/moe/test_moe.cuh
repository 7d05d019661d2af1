// Shared by the test_moe sources (test_moe.cu, test_moe_w4a16.cu, test_moe_gemm.cu): includes, SKIP_NO_GPU
// and make_rng (a fresh random seed per call, or SERVESIM_TEST_SEED; a failed test prints the seeds it
// used). Each source registers its tests in its own anonymous namespace.
#pragma once
#include "moe/moe.cuh"
#include "moe/test_util.cuh"

#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <vector>

using namespace servesim::kernels;
using namespace servesim::kernels::moe;

#define SKIP_NO_GPU() \
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device"

// The seeds of the current test's make_rng calls (one list for all test_moe sources); a failed test
// prints them (line "[   SEED   ]", just before its FAILED line): rerun with SERVESIM_TEST_SEED=<seed>
// (every make_rng call of the run then uses that seed, so the failing call sees the same data again).
namespace test_moe_seed {
inline std::vector<unsigned long long>& seeds() {
  static std::vector<unsigned long long> v;
  return v;
}
class Printer : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override { seeds().clear(); }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    if (!t.result()->Failed() || seeds().empty()) return;
    std::printf("[   SEED   ] %s.%s: make_rng seed(s)", t.test_suite_name(), t.name());
    for (const unsigned long long s : seeds()) std::printf(" %llu", s);
    std::printf(" (reproduce: SERVESIM_TEST_SEED=<seed> ./test_moe --gtest_filter=%s.%s)\n", t.test_suite_name(), t.name());
    std::fflush(stdout);
  }
};
inline const bool kRegistered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new Printer);  // gtest owns it
  return true;
}();
}  // namespace test_moe_seed

namespace {

/// A fresh random seed per call (std::random_device), or SERVESIM_TEST_SEED when set; recorded for
/// the failure message above.
std::mt19937_64 make_rng() {
  const char* e = std::getenv("SERVESIM_TEST_SEED");
  const unsigned long long seed = e && *e ? std::strtoull(e, nullptr, 0) : std::random_device{}();
  test_moe_seed::seeds().push_back(seed);
  return std::mt19937_64(seed);
}

}  // namespace
