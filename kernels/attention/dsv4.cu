// servesim attention kernels: DeepSeek V4 compressor, lightning-indexer logits (E4M3 mma.sync)
// and per-row top-k (radix select), warp-specialised V4 attention. See dsv4.cuh.
#include "attention/dsv4.cuh"
#include "attention/hopper.cuh"
#include "attention/mla_fp8_impl.cuh"  // fp8k::wgmma_*_f16 (F16 form of v4_attn_ws_kernel)
#include "attention/tmap.cuh"
#include "attention/wg_store.cuh"

#include <cooperative_groups.h>
#include <cub/block/block_scan.cuh>
#include <cuda.h>
#include <cudaTypedefs.h>

#include <climits>
#include <cstring>
#include <mutex>
#include <string>

namespace servesim::attn {

namespace {
constexpr float kNegInf = -INFINITY;

__device__ __forceinline__ void ld4_bf16(const bf16* p, float (&f)[4]) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  __nv_bfloat162 a, b;
  memcpy(&a, &u.x, 4);
  memcpy(&b, &u.y, 4);
  const float2 x = __bfloat1622float2(a), y = __bfloat1622float2(b);
  f[0] = x.x; f[1] = x.y; f[2] = y.x; f[3] = y.y;
}
__device__ __forceinline__ uint8_t to_e4m3(float x) {
  __nv_fp8_e4m3 v(x);
  return v.__x;
}
}  // namespace
}  // namespace servesim::attn

// Kernel parts, in their original order (one translation unit with this file: they use kNegInf,
// ld4_bf16 and to_e4m3 above and are used by the host entry points below).
#include "attention/dsv4_compress_indexer.cuh"
#include "attention/dsv4_topk.cuh"
#include "attention/dsv4_attn_ws_helpers.cuh"
#include "attention/dsv4_attn_ws.cuh"

