// MXFP4 W4A16 grouped GEMM, variant 8: the prefill kernel (dequantisation warpgroup + SS wgmma,
// w4a16_prefill_kernel, WgmmaSSBf16) and launch_prefill.
// Part of gemm_w4a16.cu's translation unit, not a standalone header: gemm_w4a16.cu includes the
// kernel parts in their original order after its shared definitions (Params, Cfg, kThreads,
// scale_factor, dequant_word); one unit keeps the code cicc / ptxas generate for every kernel
// exactly as before the file was split (see gemm_w4a16.cu).
#pragma once
#include "moe/moe.cuh"
#include "moe/device_util.cuh"
#include "moe/sm90_tma.cuh"
#include "moe/wgmma_rs.cuh"
#include "common/cuda_check.cuh"

namespace servesim::kernels::moe {
namespace {

// ================================================================================================
// Variant 8: prefill kernel (dispatched at BT = 256; the template also builds BT = 128, measured slower than
// variant 0 there), dequantisation warpgroup + SS wgmma (NOTES.md §13).
// 384 threads = 3 warpgroups:
//  - WG 0 ("dequant"): thread 0 also produces: per 64-wide k-block ONE 2-D TMA load of the BT x 64 token
//    tile (128-byte swizzle; rows past the tensor's end zero-filled) + ONE 1-D bulk copy of the 4352
//    prepacked weight bytes into the load ring (full_l, complete_tx). All 4 warps then dequantise the
//    k-block once per CTA (2 x 16-row groups per warp, the same fragments the register-A kernels
//    build) and write it with stmatrix.x4 into the A ring as a 128 x 64 bf16 K-major tile with the
//    128-byte swizzle (fence.proxy.async, 128 arrivals on full_a).
//  - WG 1, 2 (consumers; 154 registers, no setmaxnreg): wait full_l + full_a, 4 SS wgmma m64nBTk16 (A = 64 dequantised
//    weight rows, B = the token tile), commit, wait_group 1, release the previous k-block's slots.
// The consumers run nothing but wgmma and barrier waits in the main loop, so the tensor pipe sees a
// plain bf16 GEMM; the decode of k-block kb+1.. overlaps the wgmmas of kb on other warps.
// ================================================================================================
/// D[64 x N] += A[64 x 16] * B[16 x N], both bf16 K-major tiles in shared memory (descriptors); only
/// N = 256 (the prefill kernel's 256-token tile) is used.
template <int N> struct WgmmaSSBf16;
template <> struct WgmmaSSBf16<256> {
  __device__ __forceinline__ static void mma(float* d, uint64_t da, uint64_t db) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1, 1, 1, 0, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db));
  }
};

template <int BT>
struct PCfg {
  static constexpr int kX = BT * 128;        // BT tokens x 64 bf16
  static constexpr int kA = 128 * 128;       // 128 weight rows x 64 bf16
  static constexpr int kSL = BT == 256 ? 4 : 6;  // load ring (X + raw weights)
  static constexpr int kSA = BT == 256 ? 3 : 4;  // dequantised A ring
  static constexpr int kSmem = kSL * (kX + kWBlockBytes) + kSA * kA + 2 * (kSL + kSA) * 8 + 1024;
};
constexpr int kPfThreads = 384;

__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1), "r"(r2),
               "r"(r3)
               : "memory");
}

