// servesim attention benchmark driver: sweeps every attention op of Kimi K3 and DeepSeek V4 on the
// GPU and writes one table per op (schema servesim.kernel-table/1, kernels/common/bench.cuh).
//
//   bench_attn --out DIR [--budget SECONDS] [--only op1,op2,...] [--quick]
//              [--skip-existing TABLE_DIR] [--share-scale SECONDS_PER_SHARE]
//              [--mla-heads 96] [--proj-tp 8,4,2] [--proj-gemms kv_b,...] [--proj-m-max 16384]
//
// --mla-decode-heads: head counts of the mla_decode sweep besides 96 (default 128,64,48,32,24,16,12;
// three contexts each); --mla-decode-no-legacy: leave out the earlier mma.sync kernel's comparison rows;
// --mla-decode-point B:H:L[,...]: only these points (for profiling); --mla-decode-variant V: the
// mla_decode variant of the main grid (default 12, mqa.cuh; 3 = 32-token tiles, 4 stages, overlapped).
// mla_decode_fp8kv (mla_fp8.cuh: FP8 latent cache, the mla_decode grid) runs with no --only or when
// named exactly (--only mla_decode runs the BF16 op alone); --mla-fp8-variant V: its kernel (mla_fp8.cuh).
// --mla-prefill-variant V[,V...]: mla_prefill variants (0 bm64, 1 bm128, 2-4 wgmma_tma_bm128_bn128[_overlap,
// _pingpong]); the first is the main grid's kernel (default 4); --mla-prefill-point N:P:H[,...]: only these points, every listed variant.
// --mla-heads: heads per GPU of the mla_prefill sweep (default 96; attention TP t gives 96/t). The
// (chunk, prefix) grid is bounded by 6e13 FLOP and 40 GB of K/V at the swept head count.
// --proj-gemms: with --proj-tp, only these K3 projections (e.g. kv_b, which the MLA prefill op runs
// over every cached token: M = Σ context); --proj-tp 1 gives the unsplit shape without an attn_tp
// field, i.e. the main table's rows. --proj-m-max: largest M of the projection sweeps (default 16384).
// --proj-tp: the K3 KDA / MLA projection tables get the shapes one GPU of an attention-TP group
// runs instead of the unsplit ones (costmodels/step_cost.cpp: column-parallel N/t, row-parallel
// K/t, head-batched absorption batch/t; the replicated low-rank down-projections are left out),
// BF16 only (K3's projections are BF16), rows tagged with "attn_tp".
//
// --skip-existing: points whose (variant, shape) already has a row in TABLE_DIR/<op>.json (the
// committed tables) are not run, so a sweep spends its time on the shapes an earlier sweep had no
// time for (coverage runs); the written tables then hold the new rows only. --share-scale sets the
// seconds per unit of an op's time share (default: the shares scaled to 95% of the budget). Tables
// are rewritten every 10 s while an op runs, so a run stopped from outside keeps what it measured.
//
// Each op gets a share of the time budget; points are run in order of increasing predicted cost
// and the op stops when its share is spent (the table says which points were skipped). Shapes:
// powers of two plus the x1.5 points in between. Inputs are random (never zeros) and rotated over
// enough sets to exceed 3x L2.
#include "attention/dsv4.cuh"
#include "attention/kda.cuh"
#include "attention/mla_fp8.cuh"
#include "attention/mla_prefill.cuh"
#include "attention/mqa.cuh"
#include "attention/proj.cuh"
#include "common/bench.cuh"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

using namespace servesim::attn;
using servesim::kernels::GpuInfo;
using servesim::kernels::Table;
using servesim::kernels::Timing;
using json = nlohmann::json;