namespace servesim::attn {

void v4_compress(const CompressorArgs& a, int ratio, int head_dim, cudaStream_t s) {
  if (a.n <= 0) return;
  if (!a.kv || !a.score || !a.ape || !a.norm_w || !a.entries || !a.out)
    throw std::invalid_argument("v4_compress: null pointer");
  if (head_dim == 512 && (a.out_row_bytes < kV4RowBytes || a.out_row_bytes % 8 != 0))
    throw std::invalid_argument("v4_compress: out_row_bytes must be >= 584 (kV4RowBytes) and a multiple of 8 (got " +
                                std::to_string(a.out_row_bytes) + ")");
  if (ratio == 4 && head_dim == 512) {
    compressor_kernel<512, 4, false><<<a.n, 128, 0, s>>>(a);
  } else if (ratio == 128 && head_dim == 512) {
    compressor_kernel<512, 128, false><<<a.n, 128, 0, s>>>(a);
  } else if (ratio == 4 && head_dim == 128) {
    if (!a.out_scale) throw std::invalid_argument("v4_compress: indexer keys need out_scale");
    compressor_kernel<128, 4, true><<<(a.n + 3) / 4, 128, 0, s>>>(a);
  } else {
    throw std::invalid_argument("v4_compress: unsupported ratio/head_dim");
  }
  SS_LAUNCH_CHECK();
}

namespace {
int g_indexer_variant = 0, g_topk_variant = 0;
int g_topk_sparse_max = 0;  // the sparse form's loop bound (v4_topk_set_sparse_max; 0: ballot ranks only, tk4 call 1)
// The default's row-select region (v4_topk_uses_row, variant 0; twenty-second session: the lean form), inclusive:
// rows of kLeanMinLen..tkr::kMaxLen logits up to kLeanOneWaveNq rows (one CTA per SM at most, one wave on 132 SMs);
// rows of kLeanMinLen..kLeanMaxLen2 (two CTAs per SM by shared memory) up to kLeanTwoPerSmNq rows; rows of
// kLeanMinLenWide..kLeanMaxLen2 up to kLeanMaxNq rows. Twenty-third session: rows of kSparseMinLen1..kLeanMinLen - 1
// up to kLeanOneWaveNq rows too (the sparse form).
constexpr int kSparseMinLen1 = 1024;
constexpr int kLeanMinLen = 2048, kLeanOneWaveNq = 132, kLeanTwoPerSmNq = 264, kLeanMaxLen2 = 12288,
              kLeanMinLenWide = 6144, kLeanMaxNq = 512;
int sm_count() {
  static int n = 0;
  if (!n) {
    int dev = 0;
    SS_CUDA(cudaGetDevice(&dev));
    SS_CUDA(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  }
  return n;
}
}  // namespace

void v4_set_variants(int indexer_variant, int topk_variant) {
  if (indexer_variant < 0 || indexer_variant > 1 || topk_variant < 0 || topk_variant > 8)
    throw std::invalid_argument("v4_set_variants: indexer variant must be 0 or 1 and top-k variant 0..8 (got " +
                                std::to_string(indexer_variant) + ", " + std::to_string(topk_variant) + ")");
  g_indexer_variant = indexer_variant;
  g_topk_variant = topk_variant;
}
const char* v4_indexer_variant_name() { return g_indexer_variant == 1 ? "mma_sync_v2" : "wgmma_fp8_tma"; }
const char* v4_topk_variant_name() {
  static const char* names[] = {"threshold_filter_default", "radix_1cta", "radix_cluster_smem", "radix_1cta_or_cluster", "threshold_filter",
                                "threshold_filter_default_s17", "radix_row_smem", "radix_row_lean", "radix_row_sparse"};
  return g_topk_variant >= 0 && g_topk_variant <= 8 ? names[g_topk_variant] : "?";
}
void v4_topk_set_sparse_max(int smax) {
  if (smax < 0) throw std::invalid_argument("v4_topk_set_sparse_max: must be >= 0");
  g_topk_sparse_max = smax;
}

int v4_indexer_chunk(int nq, int max_len) {
  // Tiles per CTA: enough CTAs for ~4 per SM over the whole problem, 2..64 tiles each.
  const long tiles = static_cast<long>(nq) * ((max_len + 63) / 64);
  const long want = 4L * sm_count();
  const long per = std::min<long>(64, std::max<long>(2, (tiles + want - 1) / want));
  return static_cast<int>(per * 64);
}

void v4_indexer_logits(const IndexerArgs& a, cudaStream_t s) {
  if (a.nq <= 0 || a.max_len <= 0) return;
  if (!a.q || !a.w || !a.keys || !a.kscale || !a.key_begin || !a.key_len || !a.logits)
    throw std::invalid_argument("v4_indexer_logits: null pointer");
  if (g_indexer_variant == 1 || a.nkeys <= 0) {
    indexer_kernel<<<dim3((a.max_len + IKB - 1) / IKB, a.nq), 128, 0, s>>>(a);
    SS_LAUNCH_CHECK();
    return;
  }
  static bool attr = false;
  if (!attr) {
    SS_CUDA(cudaFuncSetAttribute(indexer_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, ixw::kSmem));
    attr = true;
  }
  const CUtensorMap tk = rows128_map(a.keys, a.nkeys), tq = rows128_map(a.q, static_cast<long>(a.nq) * 64),
                    ts = vec_map(a.kscale, a.nkeys);
  const int chunk = v4_indexer_chunk(a.nq, a.max_len);
  indexer_wgmma_kernel<<<dim3((a.max_len + chunk - 1) / chunk, a.nq), 128, ixw::kSmem, s>>>(tk, tq, ts, a, chunk);
  SS_LAUNCH_CHECK();
}

int v4_topk_cluster_size(int nq, int n) {
  int cs = 1;
  while (cs <= 8 && (n + cs - 1) / cs > TK2_MAXC) cs *= 2;
  if (cs > 8) return 0;  // rows too long for 8 x 32768 logits in shared memory: the one-CTA kernel
  // more CTAs per row only while the batch leaves SMs idle and each chunk stays >= 8192 logits
  while (cs < 8 && (n + 2 * cs - 1) / (2 * cs) >= 8192 && static_cast<long>(nq) * cs < sm_count()) cs *= 2;
  return cs;
}

bool v4_topk_uses_cluster(int nq, int max_len) {
  if (max_len <= 0 || (g_topk_variant != 2 && g_topk_variant != 3) || v4_topk_cluster_size(nq, max_len) == 0)
    return false;
  return g_topk_variant == 2 || (nq <= 16 && max_len >= 98304) || (nq >= 256 && max_len <= 12288);
}

int v4_topk_filter_cluster(int nq, int max_len) {
  int cs = 1;
  if (max_len <= 0) return 1;
  // more CTAs per row while fewer than 2 CTAs per SM would run and each chunk keeps >= 16384 logits
  while (cs < 8 && static_cast<long>(nq) * cs < 2L * sm_count() && (max_len + 2 * cs - 1) / (2 * cs) >= 16384) cs *= 2;
  return cs;
}

bool v4_topk_uses_filter(int nq, int max_len, int topk) {
  if (topk > 2048) return false;
  if (g_topk_variant == 4) return true;
  // Variant 0: where the filter measured faster than the one-CTA radix kernel (tk call 1, all 736 table shapes):
  // batches >= 192 (1.0-5.4x; prefill chunks are >= 256 rows) and rows >= 49152 logits (ctx >= 192K: 1.0-5.4x). Below
  // both, one CTA per row of the filter is a chain of ~6 block-wide radix passes on <= 1 CTA per SM: 0.57-0.96x there.
  if (v4_topk_uses_row(nq, max_len, topk)) return false;
  return (g_topk_variant == 0 || g_topk_variant == 5 || g_topk_variant == 6 || g_topk_variant == 7 ||
          g_topk_variant == 8) &&
         (nq >= 192 || max_len >= 49152);
}

bool v4_topk_uses_row(int nq, int max_len, int topk) {
  if (topk > 2048 || max_len <= 0 || max_len > tkr::kMaxLen) return false;
  if (g_topk_variant == 6 || g_topk_variant == 7 || g_topk_variant == 8) return true;  // opt-in: wherever the row fits
  // Variant 0 (twenty-second session, helper tk3; since the twenty-third its sparse form, topk_row_sparse_kernel, same
  // region): the lean form (topk_row_lean_kernel) where it measured faster than
  // the twenty-first session's default in the same run (tk3 call 1, results/tk3/call1: 56 points, median 1.109,
  // 1.016-1.275): batches <= 132 with rows of 2048-32768 logits (vs the one-CTA radix kernel: 1.03-1.17x), 133-264
  // rows of 2048-12288 (vs form 3 of the row select: 1.21-1.24x; vs the filter at 192 / 256 x 2048: 1.12-1.14x),
  // 265-512 rows of 6144-12288 (vs the filter: 1.06-1.26x in tk3 call 2's table sweep). Not: 265-512 rows of
  // 4096-6143 (marginal: decode 384 x 4096 1.02-1.03x, prefill chunk 384 after 16K (rows <= ~4.2K) 0.94x in call 2's
  // sweep), rows of 2048 at 512+ rows (0.88-0.90x: the filter),
  // rows above 12288 at 133+ rows (one CTA per SM by shared memory: two waves, 0.57-0.93x), rows < 2048 (not measured).
  // (The twenty-first session's region, form 3 (topk_row_kernel) at 133-264 x 3072 (2048 below 192) - 12288, lies
  // inside; form 3 now runs only under variant 6.)
  // Twenty-third session (helper tk4): the sparse form also at <= 132 rows of 1024-2047 logits (decode ctx 4096 /
  // 6144: vs the one-CTA radix kernel 1.01-1.36x, tk4 call 1's sweep against the committed table; same run: call 2).
  if (g_topk_variant != 0) return false;
  if (nq <= kLeanOneWaveNq && max_len >= kSparseMinLen1) return true;
  if (max_len < kLeanMinLen) return false;
  return nq <= kLeanOneWaveNq || (nq <= kLeanTwoPerSmNq && max_len <= kLeanMaxLen2) ||
         (nq <= kLeanMaxNq && max_len >= kLeanMinLenWide && max_len <= kLeanMaxLen2);
}

bool v4_topk_uses_row_lean(int nq, int max_len, int topk) {
  // The lean form (topk_row_lean_kernel): opt-in, variant 7 (wherever variant 6 runs form 3). It was the default's row
  // select in the twenty-second session; since the twenty-third the default runs its sparse form there.
  return g_topk_variant == 7 && v4_topk_uses_row(nq, max_len, topk);
}

bool v4_topk_uses_row_sparse(int nq, int max_len, int topk) {
  // The sparse form (topk_row_sparse_kernel, twenty-third session, helper tk4): the default's row select (variant 0,
  // the lean region of v4_topk_uses_row: same run, tk4 call 1, results/tk4/call1, 54 points of the region, old (lean) /
  // sparse median 1.079, 1.019-1.194, ballot ranks only) and variant 8 (opt-in: wherever variants 6 / 7 run theirs).
  return (g_topk_variant == 0 || g_topk_variant == 8) && v4_topk_uses_row(nq, max_len, topk);
}

const char* v4_topk_kernel_name(int nq, int max_len, int topk) {
  return v4_topk_uses_row_sparse(nq, max_len, topk) ? "radix_row_sparse"
         : v4_topk_uses_row_lean(nq, max_len, topk) ? "radix_row_lean"
         : v4_topk_uses_row(nq, max_len, topk)      ? "radix_row_smem"
         : v4_topk_uses_filter(nq, max_len, topk) ? "threshold_filter"
         : v4_topk_uses_cluster(nq, max_len)   ? "radix_cluster_smem"
                                               : "radix_1cta";
}

namespace {
// Both top-k cluster kernels: rows along grid y, a cluster of cs CTAs per row along grid x; each kernel takes
// (logits, ld, len, topk, idx, chunk = logits per CTA).
using TopkClusterKernel = void (*)(const float*, int, const int*, int, int*, int);
void launch_row_clusters(TopkClusterKernel kernel, int cs, int nq, int threads, size_t smem, cudaStream_t s, const float* logits,
                         int ld, const int* len, int topk, int* idx, int chunk) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(cs, nq);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = cs;
  at[0].val.clusterDim.y = 1;
  at[0].val.clusterDim.z = 1;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  SS_CUDA(cudaLaunchKernelEx(&cfg, kernel, logits, ld, len, topk, idx, chunk));
  SS_LAUNCH_CHECK();
}
}  // namespace

void v4_topk(const float* logits, int ld, const int* len, int nq, int topk, int* idx, cudaStream_t s, int max_len) {
  if (nq <= 0) return;
  if (topk <= 0) throw std::invalid_argument("v4_topk: topk must be positive");
  // both cluster kernels put the rows on grid y (CUDA limit 65,535); the one-CTA kernel's are grid x
  if (nq > 65535 && (v4_topk_uses_filter(nq, max_len, topk) || v4_topk_uses_cluster(nq, max_len)))
    throw std::invalid_argument("v4_topk: the " + std::string(v4_topk_kernel_name(nq, max_len, topk)) +
                                " kernel takes at most 65,535 rows per call (got " + std::to_string(nq) + "): split the call");
  if (v4_topk_uses_row_sparse(nq, max_len, topk)) {
    static bool sattr = false;
    if (!sattr) {
      SS_CUDA(cudaFuncSetAttribute(topk_row_sparse_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, tkr::kSmemMax));
      sattr = true;
    }
    topk_row_sparse_kernel<<<nq, tkr::T, tkr::smem_bytes(max_len), s>>>(logits, ld, len, topk, idx, max_len,
                                                                         g_topk_sparse_max);
    SS_LAUNCH_CHECK();
    return;
  }
  if (v4_topk_uses_row_lean(nq, max_len, topk)) {
    static bool lattr = false;
    if (!lattr) {
      SS_CUDA(cudaFuncSetAttribute(topk_row_lean_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, tkr::kSmemMax));
      lattr = true;
    }
    topk_row_lean_kernel<<<nq, tkr::T, tkr::smem_bytes(max_len), s>>>(logits, ld, len, topk, idx, max_len);
    SS_LAUNCH_CHECK();
    return;
  }
  if (v4_topk_uses_row(nq, max_len, topk)) {
    static bool rattr = false;
    if (!rattr) {
      SS_CUDA(cudaFuncSetAttribute(topk_row_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, tkr::kSmemMax));
      rattr = true;
    }
    topk_row_kernel<<<nq, tkr::T, tkr::smem_bytes(max_len), s>>>(logits, ld, len, topk, idx, max_len);
    SS_LAUNCH_CHECK();
    return;
  }
  if (v4_topk_uses_filter(nq, max_len, topk)) {
    static bool fattr = false;
    if (!fattr) {
      SS_CUDA(cudaFuncSetAttribute(topk_filter_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, tkf::kSmem));
      SS_CUDA(cudaFuncSetAttribute(topk_filter_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
      fattr = true;
    }
    const int fcs = v4_topk_filter_cluster(nq, max_len);
    const int chunk = fcs == 1 ? INT_MAX : ((max_len + fcs - 1) / fcs + 3) & ~3;
    launch_row_clusters(topk_filter_kernel, fcs, nq, tkf::T, tkf::kSmem, s, logits, ld, len, topk, idx, chunk);
    return;
  }
  const int cs = max_len > 0 ? v4_topk_cluster_size(nq, max_len) : 0;
  // (v4_topk_uses_cluster) Variant 3 (the default before the seventeenth session) runs the cluster kernel only where
  // it measured faster than the one-CTA kernel (call 9 sweep: batches <= 16 with rows >= 98304 logits, 1.3-2.5x;
  // batches >= 256 with rows <= 12288, 1.1-1.4x); elsewhere it was 0.4-0.9x. Variant 2 always runs it (tests).
  if (!v4_topk_uses_cluster(nq, max_len)) {
    topk_kernel<<<nq, TKT, 0, s>>>(logits, ld, len, topk, idx);
    SS_LAUNCH_CHECK();
    return;
  }
  static bool attr = false;
  if (!attr) {
    SS_CUDA(cudaFuncSetAttribute(topk_cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, TK2_MAXC * 4 + TK2_CAP * 4));
    attr = true;
  }
  const int chunk = ((max_len + cs - 1) / cs + 3) & ~3;
  launch_row_clusters(topk_cluster_kernel, cs, nq, TK2, static_cast<size_t>(chunk) * 4 + TK2_CAP * 4, s, logits, ld, len, topk, idx, chunk);
}

namespace {
int g_v4ws_pair = -1;  // -1: from env V4WS_PAIR (default 0)
int g_v4ws_f16 = -2;   // -2: from env V4WS_F16 (unset = -1: the default, F16 when idx_ld > kV4wsF16MinLd)
int g_v4ws_qe = -2;    // -2: from env V4WS_QE (unset = -1: kV4wsQeDefault)
int g_v4ws_cd = -2;    // -2: from env V4WS_CD (unset = -1: kV4wsCdDefault)
int g_v4ws_st = -2;    // -2: from env V4WS_ST (unset = -1: kV4wsStDefault)
int g_v4ws_ep = -2;    // -2: from env V4WS_EP (unset = -1: kV4wsEpDefault)
int g_v4ws_v16 = -2;   // -2: from env V4WS_V16 (unset = -1: kV4wsV16Default)
// the defaults (fourteenth session, helper v4d): F16 on every list, early Q, lean consumer (v4d call 2)
constexpr int kV4wsF16MinLd = 0;
constexpr bool kV4wsQeDefault = true;
constexpr bool kV4wsCdDefault = true;
// the staged producer (fifteenth session, helper v4e): V4WS_ST=1; slower with 8-B copies (v4e call 1). On 592-B
// rows (ST + V16, seventeenth session, helper v4i; call 1, same run, best of 2): 1.016-1.069x at 23 of 24
// reference points but 1.005x at CSA prefill 4096 after 64K (3097.2 vs 3111.7 us). Made the default and swept by
// the lead (the six tables, medians 1.006-1.043x faster), taken back the same hour (its prefill rows moved unevenly
// between prefix-0 (ramped) and flat chunks, which the fit's v4_attn_prefill features could not tell apart: the
// attention-prefill class's held-out p95 went to 15.2%, target 15%), and the default again since the eighteenth
// session, whose v4_attn_prefill fit has a fourth feature, the ramp (longest query's rows / mean rows): with the
// ST + V16 rows that family's held-out p95 is within the target (fit log in the commit). V4WS_ST=0 runs the
// in-place producer; with 584-B rows (V4WS_V16=0) the 8-B staged form stays off by default
constexpr bool kV4wsStDefault = true;
// the staged epilogue (same session; first run: the lead's call after v4e): on by default where the launch
// splits no query (every work item writes BF16 rows): 1.02-1.31x there (same run, 24 reference points;
// sweeps against the earlier rows: 0.99-1.42x, median 1.09-1.29x per table); where the plan splits (FP32
// partials + combine: small batches) 0.93-1.06x (median 0.96-0.98x), so split launches keep the
// per-thread stores unless V4WS_EP=1
constexpr bool kV4wsEpDefault = true;
// 592-B pool rows and 16-B gathers (sixteenth session, helper v4f): on by default; same run (v4f call 1,
// best of 3 interleaved) 1.007-1.087x at all 24 reference points (CSA Pro 512 x 64K 457.2 -> 436.3 us, CSA
// prefill 4096 after 64K 3412.0 -> 3139.5, HCA 512 x 1M 2827.3 -> 2694.8); V4WS_V16=0 restores 584-B rows
constexpr bool kV4wsV16Default = true;
template <int DBG, int REG, bool PAIR, int FENCE = 0, bool F16 = false, bool QE = false, bool CD = false, bool ST = false,
          bool EP = false, bool V16 = false>
void v4ws_launch(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s) {
  constexpr int smem = ST ? (V16 ? v4ws::kSmemSt16 : v4ws::kSmemSt) : V16 ? v4ws::kSmem16 : v4ws::kSmem;
  static bool attr = false;
  if (!attr) {
    SS_CUDA(cudaFuncSetAttribute(v4_attn_ws_kernel<DBG, REG, PAIR, FENCE, F16, QE, CD, ST, EP, V16>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    attr = true;
  }
  const dim3 grid(a.H / 64, plan.n_work);
  if constexpr (!PAIR) {
    v4_attn_ws_kernel<DBG, REG, false, 0, F16, QE, CD, ST, EP, V16><<<grid, 384, smem, s>>>(a, plan.work.p);
  } else {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(384);
    cfg.dynamicSmemBytes = v4ws::kSmem;
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 2;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    SS_CUDA(cudaLaunchKernelEx(&cfg, v4_attn_ws_kernel<DBG, REG, true, FENCE>, a, plan.work.p));
  }
  SS_LAUNCH_CHECK();
}
int v4ws_env(int& g, const char* name) {
  if (g == -2) {
    const char* e = std::getenv(name);
    g = e ? std::atoi(e) : -1;
  }
  return g;
}
}  // namespace

void v4_attn_ws_set_pair(int pair) { g_v4ws_pair = pair; }
void v4_attn_ws_set_f16(int f16) { g_v4ws_f16 = f16; }
void v4_attn_ws_set_qe(int qe) { g_v4ws_qe = qe; }
void v4_attn_ws_set_cd(int cd) { g_v4ws_cd = cd; }
void v4_attn_ws_set_st(int st) { g_v4ws_st = st; }
bool v4_attn_ws_uses_st() { return v4ws_env(g_v4ws_st, "V4WS_ST") < 0 ? kV4wsStDefault && v4_attn_ws_uses_v16() : g_v4ws_st != 0; }
void v4_attn_ws_set_ep(int ep) { g_v4ws_ep = ep; }
bool v4_attn_ws_uses_ep(bool split) { return v4ws_env(g_v4ws_ep, "V4WS_EP") < 0 ? kV4wsEpDefault && !split : g_v4ws_ep != 0; }
void v4_attn_ws_set_v16(int v16) { g_v4ws_v16 = v16; }
bool v4_attn_ws_uses_v16() { return v4ws_env(g_v4ws_v16, "V4WS_V16") < 0 ? kV4wsV16Default : g_v4ws_v16 != 0; }
bool v4_attn_ws_uses_qe() { return v4ws_env(g_v4ws_qe, "V4WS_QE") < 0 ? kV4wsQeDefault : g_v4ws_qe != 0; }
bool v4_attn_ws_uses_cd() { return v4ws_env(g_v4ws_cd, "V4WS_CD") < 0 ? kV4wsCdDefault : g_v4ws_cd != 0; }
// The default (since the fourteenth session): F16 on every list. The thirteenth session's rule (F16 only
// where idx_ld > 256: with Q converted before the pipeline, F16 was 0.96-1.01x of BF16 on <= 4 tiles)
// is setting 2; with the early-Q start F16 was faster on short lists too (v4d call 1: HCA 512 x 8K
// 150.3 us vs BF16 160.4, window-only decode 70.4 vs 73.6).
bool v4_attn_ws_uses_f16(int idx_ld) {
  const int f = v4ws_env(g_v4ws_f16, "V4WS_F16");
  if (f == 2) return idx_ld > 256;
  return f < 0 ? idx_ld > kV4wsF16MinLd : f != 0;
}
bool v4_attn_ws_uses_pair(int H) {
  if (g_v4ws_pair < 0) {
    const char* e = std::getenv("V4WS_PAIR");
    g_v4ws_pair = e ? std::atoi(e) : 0;  // off: the pair kernel measured slower (call 2: 627 vs 542 us)
  }
  return g_v4ws_pair != 0 && H % 128 == 0;
}

namespace {
struct V4wsEnv { int dbg = 0, reg = 1, fence = 0; };
const V4wsEnv& v4ws_exp_env() {
  static V4wsEnv e;
  static bool done = false;
  if (!done) {
    if (const char* v = std::getenv("V4WS_FENCE")) e.fence = std::atoi(v);  // experiments: pair barrier scopes
    if (const char* v = std::getenv("V4WS_DEBUG")) e.dbg = std::atoi(v);    // experiments only: wrong outputs
    if (const char* v = std::getenv("V4WS_REG")) e.reg = std::atoi(v);      // experiments: register split (see the kernel)
    done = true;
  }
  return e;
}
struct V4wsForm { bool pair, f16, qe, cd, st, v16; };
V4wsForm v4ws_form(int H, int idx_ld) {
  const V4wsEnv& e = v4ws_exp_env();
  V4wsForm f;
  f.pair = v4_attn_ws_uses_pair(H);
  f.f16 = v4_attn_ws_uses_f16(idx_ld) && !f.pair;  // the pair form has no F16 variant
  // early Q / lean consumer where the form has them: one-CTA, V4WS_REG=1, not the BF16 debug forms
  f.qe = v4_attn_ws_uses_qe() && !f.pair && e.reg == 1 && (e.dbg == 0 || f.f16);
  f.cd = v4_attn_ws_uses_cd() && f.qe;
  f.st = v4_attn_ws_uses_st() && f.f16 && f.cd && e.dbg == 0;
  // 592-B pool rows: the F16 + QE + CD form, in place or staged (ST: since the seventeenth session), no debug form
  f.v16 = v4_attn_ws_uses_v16() && f.f16 && f.cd && e.dbg == 0;
  return f;
}
}  // namespace
int v4_attn_pool_row_bytes(int H, int idx_ld) {
  return std::strcmp(v4_attn_config(H), "wgmma_ws_m64_tn64") == 0 && v4ws_form(H, idx_ld).v16 ? kV4RowBytes16 : kV4RowBytes;
}

namespace {
// Experiment settings that the chosen form would ignore are errors, not silently dropped (dsv4.cuh).
// Explicit settings (1) of QE / CD are checked; their defaults apply only where the form has them.
void v4ws_check_settings(bool pair, bool f16, bool qe, bool cd, int dbg, int reg, int fence) {
  if (g_v4ws_st == 1 && (pair || !f16 || !cd || dbg != 0))
    throw std::invalid_argument("v4_attn_ws: V4WS_ST=1 (v4_attn_ws_set_st(1)) needs the F16 form with V4WS_QE and V4WS_CD (one-CTA kernel, V4WS_REG=1) and no V4WS_DEBUG");
  if (g_v4ws_ep == 1 && (pair || !f16 || !cd || dbg != 0 || (v4_attn_ws_uses_st() && !v4_attn_ws_uses_v16())))
    throw std::invalid_argument("v4_attn_ws: V4WS_EP=1 (v4_attn_ws_set_ep(1)) needs the F16 form with V4WS_QE and V4WS_CD (one-CTA kernel, V4WS_REG=1), no V4WS_DEBUG, and V4WS_ST only with V16");
  const auto bad = [](const std::string& m) { throw std::invalid_argument("v4_attn_ws: " + m); };
  if (dbg < 0 || dbg > 3) bad("V4WS_DEBUG must be 0, 1, 2 or 3 (got " + std::to_string(dbg) + ")");
  if (reg < 0 || reg > 2) bad("V4WS_REG must be 0, 1 or 2 (got " + std::to_string(reg) + ")");
  if (fence < 0 || fence > 1) bad("V4WS_FENCE must be 0 or 1 (got " + std::to_string(fence) + ")");
  if (dbg == 3 && (pair || !f16)) bad("V4WS_DEBUG=3 (consumers only) exists for the F16 form only (no pair)");
  if (g_v4ws_qe == 1 && pair) bad("V4WS_QE=1 (v4_attn_ws_set_qe(1)) conflicts with the pair kernel (V4WS_PAIR=1): the early-Q form is one-CTA only");
  if (g_v4ws_qe == 1 && reg != 1) bad("V4WS_QE=1 conflicts with V4WS_REG (the early-Q form uses V4WS_REG=1)");
  if (g_v4ws_qe == 1 && dbg != 0 && !f16) bad("V4WS_QE=1 conflicts with V4WS_DEBUG in the BF16 form (its debug forms are QE=0)");
  if (g_v4ws_cd == 1 && !qe) bad("V4WS_CD=1 (v4_attn_ws_set_cd(1)) needs the early-Q form (V4WS_QE, one-CTA kernel, V4WS_REG=1)");
  if (dbg != 0 && f16 && (g_v4ws_qe >= 0 || g_v4ws_cd >= 0) && qe != cd)
    bad("V4WS_DEBUG in the F16 form exists with V4WS_QE and V4WS_CD both 1 or both 0");
  if (pair && g_v4ws_f16 == 1)
    bad("V4WS_PAIR=1 (v4_attn_ws_set_pair(1)) conflicts with V4WS_F16=1 (v4_attn_ws_set_f16(1)): the pair kernel has no F16 form");
  if (fence != 0 && !pair) bad("V4WS_FENCE=1 applies to the pair kernel only (V4WS_PAIR=1 at H % 128 == 0)");
  if (fence != 0 && dbg != 0) bad("V4WS_FENCE=1 conflicts with V4WS_DEBUG (the debug forms use V4WS_FENCE=0)");
  if (reg != 1 && dbg != 0) bad("V4WS_REG conflicts with V4WS_DEBUG (the debug forms use V4WS_REG=1)");
  if (reg != 1 && fence != 0) bad("V4WS_REG conflicts with V4WS_FENCE=1 (that form uses V4WS_REG=1)");
  if (reg != 1 && f16)
    bad("V4WS_REG conflicts with the F16 form (the default, or V4WS_F16=1 / 2 with idx_ld > 256; it uses V4WS_REG=1): set V4WS_F16=0");
}
}  // namespace

void v4_attn_ws(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s) {
  if (!a.pool || !a.indices || !a.q || !a.out) throw std::invalid_argument("v4_attn_ws: q, pool, indices and out are required");
  if (a.H % 64 != 0) throw std::invalid_argument("v4_attn_ws: H must be a multiple of 64");
  {  // the caller's pool stride (MqaArgs::pool_row_bytes, 0 = 584) against the form's (host check, no CUDA call)
    const int want = v4ws_form(a.H, a.idx_ld).v16 ? kV4RowBytes16 : kV4RowBytes;
    const int got = a.pool_row_bytes != 0 ? a.pool_row_bytes : kV4RowBytes;
    if (got != want)
      throw std::invalid_argument("v4_attn_ws: the pool's rows are " + std::to_string(got) + " B (MqaArgs::pool_row_bytes = " +
                                  std::to_string(a.pool_row_bytes) + (a.pool_row_bytes ? "" : ", not stated: read as 584") +
                                  ") but this form (" + (want == kV4RowBytes16 ? "V16" : "8-B gathers") + ") reads " +
                                  std::to_string(want) + "-B rows (v4_attn_pool_row_bytes): store the pool at that stride and state it");
  }
  if (plan.n_slots > 0 && (!a.o_part || !a.lse_part)) throw std::invalid_argument("v4_attn_ws: split plan needs o_part/lse_part");
  if (plan.nq != a.nq) throw std::invalid_argument("v4_attn_ws: plan built for another query count");
  const int dbg = v4ws_exp_env().dbg, reg = v4ws_exp_env().reg, fence = v4ws_exp_env().fence;
  if (plan.n_work > 0) {
    const V4wsForm fm = v4ws_form(a.H, a.idx_ld);
    const bool pair = fm.pair, f16 = fm.f16, qe = fm.qe, cd = fm.cd, st = fm.st, v16 = fm.v16;
    const bool ep = v4_attn_ws_uses_ep(plan.n_slots > 0) && f16 && cd && dbg == 0 && (!st || v16);
    v4ws_check_settings(pair, f16, qe, cd, dbg, reg, fence);
    if (g_v4ws_v16 == 1 && !v16)
      throw std::invalid_argument("v4_attn_ws: V4WS_V16=1 (v4_attn_ws_set_v16(1)) needs the F16 form with V4WS_QE and V4WS_CD (one-CTA kernel) and no V4WS_DEBUG");
    if (v16 && (reinterpret_cast<uintptr_t>(a.pool) & 15u) != 0)
      throw std::invalid_argument("v4_attn_ws: the V16 form (592-B pool rows) needs a 16-B aligned pool");
    if (pair) {
      if (dbg == 1) v4ws_launch<1, 1, true>(a, plan, s);
      else if (dbg == 2) v4ws_launch<2, 1, true>(a, plan, s);
      else if (fence == 1) v4ws_launch<0, 1, true, 1>(a, plan, s);
      else if (reg == 0) v4ws_launch<0, 0, true>(a, plan, s);
      else if (reg == 2) v4ws_launch<0, 2, true>(a, plan, s);
      else v4ws_launch<0, 1, true>(a, plan, s);
    } else if (f16) {
      if (dbg != 0 && cd) {  // the debug forms of the default (QE and CD on)
        if (dbg == 1) v4ws_launch<1, 1, false, 0, true, true, true>(a, plan, s);
        else if (dbg == 2) v4ws_launch<2, 1, false, 0, true, true, true>(a, plan, s);
        else v4ws_launch<3, 1, false, 0, true, true, true>(a, plan, s);
      } else if (dbg == 1) v4ws_launch<1, 1, false, 0, true>(a, plan, s);
      else if (dbg == 2) v4ws_launch<2, 1, false, 0, true>(a, plan, s);
      else if (dbg == 3) v4ws_launch<3, 1, false, 0, true>(a, plan, s);
      else if (st && v16 && ep) v4ws_launch<0, 1, false, 0, true, true, true, true, true, true>(a, plan, s);
      else if (st && v16) v4ws_launch<0, 1, false, 0, true, true, true, true, false, true>(a, plan, s);
      else if (st) v4ws_launch<0, 1, false, 0, true, true, true, true>(a, plan, s);
      else if (v16 && ep) v4ws_launch<0, 1, false, 0, true, true, true, false, true, true>(a, plan, s);
      else if (v16) v4ws_launch<0, 1, false, 0, true, true, true, false, false, true>(a, plan, s);
      else if (ep) v4ws_launch<0, 1, false, 0, true, true, true, false, true>(a, plan, s);
      else if (cd) v4ws_launch<0, 1, false, 0, true, true, true>(a, plan, s);
      else if (qe) v4ws_launch<0, 1, false, 0, true, true>(a, plan, s);
      else v4ws_launch<0, 1, false, 0, true>(a, plan, s);
    } else {
      if (dbg == 1) v4ws_launch<1, 1, false>(a, plan, s);
      else if (dbg == 2) v4ws_launch<2, 1, false>(a, plan, s);
      else if (reg == 0) v4ws_launch<0, 0, false>(a, plan, s);
      else if (reg == 2) v4ws_launch<0, 2, false>(a, plan, s);
      else if (cd) v4ws_launch<0, 1, false, 0, false, true, true>(a, plan, s);
      else if (qe) v4ws_launch<0, 1, false, 0, false, true>(a, plan, s);
      else v4ws_launch<0, 1, false>(a, plan, s);
    }
  }
  mla_combine(a, plan, s);
}

}  // namespace servesim::attn
