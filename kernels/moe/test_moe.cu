// Correctness tests of the MoE kernels against CPU references in double precision, on fresh
// random inputs, with poisoned outputs. GPU tests skip without a CUDA device.
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

double bf16_bits_value(uint16_t b) {  // IEEE-style decode incl. subnormals
  uint32_t f = static_cast<uint32_t>(b) << 16;
  float v;
  std::memcpy(&v, &f, 4);
  return v;
}

// ------------------------------------------------------------------------------------------------
// Host-only checks (run everywhere)

TEST(MoeHost, PrepackRoundTripAndDequantTrick) {
  auto rng = make_rng();
  const int N = 256, K = 512;
  std::vector<uint8_t> codes(N * K), scales(N * K / 32);
  for (auto& c : codes) c = rng() & 0xF;
  for (auto& s : scales) s = 100 + rng() % 29;  // [100, 128]
  std::vector<uint8_t> packed(w4a16_matrix_bytes(N, K));
  w4a16_prepack(codes.data(), scales.data(), N, K, packed.data());
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) {
      const double want = e2m1_value(codes[n * K + k]) * e8m0_value(scales[n * (K / 32) + k / 32]);
      ASSERT_EQ(w4a16_packed_value(packed.data(), N, K, n, k), want) << n << "," << k;
    }
  // The kernel's extraction w4a16_reg_bits(w, j) of the decode-friendly prepack: for every register
  // j, both halves and every pair of codes, the bits land as code * 2^-126 in a bf16 (subnormal for
  // exponent 0; times 2^(s-1) in the kernel it is code * 2^(s-127)), and no other code leaks in.
  for (int j = 0; j < 4; ++j)
    for (uint32_t lo = 0; lo < 16; ++lo)
      for (uint32_t hi = 0; hi < 16; ++hi) {
        uint32_t w = static_cast<uint32_t>(rng());  // other registers' codes: random
        for (int b = 0; b < 4; ++b) {
          w &= ~(1u << kW4A16CodeBit[j][b]) & ~(1u << ((kW4A16CodeBit[j][b] + 16) & 31));
          w |= ((lo >> b) & 1u) << kW4A16CodeBit[j][b];
          w |= ((hi >> b) & 1u) << ((kW4A16CodeBit[j][b] + 16) & 31);
        }
        const uint32_t v = w4a16_reg_bits(w, j);
        ASSERT_EQ(bf16_bits_value(static_cast<uint16_t>(v & 0xFFFF)) * std::ldexp(1.0, 126), e2m1_value(lo)) << j << " " << lo;
        ASSERT_EQ(bf16_bits_value(static_cast<uint16_t>(v >> 16)) * std::ldexp(1.0, 126), e2m1_value(hi)) << j << " " << hi;
      }
  // the 4 registers' bit sets partition the word
  uint32_t seen = 0;
  for (int j = 0; j < 4; ++j)
    for (int b = 0; b < 4; ++b)
      for (int h = 0; h < 2; ++h) {
        const uint32_t bit = 1u << ((kW4A16CodeBit[j][b] + 16 * h) & 31);
        ASSERT_EQ(seen & bit, 0u);
        seen |= bit;
      }
  ASSERT_EQ(seen, 0xFFFFFFFFu);
  std::vector<uint8_t> bad = scales;
  bad[3] = 129;
  EXPECT_THROW(w4a16_prepack(codes.data(), bad.data(), N, K, packed.data()), std::invalid_argument);
}

// ------------------------------------------------------------------------------------------------
// Routers

struct RefRoute {
  std::vector<int> ids;
  std::vector<double> w;
  double kth_sel;  // k-th largest biased score
};

double score_ref(ScoreFn fn, double x) {
  if (fn == ScoreFn::kSigmoid) return 1.0 / (1.0 + std::exp(-x));
  return std::sqrt(std::log1p(std::exp(x)));
}