namespace {

GpuInfo G;
std::string OUT = "out";
bool QUICK = false;
double T_START = 0, T_DEADLINE = 0, BUDGET_SCALE = 1.0;
std::vector<std::string> SUMMARY;
std::set<std::string> ONLY;
std::string SKIP_DIR;  // --skip-existing
std::vector<int> MLA_HEADS = {96};  // --mla-heads
std::vector<int> MLA_DECODE_HEADS = {128, 64, 48, 32, 24, 16, 12};  // --mla-decode-heads
bool MLA_DECODE_LEGACY = true;      // --mla-decode-no-legacy
int MLA_DECODE_VARIANT = 12;        // --mla-decode-variant (the kernel of the main grid; 12 since issue 12's eleventh session: the table's kernel; 10 before)
std::vector<int> MLA_PREFILL_VARIANTS = {4};  // --mla-prefill-variant V[,V..]: the first is the main grid's kernel
std::vector<std::array<int, 3>> MLA_PREFILL_POINTS;  // --mla-prefill-point N:P:H[,...]: only these, every variant
std::vector<std::array<int, 3>> V4_ATTN_POINTS;  // --v4-attn-point H:B:L[,...]
std::vector<std::array<int, 3>> MLA_DECODE_POINTS;  // --mla-decode-point B:H:L[,B:H:L...]
std::vector<int> PROJ_TP;           // --proj-tp
std::set<std::string> PROJ_GEMMS;   // --proj-gemms (empty: all)
long PROJ_M_MAX = 16384;            // --proj-m-max
std::set<std::string> PROJ_KINDS;   // --proj-kinds bf16,fp8_tensor_scale,fp8_block_scale (empty: all)
long PROJ_OWN_M_MAX = 4096;         // --proj-own-m-max: own FP8 GEMM rows up to this M (0: none)
bool PROJ_OWN_TUNE = true;          // --proj-own-no-tune: the library heuristic's config only
std::vector<std::array<int, 3>> PROJ_POINTS;  // --proj-point M:N:K[,...]: only these (FP8 block: cuBLASLt + own)
std::vector<std::array<int, 3>> PROJ_OWN_CFGS;  // --proj-own-cfg BT:SPLIT[,...]: extra own rows with forced tile width / split (0 = auto)
using servesim::kernels::int_list;

// "<variant>|<shape JSON>" of every row of TABLE_DIR/<op>.json (empty without --skip-existing)
std::set<std::string> existing_points(const std::string& op) {
  std::set<std::string> keys;
  if (SKIP_DIR.empty()) return keys;
  std::ifstream f(SKIP_DIR + "/" + op + ".json");
  if (!f) return keys;
  const json j = json::parse(f);
  for (const auto& r : j.at("rows")) keys.insert(r.at("variant").get<std::string>() + "|" + r.at("shape").dump());
  return keys;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
uint64_t SEED = 0x1234;
uint64_t seed() { return SEED += 0x9E3779B97F4A7C15ULL; }

int nsets(double bytes, int cap = 32) { return servesim::kernels::rotation_sets(bytes, G.l2_bytes, cap); }

std::vector<long> grid(long lo, long hi, bool mid = true) {  // powers of 2 in [lo,hi] plus x1.5 points
  std::vector<long> v;
  for (long x = 1; x <= hi; x *= 2) {
    if (x >= lo) v.push_back(x);
    if (mid && x * 3 / 2 >= lo && x * 3 / 2 <= hi && x >= 2) v.push_back(x * 3 / 2);
  }
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}
std::vector<long> qgrid(std::vector<long> v) {  // --quick: keep ends and a middle point
  if (!QUICK || v.size() <= 3) return v;
  return {v.front(), v[v.size() / 2], v.back()};
}

struct OpRun {
  std::string op;
  Table tab;
  double end;
  int done = 0, skipped = 0, failed = 0, existing = 0;
  std::set<std::string> have;  // points measured before (--skip-existing)
  double last_write = 0;
  OpRun(const std::string& o, const std::string& model, const std::string& desc, const std::string& ff,
        const std::string& bf, double budget_s)
      : op(o), tab(o, model, desc, ff, bf, G), end(now_s() + budget_s * BUDGET_SCALE), have(existing_points(o)),
        last_write(now_s()) {}
  bool time_left() const { return now_s() < end && now_s() < T_DEADLINE; }
  // Runs one measured point; exceptions (out of memory, unsupported) are logged and skipped.
  // Timing: CUDA events around each call ("eager", includes the host launch gap); when a call
  // takes < 400 us the point is re-timed by replaying a CUDA graph of G calls (rotating the input
  // sets) and dividing by G, which removes the launch gaps as a CUDA-graph engine would. Both
  // medians are stored (us_median is the graph one when "timing" says cuda_graph_replay).
  void point(const std::string& variant, const json& shape, const json& dtypes, double flops, double bytes,
             const std::function<std::function<void(int)>()>& setup, std::shared_ptr<json> extra = nullptr) {
    if (!have.empty() && have.count(variant + "|" + shape.dump())) { ++existing; return; }
    if (!time_left()) { ++skipped; return; }
    try {
      auto launch = setup();
      launch(0);
      SS_LAUNCH_CHECK();
      SS_CUDA(cudaDeviceSynchronize());
      const Timing te = servesim::kernels::time_op(launch);
      Timing t = te;
      json ex = extra ? *extra : json::object();
      ex["timing"] = "cuda_events_per_call";
      ex["us_median_eager"] = te.us_median;
      if (te.us_median < 400.0) {
        const int G = std::clamp(static_cast<int>(std::ceil(1500.0 / std::max(te.us_median, 1.0))), 8, 128);
        cudaGraph_t graph = nullptr;
        cudaGraphExec_t exec = nullptr;
        try {
          SS_CUDA(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeThreadLocal));
          try {
            for (int k = 0; k < G; ++k) launch(k);
          } catch (...) {
            cudaStreamEndCapture(cudaStreamPerThread, &graph);
            throw;
          }
          SS_CUDA(cudaStreamEndCapture(cudaStreamPerThread, &graph));
          SS_CUDA(cudaGraphInstantiate(&exec, graph, 0));
          const Timing tg = servesim::kernels::time_op([&](int) { SS_CUDA(cudaGraphLaunch(exec, cudaStreamPerThread)); });
          t.us_median = tg.us_median / G;
          t.us_p10 = tg.us_p10 / G;
          t.us_p90 = tg.us_p90 / G;
          t.runs = tg.runs * G;
          ex["timing"] = "cuda_graph_replay";
          ex["graph_calls"] = G;
        } catch (const std::exception& e) {
          cudaGetLastError();
          ex["graph_error"] = e.what();
        }
        if (exec) cudaGraphExecDestroy(exec);
        if (graph) cudaGraphDestroy(graph);
      }
      tab.add(variant, shape, dtypes, t, flops, bytes, ex);
      ++done;
      if (now_s() - last_write > 10) { tab.write(OUT); last_write = now_s(); }
      std::printf("  %-24s %-22s %-64s %10.2f us (eager %9.2f) %7.2f TF/s %6.3f TB/s\n", op.c_str(), variant.c_str(),
                  shape.dump().substr(0, 64).c_str(), t.us_median, te.us_median, flops / t.us_median / 1e6,
                  bytes / t.us_median / 1e6);
      std::fflush(stdout);
    } catch (const std::exception& e) {
      ++failed;
      std::printf("  %-24s %-22s %-60s FAILED: %s\n", op.c_str(), variant.c_str(), shape.dump().substr(0, 60).c_str(), e.what());
      cudaGetLastError();
      cudaDeviceSynchronize();
      cudaGetLastError();
    }
  }
  void finish() {
    tab.write(OUT);
    std::printf("== %s: %d points, %d skipped (time), %d failed, %d measured before (not run)\n", op.c_str(), done, skipped,
                failed, existing);
  }
};
bool want(const std::string& op) {
  if (ONLY.empty()) return true;
  for (const auto& o : ONLY)
    if (op.rfind(o, 0) == 0) return true;
  return false;
}
double ratio_line(const std::string& what, double got, double target, const std::string& unit) {
  char b[256];
  std::snprintf(b, sizeof b, "%-58s %10.2f %-7s target %8.2f  ratio %.2f", what.c_str(), got, unit.c_str(), target,
                got / target);
  SUMMARY.push_back(b);
  return got / target;
}
// Best (max) value of a row field among rows matching a predicate, read back from the JSON we wrote.
struct RowView { json shape; std::string variant; double us, tflops, tbps; };
std::vector<RowView> rows_of(const std::string& op) {
  std::vector<RowView> v;
  std::ifstream f(OUT + "/" + op + ".json");
  if (!f) return v;
  json j;
  f >> j;
  for (auto& r : j["rows"]) v.push_back({r["shape"], r["variant"], r["us_median"], r["tflops"], r["tbps"]});
  return v;
}

// ============================================================================================
// Ceilings: device copy and cuBLAS BF16 8192^3
// ============================================================================================
void bench_ceilings() {
  OpRun r("h200_ceilings", "-", "measured ceilings: device-to-device copy (bytes read+written) and cuBLASLt BF16 GEMM 8192^3",
          "2*M*N*K", "copy: 2*size; gemm: 2*(M*K+N*K+M*N)", 10);
  const size_t n = 4ull << 30;
  {
    auto a = std::make_shared<DevBuf<uint8_t>>(), b = std::make_shared<DevBuf<uint8_t>>();
    r.point("d2d_copy", {{"bytes", n}}, {{"data", "u8"}}, 0, 2.0 * n, [=]() {
      a->alloc(n);
      b->alloc(n);
      SS_CUDA(cudaMemset(a->p, 1, n));
      return std::function<void(int)>([=](int) { SS_CUDA(cudaMemcpyAsync(b->p, a->p, n, cudaMemcpyDeviceToDevice)); });
    });
  }
  {
    const int M = 8192;
    auto X = std::make_shared<DevBuf<bf16>>(), W = std::make_shared<DevBuf<bf16>>(), D = std::make_shared<DevBuf<bf16>>();
    auto plan = std::make_shared<GemmPlan>();
    r.point("cublaslt_bf16", {{"M", M}, {"N", M}, {"K", M}}, {{"in", "bf16"}, {"out", "bf16"}}, 2.0 * M * M * M,
            2.0 * 3.0 * M * M, [=]() {
              X->alloc(static_cast<size_t>(M) * M); W->alloc(X->n); D->alloc(X->n);
              fill_uniform_bf16(X->p, X->n, -1, 1, seed());
              fill_uniform_bf16(W->p, W->n, -1, 1, seed());
              GemmShape sh; sh.M = M; sh.N = M; sh.K = M;
              if (!plan->create(GemmKind::kBF16, sh)) throw std::runtime_error("no algo");
              return std::function<void(int)>([=](int) { plan->run(X->p, W->p, D->p); });
            });
  }
  r.finish();
  for (auto& rv : rows_of("h200_ceilings")) {
    if (rv.variant == "d2d_copy") ratio_line("ceiling: device copy (read+write)", rv.tbps, 4.3, "TB/s");
    if (rv.variant == "cublaslt_bf16") ratio_line("ceiling: cuBLASLt bf16 8192^3", rv.tflops, 797, "TF/s");
  }
}

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

// ============================================================================================
// K3 MLA decode / prefill
// ============================================================================================
struct MlaDecodeSet {
  DevBuf<bf16> cache, q;
  DevBuf<uint8_t> cache8;  // FP8 latent cache (mla_decode_fp8kv)
  DevBuf<int> bt;
};
// fp8: the op mla_decode_fp8kv (mla_fp8.cuh: 656-B FP8 tokens, the same grid, no legacy rows).
void bench_mla_decode(bool fp8 = false) {
  const std::string opname = fp8 ? "mla_decode_fp8kv" : "mla_decode";
  OpRun r(opname, "kimi-k3",
          fp8 ? "K3 / DeepSeek-V3-class MLA absorbed decode (MQA d_k 576 / d_v 512) over a paged FP8 latent cache "
                "(page 64; FlashMLA FP8 KV layout, 656 B per token: 512 E4M3 + 4 fp32 scales per 128 values + 64 BF16 "
                "RoPE), dequantised in the kernel, split-KV flash decoding with the plan of mla_decode; variant "
                "wgmma_fp8kv_f16_m64_tn64 = the sm_90a kernel (variant 6, the default: 64-head groups, wgmma, 16-B loads "
                "into registers during the GEMMs, E4M3 -> FP16 exact, FP16 GEMMs on the latent, BF16 on RoPE), "
                "wgmma_fp8kv_m64_tn64 = variant 4 (dequantised to BF16, BF16 GEMMs); 'mixed' rows have per-sequence contexts uniform in [0.25, 1.75] x ctx_mean"
              : "K3 gated-MLA absorbed decode (MQA d_k 576 / d_v 512) over a paged BF16 latent cache (page 64), split-KV "
                "flash decoding; variant wgmma_tma_m64_tn64 = the sm_90a kernel (TMA pages, wgmma, 64-head groups), "
                "mt*_tn64/tn32 = the earlier mma.sync kernel (KV rows per tile); 'mixed' rows have per-sequence contexts "
                "uniform in [0.25, 1.75] x ctx_mean",
          "2*H*sum(L)*(576+512)", fp8 ? "sum(L)*656 + B*H*(576+512)*2" : "sum(L)*1152 + B*H*(576+512)*2", 70);
  const double tok_bytes = fp8 ? kMlaFp8TokenBytes : 1152.0;
  struct P { int B, H; long L; bool mixed; int variant; };
  std::vector<P> pts;
  const double cap = 40e9;
  const int V = MLA_DECODE_VARIANT;
  // variant 0 (the wgmma kernel) on the committed grid: H=96 everywhere, the TP-sharded head counts
  // 48/24/12 and the other deployments' 128/64/32/16 at three contexts, mixed contexts at H=96
  for (long L : qgrid(grid(1024, 1 << 20)))
    for (long B : qgrid(grid(1, 512)))
      if (1.0 * B * L * 1152 <= cap) pts.push_back({static_cast<int>(B), 96, L, false, V});
  for (int H : MLA_DECODE_HEADS)  // heads per GPU under attention TP (latent cache replicated)
    for (long L : {4096L, 32768L, 262144L})
      for (long B : qgrid(grid(1, 512)))
        if (1.0 * B * L * 1152 <= cap) pts.push_back({static_cast<int>(B), H, L, false, V});
  for (long L : {2048L, 8192L, 32768L})
    for (int B : {8, 32, 128, 512})
      if (1.75 * B * L * 1152 <= cap) pts.push_back({B, 96, L, true, V});
  // the issue's production reference points (128 heads: 256 x 2K, 16 x 64K) and the earlier
  // mma.sync kernel (variant 2) beside the new one at a few points, for before/after in one run
  pts.push_back({256, 128, 2048, false, V});
  pts.push_back({16, 128, 65536, false, V});
  if (MLA_DECODE_LEGACY && !fp8) {
    for (long L : {4096L, 65536L})
      for (int B : {1, 16, 128}) pts.push_back({B, 96, L, false, 2});
    pts.push_back({256, 128, 2048, false, 2});
    pts.push_back({16, 128, 65536, false, 2});
    for (int H : {48, 24, 12}) pts.push_back({128, H, 32768, false, 2});
  }
  if (!MLA_DECODE_POINTS.empty()) {  // --mla-decode-point: only these (B, H, L), variant 0
    pts.clear();
    for (const auto& t : MLA_DECODE_POINTS) pts.push_back({t[0], t[1], t[2], false, MLA_DECODE_VARIANT});
  }
  std::stable_sort(pts.begin(), pts.end(), [](const P& a, const P& b) { return 1.0 * a.B * a.L < 1.0 * b.B * b.L; });
  std::mt19937_64 rg(7);
  for (const auto& p : pts) {
    std::vector<int> ctx(p.B, static_cast<int>(p.L));
    if (p.mixed) {
      std::uniform_real_distribution<double> u(0.25, 1.75);
      for (auto& c : ctx) c = std::max(1, static_cast<int>(u(rg) * p.L));
    }
    long sum = 0; int mx = 0;
    for (int c : ctx) { sum += c; mx = std::max(mx, c); }
    const int H = p.H;
    const double flops = 2.0 * H * sum * 1088, bytes = tok_bytes * sum + 2.0 * p.B * H * 1088;
    json shape = {{"batch", p.B}, {"ctx_sum", sum}, {"ctx_mean", sum / p.B}, {"ctx_max", mx}, {"ctx", p.mixed ? -1 : p.L},
                  {"heads", H}, {"d_k", 576}, {"d_v", 512}, {"page", 64}, {"mixed", p.mixed}};
    auto sets = std::make_shared<std::vector<MlaDecodeSet>>();
    auto out = std::make_shared<DevBuf<bf16>>();
    auto op = std::make_shared<DevBuf<float>>();
    auto lp = std::make_shared<DevBuf<float>>();
    auto plan = std::make_shared<MqaPlan>();
    const std::string var = std::string(p.mixed ? "mixed_" : "") + (fp8 ? mla_decode_fp8_config() : mla_decode_config(p.H, p.variant));
    const json dtypes = fp8 ? json{{"q", "bf16"}, {"cache", "fp8_e4m3+fp32_scale+bf16_rope"}, {"out", "bf16"}}
                            : json{{"q", "bf16"}, {"cache", "bf16"}, {"out", "bf16"}};
    r.point(var, shape, dtypes, flops, bytes, [=]() {
      const int ns = nsets(bytes, 16);
      int maxp = 0, totp = 0;
      for (int c : ctx) { maxp = std::max(maxp, (c + 63) / 64); totp += (c + 63) / 64; }
      sets->resize(ns);
      std::vector<int> perm(totp);
      std::iota(perm.begin(), perm.end(), 0);
      std::mt19937_64 g2(seed());
      std::shuffle(perm.begin(), perm.end(), g2);
      std::vector<int> bt(static_cast<size_t>(p.B) * maxp, 0);
      int nx = 0;
      for (int b = 0; b < p.B; ++b)
        for (int q = 0; q < (ctx[b] + 63) / 64; ++q) bt[static_cast<size_t>(b) * maxp + q] = perm[nx++];
      for (auto& s : *sets) {
        if (fp8) {
          s.cache8.alloc(static_cast<size_t>(totp) * 64 * kMlaFp8TokenBytes);
          fill_mla_fp8_cache(s.cache8.p, static_cast<size_t>(totp) * 64, seed());
        } else {
          s.cache.alloc(static_cast<size_t>(totp) * 64 * 576);
          fill_uniform_bf16(s.cache.p, s.cache.n, -1, 1, seed());
        }
        s.q.alloc(static_cast<size_t>(p.B) * H * 576);
        fill_uniform_bf16(s.q.p, s.q.n, -1, 1, seed());
        s.bt.upload(bt);
      }
      out->alloc(static_cast<size_t>(p.B) * H * 512);
      *plan = (p.variant == 0 || p.variant >= 3) ? mla_decode_plan(ctx, H) : mqa_make_plan(ctx);
      op->alloc(std::max<size_t>(1, mqa_part_floats(*plan, H)));
      lp->alloc(std::max<size_t>(1, mqa_lse_floats(*plan, H)));
      MqaArgs a;
      a.nq = p.B; a.H = H; a.max_pages = maxp; a.page_size = 64; a.cache_pages = totp; a.sm_scale = 1.f / std::sqrt(192.f);
      a.out = out->p; a.o_part = op->p; a.lse_part = lp->p;
      const int variant = p.variant;
      return std::function<void(int)>([=](int i) {
        MqaArgs b = a;
        auto& s = (*sets)[i % sets->size()];
        b.q = s.q.p; b.cache = s.cache.p; b.block_table = s.bt.p;
        if (fp8) mla_decode_fp8(b, s.cache8.p, *plan, 0);
        else mla_decode(b, *plan, 0, variant);
      });
    });
    sets->clear();
  }
  r.finish();
  // issue 12 targets: memory-bound shapes >= 3.2 TB/s, compute-bound >= 600 TFLOP/s (ctx >= 4K)
  for (int H : {128, 96, 64, 48, 32, 24, 16, 12}) {
    double bt = 0, bf = 0;
    std::string wt, wf;
    for (auto& rv : rows_of(opname))
      if (rv.variant.rfind("wgmma", 0) == 0 && rv.shape["heads"] == H && rv.shape["ctx_mean"].get<long>() >= 4096) {
        if (rv.tbps > bt) { bt = rv.tbps; wt = "B=" + rv.shape["batch"].dump() + " L=" + rv.shape["ctx"].dump(); }
        if (rv.tflops > bf) { bf = rv.tflops; wf = "B=" + rv.shape["batch"].dump() + " L=" + rv.shape["ctx"].dump(); }
      }
    if (bt > 0) {
      ratio_line(opname + " wgmma H=" + std::to_string(H) + " best TB/s / 3.2 (" + wt + ")", bt, 3.2, "TB/s");
      ratio_line(opname + " wgmma H=" + std::to_string(H) + " best TF/s / 600 (" + wf + ")", bf, 600, "TF/s");
    }
  }
  for (auto& rv : rows_of(opname))
    if ((rv.shape["heads"] == 128 && ((rv.shape["batch"] == 256 && rv.shape["ctx"] == 2048) ||
                                      (rv.shape["batch"] == 16 && rv.shape["ctx"] == 65536))) ||
        (rv.shape["heads"] == 96 && ((rv.shape["batch"] == 16 && rv.shape["ctx"] == 4096) ||
                                     (rv.shape["batch"] == 128 && rv.shape["ctx"] == 65536))))
      SUMMARY.push_back("  " + opname + " " + rv.variant + " H=" + rv.shape["heads"].dump() + " B=" + rv.shape["batch"].dump() +
                        " L=" + rv.shape["ctx"].dump() + ": " + std::to_string(rv.us) + " us, " +
                        std::to_string(rv.tbps) + " TB/s, " + std::to_string(rv.tflops) + " TF/s");
}

void bench_mla_prefill() {
  OpRun r("mla_prefill", "kimi-k3",
          "K3 MLA prefill attention core in MHA mode (d_qk 192, d_v 128, H heads: 96, or 96/t per GPU at attention TP t), "
          "causal chunk of N tokens over a "
          "prefix of P; K/V are the kv_b up-projections (see dense_proj_k3_mla kv_b); variant bm64/bm128 = query rows "
          "per block",
          "2*H*N*(P + (N+1)/2)*(192+128)", "2*(N*H*192 + (P+N)*H*(192+128) + N*H*128)", 48);
  struct P { int N; long Pfx; int variant; int H; };
  std::vector<P> pts;
  for (int H : MLA_HEADS) {
    // the same (chunk, prefix) grid at every head count, bounded by FLOPs and bytes at that count
    for (long N : qgrid(grid(256, 16384)))
      for (long Pf : qgrid(std::vector<long>{0, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576})) {
        const double fl = 2.0 * H * N * (Pf + (N + 1) / 2.0) * 320;
        const double mem = (Pf + N) * static_cast<double>(H) * 320 * 2;
        if (fl <= 6e13 && mem <= 40e9) pts.push_back({static_cast<int>(N), Pf, 0, H});
      }
    for (auto& pt : pts) pt.variant = MLA_PREFILL_VARIANTS[0];
    if (H == 96 && MLA_PREFILL_VARIANTS[0] == 0)
      for (auto pr : std::vector<std::pair<int, long>>{{4096, 0}, {8192, 16384}, {16384, 0}, {2048, 65536}})
        pts.push_back({pr.first, pr.second, 1, H});
  }
  if (!MLA_PREFILL_POINTS.empty()) {  // --mla-prefill-point: only these (N, P, H), every listed variant
    pts.clear();
    for (const auto& q : MLA_PREFILL_POINTS)
      for (int v : MLA_PREFILL_VARIANTS) pts.push_back({q[0], q[1], v, q[2]});
  }
  std::stable_sort(pts.begin(), pts.end(), [](const P& a, const P& b) {
    return 1.0 * a.H * a.N * (a.Pfx + a.N / 2.0) < 1.0 * b.H * b.N * (b.Pfx + b.N / 2.0);
  });
  for (const auto& p : pts) {
    const int H = p.H;
    const long T = p.Pfx + p.N;
    const double flops = 2.0 * H * p.N * (p.Pfx + (p.N + 1) / 2.0) * 320;
    const double bytes = 2.0 * (1.0 * p.N * H * 192 + 1.0 * T * H * 320 + 1.0 * p.N * H * 128);
    auto q = std::make_shared<std::vector<DevBuf<bf16>>>();
    auto kv = std::make_shared<std::vector<DevBuf<bf16>>>();
    auto out = std::make_shared<DevBuf<bf16>>();
    r.point(mla_prefill_variant_name(p.variant), {{"chunk", p.N}, {"prefix", p.Pfx}, {"heads", H}, {"d_qk", 192}, {"d_v", 128}},
            {{"qkv", "bf16"}, {"out", "bf16"}}, flops, bytes, [=]() {
              const int ns = nsets(bytes, 16);
              q->resize(ns); kv->resize(ns);
              for (int s = 0; s < ns; ++s) {
                (*q)[s].alloc(static_cast<size_t>(p.N) * H * 192);
                fill_uniform_bf16((*q)[s].p, (*q)[s].n, -1, 1, seed());
                (*kv)[s].alloc(static_cast<size_t>(T) * H * 320);
                fill_uniform_bf16((*kv)[s].p, (*kv)[s].n, -1, 1, seed());
              }
              out->alloc(static_cast<size_t>(p.N) * H * 128);
              MhaPrefillArgs a;
              a.N = p.N; a.P = static_cast<int>(p.Pfx); a.H = H; a.out = out->p;
              const int variant = p.variant;
              return std::function<void(int)>([=](int i) {
                MhaPrefillArgs b = a;
                const int s = i % static_cast<int>(q->size());
                b.q = (*q)[s].p; b.k = (*kv)[s].p; b.v = (*kv)[s].p + static_cast<size_t>(T) * H * 192;
                mla_prefill(b, 0, variant);
              });
            });
    q->clear(); kv->clear();
  }
  r.finish();
  double best = 0;
  std::string at;
  for (auto& rv : rows_of("mla_prefill"))
    if (rv.tflops > best) { best = rv.tflops; at = rv.variant + " " + rv.shape.dump(); }
  ratio_line("mla_prefill best TF/s / (0.5*797)", best, 0.5 * 797, "TF/s");
  SUMMARY.push_back("   best at " + at.substr(0, 120));
}

// ============================================================================================
// DeepSeek V4
// ============================================================================================
// Index lists for V4 attention, generated on the device. Query q has ncomp[q] compressed rows
// (random among avail[q] rows from comp_base[q] when ncomp < avail, else the first ncomp) and
// nwin[q] window rows from win_base[q].
__global__ void make_indices_kernel(int* idx, int ld, int nq, const int4* qp /* comp_base, avail, ncomp, nwin */,
                                    const int* win_base, uint64_t sd) {
  const int q = blockIdx.y;
  const int4 p = qp[q];
  for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < ld; r += gridDim.x * blockDim.x) {
    int v = -1;
    if (r < p.z) {
      if (p.z < p.y) {
        uint64_t x = (static_cast<uint64_t>(q) << 32 | static_cast<uint32_t>(r)) * 0x9E3779B97F4A7C15ULL + sd;
        x ^= x >> 29; x *= 0xBF58476D1CE4E5B9ULL; x ^= x >> 32;
        v = p.x + static_cast<int>(x % static_cast<uint64_t>(p.y));
      } else {
        v = p.x + r;
      }
    } else if (r < p.z + p.w) {
      v = win_base[q] + (r - p.z);
    }
    idx[static_cast<size_t>(q) * ld + r] = v;
  }
}

