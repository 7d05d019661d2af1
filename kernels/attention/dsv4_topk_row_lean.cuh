// servesim attention kernels: DeepSeek V4 per-row top-k, the lean row select (issue 12, twenty-second session,
// helper tk3; `topk_row_lean_kernel`: variant 7 wherever the row fits; the default's row select in the twenty-second
// session) and its sparse form (twenty-third session, helper tk4; `topk_row_sparse_kernel`: the default's row select,
// v4_topk_uses_row in dsv4.cu; variant 8 wherever the row fits). Part of dsv4.cu's translation unit (included by
// dsv4_topk.cuh after dsv4_topk_row.cuh, whose tkr:: helpers it uses); not a standalone header.
//
// The same algorithm as topk_row_kernel (form 3: the row read once into shared memory, a linear first digit of 2048
// equal-width bins over [vmin, vmax], the selected bin's keys to a list, exact digits over the list; the bit-digit
// fallback for non-finite ranges / overflowing lists; the same lbin, so the same bin and the same candidate list),
// with the instruction diet the twenty-first session's ncu pointed at (NOTES.md, "What would close it"):
//  (1) compaction by key thresholds: lbin is monotone in the key (round-to-nearest sub / mul, truncation, clamp), so
//      after the scan two warps find (32-ary search, 7 ballot rounds over the key space [kmin, kmax]) the smallest key
//      of bin bsel (tlo) and of bin bsel + 1 (thi); the pass is then `u >= thi` (out) and `u >= tlo` (list) per key,
//      no float arithmetic, no min / max tracking;
//  (2) two instances of the row body, chosen once per CTA (a row longer than the launch's max_len -> device memory):
//      the shared-memory instance has no if-converted LDG beside its LDS; the histogram reads 4 keys per LDS.128;
//  (3) the list's exact select by one warp (keys in registers, one ballot-free bit per step: a warp sum per bit over
//      the bits below the list's common prefix) when the list holds <= 256 keys (a 32K row's bin holds ~16 for smooth
//      rows); larger lists use the block-wide 2048-bin digits as before; no second histogram cleared per digit.
// Exact: the same keys out as the radix kernels (ties: any of the equal keys, from K - rem on as topk_row_kernel).
#pragma once

namespace servesim::attn {
namespace {
namespace tkl {
using tkr::NB;
using tkr::T;
using tkr::U;
constexpr int kWarpList = 256;  // lists of up to this many keys: the one-warp exact select (8 keys per lane)

// One warp (all 32 lanes, the same arguments): the smallest u in [lo, hi] with pred(u), pred monotone (false ... true)
// and pred(hi) true. A 32-ary search: lane l tests lo + (l + 1) (hi - lo) / 32 (lane 31 tests hi), <= 7 rounds.
template <class P>
__device__ __forceinline__ uint32_t warp_lower_bound(uint32_t lo, uint32_t hi, P pred) {
  const int lane = threadIdx.x & 31;
  while (lo < hi) {
    const uint64_t len = static_cast<uint64_t>(hi - lo);
    const uint32_t c = lo + static_cast<uint32_t>((len * static_cast<uint64_t>(lane + 1)) >> 5);
    const unsigned b = __ballot_sync(0xFFFFFFFFu, pred(c));
    const int f = __ffs(b) - 1;  // >= 0: lane 31 tests hi
    const uint32_t cf = __shfl_sync(0xFFFFFFFFu, c, f);
    const uint32_t cp = __shfl_sync(0xFFFFFFFFu, c, f > 0 ? f - 1 : 0);
    if (f > 0) lo = cp + 1;  // pred(c[f - 1]) false
    hi = cf;                 // pred(c[f]) true
  }
  return lo;
}

// One warp: the exact select over the list's m <= 32 R positions (keys in shared memory), rank-th largest among them;
// keys above it go to out[*cgt ...], the first `rank - (keys above it in the list)` ties to out[K - rem ...].
// Keys are > 0 (finite rows: kmin >= ord_key(-FLT_MAX)), so 0 marks an empty slot (never matches: every tested
// prefix has a bit set, kth >= the list's min > 0).
template <int R, class F>
__device__ __forceinline__ void warp_finish(F key_of, const int* list, int m, int rank, int K, int* out, int cgt) {
  const int lane = threadIdx.x & 31;
  uint32_t u[R];
  uint32_t a = 0xFFFFFFFFu, z = 0u;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int j = r * 32 + lane;
    u[r] = j < m ? key_of(list[j]) : 0u;
    if (j < m) { a = min(a, u[r]); z = max(z, u[r]); }
  }
  a = __reduce_min_sync(0xFFFFFFFFu, a);
  z = __reduce_max_sync(0xFFFFFFFFu, z);
  const int hi = a == z ? 0 : 32 - __clz(a ^ z);
  uint32_t prefix = z & ~tkr::lowmask(hi), mask = ~tkr::lowmask(hi);
  for (int b = hi - 1; b >= 0; --b) {
    const uint32_t pb = prefix | (1u << b), mb = mask | (1u << b);
    int c = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) c += (u[r] & mb) == pb ? 1 : 0;
    c = __reduce_add_sync(0xFFFFFFFFu, c);
    if (c >= rank) prefix = pb;
    else rank -= c;
    mask = mb;
  }
  const uint32_t kth = prefix;
  const int rem = rank;
  const unsigned lt = (1u << lane) - 1u;
  int og = cgt, oe = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int j = r * 32 + lane;
    const unsigned bg = __ballot_sync(0xFFFFFFFFu, u[r] > kth);
    const unsigned be = __ballot_sync(0xFFFFFFFFu, u[r] == kth);
    if (u[r] > kth) out[og + __popc(bg & lt)] = list[j];
    const int e = oe + __popc(be & lt);
    if (u[r] == kth && e < rem) out[K - rem + e] = list[j];
    og += __popc(bg);
    oe += __popc(be);
  }
}

