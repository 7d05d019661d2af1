// servesim attention kernels: DeepSeek V4 per-row top-k: the one-CTA radix select (topk_kernel) and the
// cluster form (topk_cluster_kernel, issue 12).
// Part of dsv4.cu's translation unit, not a standalone header: dsv4.cu includes the kernel parts
// in their original order after defining kNegInf, ld4_bf16 and to_e4m3 (one unit keeps the code
// cicc / ptxas generate for every kernel exactly as before the file was split; see mqa.cu).
#pragma once
#include "attention/dsv4.cuh"
#include "attention/hopper.cuh"

#include <cooperative_groups.h>
#include <cub/block/block_scan.cuh>

namespace servesim::attn {
namespace {

// ------------------------------------------------------------------------------------------
// Top-k: one block per row, radix select on order-preserving uint32 keys (12 + 10 + 10 bits).
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t ord_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
constexpr int TKT = 1024;
__global__ void __launch_bounds__(TKT) topk_kernel(const float* __restrict__ logits, int ld, const int* __restrict__ lens,
                                                   int K, int* __restrict__ idx) {
  using Scan = cub::BlockScan<int, TKT>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int hist[4096];
  __shared__ int sel_bin, sel_rem, cgt, ceq;
  const int qi = blockIdx.x, tid = threadIdx.x;
  const int n = lens[qi];
  const float* x = logits + static_cast<size_t>(qi) * ld;
  int* out = idx + static_cast<size_t>(qi) * K;
  if (n <= K) {
    for (int i = tid; i < K; i += TKT) out[i] = i < n ? i : -1;
    return;
  }
  uint32_t prefix = 0, mask = 0;
  int rem = K;
  const int shifts[3] = {20, 10, 0}, bitsv[3] = {12, 10, 10};
#pragma unroll 1
  for (int pass = 0; pass < 3; ++pass) {
    const int shift = shifts[pass], nb = 1 << bitsv[pass];
    for (int i = tid; i < nb; i += TKT) hist[i] = 0;
    __syncthreads();
    for (int i = tid; i < n; i += TKT) {
      const uint32_t u = ord_key(x[i]);
      if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & (nb - 1)], 1);
    }
    __syncthreads();
    const int bpt = nb / TKT;
    int local = 0;
    for (int k = 0; k < bpt; ++k) local += hist[nb - 1 - (tid * bpt + k)];
    int before;
    Scan(scan_tmp).ExclusiveSum(local, before);
    int run = before;
    for (int k = 0; k < bpt; ++k) {
      const int bin = nb - 1 - (tid * bpt + k);
      const int c = hist[bin];
      if (run < rem && run + c >= rem) {
        sel_bin = bin;
        sel_rem = rem - run;
      }
      run += c;
    }
    __syncthreads();
    prefix |= static_cast<uint32_t>(sel_bin) << shift;
    mask |= static_cast<uint32_t>(nb - 1) << shift;
    rem = sel_rem;
    __syncthreads();
  }
  if (tid == 0) { cgt = 0; ceq = 0; }
  __syncthreads();
  for (int i = tid; i < n; i += TKT) {
    const uint32_t u = ord_key(x[i]);
    if (u > prefix) {
      out[atomicAdd(&cgt, 1)] = i;
    } else if (u == prefix) {
      const int e = atomicAdd(&ceq, 1);
      if (e < rem) out[K - rem + e] = i;
    }
  }
}