struct V4Spec { const char* model; int H; int topk; };
const V4Spec kPro{"deepseek-v4-pro", 128, 1024}, kFlash{"deepseek-v4-flash", 64, 512};

// One V4 attention problem: nq queries over a pool of rows.
struct V4Problem {
  std::vector<int4> qp;
  std::vector<int> win_base, nrows;
  long pool_rows = 0;
};
struct V4Bufs {
  DevBuf<uint8_t> pool;
  DevBuf<int> idx;
  DevBuf<bf16> q;
};
std::function<void(int)> v4_setup(const V4Problem& pr, int H, double bytes, std::shared_ptr<std::vector<V4Bufs>> sets,
                                  std::shared_ptr<DevBuf<bf16>> out, std::shared_ptr<DevBuf<float>> sink,
                                  std::shared_ptr<DevBuf<float>> op, std::shared_ptr<DevBuf<float>> lp,
                                  std::shared_ptr<MqaPlan> plan) {
  const int nq = static_cast<int>(pr.nrows.size());
  const int ld = std::max(1, *std::max_element(pr.nrows.begin(), pr.nrows.end()));
  const int ns = nsets(bytes, 16);
  sets->resize(ns);
  DevBuf<int4> dqp;
  DevBuf<int> dwb;
  dqp.upload(pr.qp);
  dwb.upload(pr.win_base);
  for (auto& s : *sets) {
    s.pool.alloc(static_cast<size_t>(pr.pool_rows) * kV4RowBytes);
    fill_v4_rows(s.pool.p, pr.pool_rows, seed());
    s.idx.alloc(static_cast<size_t>(nq) * ld);
    make_indices_kernel<<<dim3(std::min(64, (ld + 255) / 256), nq), 256>>>(s.idx.p, ld, nq, dqp.p, dwb.p, seed());
    SS_LAUNCH_CHECK();
    s.q.alloc(static_cast<size_t>(nq) * H * 512);
    fill_uniform_bf16(s.q.p, s.q.n, -0.3f, 0.3f, seed());
  }
  SS_CUDA(cudaDeviceSynchronize());
  out->alloc(static_cast<size_t>(nq) * H * 512);
  sink->alloc(H);
  fill_uniform_f32(sink->p, H, -2, 2, seed());
  *plan = v4_attn_uses_wgmma(H) ? mla_decode_plan(pr.nrows, H) : mqa_make_plan(pr.nrows);
  op->alloc(std::max<size_t>(1, mqa_part_floats(*plan, H)));
  lp->alloc(std::max<size_t>(1, mqa_lse_floats(*plan, H)));
  MqaArgs a;
  a.nq = nq; a.H = H; a.idx_ld = ld; a.sink = sink->p; a.sm_scale = 1.f / std::sqrt(512.f);
  a.out = out->p; a.o_part = op->p; a.lse_part = lp->p;
  return [=](int i) {
    MqaArgs b = a;
    auto& s = (*sets)[i % sets->size()];
    b.q = s.q.p; b.pool = s.pool.p; b.indices = s.idx.p;
    v4_attn(b, *plan);
  };
}

