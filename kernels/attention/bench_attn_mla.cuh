// bench_attn sections: Kimi K3 MLA -- decode over the BF16 and FP8 latent caches (MlaDecodeSet,
// bench_mla_decode: mla_decode, mla_decode_fp8kv) and prefill (bench_mla_prefill).
// Part of bench_attn.cu's translation unit, not a standalone header: bench_attn.cu includes its
// section parts in their original order after the shared driver code (options, OpRun, grid /
// qgrid / nsets / seed, want, ratio_line, rows_of, bench_ceilings); main() there runs the sections.
#pragma once

namespace {

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
                "wgmma_fp8kv_m64_tn64 = variant 4 (dequantised to BF16, BF16 GEMMs), wgmma_fp8kv_f16_seesaw_m64_tn64 = "
                "variant 11 (variant 6's FP16 GEMMs in the BF16 kernel's seesaw schedule, stages refilled by the consumer "
                "warpgroups); 'mixed' rows have per-sequence contexts uniform in [0.25, 1.75] x ctx_mean"
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

}  // namespace
