// Correctness tests of the MoE kernels against CPU references in double precision, on fresh
// random inputs, with poisoned outputs. GPU tests skip without a CUDA device.
// Host-only checks, routers, permute / combine, activations and norms here; the W4A16 grouped GEMM
// tests in test_moe_w4a16.cu, the library / own FP8 GEMMs and DSV4 mHC in test_moe_gemm.cu (linked in that
// order, so the tests register and list in their original order).
#include "moe/test_moe.cuh"

namespace {

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

}  // namespace