// Decode: B sequences of context L. ratio 4 (CSA: top-k of L/4), 128 (HCA: all L/128), 0 (window only).
V4Problem v4_decode_problem(int B, long L, int ratio, int topk) {
  V4Problem pr;
  const int comp = ratio ? static_cast<int>(L / ratio) : 0;
  const int win = static_cast<int>(std::min<long>(128, L));
  const long stride = comp + win;
  for (int b = 0; b < B; ++b) {
    const int nc = ratio == 4 ? std::min(topk, comp) : comp;
    pr.qp.push_back(make_int4(static_cast<int>(b * stride), std::max(comp, 1), nc, win));
    pr.win_base.push_back(static_cast<int>(b * stride + comp));
    pr.nrows.push_back(nc + win);
  }
  pr.pool_rows = std::max<long>(B * stride, 1);
  return pr;
}
// Prefill: N new tokens after a prefix P of one sequence.
V4Problem v4_prefill_problem(int N, long P, int ratio, int topk) {
  V4Problem pr;
  const long T = P + N;
  const long comp_total = ratio ? T / ratio : 0;
  const long w0 = std::max<long>(0, P - 127);
  for (int i = 0; i < N; ++i) {
    const long pos = P + i;
    const int avail = ratio ? static_cast<int>((pos + 1) / ratio) : 0;
    const int nc = ratio == 4 ? std::min(topk, avail) : avail;
    const int win = static_cast<int>(std::min<long>(128, pos + 1));
    pr.qp.push_back(make_int4(0, std::max(avail, 1), nc, win));
    pr.win_base.push_back(static_cast<int>(comp_total + (pos - win + 1) - w0));
    pr.nrows.push_back(nc + win);
  }
  pr.pool_rows = std::max<long>(comp_total + (T - w0), 1);
  return pr;
}