void check_router(ScoreFn fn, int T, int E, int k, float scale) {
  auto rng = make_rng();
  std::uniform_real_distribution<float> ul(-4.f, 4.f), ub(-0.5f, 0.5f);
  std::vector<float> logits(static_cast<size_t>(T) * E), bias(E);
  for (auto& v : logits) v = ul(rng);
  for (auto& v : bias) v = ub(rng);
  DevBuf<float> dl(logits.size()), db(E), dw(static_cast<size_t>(T) * k);
  DevBuf<int> di(static_cast<size_t>(T) * k);
  dl.upload(logits);
  db.upload(bias);
  SS_CUDA(cudaMemset(di.p, 0xFF, di.bytes()));
  SS_CUDA(cudaMemset(dw.p, 0xFF, dw.bytes()));
  router_topk(fn, dl.p, db.p, T, E, k, scale, di.p, dw.p, 0);
  SS_CUDA(cudaDeviceSynchronize());
  const auto ids = di.download();
  const auto w = dw.download();
  int differing_tokens = 0;
  for (int t = 0; t < T; ++t) {
    std::vector<std::pair<double, int>> sel(E);
    for (int e = 0; e < E; ++e) sel[e] = {score_ref(fn, logits[t * E + e]) + bias[e], e};
    std::stable_sort(sel.begin(), sel.end(), [](auto a, auto b) { return a.first > b.first; });
    const double kth = sel[k - 1].first;
    std::set<int> ref_set, got_set;
    for (int j = 0; j < k; ++j) ref_set.insert(sel[j].second);
    double sum = 0;
    for (int j = 0; j < k; ++j) {
      const int id = ids[t * k + j];
      ASSERT_GE(id, 0);
      ASSERT_LT(id, E);
      got_set.insert(id);
      // a chosen expert must be within fp32 rounding of the reference top-k boundary
      ASSERT_GE(score_ref(fn, logits[t * E + id]) + bias[id], kth - 1e-5) << "token " << t;
      sum += score_ref(fn, logits[t * E + id]);
    }
    ASSERT_EQ(got_set.size(), static_cast<size_t>(k)) << "duplicate expert, token " << t;
    if (got_set != ref_set) ++differing_tokens;
    for (int j = 0; j < k; ++j) {
      const int id = ids[t * k + j];
      const double want = score_ref(fn, logits[t * E + id]) / sum * scale;
      ASSERT_NEAR(w[t * k + j], want, 1e-5 * std::max(1.0, want)) << "token " << t;
    }
  }
  EXPECT_LE(differing_tokens, T / 100 + 1) << "more near-ties than fp32 rounding explains";
  std::printf("router E=%d k=%d: %d/%d tokens differ from the double reference by a near-tie\n", E, k,
              differing_tokens, T);
}

TEST(MoeRouter, K3SigmoidTop16of896) {
  SKIP_NO_GPU();
  check_router(ScoreFn::kSigmoid, 777, kK3Experts, kK3TopK, kK3RouteScale);
}
TEST(MoeRouter, Dsv4ProSqrtSoftplusTop6of384) {
  SKIP_NO_GPU();
  check_router(ScoreFn::kSqrtSoftplus, 777, kV4ProExperts, kV4TopK, kV4ProRouteScale);
}
TEST(MoeRouter, Dsv4FlashSqrtSoftplusTop6of256) {
  SKIP_NO_GPU();
  check_router(ScoreFn::kSqrtSoftplus, 777, kV4FlashExperts, kV4TopK, kV4FlashRouteScale);
}

