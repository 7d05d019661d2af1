// Token permutation (gather by expert) and combine (weighted sum of expert outputs, written as a
// deterministic gather), with the scan that also yields the grouped GEMM's token-tile offsets.
#include "moe/moe.cuh"
#include "moe/device_util.cuh"
#include "common/cuda_check.cuh"

#include <stdexcept>

namespace servesim::kernels::moe {

namespace {

__global__ void count_kernel(const int* __restrict__ ids, int n, int E, int* __restrict__ counts) {
  extern __shared__ int hist[];
  for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) atomicAdd(&hist[ids[i]], 1);
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x)
    if (hist[e]) atomicAdd(&counts[e], hist[e]);
}

/// One block of 1024 threads, E <= 1024: exclusive scans of counts and of ceil(counts/bt).
__global__ void scan_kernel(const int* __restrict__ counts, int E, int bt, int* __restrict__ row_offsets,
                            int* __restrict__ tile_offsets, int* __restrict__ cursor) {
  __shared__ int wsum_r[32], wsum_t[32];
  const int e = threadIdx.x, lane = e & 31, w = e >> 5;
  const int c = e < E ? counts[e] : 0;
  int r = c, t = (c + bt - 1) / bt;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int a = __shfl_up_sync(0xffffffffu, r, o), b = __shfl_up_sync(0xffffffffu, t, o);
    if (lane >= o) { r += a; t += b; }
  }
  if (lane == 31) { wsum_r[w] = r; wsum_t[w] = t; }
  __syncthreads();
  if (w == 0) {
    int a = wsum_r[lane], b = wsum_t[lane];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int x = __shfl_up_sync(0xffffffffu, a, o), y = __shfl_up_sync(0xffffffffu, b, o);
      if (lane >= o) { a += x; b += y; }
    }
    wsum_r[lane] = a;
    wsum_t[lane] = b;
  }
  __syncthreads();
  const int base_r = w > 0 ? wsum_r[w - 1] : 0, base_t = w > 0 ? wsum_t[w - 1] : 0;
  const int incl_r = r + base_r, incl_t = t + base_t;
  if (e < E) {
    row_offsets[e + 1] = incl_r;
    tile_offsets[e + 1] = incl_t;
    cursor[e] = incl_r - c;
  }
  if (e == 0) { row_offsets[0] = 0; tile_offsets[0] = 0; }
}

/// Block-wide exclusive scan of v[0..n) in place (shared memory), n <= 4 * blockDim.x * 8; returns the
/// total. `red` is shared scratch of >= 33 ints. All threads must call it.
__device__ int block_exclusive_scan(int* v, int n, int* red) {
  const int per = (n + blockDim.x - 1) / blockDim.x;
  const int b0 = min(n, static_cast<int>(threadIdx.x) * per), b1 = min(n, b0 + per);
  int s = 0;
  for (int i = b0; i < b1; ++i) s += v[i];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  int incl = s;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int x = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += x;
  }
  if (lane == 31) red[w] = incl;
  __syncthreads();
  if (w == 0) {
    int a = lane < nw ? red[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int x = __shfl_up_sync(0xffffffffu, a, o);
      if (lane >= o) a += x;
    }
    red[lane] = a;  // inclusive over warps
  }
  __syncthreads();
  int run = incl - s + (w > 0 ? red[w - 1] : 0);
  const int total = red[31];
  __syncthreads();  // red is reused by the caller
  for (int i = b0; i < b1; ++i) {
    const int c = v[i];
    v[i] = run;
    run += c;
  }
  __syncthreads();
  return total;
}

constexpr int kPermThreads = 1024;
constexpr int kPermMaxChunkEntries = 4096;  // (tokens of one CTA) * k

