// MQA flash-decoding core: K3 MLA decode over a paged BF16 latent cache (mixed context lengths)
// and V4 attention over gathered FP8 rows with attention sink, against double-precision softmax
// attention on the same (dequantised) inputs.
#include "attention/dsv4.cuh"
#include "attention/mqa.cuh"
#include "attention/tests/test_util.cuh"

#include <algorithm>
#include <cstring>
#include <numeric>

using namespace servesim::attn;
using namespace servesim::attn::test;

namespace {
// out[h][0..dv) = softmax(scale * q_h . k_j (+ sink)) . v_j over the given key rows (double).
void ref_attn(const double* q, int H, int dk, const std::vector<const double*>& keys, int dv, double scale,
              const float* sink, double* out, double* lse) {
  const int n = static_cast<int>(keys.size());
  std::vector<double> s(n);
  for (int h = 0; h < H; ++h) {
    double m = sink ? static_cast<double>(sink[h]) : -INFINITY;
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int d = 0; d < dk; ++d) acc += q[static_cast<size_t>(h) * dk + d] * keys[j][d];
      s[j] = acc * scale;
      m = std::max(m, s[j]);
    }
    double den = sink ? std::exp(sink[h] - m) : 0.0;
    for (int j = 0; j < n; ++j) den += std::exp(s[j] - m);
    for (int d = 0; d < dv; ++d) {
      double acc = 0;
      for (int j = 0; j < n; ++j) acc += std::exp(s[j] - m) * keys[j][d];
      out[static_cast<size_t>(h) * dv + d] = den > 0 ? acc / den : 0.0;
    }
    if (lse) lse[h] = m + std::log(den);
  }
}

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

