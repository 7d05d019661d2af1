// cuBLASLt projection plans (BF16, FP8 per-tensor scale, FP8 block scale, strided batch) against
// a double-precision CPU GEMM.
#include "attention/proj.cuh"
#include "attention/tests/test_util.cuh"

#include <algorithm>

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

// ---- own FP8 block-scaled dense GEMM (proj_fp8.cu) against a double-precision CPU reference ----
namespace {
struct OwnFp8Case {
  int M, N, K, split, bt;  // split / bt 0: the heuristic
  int cluster = 0;         // 1: split partials reduced in a cluster (DSMEM)
  int rows = 128;          // weight rows per CTA (128: two consumer warpgroups; 64: one; 0: the heuristic)
  int pdl = 0;             // 1: programmatic dependent launch; the reps then also run as one back-to-back burst
  int pipe = 0;            // consumer pipeline (Fp8DenseConfig::pipe)
};
// Writes dst = src slowly (one block) after letting its dependents launch at once: a PDL-launched
// GEMM behind it starts while it runs and must not read X before it completed.
__global__ void slow_copy_trigger_early(const uint8_t* src, uint8_t* dst, size_t n) {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}
// Runs every case on fresh random data (e4m3 operands, random 1x128 / 128x128 scales) with one
// shared workspace (zeroed once), each case `reps` times (the workspace must come back zero).
void own_fp8_cases(const std::vector<OwnFp8Case>& cases, int reps) {
  size_t ws_bytes = 0;
  for (const auto& c : cases) ws_bytes = std::max(ws_bytes, fp8_dense_workspace_bytes(fp8_dense_plan(c.M, c.N, c.K, c.split, c.bt, c.cluster, c.rows, c.pdl, c.pipe)));
  DevBuf<uint8_t> ws(ws_bytes + 1);
  SS_CUDA(cudaMemset(ws.p, 0, ws.n));
  for (const auto& c : cases) {
    const int M = c.M, N = c.N, K = c.K, KB = K / 128, NT = (N + 127) / 128, ld = (M + 3) / 4 * 4;
    DevBuf<uint8_t> X8(static_cast<size_t>(M) * K), W8(static_cast<size_t>(N) * K);
    fill_e4m3(X8.p, X8.n, 8.f, rng()());
    fill_e4m3(W8.p, W8.n, 8.f, rng()());
    const auto hxs = rand_f32(static_cast<size_t>(KB) * ld, 0.25f, 2.f), hws = rand_f32(static_cast<size_t>(NT) * KB, 0.25f, 2.f);
    DevBuf<float> XS, WS;
    XS.upload(hxs);
    WS.upload(hws);
    SS_CUDA(cudaDeviceSynchronize());
    const auto hx = X8.download(), hw = W8.download();
    std::vector<double> ref(static_cast<size_t>(M) * N);
    std::vector<double> xd(hx.size()), wd(hw.size());
    for (size_t i = 0; i < hx.size(); ++i) xd[i] = e4m3_to_float_host(hx[i]);
    for (size_t i = 0; i < hw.size(); ++i) wd[i] = e4m3_to_float_host(hw[i]);
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double acc = 0;
        for (int kb = 0; kb < KB; ++kb) {
          double s = 0;
          for (int k = kb * 128; k < kb * 128 + 128; ++k) s += xd[static_cast<size_t>(m) * K + k] * wd[static_cast<size_t>(n) * K + k];
          acc += s * hxs[static_cast<size_t>(kb) * ld + m] * hws[static_cast<size_t>(n / 128) * KB + kb];
        }
        ref[static_cast<size_t>(m) * N + n] = acc;
      }
    const int guard = 8;  // rows past M must stay untouched
    DevBuf<bf16> Y(static_cast<size_t>(M + guard) * N);
    // reps calls checked one by one; with PDL, then a burst of reps back-to-back calls behind a
    // slow copy kernel that writes X (triggering its dependents early), checked once
    for (int r = 0; r < reps + (c.pdl ? 1 : 0); ++r) {
      const bool burst = r == reps;
      poison(Y.p, Y.n);
      Fp8DenseConfig cfg;
      if (burst) {
        DevBuf<uint8_t> Xsrc(X8.n);
        SS_CUDA(cudaMemcpy(Xsrc.p, X8.p, X8.n, cudaMemcpyDeviceToDevice));
        fill_e4m3(X8.p, X8.n, 8.f, rng()());  // wrong X until the copy lands
        SS_CUDA(cudaDeviceSynchronize());
        slow_copy_trigger_early<<<1, 128, 0, cudaStreamPerThread>>>(Xsrc.p, X8.p, X8.n);
        SS_LAUNCH_CHECK();
        for (int b = 0; b < reps; ++b)
          cfg = fp8_dense_gemm(X8.p, XS.p, ld, W8.p, WS.p, Y.p, M, N, K, ws.p, ws.n, cudaStreamPerThread, c.split, c.bt,
                               c.cluster, c.rows, c.pdl, c.pipe);
        SS_CUDA(cudaStreamSynchronize(cudaStreamPerThread));
      } else {
        cfg = fp8_dense_gemm(X8.p, XS.p, ld, W8.p, WS.p, Y.p, M, N, K, ws.p, ws.n, 0, c.split, c.bt, c.cluster, c.rows,
                             c.pdl, c.pipe);
      }
      SS_CUDA(cudaDeviceSynchronize());
      const auto all = to_double(Y.download());
      const std::vector<double> got(all.begin(), all.begin() + static_cast<size_t>(M) * N);
      size_t touched = 0;
      for (size_t i = static_cast<size_t>(M) * N; i < all.size(); ++i) touched += std::isnan(all[i]) ? 0 : 1;
      const double e = rel_err(got, ref);
      char name[200];
      std::snprintf(name, sizeof name, "own fp8 M=%d N=%d K=%d bt=%d split=%d rows=%d pipe=%d%s%s %s %d", M, N, K, cfg.bt,
                    cfg.split, cfg.rows, cfg.pipe, cfg.cluster ? " cluster" : "", cfg.pdl ? " pdl" : "", burst ? "burst" : "rep", r);
      report(name, e, 1e-2);
      EXPECT_LT(e, 1e-2) << name;
      EXPECT_EQ(touched, 0u) << name << ": rows past M written";
    }
  }
  // the workspace is left zero (counters and partial tiles)
  const auto h = ws.download();
  size_t nz = 0;
  for (uint8_t b : h) nz += b != 0;
  EXPECT_EQ(nz, 0u) << "workspace not left zero";
}
}  // namespace