TEST(MoeRouter, Dsv4Hash) {
  SKIP_NO_GPU();
  auto rng = make_rng();
  const int T = 500, E = kV4FlashExperts, k = kV4TopK, vocab = 1000;
  std::vector<float> logits(T * E);
  std::uniform_real_distribution<float> ul(-4.f, 4.f);
  for (auto& v : logits) v = ul(rng);
  std::vector<int> tok(T), tid2eid(vocab * k);
  for (auto& v : tok) v = rng() % vocab;
  for (int v = 0; v < vocab; ++v) {
    std::vector<int> perm(E);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int j = 0; j < k; ++j) tid2eid[v * k + j] = perm[j];
  }
  DevBuf<float> dl(logits.size()), dw(T * k);
  DevBuf<int> dt(T), dm(tid2eid.size()), di(T * k);
  dl.upload(logits);
  dt.upload(tok);
  dm.upload(tid2eid);
  SS_CUDA(cudaMemset(di.p, 0xFF, di.bytes()));
  SS_CUDA(cudaMemset(dw.p, 0xFF, dw.bytes()));
  router_hash(dl.p, dt.p, dm.p, T, E, k, kV4FlashRouteScale, di.p, dw.p, 0);
  SS_CUDA(cudaDeviceSynchronize());
  const auto ids = di.download();
  const auto w = dw.download();
  for (int t = 0; t < T; ++t) {
    double sum = 0;
    for (int j = 0; j < k; ++j) sum += score_ref(ScoreFn::kSqrtSoftplus, logits[t * E + tid2eid[tok[t] * k + j]]);
    for (int j = 0; j < k; ++j) {
      const int id = tid2eid[tok[t] * k + j];
      ASSERT_EQ(ids[t * k + j], id);
      ASSERT_NEAR(w[t * k + j], score_ref(ScoreFn::kSqrtSoftplus, logits[t * E + id]) / sum * kV4FlashRouteScale, 1e-5);
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Permute / combine

void check_dispatch(int T, int E, int k, int D, int bt) {
  auto rng = make_rng();
  std::vector<int> ids(T * k);
  for (int t = 0; t < T; ++t) {
    std::vector<int> perm(E);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int j = 0; j < k; ++j) ids[t * k + j] = perm[j];
  }
  std::vector<double> xd;
  const auto x = rand_bf16(rng, static_cast<size_t>(T) * D, 2.f, &xd);
  DevBuf<int> di(ids.size());
  DevBuf<bf16> dx(x.size()), dxp(static_cast<size_t>(T) * k * D);
  di.upload(ids);
  dx.upload(x);
  poison_bf16(dxp.p, dxp.n);
  Dispatch d = alloc_dispatch(E, T * k);
  moe_permute(dx.p, di.p, T, k, D, bt, d, dxp.p, 0);
  SS_CUDA(cudaDeviceSynchronize());
  std::vector<int> counts(E), roff(E + 1), toff(E + 1), pos(T * k), rtok(T * k);
  SS_CUDA(cudaMemcpy(counts.data(), d.counts, 4 * E, cudaMemcpyDeviceToHost));
  SS_CUDA(cudaMemcpy(roff.data(), d.row_offsets, 4 * (E + 1), cudaMemcpyDeviceToHost));
  SS_CUDA(cudaMemcpy(toff.data(), d.tile_offsets, 4 * (E + 1), cudaMemcpyDeviceToHost));
  SS_CUDA(cudaMemcpy(pos.data(), d.pos, 4 * T * k, cudaMemcpyDeviceToHost));
  SS_CUDA(cudaMemcpy(rtok.data(), d.row_token, 4 * T * k, cudaMemcpyDeviceToHost));
  std::vector<int> ref_counts(E, 0);
  for (int v : ids) ref_counts[v]++;
  ASSERT_EQ(counts, ref_counts);
  ASSERT_EQ(roff[0], 0);
  ASSERT_EQ(toff[0], 0);
  for (int e = 0; e < E; ++e) {
    ASSERT_EQ(roff[e + 1] - roff[e], ref_counts[e]);
    ASSERT_EQ(toff[e + 1] - toff[e], (ref_counts[e] + bt - 1) / bt);
  }
  const auto xp = dxp.download();
  std::vector<int> seen(T * k, 0);
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < k; ++j) {
      const int p = pos[t * k + j], e = ids[t * k + j];
      ASSERT_GE(p, roff[e]);
      ASSERT_LT(p, roff[e + 1]);
      ASSERT_EQ(rtok[p], t);
      seen[p]++;
      ASSERT_EQ(std::memcmp(&xp[static_cast<size_t>(p) * D], &x[static_cast<size_t>(t) * D], 2 * D), 0);
    }
  for (int v : seen) ASSERT_EQ(v, 1);
  // the fused kernel assigns an expert's rows in (token, slot) order
  for (int p = 0; p + 1 < T * k; ++p) {
    const int e = static_cast<int>(std::upper_bound(roff.begin(), roff.end(), p) - roff.begin()) - 1;
    if (p + 1 < roff[e + 1]) ASSERT_LT(rtok[p], rtok[p + 1]) << "row " << p;
  }

  // combine: random expert outputs and weights, with and without the RMSNorm
  std::vector<double> yd, gd;
  const auto y = rand_bf16(rng, static_cast<size_t>(T) * k * D, 1.f, &yd);
  const auto gamma = rand_bf16(rng, D, 1.f, &gd);
  std::vector<float> w(T * k);
  std::uniform_real_distribution<float> uw(0.f, 1.f);
  for (auto& v : w) v = uw(rng);
  DevBuf<bf16> dy(y.size()), dg(D), dout(static_cast<size_t>(T) * D);
  DevBuf<float> dw(w.size());
  dy.upload(y);
  dg.upload(gamma);
  dw.upload(w);
  for (int norm = 0; norm < 2; ++norm) {
    poison_bf16(dout.p, dout.n);
    moe_combine(dy.p, d.pos, dw.p, T, k, D, norm ? dg.p : nullptr, 1e-6f, dout.p, 0);
    SS_CUDA(cudaDeviceSynchronize());
    const auto out = to_double(dout.download());
    std::vector<double> ref(static_cast<size_t>(T) * D, 0.0);
    for (int t = 0; t < T; ++t) {
      double ss = 0;
      for (int c = 0; c < D; ++c) {
        double a = 0;
        for (int j = 0; j < k; ++j) a += w[t * k + j] * yd[static_cast<size_t>(pos[t * k + j]) * D + c];
        ref[static_cast<size_t>(t) * D + c] = a;
        ss += a * a;
      }
      if (norm) {
        const double r = 1.0 / std::sqrt(ss / D + 1e-6);
        for (int c = 0; c < D; ++c) ref[static_cast<size_t>(t) * D + c] *= r * gd[c];
      }
    }
    ASSERT_EQ(count_nan(out), 0u);
    const double err = rel_l2_error(out, ref);
    std::printf("combine T=%d k=%d D=%d norm=%d: rel L2 %.2e\n", T, k, D, norm, err);
    EXPECT_LT(err, 5e-3);
  }
  free_dispatch(d);
}