/// Fused permutation, one launch: CTA b = (token chunk b / splits, column split b % splits).
/// Every CTA histograms ALL ids (cheap next to the copy; no grid-wide dependency, so no second
/// launch, no atomics in global memory and no memset), scans them (row offsets), adds the counts
/// of the ids before its chunk, then assigns its chunk's rows in (token, slot) order with a warp
/// match (deterministic: expert rows are token-ordered, and every split of a chunk computes the
/// same rows) and copies its columns of each token to the k rows. CTA 0 writes counts, row and
/// tile offsets; split 0 of each chunk writes pos and row_token.
__global__ void __launch_bounds__(kPermThreads) permute_fused_kernel(
    const bf16* __restrict__ x, const int* __restrict__ ids, int T, int k, int D, int E, int bt, int chunk_tokens,
    int splits, int* __restrict__ counts, int* __restrict__ row_offsets, int* __restrict__ tile_offsets,
    int* __restrict__ pos, int* __restrict__ row_token, bf16* __restrict__ x_perm) {
  extern __shared__ int sm[];
  int* hist = sm;             // [E] counts, then row offsets, then cursors
  int* before = sm + E;       // [E] ids of this expert before the chunk
  int* tiles = sm + 2 * E;    // [E] (CTA 0) tile counts -> offsets
  int* spos = sm + 3 * E;     // [chunk_tokens * k]
  __shared__ int red[33];
  const int chunk = blockIdx.x / splits, split = blockIdx.x % splits;
  const int t0 = chunk * chunk_tokens, t1 = min(T, t0 + chunk_tokens);
  const int n = T * k, i0 = t0 * k, i1 = t1 * k;
  for (int e = threadIdx.x; e < E; e += blockDim.x) { hist[e] = 0; before[e] = 0; }
  __syncthreads();
  // two histograms, one atomic per id: ids before the chunk -> before, the rest -> hist (total =
  // hist + before). 16-byte loads, 4 in flight per thread (ids are read from L2 by every CTA).
  {
    auto add = [&](int i, int e) { atomicAdd(i < i0 ? &before[e] : &hist[e], 1); };
    const int n4 = ((reinterpret_cast<uintptr_t>(ids) & 15) == 0) ? n / 4 : 0;
    const int4* ids4 = reinterpret_cast<const int4*>(ids);
    int q = threadIdx.x;
    for (; q + 3 * static_cast<int>(blockDim.x) < n4; q += 4 * blockDim.x) {
      int4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = __ldg(ids4 + q + u * blockDim.x);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int i = 4 * (q + u * blockDim.x);
        add(i, v[u].x); add(i + 1, v[u].y); add(i + 2, v[u].z); add(i + 3, v[u].w);
      }
    }
    for (; q < n4; q += blockDim.x) {
      const int4 v = __ldg(ids4 + q);
      add(4 * q, v.x); add(4 * q + 1, v.y); add(4 * q + 2, v.z); add(4 * q + 3, v.w);
    }
    for (int i = 4 * n4 + threadIdx.x; i < n; i += blockDim.x) add(i, __ldg(ids + i));
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] += before[e];
  __syncthreads();
  if (blockIdx.x == 0) {
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
      counts[e] = hist[e];
      tiles[e] = (hist[e] + bt - 1) / bt;
    }
    __syncthreads();
    const int ttot = block_exclusive_scan(tiles, E, red);
    for (int e = threadIdx.x; e < E; e += blockDim.x) tile_offsets[e] = tiles[e];
    if (threadIdx.x == 0) tile_offsets[E] = ttot;
  }
  const int rtot = block_exclusive_scan(hist, E, red);
  if (blockIdx.x == 0) {
    for (int e = threadIdx.x; e < E; e += blockDim.x) row_offsets[e] = hist[e];
    if (threadIdx.x == 0) row_offsets[E] = rtot;
  }
  for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] += before[e];  // cursor at the chunk start
  __syncthreads();
  if (threadIdx.x < 32) {  // rows of the chunk's entries in (token, slot) order
    const int lane = threadIdx.x;
    for (int base = i0; base < i1; base += 32) {
      const int i = base + lane;
      const bool act = i < i1;
      const unsigned am = __ballot_sync(0xffffffffu, act);
      if (act) {
        const int e = __ldg(ids + i);
        const unsigned peers = __match_any_sync(am, e);
        const int rank = __popc(peers & ((1u << lane) - 1u));
        const int p = hist[e] + rank;
        spos[i - i0] = p;
        if (split == 0) {
          pos[i] = p;
          row_token[p] = i / k;
        }
        __syncwarp(am);
        if (rank == 0) hist[e] += __popc(peers);
      }
      __syncwarp();
    }
  }
  __syncthreads();
  const int V = D / 8, cper = (V + splits - 1) / splits, c0 = split * cper, c1 = min(V, c0 + cper), nc = c1 - c0;
  if (nc <= 0) return;
  const int ntok = t1 - t0, tot = ntok * nc, B = blockDim.x;
  // 4 rows' 16-byte vectors loaded before their k stores each (memory-level parallelism)
  for (int base = threadIdx.x; base < tot; base += 4 * B) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int idx = base + u * B;
      if (idx < tot) v[u] = __ldg(reinterpret_cast<const uint4*>(x + static_cast<size_t>(t0 + idx / nc) * D) + c0 + idx % nc);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int idx = base + u * B;
      if (idx >= tot) break;
      const int tl = idx / nc, c = c0 + idx % nc;
      const int* sp = spos + tl * k;
      for (int j = 0; j < k; ++j) reinterpret_cast<uint4*>(x_perm + static_cast<size_t>(sp[j]) * D)[c] = v[u];
    }
  }
}

