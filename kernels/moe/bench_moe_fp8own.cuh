// bench_moe section: the own FP8 block-scaled grouped GEMM (bench_fp8_own) with its buffers,
// timers and bench form codes (Fp8Buffers, time_fp8_*, fp8_form / fp8_apply_form; main's --fp8-probe uses them).
// Part of bench_moe.cu's translation unit, not a standalone header: bench_moe.cu includes its
// section parts in their original order after the shared driver code (Ctx, time_left / want / note,
// grid / pick, timed / graph_us, make_routing, bench_ceilings); main() there runs the sections.
#pragma once

namespace {

// ---- own FP8 block-scaled grouped GEMM (gemm_fp8.cu; variant 0 in gemm_fp8_ws.cu, tokens-as-M in gemm_fp8_tm.cu) ----
/// One FP8 problem set on the device: a pool of P expert matrices (e4m3, random moderate codes) with
/// 128x128 block scales, activations for `rows` rows with 1x128 scales (K-block-major, ld = rows).
struct Fp8Buffers {
  int N, K, P;
  long long rows;
  DevBuf<uint8_t> w, x;
  DevBuf<float> ws, xs;
  DevBuf<bf16> y;
  Fp8Buffers(Ctx& c, int N_, int K_, int P_, long long rows_)
      : N(N_), K(K_), P(P_), rows(rows_), w(size_t(P_) * N_ * K_), x(size_t(rows_) * K_),
        ws(size_t(P_) * (N_ / 128) * (K_ / 128)), xs(size_t(rows_) * (K_ / 128)), y(size_t(rows_) * N_) {
    fill_bytes(w.p, w.n, 8, 0x20, 0x4F, c.s);  // positive/moderate e4m3 codes, no NaN (as the cuBLASLt sweep)
    fill_bytes(x.p, x.n, 9, 0x20, 0x4F, c.s);
    fill_f32(ws.p, ws.n, 1, 0.5f, 1.f, c.s);
    fill_f32(xs.p, xs.n, 2, 0.5f, 1.f, c.s);
  }
};

/// Times the masked layout: G groups, counts on the device, x padded to max_m rows per group.
Timing time_fp8_masked(Ctx& c, Fp8Buffers& b, const int* d_eids, int sets, const int* d_mm, int G, int max_m, int bt) {
  return timed(c, [&](int i) {
    fp8_grouped_gemm_masked(b.x.p, b.xs.p, int(b.rows), b.w.p, b.ws.p, b.P, d_eids + (i % sets) * G, d_mm, G, max_m, b.N,
                            b.K, bt, b.y.p, c.s);
  });
}
Timing time_fp8_contig(Ctx& c, Fp8Buffers& b, const int* d_eids, int sets, const std::vector<int>& cnt, int bt) {
  const int G = int(cnt.size());
  std::vector<int> roff(G + 1, 0), toff(G + 1, 0);
  for (int g = 0; g < G; ++g) { roff[g + 1] = roff[g] + cnt[g]; toff[g + 1] = toff[g] + (cnt[g] + bt - 1) / bt; }
  DevBuf<int> droff(G + 1), dtoff(G + 1);
  droff.upload(roff);
  dtoff.upload(toff);
  return timed(c, [&](int i) {
    fp8_grouped_gemm_contiguous(b.x.p, b.rows, b.xs.p, int(b.rows), b.w.p, b.ws.p, b.P, d_eids + (i % sets) * G, droff.p,
                                dtoff.p, G, b.N, b.K, bt, toff[G], b.y.p, c.s);
  });
}

/// Bench form codes (row field kernel_variant): 0 = kernel variant 0 one CTA per tile, 1 = variant 1
/// (cp.async), 2 = variant 0 persistent, 4 = variant 2 (tokens-as-M 128x128, pipelined promotion),
/// 5 = variant 3 (tokens-as-M 128x256), 6 / 7 = variants 4 / 5 (4 / 5 in 2-CTA clusters sharing the
/// token tile by TMA multicast), 8 / 9 = variants 2 / 3 persistent (one CTA per SM). Forms >= 4 run
/// the tokens-as-M kernel at bt 128 only.
const char* fp8_form(int v) {
  switch (v) {
    case 1: return "cp.async all threads, CTA barrier per k-block";
    case 2: return "warp-specialised TMA, persistent";
    case 4: return "tokens-as-M 128x128, two temporaries, promotion overlapped (gemm_fp8_tm.cu)";
    case 5: return "tokens-as-M 128x256, one temporary (gemm_fp8_tm.cu)";
    case 6: return "tokens-as-M 128x128 pipelined, 2-CTA cluster, token tile multicast (gemm_fp8_tm.cu)";
    case 7: return "tokens-as-M 128x256, 2-CTA cluster, token tile multicast (gemm_fp8_tm.cu)";
    case 8: return "tokens-as-M 128x128 pipelined, persistent (gemm_fp8_tm.cu)";
    case 9: return "tokens-as-M 128x256, persistent (gemm_fp8_tm.cu)";
    default: return "warp-specialised TMA, one CTA per tile";
  }
}
void fp8_apply_form(int v) {
  fp8_set_variant(v == 1 ? 1 : v >= 8 ? v - 6 : v >= 4 ? v - 2 : 0);
  fp8_set_persistent(v == 2 || v >= 8);
}

/// Per-expert cuBLASLt block-scaled FP8 matmuls over the same buffers (the library reference of the
/// reference points): expert g's m rows at x + g*m*K, its scales at xs + g*m*K/128.
Timing time_fp8_lt_per_expert(Ctx& c, Fp8Buffers& b, int G, int m, int sets, bool* ok) {
  auto run = [&](int i) {
    bool good = true;
    for (int g = 0; g < G && good; ++g) {
      const int e = (i % sets) * G + g;
      good = cublaslt_fp8_gemm(c.lt, b.x.p + size_t(g) * m * b.K, b.w.p + size_t(e) * b.N * b.K, b.y.p + size_t(g) * m * b.N,
                               m, b.N, b.K, true, b.xs.p + size_t(g) * m * b.K / 128,
                               b.ws.p + size_t(e) * (b.N / 128) * (b.K / 128), c.s);
    }
    return good;
  };
  *ok = run(0);
  if (!*ok) return Timing{};
  SS_CUDA(cudaStreamSynchronize(c.s));
  return timed(c, [&](int i) { run(i); });
}

void bench_fp8_own(Ctx& c) {
  const std::string dir = c.out + "/fp8own";
  const json dt = {{"w", "e4m3_block128x128"}, {"a", "e4m3_block1x128"}, {"out", "bf16"}, {"acc", "fp32"}};
  const double hbm = c.hbm_tbps > 0 ? c.hbm_tbps : 4.26;
  std::mt19937_64 rng(13);
  // -- reference points of issue 13 (DeepGEMM's published shapes, DeepSeek-V3 decode) --
  Table rt("moe_fp8_reference_points", "DeepSeek-V3 (DeepGEMM shapes)",
           "Own FP8 block-scaled grouped GEMM (gemm_fp8.cu) at the reference shapes of issue 13: DeepGEMM's masked "
           "(G x m, N x K) and contiguous points, and DeepSeek-V3 decode with all 256 experts on one GPU (uniform top-8 "
           "routing of T tokens, masked layout, max_m = largest count). Bytes: touched experts' weights + activations. "
           "Row fp8_dense_ceiling: cuBLASLt e4m3 per-tensor 8192^3",
           "2*rows*N*K", "touched experts * N*K + rows*K + 2*rows*N", c.gpu);
  {  // FP8 dense ceiling
    const int M = 8192;
    DevBuf<uint8_t> a(size_t(M) * M), bb(size_t(M) * M);
    DevBuf<bf16> d(size_t(M) * M);
    DevBuf<float> one(1);
    fill_bytes(a.p, a.n, 3, 0x20, 0x4F, c.s);
    fill_bytes(bb.p, bb.n, 4, 0x20, 0x4F, c.s);
    fill_f32(one.p, 1, 5, 1.f, 1.f, c.s);
    if (cublaslt_fp8_gemm(c.lt, a.p, bb.p, d.p, M, M, M, false, one.p, one.p, c.s)) {
      const Timing t = timed(c, [&](int) { cublaslt_fp8_gemm(c.lt, a.p, bb.p, d.p, M, M, M, false, one.p, one.p, c.s); });
      rt.add("fp8_dense_ceiling", {{"M", M}, {"N", M}, {"K", M}}, {{"a", "e4m3"}, {"w", "e4m3"}, {"out", "bf16"}}, t,
             2.0 * M * M * M, 3.0 * M * M);
      note(c, "ceiling cublasLt fp8 8192^3: " + std::to_string(2.0 * M * M * M / t.us_median / 1e6) + " TFLOP/s");
    }
  }
  std::map<int, double> big_score;
  struct NK { const char* name; int N, K; };
  const NK dg[] = {{"w13_like", 4096, 7168}, {"w2_like", 7168, 2048}};
  for (const auto& s : dg) {
    if (!time_left(c)) break;
    const int P = 8 * 3;  // rotation over 3 sets of 8 experts (>= 3x L2 at both shapes)
    Fp8Buffers b(c, s.N, s.K, P, 32768);
    std::vector<int> eids(P);
    std::iota(eids.begin(), eids.end(), 0);
    DevBuf<int> deids(P);
    deids.upload(eids);
    for (auto [G, m] : std::vector<std::pair<int, int>>{{1, 1024}, {2, 512}, {4, 256}, {8, 64}, {8, 8}}) {
      std::vector<int> mm(G, m);
      DevBuf<int> dmm(G);
      dmm.upload(mm);
      for (int v : {0, 4, 5, 6, 7, 9})  // bench form codes (fp8_form)
        for (int bt : v >= 4 ? std::vector<int>{128} : std::vector<int>{fp8_pick_bt(m), 64, 192, 256}) {
          if ((bt == 64 && m <= 64) || (bt >= 192 && m < bt)) continue;
          if (v >= 4 && m <= 64) continue;
          fp8_apply_form(v);
          const Timing t = time_fp8_masked(c, b, deids.p, std::max(1, std::min(8, P / G)), dmm.p, G, m, bt);
          const double fl = 2.0 * G * m * s.N * s.K, wb = double(G) * s.N * s.K;
          rt.add("own_masked", {{"model", "DeepGEMM"}, {"matrix", s.name}, {"active_experts", G}, {"tokens_per_expert", m},
                                {"rows", G * m}, {"N", s.N}, {"K", s.K}, {"skew", 0.0}},
                 dt, t, fl, wb + double(G) * m * (s.K + 2.0 * s.N), {{"bt", bt}, {"kernel_variant", v}, {"kernel_form", fp8_form(v)}});
          char buf[300];
          std::snprintf(buf, sizeof buf, "fp8 own v%d masked %dx%d N=%d K=%d bt=%d: %.1f us, %.0f TFLOP/s, weights %.0f GB/s (%.0f%% of copy)",
                        v, G, m, s.N, s.K, bt, t.us_median, fl / t.us_median / 1e6, wb / t.us_median / 1e3,
                        100.0 * wb / t.us_median / 1e6 / hbm);
          note(c, buf);
        }
      if (m >= 128) {  // masked m rows per expert == contiguous: the per-expert library loop
        bool ok = false;
        const Timing t = time_fp8_lt_per_expert(c, b, G, m, std::max(1, std::min(8, P / G)), &ok);
        const double fl = 2.0 * G * m * s.N * s.K, wb = double(G) * s.N * s.K;
        if (ok) {
          rt.add("cublaslt_block128_per_expert", {{"model", "DeepGEMM"}, {"matrix", s.name}, {"active_experts", G},
                                                  {"tokens_per_expert", m}, {"rows", G * m}, {"N", s.N}, {"K", s.K}, {"skew", 0.0}},
                 dt, t, fl, wb + double(G) * m * (s.K + 2.0 * s.N));
          char buf[300];
          std::snprintf(buf, sizeof buf, "fp8 cublasLt per-expert %dx%d N=%d K=%d: %.1f us, %.0f TFLOP/s, weights %.0f GB/s",
                        G, m, s.N, s.K, t.us_median, fl / t.us_median / 1e6, wb / t.us_median / 1e3);
          note(c, buf);
        }
      }
    }
    for (auto [G, m] : std::vector<std::pair<int, int>>{{8, 4096}, {4, 8192}, {8, 2048}, {8, 1024}, {8, 512}, {8, 256}, {8, 128}}) {
      if (!time_left(c)) break;
      for (auto [v, bt] : std::vector<std::pair<int, int>>{{0, 256}, {4, 128}, {5, 128}, {6, 128}, {7, 128}, {9, 128}}) {
        if (bt > m) continue;
        fp8_apply_form(v);
        const Timing t = time_fp8_contig(c, b, deids.p, std::min(3, P / G), std::vector<int>(G, m), bt);
        const double fl = 2.0 * G * m * s.N * s.K;
        rt.add("own_contiguous", {{"model", "DeepGEMM"}, {"matrix", s.name}, {"active_experts", G}, {"tokens_per_expert", m},
                                  {"rows", G * m}, {"N", s.N}, {"K", s.K}, {"skew", 0.0}},
               dt, t, fl, double(G) * s.N * s.K + double(G) * m * (s.K + 2.0 * s.N), {{"bt", bt}, {"kernel_variant", v}, {"kernel_form", fp8_form(v)}});
        if (G == 8 && m >= 512) big_score[v * 1000 + bt] += std::log(t.us_median);
        char buf[300];
        std::snprintf(buf, sizeof buf, "fp8 own v%d contiguous %dx%d N=%d K=%d bt=%d: %.1f us, %.0f TFLOP/s", v, G, m, s.N,
                      s.K, bt, t.us_median, fl / t.us_median / 1e6);
        note(c, buf);
      }
    }
  }
  // The sweep's form: --fp8-variant (bench form code) unless -1 (default): then the form with the
  // smallest log-time sum over the contiguous G = 8, m >= 512 points of both shapes; bt_big is the
  // width the sweep gives variant 0 above 128 rows (kept for the faster-of comparison).
  int bt_big = 256;
  if (c.fp8_variant < 0) {
    int best = 256;  // key v*1000+bt
    for (const auto& [k, sc] : big_score)
      if (!big_score.count(best) || sc < big_score[best]) best = k;
    c.fp8_variant = best / 1000;
    if (best < 1000) bt_big = best;
  }
  fp8_apply_form(c.fp8_variant);
  note(c, "fp8 own: sweep uses bench form " + std::to_string(c.fp8_variant) + " (" + fp8_form(c.fp8_variant) +
              "), variant-0 bt " + std::to_string(bt_big) + " above 128 rows per expert");
  // DeepSeek-V3 decode: 256 experts on one GPU, T tokens routed uniformly top-8, masked layout.
  for (const auto& s : dg) {
    if (!time_left(c)) break;
    const int E = 256, k = 8;
    for (int T : {128, 512}) {
      Routing r = make_routing(rng, T, E, k, 0.0, 1.f);
      std::vector<int> cnt(E, 0);
      for (int id : r.ids) cnt[id]++;
      int touched = 0, mx = 0;
      for (int v : cnt) { touched += v > 0; mx = std::max(mx, v); }
      Fp8Buffers b(c, s.N, s.K, E, (long long)E * mx);
      DevBuf<int> deids(E), dmm(E);
      std::vector<int> eids(E);
      std::iota(eids.begin(), eids.end(), 0);
      deids.upload(eids);
      dmm.upload(cnt);
      const int bt = fp8_pick_bt(mx);
      const Timing t = time_fp8_masked(c, b, deids.p, 1, dmm.p, E, mx, bt);
      const double fl = 2.0 * T * k * s.N * s.K, wb = double(touched) * s.N * s.K;
      rt.add("own_masked", {{"model", "DSV3-decode"}, {"matrix", s.name}, {"active_experts", touched}, {"tokens", T},
                            {"rows", T * k}, {"max_m", mx}, {"N", s.N}, {"K", s.K}, {"skew", 0.0}},
             dt, t, fl, wb + double(T) * k * (s.K + 2.0 * s.N), {{"bt", bt}});
      char buf[300];
      std::snprintf(buf, sizeof buf, "fp8 own DSV3 decode T=%d %s: %d experts touched, max_m %d, bt %d: %.1f us, weights %.2f TB/s (%.0f%% of copy)",
                    T, s.name, touched, mx, bt, t.us_median, wb / t.us_median / 1e6, 100.0 * wb / t.us_median / 1e6 / hbm);
      note(c, buf);
    }
  }
  rt.write(dir);

  // -- the sweep over the committed table's grid (same shape fields) --
  Table tab("moe_grouped_gemm_fp8", "K3, DSV4-Pro, DSV4-Flash",
            "Grouped expert GEMM in FP8 e4m3, DeepSeek-style block scales (1x128 activation, 128x128 weight), bf16 out, "
            "own wgmma kernels (gemm_fp8.cu variant 0, gemm_fp8_tm.cu tokens-as-M), one launch for all experts; with a "
            "tokens-as-M sweep form each point keeps the faster of it and variant 0 (row field kernel_variant: bench form "
            "that ran), the slower in own_masked_alt / own_contiguous_alt. Variant own_masked: masked layout (decode; "
            "per-expert counts on the device, x padded to max_m = m rows per expert); own_contiguous: contiguous layout "
            "(prefill; rows of all experts back to back, tile offsets on the device). Activation quantisation not included",
            "2*G*m*N*K", "G*N*K weight bytes + G*m*K + 2*G*m*N", c.gpu);
  for (const auto& s : gemm_shapes(c)) {
    const size_t wmat = size_t(s.N) * s.K;
    for (int G : c.quick ? std::vector<int>{8} : c.fp8_experts) {
      if (!time_left(c)) break;
      const int sets = rotation_sets(double(G) * wmat, c.gpu.l2_bytes, G < 8 ? 32 : 8);
      const int P = G * sets;
      const long long mmax = std::min(kMaxRows / G, c.fp8_max_m);
      Fp8Buffers b(c, s.N, s.K, P, mmax * G);
      std::vector<int> eids(P);
      std::iota(eids.begin(), eids.end(), 0);
      std::shuffle(eids.begin(), eids.end(), rng);
      DevBuf<int> deids(P), dmm(G);
      deids.upload(eids);
      for (long long m : pick(c, grid(1, mmax), {1, 8, 64, 256, 1024})) {
        if (m > mmax || !time_left(c)) continue;
        const int bt = fp8_pick_bt(double(m));  // bt_big (fastest at 8 x 4096) is reported, the rule decides
        dmm.upload(std::vector<int>(G, int(m)));
        const double fl = 2.0 * G * m * s.N * s.K, wb = double(G) * wmat, by = wb + double(G) * m * s.K + 2.0 * G * m * s.N;
        Timing tm = time_fp8_masked(c, b, deids.p, sets, dmm.p, G, int(m), bt);
        Timing tc = time_fp8_contig(c, b, deids.p, sets, std::vector<int>(G, int(m)), bt);
        const int ran = c.fp8_variant >= 4 && bt != 128 ? 0 : c.fp8_variant;  // forms >= 4 run variant 0 at bt != 128
        int vm = ran, vc = ran, btm = bt, btc = bt;
        if (c.fp8_variant >= 4 && m > 64) {
          // faster of the tokens-as-M form and variant 0 (its own bt rule) per point and layout; the
          // slower one goes to own_masked_alt / own_contiguous_alt
          fp8_apply_form(0);
          const int bt0 = fp8_pick_bt(double(m));
          const Timing tm0 = time_fp8_masked(c, b, deids.p, sets, dmm.p, G, int(m), bt0);
          const Timing tc0 = time_fp8_contig(c, b, deids.p, sets, std::vector<int>(G, int(m)), bt0);
          fp8_apply_form(c.fp8_variant);
          Timing am = tm0, ac = tc0;
          int avm = 0, avc = 0, abm = bt0, abc = bt0;
          if (tm0.us_median < tm.us_median) { std::swap(am, tm); std::swap(avm, vm); std::swap(abm, btm); }
          if (tc0.us_median < tc.us_median) { std::swap(ac, tc); std::swap(avc, vc); std::swap(abc, btc); }
          tab.add("own_masked_alt", gshape(s, G, m), dt, am, fl, by, {{"bt", abm}, {"kernel_variant", avm}, {"kernel_form", fp8_form(avm)}});
          tab.add("own_contiguous_alt", gshape(s, G, m), dt, ac, fl, by, {{"bt", abc}, {"kernel_variant", avc}, {"kernel_form", fp8_form(avc)}});
        }
        tab.add("own_masked", gshape(s, G, m), dt, tm, fl, by, {{"bt", btm}, {"kernel_variant", vm}, {"kernel_form", fp8_form(vm)}});
        tab.add("own_contiguous", gshape(s, G, m), dt, tc, fl, by, {{"bt", btc}, {"kernel_variant", vc}, {"kernel_form", fp8_form(vc)}});
        if (m == 1 || m == 8 || m == 64 || m == 256 || m >= 1024) {
          char buf[320];
          std::snprintf(buf, sizeof buf, "fp8 own %s %s G=%d m=%lld: masked %.1f us (%.0f TFLOP/s, weights %.2f TB/s = %.0f%% of copy), "
                        "contiguous %.1f us (%.0f TFLOP/s)",
                        s.model.c_str(), s.matrix.c_str(), G, m, tm.us_median, fl / tm.us_median / 1e6, wb / tm.us_median / 1e6,
                        100.0 * wb / tm.us_median / 1e6 / hbm, tc.us_median, fl / tc.us_median / 1e6);
          note(c, buf);
        }
      }
    }
  }
  tab.write(dir);
}

}  // namespace
