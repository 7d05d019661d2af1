// DeepSeek V4 compressor (ratio 4 / 128, main KV and indexer keys), indexer logits and top-k
// against double-precision CPU references.
#include "attention/dsv4.cuh"
#include "attention/tests/test_util.cuh"

#include <algorithm>
#include <cstring>
#include <string>
#include <numeric>
#include <set>

using namespace servesim::attn;
using namespace servesim::attn::test;

namespace {
// Reference compressed vector (before quantisation) for entry (row cur, position pos).
std::vector<double> ref_entry(const std::vector<double>& kv, const std::vector<double>& sc, const std::vector<float>& ape,
                              const std::vector<float>& nw, int D, int R, int cur, int pos, bool hadamard) {
  const bool ov = R == 4;
  const int W = (ov ? 2 : 1) * D;
  std::vector<double> x(D);
  for (int c = 0; c < D; ++c) {
    std::vector<std::pair<double, double>> terms;  // (score, value)
    if (ov && pos >= R)
      for (int i = 0; i < R; ++i) {
        const size_t r = static_cast<size_t>(cur - R + i);
        terms.push_back({sc[r * W + c] + ape[static_cast<size_t>(i) * W + c], kv[r * W + c]});
      }
    const int off = ov ? D : 0;
    for (int i = 0; i < R; ++i) {
      const size_t r = static_cast<size_t>(cur + i);
      terms.push_back({sc[r * W + off + c] + ape[static_cast<size_t>(i) * W + off + c], kv[r * W + off + c]});
    }
    double m = -INFINITY;
    for (auto& t : terms) m = std::max(m, t.first);
    double den = 0, acc = 0;
    for (auto& t : terms) {
      den += std::exp(t.first - m);
      acc += std::exp(t.first - m) * t.second;
    }
    x[c] = acc / den;
  }
  double ss = 0;
  for (double v : x) ss += v * v;
  const double rs = 1.0 / std::sqrt(ss / D + 1e-6);
  for (int c = 0; c < D; ++c) x[c] *= rs * nw[c];
  for (int i = 0; i < 32; ++i) {
    const double inv = std::pow(160000.0, -2.0 * i / 64.0), ang = pos * inv;
    const int c = D - 64 + 2 * i;
    const double x0 = x[c], x1 = x[c + 1];
    x[c] = x0 * std::cos(ang) - x1 * std::sin(ang);
    x[c + 1] = x0 * std::sin(ang) + x1 * std::cos(ang);
  }
  if (hadamard) {
    for (int h = 1; h < D; h <<= 1)
      for (int i = 0; i < D; ++i)
        if (!(i & h)) {
          const double a = x[i], b = x[i + h];
          x[i] = a + b;
          x[i + h] = a - b;
        }
    for (double& v : x) v /= std::sqrt(static_cast<double>(D));
  }
  return x;
}

void compressor_case(int R, int D, int T) {
  const bool idx = D == 128;
  const int W = (R == 4 ? 2 : 1) * D;
  std::vector<double> kvd, scd;
  auto kv = rand_bf16(static_cast<size_t>(T) * W, -2, 2, &kvd);
  auto sc = rand_bf16(static_cast<size_t>(T) * W, -2, 2, &scd);
  auto ape = rand_f32(static_cast<size_t>(R) * W, -0.5f, 0.5f);
  auto nw = rand_f32(D, 0.5f, 1.5f);
  std::vector<int2> ent;
  for (int j = 0; (j + 1) * R <= T; ++j) ent.push_back(make_int2(j * R, j * R));
  const int n = static_cast<int>(ent.size());
  DevBuf<bf16> dkv, dsc;
  DevBuf<float> dape, dnw, dscale;
  DevBuf<int2> dent;
  dkv.upload(kv); dsc.upload(sc); dape.upload(ape); dnw.upload(nw); dent.upload(ent);
  const size_t row_bytes = idx ? 128 : kV4RowBytes;
  DevBuf<uint8_t> out(static_cast<size_t>(n) * row_bytes);
  SS_CUDA(cudaMemset(out.p, 0x7F, out.bytes()));  // 0x7F = E4M3 NaN: unwritten bytes fail
  dscale.alloc(n);
  poison(dscale.p, dscale.n);
  CompressorArgs a;
  a.kv = dkv.p; a.score = dsc.p; a.ape = dape.p; a.norm_w = dnw.p; a.entries = dent.p; a.n = n;
  a.out = out.p; a.out_scale = dscale.p;
  v4_compress(a, R, D);
  SS_CUDA(cudaDeviceSynchronize());
  const auto hb = out.download();
  const auto hs = dscale.download();
  std::vector<double> got, ref, got_rope, ref_rope;
  size_t bad_scale = 0;
  for (int e = 0; e < n; ++e) {
    const auto x = ref_entry(kvd, scd, ape, nw, D, R, ent[e].x, ent[e].y, idx);
    if (idx) {
      double amax = 0;
      for (double v : x) amax = std::max(amax, std::fabs(v));
      const double s = amax / 448.0;
      if (std::fabs(hs[e] - s) > 1e-3 * s) ++bad_scale;
      for (int c = 0; c < D; ++c) {
        got.push_back(e4m3_to_float_host(hb[static_cast<size_t>(e) * 128 + c]) * static_cast<double>(hs[e]));
        ref.push_back(e4m3_to_float_host(float_to_e4m3_host(static_cast<float>(x[c] / s))) * s);
      }
    } else {
      double deq[512];
      v4_row_dequant_host(&hb[static_cast<size_t>(e) * kV4RowBytes], deq);
      for (int gq = 0; gq < 7; ++gq) {
        double amax = 1e-4;
        for (int c = gq * 64; c < gq * 64 + 64; ++c) amax = std::max(amax, std::fabs(x[c]));
        const int e2 = static_cast<int>(std::ceil(std::log2(amax / 448.0)));
        if (hb[static_cast<size_t>(e) * kV4RowBytes + 576 + gq] != e2 + 127) ++bad_scale;
        const double s = std::ldexp(1.0, e2);
        for (int c = gq * 64; c < gq * 64 + 64; ++c) {
          got.push_back(deq[c]);
          ref.push_back(e4m3_to_float_host(float_to_e4m3_host(static_cast<float>(x[c] / s))) * s);
        }
      }
      for (int c = 448; c < 512; ++c) {
        got_rope.push_back(deq[c]);
        ref_rope.push_back(x[c]);
      }
    }
  }
  char name[128];
  std::snprintf(name, sizeof name, "compressor R=%d D=%d (%d entries) fp8 part", R, D, n);
  const double e1 = rel_err(got, ref);
  report(name, e1, 1e-2);
  EXPECT_LT(e1, 1e-2);
  EXPECT_LE(bad_scale, static_cast<size_t>(n) / 20 + 1) << "scales differ from the reference";
  if (!idx) {
    const double e2 = rel_err(got_rope, ref_rope);
    report("compressor rope part (bf16)", e2, 1e-2);
    EXPECT_LT(e2, 1e-2);
  }
}
}  // namespace

TEST(V4Compressor, Ratio4Main) { SKIP_WITHOUT_GPU(); compressor_case(4, 512, 50); }
TEST(V4Compressor, Ratio128Main) { SKIP_WITHOUT_GPU(); compressor_case(128, 512, 300); }
TEST(V4Compressor, Ratio4IndexerKeys) { SKIP_WITHOUT_GPU(); compressor_case(4, 128, 70); }

