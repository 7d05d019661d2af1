// test_moe: correctness tests of the library GEMMs (cuBLAS grouped bf16, cuBLASLt FP8), the own FP8
// block-scaled grouped GEMM (masked and contiguous layouts) and DSV4 mHC against CPU references.
#include "moe/test_moe.cuh"

namespace {

// ------------------------------------------------------------------------------------------------
// Library GEMMs

TEST(MoeLib, CublasGroupedBf16) {
  SKIP_NO_GPU();
  auto rng = make_rng();
  const int N = 256, K = 384;
  const std::vector<int> m = {5, 0, 70, 1};
  cublasHandle_t h;
  SS_CUBLAS(cublasCreate(&h));
  std::vector<DevBuf<bf16>> X, W, Y;
  std::vector<std::vector<double>> xd(m.size()), wd(m.size());
  std::vector<const bf16*> xp, wp;
  std::vector<bf16*> yp;
  for (size_t g = 0; g < m.size(); ++g) {
    X.emplace_back(static_cast<size_t>(std::max(m[g], 1)) * K);
    W.emplace_back(static_cast<size_t>(N) * K);
    Y.emplace_back(static_cast<size_t>(std::max(m[g], 1)) * N);
    X[g].upload(rand_bf16(rng, X[g].n, 1.f, &xd[g]));
    W[g].upload(rand_bf16(rng, W[g].n, 1.f, &wd[g]));
    poison_bf16(Y[g].p, Y[g].n);
    xp.push_back(X[g].p);
    wp.push_back(W[g].p);
    yp.push_back(Y[g].p);
  }
  auto plan = make_grouped_bf16(xp, wp, yp, m, N, K);
  run_grouped_bf16(h, plan, 0);
  SS_CUDA(cudaDeviceSynchronize());
  for (size_t g = 0; g < m.size(); ++g) {
    if (!m[g]) continue;
    const auto y = to_double(Y[g].download());
    std::vector<double> ref(static_cast<size_t>(m[g]) * N);
    for (int r = 0; r < m[g]; ++r)
      for (int n = 0; n < N; ++n) {
        double a = 0;
        for (int k = 0; k < K; ++k) a += xd[g][r * K + k] * wd[g][n * K + k];
        ref[r * N + n] = a;
      }
    ASSERT_EQ(count_nan(y), 0u);
    const double err = rel_l2_error(y, ref);
    std::printf("cublas grouped bf16 group %zu (m=%d): rel L2 %.2e\n", g, m[g], err);
    EXPECT_LT(err, 1e-2);
  }
  free_grouped_bf16(plan);
  cublasDestroy(h);
}

void check_fp8(bool block) {
  auto rng = make_rng();
  const int M = 96, N = 256, K = 512;
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<__nv_fp8_e4m3> x(M * K), w(N * K);
  std::vector<double> xd(M * K), wd(N * K);
  for (int i = 0; i < M * K; ++i) { x[i] = __nv_fp8_e4m3(u(rng)); xd[i] = static_cast<float>(x[i]); }
  for (int i = 0; i < N * K; ++i) { w[i] = __nv_fp8_e4m3(u(rng)); wd[i] = static_cast<float>(w[i]); }
  const float xs = 0.5f, ws = 0.25f;
  std::vector<float> xsc(block ? M * K / 128 : 1, xs), wsc(block ? (N / 128) * (K / 128) : 1, ws);
  DevBuf<__nv_fp8_e4m3> dx(x.size()), dw(w.size());
  DevBuf<float> dxs(xsc.size()), dws(wsc.size());
  DevBuf<bf16> dd(M * N);
  dx.upload(x);
  dw.upload(w);
  dxs.upload(xsc);
  dws.upload(wsc);
  poison_bf16(dd.p, dd.n);
  LtFp8* lt = lt_fp8_create();
  const bool ran = cublaslt_fp8_gemm(lt, dx.p, dw.p, dd.p, M, N, K, block, dxs.p, dws.p, 0);
  SS_CUDA(cudaDeviceSynchronize());
  lt_fp8_destroy(lt);
  if (!ran) GTEST_SKIP() << "cuBLASLt offers no FP8 algorithm for block=" << block;
  const auto d = to_double(dd.download());
  std::vector<double> ref(M * N);
  for (int r = 0; r < M; ++r)
    for (int n = 0; n < N; ++n) {
      double a = 0;
      for (int k = 0; k < K; ++k) a += xd[r * K + k] * wd[n * K + k];
      ref[r * N + n] = a * xs * ws;
    }
  ASSERT_EQ(count_nan(d), 0u);
  const double err = rel_l2_error(d, ref);
  std::printf("cublasLt fp8 %s: rel L2 %.2e (scales uniform: the block-scale layout itself is not checked)\n",
              block ? "block-scaled" : "per-tensor", err);
  EXPECT_LT(err, 1e-2);
}
TEST(MoeLib, CublasLtFp8PerTensor) { SKIP_NO_GPU(); check_fp8(false); }
TEST(MoeLib, CublasLtFp8BlockScaled) { SKIP_NO_GPU(); check_fp8(true); }

// ------------------------------------------------------------------------------------------------
// Own FP8 block-scaled grouped GEMM (gemm_fp8.cu; variant 0 in gemm_fp8_ws.cu): masked and contiguous layouts

struct Fp8Problem {
  int E, N, K;
  std::vector<__nv_fp8_e4m3> w;    // [E, N, K]
  std::vector<float> ws;           // [E, N/128, K/128]
  std::vector<double> wd;
};
Fp8Problem make_fp8_weights(std::mt19937_64& rng, int E, int N, int K) {
  Fp8Problem p{E, N, K, {}, {}, {}};
  std::uniform_real_distribution<float> u(-2.f, 2.f), us(0.01f, 1.f);
  p.w.resize(size_t(E) * N * K);
  p.wd.resize(p.w.size());
  for (size_t i = 0; i < p.w.size(); ++i) { p.w[i] = __nv_fp8_e4m3(u(rng)); p.wd[i] = static_cast<float>(p.w[i]); }
  p.ws.resize(size_t(E) * (N / 128) * (K / 128));
  for (auto& v : p.ws) v = us(rng);
  return p;
}
/// ref[r, n] = sum_kb xs[kb*ld + r] * ws[e, n/128, kb] * sum_{k in kb} x[r, k] w[e, n, k]
void fp8_ref_row(const Fp8Problem& p, const std::vector<double>& xd, const std::vector<float>& xs, int ld, int r, int e,
                 double* out) {
  const int KB = p.K / 128;
  for (int n = 0; n < p.N; ++n) {
    double a = 0;
    for (int kb = 0; kb < KB; ++kb) {
      double part = 0;
      const double* xr = &xd[size_t(r) * p.K + kb * 128];
      const double* wr = &p.wd[(size_t(e) * p.N + n) * p.K + kb * 128];
      for (int k = 0; k < 128; ++k) part += xr[k] * wr[k];
      a += part * xs[size_t(kb) * ld + r] * p.ws[(size_t(e) * (p.N / 128) + n / 128) * KB + kb];
    }
    out[n] = a;
  }
}

void check_fp8_masked(int N, int K, int max_m = 40) {
  auto rng = make_rng();
  const int E = 7, G = 5;
  Fp8Problem p = make_fp8_weights(rng, E, N, K);
  std::vector<int> eids = {3, 0, 6, 2, 5};
  // empty group, 1 row, count past max_m (clamped), skewed; at max_m > 128 several 128-row tiles
  std::vector<int> mm = max_m > 128 ? std::vector<int>{0, 1, max_m + 5, 130, max_m - 3} : std::vector<int>{0, 1, 45, 17, 33};
  const int rows = G * max_m, KB = K / 128;
  std::uniform_real_distribution<float> u(-2.f, 2.f), us(0.01f, 1.f);
  std::vector<__nv_fp8_e4m3> x(size_t(rows) * K);
  std::vector<double> xd(x.size());
  for (size_t i = 0; i < x.size(); ++i) { x[i] = __nv_fp8_e4m3(u(rng)); xd[i] = static_cast<float>(x[i]); }
  std::vector<float> xs(size_t(KB) * rows);
  for (auto& v : xs) v = us(rng);
  DevBuf<__nv_fp8_e4m3> dx(x.size()), dw(p.w.size());
  DevBuf<float> dxs(xs.size()), dws(p.ws.size());
  DevBuf<int> deids(G), dmm(G);
  DevBuf<bf16> dy(size_t(rows) * N);
  dx.upload(x); dw.upload(p.w); dxs.upload(xs); dws.upload(p.ws); deids.upload(eids); dmm.upload(mm);
  std::vector<double> ref(size_t(rows) * N, 0.0);
  auto refresh_ref = [&]() {
    for (int g = 0; g < G; ++g)
      for (int r = 0; r < std::min(mm[g], max_m); ++r) fp8_ref_row(p, xd, xs, rows, g * max_m + r, eids[g], &ref[size_t(g * max_m + r) * N]);
  };
  refresh_ref();
  auto check = [&](const char* what, int bt) {
    const auto ybits = dy.download();
    std::vector<double> got, want;
    size_t untouched_bad = 0;
    for (int g = 0; g < G; ++g)
      for (int r = 0; r < max_m; ++r)
        for (int n = 0; n < N; ++n) {
          const size_t i = size_t(g * max_m + r) * N + n;
          uint16_t b;
          std::memcpy(&b, &ybits[i], 2);
          if (r < std::min(mm[g], max_m)) { got.push_back(bf2f(ybits[i])); want.push_back(ref[i]); }
          else if (b != 0xFFFF) ++untouched_bad;
        }
    ASSERT_EQ(count_nan(got), 0u) << what;
    const double err = rel_l2_error(got, want);
    std::printf("fp8 masked %s N=%d K=%d bt=%d: rel L2 %.2e, rows past masked_m written: %zu\n", what, N, K, bt, err,
                untouched_bad);
    EXPECT_LT(err, 1e-2) << what << " bt=" << bt;
    EXPECT_EQ(untouched_bad, 0u) << what << " bt=" << bt;
  };
  // v: 0 = variant 0, one CTA per tile (default), 1 = variant 1 (cp.async), 2 = variant 0 persistent,
  // 3 = variant 0 one CTA per tile with the 2-CTA multicast cluster (bt >= 128, N/128 even),
  // 4 / 5 / 6 / 7 = variants 2 / 3 / 4 / 5 (tokens-as-M kernels, gemm_fp8_tm.cu, 128x128 / 128x256,
  // 6 and 7 in 2-CTA clusters; bt 128 only, other widths fall back to variant 0; 128x256 at
  // N % 256 != 0 runs the 128-wide form, clusters need an even N-tile count)
  // 8 / 9 = variants 2 / 3 with the persistent grid
  const char* vname[] = {"v0-direct", "v1-direct", "v0pers-direct", "v0cl-direct", "v2tm128-direct",
                         "v3tm256-direct", "v4tm128cl-direct", "v5tm256cl-direct", "v2tm128pers-direct", "v3tm256pers-direct"};
  for (int v : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
    for (int bt : kFp8TileWidths) {
      if (v == 1 && bt > 128) continue;
      if (v >= 4 && bt != 128) continue;
      fp8_set_variant(v == 1 ? 1 : v >= 8 ? v - 6 : v >= 4 ? v - 2 : 0);
      fp8_set_persistent(v == 2 || v >= 8);
      fp8_set_cluster(v == 3);
      poison_bf16(dy.p, dy.n);
      fp8_grouped_gemm_masked(dx.p, dxs.p, rows, dw.p, dws.p, E, deids.p, dmm.p, G, max_m, N, K, bt, dy.p, 0);
      SS_CUDA(cudaDeviceSynchronize());
      check(vname[v], bt);
    }
  fp8_set_variant(kFp8DefaultVariant);
  fp8_set_persistent(false);
  fp8_set_cluster(false);
  // Graph capture: counts change on the device between replays, no host involvement.
  cudaStream_t s;
  SS_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  SS_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  fp8_grouped_gemm_masked(dx.p, dxs.p, rows, dw.p, dws.p, E, deids.p, dmm.p, G, max_m, N, K, 16, dy.p, s);
  SS_CUDA(cudaStreamEndCapture(s, &graph));
  SS_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  mm = {40, 0, 3, 0, 16};
  dmm.upload(mm);
  std::fill(ref.begin(), ref.end(), 0.0);
  refresh_ref();
  poison_bf16(dy.p, dy.n);
  SS_CUDA(cudaGraphLaunch(exec, s));
  SS_CUDA(cudaStreamSynchronize(s));
  check("graph-replay", 16);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}
TEST(MoeFp8, MaskedLayoutMatchesReference) { SKIP_NO_GPU(); check_fp8_masked(256, 768); }
TEST(MoeFp8, MaskedLayoutWideN) { SKIP_NO_GPU(); check_fp8_masked(384, 512); }
TEST(MoeFp8, MaskedLayoutLargeM) { SKIP_NO_GPU(); check_fp8_masked(512, 512, 300); }

void check_fp8_contiguous(int N, int K) {
  auto rng = make_rng();
  const int E = 8, G = 6;
  Fp8Problem p = make_fp8_weights(rng, E, N, K);
  std::vector<int> eids = {7, 1, 4, 0, 2, 5};
  std::vector<int> cnt = {0, 130, 1, 0, 77, 300};  // empty, skewed, unaligned boundaries
  std::vector<int> roff(G + 1, 0);
  for (int g = 0; g < G; ++g) roff[g + 1] = roff[g] + cnt[g];
  const int rows = roff[G], ld = (rows + 3) / 4 * 4 + 4, KB = K / 128;
  std::uniform_real_distribution<float> u(-2.f, 2.f), us(0.01f, 1.f);
  std::vector<__nv_fp8_e4m3> x(size_t(rows) * K);
  std::vector<double> xd(x.size());
  for (size_t i = 0; i < x.size(); ++i) { x[i] = __nv_fp8_e4m3(u(rng)); xd[i] = static_cast<float>(x[i]); }
  std::vector<float> xs(size_t(KB) * ld);
  for (auto& v : xs) v = us(rng);
  std::vector<double> ref(size_t(rows) * N);
  for (int g = 0; g < G; ++g)
    for (int r = roff[g]; r < roff[g + 1]; ++r) fp8_ref_row(p, xd, xs, ld, r, eids[g], &ref[size_t(r) * N]);
  DevBuf<__nv_fp8_e4m3> dx(x.size()), dw(p.w.size());
  DevBuf<float> dxs(xs.size()), dws(p.ws.size());
  DevBuf<int> deids(G), droff(G + 1), dtoff(G + 1);
  DevBuf<bf16> dy(size_t(rows) * N);
  dx.upload(x); dw.upload(p.w); dxs.upload(xs); dws.upload(p.ws); deids.upload(eids); droff.upload(roff);
  for (int v : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})  // as in check_fp8_masked
  for (int bt : kFp8TileWidths) {
    if (v == 1 && bt > 128) continue;
    if (v >= 4 && bt != 128) continue;
    fp8_set_variant(v == 1 ? 1 : v >= 8 ? v - 6 : v >= 4 ? v - 2 : 0);
    fp8_set_persistent(v == 2 || v >= 8);
    fp8_set_cluster(v == 3);
    std::vector<int> toff(G + 1, 0);
    for (int g = 0; g < G; ++g) toff[g + 1] = toff[g] + (cnt[g] + bt - 1) / bt;
    dtoff.upload(toff);
    poison_bf16(dy.p, dy.n);
    fp8_grouped_gemm_contiguous(dx.p, rows, dxs.p, ld, dw.p, dws.p, E, deids.p, droff.p, dtoff.p, G, N, K, bt, toff[G] + 2,
                                dy.p, 0);
    SS_CUDA(cudaDeviceSynchronize());
    const auto y = to_double(dy.download());
    ASSERT_EQ(count_nan(y), 0u) << "bt=" << bt;
    const double err = rel_l2_error(y, ref);
    std::printf("fp8 contiguous v%d N=%d K=%d bt=%d: rel L2 %.2e\n", v, N, K, bt, err);
    EXPECT_LT(err, 1e-2) << "v=" << v << " bt=" << bt;
  }
  fp8_set_variant(kFp8DefaultVariant);
  fp8_set_persistent(false);
  fp8_set_cluster(false);
}
TEST(MoeFp8, ContiguousLayoutMatchesReference) { SKIP_NO_GPU(); check_fp8_contiguous(256, 512); }
TEST(MoeFp8, ContiguousLayoutLongK) { SKIP_NO_GPU(); check_fp8_contiguous(128, 1792); }

// ------------------------------------------------------------------------------------------------
// DSV4 mHC

TEST(MoeMhc, PreAndPostMatchReference) {
  SKIP_NO_GPU();
  auto rng = make_rng();
  const int T = 33, D = 1024, F = 4 * D;
  std::vector<double> xd, fnd, fd;
  const auto x = rand_bf16(rng, static_cast<size_t>(T) * F, 2.f, &xd);
  const auto fn = rand_bf16(rng, static_cast<size_t>(24) * F, 0.05f, &fnd);
  const auto f = rand_bf16(rng, static_cast<size_t>(T) * D, 2.f, &fd);
  std::uniform_real_distribution<float> us(0.5f, 1.5f), ub(-1.f, 1.f);
  std::vector<float> scale(3), base(24);
  for (auto& v : scale) v = us(rng);
  for (auto& v : base) v = ub(rng);
  DevBuf<bf16> dx(x.size()), dfn(fn.size()), df(f.size()), dy(static_cast<size_t>(T) * D), dout(x.size());
  DevBuf<float> dmix(T * 24), dsc(3), dba(24), dpost(T * 4), dcomb(T * 16);
  dx.upload(x);
  dfn.upload(fn);
  df.upload(f);
  dsc.upload(scale);
  dba.upload(base);
  poison_bf16(dy.p, dy.n);
  poison_bf16(dout.p, dout.n);
  cublasHandle_t h;
  SS_CUBLAS(cublasCreate(&h));
  cublas_gemm_bf16(h, dx.p, dfn.p, dmix.p, T, 24, F, true, 0.f, 0);
  mhc_pre(dx.p, dmix.p, dsc.p, dba.p, T, D, dy.p, dpost.p, dcomb.p, 0);
  mhc_post(df.p, dx.p, dpost.p, dcomb.p, T, D, dout.p, 0);
  SS_CUDA(cudaDeviceSynchronize());
  cublasDestroy(h);
  std::vector<double> yref(static_cast<size_t>(T) * D), post_ref(T * 4), comb_ref(T * 16), oref(x.size());
  for (int t = 0; t < T; ++t) {
    const double* xt = &xd[static_cast<size_t>(t) * F];
    double ss = 0;
    for (int i = 0; i < F; ++i) ss += xt[i] * xt[i];
    const double r = 1 / std::sqrt(ss / F + 1e-6);
    double m[24];
    for (int o = 0; o < 24; ++o) {
      double a = 0;
      for (int i = 0; i < F; ++i) a += xt[i] * fnd[static_cast<size_t>(o) * F + i];
      m[o] = a * r;
    }
    double pre[4], c[4][4];
    for (int i = 0; i < 4; ++i) {
      pre[i] = 1 / (1 + std::exp(-(m[i] * scale[0] + base[i]))) + 1e-6;
      post_ref[t * 4 + i] = 2 / (1 + std::exp(-(m[4 + i] * scale[1] + base[4 + i])));
    }
    for (int i = 0; i < 4; ++i) {
      double mx = -1e300, s = 0;
      for (int j = 0; j < 4; ++j) { c[i][j] = m[8 + 4 * i + j] * scale[2] + base[8 + 4 * i + j]; mx = std::max(mx, c[i][j]); }
      for (int j = 0; j < 4; ++j) { c[i][j] = std::exp(c[i][j] - mx); s += c[i][j]; }
      for (int j = 0; j < 4; ++j) c[i][j] = c[i][j] / s + 1e-6;
    }
    auto coln = [&] { for (int j = 0; j < 4; ++j) { double s = 1e-6; for (int i = 0; i < 4; ++i) s += c[i][j]; for (int i = 0; i < 4; ++i) c[i][j] /= s; } };
    coln();
    for (int it = 0; it < 19; ++it) {
      for (int i = 0; i < 4; ++i) { double s = 1e-6; for (int j = 0; j < 4; ++j) s += c[i][j]; for (int j = 0; j < 4; ++j) c[i][j] /= s; }
      coln();
    }
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) comb_ref[t * 16 + 4 * i + j] = c[i][j];
    for (int d = 0; d < D; ++d) {
      double a = 0;
      for (int i = 0; i < 4; ++i) a += pre[i] * xt[i * D + d];
      yref[static_cast<size_t>(t) * D + d] = a;
    }
    for (int i = 0; i < 4; ++i)
      for (int d = 0; d < D; ++d) {
        double a = post_ref[t * 4 + i] * fd[static_cast<size_t>(t) * D + d];
        for (int j = 0; j < 4; ++j) a += c[j][i] * xt[j * D + d];
        oref[static_cast<size_t>(t) * F + i * D + d] = a;
      }
  }
  const auto y = to_double(dy.download());
  const auto post = to_double(dpost.download());
  const auto comb = to_double(dcomb.download());
  const auto out = to_double(dout.download());
  ASSERT_EQ(count_nan(y) + count_nan(out), 0u);
  const double ey = rel_l2_error(y, yref), ep = rel_l2_error(post, post_ref), ec = rel_l2_error(comb, comb_ref),
               eo = rel_l2_error(out, oref);
  std::printf("mHC: y %.2e post %.2e comb %.2e out %.2e (rel L2)\n", ey, ep, ec, eo);
  EXPECT_LT(ey, 1e-2);
  EXPECT_LT(ep, 1e-4);
  EXPECT_LT(ec, 1e-4);
  EXPECT_LT(eo, 1e-2);
}

}  // namespace
