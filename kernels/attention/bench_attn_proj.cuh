// bench_attn sections: dense projections -- GemmDef, the own FP8 block-scaled GEMM rows
// (bench_proj_own), the cuBLASLt sweep of one table (bench_proj) and the K3 / V4 tables (bench_all_proj).
// Part of bench_attn.cu's translation unit, not a standalone header: bench_attn.cu includes its
// section parts in their original order after the shared driver code (options, OpRun, grid /
// qgrid / nsets / seed, want, ratio_line, rows_of, bench_ceilings); main() there runs the sections.
#pragma once

namespace {

// ============================================================================================
// Dense projections (cuBLASLt)
// ============================================================================================
struct GemmDef {
  std::string name;
  int N, K, batch;
  long long ldx, ldw, ldd, sx, sw, sd;  // 0 = packed
  int attn_tp = 0;                       // > 0: the shape on one GPU of an attention-TP group (row field "attn_tp")
  long only_m = 0;                       // > 0: this M only (--proj-point), else the M grid
};
// The own FP8 block-scaled GEMM (proj_fp8.cu, split-K wgmma) at one point, beside the cuBLASLt
// row of the same point: variant "<gemm>/fp8_block_scale_own", row fields bt, split, tiles.
// Random e4m3 operands and random scales (the cuBLASLt rows use all-ones scales: same work).
// PROJ_OWN_SET (environment): "new" (default) tunes over every form (128- and 64-row weight tiles,
// PDL on and off, consumer pipelines 0-2); "old" over helper pj's forms (eighteenth session: pipe 0
// only); "both": the new row plus a "<gemm>/fp8_block_scale_own_old" row tuned over the old forms
// (same-run comparison; the merge script leaves *_old rows out of the tables).
// Helper pj3 (twentieth session): "rule" = the plan's untuned choice launched with PDL (pipe from
// PROJ_OWN_PIPE, default 0): one form per M range, as the tables should measure; PROJ_OWN_EXTRA (comma
// list of old, rule, ts) adds rows "<gemm>/fp8_block_scale_own_<x>" beside the main one; "ts" = tuned over
// the token-split form only (64-row weight tiles x bt 128: splits, reduction, pipe 0/1).
std::string proj_own_set() {
  const char* e = std::getenv("PROJ_OWN_SET");
  return e && *e ? std::string(e) : std::string("new");
}
enum class OwnMode { kNew, kOld, kRule, kTs };
int proj_own_pipe() {
  const char* e = std::getenv("PROJ_OWN_PIPE");
  return e && *e ? std::atoi(e) : 0;
}
void bench_proj_own(OpRun& r, const GemmDef& d, long M, const std::array<int, 6>* fc = nullptr, OwnMode mode = OwnMode::kNew,
                    const char* suffix = "") {
  const bool old_forms = mode == OwnMode::kOld;
  const int fbt = fc ? (*fc)[0] : 0, fsplit = fc ? (*fc)[1] : 0, fcl = fc ? (*fc)[2] : 0;
  const int frows = fc ? (*fc)[3] : 0, fpipe = fc ? (*fc)[4] : (mode == OwnMode::kRule ? proj_own_pipe() : 0);
  const int fpdl = fc ? (*fc)[5] : (mode == OwnMode::kRule ? 1 : 0);
  const std::string var = d.name + "/fp8_block_scale_own" + suffix +
                          (fc ? "_bt" + std::to_string(fbt) + "_s" + std::to_string(fsplit) + (fcl ? "_cl" : "") +
                                    (frows ? "_r" + std::to_string(frows) : std::string()) +
                                    (fpipe ? "_p" + std::to_string(fpipe) : std::string()) + (fpdl ? "_pdl" : "")
                              : std::string());
  const double flops = 2.0 * M * d.N * d.K;
  const double bytes = 1.0 * M * d.K + 1.0 * d.N * d.K + 2.0 * M * d.N;
  auto X = std::make_shared<DevBuf<uint8_t>>();
  auto W = std::make_shared<std::vector<DevBuf<uint8_t>>>();
  auto XS = std::make_shared<DevBuf<float>>(), WS = std::make_shared<DevBuf<float>>();
  auto Dd = std::make_shared<DevBuf<bf16>>();
  auto Wk = std::make_shared<DevBuf<uint8_t>>();
  auto extra = std::make_shared<json>(json::object());
  json shape = {{"M", M}, {"N", d.N}, {"K", d.K}, {"batch", 1}, {"gemm", d.name}};
  if (d.attn_tp) shape["attn_tp"] = d.attn_tp;
  r.point(var, shape, {{"in", "fp8_e4m3"}, {"out", "bf16"}, {"scales", "fp8_block_scale"}}, flops, bytes,
          [&, X, W, XS, WS, Dd, Wk, extra]() {
            Fp8DenseConfig c = fp8_dense_plan(static_cast<int>(M), d.N, d.K, fsplit, fbt, fcl, frows, fpdl, fpipe);
            (*extra)["kernel"] = "own_wgmma_splitk";
            const double wbytes = 1.0 * d.N * d.K;
            const int ns = nsets(wbytes + 1.0 * M * d.K, 16);
            W->resize(ns);
            for (auto& w : *W) {
              w.alloc(static_cast<size_t>(wbytes));
              fill_e4m3(w.p, w.n, 8.f, seed());
            }
            X->alloc(static_cast<size_t>(M) * d.K);
            fill_e4m3(X->p, X->n, 8.f, seed());
            const int ld = static_cast<int>((M + 3) / 4 * 4), KB = d.K / 128;
            XS->alloc(static_cast<size_t>(KB) * ld);
            fill_uniform_f32(XS->p, XS->n, 0.5f, 2.f, seed());
            WS->alloc(static_cast<size_t>((d.N + 127) / 128) * KB);
            fill_uniform_f32(WS->p, WS->n, 0.5f, 2.f, seed());
            Dd->alloc(static_cast<size_t>(M) * d.N);
            const int Mi = static_cast<int>(M), KBl = d.K / 128;
            if (!fc && mode != OwnMode::kRule && PROJ_OWN_TUNE) {
              // per-shape tuning, as engines do offline: the heuristic's tile width and its neighbour,
              // splits {S, S/2, 2S, 1}, atomic or cluster reduction; each candidate timed as 3 x 20
              // back-to-back calls between events (best of 3), the fastest is then measured
              // new forms: 64-row weight tiles (bt <= 64) beside the 128-row ones, all with PDL; the
              // winner is then also timed without PDL
              std::vector<Fp8DenseConfig> cands;
              std::vector<int> bts = {c.bt};
              if (c.bt == 64 && M > 32) bts.push_back(128);
              if (c.bt > 8) bts.push_back(c.bt / 2);
              // pipe (consumer pipeline): the candidates run the overlapped form (2) where it exists, else
              // the staged weight scales (1); the winner is then also timed at the other pipes (old: 0 only)
              const int pdl = 1;
              auto pipe_of = [&](int rows, int bt) { return old_forms ? 0 : (bt > 128 || (rows == 128 && bt == 64) ? 1 : 2); };
              if (mode == OwnMode::kTs) {  // the token-split form only: splits x reduction x pipe 0 / 1
                const int s0 = fp8_dense_plan(Mi, d.N, d.K, 0, 128, 0, 64).split;
                for (int sp : {s0, s0 / 2, s0 * 2, 1, 2, 4, 8})
                  for (int cl : {0, 1})
                    for (int pp : {0, 1}) {
                      if (sp < 1 || sp > KBl || (cl && (sp < 2 || sp > 8))) continue;
                      const Fp8DenseConfig k = fp8_dense_plan(Mi, d.N, d.K, sp, 128, cl, 64, pdl, pp);
                      bool dup = false;
                      for (const auto& o : cands) dup |= o.split == k.split && o.cluster == k.cluster && o.pipe == k.pipe;
                      if (!dup) cands.push_back(k);
                    }
                bts.clear();
              }
              for (int rows : {128, 64}) {
                for (int bt : bts) {
                  if (rows == 64 && bt > 64) continue;
                  const int s0 = fp8_dense_plan(Mi, d.N, d.K, 0, bt, 0, rows).split;
                  for (int sp : {s0, s0 / 2, s0 * 2, 1, 2, 4, 8})
                    for (int cl : {0, 1}) {
                      if (sp < 1 || sp > KBl || (cl && (sp < 2 || sp > 8))) continue;
                      if (rows == 64 && sp == s0 * 2 && sp > 8) continue;  // fewer candidates: 64-row tiles need fewer splits
                      const Fp8DenseConfig k = fp8_dense_plan(Mi, d.N, d.K, sp, bt, cl, rows, pdl, pipe_of(rows, bt));
                      bool dup = false;
                      for (const auto& o : cands)
                        dup |= o.bt == k.bt && o.split == k.split && o.cluster == k.cluster && o.rows == k.rows;
                      if (!dup) cands.push_back(k);
                    }
                }
              }
              size_t wmax = 0;
              for (const auto& k : cands) wmax = std::max(wmax, fp8_dense_workspace_bytes(k));
              Wk->alloc(wmax + 1);
              SS_CUDA(cudaMemset(Wk->p, 0, Wk->n));
              cudaEvent_t e0, e1;
              SS_CUDA(cudaEventCreate(&e0));
              SS_CUDA(cudaEventCreate(&e1));
              double best = 1e30;
              json tried = json::array();
              auto time_cfg = [&](const Fp8DenseConfig& k) {
                auto run = [&](int i) {
                  fp8_dense_gemm(X->p, XS->p, ld, (*W)[i % W->size()].p, WS->p, Dd->p, Mi, d.N, d.K, Wk->p, Wk->n, 0,
                                 k.split, k.bt, k.cluster ? 1 : 0, k.rows, k.pdl ? 1 : 0, k.pipe);
                };
                for (int i = 0; i < 3; ++i) run(i);
                double t = 1e30;
                for (int rep = 0; rep < 3; ++rep) {
                  SS_CUDA(cudaEventRecord(e0, cudaStreamPerThread));
                  for (int i = 0; i < 20; ++i) run(i);
                  SS_CUDA(cudaEventRecord(e1, cudaStreamPerThread));
                  SS_CUDA(cudaEventSynchronize(e1));
                  float ms = 0;
                  SS_CUDA(cudaEventElapsedTime(&ms, e0, e1));
                  t = std::min(t, 1000.0 * ms / 20);
                }
                tried.push_back({{"bt", k.bt}, {"split", k.split}, {"cluster", k.cluster}, {"rows", k.rows}, {"pdl", k.pdl}, {"pipe", k.pipe},
                                 {"us_stream", t}});
                if (t < best) { best = t; c = k; }
              };
              for (const auto& k : cands) time_cfg(k);
              if (mode == OwnMode::kNew) {  // the winner at the other consumer pipelines
                const Fp8DenseConfig w0 = c;
                for (int pp : {0, 1, 2})
                  if (pp != w0.pipe && !(pp == 2 && (w0.bt > 128 || (w0.rows == 128 && w0.bt == 64)))) {
                    Fp8DenseConfig k = w0;
                    k.pipe = pp;
                    time_cfg(k);
                  }
              }
              if (c.pdl) {  // the winner without PDL
                Fp8DenseConfig k = c;
                k.pdl = false;
                time_cfg(k);
              }
              SS_CUDA(cudaEventDestroy(e0));
              SS_CUDA(cudaEventDestroy(e1));
              (*extra)["tuned_over"] = tried;
            }
            (*extra)["bt"] = c.bt;
            (*extra)["split"] = c.split;
            (*extra)["cluster_reduction"] = c.cluster;
            (*extra)["rows"] = c.rows;
            (*extra)["pdl"] = c.pdl;
            (*extra)["pipe"] = c.pipe;
            (*extra)["tiles"] = c.m_tiles * c.n_tiles;
            const size_t wsb = fp8_dense_workspace_bytes(c);
            Wk->alloc(wsb + 1);
            SS_CUDA(cudaMemset(Wk->p, 0, Wk->n));
            const int cs = c.split, cb = c.bt, cc = c.cluster ? 1 : 0, cr = c.rows, cp = c.pdl ? 1 : 0, cpi = c.pipe;
            return std::function<void(int)>([=](int i) {
              fp8_dense_gemm(X->p, XS->p, ld, (*W)[i % W->size()].p, WS->p, Dd->p, Mi, d.N, d.K, Wk->p, Wk->n, 0, cs, cb, cc, cr,
                             cp, cpi);
            });
          },
          extra);
  W->clear();
}

void bench_proj(const std::string& op, const std::string& model, const std::vector<GemmDef>& defs,
                const std::vector<GemmKind>& kinds, double budget) {
  OpRun r(op, model,
          "dense projections of the layer through cuBLASLt: D[M,N] = X[M,K] W[N,K]^T (M = tokens), grouped/batched ones "
          "as strided batches; variant = <gemm>/<dtype>",
          "2*M*N*K*batch", "(M*K + N*K)*batch*in_bytes + M*N*batch*2", budget);
  struct Pt { const GemmDef* d; GemmKind k; long M; };
  std::vector<Pt> pts;
  for (const auto& d : defs)
    for (GemmKind k : kinds)
      if (PROJ_KINDS.empty() || PROJ_KINDS.count(gemm_kind_name(k)))
      for (long M : d.only_m ? std::vector<long>{d.only_m} : qgrid(grid(1, PROJ_M_MAX)))
        if (d.only_m || PROJ_M_ONLY.empty() || PROJ_M_ONLY.count(M))
        // --proj-m-max: leave out M whose activations and output would not fit beside the
        // rotated weights (60 GB cap, like mla_prefill's 40 GB of K/V)
        if (1.0 * M * d.K * d.batch * 2 + 2.0 * M * d.N * d.batch <= 60e9) pts.push_back({&d, k, M});
  std::stable_sort(pts.begin(), pts.end(), [](const Pt& a, const Pt& b) {
    return 1.0 * a.M * a.d->N * a.d->K * a.d->batch < 1.0 * b.M * b.d->N * b.d->K * b.d->batch;
  });
  std::map<std::string, int> unsupported;
  for (const auto& p : pts) {
    const GemmDef& d = *p.d;
    const std::string var = d.name + "/" + gemm_kind_name(p.k);
    const double inb = p.k == GemmKind::kBF16 ? 2 : 1;
    const double flops = 2.0 * p.M * d.N * d.K * d.batch;
    const double xb = 1.0 * p.M * (d.ldx ? d.ldx : d.K) * inb;  // X (whole rows when strided)
    const double bytes = (1.0 * p.M * d.K + 1.0 * d.N * d.K) * d.batch * inb + 2.0 * p.M * d.N * d.batch;
    auto X = std::make_shared<DevBuf<uint8_t>>();
    auto W = std::make_shared<std::vector<DevBuf<uint8_t>>>();
    auto Dd = std::make_shared<DevBuf<bf16>>();
    auto plan = std::make_shared<GemmPlan>();
    auto extra = std::make_shared<json>(json::object());
    bool unsup = false;
    json shape = {{"M", p.M}, {"N", d.N}, {"K", d.K}, {"batch", d.batch}, {"gemm", d.name}};
    if (d.attn_tp) shape["attn_tp"] = d.attn_tp;
    r.point(var, shape,
            {{"in", p.k == GemmKind::kBF16 ? "bf16" : "fp8_e4m3"}, {"out", "bf16"}, {"scales", gemm_kind_name(p.k)}}, flops,
            bytes, [&, X, W, Dd, plan, xb, inb, extra]() {
              GemmShape sh;
              sh.M = static_cast<int>(p.M); sh.N = d.N; sh.K = d.K; sh.batch = d.batch;
              sh.ldx = d.ldx; sh.ldw = d.ldw; sh.ldd = d.ldd; sh.stride_x = d.sx; sh.stride_w = d.sw; sh.stride_d = d.sd;
              bool ok = plan->create(p.k, sh);
              // Block-scaled FP8 may need M padded (engines pad token counts): retry and say so.
              for (int pad : {16, 64, 128}) {
                if (ok || p.k != GemmKind::kFP8Block) break;
                sh.M = static_cast<int>((p.M + pad - 1) / pad * pad);
                if (sh.M == p.M) continue;
                ok = plan->create(p.k, sh);
                if (ok) (*extra)["m_padded_to"] = sh.M;
              }
              if (!ok) {
                unsup = true;
                throw std::runtime_error("cuBLASLt offers no algorithm");
              }
              const double wbytes = 1.0 * d.N * d.K * d.batch * inb;
              const int ns = nsets(wbytes + xb, 16);
              W->resize(ns);
              for (auto& w : *W) {
                w.alloc(static_cast<size_t>(wbytes));
                if (inb == 2) fill_uniform_bf16(reinterpret_cast<bf16*>(w.p), w.n / 2, -1, 1, seed());
                else fill_e4m3(w.p, w.n, 8.f, seed());
              }
              const size_t xelems = static_cast<size_t>(sh.M) * (d.ldx ? d.ldx : static_cast<long long>(d.K) * d.batch);
              X->alloc(static_cast<size_t>(xelems * inb));
              if (inb == 2) fill_uniform_bf16(reinterpret_cast<bf16*>(X->p), xelems, -1, 1, seed());
              else fill_e4m3(X->p, xelems, 8.f, seed());
              Dd->alloc(static_cast<size_t>(sh.M) * (d.ldd ? d.ldd : static_cast<long long>(d.N) * d.batch));
              return std::function<void(int)>([=](int i) { plan->run(X->p, (*W)[i % W->size()].p, Dd->p); });
            }, extra);
    if (unsup) unsupported[var]++;
    W->clear();
    if (p.k == GemmKind::kFP8Block && d.batch == 1 && !d.ldx && p.M <= PROJ_OWN_M_MAX) {
      const std::string set = proj_own_set();
      bench_proj_own(r, d, p.M, nullptr, set == "old" ? OwnMode::kOld : set == "rule" ? OwnMode::kRule : OwnMode::kNew);
      if (set == "both") bench_proj_own(r, d, p.M, nullptr, OwnMode::kOld, "_old");
      const char* ex = std::getenv("PROJ_OWN_EXTRA");
      const std::string extra = ex ? ex : "";
      if (extra.find("old") != std::string::npos) bench_proj_own(r, d, p.M, nullptr, OwnMode::kOld, "_old");
      if (extra.find("rule") != std::string::npos) bench_proj_own(r, d, p.M, nullptr, OwnMode::kRule, "_rule");
      if (extra.find("ts") != std::string::npos) bench_proj_own(r, d, p.M, nullptr, OwnMode::kTs, "_ts");
      for (const auto& c : PROJ_OWN_CFGS) bench_proj_own(r, d, p.M, &c);
    }
  }
  for (const auto& u : unsupported)
    SUMMARY.push_back(op + ": " + u.first + " not offered by cuBLASLt at " + std::to_string(u.second) + " M values");
  r.finish();
}

void bench_all_proj() {
  const std::vector<GemmKind> k3 = {GemmKind::kBF16, GemmKind::kFP8Block};
  const std::vector<GemmKind> v4 = {GemmKind::kFP8Block, GemmKind::kBF16, GemmKind::kFP8Tensor};
  if (!PROJ_TP.empty()) {  // K3 projections on one GPU of an attention-TP group (--proj-tp)
    std::vector<GemmDef> kda, mla;
    for (int t : PROJ_TP) {
      const int f = t > 1 ? t : 0;  // attn_tp field: none for the unsplit shape (the main table's rows)
      kda.push_back({"qkvg_fused", 4 * 12288 / t, 7168, 1, 0, 0, 0, 0, 0, 0, f});
      kda.push_back({"o_proj", 7168, 12288 / t, 1, 0, 0, 0, 0, 0, 0, f});
      kda.push_back({"f_b", 12288 / t, 128, 1, 0, 0, 0, 0, 0, 0, f});
      kda.push_back({"b_proj", 96 / t, 7168, 1, 0, 0, 0, 0, 0, 0, f});
      const int h = 96 / t;  // MLA heads per GPU; its o_proj is the KDA one (same N, K/t): measured once
      mla.push_back({"q_b", 18432 / t, 1536, 1, 0, 0, 0, 0, 0, 0, f});
      mla.push_back({"g_proj", 12288 / t, 7168, 1, 0, 0, 0, 0, 0, 0, f});
      mla.push_back({"kv_b", 24576 / t, 512, 1, 0, 0, 0, 0, 0, 0, f});
      mla.push_back({"w_uk_absorb", 512, 128, h, h * 192, 128, h * 576, 192, 512 * 128, 576, f});
      mla.push_back({"w_uv", 128, 512, h, h * 512, 512, h * 128, 512, 128 * 512, 128, f});
    }
    if (!PROJ_GEMMS.empty()) {
      for (const auto& g : PROJ_GEMMS)
        if (std::none_of(kda.begin(), kda.end(), [&](const GemmDef& d) { return d.name == g; }) &&
            std::none_of(mla.begin(), mla.end(), [&](const GemmDef& d) { return d.name == g; })) {
          std::fprintf(stderr, "bench_attn: --proj-gemms: no K3 projection \"%s\" (known: qkvg_fused, o_proj, f_b, b_proj, q_b, g_proj, kv_b, w_uk_absorb, w_uv)\n", g.c_str());
          std::exit(2);
        }
      for (auto* v : {&kda, &mla}) v->erase(std::remove_if(v->begin(), v->end(), [](const GemmDef& d) { return !PROJ_GEMMS.count(d.name); }), v->end());
    }
    if (want("dense_proj_k3_kda") && !kda.empty()) bench_proj("dense_proj_k3_kda", "kimi-k3", kda, {GemmKind::kBF16}, 22);
    if (want("dense_proj_k3_mla") && !mla.empty()) bench_proj("dense_proj_k3_mla", "kimi-k3", mla, {GemmKind::kBF16}, 26);
  }
  if (!PROJ_POINTS.empty()) {  // --proj-point: reference points (e.g. DeepGEMM's dense shapes), not fit inputs
    std::vector<GemmDef> defs;
    for (const auto& v : PROJ_POINTS) {
      GemmDef d{"point", v[1], v[2], 1, 0, 0, 0, 0, 0, 0};
      d.only_m = v[0];
      defs.push_back(d);
    }
    bench_proj("dense_proj_fp8_points", "reference", defs, {GemmKind::kFP8Block}, 60);
    return;
  }
  if (want("dense_proj_k3_kda") && PROJ_TP.empty())
    bench_proj("dense_proj_k3_kda", "kimi-k3",
               {{"qkvg_fused", 4 * 12288, 7168, 1, 0, 0, 0, 0, 0, 0},
                {"o_proj", 7168, 12288, 1, 0, 0, 0, 0, 0, 0},
                {"f_a", 128, 7168, 1, 0, 0, 0, 0, 0, 0},
                {"f_b", 12288, 128, 1, 0, 0, 0, 0, 0, 0},
                {"b_proj", 96, 7168, 1, 0, 0, 0, 0, 0, 0}},
               k3, 22);
  if (want("dense_proj_k3_mla") && PROJ_TP.empty())
    bench_proj("dense_proj_k3_mla", "kimi-k3",
               {{"q_a", 1536, 7168, 1, 0, 0, 0, 0, 0, 0},
                {"q_b", 18432, 1536, 1, 0, 0, 0, 0, 0, 0},
                {"kv_a", 576, 7168, 1, 0, 0, 0, 0, 0, 0},
                {"g_proj", 12288, 7168, 1, 0, 0, 0, 0, 0, 0},
                {"o_proj", 7168, 12288, 1, 0, 0, 0, 0, 0, 0},
                {"kv_b", 24576, 512, 1, 0, 0, 0, 0, 0, 0},
                // absorption: per head, q_nope[M,h,0:128] -> q_lat[M,h,0:512]; o_lat[M,h,512] -> o[M,h,128]
                {"w_uk_absorb", 512, 128, 96, 96 * 192, 128, 96 * 576, 192, 512 * 128, 576},
                {"w_uv", 128, 512, 96, 96 * 512, 512, 96 * 128, 512, 128 * 512, 128}},
               k3, 26);
  if (want("dense_proj_v4pro"))
    bench_proj("dense_proj_v4pro", "deepseek-v4-pro",
               {{"wq_a", 1536, 7168, 1, 0, 0, 0, 0, 0, 0},
                {"wkv", 512, 7168, 1, 0, 0, 0, 0, 0, 0},
                {"wq_b", 65536, 1536, 1, 0, 0, 0, 0, 0, 0},
                {"wo_a_grouped", 1024, 4096, 16, 65536, 4096, 16384, 4096, 1024LL * 4096, 1024},
                {"wo_b", 7168, 16384, 1, 0, 0, 0, 0, 0, 0},
                {"csa_compressor_wkv_wgate", 2048, 7168, 1, 0, 0, 0, 0, 0, 0},
                {"hca_compressor_wkv_wgate", 1024, 7168, 1, 0, 0, 0, 0, 0, 0},
                {"indexer_wq_b", 8192, 1536, 1, 0, 0, 0, 0, 0, 0},
                {"indexer_weights_proj", 64, 7168, 1, 0, 0, 0, 0, 0, 0},
                {"indexer_compressor", 512, 7168, 1, 0, 0, 0, 0, 0, 0}},
               v4, 30);
  if (want("dense_proj_v4flash"))
    bench_proj("dense_proj_v4flash", "deepseek-v4-flash",
               {{"wq_a", 1024, 4096, 1, 0, 0, 0, 0, 0, 0},
                {"wkv", 512, 4096, 1, 0, 0, 0, 0, 0, 0},
                {"wq_b", 32768, 1024, 1, 0, 0, 0, 0, 0, 0},
                {"wo_a_grouped", 1024, 4096, 8, 32768, 4096, 8192, 4096, 1024LL * 4096, 1024},
                {"wo_b", 4096, 8192, 1, 0, 0, 0, 0, 0, 0},
                {"csa_compressor_wkv_wgate", 2048, 4096, 1, 0, 0, 0, 0, 0, 0},
                {"hca_compressor_wkv_wgate", 1024, 4096, 1, 0, 0, 0, 0, 0, 0},
                {"indexer_wq_b", 8192, 1024, 1, 0, 0, 0, 0, 0, 0},
                {"indexer_weights_proj", 64, 4096, 1, 0, 0, 0, 0, 0, 0},
                {"indexer_compressor", 512, 4096, 1, 0, 0, 0, 0, 0, 0}},
               v4, 22);
}

}  // namespace
