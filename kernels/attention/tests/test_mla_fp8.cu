// MLA absorbed decode over the paged FP8 latent cache (mla_fp8.cuh): the 656-B token format
// against hand-computed E4M3 values, and the kernel against double-precision softmax attention
// over the dequantised keys (E4M3 x fp32 scale exact in double, RoPE BF16), at every head count
// the deployments use, direct and split plans, NaN-filled page tails and unused pages.
#include "attention/mla_fp8.cuh"
#include "attention/tests/test_util.cuh"

#include <algorithm>
#include <cstring>
#include <numeric>

using namespace servesim::attn;
using namespace servesim::attn::test;

namespace {
constexpr int TB = kMlaFp8TokenBytes;

// out[h][0..512) = softmax(scale * q_h . k_j) . k_j[0..512) over the given keys (double).
void ref_mla(const double* q, int H, const std::vector<const double*>& keys, double scale, double* out, double* lse) {
  const int n = static_cast<int>(keys.size());
  std::vector<double> s(n);
  for (int h = 0; h < H; ++h) {
    double m = -INFINITY;
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int d = 0; d < 576; ++d) acc += q[static_cast<size_t>(h) * 576 + d] * keys[j][d];
      s[j] = acc * scale;
      m = std::max(m, s[j]);
    }
    double den = 0;
    for (int j = 0; j < n; ++j) den += std::exp(s[j] - m);
    for (int d = 0; d < 512; ++d) {
      double acc = 0;
      for (int j = 0; j < n; ++j) acc += std::exp(s[j] - m) * keys[j][d];
      out[static_cast<size_t>(h) * 512 + d] = acc / den;
    }
    lse[h] = m + std::log(den);
  }
}

// force_split > 0: mqa_make_plan with that many rows per split; else mla_decode_plan (the table's).
// q_exp: q scaled by 2^q_exp (exact) and sm_scale by 2^-q_exp (the same logits): q beyond the FP16
// range exercises variant 6's power-of-2 Q factor.
void fp8_case(const std::vector<int>& ctx, int H, int force_split, bool nan_tail, int page = 64, int q_exp = 0) {
  const int B = static_cast<int>(ctx.size());
  int max_pages = 1, used = 0;
  for (int c : ctx) {
    max_pages = std::max(max_pages, (c + page - 1) / page);
    used += (c + page - 1) / page;
  }
  const int total_pages = used + 3;  // 3 unused pages, all NaN bytes
  std::vector<uint8_t> cache(static_cast<size_t>(total_pages) * page * TB, 0xFF);
  std::vector<int> perm(total_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng());
  std::vector<int> bt(static_cast<size_t>(B) * max_pages, 0);
  int next = 0;
  for (int b = 0; b < B; ++b)
    for (int p = 0; p < (ctx[b] + page - 1) / page; ++p) bt[static_cast<size_t>(b) * max_pages + p] = perm[next++];
  // fill every token of every used page (a NaN tail keeps 0xFF past the context)
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<int> ex(-4, 4);
  std::vector<float> lat(576);
  for (int b = 0; b < B; ++b)
    for (int p = 0; p < (ctx[b] + page - 1) / page; ++p)
      for (int t = 0; t < page; ++t) {
        if (nan_tail && p * page + t >= ctx[b]) continue;
        for (int g = 0; g < 4; ++g) {
          const float mag = std::ldexp(1.f, ex(rng()));
          for (int i = 0; i < 128; ++i) lat[128 * g + i] = u(rng()) * mag;
        }
        for (int i = 512; i < 576; ++i) lat[i] = u(rng());
        const size_t tok = static_cast<size_t>(bt[static_cast<size_t>(b) * max_pages + p]) * page + t;
        mla_fp8_quantize_host(lat.data(), &cache[tok * TB]);
      }
  std::vector<double> qd;
  auto q = rand_bf16(static_cast<size_t>(B) * H * 576, -1, 1, &qd);
  for (size_t i = 0; i < q.size(); ++i) {
    qd[i] = std::ldexp(qd[i], q_exp);
    q[i] = float_to_bf16_host(static_cast<float>(qd[i]));
  }
  DevBuf<uint8_t> dc;
  DevBuf<bf16> dq, dout;
  DevBuf<int> dbt;
  DevBuf<float> dlse, opart, lpart;
  dc.upload(cache); dq.upload(q); dbt.upload(bt);
  dout.alloc(static_cast<size_t>(B) * H * 512);
  dlse.alloc(static_cast<size_t>(B) * H);
  poison(dout.p, dout.n);
  poison(dlse.p, dlse.n);
  MqaPlan plan = force_split > 0 ? mqa_make_plan(ctx, 0, 256, force_split) : mla_decode_plan(ctx, H);
  opart.alloc(std::max<size_t>(1, mqa_part_floats(plan, H)));
  lpart.alloc(std::max<size_t>(1, mqa_lse_floats(plan, H)));
  MqaArgs a;
  a.q = dq.p; a.nq = B; a.H = H; a.block_table = dbt.p; a.max_pages = max_pages; a.page_size = page;
  a.sm_scale = std::ldexp(1.0f / std::sqrt(192.0f), -q_exp); a.out = dout.p; a.lse = dlse.p; a.o_part = opart.p; a.lse_part = lpart.p;
  mla_decode_fp8(a, dc.p, plan);
  SS_CUDA(cudaDeviceSynchronize());
  auto got = to_double(dout.download());
  auto glse = to_double(dlse.download());
  std::vector<double> ref(got.size()), rlse(glse.size());
  std::vector<double> deq(static_cast<size_t>(total_pages) * page * 576);
  for (size_t t = 0; t < static_cast<size_t>(total_pages) * page; ++t) mla_fp8_dequant_host(&cache[t * TB], &deq[t * 576]);
  for (int b = 0; b < B; ++b) {
    std::vector<const double*> keys;
    for (int t = 0; t < ctx[b]; ++t)
      keys.push_back(&deq[(static_cast<size_t>(bt[static_cast<size_t>(b) * max_pages + t / page]) * page + t % page) * 576]);
    ref_mla(&qd[static_cast<size_t>(b) * H * 576], H, keys, a.sm_scale, &ref[static_cast<size_t>(b) * H * 512],
            &rlse[static_cast<size_t>(b) * H]);
  }
  const double e = rel_err(got, ref), el = rel_err(glse, rlse);
  char name[200];
  std::snprintf(name, sizeof name, "mla_decode_fp8 out (H=%d B=%d split=%d slots=%d nan_tail=%d page=%d q_exp=%d %s)", H, B,
                force_split, plan.n_slots, nan_tail, page, q_exp, mla_decode_fp8_config());
  report(name, e, 1e-2);
  report("mla_decode_fp8 lse", el, 1e-3);
  EXPECT_LT(e, 1e-2);
  EXPECT_LT(el, 1e-3);
}
}  // namespace

