// bench_moe sections: routers (bench_routers), permute / combine (bench_dispatch), activations,
// latent projections, shared experts and dense FFN (bench_act, bench_dense), DSV4 mHC (bench_mhc).
// Part of bench_moe.cu's translation unit, not a standalone header: bench_moe.cu includes its
// section parts in their original order after the shared driver code (Ctx, time_left / want / note,
// grid / pick, timed / graph_us, make_routing, bench_ceilings); main() there runs the sections.
#pragma once

namespace {

// ---- routers ------------------------------------------------------------------------------------
void bench_routers(Ctx& c) {
  struct R { std::string op, model; ScoreFn fn; int D, E, k; float scale; };
  std::vector<R> rs = {{"moe_router_k3", "K3", ScoreFn::kSigmoid, kK3Hidden, kK3Experts, kK3TopK, kK3RouteScale},
                       {"moe_router_dsv4", "DSV4-Pro", ScoreFn::kSqrtSoftplus, kV4ProHidden, kV4ProExperts, kV4TopK,
                        kV4ProRouteScale},
                       {"moe_router_dsv4", "DSV4-Flash", ScoreFn::kSqrtSoftplus, kV4FlashHidden, kV4FlashExperts, kV4TopK,
                        kV4FlashRouteScale}};
  std::map<std::string, std::unique_ptr<Table>> tabs;
  tabs["moe_router_k3"] = std::make_unique<Table>(
      "moe_router_k3", "K3",
      "K3 router: variant topk = own kernel (sigmoid, + correction bias, top-16 of 896, renormalise) on fp32 logits; "
      "variant gemm_topk = cuBLAS bf16 gate GEMM [T,7168]x[7168,896] -> fp32 logits, then topk",
      "topk: ~10*T*E; gemm_topk: 2*T*D*E + topk", "topk: 4*T*E + 8*T*k + 4*E; gemm_topk: 2*E*D + 2*T*D + 8*T*E + 8*T*k",
      c.gpu);
  tabs["moe_router_dsv4"] = std::make_unique<Table>(
      "moe_router_dsv4", "DSV4-Pro, DSV4-Flash",
      "DSV4 router: topk = sqrt(softplus) + bias, top-6, normalised x route scale; gemm_topk adds the cuBLAS gate GEMM; "
      "hash = tid2eid lookup (first 3 layers) with weights from the gathered logits",
      "topk: ~10*T*E; gemm_topk: 2*T*D*E + topk", "as moe_router_k3; hash: 4*T + 4*T*k*2 + 4*T*k (gathered logits)", c.gpu);
  for (const auto& r : rs) {
    if (!want(c, r.op)) continue;
    const long long Tmax = 16384;
    const int vocab = 129280;
    const int sets_w = rotation_sets(2.0 * r.E * r.D, c.gpu.l2_bytes, 16);
    DevBuf<bf16> gw(size_t(sets_w) * r.E * r.D), x(size_t(Tmax) * r.D);
    fill_bf16(gw.p, gw.n, 41, 0.05f, c.s);
    fill_bf16(x.p, x.n, 42, 1.f, c.s);
    const int sets_l = 8;
    DevBuf<float> lg(size_t(sets_l) * Tmax * r.E), bias(r.E), w(size_t(Tmax) * r.k);
    fill_f32(lg.p, lg.n, 43, -4.f, 4.f, c.s);
    fill_f32(bias.p, bias.n, 44, -0.3f, 0.3f, c.s);
    DevBuf<int> ids(size_t(Tmax) * r.k), tok(Tmax), t2e(size_t(vocab) * r.k);
    {
      std::mt19937_64 rng(5);
      std::vector<int> tk(Tmax), map(size_t(vocab) * r.k);
      for (auto& v : tk) v = int(rng() % vocab);
      for (int v = 0; v < vocab; ++v)
        for (int j = 0; j < r.k; ++j) map[size_t(v) * r.k + j] = int((v * 7 + j * 37) % r.E);
      tok.upload(tk);
      t2e.upload(map);
    }
    for (long long T : pick(c, grid(1, Tmax), {1, 64, 1024, 16384})) {
      if (!time_left(c)) break;
      const int sl = std::min<int>(sets_l, rotation_sets(4.0 * T * r.E, c.gpu.l2_bytes, sets_l));
      json shape = {{"model", r.model}, {"tokens", T}, {"experts", r.E}, {"top_k", r.k}, {"hidden", r.D}};
      const Timing t1 = timed(c, [&](int i) {
        router_topk(r.fn, lg.p + size_t(i % sl) * Tmax * r.E, bias.p, int(T), r.E, r.k, r.scale, ids.p, w.p, c.s);
      });
      tabs[r.op]->add("topk", shape, {{"logits", "fp32"}, {"weights", "fp32"}}, t1, 10.0 * T * r.E,
                      4.0 * T * r.E + 8.0 * T * r.k + 4.0 * r.E);
      const Timing t2 = timed(c, [&](int i) {
        cublas_gemm_bf16(c.h, x.p, gw.p + size_t(i % sets_w) * r.E * r.D, lg.p, int(T), r.E, r.D, true, 0.f, c.s);
        router_topk(r.fn, lg.p, bias.p, int(T), r.E, r.k, r.scale, ids.p, w.p, c.s);
      });
      tabs[r.op]->add("gemm_topk", shape, {{"x", "bf16"}, {"gate", "bf16"}, {"logits", "fp32"}}, t2,
                      2.0 * T * r.D * r.E + 10.0 * T * r.E, 2.0 * r.E * r.D + 2.0 * T * r.D + 8.0 * T * r.E + 8.0 * T * r.k);
      if (r.op == "moe_router_dsv4") {
        const Timing t3 = timed(c, [&](int i) {
          router_hash(lg.p + size_t(i % sl) * Tmax * r.E, tok.p, t2e.p, int(T), r.E, r.k, r.scale, ids.p, w.p, c.s);
        });
        tabs[r.op]->add("hash", shape, {{"logits", "fp32"}, {"tid2eid", "int32"}}, t3, 4.0 * T * r.k,
                        4.0 * T + 12.0 * T * r.k);
      }
    }
  }
  for (auto& [n, t] : tabs)
    if (want(c, n)) t->write(c.out);
}

// ---- permute / combine -----------------------------------------------------------------------------
void bench_dispatch(Ctx& c) {
  Table tp("moe_permute", "K3, DSV4-Pro, DSV4-Flash",
           "Token permutation, one fused launch (kernels/moe/dispatch.cu permute_fused_kernel): every CTA histograms the "
           "ids and scans them (row and GEMM-tile offsets), then copies its token chunk / column split to the k "
           "expert-contiguous rows (token-ordered, deterministic). Variant permute_3launch = the previous memset + "
           "histogram + scan + scatter form (not a fit input). Uniform random routing. D = 3584 for K3 (latent "
           "dispatch), hidden for DSV4",
           "0", "2*T*D + 2*T*k*D + 12*T*k", c.gpu);
  Table tc("moe_combine", "K3, DSV4-Pro, DSV4-Flash",
           "Combine = weighted sum of the k expert outputs per token, written as a gather (deterministic, fp32 accumulate, "
           "bf16 out), one launch: CTAs of 128 16-byte columns of one token (dispatch.cu combine_split_kernel). Variant "
           "rmsnorm_fused adds K3's LatentMoE RMSNorm over the combined latent (one CTA per token)",
           "2*T*k*D (+ ~4*T*D for the norm)", "2*T*k*D + 2*T*D + 8*T*k", c.gpu);
  struct M { std::string model; int D, E, k; };
  std::vector<M> ms = {{"K3", kK3Latent, kK3Experts, kK3TopK}, {"DSV4-Pro", kV4ProHidden, kV4ProExperts, kV4TopK},
                       {"DSV4-Flash", kV4FlashHidden, kV4FlashExperts, kV4TopK}};
  std::mt19937_64 rng(3);
  for (const auto& m : ms) {
    const long long Tmax = 16384;
    DevBuf<bf16> x(size_t(Tmax) * m.D), xp(size_t(Tmax) * m.k * m.D), out(size_t(Tmax) * m.D), gam(m.D);
    fill_bf16(x.p, x.n, 1, 1.f, c.s);
    fill_bf16(xp.p, xp.n, 2, 1.f, c.s);
    fill_bf16(gam.p, gam.n, 3, 1.f, c.s);
    DevBuf<float> w(size_t(Tmax) * m.k);
    fill_f32(w.p, w.n, 4, 0.f, 0.2f, c.s);
    Dispatch d = alloc_dispatch(m.E, int(Tmax * m.k));
    for (long long T : pick(c, grid(1, Tmax), {1, 64, 1024, 16384})) {
      if (!time_left(c)) break;
      const Routing rt = make_routing(rng, int(T), m.E, m.k, 0.0, 1.f);
      DevBuf<int> ids(rt.ids.size());
      ids.upload(rt.ids);
      json shape = {{"model", m.model}, {"tokens", T}, {"experts", m.E}, {"top_k", m.k}, {"D", m.D},
                    {"active_experts", rt.active}, {"skew", 0.0}};
      const Timing t = timed(c, [&](int) { moe_permute(x.p, ids.p, int(T), m.k, m.D, 16, d, xp.p, c.s); });
      tp.add("permute", shape, {{"x", "bf16"}}, t, 0, 2.0 * T * m.D + 2.0 * T * m.k * m.D + 12.0 * T * m.k);
      const Timing t0 = timed(c, [&](int) { moe_permute_3launch(x.p, ids.p, int(T), m.k, m.D, 16, d, xp.p, c.s); });
      tp.add("permute_3launch", shape, {{"x", "bf16"}}, t0, 0, 2.0 * T * m.D + 2.0 * T * m.k * m.D + 12.0 * T * m.k);
      moe_permute(x.p, ids.p, int(T), m.k, m.D, 16, d, xp.p, c.s);  // pos for the combine below
      if (T == 1 || T == 8 || T == 64 || T == 1024 || T == 16384) {
        char nb[256];
        std::snprintf(nb, sizeof nb, "dispatch %s T=%lld: permute %.1f us (%.2f TB/s; 3-launch %.1f us)",
                      m.model.c_str(), T, t.us_median, (2.0 * T * m.D + 2.0 * T * m.k * m.D) / t.us_median / 1e6,
                      t0.us_median);
        note(c, nb);
      }
      const Timing t2 = timed(c, [&](int) { moe_combine(xp.p, d.pos, w.p, int(T), m.k, m.D, nullptr, 0.f, out.p, c.s); });
      tc.add("combine", shape, {{"y", "bf16"}, {"w", "fp32"}, {"out", "bf16"}}, t2, 2.0 * T * m.k * m.D,
             2.0 * T * m.k * m.D + 2.0 * T * m.D + 8.0 * T * m.k);
      double gp = 0, gc = 0;
      if (T <= 64) {  // decode sizes: per-call time inside a CUDA graph (rows not used by the fit)
        gp = graph_us(c, [&](int) { moe_permute(x.p, ids.p, int(T), m.k, m.D, 16, d, xp.p, c.s); });
        gc = graph_us(c, [&](int) { moe_combine(xp.p, d.pos, w.p, int(T), m.k, m.D, nullptr, 0.f, out.p, c.s); });
        const Timing tg{gp, gp, gp, 20}, tg2{gc, gc, gc, 20};
        json sg = shape;
        sg["timing"] = "cuda_graph_replay";
        tp.add("permute_graph", sg, {{"x", "bf16"}}, tg, 0, 2.0 * T * m.D + 2.0 * T * m.k * m.D + 12.0 * T * m.k);
        tc.add("combine_graph", sg, {{"y", "bf16"}, {"w", "fp32"}, {"out", "bf16"}}, tg2, 2.0 * T * m.k * m.D,
               2.0 * T * m.k * m.D + 2.0 * T * m.D + 8.0 * T * m.k);
      }
      if (T == 1 || T == 8 || T == 64 || T == 1024 || T == 16384) {
        char nb[256];
        std::snprintf(nb, sizeof nb, "dispatch %s T=%lld: combine %.1f us (%.2f TB/s); in a graph: permute %.1f us, combine %.1f us",
                      m.model.c_str(), T, t2.us_median, (2.0 * T * m.k * m.D + 2.0 * T * m.D) / t2.us_median / 1e6, gp, gc);
        note(c, nb);
      }
      if (m.model == "K3") {
        const Timing t3 = timed(c, [&](int) { moe_combine(xp.p, d.pos, w.p, int(T), m.k, m.D, gam.p, 1e-6f, out.p, c.s); });
        tc.add("combine_rmsnorm_fused", shape, {{"y", "bf16"}, {"w", "fp32"}, {"out", "bf16"}}, t3,
               2.0 * T * m.k * m.D + 4.0 * T * m.D, 2.0 * T * m.k * m.D + 2.0 * T * m.D + 8.0 * T * m.k + 2.0 * m.D);
      }
    }
    free_dispatch(d);
  }
  tp.write(c.out);
  tc.write(c.out);
}

// ---- activations, latent projections, shared experts, dense FFN -----------------------------------------
void bench_act(Ctx& c) {
  Table ts("moe_act_situ", "K3", "K3 SiTU GLU: [rows, 2I] -> [rows, I], 4tanh(a/4)sigmoid(a)*25tanh(b/25)", "~30*rows*I",
           "6*rows*I", c.gpu);
  Table tw("moe_act_swiglu", "DSV4-Pro, DSV4-Flash", "DSV4 SwiGLU clamped at 10: [rows, 2I] -> [rows, I]", "~10*rows*I",
           "6*rows*I", c.gpu);
  struct A { bool situ; int I; std::string use; int tp = 0; };
  std::vector<A> as;
  if (c.shared_tp.empty()) {
    if (want_model(c, "K3")) as = {{true, kK3Inter, "routed"}, {true, kK3SharedInter, "shared"}, {true, kK3DenseInter, "dense"}};
    if (want_model(c, "DSV4-Pro")) as.push_back({false, kV4ProInter, "DSV4-Pro routed"});
    if (want_model(c, "DSV4-Flash")) as.push_back({false, kV4FlashInter, "DSV4-Flash routed"});
  } else {
    for (int tp : c.shared_tp) as.push_back({true, kK3SharedInter / tp, "shared", tp});
  }
  for (const auto& a : as) {
    const long long rmax = std::min<long long>(262144, (1ll << 30) / a.I);
    DevBuf<bf16> h(size_t(rmax) * 2 * a.I), o(size_t(rmax) * a.I);
    fill_bf16(h.p, h.n, 1, 4.f, c.s);
    for (long long r : pick(c, grid(1, rmax), {1, 256, 65536})) {
      if (!time_left(c)) break;
      const Timing t = timed(c, [&](int) {
        if (a.situ) act_situ(h.p, int(r), a.I, o.p, c.s);
        else act_swiglu(h.p, int(r), a.I, kV4SwigluLimit, o.p, c.s);
      });
      json sh = {{"rows", r}, {"I", a.I}};
      if (a.tp) sh["attn_tp"] = a.tp;
      (a.situ ? ts : tw).add(a.use, sh, {{"in", "bf16"}, {"out", "bf16"}}, t, (a.situ ? 30.0 : 10.0) * r * a.I, 6.0 * r * a.I);
    }
  }
  bool situ = false, swiglu = false;
  for (const auto& a : as) (a.situ ? situ : swiglu) = true;
  if (situ) ts.write(c.out);
  if (swiglu) tw.write(c.out);
}

void bench_dense(Ctx& c) {
  Table tl("latentmoe_proj", "K3",
           "K3 LatentMoE pieces: down = cuBLAS [T,7168]x[7168,3584]; rmsnorm = own kernel over 3584; up = cuBLAS "
           "[T,3584]x[3584,7168] (bf16)",
           "down/up: 2*T*7168*3584; rmsnorm ~4*T*3584", "down/up: 2*7168*3584 + 2*T*(7168+3584); rmsnorm 4*T*3584", c.gpu);
  Table tsh("moe_shared_expert", "K3, DSV4-Pro, DSV4-Flash",
            "Shared expert(s) as BF16 cuBLAS GLU: w13 [T,D]x[D,2I], activation (K3 SiTU, DSV4 clamped SwiGLU), w2 [T,I]x[I,D]; "
            "K3 fuses its 2 shared experts into I = 6144; variants total, w13, act, w2",
            "2*T*3*D*I", "2*3*D*I + 2*T*(D + 3I + D)", c.gpu);
  Table tdf("dense_ffn_k3", "K3", "K3 layer-0 dense SiTU GLU FFN, intermediate 33792, BF16 cuBLAS; variants total, w13, act, w2",
            "2*T*3*7168*33792", "2*3*7168*33792 + activations", c.gpu);
  // latent projections
  if (c.shared_tp.empty() && want_model(c, "K3")) {
    const long long Tmax = 16384;
    const int sets = rotation_sets(2.0 * kK3Hidden * kK3Latent, c.gpu.l2_bytes, 8);
    DevBuf<bf16> wd(size_t(sets) * kK3Hidden * kK3Latent), wu(size_t(sets) * kK3Hidden * kK3Latent), x(size_t(Tmax) * kK3Hidden),
        l(size_t(Tmax) * kK3Latent), l2(size_t(Tmax) * kK3Latent), y(size_t(Tmax) * kK3Hidden), g(kK3Latent);
    fill_bf16(wd.p, wd.n, 1, 0.02f, c.s);
    fill_bf16(wu.p, wu.n, 2, 0.02f, c.s);
    fill_bf16(x.p, x.n, 3, 1.f, c.s);
    fill_bf16(l.p, l.n, 4, 1.f, c.s);
    fill_bf16(g.p, g.n, 5, 1.f, c.s);
    const size_t wm = size_t(kK3Hidden) * kK3Latent;
    for (long long T : pick(c, grid(1, Tmax), {1, 64, 1024, 16384})) {
      if (!time_left(c)) break;
      json sh = {{"model", "K3"}, {"tokens", T}, {"hidden", kK3Hidden}, {"latent", kK3Latent}};
      const double fl = 2.0 * T * kK3Hidden * kK3Latent, by = 2.0 * wm + 2.0 * T * (kK3Hidden + kK3Latent);
      Timing t = timed(c, [&](int i) { cublas_gemm_bf16(c.h, x.p, wd.p + (i % sets) * wm, l.p, int(T), kK3Latent, kK3Hidden, false, 0.f, c.s); });
      tl.add("down", sh, {{"w", "bf16"}, {"a", "bf16"}}, t, fl, by);
      t = timed(c, [&](int) { rmsnorm(l.p, g.p, int(T), kK3Latent, 1e-6f, l2.p, c.s); });
      tl.add("rmsnorm", sh, {{"a", "bf16"}}, t, 4.0 * T * kK3Latent, 4.0 * T * kK3Latent + 2.0 * kK3Latent);
      t = timed(c, [&](int i) { cublas_gemm_bf16(c.h, l.p, wu.p + (i % sets) * wm, y.p, int(T), kK3Hidden, kK3Latent, false, 0.f, c.s); });
      tl.add("up", sh, {{"w", "bf16"}, {"a", "bf16"}}, t, fl, by);
    }
  }
  // shared experts and dense FFN: same GLU structure
  struct S { Table* tab; std::string model; int D, I; bool situ; long long Tmax; int tp = 0; };
  std::vector<S> ss;
  if (c.shared_tp.empty()) {
    for (const S& s : std::vector<S>{{&tsh, "K3", kK3Hidden, kK3SharedInter, true, 16384},
                                     {&tsh, "DSV4-Pro", kV4ProHidden, kV4ProInter, false, 16384},
                                     {&tsh, "DSV4-Flash", kV4FlashHidden, kV4FlashInter, false, 16384},
                                     {&tdf, "K3", kK3Hidden, kK3DenseInter, true, 8192}})
      if (want_model(c, s.model)) ss.push_back(s);
  } else {  // K3's two fused shared experts split over attention TP: w13 N = 2I/t (column), w2 K = I/t (row)
    for (int tp : c.shared_tp) ss.push_back({&tsh, "K3", kK3Hidden, kK3SharedInter / tp, true, 16384, tp});
  }
  for (const auto& s : ss) {
    const double wbytes = 2.0 * 3 * s.D * s.I;
    const int sets = rotation_sets(wbytes, c.gpu.l2_bytes, 8);
    DevBuf<bf16> w13(size_t(sets) * 2 * s.I * s.D), w2(size_t(sets) * s.D * s.I), x(size_t(s.Tmax) * s.D),
        h(size_t(s.Tmax) * 2 * s.I), a(size_t(s.Tmax) * s.I), y(size_t(s.Tmax) * s.D);
    fill_bf16(w13.p, w13.n, 1, 0.02f, c.s);
    fill_bf16(w2.p, w2.n, 2, 0.02f, c.s);
    fill_bf16(x.p, x.n, 3, 1.f, c.s);
    fill_bf16(h.p, h.n, 4, 2.f, c.s);
    const size_t m13 = size_t(2) * s.I * s.D, m2 = size_t(s.D) * s.I;
    for (long long T : pick(c, grid(1, s.Tmax), {1, 64, 1024, 8192})) {
      if (!time_left(c)) break;
      json sh = {{"model", s.model}, {"tokens", T}, {"hidden", s.D}, {"inter", s.I}};
      if (s.tp) sh["attn_tp"] = s.tp;
      json dt = {{"w", "bf16"}, {"a", "bf16"}, {"acc", "fp32"}};
      auto w13f = [&](int i) { cublas_gemm_bf16(c.h, x.p, w13.p + (i % sets) * m13, h.p, int(T), 2 * s.I, s.D, false, 0.f, c.s); };
      auto actf = [&](int) {
        if (s.situ) act_situ(h.p, int(T), s.I, a.p, c.s);
        else act_swiglu(h.p, int(T), s.I, kV4SwigluLimit, a.p, c.s);
      };
      auto w2f = [&](int i) { cublas_gemm_bf16(c.h, a.p, w2.p + (i % sets) * m2, y.p, int(T), s.D, s.I, false, 0.f, c.s); };
      Timing t = timed(c, [&](int i) { w13f(i); actf(i); w2f(i); });
      s.tab->add("total", sh, dt, t, 2.0 * T * 3 * s.D * s.I, wbytes + 2.0 * T * (2 * s.D + 3 * s.I));
      t = timed(c, w13f);
      s.tab->add("w13", sh, dt, t, 2.0 * T * 2 * s.D * s.I, 2.0 * m13 + 2.0 * T * (s.D + 2 * s.I));
      t = timed(c, actf);
      s.tab->add("act", sh, dt, t, 30.0 * T * s.I, 6.0 * T * s.I);
      t = timed(c, w2f);
      s.tab->add("w2", sh, dt, t, 2.0 * T * s.D * s.I, 2.0 * m2 + 2.0 * T * (s.D + s.I));
    }
  }
  bool latent = c.shared_tp.empty() && want_model(c, "K3"), shared = false, dense = false;
  for (const auto& s : ss) (s.tab == &tdf ? dense : shared) = true;
  if (latent) tl.write(c.out);
  if (shared) tsh.write(c.out);
  if (dense) tdf.write(c.out);
}

// ---- DSV4 mHC ------------------------------------------------------------------------------------
void bench_mhc(Ctx& c) {
  Table tab("mhc_mix", "DSV4-Pro, DSV4-Flash",
            "DSV4 mHC per sublayer with 4 residual streams: pre_gemm = cuBLAS [T,4D]x[4D,24] (bf16 in, fp32 mixes); "
            "pre_kernel = own kernel (rms of 4D, sigmoid/softmax, 20 Sinkhorn iterations, y = sum pre_i x_i); pre = both; "
            "post = own kernel x'_i = post_i f + sum_j comb_ji x_j; pre_post = pre + post",
            "pre_gemm 2*T*4D*24; pre_kernel ~4*4D*T; post ~10*4D*T",
            "pre_gemm 2*4D*T + 2*24*4D + 96*T; pre_kernel 2*4D*T + 2*D*T + 176*T; post 2*5D*T + 2*4D*T + 80*T", c.gpu);
  for (auto [model, D] : std::vector<std::pair<std::string, int>>{{"DSV4-Pro", kV4ProHidden}, {"DSV4-Flash", kV4FlashHidden}}) {
    const long long Tmax = 16384;
    const int F = 4 * D;
    DevBuf<bf16> x(size_t(Tmax) * F), fn(size_t(24) * F), y(size_t(Tmax) * D), o(size_t(Tmax) * F);
    DevBuf<float> mix(size_t(Tmax) * 24), sc(3), ba(24), post(size_t(Tmax) * 4), comb(size_t(Tmax) * 16);
    fill_bf16(x.p, x.n, 1, 1.f, c.s);
    fill_bf16(fn.p, fn.n, 2, 0.02f, c.s);
    fill_f32(sc.p, 3, 3, 0.5f, 1.5f, c.s);
    fill_f32(ba.p, 24, 4, -1.f, 1.f, c.s);
    for (long long T : pick(c, grid(1, Tmax), {1, 64, 1024, 16384})) {
      if (!time_left(c)) break;
      const int sets = std::max(1, std::min<int>(rotation_sets(2.0 * F * T, c.gpu.l2_bytes, 16), int(Tmax / T)));
      json sh = {{"model", model}, {"tokens", T}, {"hidden", D}, {"streams", 4}, {"sinkhorn_iters", kHcSinkhornIters}};
      json dt = {{"x", "bf16"}, {"mixes", "fp32"}};
      auto xs = [&](int i) { return x.p + size_t(i % sets) * T * F; };
      auto gemm = [&](int i) { cublas_gemm_bf16(c.h, xs(i), fn.p, mix.p, int(T), 24, F, true, 0.f, c.s); };
      auto pre = [&](int i) { mhc_pre(xs(i), mix.p, sc.p, ba.p, int(T), D, y.p, post.p, comb.p, c.s); };
      auto pst = [&](int i) { mhc_post(y.p, xs(i), post.p, comb.p, int(T), D, o.p, c.s); };
      Timing t = timed(c, gemm);
      tab.add("pre_gemm", sh, dt, t, 2.0 * T * F * 24, 2.0 * F * T + 2.0 * 24 * F + 96.0 * T);
      t = timed(c, pre);
      tab.add("pre_kernel", sh, dt, t, 4.0 * F * T, 2.0 * F * T + 2.0 * D * T + 176.0 * T);
      t = timed(c, [&](int i) { gemm(i); pre(i); });
      tab.add("pre", sh, dt, t, 2.0 * T * F * 24 + 4.0 * F * T, 2.0 * F * T + 2.0 * D * T + 2.0 * 24 * F);
      t = timed(c, pst);
      tab.add("post", sh, dt, t, 10.0 * F * T, 2.0 * 5 * D * T + 2.0 * F * T + 80.0 * T);
      t = timed(c, [&](int i) { gemm(i); pre(i); pst(i); });
      tab.add("pre_post", sh, dt, t, 2.0 * T * F * 24 + 14.0 * F * T, 2.0 * F * T + 2.0 * D * T + 2.0 * 5 * D * T + 2.0 * F * T);
    }
  }
  tab.write(c.out);
}

}  // namespace