// The sparse form's placement (SP, twenty-third session): the keys of one kind (out or list) flagged in a warp's 128
// keys (key wb + 4 lane + e flagged iff bit lane of m[e]), cnt of them, placed from dst[o] on. cnt <= smax: a
// warp-uniform loop over the set bits (ffs), one store per key by lane 0, index from the bit; otherwise each flagged
// lane stores at o + its rank among the warp's flags (popc of the ballots below it): no scan, no per-lane counters.
__device__ __forceinline__ void sparse_place(const unsigned (&m)[4], int cnt, int o, int* dst, int wb, int smax) {
  const int lane = threadIdx.x & 31;
  if (cnt <= smax) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      unsigned mm = m[e];
      while (mm) {  // warp-uniform
        const int l = __ffs(mm) - 1;
        mm &= mm - 1u;
        if (lane == 0) dst[o] = wb + 4 * l + e;
        ++o;
      }
    }
  } else {
    const unsigned lt = (1u << lane) - 1u;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if ((m[e] >> lane) & 1u) dst[o + __popc(m[e] & lt)] = wb + 4 * lane + e;
      o += __popc(m[e]);
    }
  }
}

// The row body; GM: the row is read from device memory on every pass (len > the launch's max_len). SP (variant 8,
// twenty-third session): the sparse compaction (ballots of the flags, one atomic per warp and 128 keys, sparse_place)
// and the histogram's bin as one FFMA.RZ (sbin: floor((v - vmin) scale) read off the bits of 2^23 + that product,
// exact and monotone; no F2I) with no per-key bounds test on whole LDS.128 groups; smax: sparse_place's loop bound.
template <bool GM, bool SP = false>
__device__ __forceinline__ void row_body(const float* __restrict__ x, int n, int K, int* __restrict__ out, int cc,
                                         uint32_t* keys, int* hist, int* list, tkr::Shared& sh, uint32_t* thr,
                                         typename tkr::Scan::TempStorage& scan_tmp, int smax = 0) {
  using namespace tkr;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (tid == 0) { sh.cnt = 0; sh.cnt2 = 0; sh.cgt = 0; sh.ceq = 0; sh.kmin = 0xFFFFFFFFu; sh.kmax = 0u; sh.lmin = 0xFFFFFFFFu; sh.lmax = 0u; }
  for (int i = tid; i < 2 * NB; i += T) hist[i] = 0;
  unsigned mn = 0xFFFFFFFFu, mx = 0u;
  if (!GM) {
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
  __syncthreads();  // keys, cleared histograms and sh visible
  block_minmax(mn, mx, &sh.kmin, &sh.kmax);
  auto key_at = [&](int i) -> uint32_t {
    if constexpr (GM) return ord_key(__ldg(x + i));
    else return keys[i];
  };
  // 4 consecutive keys from i (i a multiple of 4): one LDS.128 in shared memory when all 4 exist
  auto keys4 = [&](int i, uint32_t (&u)[4]) {
    if (!GM && i + 3 < n) {
      const uint4 v = *reinterpret_cast<const uint4*>(keys + i);
      u[0] = v.x; u[1] = v.y; u[2] = v.z; u[3] = v.w;
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) u[e] = i + e < n ? key_at(i + e) : 0u;
    }
  };
  const uint32_t kmn = sh.kmin, kmx = sh.kmax;
  const int hi0 = kmn == kmx ? 0 : 32 - __clz(kmn ^ kmx);
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
  // The block-wide exact digits over the list (as topk_row_kernel's finish_list; lists of more than kWarpList keys
  // and the bit-digit path). hist[p & 1] must be clear, the other is cleared by the first digit.
  auto finish_block = [&](int m, int rank, int hi_cap) {
    unsigned lmn = 0xFFFFFFFFu, lmx = 0u;
    for (int j = tid; j < m; j += T) {
      const uint32_t u = key_at(list[j]);
      lmn = min(lmn, u);
      lmx = max(lmx, u);
    }
    block_minmax(lmn, lmx, &sh.lmin, &sh.lmax);
    const uint32_t a = sh.lmin, z = sh.lmax;
    int hi = a == z ? 0 : 32 - __clz(a ^ z);
    hi = min(hi, hi_cap);
    uint32_t prefix = z & ~lowmask(hi), mask = ~lowmask(hi);
    auto lkey = [&](int j) { return key_at(list[j]); };
    while (hi > 0) {
      const int w = min(11, hi), s = hi - w;
      digit(lkey, m, prefix, mask, s, w, rank, (p & 1) ? h1 : h0, (p & 1) ? h0 : h1, sh, scan_tmp);
      ++p;
      hi = s;
    }
    const uint32_t kth = prefix;
    const int rem = rank;
    for (int j0 = 0; j0 < m; j0 += T) {
      const int j = j0 + tid;
      const int i = j < m ? list[j] : 0;
      const uint32_t u = j < m ? key_at(i) : 0u;
      put(j < m && u > kth, i, &sh.cgt, out, 0);
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
  // Keys >= t_out go out, keys in [t_list, t_out) to the list: one pass, 4 consecutive keys per thread and step, one
  // warp scan of the packed counts per 128 keys (only in warps with a key to place).
  auto compact = [&](uint32_t t_list, uint32_t t_out, int* lctr) {
    if constexpr (SP) {
      for (int b0 = 0; b0 < n; b0 += 4 * T) {
        const int i = b0 + 4 * tid;
        uint32_t u[4];
        keys4(i, u);  // slots past n: 0 < t_list, never flagged
        unsigned mg[4], mf[4];
        int ng = 0, nf = 0;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const bool g = u[e] >= t_out;
          mg[e] = __ballot_sync(0xFFFFFFFFu, g);
          mf[e] = __ballot_sync(0xFFFFFFFFu, !g && u[e] >= t_list);
          ng += __popc(mg[e]);
          nf += __popc(mf[e]);
        }
        if (ng + nf == 0) continue;  // warp-uniform
        int base = 0;
        if (lane < 2) base = atomicAdd(lane ? lctr : &sh.cgt, lane ? nf : ng);  // one ATOMS: lane 0 out, lane 1 list
        const int og = __shfl_sync(0xFFFFFFFFu, base, 0), of = __shfl_sync(0xFFFFFFFFu, base, 1);
        const int wb = i - 4 * lane;
        if (ng) sparse_place(mg, ng, og, out, wb, smax);
        if (nf) sparse_place(mf, nf, of, list, wb, smax);
      }
    } else {  // variant 7 (and the default): the scan form
    for (int b0 = 0; b0 < n; b0 += 4 * T) {
      const int i = b0 + 4 * tid;
      uint32_t u[4];
      keys4(i, u);
      bool g[4], f[4];
      int c = 0;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        g[e] = u[e] >= t_out;  // slots past n: keys4 gives 0 < t_list
        f[e] = !g[e] && u[e] >= t_list;
        c += (g[e] ? 1 : 0) + (f[e] ? 0x10000 : 0);
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
        if (incl >> 16) bf = atomicAdd(lctr, incl >> 16);
      }
      int og = __shfl_sync(0xFFFFFFFFu, bg, 31) + (incl & 0xFFFF) - (c & 0xFFFF);
      int of = __shfl_sync(0xFFFFFFFFu, bf, 31) + (incl >> 16) - (c >> 16);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (g[e]) out[og++] = i + e;
        if (f[e]) list[of++] = i + e;
      }
    }
    }
  };
  // 0. the linear first digit (topk_row_kernel's lbin), for rows with a finite, positive range
  {
    const float vmin = tkr::ord_val(kmn), vmax = tkr::ord_val(kmx);
    const float range = __fsub_rn(vmax, vmin);
    const float scale = __fdiv_rn(static_cast<float>(NB), range);
    if (isfinite(vmin) && isfinite(vmax) && isfinite(range) && range > 0.f && isfinite(scale) && scale > 0.f) {
      // SP: floor(RN(v - vmin) * scale) exactly (the sum 2^23 + p rounded toward zero keeps p's integer part; 0 <= p
      // <= ~2048.001), monotone in the key (RN(v - vmin) and the rounded FFMA are non-decreasing in v): not lbin's bins
      // (one rounding fewer), but the histogram, the thresholds and the list all use the same function
      auto lbin = [&](uint32_t u) {
        if constexpr (SP) {
          const uint32_t t = __float_as_uint(__fmaf_rz(__fsub_rn(tkr::ord_val(u), vmin), scale, 8388608.f));
          return min(NB - 1, static_cast<int>(t - 0x4B000000u));
        } else {
          return min(NB - 1, __float2int_rz(__fmul_rn(__fsub_rn(tkr::ord_val(u), vmin), scale)));
        }
      };
      // histogram of lbin over the row into h0 (4 keys per step)
      if constexpr (SP && !GM) {  // whole LDS.128 groups without a per-key test, then the < 4 keys past them
        const int n4 = n & ~3;
        for (int i = 4 * tid; i < n4; i += 4 * T) {
          const uint4 v = *reinterpret_cast<const uint4*>(keys + i);
          atomicAdd(&h0[lbin(v.x)], 1);
          atomicAdd(&h0[lbin(v.y)], 1);
          atomicAdd(&h0[lbin(v.z)], 1);
          atomicAdd(&h0[lbin(v.w)], 1);
        }
        if (n4 + tid < n) atomicAdd(&h0[lbin(keys[n4 + tid])], 1);
      } else {
        for (int i = 4 * tid; i < n; i += 4 * T) {
          uint32_t u[4];
          keys4(i, u);
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (i + e < n) atomicAdd(&h0[lbin(u[e])], 1);
        }
      }
      __syncthreads();
      int c[BPT], local = 0;
#pragma unroll
      for (int k = 0; k < BPT; ++k) {
        c[k] = h0[NB - 1 - (tid * BPT + k)];
        local += c[k];
      }
      int before;
      Scan(scan_tmp).ExclusiveSum(local, before);
      int run = before;
#pragma unroll
      for (int k = 0; k < BPT; ++k) {
        const int bin = NB - 1 - (tid * BPT + k);
        if (run < rank && run + c[k] >= rank) { sh.sel_bin = bin; sh.sel_rem = rank - run; sh.sel_cnt = c[k]; }
        run += c[k];
      }
      __syncthreads();
      p = 1;  // h0 used; h1 still clear
      const int bsel = sh.sel_bin, lrank = sh.sel_rem, cb = sh.sel_cnt;
      if (cb <= cc) {  // uniform over the CTA
        // the smallest keys of bins bsel (warp 0) and bsel + 1 (warp 1); none: 0xFFFFFFFF (kmx <= ord_key(FLT_MAX) < it)
        if (warp < 2) {
          const int b = bsel + warp;
          auto pred = [&](uint32_t u) { return lbin(u) >= b; };
          const uint32_t t = b < NB && pred(kmx) ? warp_lower_bound(kmn, kmx, pred) : 0xFFFFFFFFu;
          if (lane == 0) thr[warp] = t;
        }
        __syncthreads();
        const uint32_t tlo = thr[0], thi = thr[1];
        // tlo >= kmn > 0: a smem slot past n (keys4 gives 0) is never placed
        compact(tlo, thi, &sh.cnt2);
        __syncthreads();  // list and sh.cgt visible
        if (cb <= kWarpList) {
          if (warp == 0) {
            if (cb <= 64) tkl::warp_finish<2>(key_at, list, cb, lrank, K, out, sh.cgt);
            else tkl::warp_finish<8>(key_at, list, cb, lrank, K, out, sh.cgt);
          }
        } else {
          finish_block(cb, lrank, 32);
        }
        return;
      }
    }
  }
  // 1. the bit-digit path (topk_row_kernel's): the first digit over the whole row
  const int w1 = min(11, hi0), s1 = hi0 - w1;
  const int c1 = digit(key_at, n, prefix, mask, s1, w1, rank, (p & 1) ? h1 : h0, (p & 1) ? h0 : h1, sh, scan_tmp);
  ++p;
  const uint32_t top1 = prefix | lowmask(s1);  // keys above bin b: > top1
  const bool ovf = c1 > cc;                    // uniform over the CTA
  // 2. keys above bin b out; bin b's positions to the list (unless it overflows), as topk_row_kernel
  for (int b0 = 0; b0 < n; b0 += 4 * T) {
    const int i = b0 + 4 * tid;
    uint32_t u[4];
    keys4(i, u);
    bool g[4], f[4];
    int c = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      g[e] = i + e < n && u[e] > top1;
      f[e] = !ovf && i + e < n && (u[e] & mask) == prefix;
      c += (g[e] ? 1 : 0) + (f[e] ? 0x10000 : 0);
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
    finish_block(c1, rank, s1);  // the remaining digits over the list, from below its common prefix
    return;
  }
  // the list would overflow: the remaining digits over the whole row (keys of bin b)
  int hi = s1;
  while (hi > 0) {
    const int w = min(11, hi), s = hi - w;
    digit(key_at, n, prefix, mask, s, w, rank, (p & 1) ? h1 : h0, (p & 1) ? h0 : h1, sh, scan_tmp);
    ++p;
    hi = s;
  }
  const uint32_t kth = prefix;
  const int rem = rank;
  for (int i0 = 0; i0 < n; i0 += T) {
    const int i = i0 + tid;
    const uint32_t u = i < n ? key_at(i) : 0u;
    const bool inb = i < n && (u & (~lowmask(s1))) == (kth & ~lowmask(s1));
    put(inb && u > kth, i, &sh.cgt, out, 0);
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
}  // namespace tkl