// ------------------------------------------------------------------------------------------
// Top-k, issue 12: one read of the row from device memory. A row is cut into `cs` chunks (a
// thread-block cluster of cs <= 8 CTAs, one chunk each, held in shared memory); radix select on
// the order-preserving key, 11 + 11 + 10 bits. Scan 1 (whole chunk): histogram of the top 11
// bits; the cluster's histograms are summed through distributed shared memory and every CTA picks
// the same bin b1. Scan 2 (whole chunk): keys above b1 are written out at once, keys in b1 become
// candidates (local index list, up to TK2_CAP per CTA, else that CTA rescans its chunk) and feed
// the histogram of the next 11 bits; pass 3 and the final pick run over the candidates only.
// Output slots come from two counters in CTA 0's shared memory (one atomic per warp).
// (First version, call 7: warp-aggregated atomics through __match_any_sync and four full scans
// made it 1.5-5x slower than the one-CTA kernel; see NOTES.md.)
// ------------------------------------------------------------------------------------------
constexpr int TK2 = 512, TK2_BINS = 2048, TK2_MAXC = 32768, TK2_CAP = 4096;
__global__ void __launch_bounds__(TK2) topk_cluster_kernel(const float* __restrict__ logits, int ld, const int* __restrict__ lens,
                                                           int K, int* __restrict__ idx, int chunk) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  using Scan = cub::BlockScan<int, TK2>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int hist[2][TK2_BINS];
  __shared__ int sel_bin, sel_rem, sel_all, sel_tot, ncand, cnt[2];
  extern __shared__ __align__(16) float xs[];
  int* cand = reinterpret_cast<int*>(xs + chunk);  // [TK2_CAP] local indices
  const int cs = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const int qi = blockIdx.y, tid = threadIdx.x, lane = tid & 31;
  const int n = lens[qi];
  int* out = idx + static_cast<size_t>(qi) * K;
  if (n <= K) {  // uniform over the cluster: no CTA of it reaches a cluster barrier
    if (rank == 0)
      for (int i = tid; i < K; i += TK2) out[i] = i < n ? i : -1;
    return;
  }
  const int c0 = rank * chunk, m = max(0, min(n, c0 + chunk) - c0);
  const float* x = logits + static_cast<size_t>(qi) * ld + c0;
  if ((reinterpret_cast<uintptr_t>(x) & 15) == 0) {
    const int m4 = m >> 2;
    for (int i = tid; i < m4; i += TK2) cp_async16(xs + 4 * i, x + 4 * i);
    cp_async_commit();
    for (int i = 4 * m4 + tid; i < m; i += TK2) xs[i] = x[i];
  } else {
    for (int i = tid; i < m; i += TK2) xs[i] = x[i];
  }
  for (int i = tid; i < 2 * TK2_BINS; i += TK2) (&hist[0][0])[i] = 0;
  if (tid == 0) { ncand = 0; if (rank == 0) { cnt[0] = 0; cnt[1] = 0; } }
  cp_async_wait<0>();
  __syncthreads();
  int* gcnt = cluster.map_shared_rank(cnt, 0);
  // Sums histogram h over the cluster (bins nb-1.. in descending order, bpt per thread) and picks the
  // bin holding the rem-th largest key: sel_bin, sel_rem (rank inside it), sel_all (bin taken whole).
  auto select = [&](int* h, int nb, int rem) {
    const int bpt = nb / TK2;
    int tot[TK2_BINS / TK2];
    int local = 0;
#pragma unroll
    for (int k = 0; k < TK2_BINS / TK2; ++k) {
      tot[k] = 0;
      if (k < bpt) {
        const int bin = nb - 1 - (tid * bpt + k);
        int v[8];
#pragma unroll
        for (int r = 0; r < 8; ++r) v[r] = r < cs ? cluster.map_shared_rank(h, r)[bin] : 0;
#pragma unroll
        for (int r = 0; r < 8; ++r) tot[k] += v[r];
        local += tot[k];
      }
    }
    int before;
    Scan(scan_tmp).ExclusiveSum(local, before);
    if (tid == TK2 - 1) sel_tot = before + local;
    int run = before;
#pragma unroll
    for (int k = 0; k < TK2_BINS / TK2; ++k) {
      if (k < bpt) {
        const int bin = nb - 1 - (tid * bpt + k);
        if (run < rem && run + tot[k] >= rem) {
          sel_bin = bin;
          sel_rem = rem - run;
          sel_all = (run + tot[k] == rem);
        }
        run += tot[k];
      }
    }
    __syncthreads();
  };
  // Writes the keys flagged `win` of this warp's 32 elements to consecutive slots of the output.
  auto emit = [&](bool win, int i) {
    const unsigned bw = __ballot_sync(0xffffffffu, win);
    if (!bw) return;
    int base = 0;
    if (lane == 0) base = atomicAdd(gcnt, __popc(bw));
    base = __shfl_sync(0xffffffffu, base, 0);
    if (win) out[base + __popc(bw & ((1u << lane) - 1u))] = c0 + i;
  };
  // Histogram buffers alternate: hist[hb] is being filled / read by the cluster; the other one was
  // last read remotely before the latest cluster barrier, so it may be cleared.
  int hb = 0;
  auto next_buf = [&](int nb) {
    hb ^= 1;
    for (int i = tid; i < nb; i += TK2) hist[hb][i] = 0;
    __syncthreads();
  };
  // Sample (rows >= 16 K): every (m/1024)-th key of each chunk; the cluster's sample histogram gives
  // the bin `lo` above which about 2K (+32) keys of the row are expected, and scan 1 counts only
  // keys in or above it (a compare instead of an atomic for the rest). If fewer than K keys turn out
  // to lie there, scan 1 is repeated over all keys.
  uint32_t lo = 0;
  if (n >= 16 * K) {
    const int step = max(1, m / 1024);
    for (int j = tid; j * step < m; j += TK2) atomicAdd(&hist[0][ord_key(xs[j * step]) >> 21], 1);
    long stot = 0;
    for (int r = 0; r < cs; ++r) {
      const int mr = max(0, min(n, (r + 1) * chunk) - r * chunk), sr = max(1, mr / 1024);
      stot += (mr + sr - 1) / sr;
    }
    const long target = 2L * K * stot / n + 32;
    cluster.sync();
    if (target < stot) {
      select(hist[0], 2048, static_cast<int>(target));
      lo = static_cast<uint32_t>(sel_bin);
    }
    next_buf(2048);
  }
  // Scan 1: histogram of bits 31..21 (keys with those bits >= lo).
  for (int i0 = 0; i0 < m; i0 += TK2) {
    const int i = i0 + tid;
    if (i < m) {
      const uint32_t top = ord_key(xs[i]) >> 21;
      if (top >= lo) atomicAdd(&hist[hb][top], 1);
    }
  }
  cluster.sync();
  select(hist[hb], 2048, K);
  if (sel_tot < K) {  // the sample's bin was too high: count every key
    next_buf(2048);
    for (int i0 = 0; i0 < m; i0 += TK2) {
      const int i = i0 + tid;
      if (i < m) atomicAdd(&hist[hb][ord_key(xs[i]) >> 21], 1);
    }
    cluster.sync();
    select(hist[hb], 2048, K);
  }
  const uint32_t b1 = static_cast<uint32_t>(sel_bin);
  int rem = sel_rem;
  const bool all1 = sel_all;
  next_buf(2048);
  // Scan 2: keys above b1 are in; keys in b1 are candidates (histogram of bits 20..10).
  for (int i0 = 0; i0 < m; i0 += TK2) {
    const int i = i0 + tid;
    const uint32_t u = i < m ? ord_key(xs[i]) : 0u;
    const uint32_t top = u >> 21;
    const bool in = i < m && (top > b1 || (all1 && top == b1));
    emit(in, i);
    if (!all1 && i < m && top == b1) {
      atomicAdd(&hist[hb][(u >> 10) & 2047], 1);
      const int c = atomicAdd(&ncand, 1);
      if (c < TK2_CAP) cand[c] = i;
    }
  }
  if (!all1) {  // uniform over the cluster
    __syncthreads();
    const bool ovf = ncand > TK2_CAP;  // this CTA rescans its chunk instead of the list
    const int nc = ovf ? m : ncand;
    uint32_t prefix = b1 << 21, mask = 0xFFE00000u;
    cluster.sync();
    select(hist[hb], 2048, rem);
    prefix |= static_cast<uint32_t>(sel_bin) << 10;
    mask |= 0x001FFC00u;
    rem = sel_rem;
    if (!sel_all) {
      next_buf(1024);
      for (int j = tid; j < nc; j += TK2) {
        const uint32_t u = ord_key(xs[ovf ? j : cand[j]]);
        if ((u & mask) == prefix) atomicAdd(&hist[hb][u & 1023], 1);
      }
      cluster.sync();
      select(hist[hb], 1024, rem);
      prefix |= static_cast<uint32_t>(sel_bin);
      mask = 0xFFFFFFFFu;
      rem = sel_rem;
    }
    // Final pick among the candidates (keys in b1): above the prefix in; rem of those equal to it.
    for (int j0 = 0; j0 < nc; j0 += TK2) {
      const int j = j0 + tid;
      const int i = j < nc ? (ovf ? j : cand[j]) : 0;
      const uint32_t u = j < nc ? ord_key(xs[i]) : 0u;
      const bool c1 = j < nc && (u >> 21) == b1;
      const bool gt = c1 && (u & mask) > prefix, eq = c1 && (u & mask) == prefix;
      emit(gt, i);
      const unsigned be = __ballot_sync(0xffffffffu, eq);
      if (be) {
        int base = 0;
        if (lane == 0) base = atomicAdd(gcnt + 1, __popc(be));
        base = __shfl_sync(0xffffffffu, base, 0);
        const int e = base + __popc(be & ((1u << lane) - 1u));
        if (eq && e < rem) out[K - rem + e] = c0 + i;
      }
    }
  }
  cluster.sync();  // CTA 0's counters and every histogram stay alive until the cluster is done
}

}  // namespace
}  // namespace servesim::attn

// The one-read threshold filter (seventeenth session), default of v4_topk for topk <= 2048.
#include "attention/dsv4_topk_filter.cuh"
// The shared-memory row select for mid-size rows (eighteenth session; form 3, variant 6; its lean form below is the
// default's row select since the twenty-second session).
#include "attention/dsv4_topk_row.cuh"
// The lean row select (twenty-second session, helper tk3; variant 7 wherever the row fits) and its sparse form (twenty-
// third session, helper tk4): the default's row select (v4_topk_uses_row; variant 8 wherever the row fits).
#include "attention/dsv4_topk_row_lean.cuh"
