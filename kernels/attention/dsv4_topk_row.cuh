// servesim attention kernels: DeepSeek V4 per-row top-k for mid-size rows, the shared-memory row select (issue 12,
// eighteenth session, helper tkm; `topk_row_kernel`; the default's row select in the twenty-first session; since the
// twenty-second session only variant 6: the default runs its lean form, dsv4_topk_row_lean.cuh).
// Part of dsv4.cu's translation unit (included by dsv4_topk.cuh after ord_key); not a standalone header.
//
// One CTA of 512 threads per row. The row is read once from device memory (16-B loads, 8 in flight per thread) into
// shared memory as order-preserving keys; their min / max give the row's value range. Then:
//  0. a linear first digit: a histogram of 2048 equal-width bins over [vmin, vmax] (shared-memory atomics spread
//     over the bins for any smooth distribution) and a block scan give the bin b holding the k-th largest;
//  1. one pass over the row (4 keys per thread and step, warp-scan slots): keys of bins above b are written out,
//     the positions of bin b's keys go to a candidate list (shared memory, their keys' min / max tracked);
//  2. exact radix digits (11 bits) over the list only, starting below its keys' common prefix, then the list's keys
//     above the k-th key and the first `rem` ties are written out.
// Why linear: the first version (tkm call 1, 766fa04) took an 11-bit digit of the key just below the row's common
// prefix: for logits of both signs that is sign + exponent + 2 mantissa bits, ~10% of a row's keys share a bin, and
// the histogram's atomics on those bins serialise (0.87-1.04x of the issue-3 one-CTA kernel, which does the same);
// the second (tkm call 2, 0c89694: a threshold from radix digits over a 2048-key sample) paid the same on the sample
// (0.66-1.13x). Those paths stay as the fallback: rows whose min / max is not finite (+-inf, NaN) or whose bin b holds
// more keys than the list's capacity (heavy ties) run the bit-digit path (one digit over the row, its bin's list, or
// if that overflows too the remaining digits over the whole row in shared memory; exact).
// A row longer than the shared-memory capacity the launch was sized for (len > max_len passed): every pass reads the
// row from device memory instead (exact, slow).
// Histograms are double-buffered (one barrier less per digit): hist[p & 1] is filled while hist[(p + 1) & 1], last
// read before the previous digit's closing barrier, is cleared.
#pragma once

