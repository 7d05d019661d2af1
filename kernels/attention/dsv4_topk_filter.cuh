// servesim attention kernels: DeepSeek V4 per-row top-k, the one-read threshold filter (issue 12,
// seventeenth session; `topk_filter_kernel`, default of v4_topk for topk <= 2048).
// Part of dsv4.cu's translation unit (included by dsv4_topk.cuh after ord_key); not a standalone header.
//
// One row = one cluster of cs (1..8) CTAs of 256 threads; CTA r filters the r-th chunk of the row (the last CTA
// up to the row's end, also where the row is longer than cs chunks).
//  1. Threshold: every CTA of the row draws the same sample of the row (min(1024, n/128) sectors of 8
//     consecutive logits spread over it, S = n/16 .. 8192 keys; the sectors read after the first CTA hit L2) and picks
//     the key thr below which ~C = min(max(2k, k + 2000), (k + CAP) / 2) logits of the row are expected (radix pick of
//     the sample's ceil(C * S / n)-th largest key, 22 bits).
//  2. Filter: one read of the chunk (16-B loads, 8 per thread in flight): keys >= thr go to a
//     candidate list in shared memory (key, position; warp-aggregated slots), CAP per CTA.
//  3. CTA 0 gathers the cluster's lists through distributed shared memory and runs an exact radix
//     select over the candidates (digits start below the candidates' common key prefix, so the
//     histogram atomics spread), then writes keys above the k-th key and the first `rem` ties.
//     If fewer than k candidates were found, or a list overflowed, CTA 0 runs the exact select over
//     the row in global memory instead (slow, correct; random rows: < 1e-7 of rows).
// Rows of n <= 2 CAP logits are read whole into shared memory by CTA 0 (no sample, no filter).
#pragma once