namespace {
// Indexer logits vs the double reference; `nk` key rows, query i sees keys begins[i] .. + lens[i].
void indexer_case(const std::vector<int>& lens, const std::vector<int>& begins, int nk, int ld, int variant) {
  const int nq = static_cast<int>(lens.size());
  DevBuf<uint8_t> q(static_cast<size_t>(nq) * 64 * 128), k(static_cast<size_t>(nk) * 128);
  fill_e4m3(q.p, q.n, 4.f, rng()());
  fill_e4m3(k.p, k.n, 4.f, rng()());
  auto ks = rand_f32(nk, 0.5f, 2.f);
  auto w = rand_f32(static_cast<size_t>(nq) * 64, 0.f, 0.1f);
  DevBuf<float> dks, dw, dl;
  DevBuf<int> db, dlen;
  dks.upload(ks); dw.upload(w); db.upload(begins); dlen.upload(lens);
  dl.alloc(static_cast<size_t>(nq) * ld);
  poison(dl.p, dl.n);
  IndexerArgs a;
  a.q = q.p; a.w = dw.p; a.keys = k.p; a.kscale = dks.p; a.key_begin = db.p; a.key_len = dlen.p; a.logits = dl.p;
  a.nq = nq; a.ld = ld; a.max_len = *std::max_element(lens.begin(), lens.end());
  a.nkeys = variant == 1 ? 0 : nk;
  v4_set_variants(variant, 0);
  v4_indexer_logits(a);
  v4_set_variants(0, 0);
  SS_CUDA(cudaDeviceSynchronize());
  const auto hq = q.download(), hk = k.download();
  const auto hl = dl.download();
  std::vector<double> got, ref;
  for (int i = 0; i < nq; ++i)
    for (int j = 0; j < lens[i]; ++j) {
      const size_t kr = static_cast<size_t>(begins[i] + j);
      double tot = 0;
      for (int h = 0; h < 64; ++h) {
        double dot = 0;
        for (int d = 0; d < 128; ++d)
          dot += static_cast<double>(e4m3_to_float_host(hq[(static_cast<size_t>(i) * 64 + h) * 128 + d])) *
                 e4m3_to_float_host(hk[kr * 128 + d]);
        tot += w[static_cast<size_t>(i) * 64 + h] * std::max(0.0, dot * ks[kr]);
      }
      ref.push_back(tot);
      got.push_back(hl[static_cast<size_t>(i) * ld + j]);
    }
  const double e = rel_err(got, ref);
  char what[96];
  std::snprintf(what, sizeof what, "indexer logits v%d nq=%d max_len=%d", variant, nq, a.max_len);
  // FP8 products are exact in fp32; the bound covers the accumulation (Hopper's FP8 wgmma
  // accumulates with fewer mantissa bits than fp32 FMA: 1e-3 for variant 0)
  const double bound = variant == 1 ? 1e-4 : 1e-3;
  report(what, e, bound);
  EXPECT_LT(e, bound);
}
}  // namespace

TEST(V4Indexer, LogitsMatchReference) {
  SKIP_WITHOUT_GPU();
  // mixed lengths (1 key, partial tiles, the last key row of the buffer), distinct offsets
  for (int v : {0, 1}) indexer_case({3000, 1, 1100, 64, 2047}, {0, 5, 100, 2936, 953}, 3000, 3000, v);
}
TEST(V4Indexer, WgmmaDecodeBatchManyChunks) {
  SKIP_WITHOUT_GPU();
  // decode-like: 40 queries with their own keys (several chunks per query), odd offsets and lengths
  std::vector<int> lens, begins;
  int off = 0;
  for (int i = 0; i < 40; ++i) {
    const int l = (i % 5 == 0) ? 4096 : 517 + 301 * i;
    lens.push_back(l);
    begins.push_back(off);
    off += l + (i % 3);
  }
  indexer_case(lens, begins, off, 16384, 0);
}
TEST(V4Indexer, WgmmaPrefillSharedKeys) {
  SKIP_WITHOUT_GPU();
  std::vector<int> lens, begins;
  for (int i = 0; i < 24; ++i) { lens.push_back(700 + 83 * i); begins.push_back(0); }
  indexer_case(lens, begins, 700 + 83 * 23, 2611, 0);
}
TEST(V4TopK, SelectsTheLargest) {
  SKIP_WITHOUT_GPU();
  const std::vector<int> lens = {5000, 512, 100, 70000, 1025};
  const int nq = static_cast<int>(lens.size()), ld = 70000;
  for (int K : {512, 1024}) {
    auto lg = rand_f32(static_cast<size_t>(nq) * ld, -50.f, 50.f);
    DevBuf<float> dl;
    DevBuf<int> dlen, didx(static_cast<size_t>(nq) * K);
    dl.upload(lg); dlen.upload(lens);
    SS_CUDA(cudaMemset(didx.p, 0x7F, didx.bytes()));
    v4_topk(dl.p, ld, dlen.p, nq, K, didx.p);
    SS_CUDA(cudaDeviceSynchronize());
    const auto hi = didx.download();
    for (int i = 0; i < nq; ++i) {
      std::vector<int> order(lens[i]);
      std::iota(order.begin(), order.end(), 0);
      const int take = std::min(K, lens[i]);
      std::partial_sort(order.begin(), order.begin() + take, order.end(),
                        [&](int x, int y) { return lg[static_cast<size_t>(i) * ld + x] > lg[static_cast<size_t>(i) * ld + y]; });
      std::set<int> want(order.begin(), order.begin() + take), have;
      int pad = 0;
      for (int j = 0; j < K; ++j) {
        const int v = hi[static_cast<size_t>(i) * K + j];
        if (v == -1) ++pad; else have.insert(v);
      }
      EXPECT_EQ(want, have) << "row " << i << " K=" << K;
      EXPECT_EQ(pad, K - take) << "row " << i;
    }
    std::printf("[attn-test] topk K=%d rows=%d: sets equal to CPU partial_sort\n", K, nq);
  }
}

namespace {
// Checks a top-k index row against the logits: K slots, -1 padding only when len < K, distinct
// indices in range, and every selected logit >= every unselected one (ties may go either way).
void check_topk_row(const float* x, int len, int K, const int* got, const char* what, int row) {
  const int take = std::min(K, len);
  std::vector<char> sel(len, 0);
  int pad = 0, bad = 0;
  for (int j = 0; j < K; ++j) {
    const int v = got[j];
    if (v == -1) { ++pad; continue; }
    if (v < 0 || v >= len || sel[v]) { ++bad; continue; }
    sel[v] = 1;
  }
  EXPECT_EQ(bad, 0) << what << " row " << row;
  EXPECT_EQ(pad, K - take) << what << " row " << row;
  float mn = INFINITY, mx = -INFINITY;
  for (int j = 0; j < len; ++j) {
    if (sel[j]) mn = std::min(mn, x[j]);
    else mx = std::max(mx, x[j]);
  }
  if (take < len) EXPECT_GE(mn, mx) << what << " row " << row;
}
}  // namespace