// mode 0: mqa_make_plan (forced split if force_split > 0); 1: mla_decode_plan (the wgmma kernel's
// own plan); 2: the mma.sync kernel (variant 1) at any H; 3: the warp-specialised kernel (variant 3)
// with mla_decode_plan; 4: variant 3 with mqa_make_plan (forced split if force_split > 0); 5: the
// second session's wgmma kernel (variant 2) with mla_decode_plan. Variant 0 (modes 0, 1) = variant 3. Rows 128..191 of lists of >= 256 rows are
// all -1 (a whole masked 64-row tile).
void v4_case(int H, const std::vector<int>& nrows, int force_split, bool with_sink, int mode = 0) {
  const int D = 512, pool_rows = 6000;
  const int nq = static_cast<int>(nrows.size());
  const int ld = *std::max_element(nrows.begin(), nrows.end());
  std::vector<double> qd;
  auto q = rand_bf16(static_cast<size_t>(nq) * H * D, -0.3f, 0.3f, &qd);
  const int variant = mode == 2 ? 1 : mode == 5 ? 2 : mode >= 3 ? 3 : 0;
  v4_attn_set_variant(variant);
  const int rowb = v4_attn_pool_row_bytes(H, ld);  // 592 in the V16 form (V4WS_V16), else 584
  v4_attn_set_variant(0);
  DevBuf<uint8_t> pool(static_cast<size_t>(pool_rows) * kV4RowBytes);
  fill_v4_rows(pool.p, pool_rows, rng()());
  SS_CUDA(cudaDeviceSynchronize());
  const std::vector<uint8_t> hp = pool.download();
  // V16: the same rows at a 592-B stride, the 8 pad bytes (and the 584-B row's unused last byte) 0xA5
  DevBuf<uint8_t> pool16;
  if (rowb != kV4RowBytes) {
    std::vector<uint8_t> h16(static_cast<size_t>(pool_rows) * rowb, 0xA5);
    for (int r = 0; r < pool_rows; ++r)
      std::memcpy(&h16[static_cast<size_t>(r) * rowb], &hp[static_cast<size_t>(r) * kV4RowBytes], kV4RowBytes - 1);
    pool16.upload(h16);
  }
  std::vector<double> deq(static_cast<size_t>(pool_rows) * D);
  for (int r = 0; r < pool_rows; ++r) v4_row_dequant_host(&hp[static_cast<size_t>(r) * kV4RowBytes], &deq[static_cast<size_t>(r) * D]);
  std::uniform_int_distribution<int> pick(0, pool_rows - 1);
  std::vector<int> idx(static_cast<size_t>(nq) * ld, -1);
  for (int i = 0; i < nq; ++i)
    for (int r = 0; r < nrows[i]; ++r)
      idx[static_cast<size_t>(i) * ld + r] = (r % 37 == 5 || (nrows[i] >= 256 && r >= 128 && r < 192)) ? -1 : pick(rng());
  auto sink = rand_f32(H, -2, 2);
  DevBuf<bf16> dq, dout;
  DevBuf<int> didx;
  DevBuf<float> dsink, dlse, opart, lpart;
  dq.upload(q); didx.upload(idx); dsink.upload(sink);
  dout.alloc(static_cast<size_t>(nq) * H * D);
  dlse.alloc(static_cast<size_t>(nq) * H);
  poison(dout.p, dout.n);
  MqaPlan plan = (mode == 1 || mode == 3 || mode == 5) ? mla_decode_plan(nrows, H) : mqa_make_plan(nrows, 0, 256, force_split);
  opart.alloc(std::max<size_t>(1, mqa_part_floats(plan, H)));
  lpart.alloc(std::max<size_t>(1, mqa_lse_floats(plan, H)));
  MqaArgs a;
  a.q = dq.p; a.nq = nq; a.H = H; a.pool = rowb != kV4RowBytes ? pool16.p : pool.p; a.indices = didx.p; a.idx_ld = ld;
  a.sink = with_sink ? dsink.p : nullptr; a.sm_scale = 1.0f / std::sqrt(512.0f);
  a.out = dout.p; a.lse = dlse.p; a.o_part = opart.p; a.lse_part = lpart.p;
  v4_attn_set_variant(variant);
  v4_attn(a, plan);
  v4_attn_set_variant(0);
  SS_CUDA(cudaDeviceSynchronize());
  auto got = to_double(dout.download());
  std::vector<double> ref(got.size());
  for (int i = 0; i < nq; ++i) {
    std::vector<const double*> keys;
    for (int r = 0; r < nrows[i]; ++r) {
      const int id = idx[static_cast<size_t>(i) * ld + r];
      if (id >= 0) keys.push_back(&deq[static_cast<size_t>(id) * D]);
    }
    ref_attn(&qd[static_cast<size_t>(i) * H * D], H, D, keys, D, a.sm_scale, with_sink ? sink.data() : nullptr,
             &ref[static_cast<size_t>(i) * H * D], nullptr);
  }
  const double e = rel_err(got, ref);
  char name[128];
  v4_attn_set_variant(variant);
  const bool ws1 = variant == 3 && !v4_attn_ws_uses_pair(H);  // the one-CTA kernel: its form
  std::snprintf(name, sizeof name, "v4_attn out (H=%d nq=%d split=%d sink=%d mode=%d %s%s%s%s%s%s%s%s)", H, nq, force_split, with_sink,
                mode, v4_attn_config(H), variant == 3 && v4_attn_ws_uses_pair(H) ? " pair" : "",
                ws1 && v4_attn_ws_uses_f16(ld) ? " f16" : "", ws1 && v4_attn_ws_uses_qe() ? " qe" : "",
                ws1 && v4_attn_ws_uses_qe() && v4_attn_ws_uses_cd() ? " cd" : "",
                ws1 && v4_attn_ws_uses_f16(ld) && v4_attn_ws_uses_qe() && v4_attn_ws_uses_cd() && v4_attn_ws_uses_st() ? " st" : "",
                ws1 && v4_attn_ws_uses_f16(ld) && v4_attn_ws_uses_qe() && v4_attn_ws_uses_cd() && !v4_attn_ws_uses_st() &&
                        v4_attn_ws_uses_ep(plan.n_slots > 0)
                    ? " ep"
                    : "",
                rowb != kV4RowBytes ? " v16" : "");
  v4_attn_set_variant(0);
  report(name, e, 1e-2);
  EXPECT_LT(e, 1e-2);
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
TEST(V4Attn, ProHeadsSparseWithSink) {
  SKIP_WITHOUT_GPU();
  v4_case(128, {1152, 200, 64}, 0, true);
}
TEST(V4Attn, FlashHeadsSplitWithSink) {
  SKIP_WITHOUT_GPU();
  v4_case(64, {640, 3000, 128, 1}, 256, true);
}
TEST(V4Attn, WgmmaOwnPlanAndLegacy) {
  SKIP_WITHOUT_GPU();
  v4_case(128, {1152, 1152, 300, 65, 1}, 0, true, 1);
  v4_case(64, {8320, 640, 129}, 0, true, 1);
  v4_case(128, {1152, 200, 64}, 0, true, 2);
  v4_case(128, {1152, 1152, 300, 65, 1}, 0, true, 5);
  v4_case(64, {8320, 640, 129}, 0, true, 5);
}
// Variant 3 (warp-specialised producer/consumer kernel): own plan and forced splits, H = 128 / 64,
// 1-row and 1-tile lists, odd tile counts, whole masked 64-row tiles (rows 128..191), lists that
// end inside a tile, one long list split many ways, no sink.
TEST(V4Attn, WarpSpecialized) {
  SKIP_WITHOUT_GPU();
  v4_case(128, {1152, 1152, 300, 65, 1}, 0, true, 3);
  v4_case(64, {8320, 640, 129}, 0, true, 3);
  v4_case(128, {1152, 200, 64}, 0, true, 4);
  v4_case(64, {640, 3000, 128, 1}, 256, true, 4);
  v4_case(128, {3000, 77, 191, 192, 193}, 128, false, 4);
  v4_case(64, {20000}, 0, true, 3);
  v4_case(128, {500, 33}, 0, false, 3);
}
// Variant 3 at H % 128 == 0 with the 2-CTA cluster kernel (each producer gathers and converts half of
// every tile into both CTAs; off by default, slower) and, forced off, the one-CTA kernel at H = 128 / 256.
TEST(V4Attn, WarpSpecializedPair) {
  SKIP_WITHOUT_GPU();
  v4_attn_ws_set_pair(1);
  v4_case(128, {1152, 1152, 300, 65, 1}, 0, true, 3);
  v4_case(128, {1152, 200, 64}, 0, true, 4);
  v4_case(128, {3000, 77, 191, 192, 193}, 128, false, 4);
  v4_case(256, {1152, 640, 129, 1}, 0, true, 3);
  v4_case(256, {3000, 65}, 256, true, 4);
  v4_case(128, {9000}, 0, true, 3);
  v4_case(128, {500, 33}, 0, false, 3);
  v4_case(64, {640, 129}, 0, true, 3);  // no pair at H = 64: the one-CTA kernel
  v4_attn_ws_set_pair(0);
  v4_case(128, {1152, 1152, 300, 65, 1}, 0, true, 3);
  v4_case(128, {3000, 77, 191, 192, 193}, 128, false, 4);
  v4_case(256, {1152, 640, 129, 1}, 0, true, 3);
  v4_attn_ws_set_pair(-1);
}
// Both operand forms of the one-CTA kernel against the double reference (issue 12, thirteenth
// session): since the F16 form became the default for lists longer than 256 rows, the cases above
// run it (every one has a list of >= 500 rows), so the BF16 form is forced here on the same long
// lists, the F16 form forced on short ones, and the auto rule run on short lists, where it picked BF16
// (first run on a GPU in the fourteenth session, v4d call 1: pass, memcheck 0 errors). Since then the
// default (-1) is F16 everywhere; setting 2 keeps the thirteenth session's rule (BF16 on these lists).
TEST(V4Attn, WarpSpecializedBothOperandForms) {
  SKIP_WITHOUT_GPU();
  v4_attn_ws_set_pair(0);
  v4_attn_ws_set_f16(0);
  v4_case(128, {1152, 1152, 300, 65, 1}, 0, true, 3);
  v4_case(64, {640, 3000, 128, 1}, 256, true, 4);
  v4_case(128, {500, 33}, 0, false, 3);
  v4_attn_ws_set_f16(1);
  v4_case(128, {200, 64, 1}, 0, true, 3);
  v4_case(64, {256, 129, 65}, 128, false, 4);
  v4_attn_ws_set_f16(2);
  v4_case(128, {256, 191, 64, 1}, 0, true, 3);
  v4_case(64, {255, 33}, 64, false, 4);
  v4_attn_ws_set_f16(-1);
  v4_attn_ws_set_pair(-1);
}
// The early-Q start order (V4WS_QE, fourteenth session): the producer gathers tile 0 while the consumers
// alone copy (and convert) Q. Both operand forms on long, short, 1-row and split lists, H = 64 / 128 / 256.
// The lean consumer (V4WS_CD, same session: descriptors built once, 64-bit row mask, O rescaled only
// when a row max changed) on top of it: cd 0 / 1, each operand form; the masked rows (every 37th, and
// rows 128..191 of lists >= 256) and the all-masked tile of 192-row lists exercise the mask.
TEST(V4Attn, WarpSpecializedEarlyQ) {
  SKIP_WITHOUT_GPU();
  v4_attn_ws_set_pair(0);
  v4_attn_ws_set_qe(1);
  for (int cd : {0, 1})
    for (int f16 : {1, 0}) {
      v4_attn_ws_set_cd(cd);
      v4_attn_ws_set_f16(f16);
      v4_case(128, {1152, 1152, 300, 65, 1}, 0, true, 3);
      v4_case(64, {640, 3000, 128, 1}, 256, true, 4);
      v4_case(128, {200, 64, 1}, 0, false, 3);
      v4_case(256, {256, 129, 65}, 128, true, 4);
    }
  v4_attn_ws_set_cd(-1);
  v4_attn_ws_set_f16(-1);
  v4_attn_ws_set_qe(-1);
  v4_attn_ws_set_pair(-1);
}
// The staged producer (V4WS_ST, fifteenth session, helper v4e): rows 0..7 of each producer warp's rows of
// tile j+1 gathered into the raw staging ring during tile j, rows 8..15 in place. st 0 / 1 on long lists
// (many tiles: the ring is refilled every tile), 1-, 2- and 3-tile lists, a 1-row list, lists that end
// inside a tile, split work items, the masked rows (every 37th; rows 128..191 of lists >= 256: a whole
// masked tile in the 192/193-row lists), H = 64 / 128 / 256, with and without sink.
TEST(V4Attn, WarpSpecializedStaged) {
  SKIP_WITHOUT_GPU();
  v4_attn_ws_set_pair(0);
  v4_attn_ws_set_f16(1);
  v4_attn_ws_set_qe(1);
  v4_attn_ws_set_cd(1);
  for (int st : {1, 0}) {
    v4_attn_ws_set_st(st);
    v4_case(128, {1152, 1152, 300, 65, 1}, 0, true, 3);
    v4_case(64, {640, 3000, 128, 1}, 256, true, 4);
    v4_case(128, {3000, 77, 191, 192, 193}, 128, false, 4);
    v4_case(256, {256, 129, 65}, 128, true, 4);
    v4_case(64, {20000}, 0, true, 3);
    v4_case(128, {8320, 64, 1}, 0, false, 3);
  }
  v4_attn_ws_set_st(-1);
  v4_attn_ws_set_cd(-1);
  v4_attn_ws_set_qe(-1);
  v4_attn_ws_set_f16(-1);
  v4_attn_ws_set_pair(-1);
}
// The staged epilogue (V4WS_EP, fifteenth session, helper v4e: O through shared memory, 16-B stores): the
// BF16 output (whole lists: mode 3, and the short lists of mode 4) and the FP32 partials of split lists
// (mode 4), lists that end inside a tile and a whole masked tile, H = 64 / 128 / 256, sink and no sink,
// ep 1 then 0 (short lists only: memcheck / synccheck of this test fit one device call).
TEST(V4Attn, WarpSpecializedStagedEpilogue) {
  SKIP_WITHOUT_GPU();
  v4_attn_ws_set_pair(0);
  v4_attn_ws_set_f16(1);
  v4_attn_ws_set_qe(1);
  v4_attn_ws_set_cd(1);
  v4_attn_ws_set_st(0);
  for (int ep : {1, 0}) {
    v4_attn_ws_set_ep(ep);
    v4_case(128, {1152, 300, 65, 1}, 0, true, 3);
    v4_case(64, {640, 3000, 128, 1}, 256, true, 4);
    v4_case(128, {77, 191, 192, 193}, 128, false, 4);
    v4_case(256, {256, 129, 65}, 128, true, 4);
  }
  v4_attn_ws_set_ep(-1);
  v4_attn_ws_set_st(-1);
  v4_attn_ws_set_cd(-1);
  v4_attn_ws_set_qe(-1);
  v4_attn_ws_set_f16(-1);
  v4_attn_ws_set_pair(-1);
}
// The staged-epilogue rule itself (host only): by default on for launches whose plan splits no query,
// off for split ones (measured slower there: fifteenth session); an explicit setting applies to both.
TEST(V4Attn, StagedEpilogueDefaultIsUnsplitLaunchesOnly) {
  v4_attn_ws_set_ep(-1);
  EXPECT_TRUE(v4_attn_ws_uses_ep(false));
  EXPECT_FALSE(v4_attn_ws_uses_ep(true));
  v4_attn_ws_set_ep(1);
  EXPECT_TRUE(v4_attn_ws_uses_ep(true));
  EXPECT_TRUE(v4_attn_ws_uses_ep(false));
  v4_attn_ws_set_ep(0);
  EXPECT_FALSE(v4_attn_ws_uses_ep(false));
  v4_attn_ws_set_ep(-1);
}
// The operand-form rule itself (host only): the default (-1) is F16 on every list (fourteenth
// session); setting 2 is the thirteenth session's rule, F16 exactly where a list is longer than 256 rows.
TEST(V4Attn, F16AutoRuleIsTheListLength) {
  v4_attn_ws_set_f16(-1);
  EXPECT_TRUE(v4_attn_ws_uses_f16(1));
  EXPECT_TRUE(v4_attn_ws_uses_f16(64));
  EXPECT_TRUE(v4_attn_ws_uses_f16(65536));
  v4_attn_ws_set_f16(2);
  EXPECT_FALSE(v4_attn_ws_uses_f16(64));
  EXPECT_FALSE(v4_attn_ws_uses_f16(256));
  EXPECT_TRUE(v4_attn_ws_uses_f16(257));
  EXPECT_TRUE(v4_attn_ws_uses_f16(65536));
  v4_attn_ws_set_f16(0);
  EXPECT_FALSE(v4_attn_ws_uses_f16(65536));
  v4_attn_ws_set_f16(1);
  EXPECT_TRUE(v4_attn_ws_uses_f16(64));
  v4_attn_ws_set_f16(-1);
}
// 16-B gathers from 592-B pool rows (V4WS_V16, sixteenth session, helper v4f): the rows of the 584-B pool
// copied to a 592-B stride with 0xA5 pad bytes (and the 584-B row's unused byte 583 = 0xA5: never read as a
// scale); v16 1 with the default epilogue (staged where unsplit, 32-bit stores for the FP32 partials of split
// lists: mode 4), then with ep 0; whole lists, lists ending inside a tile, a whole masked tile, 1-row lists,
// H = 64 / 128 / 256, sink and no sink. Short lists only (memcheck / synccheck of this test); the long ones
// are in WarpSpecialized16BGatherLong.
void v16_forms(bool on) {
  v4_attn_ws_set_pair(on ? 0 : -1);
  v4_attn_ws_set_f16(on ? 1 : -1);
  v4_attn_ws_set_qe(on ? 1 : -1);
  v4_attn_ws_set_cd(on ? 1 : -1);
  v4_attn_ws_set_st(on ? 0 : -1);
  v4_attn_ws_set_v16(on ? 1 : -1);
}
TEST(V4Attn, WarpSpecialized16BGather) {
  SKIP_WITHOUT_GPU();
  v16_forms(true);
  ASSERT_EQ(v4_attn_pool_row_bytes(128, 1152), kV4RowBytes16);
  for (int ep : {-1, 0}) {
    v4_attn_ws_set_ep(ep);
    v4_case(128, {1152, 300, 65, 1}, 0, true, 3);
    v4_case(64, {640, 3000, 128, 1}, 256, true, 4);
    v4_case(128, {77, 191, 192, 193}, 128, false, 4);
    v4_case(256, {256, 129, 65}, 128, true, 4);
    v4_case(64, {500, 33}, 0, false, 3);
  }
  v4_attn_ws_set_ep(-1);
  v16_forms(false);
}
TEST(V4Attn, WarpSpecialized16BGatherLong) {
  SKIP_WITHOUT_GPU();
  v16_forms(true);
  v4_case(64, {20000}, 0, true, 3);
  v4_case(128, {8320, 64, 1}, 0, false, 3);
  v4_case(128, {1152, 1152, 1152, 1152}, 0, true, 3);
  v16_forms(false);
}
// The pool-row rule (host only): 592 only where v4_attn runs the warp-specialised V16 form.
TEST(V4Attn, PoolRowBytesFollowTheForm) {
  v4_attn_ws_set_v16(-1);  // the default since the sixteenth session: V16 where the F16 + QE + CD form runs
  EXPECT_TRUE(v4_attn_ws_uses_v16());
  EXPECT_EQ(v4_attn_pool_row_bytes(128, 1152), kV4RowBytes16);
  EXPECT_EQ(v4_attn_pool_row_bytes(64, 128), kV4RowBytes16);
  v4_attn_ws_set_v16(0);
  EXPECT_EQ(v4_attn_pool_row_bytes(128, 1152), kV4RowBytes);
  v4_attn_ws_set_v16(1);
  EXPECT_EQ(v4_attn_pool_row_bytes(128, 1152), kV4RowBytes16);
  EXPECT_EQ(v4_attn_pool_row_bytes(64, 64), kV4RowBytes16);
  EXPECT_EQ(v4_attn_pool_row_bytes(32, 1152), kV4RowBytes);  // H % 64 != 0: another kernel
  v4_attn_set_variant(2);
  EXPECT_EQ(v4_attn_pool_row_bytes(128, 1152), kV4RowBytes);
  v4_attn_set_variant(0);
  v4_attn_ws_set_f16(0);
  EXPECT_EQ(v4_attn_pool_row_bytes(128, 1152), kV4RowBytes);  // the BF16 form has no V16 form
  v4_attn_ws_set_f16(-1);
  v4_attn_ws_set_st(1);
  EXPECT_EQ(v4_attn_pool_row_bytes(128, 1152), kV4RowBytes);
  v4_attn_ws_set_st(-1);
  v4_attn_ws_set_v16(-1);
}
TEST(V4Attn, NoSink) {
  SKIP_WITHOUT_GPU();
  v4_case(64, {500, 33}, 0, false);
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
TEST(V4Attn, ShardedHeadCounts) {
  SKIP_WITHOUT_GPU();
  v4_case(32, {1152, 77}, 0, true);
  v4_case(16, {640, 3000}, 256, true);
  v4_case(8, {1152, 5, 300}, 0, true);
}
