// bench_attn sections: the other DeepSeek V4 attention ops -- KV compressors (bench_compressors),
// the CSA lightning indexer (bench_indexer) and its top-k selection (bench_topk).
// Part of bench_attn.cu's translation unit, not a standalone header: bench_attn.cu includes its
// section parts in their original order after the shared driver code (options, OpRun, grid /
// qgrid / nsets / seed, want, ratio_line, rows_of, bench_ceilings); main() there runs the sections.
#pragma once

namespace {

void bench_compressors() {
  for (int ratio : {4, 128}) {
    const std::string op = ratio == 4 ? "csa_compressor" : "hca_compressor";
    OpRun r(op, "deepseek-v4",
            std::string("V4 ") + (ratio == 4 ? "ratio-4 overlapping" : "ratio-128") +
                " compressor after the wkv/wgate projections: per-channel softmax pooling, RMSNorm, RoPE, FP8 quantise "
                "(main: 584-B rows; indexer: Hadamard + 132-B keys). prefill: N tokens -> N/ratio entries; decode: one "
                "entry per sequence from its state buffer",
            "entries*D*coff*ratio*6 (approx.: exp, max, 2 fma per term)",
            "rows*coff*D*2*2 (kv, score in) + entries*row_bytes (out)", 5);
    for (int D : {512, 128}) {
      if (ratio == 128 && D == 128) continue;
      const int coff = ratio == 4 ? 2 : 1, W = coff * D;
      const double rowb = D == 512 ? kV4RowBytes : 132;
      for (int dec = 0; dec < 2; ++dec)
        for (long X : qgrid(dec ? grid(1, 512) : grid(256, 16384))) {
          const long rows = dec ? X * (ratio == 4 ? 8 : 128) : X;
          const long ents = dec ? X : X / ratio;
          if (ents == 0) continue;
          const double bytes = 4.0 * rows * W + ents * rowb;
          auto b = std::make_shared<std::vector<DevBuf<bf16>>>();
          auto misc = std::make_shared<DevBuf<float>>();
          auto ent = std::make_shared<DevBuf<int2>>();
          auto out = std::make_shared<DevBuf<uint8_t>>();
          auto osc = std::make_shared<DevBuf<float>>();
          json shape = dec ? json{{"batch", X}, {"entries", ents}, {"head_dim", D}, {"ratio", ratio}}
                           : json{{"tokens", X}, {"entries", ents}, {"head_dim", D}, {"ratio", ratio}};
          r.point(std::string(D == 512 ? "main" : "indexer") + (dec ? "_decode" : "_prefill"), shape,
                  {{"kv_score", "bf16"}, {"out", D == 512 ? "fp8 584B" : "fp8 128 + fp32 scale"}},
                  1.0 * ents * D * coff * ratio * 6, bytes, [=]() {
                    const int ns = nsets(bytes, 16);
                    b->resize(ns);
                    for (auto& x : *b) { x.alloc(2ull * rows * W); fill_uniform_bf16(x.p, x.n, -2, 2, seed()); }
                    misc->alloc(static_cast<size_t>(ratio) * W + D);
                    fill_uniform_f32(misc->p, misc->n, 0.5f, 1.f, seed());
                    std::vector<int2> e;
                    for (long j = 0; j < ents; ++j)
                      e.push_back(dec ? make_int2(static_cast<int>(j * (rows / X) + (ratio == 4 ? 4 : 0)), 4096)
                                      : make_int2(static_cast<int>(j * ratio), static_cast<int>(j * ratio)));
                    ent->upload(e);
                    out->alloc(static_cast<size_t>(ents) * (D == 512 ? kV4RowBytes : 128));
                    osc->alloc(ents);
                    return std::function<void(int)>([=](int i) {
                      CompressorArgs a;
                      const bf16* base = (*b)[i % b->size()].p;
                      a.kv = base; a.score = base + static_cast<size_t>(rows) * W; a.ape = misc->p;
                      a.norm_w = misc->p + static_cast<size_t>(ratio) * W; a.entries = ent->p; a.n = static_cast<int>(ents);
                      a.out = out->p; a.out_scale = osc->p;
                      v4_compress(a, ratio, D);
                    });
                  });
        }
    }
    r.finish();
  }
}

void bench_indexer() {
  OpRun r("csa_indexer", "deepseek-v4",
          "lightning indexer logits (64 heads x 128, FP8 E4M3 q and keys, fp32 per-key scale, ReLU, weighted head sum) "
          "over the ratio-4 indexer keys; decode: one query per sequence over its L/4 keys; prefill: N queries of one "
          "sequence, causal over (P+i+1)/4 keys",
          "2*64*128*sum(keys seen per query)", "sum over distinct key sets of keys*132 + queries*(64*128 + 64*4) + logits*4", 26);
  struct Pt { int B; long L; bool dec; };
  std::vector<Pt> pts;
  for (long L : qgrid(grid(1024, 1 << 20)))
    for (long B : qgrid(grid(1, 512)))
      if (1.0 * B * L / 4 * 136 <= 30e9) pts.push_back({static_cast<int>(B), L, true});
  for (long N : qgrid(grid(256, 16384)))
    for (long P : qgrid(std::vector<long>{0, 4096, 16384, 65536, 262144, 1048576}))
      if (1.0 * N * (P + N) / 4 * 4 <= 20e9 && 4096.0 * N * (P + N / 2.0) <= 8e13) pts.push_back({static_cast<int>(N), P, false});
  std::stable_sort(pts.begin(), pts.end(), [](const Pt& a, const Pt& b) {
    return 1.0 * a.B * (a.dec ? a.L : a.L + a.B / 2.0) < 1.0 * b.B * (b.dec ? b.L : b.L + b.B / 2.0);
  });
  for (const auto& p : pts) {
    const int nq = p.B;
    std::vector<int> kb(nq), kl(nq);
    long nkeys, ld;
    double seen = 0;
    if (p.dec) {
      const long per = std::max<long>(1, p.L / 4);
      for (int b = 0; b < nq; ++b) { kb[b] = static_cast<int>(b * per); kl[b] = static_cast<int>(per); }
      nkeys = per * nq;
      ld = per;
      seen = 1.0 * per * nq;
    } else {
      nkeys = std::max<long>(1, (p.L + p.B) / 4);
      ld = nkeys;
      for (int i = 0; i < nq; ++i) { kb[i] = 0; kl[i] = static_cast<int>((p.L + i + 1) / 4); seen += kl[i]; }
    }
    const double bytes = 132.0 * nkeys + nq * (64.0 * 128 + 256) + 4.0 * seen;
    json shape = p.dec ? json{{"batch", p.B}, {"ctx", p.L}, {"keys_per_query", p.L / 4}, {"heads", 64}, {"dim", 128}}
                       : json{{"chunk", p.B}, {"prefix", p.L}, {"keys_seen_total", seen}, {"heads", 64}, {"dim", 128}};
    auto keys = std::make_shared<std::vector<DevBuf<uint8_t>>>();
    auto q = std::make_shared<DevBuf<uint8_t>>();
    auto f = std::make_shared<DevBuf<float>>();
    auto lg = std::make_shared<DevBuf<float>>();
    auto ib = std::make_shared<DevBuf<int>>();
    r.point(p.dec ? "decode" : "prefill", shape, {{"q", "fp8_e4m3"}, {"keys", "fp8_e4m3 + fp32 scale"}, {"logits", "fp32"}},
            2.0 * 64 * 128 * seen, bytes, [=]() {
              const int ns = nsets(bytes, 16);
              keys->resize(ns);
              for (auto& k : *keys) { k.alloc(static_cast<size_t>(nkeys) * 128); fill_e4m3(k.p, k.n, 4.f, seed()); }
              q->alloc(static_cast<size_t>(nq) * 64 * 128);
              fill_e4m3(q->p, q->n, 4.f, seed());
              f->alloc(static_cast<size_t>(nkeys) + static_cast<size_t>(nq) * 64);
              fill_uniform_f32(f->p, f->n, 0.01f, 0.02f, seed());
              lg->alloc(static_cast<size_t>(nq) * ld);
              std::vector<int> both(kb);
              both.insert(both.end(), kl.begin(), kl.end());
              ib->upload(both);
              IndexerArgs a;
              a.q = q->p; a.w = f->p + nkeys; a.kscale = f->p; a.key_begin = ib->p; a.key_len = ib->p + nq;
              a.logits = lg->p; a.nq = nq; a.ld = static_cast<int>(ld);
              a.max_len = *std::max_element(kl.begin(), kl.end());
              a.nkeys = nkeys;
              return std::function<void(int)>([=](int i) {
                IndexerArgs b = a;
                b.keys = (*keys)[i % keys->size()].p;
                v4_indexer_logits(b);
              });
            }, std::make_shared<json>(json{{"kernel", v4_indexer_variant_name()}}));
    keys->clear();
  }
  r.finish();
  double best = 0;
  for (auto& rv : rows_of("csa_indexer"))
    if (rv.variant == "decode") best = std::max(best, rv.tbps);
  ratio_line("csa_indexer decode best TB/s / (0.7*4.3)", best, 0.7 * 4.3, "TB/s");
}

void bench_topk() {
  OpRun r("csa_topk", "deepseek-v4",
          "top-k of the indexer logits per query (radix select, unordered output); decode rows of L/4 logits; prefill: "
          "N rows of (P+i+1)/4 logits", "0", "sum of row lengths*4 (one read) + rows*k*4", 14);
  struct Pt { int rows; long L; int k; bool dec; };
  std::vector<Pt> pts;
  for (int k : {512, 1024}) {
    for (long L : qgrid(grid(4096, 1 << 20)))
      for (long B : qgrid(grid(1, 512)))
        if (1.0 * B * L / 4 * 4 <= 4e9) pts.push_back({static_cast<int>(B), L, k, true});
    for (long N : qgrid(grid(256, 16384)))
      for (long P : qgrid(std::vector<long>{0, 16384, 65536, 262144, 1048576}))
        if (1.0 * N * (P + N) / 4 * 4 <= 8e9) pts.push_back({static_cast<int>(N), P, k, false});
  }
  std::stable_sort(pts.begin(), pts.end(), [](const Pt& a, const Pt& b) { return 1.0 * a.rows * a.L < 1.0 * b.rows * b.L; });
  if (const char* v = std::getenv("TOPK_VARIANT")) v4_set_variants(0, std::atoi(v));  // comparisons (v4_set_variants)
  if (const char* v = std::getenv("TOPK_SPARSE_MAX")) v4_topk_set_sparse_max(std::atoi(v));  // variant 8's loop bound
  if (const char* only = std::getenv("TOPK_POINTS")) {  // "B:L:K,..." decode points only (ncu, comparisons)
    std::vector<Pt> keep;
    std::stringstream ss(only);
    std::string tok;
    while (std::getline(ss, tok, ',')) {
      int b = 0, k = 0;
      long l = 0;
      if (std::sscanf(tok.c_str(), "%d:%ld:%d", &b, &l, &k) == 3) keep.push_back({b, l, k, true});
    }
    pts = keep;
  }
  for (const auto& p : pts) {
    std::vector<int> len(p.rows);
    long ld;
    double tot = 0;
    if (p.dec) {
      ld = p.L / 4;
      for (auto& l : len) l = static_cast<int>(ld);
    } else {
      ld = std::max<long>(1, (p.L + p.rows) / 4);
      for (int i = 0; i < p.rows; ++i) len[i] = static_cast<int>((p.L + i + 1) / 4);
    }
    for (int l : len) tot += l;
    const double bytes = 4.0 * tot + 4.0 * p.rows * p.k;
    json shape = p.dec ? json{{"batch", p.rows}, {"ctx", p.L}, {"row_len", p.L / 4}, {"topk", p.k}}
                       : json{{"chunk", p.rows}, {"prefix", p.L}, {"len_total", tot}, {"topk", p.k}};
    auto lg = std::make_shared<std::vector<DevBuf<float>>>();
    auto dl = std::make_shared<DevBuf<int>>();
    auto idx = std::make_shared<DevBuf<int>>();
    r.point(p.dec ? "decode" : "prefill", shape, {{"logits", "fp32"}, {"idx", "int32"}}, 0, bytes, [=]() {
      const int ns = nsets(bytes, 8);
      lg->resize(ns);
      for (auto& x : *lg) { x.alloc(static_cast<size_t>(p.rows) * ld); fill_uniform_f32(x.p, x.n, -10, 10, seed()); }
      dl->upload(len);
      idx->alloc(static_cast<size_t>(p.rows) * p.k);
      const int mx = *std::max_element(len.begin(), len.end());
      return std::function<void(int)>([=](int i) {
        v4_topk((*lg)[i % lg->size()].p, static_cast<int>(ld), dl->p, p.rows, p.k, idx->p, 0, mx);
      });
    }, std::make_shared<json>(json{{"kernel", v4_topk_kernel_name(p.rows, *std::max_element(len.begin(), len.end()), p.k)}}));
    lg->clear();
  }
  r.finish();
}

}  // namespace
