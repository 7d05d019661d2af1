// servesim attention kernels: the device code of the own FP8 block-scaled dense GEMM (proj_fp8.cu,
// API fp8_dense_gemm in proj.cuh; NOTES.md "Dense projections: own FP8 GEMM" and the eighteenth
// session's section). Included by proj_fp8.cu only (one translation unit).
//
// fp8_dense_kernel<BT, CL, WR>: WR weight rows (wgmma's M side) x BT tokens (its N side) per CTA.
//   WR = 128: one weight-scale block per CTA, two consumer warpgroups x m64 (384 threads);
//   WR = 64:  half a weight-scale block, one consumer warpgroup (256 threads), twice the tiles (fills
//             the SMs at small M without split-K) and a deeper stage ring; two CTAs fit per SM.
//   WR = 64, BT = 128 (helper pj3, twentieth session: "token split"): one 64-row weight tile shared by
//             two consumer warpgroups, each taking 64 of the 128 token columns (acc + temporary 32 + 32
//             floats), so M 65-128 streams each weight tile once (not once per 64-token tile); 4 stages,
//             two CTAs per SM (setmaxnreg 32 / 104).
//   CL = 1: no split or splits reduced by fp32 vector atomics into a workspace; CL = 2: the splits of
//   a tile form one thread-block cluster and reduce through DSMEM (see proj_fp8.cu's header).
// Programmatic dependent launch (PDL): every CTA triggers its dependents right after its prologue;
// the producer thread TMA-loads the weights of the first ring stages BEFORE griddepcontrol.wait (the
// weights and weight scales must not be written by the preceding kernel), and everything that
// reads the activations / activation scales or writes y, the workspace or the counters runs after
// griddepcontrol.wait (complete + visible prerequisite grid). Without the PDL launch attribute both
// instructions are no-ops, so one kernel serves both launch forms.
#pragma once
#include "attention/proj.cuh"
#include "moe/device_util.cuh"
#include "moe/sm90_tma.cuh"
#include "moe/wgmma_fp8.cuh"