constexpr int kCombThreads = 128;
/// Combine without the norm: CTA (split, token) sums its 128 16-byte columns of the token's k rows
/// (loads issued 4 rows at a time), fp32, bf16 out. Splitting columns over CTAs keeps a decode
/// step (a few tokens) spread over several SMs.
__global__ void __launch_bounds__(kCombThreads) combine_split_kernel(const bf16* __restrict__ y,
                                                                    const int* __restrict__ pos,
                                                                    const float* __restrict__ w, int T, int k, int D,
                                                                    bf16* __restrict__ out) {
  __shared__ int sp[32];
  __shared__ float sw[32];
  const int c = blockIdx.x * kCombThreads + threadIdx.x;
  for (int t = blockIdx.y; t < T; t += gridDim.y) {
  __syncthreads();
  if (threadIdx.x < k) {
    sp[threadIdx.x] = pos[static_cast<size_t>(t) * k + threadIdx.x];
    sw[threadIdx.x] = w[static_cast<size_t>(t) * k + threadIdx.x];
  }
  __syncthreads();
  if (c >= D / 8) continue;
  float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int j = 0;
  for (; j + 4 <= k; j += 4) {
    uint4 u[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) u[q] = __ldg(reinterpret_cast<const uint4*>(y + static_cast<size_t>(sp[j + q]) * D) + c);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u[q]);
      const float wq = sw[j + q];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 f = __bfloat1622float2(h[i]);
        a[2 * i] = fmaf(wq, f.x, a[2 * i]);
        a[2 * i + 1] = fmaf(wq, f.y, a[2 * i + 1]);
      }
    }
  }
  for (; j < k; ++j) {
    float v[8];
    load8(y + static_cast<size_t>(sp[j]) * D + c * 8, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) a[i] = fmaf(sw[j], v[i], a[i]);
  }
  store8(out + static_cast<size_t>(t) * D + c * 8, a);
  }
}

/// One CTA per token: claim k rows, then copy the token's row to each.
__global__ void scatter_kernel(const bf16* __restrict__ x, const int* __restrict__ ids, int k, int D,
                               int* __restrict__ cursor, int* __restrict__ pos, int* __restrict__ row_token,
                               bf16* __restrict__ x_perm) {
  __shared__ int sp[32];
  const int t = blockIdx.x;
  if (threadIdx.x < k) {
    const int p = atomicAdd(&cursor[ids[static_cast<size_t>(t) * k + threadIdx.x]], 1);
    sp[threadIdx.x] = p;
    pos[static_cast<size_t>(t) * k + threadIdx.x] = p;
    row_token[p] = t;
  }
  __syncthreads();
  const uint4* src = reinterpret_cast<const uint4*>(x + static_cast<size_t>(t) * D);
  for (int c = threadIdx.x; c < D / 8; c += blockDim.x) {
    const uint4 v = src[c];
    for (int j = 0; j < k; ++j) reinterpret_cast<uint4*>(x_perm + static_cast<size_t>(sp[j]) * D)[c] = v;
  }
}