TEST(MoeDispatch, PermuteCombineK3Like) {
  SKIP_NO_GPU();
  check_dispatch(97, kK3Experts, kK3TopK, kK3Latent, 16);
}
TEST(MoeDispatch, PermuteCombineDsv4Like) {
  SKIP_NO_GPU();
  check_dispatch(1000, 64, 6, 1024, 64);
}
// decode sizes (columns split over CTAs) and a size where every CTA holds a chunk of many tokens
TEST(MoeDispatch, PermuteCombineDecodeAndLarge) {
  SKIP_NO_GPU();
  check_dispatch(1, kK3Experts, kK3TopK, kK3Latent, 8);
  check_dispatch(3, kV4ProExperts, kV4TopK, kV4ProHidden, 8);
  check_dispatch(64, kK3Experts, kK3TopK, kK3Latent, 8);
  check_dispatch(3000, kV4FlashExperts, kV4TopK, 256, 128);
}

// ------------------------------------------------------------------------------------------------
// Activations and norms

void check_act(bool situ) {
  auto rng = make_rng();
  const int rows = 257, I = 3072;
  std::vector<double> hd;
  const auto h = rand_bf16(rng, static_cast<size_t>(rows) * 2 * I, situ ? 8.f : 16.f, &hd);
  DevBuf<bf16> dh(h.size()), dout(static_cast<size_t>(rows) * I);
  dh.upload(h);
  poison_bf16(dout.p, dout.n);
  if (situ) act_situ(dh.p, rows, I, dout.p, 0);
  else act_swiglu(dh.p, rows, I, kV4SwigluLimit, dout.p, 0);
  SS_CUDA(cudaDeviceSynchronize());
  const auto out = to_double(dout.download());
  std::vector<double> ref(out.size());
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < I; ++i) {
      const double a = hd[static_cast<size_t>(r) * 2 * I + i], b = hd[static_cast<size_t>(r) * 2 * I + I + i];
      double v;
      if (situ) {
        v = 4 * std::tanh(a / 4) / (1 + std::exp(-a)) * 25 * std::tanh(b / 25);
      } else {
        const double g = std::min(a, 10.0), u = std::clamp(b, -10.0, 10.0);
        v = g / (1 + std::exp(-g)) * u;
      }
      ref[static_cast<size_t>(r) * I + i] = v;
    }
  ASSERT_EQ(count_nan(out), 0u);
  const double err = rel_l2_error(out, ref);
  std::printf("%s: rel L2 %.2e\n", situ ? "SiTU" : "SwiGLU(clamp 10)", err);
  EXPECT_LT(err, 1e-2);
}
TEST(MoeAct, Situ) { SKIP_NO_GPU(); check_act(true); }
TEST(MoeAct, SwigluClamped) { SKIP_NO_GPU(); check_act(false); }