namespace servesim::attn {
namespace {
namespace tkf {
constexpr int T = 256;      // threads per CTA (64 registers: 4 CTAs per SM)
constexpr int CAP = 5888;   // candidates per CTA (4 CTAs per SM fit: 4 x ~57.5 KB incl. static and reserved)
constexpr int NSECT = 1024; // sample sectors (8 logits each)
constexpr int U = 8;        // float4 loads in flight per thread
constexpr int BPT = 2048 / T;  // histogram bins per thread in a scan
constexpr int kSmem = CAP * 8 + 2048 * 4;  // keys [CAP], positions [CAP], histogram [2048]
struct Shared {
  int sel_bin, sel_rem, cnt, cgt, ceq;
  unsigned kmin, kmax, cmax;  // cmax: the largest candidate key of this CTA's list
};
using Scan = cub::BlockScan<int, T>;
// Candidates aimed at: between K and CAP (K 512: 2512, 1024: 3024, 2048: 3968 = the midpoint).
__host__ __device__ constexpr int target(int K) {
  return (K + 2000 > 2 * K ? K + 2000 : 2 * K) < (K + CAP) / 2 ? (K + 2000 > 2 * K ? K + 2000 : 2 * K) : (K + CAP) / 2;
}

__device__ __forceinline__ uint32_t lowmask(int b) { return b >= 32 ? 0xFFFFFFFFu : ((1u << b) - 1u); }

// Block-wide (all T threads): among the m keys key_at(0..m-1), the rank-th largest (1 <= rank <= m) down to
// bit lo: prefix = its bits >= lo (lower bits 0); rem = how many of the keys that share those bits are
// taken (rank minus the keys above them). Digits of <= 11 bits start below the keys' common prefix, from the
// keys' range: every thread passes bounds mn <= its keys <= mx it already knows (or 0xFFFFFFFF / 0), and with
// scan = true the keys are read once more for them.
template <class F>
__device__ void pick(F key_at, int m, int rank, int lo, int* hist, Shared& sh, typename Scan::TempStorage& tmp,
                     uint32_t& prefix_out, int& rem_out, unsigned mn, unsigned mx, bool scan) {
  const int tid = threadIdx.x, lane = tid & 31;
  if (scan)
    for (int i = tid; i < m; i += T) {
      const uint32_t u = key_at(i);
      mn = min(mn, u);
      mx = max(mx, u);
    }
  mn = __reduce_min_sync(0xFFFFFFFFu, mn);
  mx = __reduce_max_sync(0xFFFFFFFFu, mx);
  if (tid == 0) { sh.kmin = 0xFFFFFFFFu; sh.kmax = 0u; }
  __syncthreads();
  if (lane == 0) { atomicMin(&sh.kmin, mn); atomicMax(&sh.kmax, mx); }
  __syncthreads();
  const uint32_t kmn = sh.kmin, kmx = sh.kmax;
  int hi = (kmn == kmx) ? 0 : 32 - __clz(kmn ^ kmx);  // bits below the common prefix
  uint32_t prefix = kmx & ~lowmask(hi), mask = ~lowmask(hi);
  int rem = rank;
  while (hi > lo) {
    const int w = min(11, hi - lo), shift = hi - w, nb = 1 << w;
    for (int i = tid; i < nb; i += T) hist[i] = 0;
    __syncthreads();
    for (int i = tid; i < m; i += T) {
      const uint32_t u = key_at(i);
      if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & (nb - 1)], 1);
    }
    __syncthreads();
    int c[BPT], local = 0;
#pragma unroll
    for (int k = 0; k < BPT; ++k) {
      const int bin = nb - 1 - (tid * BPT + k);
      c[k] = bin >= 0 ? hist[bin] : 0;
      local += c[k];
    }
    int before;
    Scan(tmp).ExclusiveSum(local, before);
    int run = before;
#pragma unroll
    for (int k = 0; k < BPT; ++k) {
      const int bin = nb - 1 - (tid * BPT + k);
      if (bin >= 0 && run < rem && run + c[k] >= rem) { sh.sel_bin = bin; sh.sel_rem = rem - run; }
      run += c[k];
    }
    __syncthreads();
    prefix |= static_cast<uint32_t>(sh.sel_bin) << shift;
    mask |= static_cast<uint32_t>(nb - 1) << shift;
    rem = sh.sel_rem;
    __syncthreads();
    hi = shift;
  }
  prefix_out = prefix;
  rem_out = rem;
}

// Block-wide: writes the positions of the keys > kth and the first rem keys == kth to out[0..K).
template <class F, class P>
__device__ void emit_topk(F key_at, P pos_at, int m, uint32_t kth, int rem, int K, int* out, Shared& sh) {
  const int tid = threadIdx.x, lane = tid & 31;
  for (int i0 = 0; i0 < m; i0 += T) {
    const int i = i0 + tid;
    const uint32_t u = i < m ? key_at(i) : 0u;
    const bool gt = i < m && u > kth, eq = i < m && u == kth;
    const unsigned bg = __ballot_sync(0xFFFFFFFFu, gt), be = __ballot_sync(0xFFFFFFFFu, eq);
    int bgb = 0, beb = 0;
    if (lane == 0) {
      if (bg) bgb = atomicAdd(&sh.cgt, __popc(bg));
      if (be) beb = atomicAdd(&sh.ceq, __popc(be));
    }
    bgb = __shfl_sync(0xFFFFFFFFu, bgb, 0);
    beb = __shfl_sync(0xFFFFFFFFu, beb, 0);
    const unsigned below = (1u << lane) - 1u;
    if (gt) out[bgb + __popc(bg & below)] = pos_at(i);
    if (eq) {
      const int e = beb + __popc(be & below);
      if (e < rem) out[K - rem + e] = pos_at(i);
    }
  }
}
}  // namespace tkf