// logits [nq, ld], lens [nq], idx [nq, K]; dynamic shared memory tkr::smem_bytes(nmax) (the same layout as
// topk_row_kernel); rows longer than nmax run the device-memory instance of the body.
__global__ void __launch_bounds__(tkr::T, 2) topk_row_lean_kernel(const float* __restrict__ logits, int ld,
                                                                   const int* __restrict__ lens, int K, int* __restrict__ idx, int nmax) {
  using namespace tkr;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ Shared sh;
  __shared__ uint32_t thr[2];
  extern __shared__ __align__(16) uint32_t tkr_smem[];
  const int nmax4 = (nmax + 3) & ~3, cc = list_cap(nmax);
  uint32_t* keys = tkr_smem;                                        // [nmax]
  int* hist = reinterpret_cast<int*>(tkr_smem + nmax4);             // [2][NB]
  int* list = reinterpret_cast<int*>(tkr_smem + nmax4 + 2 * NB);    // [cc] positions
  const int qi = blockIdx.x, tid = threadIdx.x;
  const int n = lens[qi];
  const float* x = logits + static_cast<size_t>(qi) * ld;
  int* out = idx + static_cast<size_t>(qi) * K;
  if (n <= K) {
    for (int i = tid; i < K; i += T) out[i] = i < n ? i : -1;
    return;
  }
  if (n > nmax) tkl::row_body<true>(x, n, K, out, cc, keys, hist, list, sh, thr, scan_tmp);
  else tkl::row_body<false>(x, n, K, out, cc, keys, hist, list, sh, thr, scan_tmp);
}