TEST(MoeNorm, RmsNorm3584) {
  SKIP_NO_GPU();
  auto rng = make_rng();
  const int rows = 100, D = kK3Latent;
  std::vector<double> xd, gd;
  const auto x = rand_bf16(rng, static_cast<size_t>(rows) * D, 3.f, &xd);
  const auto g = rand_bf16(rng, D, 1.f, &gd);
  DevBuf<bf16> dx(x.size()), dg(D), dout(x.size());
  dx.upload(x);
  dg.upload(g);
  poison_bf16(dout.p, dout.n);
  rmsnorm(dx.p, dg.p, rows, D, 1e-6f, dout.p, 0);
  SS_CUDA(cudaDeviceSynchronize());
  const auto out = to_double(dout.download());
  std::vector<double> ref(out.size());
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int c = 0; c < D; ++c) ss += xd[r * D + c] * xd[r * D + c];
    const double s = 1 / std::sqrt(ss / D + 1e-6);
    for (int c = 0; c < D; ++c) ref[r * D + c] = xd[r * D + c] * s * gd[c];
  }
  ASSERT_EQ(count_nan(out), 0u);
  const double err = rel_l2_error(out, ref);
  std::printf("rmsnorm: rel L2 %.2e\n", err);
  EXPECT_LT(err, 1e-2);
}

// ------------------------------------------------------------------------------------------------
// W4A16 grouped GEMM