TEST(V4TopK, ClusterSmemAllSizes) {
  SKIP_WITHOUT_GPU();
  // row lengths that give cluster sizes 1, 2, 4, 8 (max_len 262144 = 8 x 32768), rows shorter than
  // the chunk of the last CTAs, rows <= K, odd ld (unaligned rows), heavy ties, negative values
  struct Case { std::vector<int> lens; int ld; int kind; };  // kind 0 uniform, 1 few distinct values, 2 tiny range
  const std::vector<Case> cases = {
      {{5000, 512, 100, 70000, 1025}, 70000, 0},
      {{262144, 200000, 1500, 131073}, 262144, 0},
      {{9000, 9001, 30000, 3}, 30001, 1},
      {{65536, 4096, 40000}, 65537, 2},
  };
  std::mt19937_64& r = rng();
  for (const auto& c : cases)
    for (int K : {512, 1024}) {
      const int nq = static_cast<int>(c.lens.size());
      std::vector<float> lg(static_cast<size_t>(nq) * c.ld);
      std::uniform_real_distribution<float> u(-50.f, 50.f);
      std::uniform_int_distribution<int> di(0, 40);
      for (auto& v : lg) v = c.kind == 0 ? u(r) : c.kind == 1 ? static_cast<float>(di(r)) - 20.f : 1.0f + 1e-6f * di(r);
      DevBuf<float> dl;
      DevBuf<int> dlen, didx(static_cast<size_t>(nq) * K);
      dl.upload(lg); dlen.upload(c.lens);
      SS_CUDA(cudaMemset(didx.p, 0x7F, didx.bytes()));
      const int mx = *std::max_element(c.lens.begin(), c.lens.end());
      v4_set_variants(0, 2);  // the cluster kernel whatever the shape
      v4_topk(dl.p, c.ld, dlen.p, nq, K, didx.p, 0, mx);
      v4_set_variants(0, 0);
      SS_CUDA(cudaDeviceSynchronize());
      const auto hi = didx.download();
      for (int i = 0; i < nq; ++i)
        check_topk_row(lg.data() + static_cast<size_t>(i) * c.ld, c.lens[i], K, hi.data() + static_cast<size_t>(i) * K, "cluster", i);
      std::printf("[attn-test] topk cluster K=%d rows=%d max_len=%d cluster=%d kind=%d: checked\n", K, nq, mx,
                  v4_topk_cluster_size(nq, mx), c.kind);
    }
}
TEST(V4TopK, ClusterWideBatch) {
  SKIP_WITHOUT_GPU();
  // 300 rows of 20000 (cluster size from the batch rule), uniform values
  const int nq = 300, n = 20000, K = 1024;
  auto lg = rand_f32(static_cast<size_t>(nq) * n, -10.f, 10.f);
  std::vector<int> lens(nq, n);
  DevBuf<float> dl;
  DevBuf<int> dlen, didx(static_cast<size_t>(nq) * K);
  dl.upload(lg); dlen.upload(lens);
  SS_CUDA(cudaMemset(didx.p, 0x7F, didx.bytes()));
  v4_set_variants(0, 2);
  v4_topk(dl.p, n, dlen.p, nq, K, didx.p, 0, n);
  v4_set_variants(0, 0);
  SS_CUDA(cudaDeviceSynchronize());
  const auto hi = didx.download();
  for (int i = 0; i < nq; ++i) check_topk_row(lg.data() + static_cast<size_t>(i) * n, n, K, hi.data() + static_cast<size_t>(i) * K, "wide", i);
  std::printf("[attn-test] topk cluster K=%d rows=%d n=%d cluster=%d: checked\n", K, nq, n, v4_topk_cluster_size(nq, n));
}

namespace {
// Runs v4_topk under top-k variant `variant` over rows of the given lengths (ld = row stride) and checks each row
// with check_topk_row. kind: 0 uniform, 1 41 distinct values (ties: the threshold lands on a tied value, so a
// row's candidates are ~n/41 or ~2n/41 keys: more than CAP 5888 -- the filter's exact fallback -- only for rows of
// more than ~241K logits; shorter rows are filtered), 2 tiny range, 3 ascending, 4 large values only at the
// filter's sample sectors (too few candidates -> fallback, rows > 2 CAP), 5 large values only off the sample
// sectors (a list overflows -> fallback, rows > 2 CAP), 6 (eighteenth session) 70% of the logits equal to 40, the
// rest uniform (the k-th key is a tie held by most of the row: the row select's candidate list overflows when that
// exceeds its capacity), 7 a constant row (every key equal), 8 large values (+100) at 2048 spread positions j n /
// min(n, 2048) (outliers stretch the row's range: the row select's linear bins are crowded), 9 every 7th logit -inf
// (the row select's linear digit needs a finite range: its bit-digit path). max_len: passed to v4_topk (0: the longest row); a row
// longer than it is read whole by the filter (its cluster's last CTA scans to the row's end). want_cs > 0: the
// filter's cluster size v4_topk_filter_cluster(nq, max_len) must be want_cs (asserted on a 132-SM H200 only).
void topk_rows_case(const std::vector<int>& lens, int ld, int kind, int K, int variant, const char* what, int max_len = 0,
                    int want_cs = 0) {
  const int nq = static_cast<int>(lens.size());
  std::vector<float> lg(static_cast<size_t>(nq) * ld);
  std::mt19937_64& r = rng();
  std::uniform_real_distribution<float> u(-50.f, 50.f);
  std::uniform_int_distribution<int> di(0, 40);
  std::uniform_int_distribution<int> d10(0, 9);
  for (int i = 0; i < nq; ++i) {
    float* x = lg.data() + static_cast<size_t>(i) * ld;
    const int n = lens[i];
    for (int j = 0; j < ld; ++j)
      x[j] = kind == 1 ? static_cast<float>(di(r)) - 20.f : kind == 2 ? 1.0f + 1e-6f * di(r) : kind == 3 ? 1e-3f * j
           : kind == 6 ? (d10(r) < 7 ? 40.f : u(r)) : kind == 7 ? 3.25f : kind == 9 && j % 7 == 0 ? -INFINITY
           : kind == 10 && j % 11 == 0 ? NAN : u(r);
    if ((kind == 4 || kind == 5) && n >= 8) {
      const int ns = std::max(1, std::min(1024, n / 128));  // the filter's sample sectors (dsv4_topk_filter.cuh)
      std::vector<char> in(n, 0);
      for (int j = 0; j < ns; ++j)
        for (int e = 0; e < 8; ++e) in[((static_cast<long>(j) * n / ns) & ~7L) + e] = 1;
      for (int j = 0; j < n; ++j)
        if ((in[j] != 0) == (kind == 4)) x[j] += 100.f;
    }
    if (kind == 8 && n > 0) {
      const int S = std::min(n, 2048);  // kSample (dsv4_topk_row.cuh)
      for (int j = 0; j < S; ++j) x[static_cast<long>(j) * n / S] += 100.f;
    }
  }
  DevBuf<float> dl;
  DevBuf<int> dlen, didx(static_cast<size_t>(nq) * K);
  dl.upload(lg);
  dlen.upload(lens);
  SS_CUDA(cudaMemset(didx.p, 0x7F, didx.bytes()));
  const int mx = max_len > 0 ? max_len : *std::max_element(lens.begin(), lens.end());
  if (want_cs > 0) {
    int dev = 0, sms = 0;
    SS_CUDA(cudaGetDevice(&dev));
    SS_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (sms == 132) ASSERT_EQ(v4_topk_filter_cluster(nq, mx), want_cs) << what << " nq=" << nq << " max_len=" << mx;
  }
  v4_set_variants(0, variant);
  const char* kernel = v4_topk_kernel_name(nq, mx, K);  // the kernel this variant runs (logged below)
  v4_topk(dl.p, ld, dlen.p, nq, K, didx.p, 0, mx);
  v4_set_variants(0, 0);
  SS_CUDA(cudaDeviceSynchronize());
  const auto hi = didx.download();
  for (int i = 0; i < nq; ++i)
    check_topk_row(lg.data() + static_cast<size_t>(i) * ld, lens[i], K, hi.data() + static_cast<size_t>(i) * K, what, i);
  std::printf("[attn-test] topk %s K=%d rows=%d max_len=%d kind=%d kernel %s (filter cluster=%d): checked\n", what, K, nq, mx, kind,
              kernel, v4_topk_filter_cluster(nq, mx));
}
}  // namespace