template <int BT>
__global__ void __launch_bounds__(kPfThreads, 1) w4a16_prefill_kernel(const __grid_constant__ CUtensorMap tmx, const Params p) {
  using C = PCfg<BT>;
  constexpr int SL = C::kSL, SA = C::kSA;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* xs = smem;                   // [SL][BT x 128 B], 1024-aligned
  uint8_t* as = xs + SL * C::kX;        // [SA][128 x 128 B], 1024-aligned
  uint8_t* wr = as + SA * C::kA;        // [SL][4352]
  uint64_t* full_l = reinterpret_cast<uint64_t*>(wr + SL * kWBlockBytes);
  uint64_t* empty_l = full_l + SL;
  uint64_t* full_a = empty_l + SL;
  uint64_t* empty_a = full_a + SA;

  const int tile = blockIdx.y;
  const int total_tiles = p.tile_offsets[p.G];
  if (tile >= total_tiles) return;
  int lo = 0, hi = p.G;
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (p.tile_offsets[mid] <= tile) lo = mid; else hi = mid;
  }
  const int g = lo;
  const int row0 = p.row_offsets[g] + (tile - p.tile_offsets[g]) * BT;
  const int rows = min(BT, p.row_offsets[g + 1] - row0);
  const int e = p.expert_ids ? p.expert_ids[g] : g;
  const int KB = p.K / kKBlock;
  const uint8_t* wmat = p.w + static_cast<size_t>(e) * p.matrix_bytes +
                        static_cast<size_t>(blockIdx.x) * KB * kWBlockBytes;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;

  if (tid == 0) {
    for (int s = 0; s < SL; ++s) {
      mbar_init(&full_l[s], 1);   // expect_tx arrival (TMA + bulk bytes)
      mbar_init(&empty_l[s], 8);  // lane 0 of each consumer warp
    }
    for (int s = 0; s < SA; ++s) {
      mbar_init(&full_a[s], 128);  // every dequant thread (after its own proxy fence)
      mbar_init(&empty_a[s], 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp < 4) {  // ---- dequant warpgroup (thread 0 = TMA producer) ----
    // no setmaxnreg: the consumers fit in the 168 registers of 384 threads (an inc to 200 with a dec to 112
    // asked for 512 x 128 registers > the 504 x 128 the CTA holds: the inc waited forever, call 1)
    auto load = [&](int kb) {
      const int slot = kb % SL;
      mbar_wait(&empty_l[slot], ((kb / SL) & 1) ^ 1);
      mbar_expect_tx(&full_l[slot], C::kX + kWBlockBytes);
      tma_load_2d(xs + slot * C::kX, &tmx, kb * kKBlock, row0, &full_l[slot]);
      bulk_g2s(wr + slot * kWBlockBytes, wmat + static_cast<size_t>(kb) * kWBlockBytes, kWBlockBytes, &full_l[slot]);
    };
    if (tid == 0)
      for (int kb = 0; kb < SL - 1 && kb < KB; ++kb) load(kb);
    const int mi = lane >> 3;  // stmatrix: this lane addresses row (lane & 7) of matrix mi
    for (int kb = 0; kb < KB; ++kb) {
      const int ls = kb % SL, sa = kb % SA;
      mbar_wait(&full_l[ls], (kb / SL) & 1);
      mbar_wait(&empty_a[sa], ((kb / SA) & 1) ^ 1);
      const uint8_t* wb = wr + ls * kWBlockBytes;
      const uint32_t ab = smem_u32(as + sa * C::kA);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int rg = warp + 4 * h;  // 16-row group (the register-A kernels' warp index)
        const uint4 q = *reinterpret_cast<const uint4*>(wb + rg * 512 + lane * 16);
        const uint32_t sc = *reinterpret_cast<const uint32_t*>(wb + 4096 + rg * 32 + gq * 4);
        const uint32_t f00 = scale_factor<0>(sc), f01 = scale_factor<2>(sc);
        const uint32_t f10 = scale_factor<1>(sc), f11 = scale_factor<3>(sc);
        uint32_t a[4][4];
        dequant_word(q.x, f00, f01, a[0]);
        dequant_word(q.y, f00, f01, a[1]);
        dequant_word(q.z, f10, f11, a[2]);
        dequant_word(q.w, f10, f11, a[3]);
        // matrix mi of k16 step s: rows (mi & 1) * 8 + 0..7 of the group, k (mi >> 1) * 8 + 0..7
        const int r = rg * 16 + (lane & 7) + (mi & 1) * 8;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          const int ch = s * 2 + (mi >> 1);
          stmatrix_x4(ab + r * 128 + ((ch ^ (r & 7)) << 4), a[s][0], a[s][1], a[s][2], a[s][3]);
        }
      }
      fence_proxy_async();
      mbar_arrive(&full_a[sa]);
      // refill the slot of k-block kb-1 (released once the consumers' wgmmas of kb-1 are done, which
      // needs full_a[kb]: issuing this before the dequantisation of kb would deadlock)
      if (tid == 0 && kb + SL - 1 < KB) load(kb + SL - 1);
      __syncwarp();
    }
    return;
  }

  // ---- consumer warpgroups ----

  const int ct = tid - 128, cw = warp - 4, wg = cw >> 2;
  float acc[BT / 8][4];