double check_w4a16(int bt, const std::vector<int>& counts, int N, int K, bool permuted_ids, int variant = 0,
                   bool expect = true, const std::vector<int>* only_kblock = nullptr) {
  auto rng = make_rng();
  const int G = static_cast<int>(counts.size());
  const int P = G + 2;  // pool larger than G, groups map to shuffled experts
  std::vector<int> expert_ids(G);
  std::vector<int> perm(P);
  std::iota(perm.begin(), perm.end(), 0);
  if (permuted_ids) std::shuffle(perm.begin(), perm.end(), rng);
  for (int g = 0; g < G; ++g) expert_ids[g] = perm[g];
  const size_t mb = w4a16_matrix_bytes(N, K);
  std::vector<uint8_t> pool(mb * P);
  std::vector<std::vector<double>> Wd(P, std::vector<double>(static_cast<size_t>(N) * K));
  for (int e = 0; e < P; ++e) {
    std::vector<uint8_t> codes(static_cast<size_t>(N) * K), scales(static_cast<size_t>(N) * K / 32);
    for (auto& c : codes) c = rng() & 0xF;
    for (auto& s : scales) s = 118 + rng() % 7;
    w4a16_prepack(codes.data(), scales.data(), N, K, pool.data() + e * mb);
    for (size_t i = 0; i < codes.size(); ++i)
      Wd[e][i] = e2m1_value(codes[i]) * e8m0_value(scales[(i / K) * (K / 32) + (i % K) / 32]);
  }
  std::vector<int> roff(G + 1, 0), toff(G + 1, 0);
  for (int g = 0; g < G; ++g) {
    roff[g + 1] = roff[g] + counts[g];
    toff[g + 1] = toff[g] + (counts[g] + bt - 1) / bt;
  }
  const int rows = roff[G];
  std::vector<double> xd;
  auto x = rand_bf16(rng, static_cast<size_t>(rows) * K, 1.f, &xd);
  if (only_kblock) {  // diagnostic: keep only k-block (*only_kblock)[0] of X
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < K; ++k)
        if (k / 64 != (*only_kblock)[0]) { x[static_cast<size_t>(r) * K + k] = f2bf(0.f); xd[static_cast<size_t>(r) * K + k] = 0; }
  }
  DevBuf<uint8_t> dpool(pool.size());
  DevBuf<bf16> dx(x.size()), dy(static_cast<size_t>(rows) * N);
  DevBuf<int> dro(G + 1), dto(G + 1), dei(G);
  dpool.upload(pool);
  dx.upload(x);
  dro.upload(roff);
  dto.upload(toff);
  dei.upload(expert_ids);
  poison_bf16(dy.p, dy.n);
  const int default_variant = w4a16_variant();
  w4a16_set_variant(variant);
  // x holds exactly `rows` rows: variant 8's TMA token loads past them read zeros (x_rows = rows)
  w4a16_grouped_gemm(dx.p, dpool.p, dei.p, dro.p, dto.p, G, N, K, bt, w4a16_max_tiles(rows, G, bt), dy.p, 0, rows);
  SS_CUDA(cudaDeviceSynchronize());
  w4a16_set_variant(default_variant);
  const auto y = to_double(dy.download());
  std::vector<double> ref(y.size());
  for (int g = 0; g < G; ++g)
    for (int r = roff[g]; r < roff[g + 1]; ++r)
      for (int n = 0; n < N; ++n) {
        double a = 0;
        const double* w = &Wd[expert_ids[g]][static_cast<size_t>(n) * K];
        const double* xr = &xd[static_cast<size_t>(r) * K];
        for (int k = 0; k < K; ++k) a += w[k] * xr[k];
        ref[static_cast<size_t>(r) * N + n] = a;
      }
  const size_t nans = count_nan(y);
  const double err = nans ? 1e9 : rel_l2_error(y, ref);
  if (!expect) {  // diagnostic: per-token-row error profile of the first group
    std::printf("  diag v=%d bt=%d kblock=%d rel L2 %.2e; per tile row:", variant, bt, only_kblock ? (*only_kblock)[0] : -1, err);
    for (int r = 0; r < std::min(counts[0], 32); ++r) {
      std::vector<double> a(y.begin() + static_cast<size_t>(r) * N, y.begin() + static_cast<size_t>(r + 1) * N),
          b(ref.begin() + static_cast<size_t>(r) * N, ref.begin() + static_cast<size_t>(r + 1) * N);
      std::printf(" %.0e", rel_l2_error(a, b));
    }
    std::printf("\n");
    return err;
  }
  EXPECT_EQ(nans, 0u) << "unwritten (poisoned) outputs";
  std::printf("w4a16 v=%d bt=%d N=%d K=%d rows=%d: rel L2 %.2e\n", variant, bt, N, K, rows, err);
  EXPECT_LT(err, 1e-2);
  return err;
}

class W4A16Test : public ::testing::TestWithParam<std::tuple<int, int>> {};
TEST_P(W4A16Test, MatchesDoubleReference) {
  SKIP_NO_GPU();
  const auto [bt, variant] = GetParam();
  // partial tiles, an empty group, several tiles in one group; K = 512 (4 stages of variants 4/5)
  // and K = 1536 (12 stages: the stage ring of variant 5 wraps)
  check_w4a16(bt, {2 * bt + 3, 0, bt - 1 > 0 ? bt - 1 : 1, 1, bt}, 256, 512, true, variant);
  if (variant >= 4) check_w4a16(bt, {1, bt, 3 * bt - 1, 0, 2}, 384, 1536, true, variant);
}
INSTANTIATE_TEST_SUITE_P(AllTiles, W4A16Test,
                         ::testing::Combine(::testing::Values(8, 16, 32, 64, 128, 256), ::testing::Values(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)));

