// KDA kernels against a double-precision CPU reference: the token-by-token recurrence (not the
// chunked algebra), so the chunked prefill is checked end to end.
#include "attention/kda.cuh"
#include "attention/tests/test_util.cuh"

using namespace servesim::attn;
using namespace servesim::attn::test;

namespace {
constexpr int D = kKdaD;

struct KdaInputs {
  int T, H;
  std::vector<bf16> q, k, v, g, beta;
  std::vector<float> A_log, dt_bias;
};
KdaInputs make_inputs(int T, int H) {
  KdaInputs in{T, H};
  in.q = rand_bf16(static_cast<size_t>(T) * H * D, -1, 1);
  in.k = rand_bf16(static_cast<size_t>(T) * H * D, -1, 1);
  in.v = rand_bf16(static_cast<size_t>(T) * H * D, -1, 1);
  in.g = rand_bf16(static_cast<size_t>(T) * H * D, -3, 1);
  in.beta = rand_bf16(static_cast<size_t>(T) * H, -3, 3);
  in.A_log = rand_f32(H, -1, 1);
  in.dt_bias = rand_f32(static_cast<size_t>(H) * D, -1, 1);
  return in;
}

// One token of the recurrence for one head. S is [K][V] (double). Returns o (scaled).
void ref_token(const KdaInputs& in, int tok, int h, std::vector<double>& S, double* o, double scale, double lb) {
  const size_t off = (static_cast<size_t>(tok) * in.H + h) * D;
  double qn[D], kn[D], sq = 0, sk = 0;
  for (int d = 0; d < D; ++d) {
    qn[d] = bf16_to_float_host(in.q[off + d]);
    kn[d] = bf16_to_float_host(in.k[off + d]);
    sq += qn[d] * qn[d];
    sk += kn[d] * kn[d];
  }
  const double rq = 1.0 / std::sqrt(sq + 1e-6), rk = 1.0 / std::sqrt(sk + 1e-6);
  for (int d = 0; d < D; ++d) { qn[d] *= rq; kn[d] *= rk; }
  const double ea = std::exp(static_cast<double>(in.A_log[h]));
  const double beta = 1.0 / (1.0 + std::exp(-static_cast<double>(bf16_to_float_host(in.beta[static_cast<size_t>(tok) * in.H + h]))));
  for (int kk = 0; kk < D; ++kk) {
    const double graw = bf16_to_float_host(in.g[off + kk]) + in.dt_bias[h * D + kk];
    const double gv = lb / (1.0 + std::exp(-ea * graw));
    const double al = std::exp(gv);
    for (int vv = 0; vv < D; ++vv) S[kk * D + vv] *= al;
  }
  for (int vv = 0; vv < D; ++vv) {
    double pred = 0;
    for (int kk = 0; kk < D; ++kk) pred += S[kk * D + vv] * kn[kk];
    const double vp = beta * (bf16_to_float_host(in.v[off + vv]) - pred);
    for (int kk = 0; kk < D; ++kk) S[kk * D + vv] += kn[kk] * vp;
  }
  for (int vv = 0; vv < D; ++vv) {
    double acc = 0;
    for (int kk = 0; kk < D; ++kk) acc += S[kk * D + vv] * qn[kk];
    o[vv] = scale * acc;
  }
}

void run_prefill_case(const std::vector<int>& lens, int H, bool with_init) {
  std::vector<int> cu(1, 0);
  for (int l : lens) cu.push_back(cu.back() + l);
  const int T = cu.back(), N = static_cast<int>(lens.size());
  KdaInputs in = make_inputs(T, H);
  std::vector<float> init = rand_f32(static_cast<size_t>(N) * H * D * D, -0.5f, 0.5f);

  DevBuf<bf16> q, k, v, g, beta, out;
  DevBuf<float> A, dtb, s0, s1;
  q.upload(in.q); k.upload(in.k); v.upload(in.v); g.upload(in.g); beta.upload(in.beta);
  A.upload(in.A_log); dtb.upload(in.dt_bias); s0.upload(init);
  out.alloc(static_cast<size_t>(T) * H * D);
  s1.alloc(init.size());
  poison(out.p, out.n);
  poison(s1.p, s1.n);
  KdaPlan plan = kda_make_plan(cu);
  DevBuf<uint8_t> ws(kda_workspace_bytes(plan, H));
  KdaPrefillArgs a;
  a.q = q.p; a.k = k.p; a.v = v.p; a.g = g.p; a.beta = beta.p; a.A_log = A.p; a.dt_bias = dtb.p;
  a.init_state = with_init ? s0.p : nullptr;
  a.final_state = s1.p;
  a.out = out.p;
  a.H = H;
  kda_prefill(a, plan, ws.p);
  SS_CUDA(cudaDeviceSynchronize());
  const std::vector<double> got_o = to_double(out.download());
  const std::vector<double> got_s = to_double(s1.download());

  std::vector<double> ref_o(got_o.size()), ref_s(got_s.size());
  for (int n = 0; n < N; ++n)
    for (int h = 0; h < H; ++h) {
      std::vector<double> S(D * D, 0.0);
      if (with_init)
        for (int vv = 0; vv < D; ++vv)
          for (int kk = 0; kk < D; ++kk) S[kk * D + vv] = init[((static_cast<size_t>(n) * H + h) * D + vv) * D + kk];
      for (int t = cu[n]; t < cu[n + 1]; ++t)
        ref_token(in, t, h, S, &ref_o[(static_cast<size_t>(t) * H + h) * D], a.scale, a.lower_bound);
      for (int vv = 0; vv < D; ++vv)
        for (int kk = 0; kk < D; ++kk) ref_s[((static_cast<size_t>(n) * H + h) * D + vv) * D + kk] = S[kk * D + vv];
    }
  const double eo = rel_err(got_o, ref_o), es = rel_err(got_s, ref_s);
  char name[128];
  std::snprintf(name, sizeof name, "kda_prefill out (T=%d N=%d H=%d init=%d)", T, N, H, with_init);
  report(name, eo, 1e-2);
  std::snprintf(name, sizeof name, "kda_prefill final state (T=%d N=%d)", T, N);
  report(name, es, 1e-2);
  EXPECT_EQ(count_nan(got_o), 0u) << "unwritten outputs";
  EXPECT_EQ(count_nan(got_s), 0u) << "unwritten state";
  EXPECT_LT(eo, 1e-2);
  EXPECT_LT(es, 1e-2);
}
}  // namespace