TEST(V4TopK, FilterLongRowsClusters) {
  SKIP_WITHOUT_GPU();
  // 12 rows up to 262144 (cluster of 8), odd ld; lengths around the whole-row limit (2 CAP = 2 x 5888 = 11776:
  // 11776 read whole, 11777 sampled and filtered), around CAP, and <= K
  const std::vector<int> lens = {262144, 200000, 1500, 131073, 5888, 5889, 11776, 11777, 12033, 3, 2048, 2049};
  for (int K : {512, 1024, 2048})
    for (int kind : {0, 2, 3}) topk_rows_case(lens, 262147, kind, K, 4, "filter-long");
  for (int kind : {1, 4, 5}) topk_rows_case(lens, 262147, kind, 1024, 4, "filter-long");
}
TEST(V4TopK, FilterClusterSizes) {
  SKIP_WITHOUT_GPU();
  // cluster of 2 (100 rows <= 40000), 4 (50 rows <= 70000), 8 (20 rows <= 140000), 1 (300 rows <= 40000) on 132
  // SMs (v4_topk_filter_cluster, asserted per case); mixed lengths
  struct Sh { int nq, n, cs; };
  for (const Sh sh : {Sh{100, 40000, 2}, Sh{50, 70000, 4}, Sh{20, 140000, 8}, Sh{300, 40000, 1}})
    for (int K : {512, 2048}) {
      std::vector<int> lens(sh.nq);
      for (int i = 0; i < sh.nq; ++i) lens[i] = i == 0 ? sh.n : std::max(1, sh.n - 977 * i);
      topk_rows_case(lens, sh.n + 1, K == 512 ? 0 : 1, K, 4, "filter-cs", 0, sh.cs);
    }
}
// Rows longer than the max_len passed (dsv4.cuh: the filter reads them whole; before the seventeenth session's
// helper tf fix the last CTA stopped at cs x chunk and the tail's largest logits were lost). Uniform rows: the
// tails past max_len (70000 of 60000: 1/7 of the row; 100000 of 70000: 3/10) hold that share of the top-k, so a
// dropped tail fails check_topk_row; cluster of 2 (chunk 30000) and of 4 (chunk 17500).
TEST(V4TopK, FilterRowsLongerThanMaxLen) {
  SKIP_WITHOUT_GPU();
  struct Lc { std::vector<int> lens; int max_len, cs; };
  for (const Lc& c : {Lc{{70000, 60000, 20000, 5000}, 60000, 2}, Lc{{100000, 70000, 69999, 12000}, 70000, 4}})
    for (int kind : {0, 5})  // kind 5: the overflow fallback (exact select over the whole row) on the same rows
      topk_rows_case(c.lens, c.lens[0] + 3, kind, 1024, 4, "filter-past-max-len", c.max_len, c.cs);
}
TEST(V4TopK, FilterIsTheDefault) {
  SKIP_WITHOUT_GPU();
  EXPECT_TRUE(v4_topk_uses_filter(512, 262144, 2048));
  EXPECT_FALSE(v4_topk_uses_filter(512, 262144, 4096));
  EXPECT_STREQ(v4_topk_kernel_name(1024, 8192, 1024), "threshold_filter");
  EXPECT_STREQ(v4_topk_kernel_name(128, 65536, 1024), "threshold_filter");
  EXPECT_STREQ(v4_topk_kernel_name(128, 1023, 1024), "radix_1cta");
  EXPECT_STREQ(v4_topk_kernel_name(128, 8192, 1024), "radix_row_sparse");  // twenty-second session (lean), twenty-third (sparse)
  // topk 4096 and short rows at small batches run the radix kernel
  topk_rows_case({70000, 5000, 4097}, 70001, 0, 4096, 0, "default-k4096");
  topk_rows_case({70000, 20000, 100}, 70003, 0, 1024, 0, "default");
  topk_rows_case({30000, 20000, 100}, 30003, 0, 1024, 0, "default-radix");
}
TEST(V4TopK, FilterSmallForSanitizers) {
  SKIP_WITHOUT_GPU();
  // a few rows (cluster of 4, whole-row, filtered rows; kinds 4 and 5: the exact fallback over the row in global
  // memory, too few candidates / a list over CAP, in the 70000 and 13000 rows) for memcheck / racecheck
  for (int kind : {0, 1, 4, 5}) topk_rows_case({70000, 9000, 13000, 700}, 70001, kind, 1024, 4, "filter-small", 0, 4);
}

// Host-side argument checks of the top-k (seventeenth session, reviewer findings 5 and 7; no CUDA call, runs
// without a GPU): a variant outside its range throws instead of running as another one, and the threshold
// filter, whose rows are its grid's y dimension, refuses more than 65,535 rows per call before any launch.
TEST(V4TopK, BadSettingsThrowBeforeAnyLaunch) {
  EXPECT_THROW(v4_set_variants(0, 9), std::invalid_argument);
  EXPECT_THROW(v4_set_variants(0, -1), std::invalid_argument);
  EXPECT_THROW(v4_set_variants(2, 0), std::invalid_argument);
  v4_set_variants(0, 0);
  ASSERT_TRUE(v4_topk_uses_filter(70000, 0, 1024));
  EXPECT_THROW(v4_topk(nullptr, 4096, nullptr, 70000, 1024, nullptr, 0, 0), std::invalid_argument);
  EXPECT_THROW(v4_topk(nullptr, 4096, nullptr, 8, 0, nullptr, 0, 0), std::invalid_argument);  // topk <= 0
  v4_set_variants(0, 2);  // the radix cluster kernel: rows on grid y too
  EXPECT_THROW(v4_topk(nullptr, 4096, nullptr, 70000, 1024, nullptr, 0, 4096), std::invalid_argument);
  v4_set_variants(0, 0);
}

