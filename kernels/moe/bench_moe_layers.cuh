// bench_moe sections: W4A16 comparisons (bench_w4cmp, bench_w4pf) and the whole MoE layers
// (LayerCfg, bench_layers).
// Part of bench_moe.cu's translation unit, not a standalone header: bench_moe.cu includes its
// section parts in their original order after the shared driver code (Ctx, time_left / want / note,
// grid / pick, timed / graph_us, make_routing, bench_ceilings); main() there runs the sections.
#pragma once

namespace {

// ---- MoE layers -----------------------------------------------------------------------------------
struct LayerCfg {
  std::string name, model;
  int D, E, k, I;
  bool k3;
  float scale;
};

/// --only w4pdl (NOTES.md §25, w4m): the W4A16 decode GEMMs with and without programmatic dependent launch (--w4-variants,
/// e.g. 20,32,34; 32 / 34 = 20's kernels in their PDL forms), twice with the order alternating, at K3 / DSV4-Flash w13 and
/// w2, G 8 and 32, m 1-16 (--w4-max-m, --models restrict): per call over 20 back-to-back calls (rotating weight sets of
/// >= 2x L2, one routing) timed with stream events around the 20 ("stream") and in a CUDA graph of them ("graph"):
/// (i) repeated w13 calls, (ii) repeated w2 calls, (iii) the chain w13 -> w2 (w2 reads w13's output buffer; per pair).
/// Printed lines "w4pdl ..." (the log is the record; no table rows).
void bench_w4pdl(Ctx& c) {
  struct Md { std::string model; int D, I; };
  const std::vector<Md> mds = {{"K3", kK3Latent, kK3Inter}, {"DSV4-Flash", kV4FlashHidden, kV4FlashInter}};
  const std::vector<int> Gs = {8, 32};
  const std::vector<long long> ms = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  std::vector<int> vs = c.w4_variants;
  if (vs.empty()) vs = {20, 32};
  const int n = 20;
  auto stream_us = [&](const std::function<void(int)>& f) {
    cudaEvent_t a, b;
    SS_CUDA(cudaEventCreate(&a));
    SS_CUDA(cudaEventCreate(&b));
    for (int i = 0; i < n; ++i) f(i);  // warm
    std::vector<double> v;
    for (int r = 0; r < 7; ++r) {
      SS_CUDA(cudaEventRecord(a, c.s));
      for (int i = 0; i < n; ++i) f(i);
      SS_CUDA(cudaEventRecord(b, c.s));
      SS_CUDA(cudaEventSynchronize(b));
      float ms_ = 0;
      SS_CUDA(cudaEventElapsedTime(&ms_, a, b));
      if (r >= 2) v.push_back(1000.0 * ms_ / n);
    }
    SS_CUDA(cudaEventDestroy(a));
    SS_CUDA(cudaEventDestroy(b));
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::mt19937_64 rng(7);
  for (int rep = 0; rep < 2; ++rep)
    for (const auto& md : mds) {
      if (!want_model(c, md.model)) continue;
      for (int G : Gs) {
        if (!time_left(c)) break;
        const int N1 = 2 * md.I, K1 = md.D, N2 = md.D, K2 = md.I;
        const size_t mb1 = w4a16_matrix_bytes(N1, K1), mb2 = w4a16_matrix_bytes(N2, K2);
        const int sets = rotation_sets(double(G) * (mb1 + mb2), c.gpu.l2_bytes, 16);
        const int P = G * sets;
        DevBuf<uint8_t> pool1(mb1 * P), pool2(mb2 * P);
        fill_w4a16_pool(pool1.p, P, N1, K1, 11, 118, 124, c.s);
        fill_w4a16_pool(pool2.p, P, N2, K2, 12, 118, 124, c.s);
        std::vector<int> eids(P);
        std::iota(eids.begin(), eids.end(), 0);
        std::shuffle(eids.begin(), eids.end(), rng);
        DevBuf<int> deids(P);
        deids.upload(eids);
        const long long xrows = ms.back() * G;
        DevBuf<bf16> x(size_t(xrows) * K1), h(size_t(xrows) * N1), y(size_t(xrows) * N2);
        fill_bf16(x.p, x.n, 3, 1.f, c.s);
        fill_bf16(h.p, h.n, 4, 1.f, c.s);
        DevBuf<int> droff(G + 1), dtoff(G + 1);
        for (long long m : ms) {
          if (m > c.w4_max_m || m < c.w4_min_m) continue;
          const int bt = w4a16_pick_bt(double(m));
          std::vector<int> roff(G + 1), toff(G + 1);
          for (int g = 0; g <= G; ++g) { roff[g] = int(g * m); toff[g] = int(g * ((m + bt - 1) / bt)); }
          droff.upload(roff);
          dtoff.upload(toff);
          SS_CUDA(cudaDeviceSynchronize());
          const int mt = toff[G];
          for (int vi = 0; vi < int(vs.size()); ++vi) {
            const int v = vs[(vi + rep) % vs.size()];
            w4a16_set_variant(v);
            auto f13 = [&](int i) {
              w4a16_grouped_gemm(x.p, pool1.p, deids.p + (i % sets) * G, droff.p, dtoff.p, G, N1, K1, bt, mt, h.p, c.s, xrows);
            };
            auto f2 = [&](int i) {
              w4a16_grouped_gemm(h.p, pool2.p, deids.p + (i % sets) * G, droff.p, dtoff.p, G, N2, K2, bt, mt, y.p, c.s, xrows);
            };
            auto fc = [&](int i) { f13(i); f2(i); };
            const double s13 = stream_us(f13), g13 = graph_us(c, f13, n);
            const double s2 = stream_us(f2), g2 = graph_us(c, f2, n);
            const double sc = stream_us(fc), gc = graph_us(c, fc, n);
            const double tb13 = double(G) * mb1 / 1e6, tb2 = double(G) * mb2 / 1e6;
            std::printf("w4pdl rep=%d %s G=%d m=%lld bt=%d v=%d k13=%d k2=%d: w13 stream %.2f us (%.3f TB/s) graph %.2f (%.3f) | "
                        "w2 stream %.2f (%.3f) graph %.2f (%.3f) | chain stream %.2f graph %.2f\n",
                        rep, md.model.c_str(), G, m, bt, v, w4a16_kernel_for(bt, K1, xrows, N1, mt),
                        w4a16_kernel_for(bt, K2, xrows, N2, mt), s13, tb13 / s13, g13, tb13 / g13, s2, tb2 / s2, g2,
                        tb2 / g2, sc, gc);
          }
        }
        std::fflush(stdout);
      }
    }
  w4a16_set_variant(vs[0]);
}

/// --only w4cmp: W4A16 kernel variants (--w4-variants, e.g. 5,7) interleaved, twice, at the decode
/// shapes of NOTES.md §8 (K3 w13/w2 G 8/32, DSV4-Pro w13 G 32, DSV4-Flash w2 G 8/32), m = 1..16 (9-11, 13-15 since
/// §20), 17, 20, 24, 28, 32 (17 / 20 / 28 since §21), 48, 64 and 256, 2048 tokens per expert (--models, --w4-min-m and --w4-max-m restrict shapes and m): event-timed median and
/// per-call time in a 20-call graph. Printed lines
/// "w4cmp ..." (the log is the record; no table rows).
void bench_w4cmp(Ctx& c) {
  struct Sh { GemmShape s; int G; };
  const std::vector<Sh> shapes = {{{"K3", "w13", 2 * kK3Inter, kK3Latent}, 8},   {{"K3", "w13", 2 * kK3Inter, kK3Latent}, 32},
                                  {{"K3", "w2", kK3Latent, kK3Inter}, 8},        {{"K3", "w2", kK3Latent, kK3Inter}, 32},
                                  {{"DSV4-Pro", "w13", 2 * kV4ProInter, kV4ProHidden}, 32},
                                  {{"DSV4-Flash", "w2", kV4FlashHidden, kV4FlashInter}, 8},
                                  {{"DSV4-Flash", "w2", kV4FlashHidden, kV4FlashInter}, 32}};
  const std::vector<long long> ms = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 20, 24, 28, 32, 48, 64, 256, 2048};  // 256, 2048: prefill tiles (variant 0)
  std::vector<int> vs = c.w4_variants;
  if (vs.empty()) vs = {5};
  std::map<std::tuple<int, long long, int>, std::vector<std::pair<double, double>>> res;  // (shape, m, v) -> (event, graph)
  std::mt19937_64 rng(7);
  const int reps = 2;
  for (int rep = 0; rep < reps; ++rep)
    for (int si = 0; si < int(shapes.size()); ++si) {
      if (!time_left(c)) break;
      const auto& [s, G] = shapes[si];
      if (!want_model(c, s.model)) continue;  // --models (w4f: K3 only)
      const size_t mb = w4a16_matrix_bytes(s.N, s.K);
      const int sets = rotation_sets(double(G) * mb, c.gpu.l2_bytes, 16);
      const int P = G * sets;
      DevBuf<uint8_t> pool(mb * P);
      fill_w4a16_pool(pool.p, P, s.N, s.K, 11, 118, 124, c.s);
      std::vector<int> eids(P);
      std::iota(eids.begin(), eids.end(), 0);
      std::shuffle(eids.begin(), eids.end(), rng);
      DevBuf<int> deids(P);
      deids.upload(eids);
      DevBuf<bf16> x(size_t(ms.back()) * G * s.K), y(size_t(ms.back()) * G * s.N);
      const long long xrows = ms.back() * G;
      fill_bf16(x.p, x.n, 3, 1.f, c.s);
      DevBuf<int> droff(G + 1), dtoff(G + 1);
      for (long long m : ms) {
        if (m > c.w4_max_m || m < c.w4_min_m) continue;  // --w4-max-m (w4f: decode sizes only), --w4-min-m (w4h: m 9-16)
        const int bt = w4a16_pick_bt(double(m));
        std::vector<int> roff(G + 1), toff(G + 1);
        for (int g = 0; g <= G; ++g) { roff[g] = int(g * m); toff[g] = int(g * ((m + bt - 1) / bt)); }
        droff.upload(roff);
        dtoff.upload(toff);
        const int mt = toff[G];
        for (int vi = 0; vi < int(vs.size()); ++vi) {
          const int v = vs[(vi + rep) % vs.size()];  // alternate the order between repetitions
          w4a16_set_variant(v);
          auto f = [&](int i) {
            w4a16_grouped_gemm(x.p, pool.p, deids.p + (i % sets) * G, droff.p, dtoff.p, G, s.N, s.K, bt, mt, y.p, c.s, xrows);
          };
          const Timing t = timed(c, f);
          const double gus = graph_us(c, f);
          res[{si, m, v}].push_back({t.us_median, gus});
          std::printf("w4cmp rep=%d %s %s G=%d m=%lld bt=%d v=%d: event %.2f us (%.3f TB/s), graph %.2f us (%.3f TB/s)\n", rep,
                      s.model.c_str(), s.matrix.c_str(), G, m, bt, v, t.us_median, double(G) * mb / t.us_median / 1e6, gus,
                      double(G) * mb / gus / 1e6);
        }
      }
      std::fflush(stdout);
    }
  w4a16_set_variant(vs[0]);
  // summary: per shape and m, min over repetitions (event / graph) of each variant, ratio to the first
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v.empty() ? 0.0 : v[(v.size() - 1) / 2]; };
  for (int si = 0; si < int(shapes.size()); ++si) {
    const auto& [s, G] = shapes[si];
    const double wb = double(G) * w4a16_matrix_bytes(s.N, s.K);
    std::vector<double> r18, r_rest, g18, r916, r1732;
    for (long long m : ms) {
      std::string line = "w4cmp " + s.model + " " + s.matrix + " G=" + std::to_string(G) + " m=" + std::to_string(m) + ":";
      double base_e = 0, base_g = 0;
      for (int v : vs) {
        const auto it = res.find({si, m, v});
        if (it == res.end()) continue;
        double be = 1e30, bg = 1e30;
        for (auto [e, g] : it->second) { be = std::min(be, e); bg = std::min(bg, g); }
        char b[200];
        std::snprintf(b, sizeof b, " v%d %.2f us %.2f TB/s (graph %.2f us %.2f TB/s)", v, be, wb / be / 1e6, bg, wb / bg / 1e6);
        line += b;
        if (v == vs[0]) { base_e = be; base_g = bg; }
        else if (base_e > 0) {
          std::snprintf(b, sizeof b, " [t/t0 %.3f, graph %.3f]", be / base_e, bg / base_g);
          line += b;
          (m <= 8 ? r18 : r_rest).push_back(be / base_e);
          if (m >= 9 && m <= 16 && v == vs.back()) r916.push_back(be / base_e);
          if (m >= 17 && m <= 32 && v == vs.back()) r1732.push_back(be / base_e);
          if (m <= 8) g18.push_back(bg / base_g);
        }
      }
      note(c, line);
    }
    if (!r916.empty()) {
      char b[200];
      std::snprintf(b, sizeof b, "w4cmp %s %s G=%d: median t(v%d)/t(v%d) m=9-16 event %.3f max %.3f", s.model.c_str(),
                    s.matrix.c_str(), G, vs.back(), vs[0], med(r916), *std::max_element(r916.begin(), r916.end()));
      note(c, b);
    }
    if (!r1732.empty()) {
      char b[200];
      std::snprintf(b, sizeof b, "w4cmp %s %s G=%d: median t(v%d)/t(v%d) m=17-32 event %.3f max %.3f", s.model.c_str(),
                    s.matrix.c_str(), G, vs.back(), vs[0], med(r1732), *std::max_element(r1732.begin(), r1732.end()));
      note(c, b);
    }
    if (!r18.empty()) {
      char b[240];
      std::snprintf(b, sizeof b, "w4cmp %s %s G=%d: median t(v%d)/t(v%d) m=1-8 event %.3f graph %.3f; m=9-2048 event median %.3f max %.3f",
                    s.model.c_str(), s.matrix.c_str(), G, vs.back(), vs[0], med(r18), med(g18), med(r_rest),
                    r_rest.empty() ? 0.0 : *std::max_element(r_rest.begin(), r_rest.end()));
      note(c, b);
    }
  }
}

