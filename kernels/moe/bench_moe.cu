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
#include <filesystem>
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

}  // namespace

// The sections, in their original order (one translation unit: the parts use the code above).
#include "moe/bench_moe_gemm.cuh"
#include "moe/bench_moe_fp8own.cuh"
#include "moe/bench_moe_layers.cuh"
#include "moe/bench_moe_ops.cuh"

int main(int argc, char** argv) {
  Ctx c;
  std::string only;
  bool probe = false, fp8_probe = false;
  std::string probe_shapes;             // --probe-shapes MODEL:MATRIX:G:m,... (w4k: the decode probe at other shapes)
  std::vector<int> probe_variants;      // --probe-variants: W4A16 variants the shape probe launches (default: --w4-variants)
  int probe_reps = 1;                   // --probe-reps: launches per shape and variant (a fresh weight set each)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) c.out = argv[++i];
    else if (a == "--deadline-s" && i + 1 < argc) c.deadline_s = std::atof(argv[++i]);
    else if (a == "--quick") c.quick = true;
    else if (a == "--w4-max-m" && i + 1 < argc) c.w4_max_m = std::atoll(argv[++i]);
    else if (a == "--w4-min-m" && i + 1 < argc) c.w4_min_m = std::atoll(argv[++i]);
    else if (a == "--probe") probe = true;
    else if (a == "--fp8-probe") fp8_probe = true;
    else if (a == "--probe-shapes" && i + 1 < argc) probe_shapes = argv[++i];
    else if (a == "--probe-variants" && i + 1 < argc) probe_variants = int_list(argv[++i]);
    else if (a == "--probe-reps" && i + 1 < argc) probe_reps = std::atoi(argv[++i]);
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
    if (!probe_shapes.empty()) {
      // w4k (NOTES.md §23): decode launches for ncu / the variant-24 timeline at MODEL:MATRIX:G:m points, each variant
      // probe_reps launches, each on a fresh weight set (a rotating pool of >= 2x L2, as w4cmp), one stream sync apart.
      // Variant 24 (kernel 20 with a per-CTA timeline) writes OUT/trace_<model>_<matrix>_G<G>_m<m>.csv (one row per CTA
      // and launch) and prints a per-launch summary.
      if (probe_variants.empty()) probe_variants = c.w4_variants.empty() ? std::vector<int>{20} : c.w4_variants;
      std::filesystem::create_directories(c.out);
      std::stringstream ps(probe_shapes);
      for (std::string item; std::getline(ps, item, ',');) {
        std::vector<std::string> f;
        std::stringstream is(item);
        for (std::string t; std::getline(is, t, ':');) f.push_back(t);
        if (f.size() != 4) { std::fprintf(stderr, "--probe-shapes: MODEL:MATRIX:G:m\n"); return 2; }
        Ctx all = c;
        all.models.clear();
        all.quick = false;
        const GemmShape* sp = nullptr;
        const auto shapes = gemm_shapes(all);
        for (const auto& g : shapes) if (g.model == f[0] && g.matrix == f[1]) sp = &g;
        if (!sp) { std::fprintf(stderr, "--probe-shapes: unknown %s %s\n", f[0].c_str(), f[1].c_str()); return 2; }
        const GemmShape s = *sp;
        const int G = std::atoi(f[2].c_str());
        const long long m = std::atoll(f[3].c_str());
        const size_t mb = w4a16_matrix_bytes(s.N, s.K);
        const int sets = rotation_sets(double(G) * mb, c.gpu.l2_bytes, 16);
        DevBuf<uint8_t> pool(mb * size_t(G) * sets);
        fill_w4a16_pool(pool.p, G * sets, s.N, s.K, 11, 118, 124, c.s);
        DevBuf<bf16> x(size_t(m) * G * s.K), y(size_t(m) * G * s.N);
        fill_bf16(x.p, x.n, 3, 1.f, c.s);
        const int bt = w4a16_pick_bt(double(m));
        std::vector<int> roff(G + 1), toff(G + 1);
        for (int g = 0; g <= G; ++g) { roff[g] = int(g * m); toff[g] = int(g * ((m + bt - 1) / bt)); }
        DevBuf<int> droff(G + 1), dtoff(G + 1), deids(G * sets);
        droff.upload(roff);
        dtoff.upload(toff);
        std::vector<int> eids(G * sets);
        std::iota(eids.begin(), eids.end(), 0);
        deids.upload(eids);
        const int ctas = (s.N / 128) * toff[G];
        DevBuf<unsigned long long> tr(size_t(ctas) * 10);
        char fn[256];
        std::snprintf(fn, sizeof fn, "%s/trace_%s_%s_G%d_m%lld.csv", c.out.c_str(), s.model.c_str(), s.matrix.c_str(), G, m);
        FILE* tf = nullptr;
        int launch = 0;
        for (int v : probe_variants) {
          w4a16_set_variant(v);
          const int kern = w4a16_kernel_for(bt, s.K, (long long)G * m, s.N, toff[G]);
          for (int r = 0; r < probe_reps; ++r, ++launch) {
            if (kern == 24 || kern >= 29) {
              SS_CUDA(cudaMemsetAsync(tr.p, 0, tr.n * sizeof(unsigned long long), c.s));
              w4a16_set_trace(tr.p);
            }
            w4a16_grouped_gemm(x.p, pool.p, deids.p + (launch % sets) * G, droff.p, dtoff.p, G, s.N, s.K, bt, toff[G], y.p, c.s,
                               (long long)G * m);
            SS_CUDA(cudaStreamSynchronize(c.s));
            if (kern != 24 && kern < 29) continue;
            std::vector<unsigned long long> h(tr.n);
            SS_CUDA(cudaMemcpy(h.data(), tr.p, h.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
            if (!tf) {
              tf = std::fopen(fn, "w");
              std::fprintf(tf, "launch,smid,bx,by,g_start_ns,g_end_ns,c_start,c_first_full,c_first_issue,c_loop_end,c_end,stages\n");
            }
            unsigned long long g0 = ~0ull, g1 = 0;
            std::map<int, int> per_sm;
            double pro = 0, loop = 0, epi = 0, iss = 0;
            for (int i = 0; i < ctas; ++i) {
              const unsigned long long* t = &h[size_t(i) * 10];
              std::fprintf(tf, "%d,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu\n", r, t[0], t[1] & 65535, t[1] >> 16, t[2],
                           t[3], t[4], t[5], t[6], t[7], t[8], t[9]);
              g0 = std::min(g0, t[2]);
              g1 = std::max(g1, t[3]);
              per_sm[int(t[0])]++;
              pro += double(t[5] - t[4]);
              iss += double(t[6] - t[4]);
              loop += double(t[7] - t[5]);
              epi += double(t[8] - t[7]);
            }
            int mx = 0, mn = 1 << 30;
            for (auto& kv : per_sm) { mx = std::max(mx, kv.second); mn = std::min(mn, kv.second); }
            std::printf("trace %s %s G=%d m=%lld rep=%d: %d CTAs on %zu SMs (per SM %d-%d), span %.2f us; mean clocks: entry->first "
                        "issue %.0f, entry->first full %.0f, loop %.0f, epilogue %.0f\n",
                        s.model.c_str(), s.matrix.c_str(), G, m, r, ctas, per_sm.size(), mn, mx, (g1 - g0) * 1e-3, iss / ctas,
                        pro / ctas, loop / ctas, epi / ctas);
          }
        }
        if (tf) std::fclose(tf);
        std::printf("probe %s %s G=%d m=%lld bt=%d: %d CTAs, %d launches\n", s.model.c_str(), s.matrix.c_str(), G, m, bt, ctas, launch);
      }
      w4a16_set_trace(nullptr);
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
    section("w4pdl", {"w4pdl"}, bench_w4pdl);
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
