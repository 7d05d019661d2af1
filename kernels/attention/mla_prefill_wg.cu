// servesim attention kernels: MLA prefill (MHA form, d_qk 192, d_v 128, causal over a cached
// prefix) on Hopper (sm_90a): mla_prefill variant 2.
//
// Technique (FlashAttention-3 style, written for this project from the published description and
// the project's own helpers in hopper.cuh): block = (128 query rows, head), 384 threads =
// warpgroup 0 (producer: one thread issues TMA loads, setmaxnreg 24) + warpgroups 1 and 2
// (consumers, 64 query rows each, setmaxnreg 240).
//   Q [128 x 192] (3 TMA boxes of 64 columns x 128 rows, 48 KB) loaded once;
//   K [128 keys x 192] (48 KB) and V [128 keys x 128] (32 KB) in two stages, each on its own
//   mbarrier ("full"), so S = Q K^T starts before V has arrived;
//   every consumer warpgroup: S = Q K^T (12 x wgmma m64n128k16, both operands from shared memory,
//   K-major), causal / length mask, online softmax in registers (exp2, row max / sum over the quad),
//   P converted in registers to the A fragment of wgmma (the accumulator layout of m64nN equals the
//   m16n8k16 A fragment per warp), O = alpha O + P V (8 x wgmma m64n128k16, A from registers, V
//   read N-major); after P V each warp arrives on the stage's "empty" mbarrier of its warpgroup.
//   The producer refills a stage once every warpgroup that reads its previous tile has arrived.
// All operand tiles use the 128-B swizzle of hopper.cuh (TMA CU_TENSOR_MAP_SWIZZLE_128B). Rows past
// N (queries) or T (keys) are zero-filled by TMA; the mask keeps keys >= T out.
// Tensor maps: q viewed as [N rows, H*192 columns], k as [T, H*192], v as [T, H*128]; the box for
// head h starts at column h*192 + 64*c (h*128 + 64*c for v).
#include "attention/mla_prefill.cuh"
#include "attention/hopper.cuh"
#include "attention/tmap.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <mutex>
#include <string>