/// --only w4pf: W4A16 prefill comparison (issue 13): variants (--w4-variants, e.g. 0,8) interleaved with
/// cuBLAS dense bf16 at the same FLOPs (one cublasGemmEx, M = G*m, bf16 weights), twice, at G = 8 and
/// m = 128..4096 tokens per expert (bt 128 at m = 128, else 256) for K3 w13 / w2, DSV4-Pro w13 / w2 and DSV4-Flash w13 / w2.
/// Lines "w4pf ..." (min over repetitions; the log is the record, no table rows).
void bench_w4pf(Ctx& c) {
  std::vector<GemmShape> shapes = {{"K3", "w13", 2 * kK3Inter, kK3Latent}, {"K3", "w2", kK3Latent, kK3Inter},
                                   {"DSV4-Pro", "w13", 2 * kV4ProInter, kV4ProHidden}, {"DSV4-Pro", "w2", kV4ProHidden, kV4ProInter},
                                   {"DSV4-Flash", "w13", 2 * kV4FlashInter, kV4FlashHidden},
                                   {"DSV4-Flash", "w2", kV4FlashHidden, kV4FlashInter}};
  std::vector<GemmShape> keep;
  for (const auto& s : shapes)
    if (want_model(c, s.model)) keep.push_back(s);
  const std::vector<long long> ms = {128, 256, 512, 1024, 2048, 4096};  // 128: bt 128; else bt 256
  std::vector<int> vs = c.w4_variants;
  if (vs.empty()) vs = {0};
  const int G = 8;
  std::map<std::tuple<int, long long, int>, double> best;  // (shape, m, v) -> min us; v = -1: cuBLAS dense
  for (int rep = 0; rep < 2; ++rep)
    for (int si = 0; si < int(keep.size()); ++si) {
      if (!time_left(c)) break;
      const auto& s = keep[si];
      const size_t mb = w4a16_matrix_bytes(s.N, s.K);
      const int sets = rotation_sets(double(G) * mb, c.gpu.l2_bytes, 16);
      DevBuf<uint8_t> pool(mb * G * sets);
      fill_w4a16_pool(pool.p, G * sets, s.N, s.K, 11, 118, 124, c.s);
      std::vector<int> eids(G * sets);
      std::iota(eids.begin(), eids.end(), 0);
      DevBuf<int> deids(G * sets);
      deids.upload(eids);
      const long long xrows = ms.back() * G;
      DevBuf<bf16> x(size_t(xrows) * s.K), y(size_t(xrows) * s.N);
      DevBuf<bf16> wd(size_t(s.N) * s.K * 2);
      fill_bf16(x.p, x.n, 3, 1.f, c.s);
      fill_bf16(wd.p, wd.n, 5, 0.05f, c.s);
      DevBuf<int> droff(G + 1), dtoff(G + 1);
      for (long long m : ms) {
        const int bt = w4a16_pick_bt(double(m));
        std::vector<int> roff(G + 1), toff(G + 1);
        for (int g = 0; g <= G; ++g) { roff[g] = int(g * m); toff[g] = int(g * ((m + bt - 1) / bt)); }
        droff.upload(roff);
        dtoff.upload(toff);
        const double fl = 2.0 * G * m * s.N * s.K;
        for (int vi = 0; vi <= int(vs.size()); ++vi) {
          const int v = vi == int(vs.size()) ? -1 : vs[(vi + rep) % vs.size()];
          Timing t;
          if (v < 0) {
            t = timed(c, [&](int i) {
              cublas_gemm_bf16(c.h, x.p, wd.p + size_t(i % 2) * s.N * s.K, y.p, int(G * m), s.N, s.K, false, 0.f, c.s);
            });
          } else {
            w4a16_set_variant(v);
            t = timed(c, [&](int i) {
              w4a16_grouped_gemm(x.p, pool.p, deids.p + (i % sets) * G, droff.p, dtoff.p, G, s.N, s.K, bt, toff[G], y.p, c.s,
                                 xrows);
            });
          }
          auto& b = best[{si, m, v}];
          b = b > 0 ? std::min(b, t.us_median) : t.us_median;
          std::printf("w4pf rep=%d %s %s G=%d m=%lld %s: %.1f us, %.0f TFLOP/s\n", rep, s.model.c_str(), s.matrix.c_str(), G, m,
                      v < 0 ? "cublas_dense" : ("v" + std::to_string(v)).c_str(), t.us_median, fl / t.us_median / 1e6);
        }
      }
      std::fflush(stdout);
    }
  w4a16_set_variant(vs[0]);
  std::map<int, std::vector<double>> ratios;
  for (int si = 0; si < int(keep.size()); ++si)
    for (long long m : ms) {
      const auto& s = keep[si];
      const double fl = 2.0 * G * m * s.N * s.K;
      if (!best.count({si, m, -1})) continue;
      const double d = best[{si, m, -1}];
      std::string line = "w4pf " + s.model + " " + s.matrix + " G=8 m=" + std::to_string(m) + ":";
      char b[200];
      std::snprintf(b, sizeof b, " cublas_dense %.1f us %.0f TF/s;", d, fl / d / 1e6);
      line += b;
      for (int v : vs) {
        if (!best.count({si, m, v})) continue;
        const double u = best[{si, m, v}];
        std::snprintf(b, sizeof b, " v%d %.1f us %.0f TF/s (%.3f of dense);", v, u, fl / u / 1e6, d / u);
        line += b;
        if (m >= 1024) ratios[v].push_back(d / u);
      }
      note(c, line);
    }
  for (auto& [v, r] : ratios) {
    std::sort(r.begin(), r.end());
    char b[200];
    std::snprintf(b, sizeof b, "w4pf v%d: ratio to cuBLAS dense at m >= 1024: median %.3f, min %.3f, max %.3f (%zu points)", v,
                  r[(r.size() - 1) / 2], r.front(), r.back(), r.size());
    note(c, b);
  }
}