void bench_v4_attn(const std::string& op, int ratio, bool decode, double budget) {
  const char* what = ratio == 4 ? "CSA sparse attention (top-k compressed rows + 128-token window)"
                     : ratio == 128 ? "HCA attention (all L/128 compressed rows + 128-token window)"
                                    : "window-only attention (V4-Flash layers 0-1)";
  OpRun r(op, "deepseek-v4",
          std::string(what) + (decode ? ", decode (one query token per sequence)" : ", prefill chunk of N after prefix P") +
              "; FP8 584-B rows gathered by index, dequantised to BF16, MQA over H heads (d 512, K=V), attention sink",
          "2*H*n*(512+512) summed over queries (n = rows attended per query)",
          decode ? "sum over queries of n*584 (rows gathered) + 4*n (indices) + H*512*2*2 (q, out)"
                 : "unique rows read once: (compressed rows + window rows)*584 + indices 4*n per query + q, out",
          budget);
  struct Pt { V4Spec m; int B; long L; };
  std::vector<Pt> pts;
  const double cap_pool = 30e9;
  for (const V4Spec& m0 : {kPro, kFlash}) {
    if (ratio == 0 && m0.H == 128) continue;  // window-only layers exist in Flash only
    // heads per GPU: all (attention DP) and sharded by attention TP 2 / 4 / 8 (one KV head, replicated)
    for (int tp : {1, 2, 4, 8}) {
      V4Spec m = m0;
      m.H = m0.H / tp;
      const bool full = tp == 1;
      if (decode) {
        std::vector<long> Ls = ratio == 0 ? std::vector<long>{4096}
                               : ratio == 4 ? std::vector<long>{1024, 2048, 4096, 65536, 1048576}
                                            : qgrid(grid(1024, 1 << 20));
        if (!full) Ls = ratio == 0 ? std::vector<long>{4096} : ratio == 4 ? std::vector<long>{4096, 1048576}
                                                                          : std::vector<long>{4096, 131072, 1048576};
        for (long L : Ls)
          for (long B : qgrid(grid(1, 512))) {
            const double pool = 1.0 * B * ((ratio ? L / ratio : 0) + 128) * kV4RowBytes;
            if (pool <= cap_pool) pts.push_back({m, static_cast<int>(B), L});
          }
      } else {
        if (!(full || tp == 8)) continue;
        std::vector<long> Ps = ratio == 0 ? std::vector<long>{0, 4096}
                                          : qgrid(std::vector<long>{0, 4096, 16384, 65536, 262144, 1048576});
        if (!full) Ps = ratio == 0 ? std::vector<long>{0} : std::vector<long>{0, 65536};
        for (long N : qgrid(grid(256, 16384)))
          for (long P : Ps) {
            const double n_avg = (ratio == 4 ? std::min<double>(m.topk, (P + N / 2.0) / 4) : ratio ? (P + N / 2.0) / 128 : 0) + 128;
            if (1.0 * N * n_avg * 4 > 2e9) continue;  // index list size
            pts.push_back({m, static_cast<int>(N), P});
          }
      }
    }
  }
  std::stable_sort(pts.begin(), pts.end(), [&](const Pt& a, const Pt& b) {
    auto cost = [&](const Pt& p) {
      const double n = decode ? (ratio == 4 ? std::min<double>(p.m.topk, p.L / 4.0) : ratio ? p.L / 128.0 : 0) + 128
                              : (ratio == 4 ? std::min<double>(p.m.topk, (p.L + p.B / 2.0) / 4) : ratio ? (p.L + p.B / 2.0) / 128 : 0) + 128;
      return n * p.B * p.m.H;
    };
    return cost(a) < cost(b);
  });
  if (const char* mh = std::getenv("V4_ATTN_MIN_HEADS")) {  // re-measure only the head counts a kernel change touched
    const int h = std::atoi(mh);
    pts.erase(std::remove_if(pts.begin(), pts.end(), [&](const Pt& p) { return p.m.H < h; }), pts.end());
  }
  if (!V4_ATTN_POINTS.empty()) {  // --v4-attn-point: only these (H, B, L)
    pts.erase(std::remove_if(pts.begin(), pts.end(), [&](const Pt& p) {
                return std::none_of(V4_ATTN_POINTS.begin(), V4_ATTN_POINTS.end(), [&](const std::array<int, 3>& v) {
                  return v[0] == p.m.H && v[1] == p.B && v[2] == p.L;
                });
              }), pts.end());
  }
  for (const auto& p : pts) {
    const V4Problem pr = decode ? v4_decode_problem(p.B, p.L, ratio, p.m.topk) : v4_prefill_problem(p.B, p.L, ratio, p.m.topk);
    double nsum = 0;
    for (int n : pr.nrows) nsum += n;
    const double flops = 2.0 * p.m.H * nsum * 1024;
    const double io = 1.0 * pr.nrows.size() * p.m.H * 512 * 2 * 2;
    const double bytes = decode ? nsum * (kV4RowBytes + 4) + io : 1.0 * pr.pool_rows * kV4RowBytes + 4 * nsum + io;
    json shape = decode ? json{{"batch", p.B}, {"ctx", p.L}, {"rows_per_query", pr.nrows[0]}, {"heads", p.m.H},
                               {"topk", ratio == 4 ? p.m.topk : 0}, {"window", 128}, {"ratio", ratio}}
                        : json{{"chunk", p.B}, {"prefix", p.L}, {"rows_total", nsum}, {"rows_mean", nsum / p.B},
                               {"heads", p.m.H}, {"topk", ratio == 4 ? p.m.topk : 0}, {"window", 128}, {"ratio", ratio}};
    auto sets = std::make_shared<std::vector<V4Bufs>>();
    auto out = std::make_shared<DevBuf<bf16>>();
    auto sink = std::make_shared<DevBuf<float>>();
    auto op_ = std::make_shared<DevBuf<float>>();
    auto lp = std::make_shared<DevBuf<float>>();
    auto plan = std::make_shared<MqaPlan>();
    r.point(std::string(p.m.topk == 1024 ? "pro_h" : "flash_h") + std::to_string(p.m.H) + "_" + v4_attn_config(p.m.H), shape, {{"q", "bf16"}, {"kv", "fp8_e4m3+ue8m0 (584 B rows)"}, {"out", "bf16"}},
            flops, bytes, [=]() { return v4_setup(pr, p.m.H, bytes, sets, out, sink, op_, lp, plan); });
    sets->clear();
  }
  r.finish();
  if (decode) {
    for (int H : {128, 64, 32, 16, 8}) {
      double best = 0, bestf = 0;
      std::string at;
      for (auto& rv : rows_of(op)) {
        if (rv.shape["heads"] != H) continue;
        bestf = std::max(bestf, rv.tflops);
        if (rv.tbps > best) { best = rv.tbps; at = rv.variant + " " + rv.shape.dump(); }
      }
      if (best == 0) continue;
      ratio_line(op + " H=" + std::to_string(H) + " best TB/s / (0.7*4.3)", best, 0.7 * 4.3, "TB/s");
      SUMMARY.push_back("   best at " + at.substr(0, 110) + "  (best TF/s " + std::to_string(bestf) + ")");
    }
  }
  if (!decode && ratio == 4) {
    double best = 0;
    for (auto& rv : rows_of(op)) best = std::max(best, rv.tflops);
    ratio_line(op + " best TF/s / (0.5*797)", best, 0.5 * 797, "TF/s");
  }
}

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
  if (const char* only = std::getenv("TOPK_POINTS")) {  // "B:L:K,..." decode points only (ncu runs)
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
    }, std::make_shared<json>(json{{"kernel", v4_topk_uses_cluster(p.rows, *std::max_element(len.begin(), len.end()))
                                                   ? "radix_cluster_smem" : "radix_1cta"}}));
    lg->clear();
  }
  r.finish();
}

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
void bench_proj_own(OpRun& r, const GemmDef& d, long M, int fbt = 0, int fsplit = 0, int fcl = 0) {
  const std::string var = d.name + "/fp8_block_scale_own" +
                          (fbt || fsplit ? "_bt" + std::to_string(fbt) + "_s" + std::to_string(fsplit) + (fcl ? "_cl" : "") : std::string());
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
            Fp8DenseConfig c = fp8_dense_plan(static_cast<int>(M), d.N, d.K, fsplit, fbt, fcl);
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
            if (!fbt && !fsplit && PROJ_OWN_TUNE) {
              // per-shape tuning, as engines do offline: the heuristic's tile width and its neighbour,
              // splits {S, S/2, 2S, 1}, atomic or cluster reduction; each candidate timed as 3 x 20
              // back-to-back calls between events (best of 3), the fastest is then measured
              std::vector<Fp8DenseConfig> cands;
              std::vector<int> bts = {c.bt};
              if (c.bt == 64 && M > 32) bts.push_back(128);
              if (c.bt > 8) bts.push_back(c.bt / 2);
              for (int bt : bts) {
                const int s0 = fp8_dense_plan(Mi, d.N, d.K, 0, bt).split;
                for (int sp : {s0, s0 / 2, s0 * 2, 1, 2, 4, 8})
                  for (int cl : {0, 1}) {
                    if (sp < 1 || sp > KBl || (cl && (sp < 2 || sp > 8))) continue;
                    const Fp8DenseConfig k = fp8_dense_plan(Mi, d.N, d.K, sp, bt, cl);
                    bool dup = false;
                    for (const auto& o : cands) dup |= o.bt == k.bt && o.split == k.split && o.cluster == k.cluster;
                    if (!dup) cands.push_back(k);
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
              for (const auto& k : cands) {
                auto run = [&](int i) {
                  fp8_dense_gemm(X->p, XS->p, ld, (*W)[i % W->size()].p, WS->p, Dd->p, Mi, d.N, d.K, Wk->p, Wk->n, 0,
                                 k.split, k.bt, k.cluster ? 1 : 0);
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
                tried.push_back({{"bt", k.bt}, {"split", k.split}, {"cluster", k.cluster}, {"us_stream", t}});
                if (t < best) { best = t; c = k; }
              }
              SS_CUDA(cudaEventDestroy(e0));
              SS_CUDA(cudaEventDestroy(e1));
              (*extra)["tuned_over"] = tried;
            }
            (*extra)["bt"] = c.bt;
            (*extra)["split"] = c.split;
            (*extra)["cluster_reduction"] = c.cluster;
            (*extra)["tiles"] = c.m_tiles * c.n_tiles;
            const size_t wsb = fp8_dense_workspace_bytes(c);
            Wk->alloc(wsb + 1);
            SS_CUDA(cudaMemset(Wk->p, 0, Wk->n));
            const int cs = c.split, cb = c.bt, cc = c.cluster ? 1 : 0;
            return std::function<void(int)>([=](int i) {
              fp8_dense_gemm(X->p, XS->p, ld, (*W)[i % W->size()].p, WS->p, Dd->p, Mi, d.N, d.K, Wk->p, Wk->n, 0, cs, cb, cc);
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
      bench_proj_own(r, d, p.M);
      for (const auto& c : PROJ_OWN_CFGS) bench_proj_own(r, d, p.M, c[0], c[1], c[2]);
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

int main(int argc, char** argv) {
  double budget = 300, share_scale = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) OUT = argv[++i];
    else if (a == "--budget" && i + 1 < argc) budget = std::atof(argv[++i]);
    else if (a == "--quick") QUICK = true;
    else if (a == "--v4-legacy") v4_set_variants(1, 1);
    else if (a == "--v4-attn-legacy") v4_attn_set_variant(1);
    else if (a == "--v4-attn-variant" && i + 1 < argc) v4_attn_set_variant(std::atoi(argv[++i]));
    else if (a == "--v4-attn-point" && i + 1 < argc) {  // H:B:L[,...]: only these V4 attention points (B = chunk, L = prefix for prefill)
      std::stringstream ss(argv[++i]);
      for (std::string t; std::getline(ss, t, ',');) {
        std::array<int, 3> v{};
        if (std::sscanf(t.c_str(), "%d:%d:%d", &v[0], &v[1], &v[2]) != 3) { std::fprintf(stderr, "bad --v4-attn-point %s\n", t.c_str()); return 2; }
        V4_ATTN_POINTS.push_back(v);
      }
    }
    else if (a == "--skip-existing" && i + 1 < argc) SKIP_DIR = argv[++i];
    else if (a == "--share-scale" && i + 1 < argc) share_scale = std::atof(argv[++i]);
    else if (a == "--mla-heads" && i + 1 < argc) MLA_HEADS = int_list(argv[++i]);
    else if (a == "--mla-decode-heads" && i + 1 < argc) MLA_DECODE_HEADS = int_list(argv[++i]);
    else if (a == "--mla-decode-no-legacy") MLA_DECODE_LEGACY = false;
    else if (a == "--mla-decode-variant" && i + 1 < argc) MLA_DECODE_VARIANT = std::atoi(argv[++i]);
    else if (a == "--mla-fp8-variant" && i + 1 < argc) mla_decode_fp8_set_variant(std::atoi(argv[++i]));
    else if (a == "--mla-prefill-variant" && i + 1 < argc) MLA_PREFILL_VARIANTS = int_list(argv[++i]);
    else if (a == "--mla-prefill-point" && i + 1 < argc) {
      std::string all = argv[++i];
      size_t pos = 0;
      while (pos <= all.size()) {
        const size_t c = all.find(',', pos);
        const std::string t = all.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
        std::array<int, 3> v{};
        if (std::sscanf(t.c_str(), "%d:%d:%d", &v[0], &v[1], &v[2]) != 3) { std::fprintf(stderr, "bad --mla-prefill-point %s\n", t.c_str()); return 2; }
        MLA_PREFILL_POINTS.push_back(v);
        if (c == std::string::npos) break;
        pos = c + 1;
      }
    }
    else if (a == "--mla-decode-point" && i + 1 < argc) {
      std::stringstream ss(argv[++i]);
      for (std::string t; std::getline(ss, t, ',');) {
        std::array<int, 3> v{};
        if (std::sscanf(t.c_str(), "%d:%d:%d", &v[0], &v[1], &v[2]) != 3) { std::fprintf(stderr, "bad --mla-decode-point %s\n", t.c_str()); return 2; }
        MLA_DECODE_POINTS.push_back(v);
      }
    }
    else if (a == "--proj-tp" && i + 1 < argc) PROJ_TP = int_list(argv[++i]);
    else if (a == "--proj-m-max" && i + 1 < argc) PROJ_M_MAX = std::atol(argv[++i]);
    else if (a == "--proj-own-m-max" && i + 1 < argc) PROJ_OWN_M_MAX = std::atol(argv[++i]);
    else if (a == "--proj-own-no-tune") PROJ_OWN_TUNE = false;
    else if (a == "--proj-own-cfg" && i + 1 < argc) {
      std::stringstream ss(argv[++i]);
      for (std::string t; std::getline(ss, t, ',');) {
        std::array<int, 3> v{};
        if (std::sscanf(t.c_str(), "%d:%d:%d", &v[0], &v[1], &v[2]) < 2) { std::fprintf(stderr, "bad --proj-own-cfg %s\n", t.c_str()); return 2; }
        PROJ_OWN_CFGS.push_back(v);
      }
    }
    else if (a == "--proj-kinds" && i + 1 < argc) {
      std::stringstream ss(argv[++i]);
      for (std::string g; std::getline(ss, g, ',');) PROJ_KINDS.insert(g);
    }
    else if (a == "--proj-point" && i + 1 < argc) {
      std::stringstream ss(argv[++i]);
      for (std::string t; std::getline(ss, t, ',');) {
        std::array<int, 3> v{};
        if (std::sscanf(t.c_str(), "%d:%d:%d", &v[0], &v[1], &v[2]) != 3) { std::fprintf(stderr, "bad --proj-point %s\n", t.c_str()); return 2; }
        PROJ_POINTS.push_back(v);
      }
    }
    else if (a == "--proj-gemms" && i + 1 < argc) {
      std::stringstream ss(argv[++i]);
      for (std::string g; std::getline(ss, g, ',');) PROJ_GEMMS.insert(g);
    }
    else if (a == "--only" && i + 1 < argc) {
      std::stringstream ss(argv[++i]);
      std::string t;
      while (std::getline(ss, t, ',')) ONLY.insert(t);
    } else {
      std::fprintf(stderr, "usage: bench_attn --out DIR [--budget S] [--only op,...] [--quick] [--skip-existing DIR] "
                           "[--share-scale S] [--mla-heads 96] [--mla-decode-heads 128,64,...] [--mla-decode-no-legacy] [--proj-tp 8,4,2] [--proj-gemms kv_b] [--proj-m-max 16384] "
                           "[--proj-kinds fp8_block_scale,...] [--proj-own-m-max 4096] [--proj-own-no-tune] [--proj-own-cfg BT:SPLIT[:CLUSTER],...] [--proj-point M:N:K,...]\n");
      return 2;
    }
  }
  if (!PROJ_GEMMS.empty() && PROJ_TP.empty()) {
    std::fprintf(stderr, "bench_attn: --proj-gemms selects among the --proj-tp shapes: give --proj-tp too (1 = unsplit)\n");
    return 2;
  }
  if (!servesim::kernels::cuda_device_available()) {
    std::printf("bench_attn: no CUDA device, nothing measured\n");
    return 0;
  }
  try {
    G = servesim::kernels::query_gpu();
    T_START = now_s();
    T_DEADLINE = T_START + budget;
    // Per-op shares below add up to ~436 s; scale them to 95% of the budget.
    BUDGET_SCALE = share_scale > 0 ? share_scale : 0.95 * budget / 436.0;
    std::printf("bench_attn on %s (%d SMs, L2 %lld B, driver %s), budget %.0f s, out %s\n", G.name.c_str(), G.sm_count,
                G.l2_bytes, G.driver.c_str(), budget, OUT.c_str());
    if (want("h200_ceilings")) bench_ceilings();
    if (want("kda_prefill")) bench_kda_prefill();
    if (want("kda_decode")) bench_kda_decode();
    if (want("kda_short_conv") || want("kda_gated_rmsnorm")) bench_kda_misc();
    if (want("mla_decode") && (ONLY.empty() || ONLY.count("mla_decode"))) bench_mla_decode();
    if (ONLY.empty() || ONLY.count("mla_decode_fp8kv")) bench_mla_decode(true);
    if (want("mla_prefill")) bench_mla_prefill();
    if (want("csa_sparse_attn_decode")) bench_v4_attn("csa_sparse_attn_decode", 4, true, 26);
    if (want("hca_attn_decode")) bench_v4_attn("hca_attn_decode", 128, true, 20);
    if (want("swa_attn_decode")) bench_v4_attn("swa_attn_decode", 0, true, 5);
    if (want("csa_indexer")) bench_indexer();
    if (want("csa_topk")) bench_topk();
    if (want("csa_compressor") || want("hca_compressor")) bench_compressors();
    if (want("csa_sparse_attn_prefill")) bench_v4_attn("csa_sparse_attn_prefill", 4, false, 30);
    if (want("hca_attn_prefill")) bench_v4_attn("hca_attn_prefill", 128, false, 22);
    if (want("swa_attn_prefill")) bench_v4_attn("swa_attn_prefill", 0, false, 7);
    bench_all_proj();
  } catch (const std::exception& e) {
    std::printf("bench_attn: fatal: %s\n", e.what());
  }
  std::printf("\n==== summary (%.0f s) ====\n", now_s() - T_START);
  for (const auto& s : SUMMARY) std::printf("%s\n", s.c_str());
  return 0;
}
