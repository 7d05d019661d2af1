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
//
// This file holds the driver (options, OpRun, shared helpers, ceilings, main); the sweeps are in the
// section parts it includes: bench_attn_kda.cuh, bench_attn_mla.cuh, bench_attn_v4.cuh,
// bench_attn_v4_ops.cuh, bench_attn_proj.cuh.
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
#include <climits>
#include <cstdio>
#include <cstdlib>
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
// --proj-own-cfg BT:SPLIT[:CLUSTER[:ROWS[:PIPE[:PDL]]]][,...]: extra own rows with a forced form (0 = the plan's choice)
std::vector<std::array<int, 6>> PROJ_OWN_CFGS;
std::set<long> PROJ_M_ONLY;  // --proj-m-only M[,...]: the dense projection sweeps at these M only (empty: the grid)
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

}  // namespace

// The sections, in their original order (one translation unit: the parts use the code above).
#include "attention/bench_attn_kda.cuh"
#include "attention/bench_attn_mla.cuh"
#include "attention/bench_attn_v4.cuh"
#include "attention/bench_attn_v4_ops.cuh"
#include "attention/bench_attn_proj.cuh"

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
        std::array<int, 6> v{};
        if (std::sscanf(t.c_str(), "%d:%d:%d:%d:%d:%d", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) < 2) { std::fprintf(stderr, "bad --proj-own-cfg %s\n", t.c_str()); return 2; }
        PROJ_OWN_CFGS.push_back(v);
      }
    }
    else if (a == "--proj-m-only" && i + 1 < argc) {
      for (int m : int_list(argv[++i])) PROJ_M_ONLY.insert(m);
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
                           "[--proj-kinds fp8_block_scale,...] [--proj-own-m-max 4096] [--proj-own-no-tune] [--proj-own-cfg BT:SPLIT[:CLUSTER[:ROWS[:PIPE[:PDL]]]],...] [--proj-m-only M,...] [--proj-point M:N:K,...]\n");
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
