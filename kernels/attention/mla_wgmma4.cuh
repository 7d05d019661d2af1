// servesim attention kernels: MLA decode on Hopper, variant 3 (wgmma, 32-token tiles, 4 KV
// stages), and mla_combine_kernel, the split-KV merge of all the wgmma kernels (mla_combine).
// Part of mqa.cu's translation unit, not a standalone header: mqa.cu includes the kernel parts in
// their original order after defining kLog2e / kNegInf (one unit keeps the code cicc / ptxas
// generate for every kernel exactly as before the file was split; see mqa.cu).
#pragma once
#include "attention/hopper.cuh"
#include "attention/mqa.cuh"
#include "attention/wg_store.cuh"

namespace servesim::attn {
namespace {

// ---------------------------------------------------------------------------------------------
// MLA decode on Hopper, variant 3: 32-token tiles, 4 KV stages (36 KB each), so that warpgroup 0
// can issue S(j+1) = Q K(j+1)^T before P V(j) and run the softmax of tile j+1 while both
// warpgroups' P V(j) are on the tensor pipe (tile j+1 was loaded three tiles earlier).
// Per tile j, warpgroup 0: softmax(S(j)) in registers -> wait its own P V(j-1), bar 2 (warpgroup
// 1's P V(j-1) done: P buffer and stage (j-1)%4 free) -> thread 0 refills that stage with tile
// j+3 -> P(j), alpha(j) to smem -> bar 1 (arrive) -> rescale O_L -> issue S(j+1), then P V(j)
// (O_L) -> wait S(j+1). Warpgroup 1: bar 1 -> rescale O_R -> P V(j) (O_R) -> wait -> bar 2 (arrive).
// ---------------------------------------------------------------------------------------------
namespace wgk4 {
constexpr int kTile = 32 * 576 * 2;  // 36864 B: half a page
constexpr int kCBs = 32 * 128;       // bytes per 64-column block of a stage
constexpr int kOffKV = 64 * 576 * 2;  // Q first (73728 B)
constexpr int kOffP = kOffKV + 4 * kTile;
constexpr int kOffF = kOffP + 64 * 64 * 2;
constexpr int kOffBar = kOffF + 1024;
constexpr int kSmem = kOffBar + 64 + 1024;
static_assert(kSmem <= 232448, "shared memory per block");
}  // namespace wgk4

__global__ void __launch_bounds__(256, 1)
    mla_decode_wgmma4_kernel(const __grid_constant__ CUtensorMap tmap, MqaArgs a, const int4* __restrict__ work) {
  using namespace sm90;
  using namespace wgk4;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  const uint32_t sb = saddr(smem);
  uint8_t* sKV = smem + kOffKV;
  uint8_t* sP = smem + kOffP;
  float* sAlpha = reinterpret_cast<float*>(smem + kOffF);
  float* sM = sAlpha + 64;
  float* sL = sM + 64;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kOffBar);

  const int4 wk = work[blockIdx.y];
  const int qi = wk.x, rb = wk.y, re = wk.z, slot = wk.w;
  const int head0 = blockIdx.x * 64, H = a.H;
  const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const int rA = 16 * w4 + g, rB = rA + 8;
  const int ntiles = (re - rb + 31) / 32;
  const int* bt = a.block_table + static_cast<size_t>(qi) * a.max_pages;
  const int ps = a.page_size;