/// One CTA per token: out = sum_j w_j * y[pos_j] (fp32), optionally RMS-normalised * gamma.
__global__ void combine_kernel(const bf16* __restrict__ y, const int* __restrict__ pos, const float* __restrict__ w,
                               int k, int D, const bf16* __restrict__ gamma, float eps, bf16* __restrict__ out) {
  extern __shared__ float buf[];  // [D] when gamma != nullptr
  __shared__ int sp[32];
  __shared__ float sw[32];
  __shared__ float red[32];
  const int t = blockIdx.x;
  if (threadIdx.x < k) {
    sp[threadIdx.x] = pos[static_cast<size_t>(t) * k + threadIdx.x];
    sw[threadIdx.x] = w[static_cast<size_t>(t) * k + threadIdx.x];
  }
  __syncthreads();
  float ss = 0.f;
  for (int c = threadIdx.x; c < D / 8; c += blockDim.x) {
    float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j < k; ++j) {
      float v[8];
      load8(y + static_cast<size_t>(sp[j]) * D + c * 8, v);
#pragma unroll
      for (int i = 0; i < 8; ++i) a[i] = fmaf(sw[j], v[i], a[i]);
    }
    if (gamma) {
#pragma unroll
      for (int i = 0; i < 8; ++i) { buf[c * 8 + i] = a[i]; ss += a[i] * a[i]; }
    } else {
      store8(out + static_cast<size_t>(t) * D + c * 8, a);
    }
  }
  if (!gamma) return;
  const float tot = block_sum(ss, red);
  const float r = rsqrtf(tot / D + eps);
  for (int c = threadIdx.x; c < D / 8; c += blockDim.x) {
    float gm[8], a[8];
    load8(gamma + c * 8, gm);
#pragma unroll
    for (int i = 0; i < 8; ++i) a[i] = buf[c * 8 + i] * r * gm[i];
    store8(out + static_cast<size_t>(t) * D + c * 8, a);
  }
}

}  // namespace

Dispatch alloc_dispatch(int E, int max_rows) {
  Dispatch d;
  d.E = E;
  d.max_rows = max_rows;
  SS_CUDA(cudaMalloc(&d.counts, sizeof(int) * E));
  SS_CUDA(cudaMalloc(&d.row_offsets, sizeof(int) * (E + 1)));
  SS_CUDA(cudaMalloc(&d.tile_offsets, sizeof(int) * (E + 1)));
  SS_CUDA(cudaMalloc(&d.cursor, sizeof(int) * E));
  SS_CUDA(cudaMalloc(&d.pos, sizeof(int) * max_rows));
  SS_CUDA(cudaMalloc(&d.row_token, sizeof(int) * max_rows));
  return d;
}

void free_dispatch(Dispatch& d) {
  cudaFree(d.counts); cudaFree(d.row_offsets); cudaFree(d.tile_offsets);
  cudaFree(d.cursor); cudaFree(d.pos); cudaFree(d.row_token);
  d = Dispatch{};
}

