// Benchmark driver for the MoE family: writes one servesim.kernel-table/1 JSON per op into --out.
// Usage: bench_moe --out DIR [--deadline-s S] [--quick] [--only op1,op2,...] [--w4-max-m M]
//                  [--models K3,DSV4-Pro,...] [--w4-experts 8,32] [--w4-max-rows 32768] [--shared-tp 8,4,2]
//                  [--w4-variants 0,1,...] [--fp8-experts 8,32] [--fp8-max-m M]
// Sections run in priority order; each checks the wall-clock deadline between measurements and
// writes what it measured, so a run that hits the deadline still returns tables.
// Coverage options (defaults reproduce the main sweep): --models keeps the grouped-GEMM, activation
// and shared-expert shapes of those models; --w4-experts / --w4-max-rows set the W4A16 sweep's active
// experts and its largest G*m; --shared-tp measures only K3's shared expert split over attention TP t
// (I = 6144/t, rows carry "attn_tp") in the activation and shared-expert sweeps. --fp8-experts /
// --fp8-max-m set the FP8 grid sweeps' active experts (cuBLASLt moe_grouped_gemm_fp8 and the own
// fp8own grid; default 8,32) and their largest tokens per expert (default kMaxRows / G).
#include "common/bench.cuh"
#include "moe/moe.cuh"
#include "moe/test_util.cuh"

#include <cuda_fp8.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using namespace servesim::kernels;
using namespace servesim::kernels::moe;
using json = nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

struct Ctx {
  GpuInfo gpu;
  cublasHandle_t h = nullptr;
  LtFp8* lt = nullptr;
  cudaStream_t s = nullptr;
  std::string out;
  double deadline_s = 1e9;
  Clock::time_point t0 = Clock::now();
  bool quick = false;
  std::set<std::string> only;
  std::vector<std::string> summary;
  double hbm_tbps = 0, dense_tflops = 0;
  void* cublas_ws = nullptr;
  std::map<std::string, double> w4_tflops;  // key model/matrix/G/m
  std::vector<int> w4_variants;             // kernel variants that passed test_moe on this machine
  std::string w4_label = "w4a16";
  std::set<std::string> models;           // --models (empty: all)
  std::vector<int> w4_experts = {8, 32};  // --w4-experts
  long long w4_max_rows = 32768;          // --w4-max-rows
  long long w4_max_m = 1 << 30;
  long long w4_min_m = 0;                 // --w4-min-m: smallest tokens per expert of the W4A16 sweep           // --w4-max-m: largest tokens per expert of the W4A16 sweep
  std::vector<int> shared_tp;             // --shared-tp (empty: the unsplit shapes of every model)
  int fp8_variant = -1;                   // --fp8-variant: bench form code of the own FP8 sweep (-1: fastest at prefill)
  std::vector<int> fp8_experts = {8, 32};  // --fp8-experts: active experts of the FP8 grid sweeps
  long long fp8_max_m = 1 << 30;           // --fp8-max-m: largest tokens per expert of the FP8 grid sweeps
};

double elapsed(const Ctx& c) { return std::chrono::duration<double>(Clock::now() - c.t0).count(); }
bool time_left(const Ctx& c) { return elapsed(c) < c.deadline_s; }
bool want(const Ctx& c, const std::string& op) { return c.only.empty() || c.only.count(op); }
bool want_model(const Ctx& c, const std::string& m) { return c.models.empty() || c.models.count(m); }
using servesim::kernels::int_list;

/// Powers of two and the points 1.5x between them, in [lo, hi]: 1,2,3,4,6,8,12,...
std::vector<long long> grid(long long lo, long long hi) {
  std::vector<long long> v;
  for (long long p = 1; p <= hi; p *= 2) {
    if (p >= lo) v.push_back(p);
    const long long m = p * 3 / 2;
    if (m > p && m >= lo && m <= hi) v.push_back(m);
  }
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}
std::vector<long long> pick(const Ctx& c, std::vector<long long> full, std::vector<long long> quick) {
  if (!c.quick) return full;
  std::vector<long long> q;
  for (long long v : quick)
    if (!full.empty() && v <= full.back()) q.push_back(v);
  return q;
}

void note(Ctx& c, const std::string& s) {
  std::printf("%s\n", s.c_str());
  std::fflush(stdout);
  c.summary.push_back(s);
}