TEST(Kda, PrefillVarlenWithInitialState) {
  SKIP_WITHOUT_GPU();
  run_prefill_case({37, 16, 100, 5, 1}, 4, true);
}
TEST(Kda, PrefillLongSequenceZeroState) {
  SKIP_WITHOUT_GPU();
  run_prefill_case({1000}, 2, false);
}

class KdaDecode : public ::testing::TestWithParam<bool> {};
TEST_P(KdaDecode, MatchesRecurrence) {
  SKIP_WITHOUT_GPU();
  const bool bf16_state = GetParam();
  const int B = 3, H = 4;
  KdaInputs in = make_inputs(B, H);  // token b = sequence b
  std::vector<float> st = rand_f32(static_cast<size_t>(B) * H * D * D, -0.5f, 0.5f);
  std::vector<bf16> st_b(st.size());
  for (size_t i = 0; i < st.size(); ++i) {
    st_b[i] = float_to_bf16_host(st[i]);
    if (bf16_state) st[i] = bf16_to_float_host(st_b[i]);
  }
  DevBuf<bf16> q, k, v, g, beta, out, sb;
  DevBuf<float> A, dtb, sf;
  q.upload(in.q); k.upload(in.k); v.upload(in.v); g.upload(in.g); beta.upload(in.beta);
  A.upload(in.A_log); dtb.upload(in.dt_bias);
  if (bf16_state) sb.upload(st_b); else sf.upload(st);
  out.alloc(static_cast<size_t>(B) * H * D);
  poison(out.p, out.n);
  KdaDecodeArgs a;
  a.q = q.p; a.k = k.p; a.v = v.p; a.g = g.p; a.beta = beta.p; a.A_log = A.p; a.dt_bias = dtb.p;
  a.state = bf16_state ? static_cast<void*>(sb.p) : static_cast<void*>(sf.p);
  a.state_bf16 = bf16_state;
  a.out = out.p;
  a.B = B;
  a.H = H;
  kda_decode(a);
  SS_CUDA(cudaDeviceSynchronize());
  const std::vector<double> got_o = to_double(out.download());
  const std::vector<double> got_s = bf16_state ? to_double(sb.download()) : to_double(sf.download());
  std::vector<double> ref_o(got_o.size()), ref_s(got_s.size());
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      std::vector<double> S(D * D);
      const size_t base = (static_cast<size_t>(b) * H + h) * D * D;
      for (int vv = 0; vv < D; ++vv)
        for (int kk = 0; kk < D; ++kk) S[kk * D + vv] = st[base + vv * D + kk];
      ref_token(in, b, h, S, &ref_o[(static_cast<size_t>(b) * H + h) * D], a.scale, a.lower_bound);
      for (int vv = 0; vv < D; ++vv)
        for (int kk = 0; kk < D; ++kk) ref_s[base + vv * D + kk] = S[kk * D + vv];
    }
  const double eo = rel_err(got_o, ref_o), es = rel_err(got_s, ref_s);
  const double bound_s = bf16_state ? 1e-2 : 1e-5;
  report(bf16_state ? "kda_decode out (bf16 state)" : "kda_decode out (fp32 state)", eo, 1e-2);
  report(bf16_state ? "kda_decode state (bf16)" : "kda_decode state (fp32)", es, bound_s);
  EXPECT_LT(eo, 1e-2);
  EXPECT_LT(es, bound_s);
}
INSTANTIATE_TEST_SUITE_P(States, KdaDecode, ::testing::Values(false, true));