void moe_permute(const bf16* x, const int* ids, int T, int k, int D, int bt, Dispatch& d, bf16* x_perm,
                 cudaStream_t stream) {
  if (D % 8 != 0 || k < 1 || k > 32 || d.E > 1024 || static_cast<long long>(T) * k > d.max_rows || bt < 1)
    throw std::invalid_argument("moe_permute: need D % 8 == 0, 1 <= k <= 32, E <= 1024, T*k <= max_rows");
  if (T <= 0) {
    SS_CUDA(cudaMemsetAsync(d.counts, 0, sizeof(int) * d.E, stream));
    SS_CUDA(cudaMemsetAsync(d.row_offsets, 0, sizeof(int) * (d.E + 1), stream));
    SS_CUDA(cudaMemsetAsync(d.tile_offsets, 0, sizeof(int) * (d.E + 1), stream));
    return;
  }
  // ~2 CTAs per SM: columns split over CTAs when there are few tokens (decode), token chunks of at
  // most kPermMaxChunkEntries / k tokens otherwise; at most 132 CTAs once every CTA re-reads many ids.
  const int V = D / 8;
  const long long n = static_cast<long long>(T) * k;
  const int target = n > 16384 ? 132 : 264;
  int splits = std::max(1, std::min(V / 32, target / T));
  int chunks = std::max((target + splits - 1) / splits, static_cast<int>((n + kPermMaxChunkEntries - 1) / kPermMaxChunkEntries));
  chunks = std::min(chunks, T);
  const int chunk_tokens = (T + chunks - 1) / chunks;
  chunks = (T + chunk_tokens - 1) / chunk_tokens;
  const size_t smem = sizeof(int) * (3 * static_cast<size_t>(d.E) + static_cast<size_t>(chunk_tokens) * k);
  static bool configured = false;
  if (!configured) {
    SS_CUDA(cudaFuncSetAttribute(permute_fused_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
    configured = true;
  }
  permute_fused_kernel<<<chunks * splits, kPermThreads, smem, stream>>>(x, ids, T, k, D, d.E, bt, chunk_tokens, splits,
                                                                        d.counts, d.row_offsets, d.tile_offsets, d.pos,
                                                                        d.row_token, x_perm);
  SS_LAUNCH_CHECK();
}

/// The previous three-launch permutation (histogram with global atomics, one-block scan, one CTA per
/// token claiming rows atomically): kept as the benchmark's "before" row.
void moe_permute_3launch(const bf16* x, const int* ids, int T, int k, int D, int bt, Dispatch& d, bf16* x_perm,
                         cudaStream_t stream) {
  if (D % 8 != 0 || k < 1 || k > 32 || d.E > 1024 || static_cast<long long>(T) * k > d.max_rows || bt < 1)
    throw std::invalid_argument("moe_permute: need D % 8 == 0, 1 <= k <= 32, E <= 1024, T*k <= max_rows");
  SS_CUDA(cudaMemsetAsync(d.counts, 0, sizeof(int) * d.E, stream));
  if (T <= 0) {
    SS_CUDA(cudaMemsetAsync(d.row_offsets, 0, sizeof(int) * (d.E + 1), stream));
    SS_CUDA(cudaMemsetAsync(d.tile_offsets, 0, sizeof(int) * (d.E + 1), stream));
    return;
  }
  const int n = T * k;
  const int blocks = std::min(132 * 2, (n + 1023) / 1024);
  count_kernel<<<blocks, 1024, sizeof(int) * d.E, stream>>>(ids, n, d.E, d.counts);
  SS_LAUNCH_CHECK();
  scan_kernel<<<1, 1024, 0, stream>>>(d.counts, d.E, bt, d.row_offsets, d.tile_offsets, d.cursor);
  SS_LAUNCH_CHECK();
  const int threads = std::min(256, std::max(32, ((D / 8 + 31) / 32) * 32));
  scatter_kernel<<<T, threads, 0, stream>>>(x, ids, k, D, d.cursor, d.pos, d.row_token, x_perm);
  SS_LAUNCH_CHECK();
}

void moe_combine(const bf16* y_perm, const int* pos, const float* weights, int T, int k, int D, const bf16* gamma,
                 float eps, bf16* out, cudaStream_t stream) {
  if (D % 8 != 0 || k < 1 || k > 32) throw std::invalid_argument("moe_combine: need D % 8 == 0, 1 <= k <= 32");
  if (T <= 0) return;
  if (!gamma) {
    const dim3 grid((D / 8 + kCombThreads - 1) / kCombThreads, std::min(T, 65535));
    combine_split_kernel<<<grid, kCombThreads, 0, stream>>>(y_perm, pos, weights, T, k, D, out);
    SS_LAUNCH_CHECK();
    return;
  }
  const int threads = std::min(256, std::max(32, ((D / 8 + 31) / 32) * 32));
  const size_t smem = sizeof(float) * D;
  if (smem > 48 * 1024) {
    SS_CUDA(cudaFuncSetAttribute(combine_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  }
  combine_kernel<<<T, threads, smem, stream>>>(y_perm, pos, weights, k, D, gamma, eps, out);
  SS_LAUNCH_CHECK();
}

}  // namespace servesim::kernels::moe