Timing timed(Ctx& c, const std::function<void(int)>& f) { return time_op(f, c.s, 3, 20, 10.0); }

/// Per-call time inside a CUDA graph of n back-to-back calls (launch gaps as an engine's captured
/// step has them): median over 7 replays of (graph time / n), microseconds.
double graph_us(Ctx& c, const std::function<void(int)>& f, int n = 20) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  SS_CUDA(cudaStreamBeginCapture(c.s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < n; ++i) f(i);
  SS_CUDA(cudaStreamEndCapture(c.s, &g));
  SS_CUDA(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b;
  SS_CUDA(cudaEventCreate(&a));
  SS_CUDA(cudaEventCreate(&b));
  std::vector<double> v;
  for (int r = 0; r < 9; ++r) {
    SS_CUDA(cudaEventRecord(a, c.s));
    SS_CUDA(cudaGraphLaunch(ge, c.s));
    SS_CUDA(cudaEventRecord(b, c.s));
    SS_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    SS_CUDA(cudaEventElapsedTime(&ms, a, b));
    if (r >= 2) v.push_back(1000.0 * ms / n);
  }
  SS_CUDA(cudaEventDestroy(a));
  SS_CUDA(cudaEventDestroy(b));
  SS_CUDA(cudaGraphExecDestroy(ge));
  SS_CUDA(cudaGraphDestroy(g));
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ---- routing generation (host) -------------------------------------------------------------------
struct Routing {
  std::vector<int> ids;
  std::vector<float> w;
  int active = 0, max_count = 0;
};
/// Top-k distinct experts per token; skew 0 = uniform, else Zipf(skew) over a random ranking.
Routing make_routing(std::mt19937_64& rng, int T, int E, int k, double skew, float scale) {
  Routing r;
  r.ids.resize(static_cast<size_t>(T) * k);
  r.w.resize(static_cast<size_t>(T) * k);
  std::vector<double> cdf(E);
  std::vector<int> rank(E);
  std::iota(rank.begin(), rank.end(), 0);
  std::shuffle(rank.begin(), rank.end(), rng);
  double acc = 0;
  for (int e = 0; e < E; ++e) { acc += skew > 0 ? std::pow(rank[e] + 1.0, -skew) : 1.0; cdf[e] = acc; }
  std::uniform_real_distribution<double> u(0, acc);
  std::uniform_real_distribution<float> uw(0.1f, 1.f);
  std::vector<int> cnt(E, 0);
  for (int t = 0; t < T; ++t) {
    int got = 0;
    int* row = &r.ids[static_cast<size_t>(t) * k];
    while (got < k) {
      const int e = static_cast<int>(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin());
      const int ee = std::min(e, E - 1);
      if (std::find(row, row + got, ee) == row + got) row[got++] = ee;
    }
    float s = 0;
    for (int j = 0; j < k; ++j) { r.w[t * k + j] = uw(rng); s += r.w[t * k + j]; }
    for (int j = 0; j < k; ++j) { r.w[t * k + j] *= scale / s; cnt[row[j]]++; }
  }
  for (int e = 0; e < E; ++e) { r.active += cnt[e] > 0; r.max_count = std::max(r.max_count, cnt[e]); }
  return r;
}

// ---- ceilings -----------------------------------------------------------------------------------
void bench_ceilings(Ctx& c) {
  Table tab("moe_ref_ceilings", "H200", "Measured ceilings used by the MoE targets: device-to-device copy bandwidth "
            "and cuBLAS bf16 dense GEMM rate", "2*M*N*K for the GEMM, 0 for the copy",
            "2*bytes copied (read + write) for the copy; 2*(M*K+N*K+M*N) for the GEMM", c.gpu);
  {
    const size_t n = size_t(2) << 30;
    DevBuf<uint8_t> a(n), b(n);
    SS_CUDA(cudaMemset(a.p, 1, n));
    const Timing t = timed(c, [&](int) { SS_CUDA(cudaMemcpyAsync(b.p, a.p, n, cudaMemcpyDeviceToDevice, c.s)); });
    tab.add("hbm_copy_d2d", {{"bytes_copied", n}}, {{"data", "u8"}}, t, 0, 2.0 * n);
    c.hbm_tbps = 2.0 * n / (t.us_median * 1e-6) / 1e12;
    note(c, "ceiling hbm copy 2 GiB: " + std::to_string(c.hbm_tbps) + " TB/s (read+write)");
  }
  {
    const int M = 8192, N = 8192, K = 8192;
    DevBuf<bf16> A(size_t(M) * K), B(size_t(N) * K), C(size_t(M) * N);
    fill_bf16(A.p, A.n, 1, 1.f, c.s);
    fill_bf16(B.p, B.n, 2, 1.f, c.s);
    const Timing t = timed(c, [&](int) { cublas_gemm_bf16(c.h, A.p, B.p, C.p, M, N, K, false, 0.f, c.s); });
    const double fl = 2.0 * M * N * K;
    tab.add("cublas_bf16_8192", {{"M", M}, {"N", N}, {"K", K}}, {{"a", "bf16"}, {"b", "bf16"}, {"out", "bf16"}}, t, fl,
            2.0 * (double(M) * K + double(N) * K + double(M) * N));
    c.dense_tflops = fl / (t.us_median * 1e-6) / 1e12;
    note(c, "ceiling cublas bf16 8192^3: " + std::to_string(c.dense_tflops) + " TFLOP/s");
  }
  tab.write(c.out);
}

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
          shp["kernel_variant"] = w4a16_kernel_for(bt, s.K, xrows);  // the kernel that ran (was the set variant)
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

// ---- own FP8 block-scaled grouped GEMM (gemm_fp8.cu) ---------------------------------------------------
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

// ---- MoE layers -----------------------------------------------------------------------------------
struct LayerCfg {
  std::string name, model;
  int D, E, k, I;
  bool k3;
  float scale;
};

/// --only w4cmp: W4A16 kernel variants (--w4-variants, e.g. 5,7) interleaved, twice, at the decode
/// shapes of NOTES.md §8 (K3 w13/w2 G 8/32, DSV4-Pro w13 G 32, DSV4-Flash w2 G 8/32), m = 1..8,
/// 12..64 and 256, 2048 tokens per expert: event-timed median and per-call time in a 20-call graph. Printed lines
/// "w4cmp ..." (the log is the record; no table rows).
void bench_w4cmp(Ctx& c) {
  struct Sh { GemmShape s; int G; };
  const std::vector<Sh> shapes = {{{"K3", "w13", 2 * kK3Inter, kK3Latent}, 8},   {{"K3", "w13", 2 * kK3Inter, kK3Latent}, 32},
                                  {{"K3", "w2", kK3Latent, kK3Inter}, 8},        {{"K3", "w2", kK3Latent, kK3Inter}, 32},
                                  {{"DSV4-Pro", "w13", 2 * kV4ProInter, kV4ProHidden}, 32},
                                  {{"DSV4-Flash", "w2", kV4FlashHidden, kV4FlashInter}, 8},
                                  {{"DSV4-Flash", "w2", kV4FlashHidden, kV4FlashInter}, 32}};
  const std::vector<long long> ms = {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64, 256, 2048};  // 256, 2048: prefill tiles (variant 0)
  std::vector<int> vs = c.w4_variants;
  if (vs.empty()) vs = {5};
  std::map<std::tuple<int, long long, int>, std::vector<std::pair<double, double>>> res;  // (shape, m, v) -> (event, graph)
  std::mt19937_64 rng(7);
  const int reps = 2;
  for (int rep = 0; rep < reps; ++rep)
    for (int si = 0; si < int(shapes.size()); ++si) {
      if (!time_left(c)) break;
      const auto& [s, G] = shapes[si];
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
    std::vector<double> r18, r_rest, g18;
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
          if (m <= 8) g18.push_back(bg / base_g);
        }
      }
      note(c, line);
    }
    if (!r18.empty()) {
      char b[240];
      std::snprintf(b, sizeof b, "w4cmp %s %s G=%d: median t(v%d)/t(v%d) m=1-8 event %.3f graph %.3f; m=12-2048 event median %.3f max %.3f",
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

int main(int argc, char** argv) {
  Ctx c;
  std::string only;
  bool probe = false, fp8_probe = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) c.out = argv[++i];
    else if (a == "--deadline-s" && i + 1 < argc) c.deadline_s = std::atof(argv[++i]);
    else if (a == "--quick") c.quick = true;
    else if (a == "--w4-max-m" && i + 1 < argc) c.w4_max_m = std::atoll(argv[++i]);
    else if (a == "--w4-min-m" && i + 1 < argc) c.w4_min_m = std::atoll(argv[++i]);
    else if (a == "--probe") probe = true;
    else if (a == "--fp8-probe") fp8_probe = true;
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--w4-variants" && i + 1 < argc) c.w4_variants = int_list(argv[++i]);
    else if (a == "--w4-experts" && i + 1 < argc) c.w4_experts = int_list(argv[++i]);
    else if (a == "--w4-max-rows" && i + 1 < argc) c.w4_max_rows = std::atoll(argv[++i]);
    else if (a == "--shared-tp" && i + 1 < argc) c.shared_tp = int_list(argv[++i]);
    else if (a == "--fp8-variant" && i + 1 < argc) c.fp8_variant = std::atoi(argv[++i]);
    else if (a == "--fp8-experts" && i + 1 < argc) c.fp8_experts = int_list(argv[++i]);
    else if (a == "--fp8-max-m" && i + 1 < argc) c.fp8_max_m = std::atoll(argv[++i]);
    else if (a == "--models" && i + 1 < argc) {
      std::stringstream ms(argv[++i]);
      for (std::string t; std::getline(ms, t, ',');)
        if (!t.empty()) c.models.insert(t);
    }
    else {
      std::fprintf(stderr, "usage: bench_moe --out DIR [--deadline-s S] [--quick] [--only a,b] [--w4-max-m 64] [--w4-variants 0,2] "
                           "[--models K3,DSV4-Pro] [--w4-experts 8,32] [--w4-max-rows 32768] [--shared-tp 8,4,2] "
                           "[--fp8-variant 5] [--fp8-experts 8,32] [--fp8-max-m 4096]\n");
      return 2;
    }
  }
  if (c.out.empty()) { std::fprintf(stderr, "--out is required\n"); return 2; }
  std::stringstream ss(only);
  for (std::string t; std::getline(ss, t, ',');) if (!t.empty()) c.only.insert(t);
  try {
    if (!cuda_device_available()) { std::fprintf(stderr, "no CUDA device\n"); return 1; }
    SS_CUDA(cudaSetDevice(0));
    c.gpu = query_gpu(0);
    SS_CUDA(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
    SS_CUBLAS(cublasCreate(&c.h));
    SS_CUDA(cudaMalloc(&c.cublas_ws, 64u << 20));
    SS_CUBLAS(cublasSetWorkspace(c.h, c.cublas_ws, 64u << 20));
    c.lt = lt_fp8_create();
    if (c.w4_variants.empty()) {
      c.w4_label = "w4a16_UNVERIFIED";
      note(c, "WARNING: no W4A16 kernel variant passed test_moe here; timing variant 0, rows labelled w4a16_UNVERIFIED");
    } else {
      w4a16_set_variant(c.w4_variants[0]);
    }
    if (fp8_probe) {  // ncu probe of the own FP8 kernel: contiguous 8x4096 and 8x1024 (4096x7168, bt 256; bt 128
                      // in the tokens-as-M forms of --fp8-variant >= 4) and masked 8x8 (4096x2048)
      const int form = std::max(0, c.fp8_variant);
      fp8_apply_form(form);
      for (auto [N, K, G, m, bt, contig] : std::vector<std::tuple<int, int, int, int, int, bool>>{
               {4096, 7168, 8, 4096, form >= 4 ? 128 : 256, true}, {4096, 7168, 8, 1024, form >= 4 ? 128 : 256, true},
               {4096, 2048, 8, 8, 8, false}}) {
        Fp8Buffers b(c, N, K, G, (long long)G * m);
        std::vector<int> eids(G);
        std::iota(eids.begin(), eids.end(), 0);
        DevBuf<int> deids(G), dmm(G);
        deids.upload(eids);
        dmm.upload(std::vector<int>(G, m));
        for (int r = 0; r < 2; ++r) {
          if (contig) {
            std::vector<int> roff(G + 1), toff(G + 1);
            for (int g = 0; g <= G; ++g) { roff[g] = g * m; toff[g] = g * ((m + bt - 1) / bt); }
            DevBuf<int> droff(G + 1), dtoff(G + 1);
            droff.upload(roff);
            dtoff.upload(toff);
            fp8_grouped_gemm_contiguous(b.x.p, b.rows, b.xs.p, int(b.rows), b.w.p, b.ws.p, G, deids.p, droff.p, dtoff.p, G, N,
                                        K, bt, toff[G], b.y.p, c.s);
            SS_CUDA(cudaStreamSynchronize(c.s));
          } else {
            fp8_grouped_gemm_masked(b.x.p, b.xs.p, int(b.rows), b.w.p, b.ws.p, G, deids.p, dmm.p, G, m, N, K, bt, b.y.p, c.s);
          }
        }
        SS_CUDA(cudaStreamSynchronize(c.s));
      }
      std::printf("fp8 probe done\n");
      return 0;
    }
    if (probe) {  // a few launches for ncu: K3 w13, G=8, m=8 (bt 8) and m=1024 (bt 256), twice each
      const GemmShape s{"K3", "w13", 2 * kK3Inter, kK3Latent};
      const int G = 8;
      DevBuf<uint8_t> pool(w4a16_matrix_bytes(s.N, s.K) * G);
      fill_w4a16_pool(pool.p, G, s.N, s.K, 11, 118, 124, c.s);
      DevBuf<bf16> x(size_t(1024) * G * s.K), y(size_t(1024) * G * s.N);
      fill_bf16(x.p, x.n, 3, 1.f, c.s);
      DevBuf<int> droff(G + 1), dtoff(G + 1);
      for (long long m : {8ll, 1024ll}) {
        const int bt = w4a16_pick_bt(double(m));
        std::vector<int> roff(G + 1), toff(G + 1);
        for (int g = 0; g <= G; ++g) { roff[g] = int(g * m); toff[g] = int(g * ((m + bt - 1) / bt)); }
        droff.upload(roff);
        dtoff.upload(toff);
        for (int r = 0; r < 2; ++r)
          w4a16_grouped_gemm(x.p, pool.p, nullptr, droff.p, dtoff.p, G, s.N, s.K, bt, toff[G], y.p, c.s, 1024ll * G);
      }
      SS_CUDA(cudaStreamSynchronize(c.s));
      std::printf("probe done (variant %d)\n", w4a16_variant());
      return 0;
    }
    std::printf("bench_moe on %s, %d SMs, L2 %lld B, deadline %.0f s%s\n", c.gpu.name.c_str(), c.gpu.sm_count,
                c.gpu.l2_bytes, c.deadline_s, c.quick ? " (quick)" : "");
    auto section = [&](const std::string& name, const std::vector<std::string>& ops, void (*fn)(Ctx&)) {
      bool any = false;
      for (const auto& o : ops) any = any || want(c, o);
      if (!any) return;
      if (!time_left(c)) { note(c, "SKIPPED (deadline): " + name); return; }
      const double t0 = elapsed(c);
      try {
        fn(c);
      } catch (const std::exception& e) {
        note(c, "ERROR in " + name + ": " + e.what());
        cudaGetLastError();
      }
      note(c, "section " + name + " took " + std::to_string(elapsed(c) - t0) + " s");
    };
    section("ceilings", {"moe_ref_ceilings"}, bench_ceilings);
    section("w4a16", {"moe_grouped_gemm_w4a16"}, bench_w4a16);
    section("w4cmp", {"w4cmp"}, bench_w4cmp);
    section("w4pf", {"w4pf"}, bench_w4pf);
    section("bf16", {"moe_grouped_gemm_bf16"}, bench_bf16_grouped);
    section("layers", {"moe_layer_k3", "moe_layer_dsv4"}, bench_layers);
    section("fp8", {"moe_grouped_gemm_fp8"}, bench_fp8);
    section("fp8own", {"fp8own"}, bench_fp8_own);  // own kernel: tables in <out>/fp8own/
    section("routers", {"moe_router_k3", "moe_router_dsv4"}, bench_routers);
    section("dispatch", {"moe_permute", "moe_combine"}, bench_dispatch);
    section("act", {"moe_act_situ", "moe_act_swiglu"}, bench_act);
    section("dense", {"latentmoe_proj", "moe_shared_expert", "dense_ffn_k3"}, bench_dense);
    section("mhc", {"mhc_mix"}, bench_mhc);
    std::printf("\n==== bench_moe summary (%.0f s) ====\n", elapsed(c));
    for (const auto& s : c.summary) std::printf("%s\n", s.c_str());
    lt_fp8_destroy(c.lt);
    cublasDestroy(c.h);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_moe: %s\n", e.what());
    return 1;
  }
  return 0;
}
