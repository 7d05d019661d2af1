// cuBLASLt projection plans (BF16, FP8 per-tensor scale, FP8 block scale, strided batch) against
// a double-precision CPU GEMM.
#include "attention/proj.cuh"
#include "attention/tests/test_util.cuh"

using namespace servesim::attn;
using namespace servesim::attn::test;

namespace {
void gemm_case(GemmKind kind, int M, int N, int K, int batch) {
  const bool fp8 = kind != GemmKind::kBF16;
  const size_t nx = static_cast<size_t>(batch) * M * K, nw = static_cast<size_t>(batch) * N * K;
  std::vector<double> xd(nx), wd(nw);
  DevBuf<uint8_t> X8, W8;
  DevBuf<bf16> Xb, Wb;
  if (fp8) {
    X8.alloc(nx);
    W8.alloc(nw);
    fill_e4m3(X8.p, nx, 8.f, rng()());
    fill_e4m3(W8.p, nw, 8.f, rng()());
    SS_CUDA(cudaDeviceSynchronize());
    const auto hx = X8.download(), hw = W8.download();
    for (size_t i = 0; i < nx; ++i) xd[i] = e4m3_to_float_host(hx[i]);
    for (size_t i = 0; i < nw; ++i) wd[i] = e4m3_to_float_host(hw[i]);
  } else {
    Xb.upload(rand_bf16(nx, -1, 1, &xd));
    Wb.upload(rand_bf16(nw, -1, 1, &wd));
  }
  DevBuf<bf16> Dd(static_cast<size_t>(batch) * M * N);
  poison(Dd.p, Dd.n);
  GemmShape sh;
  sh.M = M; sh.N = N; sh.K = K; sh.batch = batch;
  GemmPlan plan;
  if (!plan.create(kind, sh)) {
    std::printf("[attn-test] gemm %s M=%d N=%d K=%d batch=%d: cuBLASLt has no algorithm (recorded as unsupported)\n",
                gemm_kind_name(kind), M, N, K, batch);
    if (kind == GemmKind::kFP8Block) GTEST_SKIP() << "block-scaled FP8 not offered by cuBLASLt here";
    FAIL() << "no cuBLASLt algorithm";
  }
  DevBuf<float> sx, sw;
  double scale = 1.0;
  if (kind == GemmKind::kFP8Tensor) {
    sx.upload(std::vector<float>{0.5f});
    sw.upload(std::vector<float>{0.25f});
    scale = 0.125;
  }
  plan.run(fp8 ? static_cast<const void*>(X8.p) : Xb.p, fp8 ? static_cast<const void*>(W8.p) : Wb.p, Dd.p, 0,
           kind == GemmKind::kFP8Tensor ? sx.p : nullptr, kind == GemmKind::kFP8Tensor ? sw.p : nullptr);
  SS_CUDA(cudaDeviceSynchronize());
  const auto got = to_double(Dd.download());
  std::vector<double> ref(got.size());
  for (int b = 0; b < batch; ++b)
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double acc = 0;
        for (int k = 0; k < K; ++k)
          acc += xd[(static_cast<size_t>(b) * M + m) * K + k] * wd[(static_cast<size_t>(b) * N + n) * K + k];
        ref[(static_cast<size_t>(b) * M + m) * N + n] = acc * scale;
      }
  const double e = rel_err(got, ref);
  char name[128];
  std::snprintf(name, sizeof name, "gemm %s M=%d N=%d K=%d batch=%d", gemm_kind_name(kind), M, N, K, batch);
  report(name, e, 1e-2);
  EXPECT_LT(e, 1e-2);
}
}  // namespace

TEST(Proj, Bf16) { SKIP_WITHOUT_GPU(); gemm_case(GemmKind::kBF16, 37, 96, 256, 1); }
TEST(Proj, Bf16Batched) { SKIP_WITHOUT_GPU(); gemm_case(GemmKind::kBF16, 19, 128, 512, 3); }
TEST(Proj, Fp8TensorScale) { SKIP_WITHOUT_GPU(); gemm_case(GemmKind::kFP8Tensor, 64, 256, 512, 1); }
TEST(Proj, Fp8TensorScaleBatched) { SKIP_WITHOUT_GPU(); gemm_case(GemmKind::kFP8Tensor, 32, 128, 256, 2); }
TEST(Proj, Fp8BlockScale) { SKIP_WITHOUT_GPU(); gemm_case(GemmKind::kFP8Block, 128, 256, 512, 1); }