namespace servesim::attn {
namespace {
namespace tkr {
constexpr int T = 512;         // threads per CTA
constexpr int NB = 2048;       // bins of an 11-bit digit
constexpr int BPT = NB / T;    // bins per thread in a scan
constexpr int U = 8;           // float4 loads in flight per thread
constexpr int kMaxLen = 32768; // longest max_len the kernel is launched for (128 KB of keys)
constexpr int kSmemMax = 220 * 1024;  // dynamic shared memory limit used for sizing (H200: 227 KB per CTA)
// Dynamic shared memory for rows of up to nmax logits: keys [nmax], 2 histograms [2][NB], list [cc].
__host__ __device__ constexpr int list_cap(int nmax) {
  return nmax < (kSmemMax - nmax * 4 - 2 * NB * 4) / 4 ? nmax : (kSmemMax - nmax * 4 - 2 * NB * 4) / 4;
}
__host__ __device__ constexpr int smem_bytes(int nmax) { return ((nmax + 3) & ~3) * 4 + 2 * NB * 4 + list_cap(nmax) * 4; }
struct Shared {
  int sel_bin, sel_rem, sel_cnt, cnt, cnt2, cgt, ceq;
  unsigned kmin, kmax;  // the row's keys
  unsigned lmin, lmax;  // the candidate list's keys (finish_list, once per CTA)
};
using Scan = cub::BlockScan<int, T, cub::BLOCK_SCAN_WARP_SCANS>;
__device__ __forceinline__ uint32_t lowmask(int b) { return b >= 32 ? 0xFFFFFFFFu : ((1u << b) - 1u); }

// Block-wide min / max of every thread's (mn, mx) into *gmin / *gmax (shared); they must hold 0xFFFFFFFF / 0 and be
// visible (a barrier after they were set) before the call. Ends with a barrier.
__device__ __forceinline__ void block_minmax(unsigned mn, unsigned mx, unsigned* gmin, unsigned* gmax) {
  mn = __reduce_min_sync(0xFFFFFFFFu, mn);
  mx = __reduce_max_sync(0xFFFFFFFFu, mx);
  if ((threadIdx.x & 31) == 0) { atomicMin(gmin, mn); atomicMax(gmax, mx); }
  __syncthreads();
}

// One radix digit, block-wide: among the keys key_at(0..m-1) with (u & mask) == prefix, histogram of bits
// [shift, shift + w) into hist (cleared, visible), clearing hist_next meanwhile; picks the bin of the rank-th largest:
// prefix / mask extended by it, rank -> the rank inside the bin; returns the bin's count. Two barriers + the scan's.
template <class F>
__device__ int digit(F key_at, int m, uint32_t& prefix, uint32_t& mask, int shift, int w, int& rank, int* hist, int* hist_next,
                     Shared& sh, typename Scan::TempStorage& tmp) {
  const int tid = threadIdx.x, nb = 1 << w;
  for (int i = tid; i < NB; i += T) hist_next[i] = 0;
#pragma unroll 4
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
    if (bin >= 0 && run < rank && run + c[k] >= rank) { sh.sel_bin = bin; sh.sel_rem = rank - run; sh.sel_cnt = c[k]; }
    run += c[k];
  }
  __syncthreads();
  prefix |= static_cast<uint32_t>(sh.sel_bin) << shift;
  mask |= static_cast<uint32_t>(nb - 1) << shift;
  rank = sh.sel_rem;
  return sh.sel_cnt;
}

// The linear first digit, block-wide: histogram of bin(u) (0..NB-1, monotone in the key) over key_at(0..m-1) into
// hist (cleared, visible), clearing hist_next meanwhile; sh.sel_bin = the bin of the rank-th largest key, rank -> the
// rank inside it; returns the bin's count. Two barriers + the scan's.
template <class F, class B>
__device__ int digit_lin(F key_at, int m, B bin_of, int& rank, int* hist, int* hist_next, Shared& sh,
                         typename Scan::TempStorage& tmp) {
  const int tid = threadIdx.x;
  for (int i = tid; i < NB; i += T) hist_next[i] = 0;
#pragma unroll 4
  for (int i = tid; i < m; i += T) atomicAdd(&hist[bin_of(key_at(i))], 1);
  __syncthreads();
  int c[BPT], local = 0;
#pragma unroll
  for (int k = 0; k < BPT; ++k) {
    c[k] = hist[NB - 1 - (tid * BPT + k)];
    local += c[k];
  }
  int before;
  Scan(tmp).ExclusiveSum(local, before);
  int run = before;
#pragma unroll
  for (int k = 0; k < BPT; ++k) {
    const int bin = NB - 1 - (tid * BPT + k);
    if (run < rank && run + c[k] >= rank) { sh.sel_bin = bin; sh.sel_rem = rank - run; sh.sel_cnt = c[k]; }
    run += c[k];
  }
  __syncthreads();
  rank = sh.sel_rem;
  return sh.sel_cnt;
}
// The float value of an order-preserving key (inverse of ord_key).
__device__ __forceinline__ float ord_val(uint32_t k) { return __uint_as_float((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k); }

// Warp-aggregated output: the flagged lanes write pos to out[*ctr + their order]; all 32 lanes call it.
__device__ __forceinline__ void put(bool f, int pos, int* ctr, int* out, int off) {
  const unsigned b = __ballot_sync(0xFFFFFFFFu, f);
  if (!b) return;
  const int lane = threadIdx.x & 31;
  int base = 0;
  if (lane == 0) base = atomicAdd(ctr, __popc(b));
  base = __shfl_sync(0xFFFFFFFFu, base, 0);
  if (f) out[off + base + __popc(b & ((1u << lane) - 1u))] = pos;
}
}  // namespace tkr

// logits [nq, ld], lens [nq], idx [nq, K]; dynamic shared memory tkr::smem_bytes(nmax); rows longer than nmax are
// selected from device memory (every pass reads the row).
__global__ void __launch_bounds__(tkr::T) topk_row_kernel(const float* __restrict__ logits, int ld, const int* __restrict__ lens,
                                                         int K, int* __restrict__ idx, int nmax) {
  using namespace tkr;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ Shared sh;
  extern __shared__ __align__(16) uint32_t tkr_smem[];
  const int nmax4 = (nmax + 3) & ~3, cc = list_cap(nmax);
  uint32_t* keys = tkr_smem;                                        // [nmax]
  int* hist = reinterpret_cast<int*>(tkr_smem + nmax4);             // [2][NB]
  int* list = reinterpret_cast<int*>(tkr_smem + nmax4 + 2 * NB);    // [cc] positions
  const int qi = blockIdx.x, tid = threadIdx.x, lane = tid & 31;
  const int n = lens[qi];
  const float* x = logits + static_cast<size_t>(qi) * ld;
  int* out = idx + static_cast<size_t>(qi) * K;
  if (n <= K) {
    for (int i = tid; i < K; i += T) out[i] = i < n ? i : -1;
    return;
  }
  const bool gm = n > nmax;  // row past the shared-memory capacity: keys from device memory
  if (tid == 0) { sh.cnt = 0; sh.cnt2 = 0; sh.cgt = 0; sh.ceq = 0; sh.kmin = 0xFFFFFFFFu; sh.kmax = 0u; sh.lmin = 0xFFFFFFFFu; sh.lmax = 0u; }
  for (int i = tid; i < NB; i += T) hist[i] = 0;
  unsigned mn = 0xFFFFFFFFu, mx = 0u;
  if (!gm) {
    const int h = min(n, static_cast<int>(((16 - (reinterpret_cast<uintptr_t>(x) & 15)) & 15) >> 2));
    const int m4 = (n - h) >> 2, t0 = h + 4 * m4;
    const float4* x4 = reinterpret_cast<const float4*>(x + h);
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
        if (j < m4) {
          const uint32_t k0 = ord_key(a[u].x), k1 = ord_key(a[u].y), k2 = ord_key(a[u].z), k3 = ord_key(a[u].w);
          // keys + h is 16-B aligned only when h == 0
          if (h == 0) {
            *reinterpret_cast<uint4*>(keys + 4 * j) = make_uint4(k0, k1, k2, k3);
          } else {
            uint32_t* d = keys + h + 4 * j;
            d[0] = k0; d[1] = k1; d[2] = k2; d[3] = k3;
          }
          mn = min(mn, min(min(k0, k1), min(k2, k3)));
          mx = max(mx, max(max(k0, k1), max(k2, k3)));
        }
      }
    }
    // head (before the first 16-B boundary) and tail: < 4 + 4 logits
    int i = -1;
    if (tid < h) i = tid;
    else if (tid - h < n - t0) i = t0 + (tid - h);
    if (i >= 0) {
      const uint32_t k = ord_key(__ldg(x + i));
      keys[i] = k;
      mn = min(mn, k);
      mx = max(mx, k);
    }
  } else {
    for (int i = tid; i < n; i += T) {
      const uint32_t k = ord_key(__ldg(x + i));
      mn = min(mn, k);
      mx = max(mx, k);
    }
  }
  __syncthreads();  // keys, cleared histogram and sh visible
  block_minmax(mn, mx, &sh.kmin, &sh.kmax);
  auto key_at = [&](int i) { return gm ? ord_key(__ldg(x + i)) : keys[i]; };
  const uint32_t kmn = sh.kmin, kmx = sh.kmax;
  const int hi0 = kmn == kmx ? 0 : 32 - __clz(kmn ^ kmx);  // bits below the keys' common prefix
  uint32_t prefix = kmx & ~lowmask(hi0), mask = ~lowmask(hi0);
  int rank = K, p = 0;
  int* h0 = hist;
  int* h1 = hist + NB;
  if (hi0 == 0) {  // every key equal: the first K
    for (int i0 = 0; i0 < n; i0 += T) {
      const int i = i0 + tid;
      put(i < n && i < K, i, &sh.ceq, out, 0);
    }
    return;
  }
  // The exact digits over the list's m positions (keys of rank `rank` and above among them; their keys' min / max in
  // lmn / lmx per thread, their common bits above bit hi_cap known equal), then the list's keys above the k-th key
  // and the first `rem` ties go out. Called at most once per CTA (sh.lmin / lmax set at the start).
  auto finish_list = [&](int m, int rank, int hi_cap, unsigned lmn, unsigned lmx) {
    block_minmax(lmn, lmx, &sh.lmin, &sh.lmax);
    const uint32_t a = sh.lmin, z = sh.lmax;
    int hi = a == z ? 0 : 32 - __clz(a ^ z);
    hi = min(hi, hi_cap);
    uint32_t prefix = z & ~lowmask(hi), mask = ~lowmask(hi);
    auto lkey = [&](int j) { return keys[list[j]]; };
    auto lkey_g = [&](int j) { return ord_key(__ldg(x + list[j])); };
    while (hi > 0) {
      const int w = min(11, hi), s = hi - w;
      int* hc = (p & 1) ? h1 : h0;
      int* hn = (p & 1) ? h0 : h1;
      if (gm) digit(lkey_g, m, prefix, mask, s, w, rank, hc, hn, sh, scan_tmp);
      else digit(lkey, m, prefix, mask, s, w, rank, hc, hn, sh, scan_tmp);
      ++p;
      hi = s;
    }
    const uint32_t kth = prefix;
    const int rem = rank;
    for (int j0 = 0; j0 < m; j0 += T) {
      const int j = j0 + tid;
      const int i = j < m ? list[j] : 0;
      const uint32_t u = j < m ? (gm ? ord_key(__ldg(x + i)) : keys[i]) : 0u;
      tkr::put(j < m && u > kth, i, &sh.cgt, out, 0);
      const unsigned be = __ballot_sync(0xFFFFFFFFu, j < m && u == kth);
      if (be) {
        int base = 0;
        if (lane == 0) base = atomicAdd(&sh.ceq, __popc(be));
        base = __shfl_sync(0xFFFFFFFFu, base, 0);
        const int e = base + __popc(be & ((1u << lane) - 1u));
        if (j < m && u == kth && e < rem) out[K - rem + e] = i;
      }
    }
  };
  // 0. a linear first digit: 2048 bins of equal width over the row's value range [vmin, vmax] (bin = (v - vmin) *
  // scale, round-to-nearest sub and mul: monotone in v, the same bin in every pass); keys of bins above the one holding
  // the k-th largest go out, that bin's keys go to the list, and the exact bit digits run over the list only (its
  // keys lie within one bin's width: long common prefix, few and spread keys). Not for rows with a non-finite min / max
  // (+-inf, NaN) or a bin holding more keys than the list's capacity: the bit-digit path below.
  {
    const float vmin = ord_val(kmn), vmax = ord_val(kmx);
    const float range = __fsub_rn(vmax, vmin);
    const float scale = __fdiv_rn(static_cast<float>(NB), range);
    if (isfinite(vmin) && isfinite(vmax) && isfinite(range) && range > 0.f && isfinite(scale) && scale > 0.f) {
      auto lbin = [&](uint32_t u) { return min(NB - 1, __float2int_rz(__fmul_rn(__fsub_rn(ord_val(u), vmin), scale))); };
      int lrank = K;
      int* hc = (p & 1) ? h1 : h0;
      int* hn = (p & 1) ? h0 : h1;
      const int cb = digit_lin(key_at, n, lbin, lrank, hc, hn, sh, scan_tmp);
      ++p;
      const int bsel = sh.sel_bin;
      if (cb <= cc) {  // uniform over the CTA
        unsigned lmn = 0xFFFFFFFFu, lmx = 0u;
        for (int b0 = 0; b0 < n; b0 += 4 * T) {
          const int i = b0 + 4 * tid;
          uint32_t u[4];
          if (!gm && i + 3 < n) {
            const uint4 v = *reinterpret_cast<const uint4*>(keys + i);
            u[0] = v.x; u[1] = v.y; u[2] = v.z; u[3] = v.w;
          } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) u[e] = i + e < n ? key_at(i + e) : 0u;
          }
          bool g[4], f[4];
          int c = 0;
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int bn = i + e < n ? lbin(u[e]) : -1;
            g[e] = bn > bsel;
            f[e] = bn == bsel;
            c += (g[e] ? 1 : 0) + (f[e] ? 0x10000 : 0);
            if (f[e]) { lmn = min(lmn, u[e]); lmx = max(lmx, u[e]); }
          }
          if (!__any_sync(0xFFFFFFFFu, c)) continue;  // warp-uniform
          int incl = c;
#pragma unroll
          for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(0xFFFFFFFFu, incl, o);
            if (lane >= o) incl += y;
          }
          int bg = 0, bf = 0;
          if (lane == 31) {
            if (incl & 0xFFFF) bg = atomicAdd(&sh.cgt, incl & 0xFFFF);
            if (incl >> 16) bf = atomicAdd(&sh.cnt2, incl >> 16);
          }
          int og = __shfl_sync(0xFFFFFFFFu, bg, 31) + (incl & 0xFFFF) - (c & 0xFFFF);
          int of = __shfl_sync(0xFFFFFFFFu, bf, 31) + (incl >> 16) - (c >> 16);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            if (g[e]) out[og++] = i + e;
            if (f[e]) list[of++] = i + e;
          }
        }
        __syncthreads();  // list visible
        finish_list(cb, lrank, 32, lmn, lmx);
        return;
      }
    }
  }
  // 1. the first digit over the whole row
  const int w1 = min(11, hi0), s1 = hi0 - w1;
  const int c1 = digit(key_at, n, prefix, mask, s1, w1, rank, (p & 1) ? h1 : h0, (p & 1) ? h0 : h1, sh, scan_tmp);
  ++p;
  const uint32_t top1 = prefix | lowmask(s1);  // keys above bin b: > top1
  const bool ovf = c1 > cc;                    // uniform over the CTA
  // 2. keys above bin b out; bin b's positions to the list (unless it overflows). 4 consecutive keys per thread and
  // iteration; one warp scan of the packed counts (above: low 16 bits, in bin b: high 16 bits) per 128 keys.
  unsigned lmn = 0xFFFFFFFFu, lmx = 0u;
  for (int b0 = 0; b0 < n; b0 += 4 * T) {
    const int i = b0 + 4 * tid;
    uint32_t u[4];
    if (!gm && i + 3 < n) {
      const uint4 v = *reinterpret_cast<const uint4*>(keys + i);
      u[0] = v.x; u[1] = v.y; u[2] = v.z; u[3] = v.w;
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) u[e] = i + e < n ? key_at(i + e) : 0u;
    }
    bool g[4], f[4];
    int c = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      g[e] = i + e < n && u[e] > top1;
      f[e] = !ovf && i + e < n && (u[e] & mask) == prefix;
      c += (g[e] ? 1 : 0) + (f[e] ? 0x10000 : 0);
      if (f[e]) { lmn = min(lmn, u[e]); lmx = max(lmx, u[e]); }
    }
    if (!__any_sync(0xFFFFFFFFu, c)) continue;  // warp-uniform
    int incl = c;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xFFFFFFFFu, incl, o);
      if (lane >= o) incl += y;
    }
    int bg = 0, bf = 0;
    if (lane == 31) {
      if (incl & 0xFFFF) bg = atomicAdd(&sh.cgt, incl & 0xFFFF);
      if (incl >> 16) bf = atomicAdd(&sh.cnt, incl >> 16);
    }
    int og = __shfl_sync(0xFFFFFFFFu, bg, 31) + (incl & 0xFFFF) - (c & 0xFFFF);
    int of = __shfl_sync(0xFFFFFFFFu, bf, 31) + (incl >> 16) - (c >> 16);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (g[e]) out[og++] = i + e;
      if (f[e]) list[of++] = i + e;
    }
  }
  __syncthreads();  // list visible
  if (!ovf) {
    // 3. the remaining digits over the list, from below its common prefix
    finish_list(c1, rank, s1, lmn, lmx);
  } else {
    // the list would overflow: the remaining digits over the whole row (keys of bin b)
    int hi = s1;
    while (hi > 0) {
      const int w = min(11, hi), s = hi - w;
      int* hc = (p & 1) ? h1 : h0;
      int* hn = (p & 1) ? h0 : h1;
      digit(key_at, n, prefix, mask, s, w, rank, hc, hn, sh, scan_tmp);
      ++p;
      hi = s;
    }
    const uint32_t kth = prefix;
    const int rem = rank;
    for (int i0 = 0; i0 < n; i0 += T) {
      const int i = i0 + tid;
      const uint32_t u = i < n ? key_at(i) : 0u;
      const bool inb = i < n && (u & (~lowmask(s1))) == (kth & ~lowmask(s1));
      tkr::put(inb && u > kth, i, &sh.cgt, out, 0);
      const unsigned be = __ballot_sync(0xFFFFFFFFu, inb && u == kth);
      if (be) {
        int base = 0;
        if (lane == 0) base = atomicAdd(&sh.ceq, __popc(be));
        base = __shfl_sync(0xFFFFFFFFu, base, 0);
        const int e = base + __popc(be & ((1u << lane) - 1u));
        if (inb && u == kth && e < rem) out[K - rem + e] = i;
      }
    }
  }
}

}  // namespace
}  // namespace servesim::attn