// Hand-computed: a group whose max |v| is 448 has scale 1 and holds E4M3 values exactly (1.5 ->
// 0x3C: exponent 7 = bias, mantissa 4/8); 0.3 rounds to 0.3125 (0.25 * (1 + 2/8)); a group with
// max 0.875 has scale 0.875 / 448 = 2^-9, 0.875 -> 448 = 0x7E; an all-zero group has scale 1.
TEST(MlaFp8Format, QuantiseDequantiseByHand) {
  std::vector<float> lat(576, 0.f);
  lat[0] = 448.f; lat[1] = 1.5f; lat[2] = 0.3f; lat[3] = -2.f;
  lat[128] = 0.875f; lat[129] = -0.4375f;
  lat[512] = 0.5f; lat[575] = -1.25f;
  std::vector<uint8_t> tok(TB);
  mla_fp8_quantize_host(lat.data(), tok.data());
  float sc[4];
  std::memcpy(sc, &tok[kMlaFp8ScaleOff], 16);
  EXPECT_EQ(sc[0], 1.f);
  EXPECT_EQ(sc[1], std::ldexp(1.f, -9));
  EXPECT_EQ(sc[2], 1.f);
  EXPECT_EQ(tok[1], 0x3C);
  EXPECT_EQ(tok[128], 0x7E);
  std::vector<double> d(576);
  mla_fp8_dequant_host(tok.data(), d.data());
  EXPECT_EQ(d[0], 448.0);
  EXPECT_EQ(d[1], 1.5);
  EXPECT_EQ(d[2], 0.3125);
  EXPECT_EQ(d[3], -2.0);
  EXPECT_EQ(d[128], 0.875);
  EXPECT_EQ(d[129], -0.4375);
  EXPECT_EQ(d[300], 0.0);
  EXPECT_EQ(d[512], 0.5);
  EXPECT_EQ(d[575], -1.25);
}
TEST(MlaFp8Decode, DeepSeekHeadCounts) {
  SKIP_WITHOUT_GPU();
  fp8_case({1, 2100, 64, 130}, 128, 0, false);
  fp8_case({3000, 77}, 128, 256, true);
  fp8_case({20000}, 64, 0, false);  // own plan: one query split into many items
  fp8_case({700, 192, 1, 5000}, 64, 0, true);
  fp8_case({70, 1000, 128}, 32, 128, true);
  fp8_case({129, 1500, 65}, 16, 0, true);
}
TEST(MlaFp8Decode, K3HeadCounts) {
  SKIP_WITHOUT_GPU();
  fp8_case({1, 70, 700, 2100}, 96, 0, true);
  fp8_case({2100, 5}, 96, 128, true);
  fp8_case({1, 300, 1500, 3000}, 48, 0, true);
  fp8_case({5, 700, 2100}, 24, 256, false);
  fp8_case({64, 3000, 1, 191}, 12, 0, true);
}
TEST(MlaFp8Decode, LargerPages) {
  SKIP_WITHOUT_GPU();
  fp8_case({1000, 130, 4000}, 64, 0, true, 128);
  fp8_case({300, 2000}, 128, 256, true, 256);
}
TEST(MlaFp8Decode, RejectsBadArguments) {
  SKIP_WITHOUT_GPU();
  MqaPlan plan = mla_decode_plan({64}, 16);
  DevBuf<bf16> q, out;
  DevBuf<int> bt;
  DevBuf<uint8_t> c;
  q.alloc(16 * 576); out.alloc(16 * 512); bt.upload(std::vector<int>{0}); c.alloc(64 * TB);
  MqaArgs a;
  a.q = q.p; a.nq = 1; a.H = 16; a.block_table = bt.p; a.max_pages = 1; a.page_size = 32; a.out = out.p;
  a.sm_scale = 0.1f;
  EXPECT_THROW(mla_decode_fp8(a, c.p, plan), std::invalid_argument);  // page 32
  a.page_size = 64;
  EXPECT_THROW(mla_decode_fp8(a, c.p + 8, plan), std::invalid_argument);  // not 16-B aligned
  EXPECT_THROW(mla_decode_fp8(a, nullptr, plan), std::invalid_argument);
}
// Variant 5 (a third, producer warpgroup dequantising every tile; slower than variant 4).
TEST(MlaFp8Decode, Variant5ProducerWarpgroup) {
  SKIP_WITHOUT_GPU();
  mla_decode_fp8_set_variant(5);
  fp8_case({1, 2100, 64, 130}, 128, 0, true);
  fp8_case({700, 192, 1, 5000}, 64, 0, true);
  fp8_case({2100, 5}, 96, 128, true);
  fp8_case({64, 3000, 1, 191}, 12, 0, true);
  mla_decode_fp8_set_variant(6);
}
// The default (variant 6: the GEMMs in FP16, E4M3 -> FP16 exact, scale by one HMUL2; Q's NoPE
// part and P FP16, the RoPE block BF16) runs every test above; q_exp 20 (|q| up to 2^20, beyond
// FP16) exercises its power-of-2 factor on Q, a 192-token page the division path of the tile rows.
namespace {
void variant_cases() {
  fp8_case({1, 2100, 64, 130}, 128, 0, false);
  fp8_case({3000, 77}, 128, 256, true);
  fp8_case({20000}, 64, 0, false);
  fp8_case({700, 192, 1, 5000}, 64, 0, true);
  fp8_case({129, 1500, 65}, 16, 0, true);
  fp8_case({1, 70, 700, 2100}, 96, 0, true);
  fp8_case({1, 300, 1500, 3000}, 48, 0, true);
  fp8_case({64, 3000, 1, 191}, 12, 0, true);
  fp8_case({300, 2000}, 128, 256, true, 256);
  fp8_case({700, 2100}, 64, 0, true, 64, 20);
  fp8_case({2100, 5}, 96, 128, true, 64, 20);
  fp8_case({1000, 130, 4000}, 16, 0, true, 192);
}
}  // namespace
TEST(MlaFp8Decode, LargeQAndOddPages) {
  SKIP_WITHOUT_GPU();
  fp8_case({700, 2100}, 64, 0, true, 64, 20);
  fp8_case({2100, 5}, 96, 128, true, 64, 20);
  fp8_case({1000, 130, 4000}, 16, 0, true, 192);
}
// Variant 4 (the default before the FP8-KV second pass: E4M3 -> fp32 x scale -> BF16, BF16 GEMMs).
TEST(MlaFp8Decode, Variant4Bf16Gemms) {
  SKIP_WITHOUT_GPU();
  mla_decode_fp8_set_variant(4);
  variant_cases();
  mla_decode_fp8_set_variant(6);
}
// Variant 11 (fp8kv3: the seesaw over thread-filled FP16 / BF16 stages): the variant-6 cases plus
// 1-tile items (split 64), odd and even tile counts (1, 2, 3 tiles, 4097 tokens) at 128 / 64 heads.
TEST(MlaFp8Decode, Variant11Seesaw) {
  SKIP_WITHOUT_GPU();
  mla_decode_fp8_set_variant(11);
  variant_cases();
  fp8_case({128, 192, 65, 4097}, 128, 64, true);
  fp8_case({4096, 1, 64}, 64, 128, true);
  fp8_case({130, 3000}, 32, 0, false, 128);
  mla_decode_fp8_set_variant(6);
}
// The memcheck subset of Variant11Seesaw (small: compute-sanitizer runs it in seconds).
TEST(MlaFp8Decode, Variant11SeesawSmall) {
  SKIP_WITHOUT_GPU();
  mla_decode_fp8_set_variant(11);
  fp8_case({1, 130, 200}, 128, 64, true);
  fp8_case({700, 5}, 64, 0, true);
  fp8_case({300, 65}, 16, 128, true, 192);
  fp8_case({129, 64}, 96, 0, false, 64, 20);
  mla_decode_fp8_set_variant(6);
}
// Variant 13 (fp8kv4 experiment: variant 6 with its shared-memory pointers in the shared address space).
TEST(MlaFp8Decode, Variant13SharedSpace) {
  SKIP_WITHOUT_GPU();
  mla_decode_fp8_set_variant(13);
  variant_cases();
  mla_decode_fp8_set_variant(6);
}
TEST(MlaFp8Decode, Variant13SharedSpaceSmall) {
  SKIP_WITHOUT_GPU();
  mla_decode_fp8_set_variant(13);
  fp8_case({1, 130, 200}, 128, 64, true);
  fp8_case({700, 5}, 64, 0, true);
  fp8_case({300, 65}, 16, 128, true, 192);
  fp8_case({129, 64}, 96, 0, false, 64, 20);
  mla_decode_fp8_set_variant(6);
}
// Variant 12 (fp8kv4: 32-token tiles from the bulk-copy FP8 ring): variant 11's cases, plus contexts of
// 1..7 32-token tiles (every ring slot / pair / refill combination at the start and the end), 31 / 33
// tokens (partial tiles), forced splits of 64 and 128 tokens, pages of 128 / 192 / 256.
TEST(MlaFp8Decode, Variant12Ring) {
  SKIP_WITHOUT_GPU();
  mla_decode_fp8_set_variant(12);
  variant_cases();
  fp8_case({128, 192, 65, 4097}, 128, 64, true);
  fp8_case({4096, 1, 64}, 64, 128, true);
  fp8_case({130, 3000}, 32, 0, false, 128);
  fp8_case({31, 32, 33, 63, 96, 97, 128, 160, 161, 192, 224, 225}, 64, 0, true);
  fp8_case({31, 33, 95, 129, 161, 200, 223}, 128, 0, true, 256);
  mla_decode_fp8_set_variant(6);
}
// The memcheck subset of Variant12Ring.
TEST(MlaFp8Decode, Variant12RingSmall) {
  SKIP_WITHOUT_GPU();
  mla_decode_fp8_set_variant(12);
  fp8_case({1, 130, 200}, 128, 64, true);
  fp8_case({700, 5}, 64, 0, true);
  fp8_case({300, 65}, 16, 128, true, 192);
  fp8_case({129, 64}, 96, 0, false, 64, 20);
  fp8_case({31, 33, 96, 97, 161, 225}, 64, 0, true);
  mla_decode_fp8_set_variant(6);
}