namespace servesim::attn {

namespace {
constexpr float kLog2eW = 1.4426950408889634f;
constexpr float kNegInfW = -INFINITY;

namespace pfw {
constexpr int BM = 128, BN = 128;
constexpr int kQ = BM * 192 * 2;   // 49152
constexpr int kK = BN * 192 * 2;   // 49152 per stage
constexpr int kV = BN * 128 * 2;   // 32768 per stage
constexpr int kOffK = kQ;
constexpr int kOffV = kOffK + 2 * kK;
constexpr int kOffBar = kOffV + 2 * kV;  // qfull, kfull[2], vfull[2], kempty[2][2], vempty[2][2]
constexpr int kSmem = kOffBar + 128 + 1024;
static_assert(kSmem <= 232448, "shared memory per block");

// Masks keys outside [0, min(pos, T-1)] of the two rows (raw scores -> -inf).
__device__ __forceinline__ void mask_tile(float (&s)[64], int k0, int t4, int limA, int limB) {
#pragma unroll
  for (int jj = 0; jj < 16; ++jj)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int kj = k0 + 8 * jj + 2 * t4 + e;
      if (kj > limA) s[4 * jj + e] = kNegInfW;
      if (kj > limB) s[4 * jj + 2 + e] = kNegInfW;
    }
}

// Online softmax of one 64 x 128 score tile (raw scores in s, replaced by exp2 values): new row
// maxima m (raw), the rescale factors of the old O / l, the row sums of this tile.
__device__ __forceinline__ void softmax_tile(float (&s)[64], float sl2, float& mA, float& mB, float& alA, float& alB,
                                             float& sumA, float& sumB) {
  float mxA = kNegInfW, mxB = kNegInfW;
#pragma unroll
  for (int jj = 0; jj < 16; ++jj) {
    mxA = fmaxf(mxA, fmaxf(s[4 * jj], s[4 * jj + 1]));
    mxB = fmaxf(mxB, fmaxf(s[4 * jj + 2], s[4 * jj + 3]));
  }
  mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
  mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
  mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
  mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
  const float mnA = fmaxf(mA, mxA), mnB = fmaxf(mB, mxB);
  alA = (mA == kNegInfW) ? 0.f : fast_exp2((mA - mnA) * sl2);
  alB = (mB == kNegInfW) ? 0.f : fast_exp2((mB - mnB) * sl2);
  const float bA = (mnA == kNegInfW) ? 0.f : mnA * sl2, bB = (mnB == kNegInfW) ? 0.f : mnB * sl2;
  mA = mnA;
  mB = mnB;
  sumA = 0.f;
  sumB = 0.f;
#pragma unroll
  for (int jj = 0; jj < 16; ++jj) {
    s[4 * jj] = fast_exp2(fmaf(s[4 * jj], sl2, -bA));
    s[4 * jj + 1] = fast_exp2(fmaf(s[4 * jj + 1], sl2, -bA));
    s[4 * jj + 2] = fast_exp2(fmaf(s[4 * jj + 2], sl2, -bB));
    s[4 * jj + 3] = fast_exp2(fmaf(s[4 * jj + 3], sl2, -bB));
    sumA += s[4 * jj] + s[4 * jj + 1];
    sumB += s[4 * jj + 2] + s[4 * jj + 3];
  }
}
// exp2 values -> the bf16 A fragments of P (k16 step kk = keys 16 kk .. 16 kk + 15).
__device__ __forceinline__ void to_p(const float (&s)[64], uint32_t (&p)[8][4]) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    p[kk][0] = pack_bf16(s[8 * kk], s[8 * kk + 1]);
    p[kk][1] = pack_bf16(s[8 * kk + 2], s[8 * kk + 3]);
    p[kk][2] = pack_bf16(s[8 * kk + 4], s[8 * kk + 5]);
    p[kk][3] = pack_bf16(s[8 * kk + 6], s[8 * kk + 7]);
  }
}
__device__ __forceinline__ void issue_s(float (&s)[64], uint32_t qa, uint32_t kb) {
  using namespace sm90;
#pragma unroll
  for (int ks = 0; ks < 12; ++ks) {
    const uint32_t off = (ks >> 2) * (BM * 128) + (ks & 3) * 32;
    const uint32_t koff = (ks >> 2) * (BN * 128) + (ks & 3) * 32;
    wgmma_m64n128k16_ss(s, sw128_desc(qa + off, 16, 1024), sw128_desc(kb + koff, 16, 1024), ks > 0);
  }
  wg_commit();
}
__device__ __forceinline__ void issue_pv(float (&o)[64], const uint32_t (&p)[8][4], uint32_t vb) {
  using namespace sm90;
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) wgmma_m64n128k16_rs_tb(o, p[kk], sw128_desc(vb + kk * 2048, BN * 128, 1024), 1);
  wg_commit();
}
__device__ __forceinline__ void scale_o(float (&o)[64], float alA, float alB) {
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    o[4 * i] *= alA;
    o[4 * i + 1] *= alA;
    o[4 * i + 2] *= alB;
    o[4 * i + 3] *= alB;
  }
}
}  // namespace pfw