namespace servesim::attn {
namespace {
namespace mk = servesim::kernels::moe;

constexpr int kKB = 128;  // K per stage (= scale block)

template <int BT, int WR, int PV = 0>
struct DCfg {
  static constexpr bool kTS = WR == 64 && BT == 128;  // token split: the warpgroups share the weight tile
  static constexpr int kCons = kTS ? 2 : WR / 64;     // consumer warpgroups
  static constexpr int kThreads = 128 * (1 + kCons);  // + the producer warpgroup
  static constexpr int kNC = 128 * kCons;             // consumer threads
  static constexpr int kStages = kTS ? 4 : WR == 64 ? (BT >= 64 ? 6 : 8)
                                          : (BT >= 256 ? 4 : (BT == 128 ? 6 : (BT == 64 ? 4 : (BT == 32 ? 5 : 6))));
  // tokens per wgmma group of a warpgroup (BT = 256: two halves; token split: its 64 columns)
  static constexpr int kHalf = kTS ? 64 : (BT > 128 ? 128 : BT);
  static constexpr int kNH = kTS ? 1 : BT / kHalf;
  static constexpr int kMinBlocks = WR == 64 ? 2 : (BT >= 128 ? 1 : 2);
  // 0: no setmaxnreg; 128 x kProdRegs + 256 x kConsRegs <= 384 x 80 (the 2-CTA/SM launch budget)
  static constexpr int kConsRegs = kTS ? 104 : WR == 64 ? 0 : (BT >= 128 ? 232 : (BT == 64 ? 96 : 0));
  static constexpr int kProdRegs = kTS ? 32 : 40;
  static constexpr int kWOff = kTS ? 0 : 64 * 128;  // smem offset of a consumer warpgroup's weight rows
  static constexpr int kXOff = kTS ? 64 * 128 : 0;  // ... and of its token columns
  static constexpr int kTok = kTS ? 64 : 0;         // first token column of warpgroup 1
  static constexpr int kW = WR * kKB;
  static constexpr int kX = BT * kKB;
  static constexpr int kSx = ((BT * 4 + 127) / 128) * 128;  // activation scales of a stage (bytes)
  static constexpr int kS = kSx + (PV > 0 ? 16 : 0);          // PV > 0: + the stage's weight scale
  static constexpr int kTx = kW + kX;
  static constexpr int kSmem = kStages * (kW + kX + kS) + 2 * kStages * 8 + 16 + 1024;
  static_assert(WR == 128 || (WR == 64 && (BT <= 64 || BT == 128)), "64-row weight tiles take BT <= 64 or 128");
  static_assert(!(kTS && PV == 2), "the token-split form has no overlapped promotion (registers)");
  static_assert(PV != 2 || BT <= 128, "the overlapped promotion takes one wgmma group (BT <= 128)");
};

struct DParams {
  const float* xs;  // [K/128][xs_ld]
  const float* ws;  // [ceil(N/128)][K/128]
  bf16* y;          // [M, N]
  float* part;      // split > 1: [tiles][NH*NA/4][NC] float4, zero between calls
  int* counters;    // split > 1: [tiles], zero between calls
  int M, N, K, xs_ld, split;
};

__device__ __forceinline__ void red_add_v4(float* addr, float a, float b, float c, float d) {
  asm volatile("red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(addr), "f"(a), "f"(b), "f"(c),
               "f"(d)
               : "memory");
}

__device__ __forceinline__ float4 ld_dsmem_f4(const void* local, uint32_t rank) {
  float4 v;
  asm volatile(
      "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %4, %5;\n"
      "ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [ra];\n}\n"
      : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
      : "r"(smem_u32(local)), "r"(rank)
      : "memory");
  return v;
}
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

// PV 2 consumer pieces (one wgmma group of HB = BT tokens): issue the 4 wgmma of a k-block into t,
// promote a finished temporary with the stage's scales (activation scales + the staged weight scale).
template <class C>
__device__ __forceinline__ void issue_kblock(float (&t)[C::kHalf / 2], const uint8_t* wring, const uint8_t* xring,
                                             int slot, int wg) {
  constexpr int HB = C::kHalf;
  const uint32_t wb = smem_u32(wring + slot * C::kW) + wg * (64 * 128);
  const uint32_t xb = smem_u32(xring + slot * C::kX);
#pragma unroll
  for (int i = 0; i < HB / 2; ++i) mk::fence_operand(t[i]);
  mk::wgmma_fence();
  mk::WgmmaFp8<HB, true>::mma(t, mk::desc_sw128(wb), mk::desc_sw128(xb));
#pragma unroll
  for (int s = 1; s < 4; ++s) mk::WgmmaFp8<HB, false>::mma(t, mk::desc_sw128(wb + s * 32), mk::desc_sw128(xb + s * 32));
  mk::wgmma_commit();
}
template <class C>
__device__ __forceinline__ void promote_kblock(float (&acc)[C::kHalf / 2], float (&t)[C::kHalf / 2], const float* sring,
                                               uint64_t* empty, int slot, int tq, int lane) {
  constexpr int HB = C::kHalf;
#pragma unroll
  for (int i = 0; i < HB / 2; ++i) mk::fence_operand(t[i]);
  const float* xs = reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(sring) + slot * C::kS);
  const float wscale = xs[C::kSx / 4];
  float2 sc[HB / 8];
#pragma unroll
  for (int j = 0; j < HB / 8; ++j) sc[j] = *reinterpret_cast<const float2*>(xs + 8 * j + 2 * tq);
  __syncwarp();
  if (lane == 0) mk::mbar_arrive(&empty[slot]);
#pragma unroll
  for (int j = 0; j < HB / 8; ++j) {
    const float s0 = sc[j].x * wscale, s1 = sc[j].y * wscale;
    acc[4 * j + 0] = fmaf(t[4 * j + 0], s0, acc[4 * j + 0]);
    acc[4 * j + 1] = fmaf(t[4 * j + 1], s1, acc[4 * j + 1]);
    acc[4 * j + 2] = fmaf(t[4 * j + 2], s0, acc[4 * j + 2]);
    acc[4 * j + 3] = fmaf(t[4 * j + 3], s1, acc[4 * j + 3]);
  }
}
// k-blocks 0..n-1 of this CTA: the wgmma of block i+1 runs while block i is promoted (wait_group 1)
template <class C>
__device__ __forceinline__ void consume_overlapped(float (&acc)[C::kHalf / 2], float (&ta)[C::kHalf / 2],
                                                   const uint8_t* wring, const uint8_t* xring, const float* sring,
                                                   uint64_t* full, uint64_t* empty, int n, int wg, int tq, int lane) {
  float tb[C::kHalf / 2];
  mk::mbar_wait(&full[0], 0);
  issue_kblock<C>(ta, wring, xring, 0, wg);
  for (int it = 0; it < n; it += 2) {
    const int s0 = it % C::kStages, s1 = (it + 1) % C::kStages, s2 = (it + 2) % C::kStages;
    if (it + 1 < n) {
      mk::mbar_wait(&full[s1], ((it + 1) / C::kStages) & 1);
      issue_kblock<C>(tb, wring, xring, s1, wg);
      mk::wgmma_wait<1>();
    } else {
      mk::wgmma_wait<0>();
    }
    promote_kblock<C>(acc, ta, sring, empty, s0, tq, lane);
    if (it + 1 >= n) break;
    if (it + 2 < n) {
      mk::mbar_wait(&full[s2], ((it + 2) / C::kStages) & 1);
      issue_kblock<C>(ta, wring, xring, s2, wg);
      mk::wgmma_wait<1>();
    } else {
      mk::wgmma_wait<0>();
    }
    promote_kblock<C>(acc, tb, sring, empty, s1, tq, lane);
  }
}

// PV (consumer pipeline, Fp8DenseConfig::pipe): 0 = the weight scale by __ldg one k-block ahead, promotion
// after each k-block's wgmma (pj's kernel); 1 = the scale warp stages each k-block's weight scale in the ring
// slot with the activation scales (cp.async, the first stages before the PDL wait); 2 = 1 + the wgmma of
// k-block i+1 is issued before k-block i is promoted (two temporaries; BT <= 128).
template <int BT, int CL, int WR, int PV>
__global__ void __launch_bounds__(DCfg<BT, WR, PV>::kThreads, DCfg<BT, WR, PV>::kMinBlocks)
    fp8_dense_kernel(const __grid_constant__ CUtensorMap tm_w, const __grid_constant__ CUtensorMap tm_x,
                     const DParams p) {
  using C = DCfg<BT, WR, PV>;
  constexpr int NC = C::kNC;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* wring = smem;
  uint8_t* xring = smem + C::kStages * C::kW;
  float* sring = reinterpret_cast<float*>(xring + C::kStages * C::kX);
  uint64_t* full = reinterpret_cast<uint64_t*>(reinterpret_cast<uint8_t*>(sring) + C::kStages * C::kS);
  uint64_t* empty = full + C::kStages;
  int* last_flag = reinterpret_cast<int*>(empty + C::kStages);

  // token tile fastest: CTAs running together share the weight tile in L2
  const int mt = blockIdx.x, nt = blockIdx.y, sp = blockIdx.z;
  const int row0 = mt * BT, rows = min(BT, p.M - row0);
  const int KB = p.K / kKB;
  const int kb0 = static_cast<int>(static_cast<long long>(sp) * KB / p.split);
  const int kb1 = static_cast<int>(static_cast<long long>(sp + 1) * KB / p.split);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

  if (tid == 0) {
    for (int s = 0; s < C::kStages; ++s) {
      mk::mbar_init(&full[s], 1 + 32);      // TMA thread's expect_tx + 32 cp.async arrivals of the scale warp
      mk::mbar_init(&empty[s], 4 * C::kCons);  // lane 0 of each consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  pdl_trigger();

  if (warp < 4) {  // ---- producer warpgroup ----
    if constexpr (C::kConsRegs > 0) mk::setmaxnreg_dec<C::kProdRegs>();
    if (tid == 0) {
      // weights of the first stages before the dependency wait (PDL: overlaps the previous kernel)
      const int pre = min(kb1 - kb0, C::kStages);
      for (int it = 0; it < pre; ++it) {
        mk::mbar_expect_tx(&full[it], C::kTx);
        mk::tma_load_2d(wring + it * C::kW, &tm_w, (kb0 + it) * kKB, nt * WR, &full[it]);
      }
      pdl_wait();
      for (int it = 0; it < pre; ++it) mk::tma_load_2d(xring + it * C::kX, &tm_x, (kb0 + it) * kKB, row0, &full[it]);
      for (int kb = kb0 + pre, it = pre; kb < kb1; ++kb, ++it) {
        const int slot = it % C::kStages;
        mk::mbar_wait(&empty[slot], ((it / C::kStages) & 1) ^ 1);
        mk::mbar_expect_tx(&full[slot], C::kTx);
        mk::tma_load_2d(wring + slot * C::kW, &tm_w, kb * kKB, nt * WR, &full[slot]);
        mk::tma_load_2d(xring + slot * C::kX, &tm_x, kb * kKB, row0, &full[slot]);
      }
    } else if (warp == 1) {  // activation scales (4-byte cp.async: a token tile starts at any row)
      const float* wsp = p.ws + static_cast<size_t>(nt * WR / 128) * KB;
      if constexpr (PV > 0) {  // weight scales of the first stages before the dependency wait
        const int pre = min(kb1 - kb0, C::kStages);
        if (lane == 0)
          for (int it = 0; it < pre; ++it)
            mk::cp_async4(reinterpret_cast<uint8_t*>(sring) + it * C::kS + C::kSx, wsp + kb0 + it, 4);
      }
      pdl_wait();
      for (int kb = kb0, it = 0; kb < kb1; ++kb, ++it) {
        const int slot = it % C::kStages;
        mk::mbar_wait(&empty[slot], ((it / C::kStages) & 1) ^ 1);
        if constexpr (PV > 0)
          if (lane == 0 && it >= C::kStages) mk::cp_async4(reinterpret_cast<uint8_t*>(sring) + slot * C::kS + C::kSx, wsp + kb, 4);
        float* dst = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(sring) + slot * C::kS);
        const float* src = p.xs + static_cast<size_t>(kb) * p.xs_ld + row0;
        for (int r = lane; r < BT; r += 32) mk::cp_async4(dst + r, r < rows ? src + r : p.xs, r < rows ? 4 : 0);
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(&full[slot])) : "memory");
      }
    }
    if constexpr (CL > 1) {  // the cluster barriers of the DSMEM reduction count every thread
      mk::cluster_sync_all();
      mk::cluster_sync_all();
    }
    return;
  }
  // ---- consumer warpgroups ----
  if constexpr (C::kConsRegs > 0) mk::setmaxnreg_inc<C::kConsRegs>();
  const int ct = tid - 128, cw = ct >> 5, wg = cw >> 2, gq = lane >> 2, tq = lane & 3;
  constexpr int NH = C::kNH, HB = C::kHalf, NA = HB / 2;
  float acc[NH][NA], tmp[NA];
#pragma unroll
  for (int h = 0; h < NH; ++h)
#pragma unroll
    for (int i = 0; i < NA; ++i) acc[h][i] = 0.f;
  if constexpr (PV == 2) {
    consume_overlapped<C>(acc[0], tmp, wring, xring, sring, full, empty, kb1 - kb0, wg, tq, lane);
  } else {
  const float* wsp = p.ws + static_cast<size_t>(nt * WR / 128) * KB;
  float wnext = PV > 0 ? 0.f : __ldg(wsp + kb0);
  for (int kb = kb0, it = 0; kb < kb1; ++kb, ++it) {
    const int slot = it % C::kStages;
    float wscale = wnext;
    if constexpr (PV == 0)
      if (kb + 1 < kb1) wnext = __ldg(wsp + kb + 1);
    mk::mbar_wait(&full[slot], (it / C::kStages) & 1);
    const uint32_t wb = smem_u32(wring + slot * C::kW) + wg * C::kWOff;
    const float* xs = reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(sring) + slot * C::kS);
    if constexpr (PV > 0) wscale = xs[C::kSx / 4];
#pragma unroll
    for (int h = 0; h < NH; ++h) {
      const uint32_t xb = smem_u32(xring + slot * C::kX) + h * (HB * 128) + wg * C::kXOff;
#pragma unroll
      for (int i = 0; i < NA; ++i) mk::fence_operand(tmp[i]);
      mk::wgmma_fence();
      mk::WgmmaFp8<HB, true>::mma(tmp, mk::desc_sw128(wb), mk::desc_sw128(xb));
#pragma unroll
      for (int s = 1; s < 4; ++s) mk::WgmmaFp8<HB, false>::mma(tmp, mk::desc_sw128(wb + s * 32), mk::desc_sw128(xb + s * 32));
      mk::wgmma_commit();
      mk::wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < NA; ++i) mk::fence_operand(tmp[i]);
      float2 sc[HB / 8];
#pragma unroll
      for (int j = 0; j < HB / 8; ++j) sc[j] = *reinterpret_cast<const float2*>(xs + wg * C::kTok + h * HB + 8 * j + 2 * tq);
      if (h == NH - 1) {
        __syncwarp();
        if (lane == 0) mk::mbar_arrive(&empty[slot]);
      }
#pragma unroll
      for (int j = 0; j < HB / 8; ++j) {
        const float s0 = sc[j].x * wscale, s1 = sc[j].y * wscale;
        acc[h][4 * j + 0] = fmaf(tmp[4 * j + 0], s0, acc[h][4 * j + 0]);
        acc[h][4 * j + 1] = fmaf(tmp[4 * j + 1], s1, acc[h][4 * j + 1]);
        acc[h][4 * j + 2] = fmaf(tmp[4 * j + 2], s0, acc[h][4 * j + 2]);
        acc[h][4 * j + 3] = fmaf(tmp[4 * j + 3], s1, acc[h][4 * j + 3]);
      }
    }
  }
  }
  pdl_wait();  // (already true: the ring's activations came after the producer's wait) before any global write

  if constexpr (CL > 1) {
    // partial -> own shared memory [NH*NA/4][NC] float4 (the ring is free: all stages consumed)
    mk::named_bar(1, NC);
    float4* sp4 = reinterpret_cast<float4*>(smem);
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
      for (int i4 = 0; i4 < NA / 4; ++i4)
        sp4[(h * (NA / 4) + i4) * NC + ct] = make_float4(acc[h][4 * i4], acc[h][4 * i4 + 1], acc[h][4 * i4 + 2], acc[h][4 * i4 + 3]);
    mk::cluster_sync_all();
    // this CTA's part of the tile: float4 rows [lo, hi) of NH*NA/4; each float4 (row f, thread t) holds
    // outputs (token c0, n0), (c0 + 1, n0), (c0, n0 + 8), (c0 + 1, n0 + 8) of consumer thread t's layout
    constexpr int kF = NH * (NA / 4);
    const int S = p.split, rank = static_cast<int>(mk::cluster_ctarank());
    const int total = kF * NC, lo = rank * total / S, hi = (rank + 1) * total / S;
    for (int idx = lo + ct; idx < hi; idx += NC) {
      float4 v = ld_dsmem_f4(sp4 + idx, 0);
      for (int q = 1; q < S; ++q) {
        const float4 u = ld_dsmem_f4(sp4 + idx, q);
        v.x += u.x, v.y += u.y, v.z += u.z, v.w += u.w;
      }
      const int f = idx / NC, t = idx % NC;
      const int h = f / (NA / 4), j = f - h * (NA / 4);
      const int tl = t & 31, tw = t >> 5;
      const int c0 = (tw >> 2) * C::kTok + h * HB + 8 * j + 2 * (tl & 3);
      const int n0 = nt * WR + (C::kTS ? (tw & 3) : tw) * 16 + (tl >> 2);
      bf16* yb = p.y + static_cast<size_t>(row0) * p.N;
      if (n0 < p.N) {
        if (c0 < rows) yb[static_cast<size_t>(c0) * p.N + n0] = __float2bfloat16_rn(v.x);
        if (c0 + 1 < rows) yb[static_cast<size_t>(c0 + 1) * p.N + n0] = __float2bfloat16_rn(v.y);
      }
      if (n0 + 8 < p.N) {
        if (c0 < rows) yb[static_cast<size_t>(c0) * p.N + n0 + 8] = __float2bfloat16_rn(v.z);
        if (c0 + 1 < rows) yb[static_cast<size_t>(c0 + 1) * p.N + n0 + 8] = __float2bfloat16_rn(v.w);
      }
    }
    mk::cluster_sync_all();  // no CTA leaves while a peer may still read its shared memory
    return;
  }
  if (p.split > 1) {
    // add this split's partial into the tile's fp32 workspace (register layout: float4 i4 of
    // consumer thread ct at [i4][ct], coalesced), then count arrivals; the last split finishes
    const int tile = nt * gridDim.x + mt;
    float4* tp = reinterpret_cast<float4*>(p.part) + static_cast<size_t>(tile) * (NH * NA / 4) * NC;
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
      for (int i4 = 0; i4 < NA / 4; ++i4)
        red_add_v4(reinterpret_cast<float*>(tp + (h * (NA / 4) + i4) * NC + ct), acc[h][4 * i4], acc[h][4 * i4 + 1],
                   acc[h][4 * i4 + 2], acc[h][4 * i4 + 3]);
    __threadfence();
    mk::named_bar(1, NC);
    if (ct == 0) {
      const int old = atomicAdd(p.counters + tile, 1);
      *last_flag = old == p.split - 1;
    }
    mk::named_bar(1, NC);
    if (!*last_flag) return;
    __threadfence();
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
      for (int i4 = 0; i4 < NA / 4; ++i4) {
        float4* a = tp + (h * (NA / 4) + i4) * NC + ct;
        const float4 v = __ldcg(a);
        acc[h][4 * i4] = v.x, acc[h][4 * i4 + 1] = v.y, acc[h][4 * i4 + 2] = v.z, acc[h][4 * i4 + 3] = v.w;
        __stcg(a, make_float4(0.f, 0.f, 0.f, 0.f));
      }
    if (ct == 0) p.counters[tile] = 0;
  }

  // Epilogue: the consumer warpgroups are done with the ring -> stage [BT tokens][WR outputs]
  // bf16 in the weight ring, then 16-byte stores of the valid rows and columns (N % 8 == 0).
  mk::named_bar(1, NC);
  constexpr int kLd = WR + 8;
  constexpr int kCh = WR / 8;  // 16-byte chunks per token row
  bf16* st = reinterpret_cast<bf16*>(smem);
  const int n0 = (C::kTS ? (cw & 3) : cw) * 16 + gq, n1 = n0 + 8;