#pragma unroll
  for (int i = 0; i < BT / 8; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) acc[i][q] = 0.f;
  const uint32_t x0 = smem_u32(xs), a0 = smem_u32(as) + wg * (64 * 128);
  // k-block kb: wait for its tokens and dequantised weights, 4 wgmma, then release k-block kb-1 once
  // wait_group 1 says its wgmmas are done. The last k-block waits for everything inside the body and
  // the loop is unrolled by 2 (KB even), as in variant 0: a rolled loop with the accumulator in
  // flight across the back edge made ptxas serialise the wgmmas (C7514).
  auto body = [&](int kb, auto last) {
    const int ls = kb % SL, sa = kb % SA;
    mbar_wait(&full_l[ls], (kb / SL) & 1);
    mbar_wait(&full_a[sa], (kb / SA) & 1);
#pragma unroll
    for (int i = 0; i < BT / 8; ++i)
#pragma unroll
      for (int q = 0; q < 4; ++q) fence_operand(acc[i][q]);
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s)
      WgmmaSSBf16<BT>::mma(&acc[0][0], desc_sw128(a0 + sa * C::kA + s * 32), desc_sw128(x0 + ls * C::kX + s * 32));
    wgmma_commit();
#pragma unroll
    for (int i = 0; i < BT / 8; ++i)
#pragma unroll
      for (int q = 0; q < 4; ++q) fence_operand(acc[i][q]);
    if constexpr (decltype(last)::value) wgmma_wait<0>();
    else wgmma_wait<1>();
    if (kb > 0) {
      __syncwarp();
      if (lane == 0) {
        mbar_arrive(&empty_l[(kb - 1) % SL]);
        mbar_arrive(&empty_a[(kb - 1) % SA]);
      }
    }
  };
  using NotLast = std::integral_constant<bool, false>;
  using Last = std::integral_constant<bool, true>;
  for (int kb = 0; kb < KB - 2; kb += 2) {
    body(kb, NotLast{});
    body(kb + 1, NotLast{});
  }
  body(KB - 2, NotLast{});
  body(KB - 1, Last{});
  named_bar(1, 256);  // both consumer warpgroups are done with the rings (staging reuses them)

  // Epilogue: stage [BT tokens][128 outputs] bf16 (row stride 136) then 16-byte stores.
  bf16* st = reinterpret_cast<bf16*>(smem);
  stage_acc_bf16<BT>(st, acc, cw * 16, gq, tq);
  named_bar(1, 256);
  store_staged_rows(st, p.y + static_cast<size_t>(row0) * p.N + static_cast<size_t>(blockIdx.x) * kRowsPerCta, p.N, rows, ct, 256);
}

template <int BT>
void launch_prefill(const Params& p, int max_tiles, long long x_rows, cudaStream_t stream) {
  static bool configured = false;
  if (!configured) {
    SS_CUDA(cudaFuncSetAttribute(w4a16_prefill_kernel<BT>, cudaFuncAttributeMaxDynamicSharedMemorySize, PCfg<BT>::kSmem));
    configured = true;
  }
  // the token tensor map depends only on (x, rows, K): cached for repeated launches
  static CUtensorMap map;
  static const void* m_x = nullptr;
  static long long m_rows = -1;
  static int m_k = -1;
  if (m_x != p.x || m_rows != x_rows || m_k != p.K) {
    map = make_map_2d(p.x, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, p.K, static_cast<uint64_t>(x_rows),
                      static_cast<uint64_t>(p.K) * 2, kKBlock, BT, CU_TENSOR_MAP_SWIZZLE_128B);
    m_x = p.x;
    m_rows = x_rows;
    m_k = p.K;
  }
  dim3 grid(p.N / kRowsPerCta, max_tiles);
  w4a16_prefill_kernel<BT><<<grid, kPfThreads, PCfg<BT>::kSmem, stream>>>(map, p);
  SS_LAUNCH_CHECK();
}

}  // namespace
}  // namespace servesim::kernels::moe