// The sparse form (the default's row select since the twenty-third session, helper tk4; variant 8 wherever the row
// fits): the lean kernel with row_body's SP instance (sparse
// compaction, FFMA.RZ bins); the same launch (grid nq, tkr::T threads, tkr::smem_bytes(nmax)); smax: sparse_place's
// warp-uniform loop bound (keys of one kind per warp and 128 keys).
__global__ void __launch_bounds__(tkr::T, 2) topk_row_sparse_kernel(const float* __restrict__ logits, int ld,
                                                                     const int* __restrict__ lens, int K, int* __restrict__ idx, int nmax,
                                                                     int smax) {
  using namespace tkr;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ Shared sh;
  __shared__ uint32_t thr[2];
  extern __shared__ __align__(16) uint32_t tkr_smem[];
  const int nmax4 = (nmax + 3) & ~3, cc = list_cap(nmax);
  uint32_t* keys = tkr_smem;
  int* hist = reinterpret_cast<int*>(tkr_smem + nmax4);
  int* list = reinterpret_cast<int*>(tkr_smem + nmax4 + 2 * NB);
  const int qi = blockIdx.x, tid = threadIdx.x;
  const int n = lens[qi];
  const float* x = logits + static_cast<size_t>(qi) * ld;
  int* out = idx + static_cast<size_t>(qi) * K;
  if (n <= K) {
    for (int i = tid; i < K; i += T) out[i] = i < n ? i : -1;
    return;
  }
  if (n > nmax) tkl::row_body<true, true>(x, n, K, out, cc, keys, hist, list, sh, thr, scan_tmp, smax);
  else tkl::row_body<false, true>(x, n, K, out, cc, keys, hist, list, sh, thr, scan_tmp, smax);
}

}  // namespace
}  // namespace servesim::attn