  auto issue = [&](int j, int st) {
    const int tok = rb + 32 * j;
    const int row = bt[tok / ps] * ps + tok % ps;
    mbar_expect_tx(&full[st], kTile);
#pragma unroll
    for (int cb = 0; cb < 9; ++cb) tma_load_2d(sKV + st * kTile + cb * kCBs, &tmap, &full[st], cb * 64, row);
  };
  // warpgroup 0 only: rows past the context in tile j -> zeros, then S(j) -> s (not waited)
  auto zero_tail = [&](int j) {
    const int valid = min(32, re - rb - 32 * j);
    if (valid < 32) {
      const int st = j & 3;
      for (int u = tid; u < (32 - valid) * 72; u += 128) {
        const int r = valid + u / 72, rem = u % 72;
        *reinterpret_cast<uint4*>(sKV + st * kTile + (rem >> 3) * kCBs + r * 128 + (rem & 7) * 16) = make_uint4(0, 0, 0, 0);
      }
      fence_proxy_async();
      named_bar_sync(4, 128);
    }
  };
  if (tid == 0) {
#pragma unroll
    for (int i = 0; i < 4; ++i) mbar_init(&full[i], 1);
    mbar_fence_init();
  }
  __syncthreads();
  if (tid == 0)
    for (int j = 0; j < 4 && j < ntiles; ++j) issue(j, j);
  {
    const bf16* qsrc = a.q + (static_cast<size_t>(qi) * H + head0) * 576;
    for (int u = tid; u < 64 * 72; u += 256) {
      const int r = u / 72, ch = u % 72;
      const bool ok = head0 + r < H;
      cp_async16(smem + (ch >> 3) * 8192 + r * 128 + (((ch & 7) ^ (r & 7)) << 4),
                 qsrc + static_cast<size_t>(ok ? r : 0) * 576 + ch * 8, ok);
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
  }

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float s[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) s[i] = 0.f;
  float m0 = kNegInf, m1 = kNegInf, l0 = 0.f, l1 = 0.f;
  const float sl2 = a.sm_scale * kLog2e;
  auto issue_s = [&](int j) {  // warpgroup 0
    const uint32_t kv = sb + kOffKV + (j & 3) * kTile;
    fence_regs(s);
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < 36; ++ks)
      wgmma_m64n32k16_ss(s, sw128_desc(sb + (ks >> 2) * 8192 + (ks & 3) * 32, 16, 1024),
                         sw128_desc(kv + (ks >> 2) * kCBs + (ks & 3) * 32, 16, 1024), ks > 0);
    wg_commit();
  };
  auto issue_pv = [&](int j) {  // either warpgroup, its 256 output columns
    const uint32_t kv = sb + kOffKV + (j & 3) * kTile;
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
      wgmma_m64n256k16_ss_tb(o, sw128_desc(sb + kOffP + kk * 32, 16, 1024),
                             sw128_desc(kv + wg * 4 * kCBs + kk * 2048, kCBs, 1024), 1);
    wg_commit();
  };

  // The two warpgroups run separate loops (wgmma groups stay pending only inside warpgroup 0's own
  // loop, never across a branch that both take), and warpgroup 0's last tile is peeled so every
  // step issues the same groups (S(j+1) then P V(j), wait for all but the newest).
  if (wg == 0) {
    if (ntiles > 0) {
      mbar_wait(&full[0], 0);
      zero_tail(0);
      issue_s(0);
      wg_wait<0>();
      fence_regs(s);
    }
    auto step = [&](int j, auto has_next_c) {
      constexpr bool has_next = decltype(has_next_c)::value;
      const int valid = min(32, re - rb - 32 * j);
      float mxA = kNegInf, mxB = kNegInf;
#pragma unroll
      for (int jj = 0; jj < 4; ++jj)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const bool v = 8 * jj + 2 * t4 + e < valid;
          s[4 * jj + e] = v ? s[4 * jj + e] * sl2 : kNegInf;
          s[4 * jj + 2 + e] = v ? s[4 * jj + 2 + e] * sl2 : kNegInf;
          mxA = fmaxf(mxA, s[4 * jj + e]);
          mxB = fmaxf(mxB, s[4 * jj + 2 + e]);
        }
      mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
      mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
      mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
      mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
      const float mnA = fmaxf(m0, mxA), mnB = fmaxf(m1, mxB);
      const float alA = (m0 == kNegInf) ? 0.f : fast_exp2(m0 - mnA);
      const float alB = (m1 == kNegInf) ? 0.f : fast_exp2(m1 - mnB);
      float sumA = 0.f, sumB = 0.f;
      uint32_t pk[8];
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        const float p0 = fast_exp2(s[4 * jj] - mnA), p1 = fast_exp2(s[4 * jj + 1] - mnA);
        const float p2 = fast_exp2(s[4 * jj + 2] - mnB), p3 = fast_exp2(s[4 * jj + 3] - mnB);
        sumA += p0 + p1;
        sumB += p2 + p3;
        pk[2 * jj] = pack_bf16(p0, p1);
        pk[2 * jj + 1] = pack_bf16(p2, p3);
      }
      l0 = l0 * alA + sumA;
      l1 = l1 * alB + sumB;
      m0 = mnA;
      m1 = mnB;
      wg_wait<0>();  // own P V(j-1)
      fence_regs(o);
      if (j > 0) named_bar_sync(2, 256);  // warpgroup 1's P V(j-1) done
      if (tid == 0 && j > 0 && j + 3 < ntiles) issue(j + 3, (j - 1) & 3);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        *reinterpret_cast<uint32_t*>(sP + rA * 128 + ((jj ^ (rA & 7)) << 4) + 4 * t4) = pk[2 * jj];
        *reinterpret_cast<uint32_t*>(sP + rB * 128 + ((jj ^ (rB & 7)) << 4) + 4 * t4) = pk[2 * jj + 1];
      }
      if (t4 == 0) {
        sAlpha[rA] = alA;
        sAlpha[rB] = alB;
      }
      fence_proxy_async();
      named_bar_arrive(1, 256);
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        o[4 * i] *= alA; o[4 * i + 1] *= alA; o[4 * i + 2] *= alB; o[4 * i + 3] *= alB;
      }
      fence_regs(o);
      if constexpr (has_next) {
        mbar_wait(&full[(j + 1) & 3], ((j + 1) >> 2) & 1);
        zero_tail(j + 1);
        issue_s(j + 1);
        issue_pv(j);
        wg_wait<1>();
        fence_regs(s);
      } else {
        wg_fence();
        issue_pv(j);
      }
    };
    for (int j = 0; j + 1 < ntiles; ++j) step(j, std::true_type{});
    if (ntiles > 0) step(ntiles - 1, std::false_type{});
    wg_wait<0>();
    fence_regs(o);
    if (ntiles > 0) named_bar_sync(2, 256);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    if (t4 == 0) {
      sM[rA] = m0; sM[rB] = m1;
      sL[rA] = l0; sL[rB] = l1;
    }
  } else {
    for (int j = 0; j < ntiles; ++j) {
      named_bar_sync(1, 256);
      mbar_wait(&full[j & 3], (j >> 2) & 1);
      const float alA = sAlpha[rA], alB = sAlpha[rB];
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        o[4 * i] *= alA; o[4 * i + 1] *= alA; o[4 * i + 2] *= alB; o[4 * i + 3] *= alB;
      }
      fence_regs(o);
      wg_fence();
      issue_pv(j);
      wg_wait<0>();
      fence_regs(o);
      named_bar_arrive(2, 256);
    }
  }
  __syncthreads();
  m0 = sM[rA]; m1 = sM[rB];
  l0 = sL[rA]; l1 = sL[rB];
  wg_store::store_rows(a, o, m0, m1, l0, l1, head0, H, rA, rB, wg, t4, qi, slot);
}