#pragma unroll
  for (int h = 0; h < NH; ++h)
#pragma unroll
    for (int j = 0; j < HB / 8; ++j) {
      const int c0 = wg * C::kTok + h * HB + 8 * j + 2 * tq;
      st[c0 * kLd + n0] = __float2bfloat16_rn(acc[h][4 * j + 0]);
      st[(c0 + 1) * kLd + n0] = __float2bfloat16_rn(acc[h][4 * j + 1]);
      st[c0 * kLd + n1] = __float2bfloat16_rn(acc[h][4 * j + 2]);
      st[(c0 + 1) * kLd + n1] = __float2bfloat16_rn(acc[h][4 * j + 3]);
    }
  mk::named_bar(1, NC);
  const int ncols = min(WR, p.N - nt * WR) / 8;  // 16-byte chunks of this tile
  bf16* yb = p.y + static_cast<size_t>(row0) * p.N + static_cast<size_t>(nt) * WR;
  for (int c = ct; c < rows * kCh; c += NC) {
    const int r = c / kCh, ch = c % kCh;
    if (ch < ncols)
      *reinterpret_cast<uint4*>(yb + static_cast<size_t>(r) * p.N + ch * 8) =
          *reinterpret_cast<const uint4*>(st + r * kLd + ch * 8);
  }
}

}  // namespace
}  // namespace servesim::attn