// MODE 0: per tile S, softmax, P V in sequence (each consumer warpgroup waits for its own GEMMs).
// MODE 1: FA3's intra-warpgroup overlap: iteration j issues S_j = Q K_j and then O += P_{j-1} V_{j-1},
//   waits for S_j only, runs the softmax of S_j while P V runs, then waits for P V, rescales O and
//   converts P_j. K and V stages are released separately (K after S_j, V after P V).
// MODE 2: MODE 1 plus the ping-pong of the two consumer warpgroups: named barriers 1 / 2 make them
//   issue their GEMM pairs in turn, so one warpgroup's softmax overlaps the other's GEMMs.
template <int MODE>
__global__ void __launch_bounds__(384, 1)
    mla_prefill_wgmma_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                             const __grid_constant__ CUtensorMap tv, MhaPrefillArgs a) {
  using namespace sm90;
  using namespace pfw;
  extern __shared__ uint8_t smem_raw[];
  // smemfix (issue 12, NOTES.md): this uintptr_t alignment costs nothing here -- every shared access of this
  // kernel is inline asm (no generic ld/st in its PTX); the shared-space form measured 1.003x (noise), so not taken
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  const uint32_t sb = saddr(smem);
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + kOffBar);
  uint64_t* qfull = bars;
  uint64_t* kfull = bars + 1;
  uint64_t* vfull = bars + 3;
  uint64_t* kempty = bars + 5;  // [stage * 2 + consumer]
  uint64_t* vempty = bars + 9;

  const int H = a.H, N = a.N, P = a.P, T = P + a.N;
  const int qt = gridDim.x - 1 - blockIdx.x;  // heaviest tiles first
  const int h = blockIdx.y;
  const int q0 = qt * BM;
  const int tid = threadIdx.x, wg = tid >> 7;
  // key tiles each consumer needs: keys 0 .. min(T, last position of its rows + 1)
  auto tiles_of = [&](int cw) { return (min(T, P + q0 + 64 * cw + 64) + BN - 1) / BN; };

  if (tid == 0) {
    mbar_init(qfull, 1);
    for (int i = 0; i < 2; ++i) {
      mbar_init(&kfull[i], 1);
      mbar_init(&vfull[i], 1);
    }
    for (int i = 0; i < 4; ++i) {
      mbar_init(&kempty[i], 4);
      mbar_init(&vempty[i], 4);
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {  // producer warpgroup
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (tid == 0) {
      const int nt = tiles_of(1), nt0 = MODE == 2 ? nt : tiles_of(0);
      mbar_expect_tx(qfull, kQ);
#pragma unroll
      for (int c = 0; c < 3; ++c) tma_load_2d(smem + c * (BM * 128), &tq, qfull, h * 192 + 64 * c, q0);
      for (int j = 0; j < nt; ++j) {
        const int st = j & 1, jp = j - 2;
        const uint32_t par = (jp >> 1) & 1;
        if (j >= 2) {
          if (jp < nt0) mbar_wait(&kempty[st * 2 + 0], par);
          mbar_wait(&kempty[st * 2 + 1], par);
        }
        mbar_expect_tx(&kfull[st], kK);
#pragma unroll
        for (int c = 0; c < 3; ++c)
          tma_load_2d(smem + kOffK + st * kK + c * (BN * 128), &tk, &kfull[st], h * 192 + 64 * c, j * BN);
        if (j >= 2) {
          if (jp < nt0) mbar_wait(&vempty[st * 2 + 0], par);
          mbar_wait(&vempty[st * 2 + 1], par);
        }
        mbar_expect_tx(&vfull[st], kV);
#pragma unroll
        for (int c = 0; c < 2; ++c)
          tma_load_2d(smem + kOffV + st * kV + c * (BN * 128), &tv, &vfull[st], h * 128 + 64 * c, j * BN);
      }
    }
  } else {  // consumer warpgroups
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
    const int cw = wg - 1;
    const int lane = tid & 31, w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
    const int rA = 64 * cw + 16 * w4 + g, rB = rA + 8;  // rows in the block
    const int limA = min(P + q0 + rA, T - 1), limB = min(P + q0 + rB, T - 1);  // last key each row sees
    // MODE 2: both consumers run the block's tile count (consumer 0's extra diagonal tile is fully
    // masked, p = 0), so their ping-pong turns pair up one to one
    const int nt = MODE == 2 ? tiles_of(1) : tiles_of(cw);
    const int first_pos = P + q0 + 64 * cw;
    const float sl2 = a.sm_scale * kLog2eW;
    float o[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] = 0.f;
    float mA = kNegInfW, mB = kNegInfW, lA = 0.f, lB = 0.f;
    const uint32_t qa = sb + cw * 64 * 128;
    auto needs_mask = [&](int k0) { return k0 + BN - 1 > first_pos || k0 + BN > T; };
    // one arrive per warp, predicated instead of branched (a branch while wgmma accumulators are in
    // flight makes ptxas serialise the wgmmas, C7520)
    auto release = [&](uint64_t* bar) {
      __syncwarp();
      asm volatile("{\n.reg .pred p;\nsetp.eq.u32 p, %1, 0;\n@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n" ::"r"(saddr(bar)),
                   "r"(lane)
                   : "memory");
    };
    auto bar_arrive_if = [](int id, int flag) {
      asm volatile("{\n.reg .pred p;\nsetp.ne.u32 p, %1, 0;\n@p bar.arrive %0, 256;\n}\n" ::"r"(id), "r"(flag) : "memory");
    };
    sm90::mbar_wait_uniform(qfull, 0);

    if constexpr (MODE == 0) {
      for (int j = 0; j < nt; ++j) {
        const int st = j & 1;
        const uint32_t par = (j >> 1) & 1;
        float s[64];
        sm90::mbar_wait_uniform(&kfull[st], par);
        wg_fence();
        issue_s(s, qa, sb + kOffK + st * kK);
        wg_wait<0>();
        fence_regs(s);
        release(&kempty[st * 2 + cw]);
        if (__any_sync(0xffffffffu, needs_mask(j * BN))) mask_tile(s, j * BN, t4, limA, limB);
        float alA, alB, sumA, sumB;
        softmax_tile(s, sl2, mA, mB, alA, alB, sumA, sumB);
        lA = lA * alA + sumA;
        lB = lB * alB + sumB;
        uint32_t p[8][4];
        to_p(s, p);
        scale_o(o, alA, alB);
        sm90::mbar_wait_uniform(&vfull[st], par);
        fence_regs(o);
        wg_fence();
        issue_pv(o, p, sb + kOffV + st * kV);
        wg_wait<0>();
        fence_regs(o);
        release(&vempty[st * 2 + cw]);
      }
    } else {
      uint32_t p[8][4];
      {  // tile 0: S_0, softmax, P_0
        float s[64];
        sm90::mbar_wait_uniform(&kfull[0], 0);
        wg_fence();
        issue_s(s, qa, sb + kOffK);
        wg_wait<0>();
        fence_regs(s);
        release(&kempty[cw]);
        if (__any_sync(0xffffffffu, needs_mask(0))) mask_tile(s, 0, t4, limA, limB);
        float alA, alB, sumA, sumB;
        softmax_tile(s, sl2, mA, mB, alA, alB, sumA, sumB);
        lA = sumA;
        lB = sumB;
        to_p(s, p);
      }
      if (MODE == 2) bar_arrive_if(1, cw == 1 && nt >= 2);  // consumer 0 issues first
      for (int j = 1; j < nt; ++j) {
        const int st = j & 1, sp = st ^ 1;
        const uint32_t par = (j >> 1) & 1, parp = ((j - 1) >> 1) & 1;
        float s[64];
        if (MODE == 2) named_bar_sync(1 + cw, 256);
        sm90::mbar_wait_uniform(&kfull[st], par);
        fence_regs(o);
        wg_fence();
        issue_s(s, qa, sb + kOffK + st * kK);
        sm90::mbar_wait_uniform(&vfull[sp], parp);
        issue_pv(o, p, sb + kOffV + sp * kV);
        if (MODE == 2) named_bar_arrive(cw == 0 ? 2 : 1, 256);  // the other consumer's turn (unconditional: a
        // predicated or branched arrive here, with wgmma in flight, makes ptxas serialise the wgmmas)
        wg_wait<1>();
        fence_regs(s);
        release(&kempty[st * 2 + cw]);
        if (__any_sync(0xffffffffu, needs_mask(j * BN))) mask_tile(s, j * BN, t4, limA, limB);
        float alA, alB, sumA, sumB;
        softmax_tile(s, sl2, mA, mB, alA, alB, sumA, sumB);
        wg_wait<0>();
        fence_regs(o);
        release(&vempty[sp * 2 + cw]);
        lA = lA * alA + sumA;
        lB = lB * alB + sumB;
        scale_o(o, alA, alB);
        to_p(s, p);
      }
      {  // last P V
        const int sl = (nt - 1) & 1;
        sm90::mbar_wait_uniform(&vfull[sl], ((nt - 1) >> 1) & 1);
        fence_regs(o);
        wg_fence();
        issue_pv(o, p, sb + kOffV + sl * kV);
        wg_wait<0>();
        fence_regs(o);
        release(&vempty[sl * 2 + cw]);
      }
    }
    lA += __shfl_xor_sync(0xffffffffu, lA, 1);
    lA += __shfl_xor_sync(0xffffffffu, lA, 2);
    lB += __shfl_xor_sync(0xffffffffu, lB, 1);
    lB += __shfl_xor_sync(0xffffffffu, lB, 2);
    const float fA = lA > 0.f ? 1.f / lA : 0.f, fB = lB > 0.f ? 1.f / lB : 0.f;
    const int iA = q0 + rA, iB = q0 + rB;
    if (iA < N) {
      bf16* out = a.out + (static_cast<size_t>(iA) * H + h) * 128 + 2 * t4;
#pragma unroll
      for (int jj = 0; jj < 16; ++jj) *reinterpret_cast<uint32_t*>(out + 8 * jj) = pack_bf16(o[4 * jj] * fA, o[4 * jj + 1] * fA);
    }
    if (iB < N) {
      bf16* out = a.out + (static_cast<size_t>(iB) * H + h) * 128 + 2 * t4;
#pragma unroll
      for (int jj = 0; jj < 16; ++jj)
        *reinterpret_cast<uint32_t*>(out + 8 * jj) = pack_bf16(o[4 * jj + 2] * fB, o[4 * jj + 3] * fB);
    }
    // consumer 1 arrived on barrier 1 after its last tile too (initial arrive + one per tile = nt):
    // consumer 0 takes that turn here so no arrival is left pending
    if (MODE == 2 && cw == 0 && nt >= 2) named_bar_sync(1, 256);
  }
}


// [rows, cols] bf16 row-major (row stride = cols), box 64 columns x box_rows rows, 128-B swizzle.
CUtensorMap map2d(const bf16* base, long cols, long rows, int box_rows) {
  CUtensorMap m;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * 2};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t estr[2] = {1, 1};
  const CUresult r = tensor_map_encoder()(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(base), dims, strides, box, estr,
                               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw std::runtime_error("mla_prefill: cuTensorMapEncodeTiled failed (" + std::to_string(r) + ")");
  return m;
}

template <int MODE>
void launch_wg(const CUtensorMap& tq, const CUtensorMap& tk, const CUtensorMap& tv, const MhaPrefillArgs& a, cudaStream_t s) {
  using namespace pfw;
  auto kern = mla_prefill_wgmma_kernel<MODE>;
  static bool attr = false;
  if (!attr) {
    SS_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    attr = true;
  }
  kern<<<dim3((a.N + BM - 1) / BM, a.H), 384, kSmem, s>>>(tq, tk, tv, a);
  SS_LAUNCH_CHECK();
}
}  // namespace

void mla_prefill_wgmma(const MhaPrefillArgs& a, cudaStream_t s, int mode) {
  using namespace pfw;
  const long T = static_cast<long>(a.P) + a.N;
  const long H = a.H;
  if ((reinterpret_cast<uintptr_t>(a.q) | reinterpret_cast<uintptr_t>(a.k) | reinterpret_cast<uintptr_t>(a.v)) & 15)
    throw std::invalid_argument("mla_prefill: wgmma variants need 16-byte aligned q/k/v");
  const CUtensorMap tq = map2d(a.q, H * 192, a.N, BM);
  const CUtensorMap tk = map2d(a.k, H * 192, T, BN);
  const CUtensorMap tv = map2d(a.v, H * 128, T, BN);
  if (mode == 0) launch_wg<0>(tq, tk, tv, a, s);
  else if (mode == 1) launch_wg<1>(tq, tk, tv, a, s);
  else launch_wg<2>(tq, tk, tv, a, s);
}

}  // namespace servesim::attn
