// bench_moe sections: grouped expert GEMMs -- GemmShape / gemm_shapes / gshape, the W4A16 sweep
// (bench_w4a16), the cuBLAS bf16 grouped GEMM (bench_bf16_grouped) and cuBLASLt FP8 (bench_fp8).
// Part of bench_moe.cu's translation unit, not a standalone header: bench_moe.cu includes its
// section parts in their original order after the shared driver code (Ctx, time_left / want / note,
// grid / pick, timed / graph_us, make_routing, bench_ceilings); main() there runs the sections.
#pragma once

namespace {

// ---- grouped GEMMs ------------------------------------------------------------------------------
struct GemmShape {
  std::string model, matrix;
  int N, K;
};
std::vector<GemmShape> gemm_shapes(const Ctx& c) {
  std::vector<GemmShape> v = {{"K3", "w13", 2 * kK3Inter, kK3Latent},
                              {"K3", "w2", kK3Latent, kK3Inter},
                              {"DSV4-Pro", "w13", 2 * kV4ProInter, kV4ProHidden},
                              {"DSV4-Pro", "w2", kV4ProHidden, kV4ProInter},
                              {"DSV4-Flash", "w13", 2 * kV4FlashInter, kV4FlashHidden},
                              {"DSV4-Flash", "w2", kV4FlashHidden, kV4FlashInter}};
  if (c.quick) v.resize(2);
  // DeepSeek-V3's routed experts (hidden 7168, expert intermediate 2048): only when asked for by name
  // (--models DSV3), for the FP8 grids of the DSV3 scenarios and DeepGEMM's reference shapes (issue 13)
  if (c.models.count("DSV3")) {
    v.push_back({"DSV3", "w13", 2 * 2048, 7168});
    v.push_back({"DSV3", "w2", 7168, 2048});
  }
  std::vector<GemmShape> keep;
  for (const auto& s : v)
    if (want_model(c, s.model)) keep.push_back(s);
  return keep;
}
constexpr long long kMaxRows = 32768;  // bf16 / fp8 grouped sweeps (W4A16: Ctx::w4_max_rows)

json gshape(const GemmShape& s, int G, long long m, int bt = 0) {
  json j = {{"model", s.model}, {"matrix", s.matrix}, {"active_experts", G}, {"tokens_per_expert", m},
            {"rows", G * m}, {"N", s.N}, {"K", s.K}, {"skew", 0.0}};
  if (bt) j["bt"] = bt;
  return j;
}

void bench_w4a16(Ctx& c) {
  Table tab("moe_grouped_gemm_w4a16", "K3, DSV4-Pro, DSV4-Flash",
            "Grouped expert GEMM Y_e = X_e W_e^T with MXFP4 weights (E2M1, E8M0 scale per 32 K) dequantised to bf16 in "
            "registers (own wgmma kernel, W4A16 as Hopper engines run it); G experts with m tokens each; rows = G*m",
            "2*G*m*N*K", "G*(N*K/2 + N*K/32) weight bytes + 2*G*m*(K+N) activation bytes", c.gpu);
  std::mt19937_64 rng(7);
  double best = 1e30;
  int best_v = c.w4_variants.empty() ? 5 : c.w4_variants[0];
  std::map<int, double> score_by_v;
  if (c.w4_variants.size() > 1) {  // choose the fastest verified MMA issue pattern on K3 w13 and w2, G=8
   for (const GemmShape s : {GemmShape{"K3", "w13", 2 * kK3Inter, kK3Latent}, GemmShape{"K3", "w2", kK3Latent, kK3Inter}}) {
    const int G = 8;
    const size_t mb = w4a16_matrix_bytes(s.N, s.K);
    DevBuf<uint8_t> pool(mb * G * 2);
    fill_w4a16_pool(pool.p, G * 2, s.N, s.K, 11, 118, 124, c.s);
    DevBuf<bf16> x(size_t(1024) * G * s.K), y(size_t(1024) * G * s.N);
    fill_bf16(x.p, x.n, 3, 1.f, c.s);
    DevBuf<int> droff(G + 1), dtoff(G + 1), deids(2 * G);
    std::vector<int> ids(2 * G);
    std::iota(ids.begin(), ids.end(), 0);
    deids.upload(ids);
    for (int v : c.w4_variants) {
      w4a16_set_variant(v);
      double score = 0;
      for (long long m : {1ll, 8ll, 32ll, 64ll, 1024ll}) {
        const int bt = w4a16_pick_bt(double(m));
        std::vector<int> roff(G + 1), toff(G + 1);
        for (int g = 0; g <= G; ++g) { roff[g] = int(g * m); toff[g] = int(g * ((m + bt - 1) / bt)); }
        droff.upload(roff);
        dtoff.upload(toff);
        const Timing t = timed(c, [&](int i) {
          w4a16_grouped_gemm(x.p, pool.p, deids.p + (i % 2) * G, droff.p, dtoff.p, G, s.N, s.K, bt, toff[G], y.p, c.s, 1024ll * G);
        });
        json sh = gshape(s, G, m, bt);
        sh["kernel_variant"] = v;
        tab.add("w4a16_variant_cmp", sh, {{"w", "mxfp4_e2m1_e8m0_g32"}, {"a", "bf16"}, {"out", "bf16"}, {"acc", "fp32"}}, t,
                2.0 * G * m * s.N * s.K, double(G) * mb + 2.0 * G * m * (s.K + s.N));
        score += std::log(t.us_median);
        const double gus = graph_us(c, [&](int i) {
          w4a16_grouped_gemm(x.p, pool.p, deids.p + (i % 2) * G, droff.p, dtoff.p, G, s.N, s.K, bt, toff[G], y.p, c.s, 1024ll * G);
        });
        note(c, "w4a16 kernel variant " + std::to_string(v) + " " + s.matrix + " G=8 m=" + std::to_string(m) + ": " +
                    std::to_string(t.us_median) + " us (" + std::to_string(double(G) * mb / t.us_median / 1e6) +
                    " TB/s), in a graph " + std::to_string(gus) + " us (" + std::to_string(double(G) * mb / gus / 1e6) + " TB/s)");
      }
      score_by_v[v] += score;  // log-time sum over both matrices and all m
    }
   }
    for (const auto& [v, sc] : score_by_v)
      if (sc < best) { best = sc; best_v = v; }
    w4a16_set_variant(best_v);
    note(c, "w4a16 kernel variant chosen: " + std::to_string(best_v));
  }
  for (const auto& s : gemm_shapes(c)) {
    const size_t mb = w4a16_matrix_bytes(s.N, s.K);
    for (int G : c.quick ? std::vector<int>{8} : c.w4_experts) {
      if (!time_left(c)) break;
      const int sets = rotation_sets(double(G) * mb, c.gpu.l2_bytes, 16);
      const int P = G * sets;
      DevBuf<uint8_t> pool(mb * P);
      fill_w4a16_pool(pool.p, P, s.N, s.K, 11, 118, 124, c.s);
      std::vector<int> eids(P);
      std::iota(eids.begin(), eids.end(), 0);
      std::shuffle(eids.begin(), eids.end(), rng);
      DevBuf<int> deids(P);
      deids.upload(eids);
      const long long mmax = c.w4_max_rows / G;
      DevBuf<bf16> x(size_t(mmax) * G * s.K), y(size_t(mmax) * G * s.N);
      const long long xrows = mmax * G;
      fill_bf16(x.p, x.n, 3, 1.f, c.s);
      DevBuf<int> droff(G + 1), dtoff(G + 1);
      for (long long m : pick(c, grid(1, std::min(mmax, c.w4_max_m)), {1, 8, 64, 256, 1024})) {
        if (m < c.w4_min_m) continue;
        if (m > mmax || m > c.w4_max_m || !time_left(c)) continue;
        std::vector<int> bts = {w4a16_pick_bt(double(m))};
        if (c.quick || m == 16 || m == 128 || m == 1024)  // tile-width exploration rows
          for (int b : kW4A16TileWidths)
            if (b != bts[0] && b <= 2 * std::max<long long>(m, 8) && b >= std::min<long long>(m, 256) / 4) bts.push_back(b);
        for (int bt : bts) {
          std::vector<int> roff(G + 1), toff(G + 1);
          for (int g = 0; g <= G; ++g) { roff[g] = int(g * m); toff[g] = int(g * ((m + bt - 1) / bt)); }
          droff.upload(roff);
          dtoff.upload(toff);
          const int mt = toff[G];
          const Timing t = timed(c, [&](int i) {
            w4a16_grouped_gemm(x.p, pool.p, deids.p + (i % sets) * G, droff.p, dtoff.p, G, s.N, s.K, bt, mt, y.p, c.s, xrows);
          });
          const double fl = 2.0 * G * m * s.N * s.K, wb = double(G) * mb, by = wb + 2.0 * G * m * (s.K + s.N);
          json shp = gshape(s, G, m, bt);
          shp["kernel_variant"] = w4a16_kernel_for(bt, s.K, xrows, s.N, mt);  // the kernel that ran (was the set variant)
          tab.add(bt == bts[0] ? c.w4_label : c.w4_label + "_bt_alt", shp,
                  {{"w", "mxfp4_e2m1_e8m0_g32"}, {"a", "bf16"}, {"out", "bf16"}, {"acc", "fp32"}}, t, fl, by);
          if (bt == bts[0])
            c.w4_tflops[s.model + "/" + s.matrix + "/" + std::to_string(G) + "/" + std::to_string(m)] = fl / t.us_median / 1e6;
          double gus = 0;
          if (bt == bts[0] && m <= 8) {
            gus = graph_us(c, [&](int i) {
              w4a16_grouped_gemm(x.p, pool.p, deids.p + (i % sets) * G, droff.p, dtoff.p, G, s.N, s.K, bt, mt, y.p, c.s, xrows);
            });
            json sg = shp;
            sg["timing"] = "cuda_graph_replay";
            tab.add(c.w4_label + "_graph", sg, {{"w", "mxfp4_e2m1_e8m0_g32"}, {"a", "bf16"}, {"out", "bf16"}, {"acc", "fp32"}},
                    Timing{gus, gus, gus, 20}, fl, by);
          }
          if (bt == bts[0] && (m <= 64 || m >= 1024)) {
            char b[320];
            std::snprintf(b, sizeof b, "w4a16 %s %s G=%d m=%lld bt=%d: %.1f us, %.0f TFLOP/s, weights %.2f TB/s (%.0f%% of copy%s)%s",
                          s.model.c_str(), s.matrix.c_str(), G, m, bt, t.us_median, fl / t.us_median / 1e6,
                          wb / t.us_median / 1e6, 100.0 * wb / t.us_median / 1e6 / (c.hbm_tbps > 0 ? c.hbm_tbps : 4.23),
                          c.hbm_tbps > 0 ? "" : " at 4.23 TB/s",
                          gus > 0 ? (" | graph " + std::to_string(gus).substr(0, 6) + " us, " +
                                     std::to_string(wb / gus / 1e6).substr(0, 4) + " TB/s").c_str() : "");
            note(c, b);
          }
        }
      }
    }
  }
  tab.write(c.out);
}

void bench_bf16_grouped(Ctx& c) {
  Table tab("moe_grouped_gemm_bf16", "K3, DSV4-Pro, DSV4-Flash",
            "Grouped expert GEMM with bf16 weights through cublasGemmGroupedBatchedEx (one launch, host-known group sizes). "
            "Variant cublas_dense_same_flops: one cublasGemmEx with M = G*m (the prefill target's reference)",
            "2*G*m*N*K", "G*2*N*K weight bytes + 2*G*m*(K+N) (dense reference: 2*N*K + 2*G*m*(K+N))", c.gpu);
  for (const auto& s : gemm_shapes(c)) {
    const size_t wmat = size_t(s.N) * s.K;
    for (int G : c.quick ? std::vector<int>{8} : std::vector<int>{8, 32}) {
      if (!time_left(c)) break;
      const int sets = rotation_sets(double(G) * wmat * 2, c.gpu.l2_bytes, 8);
      const int P = G * sets;
      DevBuf<bf16> pool(wmat * P);
      fill_bf16(pool.p, pool.n, 5, 0.05f, c.s);
      const long long mmax = kMaxRows / G;
      DevBuf<bf16> x(size_t(mmax) * G * s.K), y(size_t(mmax) * G * s.N);
      fill_bf16(x.p, x.n, 6, 1.f, c.s);
      for (long long m : pick(c, grid(1, mmax), {1, 8, 64, 256, 1024})) {
        if (m > mmax || !time_left(c)) continue;
        std::vector<GroupedBf16Plan> plans;
        for (int r = 0; r < sets; ++r) {
          std::vector<const bf16*> X, W;
          std::vector<bf16*> Y;
          std::vector<int> mv(G, int(m));
          for (int g = 0; g < G; ++g) {
            X.push_back(x.p + size_t(g) * m * s.K);
            W.push_back(pool.p + size_t(r * G + g) * wmat);
            Y.push_back(y.p + size_t(g) * m * s.N);
          }
          plans.push_back(make_grouped_bf16(X, W, Y, mv, s.N, s.K));
        }
        const Timing t = timed(c, [&](int i) { run_grouped_bf16(c.h, plans[i % sets], c.s); });
        for (auto& p : plans) free_grouped_bf16(p);
        const double fl = 2.0 * G * m * s.N * s.K;
        tab.add("cublas_grouped", gshape(s, G, m), {{"w", "bf16"}, {"a", "bf16"}, {"out", "bf16"}, {"acc", "fp32"}}, t, fl,
                double(G) * wmat * 2 + 2.0 * G * m * (s.K + s.N));
        if (m >= 256) {
          char b[300];
          const Timing d = timed(c, [&](int i) {
            cublas_gemm_bf16(c.h, x.p, pool.p + size_t(i % P) * wmat, y.p, int(G * m), s.N, s.K, false, 0.f, c.s);
          });
          tab.add("cublas_dense_same_flops", gshape(s, G, m), {{"w", "bf16"}, {"a", "bf16"}, {"out", "bf16"}, {"acc", "fp32"}},
                  d, fl, double(wmat) * 2 + 2.0 * G * m * (s.K + s.N));
          if (m >= 1024) {
            const std::string key = s.model + "/" + s.matrix + "/" + std::to_string(G) + "/" + std::to_string(m);
            const double w4 = c.w4_tflops.count(key) ? c.w4_tflops[key] : 0.0;
            std::snprintf(b, sizeof b, "prefill %s %s G=%d m=%lld: dense cublas %.0f TFLOP/s; grouped cublas bf16 %.0f; "
                          "w4a16 %.0f = %.0f%% of dense",
                          s.model.c_str(), s.matrix.c_str(), G, m, fl / d.us_median / 1e6, fl / t.us_median / 1e6, w4,
                          100.0 * w4 / (fl / d.us_median / 1e6));
            note(c, b);
          }
        }
      }
    }
  }
  tab.write(c.out);
}

void bench_fp8(Ctx& c) {
  Table tab("moe_grouped_gemm_fp8", "K3, DSV4-Pro, DSV4-Flash",
            "Grouped expert GEMM in FP8 e4m3 (weights and activations) through cuBLASLt, one matmul per expert (no FP8 "
            "grouped API on Hopper in cuBLAS 13.0). Variants per_tensor (fp32 scalar scales) and block128 (1x128 activation, "
            "128x128 weight scales, DeepSeek style) where cuBLASLt offers it. Activation quantisation not included",
            "2*G*m*N*K", "G*N*K weight bytes + G*m*K + 2*G*m*N", c.gpu);
  for (const auto& s : gemm_shapes(c)) {
    const size_t wmat = size_t(s.N) * s.K;
    for (int G : c.quick ? std::vector<int>{8} : c.fp8_experts) {
      if (!time_left(c)) break;
      const int sets = rotation_sets(double(G) * wmat, c.gpu.l2_bytes, G < 8 ? 32 : 8);
      const int P = G * sets;
      DevBuf<uint8_t> pool(wmat * P);
      fill_bytes(pool.p, pool.n, 8, 0x20, 0x4F, c.s);  // positive/moderate e4m3 codes, no NaN
      const long long mmax = std::min(kMaxRows / G, c.fp8_max_m);
      DevBuf<uint8_t> x(size_t(mmax) * G * s.K);
      fill_bytes(x.p, x.n, 9, 0x20, 0x4F, c.s);
      DevBuf<bf16> y(size_t(mmax) * G * s.N);
      DevBuf<float> xs(size_t(mmax) * G * s.K / 128 + 1), ws(size_t(P) * (s.N / 128) * (s.K / 128) + 1);
      fill_f32(xs.p, xs.n, 1, 0.5f, 1.f, c.s);
      fill_f32(ws.p, ws.n, 2, 0.5f, 1.f, c.s);
      for (int block = 0; block < 2; ++block) {
        bool supported = true;
        for (long long m : pick(c, grid(1, mmax), {1, 8, 64, 256, 1024})) {
          if (m > mmax || !time_left(c) || !supported) continue;
          auto run = [&](int i, int M) {
            const int r = i % sets;
            bool ok = true;
            for (int g = 0; g < G && ok; ++g) {
              const int e = r * G + g;
              ok = cublaslt_fp8_gemm(c.lt, x.p + size_t(g) * m * s.K, pool.p + size_t(e) * wmat, y.p + size_t(g) * m * s.N,
                                     M, s.N, s.K, block == 1, block ? xs.p + size_t(g) * m * s.K / 128 : xs.p,
                                     block ? ws.p + size_t(e) * (s.N / 128) * (s.K / 128) : ws.p + e, c.s);
            }
            return ok;
          };
          int M = int(m);
          if (!run(0, M)) {
            M = int((m + 15) / 16 * 16);  // pad the token count to 16 rows, as engines do
            if (!run(0, M)) {
              note(c, std::string("fp8 ") + (block ? "block128" : "per_tensor") + " not offered by cuBLASLt for " + s.model +
                          " " + s.matrix + " m=" + std::to_string(m));
              continue;
            }
          }
          SS_CUDA(cudaStreamSynchronize(c.s));
          const Timing t = timed(c, [&](int i) { run(i, M); });
          const double fl = 2.0 * G * m * s.N * s.K;
          json shp = gshape(s, G, m);
          shp["M_run"] = M;
          tab.add(block ? "cublaslt_block128" : "cublaslt_per_tensor", shp,
                  {{"w", "e4m3"}, {"a", "e4m3"}, {"out", "bf16"}, {"acc", "fp32"}}, t, fl,
                  double(G) * wmat + double(G) * m * s.K + 2.0 * G * m * s.N);
        }
      }
    }
  }
  tab.write(c.out);
}

}  // namespace
