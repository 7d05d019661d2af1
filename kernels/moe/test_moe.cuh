// Shared by the test_moe sources (test_moe.cu, test_moe_w4a16.cu, test_moe_gemm.cu): includes, SKIP_NO_GPU
// and make_rng (a fresh random seed per call). Each source registers its tests in its own anonymous namespace.
#pragma once
#include "moe/moe.cuh"
#include "moe/test_util.cuh"

#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <set>

using namespace servesim::kernels;
using namespace servesim::kernels::moe;

#define SKIP_NO_GPU() \
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device"

namespace {

std::mt19937_64 make_rng() { return std::mt19937_64(std::random_device{}()); }

}  // namespace
