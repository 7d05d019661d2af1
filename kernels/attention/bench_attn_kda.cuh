// bench_attn sections: Kimi K3 KDA -- KdaBufs, chunked prefill (bench_kda_prefill), decode
// (bench_kda_decode), short convolution and gated RMSNorm (bench_kda_misc).
// Part of bench_attn.cu's translation unit, not a standalone header: bench_attn.cu includes its
// section parts in their original order after the shared driver code (options, OpRun, grid /
// qgrid / nsets / seed, want, ratio_line, rows_of, bench_ceilings); main() there runs the sections.
#pragma once

namespace {

// ============================================================================================
// KDA
// ============================================================================================
struct KdaBufs {
  DevBuf<bf16> q, k, v, g, beta, out;
  DevBuf<float> A, dtb, s0, s1;
  void make(size_t T, int H, int N) {
    const size_t n = T * H * kKdaD;
    q.alloc(n); k.alloc(n); v.alloc(n); g.alloc(n); beta.alloc(T * H); out.alloc(n);
    A.alloc(H); dtb.alloc(static_cast<size_t>(H) * kKdaD);
    s0.alloc(static_cast<size_t>(N) * H * kKdaD * kKdaD); s1.alloc(s0.n);
    fill_uniform_bf16(q.p, n, -1, 1, seed()); fill_uniform_bf16(k.p, n, -1, 1, seed());
    fill_uniform_bf16(v.p, n, -1, 1, seed()); fill_uniform_bf16(g.p, n, -3, 1, seed());
    fill_uniform_bf16(beta.p, T * H, -3, 3, seed());
    fill_uniform_f32(A.p, H, -1, 1, seed()); fill_uniform_f32(dtb.p, dtb.n, -1, 1, seed());
    fill_uniform_f32(s0.p, s0.n, -0.5f, 0.5f, seed());
  }
};

void bench_kda_prefill() {
  OpRun r("kda_prefill", "kimi-k3",
          "KDA chunked prefill (C=16, FlashKDA-style K1 prep + K2 recurrence), varlen packed; variants k1_prep / "
          "k2_recur time the two kernels alone",
          "T*H*(6*D^2 + 8*C*D + 12*C^2), D=128, C=16",
          "2*(4*T*H*D + T*H + T*H*D) + 2*N*H*D*D*4 (q,k,v,g,beta in; o out; fp32 state in+out)", 22);
  struct P { int H; std::vector<int> lens; };
  std::vector<P> pts;
  for (int H : {96, 48, 24, 12})
    for (long T : qgrid(grid(256, 16384))) pts.push_back({H, {static_cast<int>(T)}});
  for (auto pr : std::vector<std::pair<int, int>>{{8, 1024}, {4, 2048}, {16, 512}, {2, 4096}, {32, 256}, {64, 256}})
    pts.push_back({96, std::vector<int>(pr.first, pr.second)});
  std::stable_sort(pts.begin(), pts.end(), [](const P& a, const P& b) {
    return 1.0 * a.H * std::accumulate(a.lens.begin(), a.lens.end(), 0) < 1.0 * b.H * std::accumulate(b.lens.begin(), b.lens.end(), 0);
  });
  const double D = kKdaD, C = kKdaChunk;
  for (const auto& p : pts) {
    std::vector<int> cu(1, 0);
    for (int l : p.lens) cu.push_back(cu.back() + l);
    const long T = cu.back();
    const int N = static_cast<int>(p.lens.size()), H = p.H;
    const double flops = 1.0 * T * H * (6 * D * D + 8 * C * D + 12 * C * C);
    const double bytes = 2.0 * (4.0 * T * H * D + T * H + T * H * D) + 2.0 * N * H * D * D * 4;
    json shape = {{"tokens", T}, {"num_seqs", N}, {"seq_len", p.lens[0]}, {"heads", H}, {"head_dim", 128}, {"chunk", 16}};
    json dt = {{"qkvg", "bf16"}, {"state", "fp32"}, {"out", "bf16"}};
    auto bufs = std::make_shared<std::vector<KdaBufs>>();
    auto plan = std::make_shared<KdaPlan>();
    auto ws = std::make_shared<DevBuf<uint8_t>>();
    auto args = std::make_shared<std::vector<KdaPrefillArgs>>();
    auto setup = [=]() {
      const int sets = nsets(bytes, 8);
      bufs->resize(sets);
      args->clear();
      *plan = kda_make_plan(cu);
      ws->alloc(kda_workspace_bytes(*plan, H));
      for (int s = 0; s < sets; ++s) {
        (*bufs)[s].make(T, H, N);
        KdaPrefillArgs a;
        auto& b = (*bufs)[s];
        a.q = b.q.p; a.k = b.k.p; a.v = b.v.p; a.g = b.g.p; a.beta = b.beta.p; a.A_log = b.A.p; a.dt_bias = b.dtb.p;
        a.init_state = b.s0.p; a.final_state = b.s1.p; a.out = b.out.p; a.H = H;
        args->push_back(a);
      }
    };
    r.point("k1+k2", shape, dt, flops, bytes, [=]() {
      setup();
      return std::function<void(int)>([=](int i) { kda_prefill((*args)[i % args->size()], *plan, ws->p); });
    });
    if (H == 96 && N == 1 && (T == 8192 || T == 2048 || T == 16384 || T == 512)) {
      r.point("k1_prep", shape, dt, 0, 2.0 * 3 * T * H * D + 1.0 * T / 16 * H * kKdaChunkBytes, [=]() {
        setup();
        return std::function<void(int)>([=](int i) { kda_prefill_k1((*args)[i % args->size()], *plan, ws->p); });
      });
      r.point("k2_recur", shape, dt, flops, 1.0 * T / 16 * H * kKdaChunkBytes + 2.0 * 2 * T * H * D, [=]() {
        setup();
        kda_prefill_k1((*args)[0], *plan, ws->p);
        return std::function<void(int)>([=](int i) { kda_prefill_k2((*args)[i % args->size()], *plan, ws->p); });
      });
    }
    bufs->clear();
    ws->free();
  }
  r.finish();
  for (auto& rv : rows_of("kda_prefill"))
    if (rv.variant == "k1+k2" && rv.shape["tokens"] == 8192 && rv.shape["heads"] == 96 && rv.shape["num_seqs"] == 1)
      ratio_line("kda_prefill T=8192 H=96 fixed: target time / measured", 2600.0 / rv.us, 1.0, "x");
  for (auto& rv : rows_of("kda_prefill"))
    if (rv.variant == "k1+k2" && rv.shape["tokens"] == 8192 && rv.shape["heads"] == 96 && rv.shape["num_seqs"] == 8)
      SUMMARY.push_back("kda_prefill T=8192 H=96 varlen 8x1024: " + std::to_string(rv.us) + " us (FlashKDA H20 2043 us)");
}

void bench_kda_decode() {
  OpRun r("kda_decode", "kimi-k3", "KDA recurrent decode step (one token per sequence), state [B,H,128,128] updated in place",
          "7*D^2*B*H", "2*B*H*D*D*s (state in+out) + B*H*(4*D*2 + 2 + D*2)", 16);
  struct P { int B, H; bool bf; };
  std::vector<P> pts;
  for (bool bf : {false, true})
    for (int H : {96, 48, 24, 12})
      for (long B : qgrid(grid(1, 512))) pts.push_back({static_cast<int>(B), H, bf});
  std::stable_sort(pts.begin(), pts.end(), [](const P& a, const P& b) { return 1.0 * a.B * a.H < 1.0 * b.B * b.H; });
  for (const auto& p : pts) {
    const double D = kKdaD, s = p.bf ? 2 : 4;
    const double bytes = 2.0 * p.B * p.H * D * D * s + 1.0 * p.B * p.H * (4 * D * 2 + 2 + D * 2);
    auto st = std::make_shared<std::vector<DevBuf<uint8_t>>>();
    auto in = std::make_shared<DevBuf<bf16>>();
    auto out = std::make_shared<DevBuf<bf16>>();
    auto A = std::make_shared<DevBuf<float>>();
    r.point(p.bf ? "state_bf16" : "state_fp32", {{"batch", p.B}, {"heads", p.H}, {"head_dim", 128}},
            {{"qkvg", "bf16"}, {"state", p.bf ? "bf16" : "fp32"}}, 7.0 * D * D * p.B * p.H, bytes, [=]() {
              const int sets = nsets(bytes, 32);
              const size_t sb = static_cast<size_t>(p.B) * p.H * kKdaD * kKdaD * (p.bf ? 2 : 4);
              st->resize(sets);
              for (auto& b : *st) {
                b.alloc(sb);
                if (p.bf) fill_uniform_bf16(reinterpret_cast<bf16*>(b.p), sb / 2, -0.5f, 0.5f, seed());
                else fill_uniform_f32(reinterpret_cast<float*>(b.p), sb / 4, -0.5f, 0.5f, seed());
              }
              const size_t n = static_cast<size_t>(p.B) * p.H * kKdaD;
              in->alloc(5 * n);
              fill_uniform_bf16(in->p, in->n, -1, 1, seed());
              out->alloc(n);
              A->alloc(p.H + static_cast<size_t>(p.H) * kKdaD);
              fill_uniform_f32(A->p, A->n, -1, 1, seed());
              KdaDecodeArgs a;
              a.q = in->p; a.k = in->p + n; a.v = in->p + 2 * n; a.g = in->p + 3 * n; a.beta = in->p + 4 * n;
              a.A_log = A->p; a.dt_bias = A->p + p.H; a.out = out->p; a.B = p.B; a.H = p.H; a.state_bf16 = p.bf;
              return std::function<void(int)>([=](int i) {
                KdaDecodeArgs b = a;
                b.state = (*st)[i % st->size()].p;
                kda_decode(b);
              });
            });
    st->clear();
  }
  r.finish();
  double best32 = 0, best16 = 0;
  for (auto& rv : rows_of("kda_decode")) {
    if (rv.variant == "state_fp32") best32 = std::max(best32, rv.tbps);
    if (rv.variant == "state_bf16") best16 = std::max(best16, rv.tbps);
  }
  ratio_line("kda_decode fp32 state: best TB/s / (0.7*4.3)", best32, 0.7 * 4.3, "TB/s");
  ratio_line("kda_decode bf16 state: best TB/s / (0.7*4.3)", best16, 0.7 * 4.3, "TB/s");
}

void bench_kda_misc() {
  {
    OpRun r("kda_short_conv", "kimi-k3", "causal depthwise conv width 4 + SiLU over q,k,v channels (C = 3*12288/TP)",
            "8*T*C", "T*C*4 (x in, y out) + N*C*12 (state in+out) + C*16 (weights)", 6);
    for (int C : {36864, 4608}) {
      for (long T : qgrid(grid(256, 16384))) {
        const double bytes = 4.0 * T * C + 12.0 * C + 16.0 * C;
        auto bx = std::make_shared<std::vector<DevBuf<bf16>>>();
        auto by = std::make_shared<DevBuf<bf16>>();
        auto st = std::make_shared<DevBuf<bf16>>();
        auto so = std::make_shared<DevBuf<bf16>>();
        auto w = std::make_shared<DevBuf<float>>();
        auto plan = std::make_shared<KdaPlan>();
        r.point("prefill", {{"tokens", T}, {"num_seqs", 1}, {"channels", C}}, {{"x", "bf16"}, {"w", "fp32"}}, 8.0 * T * C, bytes, [=]() {
          const int sets = nsets(bytes, 16);
          bx->resize(sets);
          for (auto& b : *bx) { b.alloc(static_cast<size_t>(T) * C); fill_uniform_bf16(b.p, b.n, -2, 2, seed()); }
          by->alloc(static_cast<size_t>(T) * C);
          st->alloc(static_cast<size_t>(C) * 3); fill_uniform_bf16(st->p, st->n, -2, 2, seed());
          so->alloc(st->n);
          w->alloc(static_cast<size_t>(C) * 4); fill_uniform_f32(w->p, w->n, -1, 1, seed());
          *plan = kda_make_plan({0, static_cast<int>(T)});
          return std::function<void(int)>([=](int i) {
            kda_short_conv_prefill((*bx)[i % bx->size()].p, w->p, st->p, so->p, by->p, *plan, C);
          });
        });
      }
      for (long B : qgrid(grid(1, 512))) {
        const double bytes = 1.0 * B * C * (2 + 2 + 12) + 16.0 * C;
        auto bx = std::make_shared<DevBuf<bf16>>();
        auto st = std::make_shared<std::vector<DevBuf<bf16>>>();
        auto by = std::make_shared<DevBuf<bf16>>();
        auto w = std::make_shared<DevBuf<float>>();
        r.point("decode", {{"batch", B}, {"channels", C}}, {{"x", "bf16"}, {"state", "bf16"}}, 8.0 * B * C, bytes, [=]() {
          const int sets = nsets(bytes, 32);
          st->resize(sets);
          for (auto& b : *st) { b.alloc(static_cast<size_t>(B) * C * 3); fill_uniform_bf16(b.p, b.n, -2, 2, seed()); }
          bx->alloc(static_cast<size_t>(B) * C); fill_uniform_bf16(bx->p, bx->n, -2, 2, seed());
          by->alloc(bx->n);
          w->alloc(static_cast<size_t>(C) * 4); fill_uniform_f32(w->p, w->n, -1, 1, seed());
          return std::function<void(int)>([=](int i) { kda_short_conv_decode(bx->p, w->p, (*st)[i % st->size()].p, by->p, B, C); });
        });
      }
    }
    r.finish();
  }
  {
    OpRun r("kda_gated_rmsnorm", "kimi-k3", "sigmoid-gated RMSNorm over D=128 per (token, head)", "6*T*H*128",
            "3*T*H*128*2 (o, gate in; y out)", 4);
    for (int H : {96, 12})
      for (long T : qgrid(grid(1, 16384))) {
        const double rows = 1.0 * T * H, bytes = rows * 128 * 6;
        auto b = std::make_shared<std::vector<DevBuf<bf16>>>();
        auto y = std::make_shared<DevBuf<bf16>>();
        auto w = std::make_shared<DevBuf<float>>();
        r.point("fused", {{"tokens", T}, {"heads", H}}, {{"io", "bf16"}}, 6.0 * rows * 128, bytes, [=]() {
          const int sets = nsets(bytes, 32);
          b->resize(sets);
          for (auto& x : *b) { x.alloc(static_cast<size_t>(rows) * 256); fill_uniform_bf16(x.p, x.n, -2, 2, seed()); }
          y->alloc(static_cast<size_t>(rows) * 128);
          w->alloc(128); fill_uniform_f32(w->p, 128, 0.5f, 1.5f, seed());
          return std::function<void(int)>([=](int i) {
            const bf16* base = (*b)[i % b->size()].p;
            kda_gated_rmsnorm(base, base + static_cast<size_t>(rows) * 128, w->p, y->p, static_cast<long>(rows));
          });
        });
      }
    r.finish();
  }
}

}  // namespace