__global__ void __launch_bounds__(tkf::T, 4) topk_filter_kernel(const float* __restrict__ logits, int ld, const int* __restrict__ lens,
                                                             int K, int* __restrict__ idx, int chunk) {
  using namespace tkf;
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ Shared sh;
  extern __shared__ __align__(16) uint32_t tkf_smem[];
  uint32_t* ckey = tkf_smem;                                   // [CAP] (sample / whole row: [2 CAP])
  int* cpos = reinterpret_cast<int*>(tkf_smem + CAP);          // [CAP]
  int* hist = reinterpret_cast<int*>(tkf_smem + 2 * CAP);      // [2048]
  const int cs = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const int qi = blockIdx.y, tid = threadIdx.x, lane = tid & 31;
  const int n = lens[qi];
  const float* x = logits + static_cast<size_t>(qi) * ld;
  int* out = idx + static_cast<size_t>(qi) * K;
  if (tid == 0) { sh.cnt = 0; sh.cgt = 0; sh.ceq = 0; sh.cmax = 0u; }
  if (n <= K) {  // uniform over the cluster: nobody reaches a cluster barrier
    if (rank == 0)
      for (int i = tid; i < K; i += T) out[i] = i < n ? i : -1;
    return;
  }
  if (n <= 2 * CAP) {  // the whole row in shared memory (CTA 0 only; uniform over the cluster)
    if (rank != 0) return;
    unsigned mn = 0xFFFFFFFFu, mx = 0u;
    for (int b = 0; b < n; b += 8 * T) {  // 8 loads in flight per thread, then the stores
      float v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = b + u * T + tid < n ? __ldg(x + b + u * T + tid) : 0.f;
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (b + u * T + tid < n) {
          const uint32_t k = ord_key(v[u]);
          ckey[b + u * T + tid] = k;
          mn = min(mn, k);
          mx = max(mx, k);
        }
    }
    __syncthreads();
    auto key_at = [&](int i) { return ckey[i]; };
    uint32_t kth;
    int rem;
    pick(key_at, n, K, 0, hist, sh, scan_tmp, kth, rem, mn, mx, false);
    emit_topk(key_at, [](int i) { return i; }, n, kth, rem, K, out, sh);
    return;
  }
  // 1. threshold from the row's sample (identical in every CTA of the cluster)
  uint32_t thr;
  {
    unsigned mn = 0xFFFFFFFFu, mx = 0u;
    const int ns = max(1, min(NSECT, n / 128)), S = 8 * ns;  // S = n/16 .. 8192 samples
    const long rk = (static_cast<long>(target(K)) * S + n - 1) / n;
    const int r = static_cast<int>(max(1L, min(static_cast<long>(S), rk)));
    for (int t0 = 0; t0 < S; t0 += 8 * T) {  // 8 loads in flight per thread, then the stores
      float v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int s = t0 + u * T + tid;
        v[u] = s < S ? __ldg(x + ((static_cast<long>(s >> 3) * n / ns) & ~7L) + (s & 7)) : 0.f;
      }
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (t0 + u * T + tid < S) {
          const uint32_t k = ord_key(v[u]);
          ckey[t0 + u * T + tid] = k;
          mn = min(mn, k);
          mx = max(mx, k);
        }
    }
    __syncthreads();
    int rem_unused;
    pick([&](int i) { return ckey[i]; }, S, r, 10, hist, sh, scan_tmp, thr, rem_unused, mn, mx, false);
  }
  // 2. filter this CTA's chunk: keys >= thr -> (ckey, cpos); the cluster's last CTA scans up to n, so a row longer
  // than the max_len the chunk came from is read whole (seventeenth session, helper tf: its tail was dropped)
  const int c0 = rank * chunk, m = max(0, (rank == cs - 1 ? n : min(n, c0 + chunk)) - c0);
  const float* xc = x + c0;
  unsigned cmx = 0u;  // this thread's largest candidate key
  auto take = [&](const float (&v)[4], int base_i, int nv) {  // all 32 lanes call it
    bool p[4];
    int c = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      p[e] = e < nv && ord_key(v[e]) >= thr;
      c += p[e];
    }
    if (!__any_sync(0xFFFFFFFFu, c)) return;
    int incl = c;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xFFFFFFFFu, incl, o);
      if (lane >= o) incl += y;
    }
    int base = 0;
    if (lane == 31) base = atomicAdd(&sh.cnt, incl);
    base = __shfl_sync(0xFFFFFFFFu, base, 31) + incl - c;
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (p[e]) {
        const uint32_t k = ord_key(v[e]);
        cmx = max(cmx, k);
        if (base < CAP) { ckey[base] = k; cpos[base] = c0 + base_i + e; }
        ++base;
      }
  };
  {
    const int h = min(m, static_cast<int>(((16 - (reinterpret_cast<uintptr_t>(xc) & 15)) & 15) >> 2));
    const int m4 = (m - h) >> 2, tail = m - h - 4 * m4;
    const float4* x4 = reinterpret_cast<const float4*>(xc + h);
    for (int b = 0; b < m4; b += T * U) {
      float4 a[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = b + u * T + tid;
        a[u] = j < m4 ? __ldg(x4 + j) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = b + u * T + tid;
        const float v[4] = {a[u].x, a[u].y, a[u].z, a[u].w};
        take(v, h + 4 * j, j < m4 ? 4 : 0);
      }
    }
    float v[4] = {0.f, 0.f, 0.f, 0.f};
    int bi = 0, nv = 0;
    if (tid < h) { bi = tid; v[0] = xc[bi]; nv = 1; }
    else if (tid - h < tail) { bi = h + 4 * m4 + (tid - h); v[0] = xc[bi]; nv = 1; }
    take(v, bi, nv);
  }
  cmx = __reduce_max_sync(0xFFFFFFFFu, cmx);
  if (lane == 0) atomicMax(&sh.cmax, cmx);
  __syncthreads();
  // 3. CTA 0 gathers the lists (distributed shared memory) and selects
  if (cs > 1) cluster.sync();
  bool bad = false;
  int tot = 0;
  unsigned gmax = 0u;  // the largest candidate key of the row
  if (rank == 0) {
    int off[8], cnt[8];
    for (int r = 0; r < cs; ++r) {
      const int cr = r == 0 ? sh.cnt : *cluster.map_shared_rank(&sh.cnt, r);
      gmax = max(gmax, r == 0 ? sh.cmax : *cluster.map_shared_rank(&sh.cmax, r));
      bad |= cr > CAP;
      off[r] = tot;
      cnt[r] = min(cr, CAP);
      tot += cnt[r];
    }
    bad |= tot > CAP || tot < K;
    if (!bad)
      for (int r = 1; r < cs; ++r) {
        const uint32_t* rk = cluster.map_shared_rank(ckey, r);
        const int* rp = cluster.map_shared_rank(cpos, r);
        for (int i = tid; i < cnt[r]; i += T) { ckey[off[r] + i] = rk[i]; cpos[off[r] + i] = rp[i]; }
      }
  }
  if (cs > 1) cluster.sync();  // the other CTAs' lists stay alive until CTA 0 has copied them
  if (rank != 0) return;
  __syncthreads();
  uint32_t kth;
  int rem;
  if (!bad) {
    auto key_at = [&](int i) { return ckey[i]; };
    pick(key_at, tot, K, 0, hist, sh, scan_tmp, kth, rem, thr, gmax, false);  // candidates lie in [thr, gmax]
    emit_topk(key_at, [&](int i) { return cpos[i]; }, tot, kth, rem, K, out, sh);
  } else {  // exact select over the row in global memory
    auto key_at = [&](int i) { return ord_key(__ldg(x + i)); };
    pick(key_at, n, K, 0, hist, sh, scan_tmp, kth, rem, 0xFFFFFFFFu, 0u, true);
    emit_topk(key_at, [](int i) { return i; }, n, kth, rem, K, out, sh);
  }
}

}  // namespace
}  // namespace servesim::attn