TEST(Kda, ShortConvPrefillAndDecode) {
  SKIP_WITHOUT_GPU();
  const int C = 256;
  const std::vector<int> cu = {0, 2, 40, 41, 100};
  const int T = cu.back(), N = 4;
  std::vector<double> xd, sd, xdd, sdd;
  auto x = rand_bf16(static_cast<size_t>(T) * C, -2, 2, &xd);
  auto st = rand_bf16(static_cast<size_t>(N) * C * 3, -2, 2, &sd);
  auto w = rand_f32(static_cast<size_t>(C) * 4, -1, 1);
  DevBuf<bf16> dx, dst, dy, dso;
  DevBuf<float> dw;
  dx.upload(x); dst.upload(st); dw.upload(w);
  dy.alloc(x.size()); dso.alloc(st.size());
  poison(dy.p, dy.n); poison(dso.p, dso.n);
  KdaPlan plan = kda_make_plan(cu);
  kda_short_conv_prefill(dx.p, dw.p, dst.p, dso.p, dy.p, plan, C);
  SS_CUDA(cudaDeviceSynchronize());
  auto gy = to_double(dy.download()), gs = to_double(dso.download());
  std::vector<double> ry(gy.size()), rs(gs.size());
  auto xin = [&](int s, int tok, int c) {  // input at token index tok (may be before the start)
    if (tok >= cu[s]) return xd[static_cast<size_t>(tok) * C + c];
    return sd[(static_cast<size_t>(s) * C + c) * 3 + (3 - (cu[s] - tok))];
  };
  for (int s = 0; s < N; ++s)
    for (int c = 0; c < C; ++c) {
      for (int t = cu[s]; t < cu[s + 1]; ++t) {
        double acc = 0;
        for (int j = 0; j < 4; ++j) acc += w[c * 4 + j] * xin(s, t - 3 + j, c);
        ry[static_cast<size_t>(t) * C + c] = acc / (1 + std::exp(-acc));
      }
      for (int j = 0; j < 3; ++j) rs[(static_cast<size_t>(s) * C + c) * 3 + j] = xin(s, cu[s + 1] - 3 + j, c);
    }
  double e1 = rel_err(gy, ry), e2 = rel_err(gs, rs);
  report("kda_short_conv prefill", e1, 1e-2);
  report("kda_short_conv prefill state", e2, 1e-6);
  EXPECT_LT(e1, 1e-2);
  EXPECT_LT(e2, 1e-6);

  // decode
  const int B = 5;
  auto x1 = rand_bf16(static_cast<size_t>(B) * C, -2, 2, &xdd);
  auto st1 = rand_bf16(static_cast<size_t>(B) * C * 3, -2, 2, &sdd);
  DevBuf<bf16> ex, es, ey;
  ex.upload(x1); es.upload(st1); ey.alloc(x1.size());
  poison(ey.p, ey.n);
  kda_short_conv_decode(ex.p, dw.p, es.p, ey.p, B, C);
  SS_CUDA(cudaDeviceSynchronize());
  auto gy1 = to_double(ey.download()), gs1 = to_double(es.download());
  std::vector<double> ry1(gy1.size()), rs1(gs1.size());
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c) {
      const size_t sb = (static_cast<size_t>(b) * C + c) * 3;
      const double acc = w[c * 4] * sdd[sb] + w[c * 4 + 1] * sdd[sb + 1] + w[c * 4 + 2] * sdd[sb + 2] +
                         w[c * 4 + 3] * xdd[static_cast<size_t>(b) * C + c];
      ry1[static_cast<size_t>(b) * C + c] = acc / (1 + std::exp(-acc));
      rs1[sb] = sdd[sb + 1];
      rs1[sb + 1] = sdd[sb + 2];
      rs1[sb + 2] = xdd[static_cast<size_t>(b) * C + c];
    }
  e1 = rel_err(gy1, ry1);
  e2 = rel_err(gs1, rs1);
  report("kda_short_conv decode", e1, 1e-2);
  report("kda_short_conv decode state", e2, 1e-6);
  EXPECT_LT(e1, 1e-2);
  EXPECT_LT(e2, 1e-6);
}

