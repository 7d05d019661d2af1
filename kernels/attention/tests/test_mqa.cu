// MQA flash-decoding core: K3 MLA decode over a paged BF16 latent cache (mixed context lengths)
// against double-precision softmax attention on the same inputs. The V4 attention tests (V4Attn.*) are in
// test_v4_attn.cu, compiled into the same binary (CMakeLists.txt).
#include "attention/mqa.cuh"
#include "attention/tests/ref_attn.cuh"
#include "attention/tests/test_util.cuh"

#include <algorithm>
#include <cstring>
#include <numeric>

using namespace servesim::attn;
using namespace servesim::attn::test;

namespace {
// nan_tail: the tokens of each sequence's last page past its context hold NaN (a kernel must not
// let them reach the output through 0 * NaN).
void mla_case(const std::vector<int>& ctx, int force_split, int variant, int H = 96, bool nan_tail = false) {
  const int DK = 576, DV = 512, PS = 64;
  const int B = static_cast<int>(ctx.size());
  int max_pages = 0, total_pages = 0;
  for (int c : ctx) {
    max_pages = std::max(max_pages, (c + PS - 1) / PS);
    total_pages += (c + PS - 1) / PS;
  }
  total_pages += 3;
  std::vector<double> qd, cd;
  auto q = rand_bf16(static_cast<size_t>(B) * H * DK, -1, 1, &qd);
  auto cache = rand_bf16(static_cast<size_t>(total_pages) * PS * DK, -1, 1, &cd);
  std::vector<int> perm(total_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng());
  std::vector<int> bt(static_cast<size_t>(B) * std::max(1, max_pages), 0);
  int next = 0;
  for (int b = 0; b < B; ++b)
    for (int p = 0; p < (ctx[b] + PS - 1) / PS; ++p) bt[static_cast<size_t>(b) * std::max(1, max_pages) + p] = perm[next++];
  if (nan_tail)
    for (int b = 0; b < B; ++b)
      if (ctx[b] % PS != 0) {
        const int page = bt[static_cast<size_t>(b) * std::max(1, max_pages) + (ctx[b] - 1) / PS];
        for (int t = ctx[b] % PS; t < PS; ++t)
          for (int d = 0; d < DK; ++d) cache[(static_cast<size_t>(page) * PS + t) * DK + d] = float_to_bf16_host(NAN);
      }
  DevBuf<bf16> dq, dc, dout;
  DevBuf<int> dbt;
  DevBuf<float> dlse, opart, lpart;
  dq.upload(q); dc.upload(cache); dbt.upload(bt);
  dout.alloc(static_cast<size_t>(B) * H * DV);
  dlse.alloc(static_cast<size_t>(B) * H);
  poison(dout.p, dout.n);
  poison(dlse.p, dlse.n);
  // variant 0 with no forced split uses its own wave-balanced plan (mla_decode_plan)
  MqaPlan plan = ((variant == 0 || variant >= 3) && force_split == 0) ? mla_decode_plan(ctx, H)
                                                                       : mqa_make_plan(ctx, 0, 256, force_split);
  opart.alloc(std::max<size_t>(1, mqa_part_floats(plan, H)));
  lpart.alloc(std::max<size_t>(1, mqa_lse_floats(plan, H)));
  MqaArgs a;
  a.q = dq.p; a.nq = B; a.H = H; a.cache = dc.p; a.block_table = dbt.p; a.max_pages = std::max(1, max_pages);
  a.page_size = PS; a.cache_pages = total_pages; a.sm_scale = 1.0f / std::sqrt(192.0f); a.out = dout.p; a.lse = dlse.p;
  a.o_part = opart.p; a.lse_part = lpart.p;
  mla_decode(a, plan, 0, variant);
  SS_CUDA(cudaDeviceSynchronize());
  auto got = to_double(dout.download());
  auto glse = to_double(dlse.download());
  std::vector<double> ref(got.size()), rlse(glse.size());
  for (int b = 0; b < B; ++b) {
    std::vector<const double*> keys;
    for (int t = 0; t < ctx[b]; ++t)
      keys.push_back(&cd[(static_cast<size_t>(bt[static_cast<size_t>(b) * a.max_pages + t / PS]) * PS + t % PS) * DK]);
    ref_attn(&qd[static_cast<size_t>(b) * H * DK], H, DK, keys, DV, a.sm_scale, nullptr,
             &ref[static_cast<size_t>(b) * H * DV], &rlse[static_cast<size_t>(b) * H]);
  }
  const double e = rel_err(got, ref), el = rel_err(glse, rlse);
  char name[128];
  std::snprintf(name, sizeof name, "mla_decode out (H=%d B=%d split=%d slots=%d nan_tail=%d %s)", H, B, force_split,
                plan.n_slots, nan_tail, mla_decode_config(H, variant));
  report(name, e, 1e-2);
  report("mla_decode lse", el, 1e-3);
  EXPECT_LT(e, 1e-2);
  EXPECT_LT(el, 1e-3);
}

}  // namespace