// Variant 8 (prefill kernel at BT 256; BT 128 falls back to variant 0): K3 expert shapes (K3 w2 3584 x 3072; K3 w13's K = 3584 with
// N cut to 768 to bound the CPU reference) with skewed loads: empty groups, a 1-row group, partial
// last tiles, several tiles per group; the last tile reads past x's end (TMA zero fill). The load and
// dequant rings wrap many times (48 / 56 k-blocks).
TEST(W4A16Prefill, ModelShapesSkewed) {
  SKIP_NO_GPU();
  struct Case { int bt; std::vector<int> counts; int N, K; };
  const std::vector<Case> cases = {
      {256, {257, 0, 1, 40}, 3584, 3072},       // K3 w2
      {256, {513, 3, 0, 256}, 768, 3584},       // K3 w13 K
      {128, {129, 0, 77, 1, 128}, 768, 3584},   // K3 w13 K, BT 128
      {256, {600, 2}, 256, 7168},               // DSV4-Pro w13 K
  };
  for (const auto& cs : cases) check_w4a16(cs.bt, cs.counts, cs.N, cs.K, true, 8);
}

// Variants 9 / 10 (NOTES.md §14: persistent grid; 9 polling producer, 10 blocking): the same skewed cases,
// then both on forced small grids (every CTA loops over several items, the rings wrap across
// items, the epilogue of one item overlaps the loads of the next).
TEST(W4A16Prefill, ProducerWarpAndPersistent) {
  SKIP_NO_GPU();
  struct Case { int bt; std::vector<int> counts; int N, K; };
  // model K with N cut (the CPU reference dominates the test's time)
  const std::vector<Case> cases = {
      {256, {257, 0, 1, 40}, 512, 3072},        // K3 w2's K
      {256, {513, 3, 0, 256}, 256, 3584},       // K3 w13's K
      {256, {600, 2}, 256, 7168},               // DSV4-Pro w13's K
  };
  for (int v : {9, 10})
    for (const auto& cs : cases) check_w4a16(cs.bt, cs.counts, cs.N, cs.K, true, v);
  for (int v : {9, 10})
    for (int ctas : {1, 3, 7}) {
      w4a16_set_streamk_ctas(ctas);
      std::printf("persistent grid %d: ", ctas);
      check_w4a16(256, {513, 3, 0, 256}, 256, 3584, true, v);  // 10 items
      check_w4a16(256, {257, 0, 1, 40, 5}, 512, 1536, true, v);  // 20 items
      w4a16_set_streamk_ctas(0);
    }
}

// Variant 7 (stream-K): forced small grids make every CTA cross several tiles with partial heads and
// tails (fix-up through the workspace, stage ring wraps across segments); then K3 / DSV4 expert
// shapes with skewed loads on the automatic grid (resident CTAs x SMs). Successive launches also
// check that the last contributor reset every tile counter.
TEST(W4A16StreamK, ForcedGridsAndModelShapes) {
  SKIP_NO_GPU();
  struct Case { int bt; std::vector<int> counts; int N, K, ctas; };
  const std::vector<Case> cases = {
      {8, {19, 0, 7, 1, 8}, 256, 1536, 3},     {8, {19, 0, 7, 1, 8}, 256, 1536, 7},
      {16, {1, 40, 0, 16, 3}, 384, 1536, 13},  {32, {70, 2, 0, 33}, 256, 2048, 5},
      {8, {5, 1}, 128, 256, 3},                {16, {9, 16, 1}, 256, 1024, 0},
      {8, {8, 1, 0, 5, 2, 7}, 3584, 3072, 0},  // K3 w2, skewed 1-8 rows
      {8, {3, 8}, 6144, 3584, 0},              // K3 w13
      {16, {16, 1, 9, 0, 3, 2}, 4096, 2048, 0},  // DSV4-Flash w2
      {32, {32, 5}, 7168, 3072, 0},            // DSV4-Pro w2
      {8, {8, 1, 0, 5, 2, 7}, 3584, 3072, 97},  // K3 w2 on an odd forced grid
  };
  for (const auto& cs : cases) {
    w4a16_set_streamk_ctas(cs.ctas);
    std::printf("stream-K grid %d: ", cs.ctas);
    check_w4a16(cs.bt, cs.counts, cs.N, cs.K, true, 7);
    w4a16_set_streamk_ctas(0);
  }
}