TEST(Kda, GatedRmsNorm) {
  SKIP_WITHOUT_GPU();
  const long rows = 333;
  std::vector<double> od, gd;
  auto o = rand_bf16(rows * D, -2, 2, &od);
  auto gt = rand_bf16(rows * D, -3, 3, &gd);
  auto w = rand_f32(D, 0.5f, 1.5f);
  DevBuf<bf16> dO, dG, dY;
  DevBuf<float> dW;
  dO.upload(o); dG.upload(gt); dW.upload(w);
  dY.alloc(o.size());
  poison(dY.p, dY.n);
  kda_gated_rmsnorm(dO.p, dG.p, dW.p, dY.p, rows);
  SS_CUDA(cudaDeviceSynchronize());
  auto got = to_double(dY.download());
  std::vector<double> ref(got.size());
  for (long r = 0; r < rows; ++r) {
    double ss = 0;
    for (int d = 0; d < D; ++d) ss += od[r * D + d] * od[r * D + d];
    const double rs = 1.0 / std::sqrt(ss / D + 1e-6);
    for (int d = 0; d < D; ++d) ref[r * D + d] = od[r * D + d] * rs * w[d] / (1 + std::exp(-gd[r * D + d]));
  }
  const double e = rel_err(got, ref);
  report("kda_gated_rmsnorm", e, 1e-2);
  EXPECT_LT(e, 1e-2);
}