// The shared-memory row select (topk_row_kernel, eighteenth session, helper tkm). Dispatch rule, host only (no CUDA
// call, runs without a GPU): variant 6 (opt-in) wherever topk <= 2048 and 0 < max_len <= 32768, any nq; variant 0
// (the default, twenty-first session) only for topk <= 2048, 133 <= nq <= 264, 3072 (nq < 192: 2048) <= max_len
// <= 12288; variant 5
// never; where it does not run, the seventeenth session's filter / radix rule applies.
TEST(V4TopK, RowSelectDispatch) {
  // variant 5 (the seventeenth session's default) never runs the row select; the default (variant 0) runs the lean
  // form since the twenty-second session (LeanRowDefaultDispatch)
  {
    v4_set_variants(0, 5);
    EXPECT_FALSE(v4_topk_uses_row(128, 8192, 1024));
    EXPECT_FALSE(v4_topk_uses_row(1, 32768, 1024));
    EXPECT_STREQ(v4_topk_kernel_name(128, 8192, 1024), "radix_1cta");
    EXPECT_STREQ(v4_topk_kernel_name(128, 49152, 1024), "threshold_filter");
    EXPECT_STREQ(v4_topk_kernel_name(512, 8192, 1024), "threshold_filter");
    EXPECT_STREQ(v4_topk_kernel_name(132, 8192, 1024), "radix_1cta");
    EXPECT_STREQ(v4_topk_kernel_name(160, 2047, 1024), "radix_1cta");
    EXPECT_STREQ(v4_topk_kernel_name(160, 12289, 1024), "radix_1cta");
    EXPECT_STREQ(v4_topk_kernel_name(265, 8192, 1024), "threshold_filter");
    EXPECT_STREQ(v4_topk_kernel_name(192, 3071, 1024), "threshold_filter");
    EXPECT_STREQ(v4_topk_kernel_name(256, 12289, 1024), "threshold_filter");
    EXPECT_STREQ(v4_topk_kernel_name(256, 8192, 4096), "radix_1cta");  // topk > 2048
    EXPECT_STREQ(v4_topk_kernel_name(256, 0, 1024), "threshold_filter");  // max_len unknown
  }
  v4_set_variants(0, 5);
  for (int nq : {192, 264})
    for (int len : {3072, 12288}) EXPECT_STREQ(v4_topk_kernel_name(nq, len, 1024), "threshold_filter");
  for (int len : {3072, 12288}) EXPECT_STREQ(v4_topk_kernel_name(133, len, 1024), "radix_1cta");
  v4_set_variants(0, 6);
  EXPECT_TRUE(v4_topk_uses_row(1, 32768, 1024));
  EXPECT_TRUE(v4_topk_uses_row(191, 32768, 2048));
  EXPECT_TRUE(v4_topk_uses_row(512, 8192, 512));
  EXPECT_FALSE(v4_topk_uses_filter(512, 8192, 1024));  // the two rules never overlap
  EXPECT_FALSE(v4_topk_uses_row(128, 32769, 1024));    // past the shared-memory rows: the default's rule
  EXPECT_STREQ(v4_topk_kernel_name(128, 32769, 1024), "radix_1cta");
  EXPECT_STREQ(v4_topk_kernel_name(512, 65536, 1024), "threshold_filter");
  EXPECT_FALSE(v4_topk_uses_row(128, 0, 1024));        // max_len unknown
  EXPECT_FALSE(v4_topk_uses_row(128, 8192, 4096));     // topk > 2048
  EXPECT_STREQ(v4_topk_kernel_name(128, 32768, 1024), "radix_row_smem");
  v4_set_variants(0, 0);
}
// The default (variant 0) in its row-select region (twenty-first session; since the twenty-second the lean form):
// 200 rows of 4212..8192 logits (max_len 8192, odd ld), 256 rows of 4096 and 140 rows of 12288 (the longest rows at
// two CTAs per SM), 150 rows of 1305..2048 -- the dispatch picks topk_row_lean_kernel and the rows are exact.
TEST(V4TopK, RowSelectIsTheDefaultInItsRegion) {
  SKIP_WITHOUT_GPU();
  v4_set_variants(0, 0);
  ASSERT_STREQ(v4_topk_kernel_name(200, 8192, 1024), "radix_row_sparse");
  ASSERT_STREQ(v4_topk_kernel_name(256, 4096, 512), "radix_row_sparse");
  ASSERT_STREQ(v4_topk_kernel_name(140, 12288, 2048), "radix_row_sparse");
  ASSERT_STREQ(v4_topk_kernel_name(150, 2048, 1024), "radix_row_sparse");
  std::vector<int> lens(200);
  for (int i = 0; i < 200; ++i) lens[i] = 8192 - 20 * i;
  for (int kind : {0, 1, 9}) topk_rows_case(lens, 8195, kind, 1024, 0, "default-row");
  topk_rows_case(std::vector<int>(256, 4096), 4096, 0, 512, 0, "default-row-256");
  topk_rows_case(std::vector<int>(140, 12288), 12289, 0, 2048, 0, "default-row-140");
  std::vector<int> edge(150);  // 133-191 rows x 2048 logits (3515623): rows of 2048 down to 1,305, k 1024
  for (int i = 0; i < 150; ++i) edge[i] = 2048 - 5 * i;
  for (int kind : {0, 1, 9}) topk_rows_case(edge, 2048, kind, 1024, 0, "default-row-150x2048");
}
// Row lengths up to the kernel's 32768 (max_len = the longest row: 32768 keys + a 19456-entry list in shared
// memory), odd ld (unaligned rows: the 16-B loads start after a head), rows <= K, just above K, not a multiple of 4;
// k 512 / 1024 / 2048; uniform, ties, tiny range, ascending, most keys tied at the k-th key (kind 6: the 32768 and
// 30000 rows' lists overflow -> the bit-digit path, whose list overflows too -> the digits over the whole row), constant
// rows (kind 7: every key equal), outliers (kind 8), -inf logits (kind 9: the bit-digit path).
TEST(V4TopK, RowSelectCases) {
  SKIP_WITHOUT_GPU();
  const std::vector<int> lens = {32768, 2048, 2049, 1025, 1024, 100, 30000, 4097, 16383, 3};
  for (int K : {512, 1024, 2048})
    for (int kind : {0, 1, 2, 3}) topk_rows_case(lens, 32771, kind, K, 6, "row");
  for (int kind : {6, 7, 8, 9}) topk_rows_case(lens, 32771, kind, 1024, 6, "row");
  topk_rows_case(lens, 32771, 8, 512, 6, "row");
  // a batch of 150 (mixed lengths <= 8192) and 191 rows of 32768
  std::vector<int> mixed(150);
  for (int i = 0; i < 150; ++i) mixed[i] = 8192 - 53 * i;
  topk_rows_case(mixed, 8193, 0, 1024, 6, "row-batch");
  topk_rows_case(std::vector<int>(191, 32768), 32768, 0, 512, 6, "row-191");
}
// Rows longer than the max_len passed (20000 and 9000 with max_len 8192): those rows are selected from device memory
// (every pass reads the row); kind 6 also overflows the list (8192 entries) there.
TEST(V4TopK, RowSelectRowsLongerThanMaxLen) {
  SKIP_WITHOUT_GPU();
  for (int kind : {0, 1, 6}) topk_rows_case({20000, 8192, 9000, 5000}, 20003, kind, 1024, 6, "row-past-max-len", 8192);
}
// A few rows for memcheck / racecheck: aligned and unaligned rows, the linear digit + list path, the overflow paths
// (kind 6), all keys equal (kind 7), outliers (kind 8), the bit-digit path (kind 9: -inf logits), rows past max_len
// (device-memory path).
TEST(V4TopK, RowSelectSmallForSanitizers) {
  SKIP_WITHOUT_GPU();
  for (int kind : {0, 1, 6, 7, 8, 9}) topk_rows_case({6000, 4096, 5001, 700}, 6001, kind, 1024, 6, "row-small", 5000);
}

