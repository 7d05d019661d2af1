// servesim attention kernels: DeepSeek V4 warp-specialised attention (v4_attn variant 3): its design
// notes, shared-memory layout (namespace v4ws) and device helpers (E4M3 -> BF16 / FP16 conversion,
// cluster stores and barriers).
// Part of dsv4.cu's translation unit, not a standalone header: dsv4.cu includes the kernel parts
// in their original order after defining kNegInf, ld4_bf16 and to_e4m3 (one unit keeps the code
// cicc / ptxas generate for every kernel exactly as before the file was split; see mqa.cu).
#pragma once
#include "attention/dsv4.cuh"
#include "attention/hopper.cuh"

namespace servesim::attn {
namespace {

// ------------------------------------------------------------------------------------------
// V4 CSA/HCA attention, warp-specialised (issue 12, seventh session; v4_attn variant 3).
// CTA = (64-head group, work item of the plan), 384 threads: warpgroups 0 and 1 are the consumers
// of mqa.cu's v4_attn_wgmma_kernel (S = Q K^T on warpgroup 0, online softmax, O += P V split over
// both, setmaxnreg 208 since the twelfth session, 224 before); warpgroup 2 is the producer (setmaxnreg
// 88, 56 before): it gathers tile j's 64 rows
// straight into the BF16 KV buffer j % 2 and dequantises them there while the consumers run tile
// j-1. Shared memory (1024-B aligned): Q [64 x 512] bf16 (64 KB, 8 column blocks of 8 KB, 128-B
// swizzle), two KV buffers of the same layout (2 x 64 KB), P, scales, flags, mbarriers.
// In-place staging: producer warp w owns rows 16 w .. 16 w + 15 of each tile. A row's E4M3 bytes of
// column block c (c < 7) land by cp.async (8-B copies) inside the 2 KB of block c that the warp's
// own BF16 rows occupy (offset 2048 w + 1024 + 64 i for its row i), its BF16 RoPE part directly at
// its swizzled place in block 7, its 7 UE8M0 scales in a side array; after its copies the warp
// converts block by block (32 raw bytes per lane into registers, __syncwarp, 64 BF16 bytes out), so
// no separate FP8 ring is needed next to the two BF16 buffers and no producer-wide barrier either.
// Conversion E4M3 -> BF16 by bit moves (PRMT, shift, LOP): the E4M3 sign / exponent / mantissa
// placed in a BF16 word is the value x 2^-120 (subnormals too), then one BF16x2 multiply by
// 2^(s - 7) applies the UE8M0 scale 2^(s - 127) and the rebias (two multiplies when s > 134).
// Index pipeline: each producer lane holds the row index of tile j (used), j+1 (L2 prefetch of its
// rows during tile j) and j+2 (loaded), so no copy waits on a dependent index load.
// Handshake: full[b] (128 producer arrivals after fence.proxy.async), empty[b] (256 consumer
// arrivals after their P V of the tile in buffer b).
// ------------------------------------------------------------------------------------------
namespace v4ws {
constexpr int kOffKV = 64 * 512 * 2;        // Q at [0, 64 KB)
constexpr int kKV = 64 * 512 * 2;           // one BF16 KV buffer
constexpr int kOffP = kOffKV + 2 * kKV;     // 196608
constexpr int kOffSc = kOffP + 64 * 64 * 2; // [2][64][8] B UE8M0 scales (+ pad byte)
constexpr int kOffFlag = kOffSc + 2 * 512;  // [2][64] int
constexpr int kOffF = kOffFlag + 512;       // alpha[64], m[64], l[64]
constexpr int kOffBar = kOffF + 768;        // full[2], empty[2]
constexpr int kSmem = kOffBar + 32 + 1024;  // + slack for 1024-B alignment
// ST form (fifteenth session, helper v4e): a raw staging ring after the mbarriers for rows 0..7 of each
// producer warp's 16 rows of the next tile: 32 rows of 584 B at a 592-B (16-B aligned) stride.
constexpr int kOffStg = kOffBar + 32;
constexpr int kStgRow = 592;
constexpr int kSmemSt = kOffStg + 32 * kStgRow + 1024;
// V16 form (sixteenth session, helper v4f): pool rows of kV4RowBytes16 = 592 B (16-B aligned), gathered by
// 16-B cp.async; a row's 16 bytes 576..591 (7 UE8M0 scales + 9 pad bytes) land in a side array of 16-B rows
// after the mbarriers ([2][64][16] B), so the scale reads stride 16 B.
constexpr int kRow16 = 592;
constexpr int kOffSc16 = kOffBar + 32;
constexpr int kSmem16 = kOffSc16 + 2 * 64 * 16 + 1024;
// ST + V16 (seventeenth session, helper v4i): the staging ring of the ST form behind V16's scale rows; a staged
// row's 592 pool bytes at a 640-B stride (640 = 5 x 128: the conversion's LDS.128 of staged rows 2 k and 2 k + 1
// fall into the two halves of the 128-B bank window: no bank conflict within a quarter warp).
constexpr int kOffStg16 = kOffSc16 + 2 * 64 * 16;
constexpr int kStgRow16 = 640;
constexpr int kSmemSt16 = kOffStg16 + 32 * kStgRow16 + 1024;
static_assert(kOffStg16 % 16 == 0, "staging alignment (ST + V16)");
static_assert(kSmemSt16 <= 232448, "shared memory per block (ST + V16 form)");
static_assert(kOffSc16 % 16 == 0, "16-B scale rows alignment");
static_assert(kSmem16 <= 232448, "shared memory per block (V16 form)");
static_assert(kOffStg % 16 == 0, "staging alignment");
static_assert(kSmemSt <= 232448, "shared memory per block (staged form)");
static_assert(kOffP % 1024 == 0, "P tile alignment");
static_assert(kOffBar % 8 == 0, "mbarrier alignment");
static_assert(kSmem <= 232448, "shared memory per block");
}  // namespace v4ws

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
// 4 E4M3 values (bytes of w, element 0 in the low byte) -> 4 BF16 (two bf16x2 words) times the
// factor(s) f1 (and f2 when two): see the comment above.
__device__ __forceinline__ uint2 e4m3x4_to_bf16_scaled(uint32_t w, uint32_t f1, uint32_t f2, bool two) {
  const uint32_t t0 = __byte_perm(w, 0u, 0x1404), t1 = __byte_perm(w, 0u, 0x3424);
  uint32_t r0 = (t0 & 0x80008000u) | ((t0 >> 4) & 0x07f007f0u);
  uint32_t r1 = (t1 & 0x80008000u) | ((t1 >> 4) & 0x07f007f0u);
  r0 = bf16x2_mul(r0, f1);
  r1 = bf16x2_mul(r1, f1);
  if (two) {
    r0 = bf16x2_mul(r0, f2);
    r1 = bf16x2_mul(r1, f2);
  }
  return make_uint2(r0, r1);
}
// wgmma descriptor + (byte offset >> 4) in the 14-bit start-address field (low word only: no carry
// for shared addresses < 256 KB; the high word -- stride, swizzle -- is unchanged)
__device__ __forceinline__ uint64_t desc_add(uint64_t d, uint32_t off16) {
  return (d & 0xffffffff00000000ull) | static_cast<uint32_t>(static_cast<uint32_t>(d) + off16);
}
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }
// F16 form (thirteenth session, helper v4c): FP16 operands instead of BF16. 4 E4M3 bytes -> two
// f16x2 words by the hardware unpack (cvt.rn.f16x2.e4m3x2: one F2FP per 2 values, exact: every E4M3
// value is an FP16), times f1 (and f2 when two) with mul.rn.f16x2.
__device__ __forceinline__ uint32_t f16x2_mul(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ uint2 e4m3x4_to_f16_scaled(uint32_t w, uint32_t f1, uint32_t f2, bool two) {
  uint32_t r0, r1;
  asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %2;\ncvt.rn.f16x2.e4m3x2 %0, lo;\ncvt.rn.f16x2.e4m3x2 %1, hi;\n}\n"
      : "=r"(r0), "=r"(r1) : "r"(w));
  r0 = f16x2_mul(r0, f1);
  r1 = f16x2_mul(r1, f1);
  if (two) {
    r0 = f16x2_mul(r0, f2);
    r1 = f16x2_mul(r1, f2);
  }
  return make_uint2(r0, r1);
}
// bf16x2 -> f16x2 (round to nearest; exact for |x| in [2^-14, 65504])
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t v) {
  uint32_t d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(__uint_as_float(v & 0xffff0000u)), "f"(__uint_as_float(v << 16)));
  return d;
}
__device__ __forceinline__ uint4 bf16x8_to_f16x8(uint4 v) {
  return make_uint4(bf16x2_to_f16x2(v.x), bf16x2_to_f16x2(v.y), bf16x2_to_f16x2(v.z), bf16x2_to_f16x2(v.w));
}
__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
// 8-B cp.async to a shared-window address (src_size 0 = zero fill), optionally predicated (no branch)
__device__ __forceinline__ void cp_async8_s(uint32_t dst, const void* src, uint32_t sz) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(sz) : "memory");
}
// 16-B cp.async (L2 only: .cg) to a shared-window address (src_size 0 = zero fill), optionally predicated
__device__ __forceinline__ void cp_async16_s(uint32_t dst, const void* src, uint32_t sz) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(sz) : "memory");
}
__device__ __forceinline__ void cp_async16_sp(uint32_t pred, uint32_t dst, const void* src, uint32_t sz) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %0, 0;\n@p cp.async.cg.shared.global [%1], [%2], 16, %3;\n}\n" ::"r"(pred), "r"(dst),
               "l"(src), "r"(sz)
               : "memory");
}
__device__ __forceinline__ void cp_async8_sp(uint32_t pred, uint32_t dst, const void* src, uint32_t sz) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %0, 0;\n@p cp.async.ca.shared.global [%1], [%2], 8, %3;\n}\n" ::"r"(pred), "r"(dst),
               "l"(src), "r"(sz)
               : "memory");
}

