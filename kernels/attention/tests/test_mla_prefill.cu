// K3 MLA prefill (MHA mode, causal with cached prefix) against double-precision attention.
#include "attention/mla_prefill.cuh"
#include "attention/tests/test_util.cuh"

using namespace servesim::attn;
using namespace servesim::attn::test;

namespace {
void prefill_case(int N, int P, int H, int variant) {
  const int DQ = 192, DV = 128, T = N + P;
  std::vector<double> qd, kd, vd;
  auto q = rand_bf16(static_cast<size_t>(N) * H * DQ, -1, 1, &qd);
  auto k = rand_bf16(static_cast<size_t>(T) * H * DQ, -1, 1, &kd);
  auto v = rand_bf16(static_cast<size_t>(T) * H * DV, -1, 1, &vd);
  DevBuf<bf16> dq, dk, dv, dout;
  dq.upload(q); dk.upload(k); dv.upload(v);
  dout.alloc(static_cast<size_t>(N) * H * DV);
  poison(dout.p, dout.n);
  MhaPrefillArgs a;
  a.q = dq.p; a.k = dk.p; a.v = dv.p; a.out = dout.p; a.N = N; a.P = P; a.H = H;
  mla_prefill(a, 0, variant);
  SS_CUDA(cudaDeviceSynchronize());
  auto got = to_double(dout.download());
  std::vector<double> ref(got.size());
  std::vector<double> s(T);
  for (int i = 0; i < N; ++i)
    for (int h = 0; h < H; ++h) {
      const int n = P + i + 1;
      double m = -INFINITY;
      for (int j = 0; j < n; ++j) {
        double acc = 0;
        for (int d = 0; d < DQ; ++d)
          acc += qd[(static_cast<size_t>(i) * H + h) * DQ + d] * kd[(static_cast<size_t>(j) * H + h) * DQ + d];
        s[j] = acc * a.sm_scale;
        m = std::max(m, s[j]);
      }
      double den = 0;
      for (int j = 0; j < n; ++j) den += std::exp(s[j] - m);
      for (int d = 0; d < DV; ++d) {
        double acc = 0;
        for (int j = 0; j < n; ++j) acc += std::exp(s[j] - m) * vd[(static_cast<size_t>(j) * H + h) * DV + d];
        ref[(static_cast<size_t>(i) * H + h) * DV + d] = acc / den;
      }
    }
  const double e = rel_err(got, ref);
  char name[128];
  std::snprintf(name, sizeof name, "mla_prefill (N=%d P=%d H=%d v=%d)", N, P, H, variant);
  report(name, e, 1e-2);
  EXPECT_LT(e, 1e-2);
}
}  // namespace

TEST(MlaPrefill, ChunkWithPrefix) {
  SKIP_WITHOUT_GPU();
  prefill_case(150, 77, 3, 0);
  prefill_case(150, 77, 3, 1);
}
TEST(MlaPrefill, NoPrefixAlignedAndRagged) {
  SKIP_WITHOUT_GPU();
  prefill_case(128, 0, 2, 0);
  prefill_case(200, 0, 2, 1);
  prefill_case(1, 300, 2, 0);
}

// variant 2 (wgmma + TMA, sm_90a): prefix + chunk, odd lengths, one query, a chunk shorter than a
// key tile, several 128-row query tiles with a prefix that is not a multiple of 128; NaN-poisoned
// outputs (poison) so an unwritten row fails.
// Variants 2 (sequential), 3 (overlap) and 4 (overlap + ping-pong).
TEST(MlaPrefill, WgmmaChunkWithPrefixOddLengths) {
  SKIP_WITHOUT_GPU();
  for (int v = 2; v <= 4; ++v) {
    prefill_case(150, 77, 3, v);
    prefill_case(333, 1000, 2, v);
    prefill_case(1, 300, 2, v);
    prefill_case(37, 5, 1, v);
  }
}
TEST(MlaPrefill, WgmmaNoPrefixAlignedAndRagged) {
  SKIP_WITHOUT_GPU();
  for (int v = 2; v <= 4; ++v) {
    prefill_case(128, 0, 2, v);
    prefill_case(256, 0, 1, v);
    prefill_case(200, 0, 2, v);
    prefill_case(513, 127, 1, v);
    prefill_case(64, 64, 1, v);
  }
}
