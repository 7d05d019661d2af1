// V4 sparse attention (v4_attn / v4_attn_ws; issue 3, issue 12): CSA / HCA / window attention over FP8 pool
// rows gathered by index, with attention sink, against double-precision softmax attention on the same
// dequantised rows (NaN-poisoned outputs). Compiled into test_mqa (CMakeLists.txt; moved out of test_mqa.cu in
// the sixteenth session); the helpers are in v4_attn_case.cuh, the pool-stride tests in test_v4_pool.cu.
#include "attention/tests/v4_attn_case.cuh"

#include <array>

using namespace servesim::attn;
using namespace servesim::attn::test;

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
// masked tile in the 192/193-row lists), H = 64 / 128 / 256, with and without sink. V16 off (584-B rows): this
// test keeps the 8-B staged form (ST with V16 on, the default V16, runs ST + V16 since d7502f3; that form has its
// own tests, WarpSpecializedStaged16B*).
TEST(V4Attn, WarpSpecializedStaged) {
  SKIP_WITHOUT_GPU();
  v4_attn_ws_set_pair(0);
  v4_attn_ws_set_f16(1);
  v4_attn_ws_set_qe(1);
  v4_attn_ws_set_cd(1);
  v4_attn_ws_set_v16(0);
  ASSERT_EQ(v4_attn_pool_row_bytes(128, 1152), kV4RowBytes);
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
  v4_attn_ws_set_v16(-1);
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
// The split rules of mla_decode_plan_tiles (host only; nineteenth session, helper v4p; v4_attn_plan's default is
// rule 1, mla_decode_plan's rule 0): at 132 SMs (H200) the prefill
// chunks at prefix 0 whose causal ramp rule 0 split (CSA, V4-Flash 64 heads: chunks 2048 / 3072; V4-Pro 128
// heads: 1536 - 8192) are not split under rule 1; the same chunks after a 4K prefix and chunk 1024 at prefix 0
// split under neither; lists of equal length (decode batches, any B / rows / heads) get rule 0's tiles; mixed
// short lists with long ones (the tests' {1152, 1152, 300, 65, 1}) still split.
namespace {
std::vector<int> csa_prefill_rows(int N, long P, int topk) {  // bench_attn_v4.cuh v4_prefill_problem, ratio 4
  std::vector<int> rows;
  for (int i = 0; i < N; ++i) {
    const long pos = P + i;
    rows.push_back(static_cast<int>(std::min<long>(topk, (pos + 1) / 4) + std::min<long>(128, pos + 1)));
  }
  return rows;
}
long tiles_max(const std::vector<int>& rows) { return (*std::max_element(rows.begin(), rows.end()) + 63) / 64; }
}  // namespace
TEST(V4Attn, PlanRuleUnsplitsTheRamp) {
  const int sms = 132;
  v4_attn_plan_set_rule(-1);
  EXPECT_EQ(v4_attn_plan_rule(), 1);  // the default (SERVESIM_V4_PLAN_RULE unset in the test runs)
  EXPECT_THROW(v4_attn_plan_set_rule(2), std::invalid_argument);
  EXPECT_THROW(mla_decode_plan_tiles({64}, 64, sms, -1), std::invalid_argument);
  for (auto [H, topk, N] : std::vector<std::array<int, 3>>{{64, 512, 2048}, {64, 512, 3072}, {128, 1024, 1536}, {128, 1024, 2048},
                                                          {128, 1024, 3072}, {128, 1024, 4096}, {128, 1024, 6144}, {128, 1024, 8192}}) {
    const auto rows = csa_prefill_rows(N, 0, topk);
    EXPECT_LT(mla_decode_plan_tiles(rows, H, sms, 0), tiles_max(rows)) << "rule 0 at H " << H << " chunk " << N;
    EXPECT_GE(mla_decode_plan_tiles(rows, H, sms, 1), tiles_max(rows)) << "rule 1 at H " << H << " chunk " << N;
  }
  for (auto [H, topk] : std::vector<std::array<int, 2>>{{64, 512}, {128, 1024}})
    for (int N : {1024, 1536, 2048, 3072, 4096, 8192})
      for (long P : {0L, 4096L}) {
        if (P == 0 && (H == 128 ? N >= 1536 : (N == 2048 || N == 3072))) continue;  // the ramps above
        const auto rows = csa_prefill_rows(N, P, topk);
        EXPECT_GE(mla_decode_plan_tiles(rows, H, sms, 0), tiles_max(rows)) << H << " " << N << " " << P;
        EXPECT_GE(mla_decode_plan_tiles(rows, H, sms, 1), tiles_max(rows)) << H << " " << N << " " << P;
      }
  int split = 0;
  for (int H : {64, 128, 256})
    for (int B : {1, 2, 3, 8, 31, 64, 65, 66, 100, 131, 132, 133, 200, 256, 263, 264, 265, 384, 512})
      for (int n : {1, 64, 65, 129, 256, 300, 640, 1152, 2176, 4224, 8320, 16512, 65664, 262272}) {
        const std::vector<int> rows(B, n);
        const long t0 = mla_decode_plan_tiles(rows, H, sms, 0);
        EXPECT_EQ(mla_decode_plan_tiles(rows, H, sms, 1), t0) << "H " << H << " B " << B << " rows " << n;
        split += t0 < tiles_max(rows);
      }
  EXPECT_GT(split, 100);  // the equal-length lists above include many split plans
  const std::vector<int> mixed{1152, 1152, 300, 65, 1};
  EXPECT_LT(mla_decode_plan_tiles(mixed, 128, sms, 1), tiles_max(mixed));
}
// Both rules of v4_attn_plan on the device (defaults otherwise): a 200-query ramp of 1..640 rows at H = 64 (split by rule 0 at
// 132 SMs, one item per query under rule 1: then the staged epilogue runs), each against the double reference.
TEST(V4Attn, PlanRuleRampBothRules) {
  SKIP_WITHOUT_GPU();
  v4_defaults();
  std::vector<int> rows;
  for (int i = 0; i < 200; ++i) rows.push_back(1 + 639 * i / 199);
  for (int rule : {1, 0}) {
    v4_attn_plan_set_rule(rule);
    const bool split = mla_decode_plan_tiles(rows, 64, device_sm_count(), rule) < tiles_max(rows);
    if (device_sm_count() == 132) EXPECT_EQ(split, rule == 0);
    const V4Check r = v4_case(64, rows, 0, true, 1, rule ? " [ramp, plan rule 1]" : " [ramp, plan rule 0]");
    EXPECT_EQ(r.n_slots > 0, split);
    EXPECT_EQ(r.ep, !split);
  }
  v4_attn_plan_set_rule(-1);
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
  EXPECT_EQ(v4_attn_pool_row_bytes(128, 1152), kV4RowBytes16);  // ST + V16 (seventeenth session)
  v4_attn_ws_set_v16(0);
  EXPECT_EQ(v4_attn_pool_row_bytes(128, 1152), kV4RowBytes);  // the 8-B staged form
  v4_attn_ws_set_st(-1);
  v4_attn_ws_set_v16(-1);
}
// The staged producer on 592-B rows (ST + V16, seventeenth session, helper v4i): rows 0..7 of each producer
// warp's next tile by 16-B copies into the 640-B staging rows, rows 8..15 in place by V16's issue. With the
// default epilogue (staged where unsplit) and ep 0; lists refilling the ring every tile, 1-, 2-, 3-tile and
// 1-row lists, lists ending inside a tile, the whole masked tile of the 192/193-row lists, split lists (FP32
// partials: mode 4), H = 64 / 128 / 256, sink / no sink; then the 8-B staged form (v16 0) on the same short
// lists. Short lists only (memcheck / synccheck); long ones in WarpSpecializedStaged16BLong.
TEST(V4Attn, WarpSpecializedStaged16B) {
  SKIP_WITHOUT_GPU();
  v16_forms(true);
  v4_attn_ws_set_st(1);
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
  v4_attn_ws_set_v16(0);
  v4_case(128, {1152, 300, 65, 1}, 0, true, 3);
  v4_case(128, {77, 191, 192, 193}, 128, false, 4);
  v16_forms(false);
}
TEST(V4Attn, WarpSpecializedStaged16BLong) {
  SKIP_WITHOUT_GPU();
  v16_forms(true);
  v4_attn_ws_set_st(1);
  v4_case(64, {20000}, 0, true, 3);
  v4_case(128, {8320, 64, 1}, 0, false, 3);
  v4_case(128, {1152, 1152, 1152, 1152}, 0, true, 3);
  v4_attn_ws_set_ep(0);
  v4_case(128, {1152, 1152, 1152, 1152}, 0, true, 3);
  v4_attn_ws_set_ep(-1);
  v16_forms(false);
}
// ST + V16 with the staged epilogue (seventeenth session, helper tf; the reviewer's finding 1): the cases above
// all split (so their ep -1 / 0 loop ran the per-thread stores twice); here plans that split no query -- lists of
// <= 256 rows under v4_attn_plan (mode 1), 140 queries at H = 64, and lists up to 1152 rows forced unsplit
// (mode 6) -- so the default epilogue rule runs EP. Asserted per case: no split slot, r.ep, and the form
// " st ep v16". Long lists (8320, 20000 rows, mode 6) in ...Long.
namespace {
void st16_unsplit_cases(const std::vector<std::pair<int, std::vector<int>>>& cases, int mode) {
  v16_forms(true);
  v4_attn_ws_set_st(1);
  v4_attn_ws_set_ep(-1);
  ASSERT_EQ(v4_attn_pool_row_bytes(128, 1152), kV4RowBytes16);
  bool sink = true;
  for (const auto& c : cases) {
    const V4Check r = v4_case(c.first, c.second, 0, sink, mode, " [st + v16, unsplit]");
    EXPECT_EQ(r.n_slots, 0) << "plan split a query";
    EXPECT_TRUE(r.ep) << "staged epilogue did not run";
    EXPECT_NE(r.form.find(" st ep v16"), std::string::npos) << "form:" << r.form;
    sink = !sink;
  }
  v16_forms(false);
}
}  // namespace
TEST(V4Attn, WarpSpecializedStaged16BUnsplitEpilogue) {
  SKIP_WITHOUT_GPU();
  std::vector<int> many;
  for (int i = 0; i < 140; ++i) many.push_back(std::vector<int>{256, 200, 129, 64, 1, 193, 65}[i % 7]);
  st16_unsplit_cases({{128, {256, 255, 200, 193, 192, 129, 128, 65, 64, 1}}, {64, many}, {256, {256, 129, 65, 1}}}, 1);
  st16_unsplit_cases({{128, {1152, 640, 77, 1}}, {64, {3000, 300}}}, 6);
}
TEST(V4Attn, WarpSpecializedStaged16BUnsplitEpilogueLong) {
  SKIP_WITHOUT_GPU();
  st16_unsplit_cases({{128, {8320, 1152, 640, 77}}, {64, {20000, 3000, 1}}}, 6);
}
TEST(V4Attn, NoSink) {
  SKIP_WITHOUT_GPU();
  v4_case(64, {500, 33}, 0, false);
}

TEST(V4Attn, ShardedHeadCounts) {
  SKIP_WITHOUT_GPU();
  v4_case(32, {1152, 77}, 0, true);
  v4_case(16, {640, 3000}, 256, true);
  v4_case(8, {1152, 5, 300}, 0, true);
}