// Diagnostic (always passes): error per token row of a 16-token tile and per k-block, per variant.
TEST(MoeW4A16Diag, ErrorProfile) {
  SKIP_NO_GPU();
  for (int v = 0; v < 4; ++v) {
    check_w4a16(16, {16}, 128, 512, false, v, false);
    check_w4a16(16, {16}, 128, 128, false, v, false);
    for (int b = 0; b < 8; ++b) {
      const std::vector<int> kb = {b};
      check_w4a16(16, {16}, 128, 512, false, v, false, &kb);
    }
  }
}

class W4A16PermuteTest : public ::testing::TestWithParam<int> {};
TEST_P(W4A16PermuteTest, K3ShapeAfterDevicePermute) {
  SKIP_NO_GPU();
  const int variant = GetParam();
  // routing -> permute -> grouped GEMM with the device-written offsets (no host sync in between)
  auto rng = make_rng();
  const int T = 40, E = 24, k = 4, K = 1024, N = 384, bt = 16;
  std::vector<int> ids(T * k);
  for (int t = 0; t < T; ++t) {
    std::vector<int> perm(E);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int j = 0; j < k; ++j) ids[t * k + j] = perm[j];
  }
  const size_t mb = w4a16_matrix_bytes(N, K);
  std::vector<uint8_t> pool(mb * E);
  std::vector<std::vector<double>> Wd(E, std::vector<double>(static_cast<size_t>(N) * K));
  for (int e = 0; e < E; ++e) {
    std::vector<uint8_t> codes(static_cast<size_t>(N) * K), scales(static_cast<size_t>(N) * K / 32);
    for (auto& c : codes) c = rng() & 0xF;
    for (auto& s : scales) s = 120 + rng() % 5;
    w4a16_prepack(codes.data(), scales.data(), N, K, pool.data() + e * mb);
    for (size_t i = 0; i < codes.size(); ++i)
      Wd[e][i] = e2m1_value(codes[i]) * e8m0_value(scales[(i / K) * (K / 32) + (i % K) / 32]);
  }
  std::vector<double> xd;
  const auto x = rand_bf16(rng, static_cast<size_t>(T) * K, 1.f, &xd);
  DevBuf<int> di(ids.size());
  DevBuf<bf16> dx(x.size()), dxp(static_cast<size_t>(T) * k * K), dy(static_cast<size_t>(T) * k * N);
  DevBuf<uint8_t> dpool(pool.size());
  di.upload(ids);
  dx.upload(x);
  dpool.upload(pool);
  poison_bf16(dy.p, dy.n);
  Dispatch d = alloc_dispatch(E, T * k);
  moe_permute(dx.p, di.p, T, k, K, bt, d, dxp.p, 0);
  const int default_variant = w4a16_variant();
  w4a16_set_variant(variant);
  w4a16_grouped_gemm(dxp.p, dpool.p, nullptr, d.row_offsets, d.tile_offsets, E, N, K, bt,
                     w4a16_max_tiles(T * k, E, bt), dy.p, 0, static_cast<long long>(T) * k);
  SS_CUDA(cudaDeviceSynchronize());
  w4a16_set_variant(default_variant);
  std::vector<int> pos(T * k);
  SS_CUDA(cudaMemcpy(pos.data(), d.pos, 4 * T * k, cudaMemcpyDeviceToHost));
  const auto y = to_double(dy.download());
  std::vector<double> got, ref;
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < k; ++j)
      for (int n = 0; n < N; ++n) {
        double a = 0;
        for (int kk = 0; kk < K; ++kk) a += Wd[ids[t * k + j]][static_cast<size_t>(n) * K + kk] * xd[static_cast<size_t>(t) * K + kk];
        ref.push_back(a);
        got.push_back(y[static_cast<size_t>(pos[t * k + j]) * N + n]);
      }
  ASSERT_EQ(count_nan(got), 0u);
  const double err = rel_l2_error(got, ref);
  std::printf("w4a16 v=%d after device permute bt=%d: rel L2 %.2e\n", variant, bt, err);
  EXPECT_LT(err, 1e-2);
  free_dispatch(d);
}
INSTANTIATE_TEST_SUITE_P(Variants, W4A16PermuteTest, ::testing::Values(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10));

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
// Own FP8 block-scaled grouped GEMM (gemm_fp8.cu): masked and contiguous layouts

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