// Split-KV merge for the wgmma MLA path: like mqa_combine_kernel, but the slots of one (query,
// head) are read in parallel (weights staged in smem, 8 partial rows in flight per thread), so a
// query split 100+ ways is not a chain of dependent loads.
__global__ void __launch_bounds__(128) mla_combine_kernel(MqaArgs a, const int* __restrict__ q_slot_begin) {
  const int qi = blockIdx.x, h = blockIdx.y, H = a.H;
  const int s0 = q_slot_begin[qi], n = q_slot_begin[qi + 1] - s0;
  if (n == 0) return;
  __shared__ float ws[128];
  __shared__ float red[4];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float sk = a.sink ? a.sink[h] * kLog2e : kNegInf;
  float mx = sk;
  for (int i = tid; i < n; i += 128) mx = fmaxf(mx, a.lse_part[static_cast<size_t>(s0 + i) * H + h]);
  mx = warp_max(mx);
  if (lane == 0) red[warp] = mx;
  __syncthreads();
  const float M = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
  float den = (M == kNegInf || sk == kNegInf) ? 0.f : exp2f(sk - M);
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  const int c = tid * 4;
  const size_t ld = static_cast<size_t>(H) * 512;
  for (int base = 0; base < n; base += 128) {
    const int cnt = min(128, n - base);
    __syncthreads();
    float w = 0.f;
    if (tid < cnt && M != kNegInf) {
      const float l = a.lse_part[static_cast<size_t>(s0 + base + tid) * H + h];
      w = l == kNegInf ? 0.f : exp2f(l - M);
    }
    ws[tid] = w;
    __syncthreads();
    const float* op = a.o_part + (static_cast<size_t>(s0 + base) * H + h) * 512 + c;
    int i = 0;
    for (; i + 8 <= cnt; i += 8) {
      float4 o[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) o[u] = __ldg(reinterpret_cast<const float4*>(op + (i + u) * ld));
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const float wu = ws[i + u];
        den += wu;
        if (wu != 0.f) {
          acc.x += wu * o[u].x; acc.y += wu * o[u].y; acc.z += wu * o[u].z; acc.w += wu * o[u].w;
        }
      }
    }
    for (; i < cnt; ++i) {
      const float wu = ws[i];
      den += wu;
      if (wu != 0.f) {
        const float4 o = __ldg(reinterpret_cast<const float4*>(op + i * ld));
        acc.x += wu * o.x; acc.y += wu * o.y; acc.z += wu * o.z; acc.w += wu * o.w;
      }
    }
  }
  const float f = den > 0.f ? 1.f / den : 0.f;
  bf16* o = a.out + (static_cast<size_t>(qi) * H + h) * 512 + c;
  uint2 u;
  u.x = pack_bf16(acc.x * f, acc.y * f);
  u.y = pack_bf16(acc.z * f, acc.w * f);
  *reinterpret_cast<uint2*>(o) = u;
  if (a.lse && tid == 0) a.lse[static_cast<size_t>(qi) * H + h] = den > 0.f ? (M + log2f(den)) / kLog2e : kNegInf;
}

}  // namespace
}  // namespace servesim::attn
