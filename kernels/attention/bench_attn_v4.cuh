// bench_attn sections: DeepSeek V4 attention -- device index-list generation (make_indices_kernel),
// V4Spec / V4Problem / V4Bufs, decode and prefill problems, the CSA / HCA / SWA sweeps (bench_v4_attn).
// Part of bench_attn.cu's translation unit, not a standalone header: bench_attn.cu includes its
// section parts in their original order after the shared driver code (options, OpRun, grid /
// qgrid / nsets / seed, want, ratio_line, rows_of, bench_ceilings); main() there runs the sections.
#pragma once

namespace {

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
  // pool rows: 584 B, or 592 where v4_attn runs the V16 form (V4WS_V16): the 584-B rows at a 592-B stride
  const int rowb = v4_attn_pool_row_bytes(H, ld);
  for (auto& s : *sets) {
    s.pool.alloc(static_cast<size_t>(pr.pool_rows) * rowb);
    if (rowb == kV4RowBytes) {
      fill_v4_rows(s.pool.p, pr.pool_rows, seed());
    } else {
      DevBuf<uint8_t> tmp(static_cast<size_t>(pr.pool_rows) * kV4RowBytes);
      fill_v4_rows(tmp.p, pr.pool_rows, seed());
      SS_CUDA(cudaMemset(s.pool.p, 0, s.pool.n));
      SS_CUDA(cudaMemcpy2D(s.pool.p, rowb, tmp.p, kV4RowBytes, kV4RowBytes, pr.pool_rows, cudaMemcpyDeviceToDevice));
    }
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
  // V4_PLAN_UNSPLIT=1 (experiments, nineteenth session): one work item per query (no split, no combine) in place of
  // the kernel's own plan; V4_PLAN_INFO=1 prints each point's plan (stderr)
  static const bool unsplit = std::getenv("V4_PLAN_UNSPLIT") && std::atoi(std::getenv("V4_PLAN_UNSPLIT")) == 1;
  *plan = unsplit ? mqa_make_plan(pr.nrows, 0, INT_MAX) : v4_attn_uses_wgmma(H) ? v4_attn_plan(pr.nrows, H) : mqa_make_plan(pr.nrows);
  if (std::getenv("V4_PLAN_INFO"))
    std::fprintf(stderr, "[v4-plan] H %d nq %d max_rows %d n_work %d n_slots %d rule %d%s\n", H, nq, ld, plan->n_work, plan->n_slots,
                 v4_attn_plan_rule(), unsplit ? " unsplit" : "");
  op->alloc(std::max<size_t>(1, mqa_part_floats(*plan, H)));
  lp->alloc(std::max<size_t>(1, mqa_lse_floats(*plan, H)));
  MqaArgs a;
  a.nq = nq; a.H = H; a.idx_ld = ld; a.pool_row_bytes = rowb; a.sm_scale = 1.f / std::sqrt(512.f); a.sink = sink->p;
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
    const bool row16 = v4_attn_pool_row_bytes(p.m.H, std::max(1, *std::max_element(pr.nrows.begin(), pr.nrows.end()))) != kV4RowBytes;
    r.point(std::string(p.m.topk == 1024 ? "pro_h" : "flash_h") + std::to_string(p.m.H) + "_" + v4_attn_config(p.m.H), shape,
            {{"q", "bf16"}, {"kv", row16 ? "fp8_e4m3+ue8m0 (584 B rows at a 592-B stride)" : "fp8_e4m3+ue8m0 (584 B rows)"}, {"out", "bf16"}},
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

}  // namespace