TEST(Proj, OwnFp8SmallM) {
  SKIP_WITHOUT_GPU();
  own_fp8_cases({{1, 64, 512, 0, 0},        // N < 128 (indexer weights projection shape class)
                 {1, 1536, 7168, 0, 0},     // wq_a at decode: split-K
                 {5, 2112, 1024, 0, 0},     // partial last N tile
                 {16, 512, 2048, 0, 0},
                 {37, 256, 1536, 0, 0},
                 {64, 384, 2048, 1, 0},     // forced splits, even and uneven
                 {64, 384, 2048, 3, 0},
                 {64, 384, 2048, 16, 0},
                 {24, 128, 512, 4, 0}},
                2);
}
TEST(Proj, OwnFp8WideTiles) {
  SKIP_WITHOUT_GPU();
  own_fp8_cases({{100, 256, 1024, 0, 0},    // bt 128
                 {128, 640, 1024, 5, 0},
                 {300, 128, 512, 0, 0},     // bt 256 (two token tiles, partial)
                 {256, 256, 1024, 3, 0},
                 {200, 136, 512, 2, 128},   // bt 128 forced, partial N tile of 8 columns
                 {33, 128, 256, 1, 64}},
                2);
}
TEST(Proj, OwnFp8ClusterReduction) {
  SKIP_WITHOUT_GPU();
  own_fp8_cases({{1, 64, 512, 2, 0, 1},      // N < 128
                 {5, 2112, 1024, 8, 0, 1},   // partial last N tile, 8 splits
                 {37, 256, 1536, 3, 64, 1},  // uneven splits, rows < bt
                 {64, 384, 2048, 4, 64, 1},
                 {100, 256, 1024, 2, 128, 1},
                 {300, 136, 512, 4, 256, 1},  // bt 256, partial N tile of 8 columns
                 {16, 1536, 7168, 7, 16, 1},
                 {24, 128, 512, 1, 32, 1}},   // split 1: plain path
                2);
}
TEST(Proj, OwnFp8Rows64) {
  SKIP_WITHOUT_GPU();
  own_fp8_cases({{1, 64, 512, 0, 0, 0, 64},          // one 64-row tile
                 {1, 1536, 7168, 0, 0, 0, 64},       // heuristic split, atomic
                 {5, 2112, 1024, 0, 0, 0, 64},       // 33 tiles
                 {16, 200, 2048, 3, 16, 0, 64},      // partial last tile of 8 columns, uneven splits
                 {37, 136, 1536, 1, 64, 0, 64},      // rows < bt, partial tile
                 {64, 384, 2048, 4, 64, 1, 64},      // cluster reduction
                 {100, 328, 1024, 2, 64, 1, 64},     // two token tiles, partial, cluster
                 {128, 704, 512, 1, 32, 0, 64},      // four token tiles
                 {24, 128, 1024, 8, 8, 1, 64},       // bt 8, 8-CTA cluster (8 k-blocks)
                 {1, 2112, 7168, 0, 0, 0, 0},        // the heuristic (64 rows here)
                 {64, 4096, 1024, 0, 0, 0, 0},
                 {200, 512, 1024, 0, 0, 0, 0}},      // the heuristic at bt 256 (128 rows)
                2);
}
TEST(Proj, OwnFp8Pdl) {
  SKIP_WITHOUT_GPU();
  own_fp8_cases({{1, 64, 512, 0, 0, 0, 128, 1},
                 {1, 1536, 7168, 0, 0, 0, 128, 1},      // atomic split: the workspace is shared by the burst
                 {64, 384, 2048, 4, 64, 1, 128, 1},     // cluster + PDL
                 {100, 256, 1024, 0, 0, 0, 128, 1},     // bt 128 (setmaxnreg path)
                 {300, 136, 512, 2, 256, 0, 128, 1},    // bt 256, partial tile
                 {5, 2112, 1024, 0, 0, 0, 64, 1},     // 64-row tiles + PDL
                 {37, 200, 1536, 3, 32, 0, 64, 1},
                 {128, 704, 7168, 2, 64, 1, 64, 1},   // cluster + 64 rows + PDL, 56 k-blocks
                 {64, 2112, 7168, 0, 0, 0, 0, 1},     // the heuristic + PDL
                 {64, 4096, 1024, 1, 32, 0, 64, 1}},  // 128 x 2 CTAs (more than fit at once with the burst)
                3);
}
TEST(Proj, OwnFp8Pipe) {
  SKIP_WITHOUT_GPU();
  // consumer pipelines 1 (weight scales staged in the ring) and 2 (promotion overlapped with the next
  // k-block's wgmma): odd and even k-block counts per split (the overlapped loop runs two blocks a turn),
  // one k-block, rings wrapped many times, both tile heights, atomic / cluster / no split, PDL
  own_fp8_cases({{1, 64, 512, 0, 0, 0, 64, 0, 2},            // 4 k-blocks, one tile
                 {1, 1536, 7168, 0, 0, 0, 64, 1, 2},         // heuristic split, atomic, PDL
                 {5, 2112, 1024, 3, 8, 0, 64, 0, 2},         // 3 / 3 / 2 k-blocks per split
                 {16, 200, 2048, 3, 16, 1, 64, 1, 2},        // partial tile of 8 columns, cluster
                 {37, 136, 1536, 1, 32, 0, 64, 0, 2},        // 12 k-blocks, ring of 8 wraps
                 {64, 384, 2048, 4, 64, 1, 64, 1, 2},        // cluster + 64 rows + bt 64
                 {100, 328, 1024, 2, 64, 0, 64, 0, 2},       // two token tiles, partial
                 {128, 704, 7168, 1, 64, 0, 64, 1, 2},       // 56 k-blocks, no split
                 {24, 128, 1024, 8, 8, 1, 64, 0, 2},         // 1 k-block per split, 8-CTA cluster
                 {64, 2112, 7168, 7, 32, 0, 128, 1, 2},      // 128 rows, bt 32, 8 k-blocks per split
                 {100, 256, 1024, 0, 128, 0, 128, 1, 2},     // bt 128 (setmaxnreg path)
                 {200, 136, 512, 2, 128, 1, 128, 0, 2},      // bt 128, partial N tile, cluster
                 {1, 64, 512, 0, 0, 0, 64, 0, 1},            // pipe 1
                 {5, 2112, 1024, 0, 0, 0, 64, 1, 1},
                 {64, 384, 2048, 4, 64, 1, 128, 1, 1},       // bt 64 at 128 rows (pipe 1 only)
                 {300, 136, 512, 2, 256, 0, 128, 1, 1},      // bt 256, partial tile
                 {37, 200, 1536, 3, 32, 0, 64, 0, 1}},
                2);
}
TEST(Proj, OwnFp8TokenSplit) {
  SKIP_WITHOUT_GPU();
  // helper pj3: 64-row weight tiles x bt 128 (two consumer warpgroups x 64 token columns share each weight
  // tile; 4-stage ring): M 65..128 incl. partial token tiles, partial N tiles of 8 columns, odd / even /
  // single k-block counts per split, the ring wrapped, atomic / cluster / no split, pipe 0 and 1, PDL bursts
  own_fp8_cases({{65, 2112, 1024, 0, 128, 0, 64, 0, 0},      // heuristic split (33 tiles), atomic
                 {72, 200, 2048, 3, 128, 0, 64, 1, 1},       // partial tile of 8 columns, 6 / 5 / 5 k-blocks, PDL
                 {96, 328, 1536, 1, 128, 0, 64, 0, 1},       // no split, 12 k-blocks (ring of 4 wraps 3 times)
                 {112, 704, 7168, 2, 128, 1, 64, 1, 0},      // cluster of 2, 28 k-blocks each, PDL
                 {128, 384, 1152, 3, 128, 1, 64, 0, 1},      // 9 k-blocks: 3 per split (odd), cluster
                 {128, 4096, 1024, 0, 128, 0, 64, 1, 1},     // 64 tiles, heuristic split, PDL
                 {100, 136, 640, 5, 128, 0, 64, 0, 0},       // one k-block per split, partial N tile
                 {200, 256, 1024, 2, 128, 0, 64, 0, 1},      // M > 128: two token tiles, the second partial
                 {127, 64, 384, 1, 128, 0, 64, 1, 1},        // 3 k-blocks, one tile, PDL
                 {80, 2112, 7168, 7, 128, 1, 64, 1, 1},      // 7-CTA cluster, 8 k-blocks each, PDL
                 {121, 1032, 2048, 4, 128, 1, 64, 0, 0}},    // 17 tiles (last of 8 columns), cluster of 4
                2);
}