// The lean row select (topk_row_lean_kernel, twenty-second session, helper tk3; top-k variant 7). Host reference:
// each row's selected logits, as order-preserving keys (NaN, -inf, -0 and ties exact by bit pattern), sorted, must
// equal the K largest keys of the row (std::nth_element on the host); checked for every kind of topk_rows_case plus
// kind 10 (every 11th logit NaN: keys above +inf, the bit-digit path), and against the one-CTA radix kernel
// (variant 1) on the same rows.
namespace {
uint32_t host_ord_key(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
void gen_rows(std::vector<float>& lg, const std::vector<int>& lens, int ld, int kind) {
  const int nq = static_cast<int>(lens.size());
  lg.assign(static_cast<size_t>(nq) * ld, 0.f);
  std::mt19937_64& r = rng();
  std::uniform_real_distribution<float> u(-50.f, 50.f);
  std::uniform_int_distribution<int> di(0, 40);
  std::uniform_int_distribution<int> d10(0, 9);
  for (int i = 0; i < nq; ++i) {
    float* x = lg.data() + static_cast<size_t>(i) * ld;
    const int n = lens[i];
    for (int j = 0; j < ld; ++j)
      x[j] = kind == 1 ? static_cast<float>(di(r)) - 20.f : kind == 2 ? 1.0f + 1e-6f * di(r) : kind == 3 ? 1e-3f * j
           : kind == 6 ? (d10(r) < 7 ? 40.f : u(r)) : kind == 7 ? 3.25f : kind == 9 && j % 7 == 0 ? -INFINITY
           : kind == 10 && j % 11 == 0 ? NAN : u(r);
    if ((kind == 4 || kind == 5) && n >= 8) {
      const int ns = std::max(1, std::min(1024, n / 128));
      std::vector<char> in(n, 0);
      for (int j = 0; j < ns; ++j)
        for (int e = 0; e < 8; ++e) in[((static_cast<long>(j) * n / ns) & ~7L) + e] = 1;
      for (int j = 0; j < n; ++j)
        if ((in[j] != 0) == (kind == 4)) x[j] += 100.f;
    }
    if (kind == 8 && n > 0) {
      const int S = std::min(n, 2048);
      for (int j = 0; j < S; ++j) x[static_cast<long>(j) * n / S] += 100.f;
    }
  }
}
// Runs variant `variant` on the rows; returns idx [nq, K].
std::vector<int> run_topk(const std::vector<float>& lg, const std::vector<int>& lens, int ld, int K, int variant, int max_len) {
  const int nq = static_cast<int>(lens.size());
  DevBuf<float> dl;
  DevBuf<int> dlen, didx(static_cast<size_t>(nq) * K);
  dl.upload(lg);
  dlen.upload(lens);
  SS_CUDA(cudaMemset(didx.p, 0x7F, didx.bytes()));
  v4_set_variants(0, variant);
  v4_topk(dl.p, ld, dlen.p, nq, K, didx.p, 0, max_len);
  v4_set_variants(0, 0);
  SS_CUDA(cudaDeviceSynchronize());
  return didx.download();
}
// Sorted keys of a row's selection (distinct indices in range, -1 padding only for rows <= K), or {} on a bad row.
bool sel_keys(const float* x, int n, int K, const int* got, std::vector<uint32_t>& keys) {
  keys.clear();
  std::vector<char> seen(n, 0);
  int pad = 0;
  for (int j = 0; j < K; ++j) {
    const int v = got[j];
    if (v == -1) { ++pad; continue; }
    if (v < 0 || v >= n || seen[v]) return false;
    seen[v] = 1;
    keys.push_back(host_ord_key(x[v]));
  }
  if (pad != K - std::min(K, n)) return false;
  std::sort(keys.begin(), keys.end());
  return true;
}
// variant 7 (the lean form) or 8 (its sparse form, twenty-third session; smax: v4_topk_set_sparse_max, -1 = default)
void lean_case(const std::vector<int>& lens, int ld, int kind, int K, const char* what, int max_len = 0, bool vs_radix = true,
               int variant = 7, int smax = -1) {
  const int nq = static_cast<int>(lens.size());
  std::vector<float> lg;
  gen_rows(lg, lens, ld, kind);
  const int mx = max_len > 0 ? max_len : *std::max_element(lens.begin(), lens.end());
  v4_set_variants(0, variant);
  const std::string kernel = v4_topk_kernel_name(nq, mx, K);
  v4_set_variants(0, 0);
  if (smax >= 0) v4_topk_set_sparse_max(smax);
  const auto got = run_topk(lg, lens, ld, K, variant, mx);
  v4_topk_set_sparse_max(0);  // the default
  std::vector<int> rad;
  if (vs_radix) rad = run_topk(lg, lens, ld, K, 1, mx);
  int bad = 0, diff = 0;
  std::vector<uint32_t> a, b, want;
  for (int i = 0; i < nq; ++i) {
    const float* x = lg.data() + static_cast<size_t>(i) * ld;
    const int n = lens[i];
    if (!sel_keys(x, n, K, got.data() + static_cast<size_t>(i) * K, a)) { ++bad; continue; }
    want.resize(n);
    for (int j = 0; j < n; ++j) want[j] = host_ord_key(x[j]);
    const int take = std::min(K, n);
    std::nth_element(want.begin(), want.begin() + (n - take), want.end());
    std::vector<uint32_t> top(want.begin() + (n - take), want.end());
    std::sort(top.begin(), top.end());
    if (a != top) ++bad;
    if (vs_radix && (!sel_keys(x, n, K, rad.data() + static_cast<size_t>(i) * K, b) || a != b)) ++diff;
    if (bad + diff > 0 && bad + diff <= 3) ADD_FAILURE() << what << " kind " << kind << " K " << K << " row " << i << " n " << n;
  }
  EXPECT_EQ(bad, 0) << what << " kind " << kind << " K " << K;
  EXPECT_EQ(diff, 0) << what << " kind " << kind << " K " << K << " (vs radix)";
  EXPECT_EQ(kernel, variant == 8 ? "radix_row_sparse" : "radix_row_lean") << what;
  std::printf("[attn-test] topk lean %s K=%d rows=%d max_len=%d kind=%d smax=%d kernel %s: keys equal to the host%s\n", what, K, nq,
              mx, kind, smax, kernel.c_str(), vs_radix ? " and to radix_1cta" : "");
}
}  // namespace

// Dispatch (host only): variant 7 runs the lean kernel wherever variant 6 runs the row select; the others never.
TEST(V4TopK, LeanRowDispatch) {
  for (int v : {1, 2, 3, 4, 5, 6}) {
    v4_set_variants(0, v);
    for (int nq : {1, 133, 200, 264, 512})
      for (int len : {2048, 8192, 32768}) EXPECT_FALSE(v4_topk_uses_row_lean(nq, len, 1024)) << v;
  }
  v4_set_variants(0, 6);
  EXPECT_STREQ(v4_topk_kernel_name(200, 8192, 1024), "radix_row_smem");  // form 3 under variant 6
  v4_set_variants(0, 7);
  EXPECT_STREQ(v4_topk_variant_name(), "radix_row_lean");
  EXPECT_TRUE(v4_topk_uses_row_lean(1, 32768, 2048));
  EXPECT_TRUE(v4_topk_uses_row_lean(512, 2048, 512));
  EXPECT_STREQ(v4_topk_kernel_name(128, 8192, 1024), "radix_row_lean");
  EXPECT_FALSE(v4_topk_uses_row_lean(128, 32769, 1024));
  EXPECT_STREQ(v4_topk_kernel_name(128, 32769, 1024), "radix_1cta");
  EXPECT_STREQ(v4_topk_kernel_name(512, 65536, 1024), "threshold_filter");
  EXPECT_FALSE(v4_topk_uses_row_lean(128, 8192, 4096));
  EXPECT_FALSE(v4_topk_uses_row_lean(128, 0, 1024));
  EXPECT_FALSE(v4_topk_uses_filter(512, 8192, 1024));
  v4_set_variants(0, 0);
}
// Every kind (0-10) at k 512 / 1024 / 2048 over rows of 2048-32768 (odd ld: unaligned rows; rows <= K, just above
// K, not a multiple of 4), host reference and the radix kernel.
TEST(V4TopK, LeanRowCases) {
  SKIP_WITHOUT_GPU();
  const std::vector<int> lens = {32768, 2048, 2049, 1025, 1024, 100, 30000, 4097, 16383, 8192, 3};
  for (int K : {512, 1024, 2048})
    for (int kind = 0; kind <= 10; ++kind) lean_case(lens, 32771, kind, K, "lean");
}
// Batches 1 / 133 / 200 / 264 with rows of 2048-32768 (uniform and outliers), k 512 / 1024 / 2048.
TEST(V4TopK, LeanRowBatches) {
  SKIP_WITHOUT_GPU();
  lean_case({32768}, 32768, 0, 1024, "lean-b1");
  lean_case({32768}, 32768, 10, 2048, "lean-b1");
  std::vector<int> b133(133), b200(200), b264(264);
  for (int i = 0; i < 133; ++i) b133[i] = 32768 - 97 * i;
  for (int i = 0; i < 200; ++i) b200[i] = 8192 - 20 * i;
  for (int i = 0; i < 264; ++i) b264[i] = 2048 + 37 * i;  // 2048 .. 11779
  for (int kind : {0, 8}) {
    lean_case(b133, 32771, kind, 2048, "lean-b133");
    lean_case(b200, 8195, kind, 1024, "lean-b200");
    lean_case(b264, 11779, kind, 512, "lean-b264");
  }
  lean_case(b200, 8195, 9, 1024, "lean-b200");
  lean_case(std::vector<int>(264, 12288), 12288, 1, 1024, "lean-b264x12K");
}
// Rows longer than the max_len passed (the device-memory instance of the body), all paths.
TEST(V4TopK, LeanRowRowsLongerThanMaxLen) {
  SKIP_WITHOUT_GPU();
  for (int kind : {0, 1, 6, 8, 9, 10}) lean_case({20000, 8192, 9000, 5000}, 20003, kind, 1024, "lean-past-max-len", 8192);
}
// A few rows for memcheck / racecheck: every path (linear + warp list, linear + block list (kind 8), overflow
// (kind 6), every key equal (kind 7), bit-digit (kinds 9, 10), device-memory rows past max_len).
TEST(V4TopK, LeanRowSmallForSanitizers) {
  SKIP_WITHOUT_GPU();
  for (int kind : {0, 1, 6, 7, 8, 9, 10}) lean_case({6000, 4096, 5001, 700}, 6001, kind, 1024, "lean-small", 5000, false);
}

// The sparse form (variant 8, twenty-third session, helper tk4): sparse compaction + FFMA.RZ bins. Dispatch (host):
// variant 8 runs it wherever variants 6 / 7 run theirs; variants 1-7 never; variant 0 (the default since this
// session) in the lean region (LeanRowDefaultDispatch).
TEST(V4TopK, SparseRowDispatch) {
  for (int v : {1, 2, 3, 4, 5, 6, 7}) {
    v4_set_variants(0, v);
    for (int nq : {1, 133, 200, 264, 512})
      for (int len : {2048, 8192, 32768}) EXPECT_FALSE(v4_topk_uses_row_sparse(nq, len, 1024)) << v;
  }
  v4_set_variants(0, 8);
  EXPECT_STREQ(v4_topk_variant_name(), "radix_row_sparse");
  EXPECT_TRUE(v4_topk_uses_row_sparse(1, 32768, 2048));
  EXPECT_TRUE(v4_topk_uses_row_sparse(512, 2048, 512));
  EXPECT_FALSE(v4_topk_uses_row_lean(512, 2048, 512));
  EXPECT_STREQ(v4_topk_kernel_name(192, 8192, 1024), "radix_row_sparse");
  EXPECT_STREQ(v4_topk_kernel_name(128, 32769, 1024), "radix_1cta");
  EXPECT_STREQ(v4_topk_kernel_name(512, 65536, 1024), "threshold_filter");
  EXPECT_FALSE(v4_topk_uses_row_sparse(128, 8192, 4096));
  EXPECT_FALSE(v4_topk_uses_row_sparse(128, 0, 1024));
  v4_set_variants(0, 0);
  EXPECT_TRUE(v4_topk_uses_row_sparse(132, 32768, 1024));
  EXPECT_FALSE(v4_topk_uses_row_lean(132, 32768, 1024));
  EXPECT_FALSE(v4_topk_uses_row_sparse(133, 16384, 1024));
  EXPECT_THROW(v4_set_variants(0, 9), std::invalid_argument);
  EXPECT_THROW(v4_topk_set_sparse_max(-1), std::invalid_argument);
}
// Every kind (0-10) at k 512 / 1024 / 2048 over rows of 2048-32768 (as LeanRowCases), host reference and the radix
// kernel; the default (0: ballot ranks only), and the warp-uniform loop (bound 4: both placements; 128: the loop
// only) on kinds 0 / 1 / 8 / 9 / 10.
TEST(V4TopK, SparseRowCases) {
  SKIP_WITHOUT_GPU();
  const std::vector<int> lens = {32768, 2048, 2049, 1025, 1024, 100, 30000, 4097, 16383, 8192, 3};
  for (int K : {512, 1024, 2048})
    for (int kind = 0; kind <= 10; ++kind) lean_case(lens, 32771, kind, K, "sparse", 0, true, 8);
  for (int smax : {4, 128})
    for (int K : {512, 2048})
      for (int kind : {0, 1, 8, 9, 10}) lean_case(lens, 32771, kind, K, "sparse-smax", 0, true, 8, smax);
}
// Batches 1 / 133 / 200 / 264 / 512 with rows of 2048-32768, k 512 / 1024 / 2048.
TEST(V4TopK, SparseRowBatches) {
  SKIP_WITHOUT_GPU();
  lean_case({32768}, 32768, 0, 1024, "sparse-b1", 0, true, 8);
  lean_case({32768}, 32768, 10, 2048, "sparse-b1", 0, true, 8);
  std::vector<int> b133(133), b200(200), b264(264), b512(512);
  for (int i = 0; i < 133; ++i) b133[i] = 32768 - 97 * i;
  for (int i = 0; i < 200; ++i) b200[i] = 8192 - 20 * i;
  for (int i = 0; i < 264; ++i) b264[i] = 2048 + 37 * i;  // 2048 .. 11779
  for (int i = 0; i < 512; ++i) b512[i] = 12288 - 12 * i;  // 12288 .. 6156
  for (int kind : {0, 8}) {
    lean_case(b133, 32771, kind, 2048, "sparse-b133", 0, true, 8);
    lean_case(b200, 8195, kind, 1024, "sparse-b200", 0, true, 8);
    lean_case(b264, 11779, kind, 512, "sparse-b264", 0, true, 8);
    lean_case(b512, 12288, kind, 1024, "sparse-b512", 0, true, 8);
  }
  lean_case(b200, 8195, 9, 1024, "sparse-b200", 0, true, 8);
  lean_case(std::vector<int>(264, 12288), 12288, 1, 1024, "sparse-b264x12K", 0, true, 8);
  lean_case(std::vector<int>(512, 2048), 2048, 0, 1024, "sparse-b512x2K", 0, true, 8);
}
// Rows longer than the max_len passed (the device-memory instance of the body), all paths.
TEST(V4TopK, SparseRowRowsLongerThanMaxLen) {
  SKIP_WITHOUT_GPU();
  for (int kind : {0, 1, 6, 8, 9, 10})
    lean_case({20000, 8192, 9000, 5000}, 20003, kind, 1024, "sparse-past-max-len", 8192, true, 8);
}
// A few rows for memcheck / racecheck: every path, both placements.
TEST(V4TopK, SparseRowSmallForSanitizers) {
  SKIP_WITHOUT_GPU();
  for (int smax : {0, 4, 128})
    for (int kind : {0, 1, 6, 7, 8, 9, 10})
      lean_case({6000, 4096, 5001, 700}, 6001, kind, 1024, "sparse-small", 5000, false, 8, smax);
}

// The default's lean region (twenty-second session, host only): topk <= 2048 and rows of 2048..32768 logits at <= 132
// rows, 2048..12288 at <= 264 rows, 6144..12288 at <= 512 rows; elsewhere the seventeenth session's rule.
TEST(V4TopK, LeanRowDefaultDispatch) {
  v4_set_variants(0, 0);
  struct P { int nq, len; };
  for (const P p : {P{1, 2048}, P{1, 32768}, P{32, 8192}, P{132, 32768}, P{64, 16384}, P{133, 2048}, P{133, 12288},
                    P{191, 2048}, P{192, 2048}, P{200, 8192}, P{264, 12288}, P{265, 6144}, P{384, 8192}, P{512, 6144},
                    P{512, 12288}})
    for (int k : {512, 1024, 2048}) {
      EXPECT_TRUE(v4_topk_uses_row(p.nq, p.len, k)) << p.nq << " " << p.len << " " << k;
      EXPECT_TRUE(v4_topk_uses_row_sparse(p.nq, p.len, k)) << p.nq << " " << p.len << " " << k;
      EXPECT_FALSE(v4_topk_uses_filter(p.nq, p.len, k));
      EXPECT_STREQ(v4_topk_kernel_name(p.nq, p.len, k), "radix_row_sparse") << p.nq << " " << p.len << " " << k;
    }
  EXPECT_STREQ(v4_topk_kernel_name(1, 2047, 1024), "radix_row_sparse");   // twenty-third session: <= 132 rows from 1024
  EXPECT_STREQ(v4_topk_kernel_name(132, 1024, 512), "radix_row_sparse");
  EXPECT_STREQ(v4_topk_kernel_name(132, 1023, 512), "radix_1cta");
  EXPECT_STREQ(v4_topk_kernel_name(1, 1023, 512), "radix_1cta");
  EXPECT_STREQ(v4_topk_kernel_name(133, 2047, 1024), "radix_1cta");
  EXPECT_STREQ(v4_topk_kernel_name(192, 2047, 1024), "threshold_filter");
  EXPECT_STREQ(v4_topk_kernel_name(132, 32769, 1024), "radix_1cta");      // past the shared-memory rows
  EXPECT_STREQ(v4_topk_kernel_name(128, 49152, 1024), "threshold_filter");
  EXPECT_STREQ(v4_topk_kernel_name(133, 12289, 1024), "radix_1cta");      // one CTA per SM above 12288: two waves
  EXPECT_STREQ(v4_topk_kernel_name(191, 16384, 1024), "radix_1cta");
  EXPECT_STREQ(v4_topk_kernel_name(192, 12289, 1024), "threshold_filter");
  EXPECT_STREQ(v4_topk_kernel_name(192, 16384, 1024), "threshold_filter");
  EXPECT_STREQ(v4_topk_kernel_name(265, 6143, 1024), "threshold_filter");  // 265-512 rows below 6144: the filter
  EXPECT_STREQ(v4_topk_kernel_name(384, 4096, 1024), "threshold_filter");
  EXPECT_STREQ(v4_topk_kernel_name(512, 4192, 1024), "threshold_filter");
  EXPECT_STREQ(v4_topk_kernel_name(512, 2048, 1024), "threshold_filter");
  EXPECT_STREQ(v4_topk_kernel_name(513, 8192, 1024), "threshold_filter");
  EXPECT_STREQ(v4_topk_kernel_name(512, 12289, 1024), "threshold_filter");
  EXPECT_STREQ(v4_topk_kernel_name(128, 8192, 4096), "radix_1cta");        // topk > 2048
  EXPECT_STREQ(v4_topk_kernel_name(128, 0, 1024), "radix_1cta");           // max_len unknown
  EXPECT_STREQ(v4_topk_kernel_name(256, 0, 1024), "threshold_filter");
  v4_set_variants(0, 0);
}
// The default on rows of its lean region (device): 64 rows of 32768 (k 2048), 100 rows of 16383 down, 384 rows of
// 8192 (k 1024), 512 rows of 6144 (k 512; 4096 in tk3 call 2, before the region's 265-512 rows started at 6144),
// uniform / ties / -inf / outliers.
TEST(V4TopK, LeanRowIsTheDefault) {
  SKIP_WITHOUT_GPU();
  v4_set_variants(0, 0);
  ASSERT_STREQ(v4_topk_kernel_name(64, 32768, 2048), "radix_row_sparse");
  ASSERT_STREQ(v4_topk_kernel_name(384, 8192, 1024), "radix_row_sparse");
  ASSERT_STREQ(v4_topk_kernel_name(512, 6144, 512), "radix_row_sparse");
  std::vector<int> d100(100);
  for (int i = 0; i < 100; ++i) d100[i] = 16383 - 111 * i;
  for (int kind : {0, 1, 9}) {
    topk_rows_case(std::vector<int>(64, 32768), 32771, kind, 2048, 0, "default-lean-64");
    topk_rows_case(d100, 16383, kind, 1024, 0, "default-lean-100");
  }
  topk_rows_case(std::vector<int>(384, 8192), 8195, 0, 1024, 0, "default-lean-384");
  topk_rows_case(std::vector<int>(512, 6144), 6144, 8, 512, 0, "default-lean-512");
  // twenty-third session: <= 132 rows of 1024-2047 logits (decode ctx 4096 / 6144)
  ASSERT_STREQ(v4_topk_kernel_name(128, 1536, 512), "radix_row_sparse");
  std::vector<int> d128(128);
  for (int i = 0; i < 128; ++i) d128[i] = 1536 - 4 * i;  // 1536 .. 1028
  for (int kind : {0, 1, 8, 9}) topk_rows_case(d128, 1537, kind, 512, 0, "default-sparse-128x1536");
  topk_rows_case(std::vector<int>(132, 1024), 1024, 0, 1024, 0, "default-sparse-132x1024");
}
