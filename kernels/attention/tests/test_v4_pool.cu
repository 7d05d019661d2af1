// V4 attention pool stride (sixteenth session, helper v4g): the contract of MqaArgs::pool_row_bytes /
// CompressorArgs::out_row_bytes (dsv4.cuh): mismatches throw (host only), the default V16 form with the
// default staged epilogue on unsplit launches, and the compressor -> attention pipeline at the stride v4_attn
// reads. Compiled into test_mqa (CMakeLists.txt).
#include "attention/tests/v4_attn_case.cuh"

#include <stdexcept>
#include <string>

using namespace servesim::attn;
using namespace servesim::attn::test;

namespace {
// Compressor -> attention (sixteenth session, helper v4g): v4_compress writes a pool of CSA (ratio 4,
// overlapping groups) entries then HCA (ratio 128) entries at the row stride that v4_attn reads under the
// current settings (CompressorArgs::out_row_bytes = v4_attn_pool_row_bytes(H, ld)), and once more at 584 B.
// Checks: the strided rows equal the 584-B rows in bytes 0..583 and are 0 in bytes 584..stride-1 (so the
// compressor's own test, test_dsv4 at 584 B, covers their values); every UE8M0 scale <= 134 (the F16
// contract, dsv4.cuh); then v4_attn on the strided pool against ref_attn on the 584-B rows dequantised.
// Inputs on the device (fill_uniform_*): kv / score uniform(-2, 2), ape uniform(-0.5, 0.5), norm_w (0.5, 1.5).
V4Check pipeline_case(int H, const std::vector<int>& nrows, bool with_sink, int mode, const char* tag = "") {
  const int n4 = 1536, n128 = 160, n = n4 + n128;  // entries: CSA then HCA
  const int t4 = 4 * n4, t128 = 128 * n128;          // token rows behind them
  const int ld = *std::max_element(nrows.begin(), nrows.end());
  v4_attn_set_variant(v4_mode_variant(mode));
  const int rowb = v4_attn_pool_row_bytes(H, ld);
  v4_attn_set_variant(0);
  DevBuf<bf16> kv4(static_cast<size_t>(t4) * 1024), sc4(static_cast<size_t>(t4) * 1024);
  DevBuf<bf16> kv128(static_cast<size_t>(t128) * 512), sc128(static_cast<size_t>(t128) * 512);
  DevBuf<float> ape4(4 * 1024), ape128(128 * 512), nw(512);
  uint64_t sd = rng()();
  fill_uniform_bf16(kv4.p, kv4.n, -2, 2, ++sd);
  fill_uniform_bf16(sc4.p, sc4.n, -2, 2, ++sd);
  fill_uniform_bf16(kv128.p, kv128.n, -2, 2, ++sd);
  fill_uniform_bf16(sc128.p, sc128.n, -2, 2, ++sd);
  fill_uniform_f32(ape4.p, ape4.n, -0.5f, 0.5f, ++sd);
  fill_uniform_f32(ape128.p, ape128.n, -0.5f, 0.5f, ++sd);
  fill_uniform_f32(nw.p, nw.n, 0.5f, 1.5f, ++sd);
  std::vector<int2> e4(n4), e128(n128);
  for (int j = 0; j < n4; ++j) e4[j] = make_int2(4 * j, 4 * j);
  for (int j = 0; j < n128; ++j) e128[j] = make_int2(128 * j, 128 * j);
  DevBuf<int2> de4, de128;
  de4.upload(e4); de128.upload(e128);
  DevBuf<uint8_t> p584(static_cast<size_t>(n) * kV4RowBytes), pst(static_cast<size_t>(n) * rowb);
  SS_CUDA(cudaMemset(p584.p, 0x7F, p584.bytes()));  // 0x7F = E4M3 NaN: unwritten bytes show
  SS_CUDA(cudaMemset(pst.p, 0x7F, pst.bytes()));
  // first the 584-B pool, then the strided one (by position: with V16 off both strides are 584 and the
  // strided pool must still be written; a choice by stride wrote p584 twice, found on the GPU)
  for (int k = 0; k < 2; ++k) {
    const int stride = k == 0 ? kV4RowBytes : rowb;
    uint8_t* out = k == 0 ? p584.p : pst.p;
    CompressorArgs c;
    c.kv = kv4.p; c.score = sc4.p; c.ape = ape4.p; c.norm_w = nw.p; c.entries = de4.p; c.n = n4;
    c.out = out; c.out_row_bytes = stride;
    v4_compress(c, 4, 512);
    c.kv = kv128.p; c.score = sc128.p; c.ape = ape128.p; c.entries = de128.p; c.n = n128;
    c.out = out + static_cast<size_t>(n4) * stride;
    v4_compress(c, 128, 512);
  }
  SS_CUDA(cudaDeviceSynchronize());
  const auto h584 = p584.download(), hst = pst.download();
  size_t diff = 0, pad = 0, big_scale = 0;
  for (int r = 0; r < n; ++r) {
    const uint8_t* a = &h584[static_cast<size_t>(r) * kV4RowBytes];
    const uint8_t* b = &hst[static_cast<size_t>(r) * rowb];
    for (int i = 0; i < kV4RowBytes; ++i) diff += a[i] != b[i];
    for (int i = kV4RowBytes; i < rowb; ++i) pad += b[i] != 0;
    for (int g = 0; g < 7; ++g) big_scale += a[kV4Nope + 2 * kV4Rope + g] > 134;
  }
  EXPECT_EQ(diff, 0u) << "rows at a " << rowb << "-B stride differ from the 584-B rows";
  EXPECT_EQ(pad, 0u) << "pad bytes 584.." << rowb - 1 << " not 0";
  EXPECT_EQ(big_scale, 0u) << "UE8M0 scales > 134 (the F16 contract)";
  std::printf("[attn-test] compressor rows at stride %d vs 584: %zu bytes differ, %zu pad bytes != 0, %zu scales > 134 (%d rows)\n",
              rowb, diff, pad, big_scale, n);
  std::vector<double> deq(static_cast<size_t>(n) * 512);
  for (int r = 0; r < n; ++r) v4_row_dequant_host(&h584[static_cast<size_t>(r) * kV4RowBytes], &deq[static_cast<size_t>(r) * 512]);
  V4Pool p;
  p.p = pst.p;
  p.rowb = rowb;
  p.rows = n;
  p.deq = &deq;
  return v4_attend_check(H, nrows, 0, with_sink, mode, p, tag);
}

// Whether v4_attn (fn) throws std::invalid_argument naming both sizes.
template <class F>
void expect_stride_error(F&& fn, int stated, int want, const char* what) {
  try {
    fn();
    ADD_FAILURE() << what << ": no exception";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(std::to_string(stated) + " B"), std::string::npos) << what << ": " << m;
    EXPECT_NE(m.find(std::to_string(want) + "-B"), std::string::npos) << what << ": " << m;
    std::printf("[attn-test] %s: %s\n", what, m.c_str());
  }
}
}  // namespace