// 2-CTA cluster helpers (PAIR kernel): 16-B / 4-B stores into the peer CTA's shared memory at a
// shared::cluster address (mapa of this CTA's address), arrive on the peer's mbarrier (release,
// cluster scope), cluster barrier of every thread (not .aligned: producer and consumer warps reach it
// from different code), per-thread mbarrier wait with cluster-scope acquire.
__device__ __forceinline__ uint32_t v4_mapa(uint32_t a, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
  return r;
}
__device__ __forceinline__ void st_cluster16(uint32_t a, uint4 v) {
  asm volatile("st.shared::cluster.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ void st_cluster4(uint32_t a, uint32_t v) {
  asm volatile("st.shared::cluster.u32 [%0], %1;\n" ::"r"(a), "r"(v) : "memory");
}
__device__ __forceinline__ void mbar_arrive_remote(uint32_t cluster_addr) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr) : "memory");
}
// default semantics (release, CTA scope): no MEMBAR.ALL.GPU / ERRBAR (the .release.cluster form cost
// the consumers ~30% of their stall samples in ncu, call 1); for arrivals that order no data
__device__ __forceinline__ void mbar_arrive_remote_plain(uint32_t cluster_addr) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr) : "memory");
}
__device__ __forceinline__ void mbar_arrive_local_cluster(uint64_t* bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cta.b64 _, [%0];\n" ::"r"(sm90::saddr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait_cl(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred P1;\nLAB_WAIT:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra DONE;\nbra LAB_WAIT;\nDONE:\n}\n" ::"r"(sm90::saddr(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void cluster_sync_any() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
__device__ __forceinline__ void fence_proxy_async_all() { asm volatile("fence.proxy.async;\n" ::: "memory"); }

}  // namespace
}  // namespace servesim::attn