TEST(MlaDecode, MixedContextsDirect) {
  SKIP_WITHOUT_GPU();
  mla_case({1, 70, 700, 2100}, 0, 0);
  mla_case({1, 70, 700, 2100}, 0, 1);
  mla_case({1, 70, 700, 2100}, 0, 2);
}
TEST(MlaDecode, MixedContextsSplitKV) {
  SKIP_WITHOUT_GPU();
  mla_case({5, 300, 1500, 2100}, 256, 0);
  mla_case({64, 129, 1000}, 128, 0);
  mla_case({64, 129, 1000}, 128, 1);
  mla_case({5, 300, 1500, 2100}, 256, 2);
}
// The wgmma kernel (variant 0) at every head count deployments use, a NaN-filled page tail, an
// empty context, and many splits of one long sequence.
TEST(MlaDecode, WgmmaHeadCountsAndTails) {
  SKIP_WITHOUT_GPU();
  mla_case({1, 2100, 64, 130}, 0, 0, 128);
  mla_case({3000, 77}, 256, 0, 128);
  mla_case({700, 1500, 1}, 0, 0, 64);
  mla_case({2100, 5}, 128, 0, 96, true);
  mla_case({1, 70, 700, 2100}, 0, 0, 96, true);
  mla_case({1, 300, 65}, 0, 0, 32, true);
  mla_case({9000}, 64, 0, 16);
  mla_case({20000}, 0, 0, 64);          // wave-balanced plan: one query split ~80 ways
  mla_case({3000, 40, 1800, 7}, 0, 0, 128, true);
  mla_case({129, 1500}, 256, 2, 48);
}
TEST(MlaDecode, ShardedHeadCounts) {
  SKIP_WITHOUT_GPU();
  mla_case({1, 300, 1500}, 0, 0, 48);
  mla_case({70, 1000}, 256, 0, 32);
  mla_case({5, 700, 2100}, 0, 0, 24);
  mla_case({129, 1500}, 256, 0, 16);
  mla_case({64, 3000, 1}, 0, 0, 12);
}
// variant 3: 32-token tiles, 4 stages, S(j+1) overlapped with P V(j)
TEST(MlaDecode, Wgmma4StageOverlap) {
  SKIP_WITHOUT_GPU();
  mla_case({1, 70, 700, 2100}, 0, 3, 96, true);
  mla_case({1, 2100, 64, 130, 33}, 0, 3, 128);
  mla_case({3000, 77}, 256, 3, 128, true);
  mla_case({20000}, 0, 3, 64);
  mla_case({9000}, 64, 3, 16);
  mla_case({1, 300, 65}, 0, 3, 32, true);
  mla_case({129, 1500, 31, 32, 95, 96}, 0, 3, 48, true);
  mla_case({5, 700, 2100}, 0, 3, 24);
  mla_case({64, 3000, 1}, 0, 3, 12);
}
// variant 4: the seesaw schedule (tiles in pairs, S0 / S1 on the two warpgroups, per-block stage
// release); odd and even tile counts, 1-tile items, partial NaN tails in either tile of a pair
TEST(MlaDecode, WgmmaSeesaw) {
  SKIP_WITHOUT_GPU();
  mla_case({1, 2100, 64, 130, 33}, 0, 4, 128);
  mla_case({1, 70, 700, 2100}, 0, 4, 96, true);
  mla_case({3000, 77}, 256, 4, 128, true);
  mla_case({129, 192, 191, 65, 128, 127}, 0, 4, 128, true);
  mla_case({20000}, 0, 4, 64);
  mla_case({9000}, 64, 4, 16);
  mla_case({1, 300, 65}, 0, 4, 32, true);
  mla_case({129, 1500, 31, 32, 95, 96}, 0, 4, 48, true);
  mla_case({5, 700, 2100}, 0, 4, 24);
  mla_case({64, 3000, 1, 128}, 0, 4, 12);
}
// variant 5: the seesaw with P0 V0 on both warpgroups right after softmax 0 (K0 released early)
TEST(MlaDecode, WgmmaSeesawEarlyPv0) {
  SKIP_WITHOUT_GPU();
  mla_case({1, 2100, 64, 130, 33}, 0, 5, 128);
  mla_case({1, 70, 700, 2100}, 0, 5, 96, true);
  mla_case({3000, 77}, 256, 5, 128, true);
  mla_case({129, 192, 191, 65, 128, 127}, 0, 5, 128, true);
  mla_case({20000}, 0, 5, 64);
  mla_case({9000}, 64, 5, 16);
  mla_case({1, 300, 65}, 0, 5, 32, true);
  mla_case({129, 1500, 31, 32, 95, 96}, 0, 5, 48, true);
  mla_case({5, 700, 2100}, 0, 5, 24);
  mla_case({64, 3000, 1, 128}, 0, 5, 12);
}
namespace {
// The seesaw variants' common cases (10, 11, 12): head counts 12-256, forced splits, NaN tails.
void seesaw_cases(int V) {
  mla_case({1, 2100, 64, 130, 33}, 0, V, 128);
  mla_case({129, 192, 191, 65, 128, 127}, 0, V, 128, true);
  mla_case({3000, 77}, 256, V, 128, true);
  mla_case({9000}, 64, V, 128, true);
  mla_case({4097, 4096, 4095, 1, 63, 320}, 0, V, 128, true);
  mla_case({1, 70, 700, 2100}, 0, V, 96, true);
  mla_case({700, 1, 5000}, 0, V, 256, true);
  mla_case({20000}, 0, V, 64);
  mla_case({9000}, 64, V, 16);
  mla_case({1, 300, 65}, 0, V, 32, true);
  mla_case({129, 1500, 31, 32, 95, 96}, 0, V, 48, true);
  mla_case({64, 3000, 1, 128}, 0, V, 12);
}
}  // namespace
// variant 10: the seesaw with each warpgroup's own P from registers (RS wgmma) and S1 over K1 blocks 4-7, 0-3, 8
TEST(MlaDecode, WgmmaSeesawRegisterP) {
  SKIP_WITHOUT_GPU();
  seesaw_cases(10);
}
// Variant 11 (issue 12, eleventh session): variant 10 with S1 issued after all of S0, the FFMA softmax
// (masking only in partial tiles) and O rescales skipped when a warp's factors are all 1.
TEST(MlaDecode, WgmmaSeesawS0First) {
  SKIP_WITHOUT_GPU();
  constexpr int V = 11;
  seesaw_cases(V);
  mla_case({5000, 2, 129}, 128, V, 12, true);
}
// Variant 12: variant 11 with S1 gated only on S0's column blocks 0-3.
TEST(MlaDecode, WgmmaSeesawFastSoftmax) {
  SKIP_WITHOUT_GPU();
  constexpr int V = 12;
  seesaw_cases(V);
  mla_case({5000, 2, 129}, 128, V, 12, true);
}
// Variant 12's memcheck subset (smemfix: the default form now keeps smem in the shared address space;
// SERVESIM_MLA_SMEM_GENERIC=1 runs the old uintptr_t-aligned form): variant 13's small cases.
TEST(MlaDecode, WgmmaSeesawFastSoftmaxSmall) {
  SKIP_WITHOUT_GPU();
  constexpr int V = 12;
  mla_case({129, 192, 191, 65, 128, 127}, 0, V, 128, true);
  mla_case({3000, 77}, 256, V, 128, true);
  mla_case({1, 300, 65}, 0, V, 32, true);
  mla_case({700, 1, 300}, 0, V, 256, true);
}
// Variant 13 (issue 12, twenty-fourth session): variant 12 with P0 in its own shared-memory buffer and
// warpgroup 1's P0 V0R ahead of softmax 1 (K0 blocks 4-8 released earlier). seesaw_cases' shapes, made
// smaller (the double CPU reference of the full set plus larger batches ran past the device call's test
// timeout), ragged batches at 128 heads under the own plan and forced splits, 64 / 96 / 256 heads, odd and
// even tile counts. The small part is the sanitizers' test.
TEST(MlaDecode, WgmmaSeesawSplitP0Small) {
  SKIP_WITHOUT_GPU();
  constexpr int V = 13;
  mla_case({129, 192, 191, 65, 128, 127}, 0, V, 128, true);
  mla_case({3000, 77}, 256, V, 128, true);
  mla_case({1, 300, 65}, 0, V, 32, true);
  mla_case({700, 1, 300}, 0, V, 256, true);
}
// Variant 14 (issue 12, twenty-fourth session, helper mla128d): variant 12's schedule with c1 P0 in its own
// buffer (K0's block 8 refilled with blocks 0-3). The same cases as variant 13's two tests.
TEST(MlaDecode, WgmmaSeesawP0BufSmall) {
  SKIP_WITHOUT_GPU();
  constexpr int V = 14;
  mla_case({129, 192, 191, 65, 128, 127}, 0, V, 128, true);
  mla_case({3000, 77}, 256, V, 128, true);
  mla_case({1, 300, 65}, 0, V, 32, true);
  mla_case({700, 1, 300}, 0, V, 256, true);
}
TEST(MlaDecode, WgmmaSeesawP0Buf) {
  SKIP_WITHOUT_GPU();
  constexpr int V = 14;
  mla_case({1, 2100, 64, 130, 33}, 0, V, 128);
  mla_case({4097, 1, 63, 320}, 0, V, 128, true);
  mla_case({3000}, 64, V, 128, true);
  mla_case({4000, 7, 1000, 65, 2345, 191}, 512, V, 128, true);
  mla_case({1, 70, 700, 2100}, 0, V, 96, true);
  mla_case({6000}, 0, V, 64);
  mla_case({2048, 2047, 1025, 3, 128, 64}, 0, V, 64, true);
  mla_case({3000}, 64, V, 16);
  mla_case({129, 1500, 31, 32, 95, 96}, 0, V, 48, true);
  mla_case({64, 3000, 1, 128}, 0, V, 12);
  mla_case({5000, 2, 129}, 128, V, 12, true);
}
// Variant 15 (same session, helper mla128d): variant 13 with lazy rescaling and P1 V1R chained behind P0 V0R.
// Variant 13's cases, plus a context whose scores grow along the tokens (every tile rescales) is not
// available in mla_case; the ragged / split / tail cases exercise the first-tile and partial-tile paths.
TEST(MlaDecode, WgmmaSeesawLazySmall) {
  SKIP_WITHOUT_GPU();
  constexpr int V = 15;
  mla_case({129, 192, 191, 65, 128, 127}, 0, V, 128, true);
  mla_case({3000, 77}, 256, V, 128, true);
  mla_case({1, 300, 65}, 0, V, 32, true);
  mla_case({700, 1, 300}, 0, V, 256, true);
}
TEST(MlaDecode, WgmmaSeesawLazy) {
  SKIP_WITHOUT_GPU();
  constexpr int V = 15;
  mla_case({1, 2100, 64, 130, 33}, 0, V, 128);
  mla_case({4097, 1, 63, 320}, 0, V, 128, true);
  mla_case({3000}, 64, V, 128, true);
  mla_case({4000, 7, 1000, 65, 2345, 191}, 512, V, 128, true);
  mla_case({1, 70, 700, 2100}, 0, V, 96, true);
  mla_case({6000}, 0, V, 64);
  mla_case({2048, 2047, 1025, 3, 128, 64}, 0, V, 64, true);
  mla_case({3000}, 64, V, 16);
  mla_case({129, 1500, 31, 32, 95, 96}, 0, V, 48, true);
  mla_case({64, 3000, 1, 128}, 0, V, 12);
  mla_case({5000, 2, 129}, 128, V, 12, true);
}
TEST(MlaDecode, WgmmaSeesawSplitP0) {
  SKIP_WITHOUT_GPU();
  constexpr int V = 13;
  mla_case({1, 2100, 64, 130, 33}, 0, V, 128);
  mla_case({4097, 1, 63, 320}, 0, V, 128, true);
  mla_case({3000}, 64, V, 128, true);
  mla_case({4000, 7, 1000, 65, 2345, 191}, 512, V, 128, true);
  mla_case({1, 70, 700, 2100}, 0, V, 96, true);
  mla_case({6000}, 0, V, 64);
  mla_case({2048, 2047, 1025, 3, 128, 64}, 0, V, 64, true);
  mla_case({3000}, 64, V, 16);
  mla_case({129, 1500, 31, 32, 95, 96}, 0, V, 48, true);
  mla_case({64, 3000, 1, 128}, 0, V, 12);
  mla_case({5000, 2, 129}, 128, V, 12, true);
}