// The pool-stride contract (host only, no CUDA call: runs without a GPU). v4_attn / v4_attn_ws check the
// stated stride (MqaArgs::pool_row_bytes, 0 = 584) against v4_attn_pool_row_bytes before anything else; the
// plan here has no work (n_work = n_slots = 0), so a matching stride returns without a launch. The pointers
// are never dereferenced on the host.
TEST(V4Attn, PoolRowBytesMismatchThrows) {
  v4_defaults();
  const uintptr_t fake = 4096;  // never dereferenced
  MqaArgs a;
  a.q = reinterpret_cast<const bf16*>(fake); a.pool = reinterpret_cast<const uint8_t*>(fake);
  a.indices = reinterpret_cast<const int*>(fake); a.out = reinterpret_cast<bf16*>(fake);
  a.nq = 1; a.H = 128; a.idx_ld = 1152;
  MqaPlan plan;
  plan.nq = 1;
  ASSERT_EQ(v4_attn_pool_row_bytes(128, 1152), kV4RowBytes16);  // the default: V16
  a.pool_row_bytes = 0;  // not stated: 584
  expect_stride_error([&] { v4_attn(a, plan); }, 584, 592, "default form, pool_row_bytes 0");
  a.pool_row_bytes = kV4RowBytes;
  expect_stride_error([&] { v4_attn(a, plan); }, 584, 592, "default form, 584 stated");
  expect_stride_error([&] { v4_attn_ws(a, plan); }, 584, 592, "v4_attn_ws, 584 stated");
  a.pool_row_bytes = 600;
  expect_stride_error([&] { v4_attn(a, plan); }, 600, 592, "default form, 600 stated");
  a.pool_row_bytes = kV4RowBytes16;
  EXPECT_NO_THROW(v4_attn(a, plan));  // matches; no work: no launch
  EXPECT_NO_THROW(v4_attn_ws(a, plan));
  a.H = 64; a.idx_ld = 64;
  EXPECT_NO_THROW(v4_attn(a, plan));
  a.pool_row_bytes = kV4RowBytes;
  expect_stride_error([&] { v4_attn(a, plan); }, 584, 592, "default form H=64, 584 stated");
  a.H = 128; a.idx_ld = 1152;
  v4_attn_ws_set_v16(0);  // 584-B form
  a.pool_row_bytes = kV4RowBytes16;
  expect_stride_error([&] { v4_attn(a, plan); }, 592, 584, "V4WS_V16=0, 592 stated");
  expect_stride_error([&] { v4_attn_ws(a, plan); }, 592, 584, "v4_attn_ws V4WS_V16=0, 592 stated");
  a.pool_row_bytes = 0;
  EXPECT_NO_THROW(v4_attn(a, plan));
  a.pool_row_bytes = kV4RowBytes;
  EXPECT_NO_THROW(v4_attn_ws(a, plan));
  v4_attn_ws_set_v16(-1);
  // the staged producer (V4WS_ST=1): on 592-B rows since the seventeenth session (ST + V16), so it reads the
  // 16-B form's 592-B rows, and with V4WS_V16=0 the 8-B staged form's 584-B rows
  v4_attn_ws_set_st(1);
  a.pool_row_bytes = kV4RowBytes16;
  EXPECT_NO_THROW(v4_attn_ws(a, plan));
  a.pool_row_bytes = kV4RowBytes;
  expect_stride_error([&] { v4_attn_ws(a, plan); }, 584, 592, "V4WS_ST=1, 584 stated");
  v4_attn_ws_set_v16(0);
  a.pool_row_bytes = kV4RowBytes16;
  expect_stride_error([&] { v4_attn_ws(a, plan); }, 592, 584, "V4WS_ST=1 V4WS_V16=0, 592 stated");
  v4_attn_ws_set_v16(-1);
  v4_attn_ws_set_st(-1);
  a.pool_row_bytes = kV4RowBytes16;
  v4_attn_set_variant(2);  // the second session's kernel: 584-B rows
  expect_stride_error([&] { v4_attn(a, plan); }, 592, 584, "variant 2, 592 stated");
  v4_attn_set_variant(0);
  a.H = 32;  // the mma.sync kernel: 584-B rows
  expect_stride_error([&] { v4_attn(a, plan); }, 592, 584, "H=32, 592 stated");
  // v4_compress: out_row_bytes below 584 or not a multiple of 8 (checked before the launch)
  CompressorArgs c;
  c.kv = reinterpret_cast<const bf16*>(fake); c.score = c.kv; c.ape = reinterpret_cast<const float*>(fake);
  c.norm_w = c.ape; c.entries = reinterpret_cast<const int2*>(fake); c.out = reinterpret_cast<uint8_t*>(fake); c.n = 1;
  for (int bad : {576, 588, 590}) {
    c.out_row_bytes = bad;
    EXPECT_THROW(v4_compress(c, 4, 512), std::invalid_argument) << bad;
  }
  v4_defaults();
}
// V16 with the DEFAULT epilogue rule on unsplit launches (sixteenth session, helper v4g): every setting at
// its default, so v4_attn runs the F16 + QE + CD + V16 form (staged producer since the eighteenth session) with the staged epilogue wherever the plan splits
// no query. Asserted per case: the pool stride is 592, the plan has no split slot, and the staged epilogue ran.
// Lists of <= 256 rows (v4_attn_plan never splits them: >= 4 tiles per item), 140 queries (more than one
// per SM at H = 64), H = 64 / 128 / 256, a whole masked tile (rows 128..191 of the 256-row lists), 1-row lists,
// lists ending inside a tile; in ...Long, long lists (8320, 20000 rows) under a plan forced unsplit (mode 6).
namespace {
struct UnsplitCase { int H; std::vector<int> rows; bool sink; int mode; };
void unsplit_default_cases(const std::vector<UnsplitCase>& cases) {
  v4_defaults();
  ASSERT_TRUE(v4_attn_ws_uses_v16());
  ASSERT_TRUE(v4_attn_ws_uses_ep(false));
  ASSERT_TRUE(v4_attn_ws_uses_st());  // ST + V16: the default since the eighteenth session (dsv4.cu kV4wsStDefault)
  for (const auto& c : cases) {
    ASSERT_EQ(v4_attn_pool_row_bytes(c.H, *std::max_element(c.rows.begin(), c.rows.end())), kV4RowBytes16);
    const V4Check r = v4_case(c.H, c.rows, 0, c.sink, c.mode, " [defaults, unsplit]");
    EXPECT_EQ(r.n_slots, 0) << "plan split a query";
    EXPECT_TRUE(r.ep) << "staged epilogue did not run";
  }
  v4_defaults();
}
}  // namespace
TEST(V4Attn, V16StagedEpilogueUnsplitDefault) {
  SKIP_WITHOUT_GPU();
  std::vector<int> many;
  for (int i = 0; i < 140; ++i) many.push_back(std::vector<int>{256, 200, 129, 64, 1, 193, 65}[i % 7]);
  unsplit_default_cases({{128, {256, 255, 200, 193, 192, 129, 128, 65, 64, 1}, true, 1},
                         {64, many, true, 1},
                         {256, {256, 129, 65, 1}, false, 1}});
}
TEST(V4Attn, V16StagedEpilogueUnsplitDefaultLong) {
  SKIP_WITHOUT_GPU();
  unsplit_default_cases({{128, {8320, 1152, 640, 77}, true, 6}, {64, {20000, 3000, 1}, false, 6}});
}
// Compressor -> attention at the stride v4_attn reads under the defaults (592: v4_compress with
// out_row_bytes = v4_attn_pool_row_bytes), unsplit (staged epilogue) and split (FP32 partials) plans;
// and with V4WS_V16=0 (584-B rows, the compressor's default stride).
TEST(V4Attn, CompressorToAttentionPipeline) {
  SKIP_WITHOUT_GPU();
  v4_defaults();
  ASSERT_EQ(v4_attn_pool_row_bytes(128, 1152), kV4RowBytes16);
  V4Check r = pipeline_case(128, {1152, 1152, 300, 65, 1}, true, 1, " [compressor, defaults]");
  EXPECT_GT(r.n_slots, 0);
  r = pipeline_case(128, {256, 200, 129, 64, 1}, false, 1, " [compressor, defaults]");
  EXPECT_EQ(r.n_slots, 0);
  EXPECT_TRUE(r.ep);
  r = pipeline_case(64, {1696, 640, 3}, true, 6, " [compressor, defaults]");
  EXPECT_TRUE(r.ep);
  v4_attn_ws_set_v16(0);
  ASSERT_EQ(v4_attn_pool_row_bytes(128, 1152), kV4RowBytes);
  pipeline_case(128, {1152, 200, 64}, true, 1, " [compressor, V4WS_V16=0]");
  v4_defaults();
}