void bench_layers(Ctx& c) {
  std::vector<LayerCfg> cfgs = {{"moe_layer_k3", "K3", kK3Hidden, kK3Experts, kK3TopK, kK3Inter, true, kK3RouteScale},
                                {"moe_layer_dsv4", "DSV4-Pro", kV4ProHidden, kV4ProExperts, kV4TopK, kV4ProInter, false,
                                 kV4ProRouteScale},
                                {"moe_layer_dsv4", "DSV4-Flash", kV4FlashHidden, kV4FlashExperts, kV4TopK, kV4FlashInter,
                                 false, kV4FlashRouteScale}};
  std::map<std::string, std::unique_ptr<Table>> tabs;
  tabs["moe_layer_k3"] = std::make_unique<Table>(
      "moe_layer_k3", "K3",
      "Whole K3 MoE layer on one GPU holding all 896 experts, one stream, timed as a CUDA graph replay: router "
      "(cuBLAS gate GEMM + sigmoid top-16), latent down-projection 7168->3584 (cuBLAS), permute, W4A16 w13, SiTU, W4A16 "
      "w2, combine fused with the latent RMSNorm, up-projection 3584->7168 (cuBLAS), shared experts (BF16 cuBLAS, SiTU "
      "GLU 6144) added. Routing given (uniform or Zipf over experts); the router still runs",
      "2*T*7168*896 + 2*2*T*7168*3584 + 2*T*16*(6144*3584 + 3584*3072) + 2*T*(7168*12288 + 6144*7168)",
      "active_experts*(MXFP4 bytes of w13+w2) + bf16 bytes of gate, down, up, shared weights + 4*T*7168", c.gpu);
  tabs["moe_layer_dsv4"] = std::make_unique<Table>(
      "moe_layer_dsv4", "DSV4-Pro, DSV4-Flash",
      "Whole DSV4 MoE layer on one GPU holding all routed experts, one stream, CUDA graph replay: router (cuBLAS gate GEMM "
      "+ sqrt(softplus) top-6), permute, W4A16 w13, clamped SwiGLU, W4A16 w2, combine, shared expert (BF16 cuBLAS; the "
      "checkpoint ships it FP8) added. Routing given (uniform or Zipf); the router still runs",
      "2*T*D*E + 2*T*6*3*D*I + 2*T*3*D*I", "active_experts*(MXFP4 bytes of w13+w2) + bf16 gate and shared + 4*T*D", c.gpu);
  std::mt19937_64 rng(99);
  for (const auto& L : cfgs) {
    if (!want(c, L.name) || !time_left(c)) continue;
    const long long Tmax = c.quick ? 4096 : 8192;
    const int N13 = 2 * L.I, K13 = L.k3 ? kK3Latent : L.D, N2 = K13, K2 = L.I;
    const size_t mb13 = w4a16_matrix_bytes(N13, K13), mb2 = w4a16_matrix_bytes(N2, K2);
    DevBuf<uint8_t> p13(mb13 * L.E), p2(mb2 * L.E);
    fill_w4a16_pool(p13.p, L.E, N13, K13, 21, 118, 124, c.s);
    fill_w4a16_pool(p2.p, L.E, N2, K2, 22, 118, 124, c.s);
    const int SI = L.k3 ? kK3SharedInter : L.I;  // shared GLU width
    DevBuf<bf16> gate(size_t(L.E) * L.D), down(L.k3 ? size_t(kK3Latent) * L.D : 1), up(L.k3 ? size_t(L.D) * kK3Latent : 1),
        gam(kK3Latent), sh13(size_t(2) * SI * L.D), sh2(size_t(L.D) * SI);
    fill_bf16(gate.p, gate.n, 31, 0.05f, c.s);
    fill_bf16(down.p, down.n, 32, 0.02f, c.s);
    fill_bf16(up.p, up.n, 33, 0.02f, c.s);
    fill_bf16(gam.p, gam.n, 34, 1.f, c.s);
    fill_bf16(sh13.p, sh13.n, 35, 0.02f, c.s);
    fill_bf16(sh2.p, sh2.n, 36, 0.02f, c.s);
    DevBuf<float> bias(L.E), logits(size_t(Tmax) * L.E), rw(size_t(Tmax) * L.k);
    fill_f32(bias.p, bias.n, 37, -0.1f, 0.1f, c.s);
    DevBuf<int> rid(size_t(Tmax) * L.k);
    const long long RM = Tmax * L.k;
    DevBuf<bf16> x(size_t(Tmax) * L.D), lat(L.k3 ? size_t(Tmax) * kK3Latent : 1), xp(size_t(RM) * K13), h(size_t(RM) * N13),
        a(size_t(RM) * L.I), yp(size_t(RM) * N2), comb(size_t(Tmax) * K13), out(size_t(Tmax) * L.D),
        shh(size_t(Tmax) * 2 * SI), sha(size_t(Tmax) * SI);
    fill_bf16(x.p, x.n, 38, 1.f, c.s);
    Dispatch disp = alloc_dispatch(L.E, int(RM));
    const double w_dense = 2.0 * (gate.n + (L.k3 ? down.n + up.n : 0) + sh13.n + sh2.n);
    const std::vector<double> skews = c.quick ? std::vector<double>{0.0, 1.0} : std::vector<double>{0.0, 0.5, 1.0, 1.5};
    for (long long T : pick(c, grid(1, Tmax), {1, 16, 64, 512, 4096})) {
      for (double skew : skews) {
        if (!time_left(c)) break;
        const int R = T <= 64 ? 3 : 1;  // routing sets rotated at decode sizes so weights are not L2-resident
        std::vector<DevBuf<int>> ids;
        std::vector<DevBuf<float>> ws;
        int active = 0, maxc = 0;
        for (int r = 0; r < R; ++r) {
          const Routing rt = make_routing(rng, int(T), L.E, L.k, skew, L.scale);
          ids.emplace_back(rt.ids.size());
          ids.back().upload(rt.ids);
          ws.emplace_back(rt.w.size());
          ws.back().upload(rt.w);
          active += rt.active;
          maxc = std::max(maxc, rt.max_count);
        }
        active /= R;
        const double E_act = L.E * (1.0 - std::pow(1.0 - double(L.k) / L.E, double(T)));
        const int bt = w4a16_pick_bt(double(T) * L.k / std::max(E_act, 1.0));
        const int mt = w4a16_max_tiles(T * L.k, L.E, bt);
        const int rows = int(T * L.k);
        auto run = [&](int r) {
          cublas_gemm_bf16(c.h, x.p, gate.p, logits.p, int(T), L.E, L.D, true, 0.f, c.s);
          router_topk(L.k3 ? ScoreFn::kSigmoid : ScoreFn::kSqrtSoftplus, logits.p, bias.p, int(T), L.E, L.k, L.scale, rid.p,
                      rw.p, c.s);
          const bf16* xin = x.p;
          if (L.k3) {
            cublas_gemm_bf16(c.h, x.p, down.p, lat.p, int(T), kK3Latent, L.D, false, 0.f, c.s);
            xin = lat.p;
          }
          moe_permute(xin, ids[r].p, int(T), L.k, K13, bt, disp, xp.p, c.s);
          w4a16_grouped_gemm(xp.p, p13.p, nullptr, disp.row_offsets, disp.tile_offsets, L.E, N13, K13, bt, mt, h.p, c.s, rows);
          if (L.k3) act_situ(h.p, rows, L.I, a.p, c.s);
          else act_swiglu(h.p, rows, L.I, kV4SwigluLimit, a.p, c.s);
          w4a16_grouped_gemm(a.p, p2.p, nullptr, disp.row_offsets, disp.tile_offsets, L.E, N2, K2, bt, mt, yp.p, c.s, rows);
          if (L.k3) {
            moe_combine(yp.p, disp.pos, ws[r].p, int(T), L.k, K13, gam.p, 1e-6f, comb.p, c.s);
            cublas_gemm_bf16(c.h, comb.p, up.p, out.p, int(T), L.D, kK3Latent, false, 0.f, c.s);
          } else {
            moe_combine(yp.p, disp.pos, ws[r].p, int(T), L.k, L.D, nullptr, 0.f, out.p, c.s);
          }
          cublas_gemm_bf16(c.h, x.p, sh13.p, shh.p, int(T), 2 * SI, L.D, false, 0.f, c.s);
          if (L.k3) act_situ(shh.p, int(T), SI, sha.p, c.s);
          else act_swiglu(shh.p, int(T), SI, kV4SwigluLimit, sha.p, c.s);
          cublas_gemm_bf16(c.h, sha.p, sh2.p, out.p, int(T), L.D, SI, false, 1.f, c.s);
        };
        // graphs, one per routing set
        for (int r = 0; r < R; ++r) run(r);
        SS_CUDA(cudaStreamSynchronize(c.s));
        std::vector<cudaGraphExec_t> ge(R);
        for (int r = 0; r < R; ++r) {
          cudaGraph_t g;
          SS_CUDA(cudaStreamBeginCapture(c.s, cudaStreamCaptureModeThreadLocal));
          run(r);
          SS_CUDA(cudaStreamEndCapture(c.s, &g));
          SS_CUDA(cudaGraphInstantiate(&ge[r], g, 0));
          SS_CUDA(cudaGraphDestroy(g));
        }
        const Timing t = timed(c, [&](int i) { SS_CUDA(cudaGraphLaunch(ge[i % R], c.s)); });
        for (auto g : ge) cudaGraphExecDestroy(g);
        const double fl_routed = 2.0 * T * L.k * (double(N13) * K13 + double(N2) * K2);
        const double fl = 2.0 * T * L.D * L.E + fl_routed + 2.0 * T * 3.0 * L.D * SI +
                          (L.k3 ? 2.0 * 2 * T * L.D * kK3Latent : 0.0);
        const double by = double(active) * (mb13 + mb2) + w_dense + 4.0 * T * L.D;
        json shape = {{"model", L.model}, {"tokens", T}, {"experts", L.E}, {"top_k", L.k}, {"skew", skew},
                      {"active_experts", active}, {"max_tokens_per_expert", maxc}, {"hidden", L.D}, {"inter", L.I},
                      {"bt", bt}};
        shape["kernel_variant"] = w4a16_variant();
        tabs[L.name]->add(c.w4_variants.empty() ? "graph_w4a16_UNVERIFIED" : "graph_w4a16", shape,
                          {{"routed", "mxfp4_w4a16"}, {"shared", "bf16"}, {"act", "bf16"}, {"acc", "fp32"}}, t, fl, by);
        if (skew == 0.0 || skew == 1.5) {
          char b[256];
          std::snprintf(b, sizeof b, "layer %s T=%lld skew=%.1f: %.1f us (active %d, max/expert %d, bt %d)", L.model.c_str(),
                        T, skew, t.us_median, active, maxc, bt);
          note(c, b);
        }
      }
    }
    free_dispatch(disp);
  }
  for (auto& [n, t] : tabs)
    if (want(c, n)) t->write(c.out);
}

}  // namespace
