// servesim attention kernels: DeepSeek V4 warp-specialised attention kernel v4_attn_ws_kernel (v4_attn
// variant 3; forms DBG / REG / PAIR / FENCE / F16, described above the kernel). Layout and helpers:
// dsv4_attn_ws_helpers.cuh.
// The body's two parts live in fragments included inside the function (seventeenth session, a verbatim
// move): dsv4_attn_ws_producer.cuh (warpgroup 2) and dsv4_attn_ws_consumer.cuh (warpgroups 0-1, epilogue).
// Part of dsv4.cu's translation unit, not a standalone header: dsv4.cu includes the kernel parts
// in their original order after defining kNegInf, ld4_bf16 and to_e4m3 (one unit keeps the code
// cicc / ptxas generate for every kernel exactly as before the file was split; see mqa.cu).
#pragma once
#include "attention/dsv4.cuh"
#include "attention/hopper.cuh"
#include "attention/dsv4_attn_ws_helpers.cuh"
#include "attention/mla_fp8_impl.cuh"
#include "attention/wg_store.cuh"

namespace servesim::attn {
namespace {

// DBG (experiments only, env V4WS_DEBUG): 1 = no conversion (the raw bytes stay in place), 2 = no
// gather (tiles converted from whatever the buffer holds), 3 = neither (consumer floor). All give
// wrong outputs; 0 = the kernel.
// REG: registers after setmaxnreg, producer / consumers: 1 = 88 / 208 (the default since the twelfth
// session: no spill, 1.12x faster than 0 at Pro 512 x 64K, 544.5 vs 611.9 us same run), 0 = 56 / 224
// (the seventh session's default; ptxas: 8 B spill in the producer). (Call 5 of the seventh session
// ran 96 / 208, which hangs -- the
// consumers' setmaxnreg.inc can only take what the producer's dec released from the 3 x 168
// registers per thread the CTA was launched with, so 2 C + P must be <= 504). Without setmaxnreg
// (168 each) the consumers spill 216 B. 2 = 72 / 216 (experiment).
// (A second producer warpgroup, 512 threads, does not compile: ptxas then holds every instruction
// to 128 registers and the m64n256k16 accumulators need >= 154, C7602.)
// PAIR (v4_attn_ws at H % 128 == 0 with env V4WS_PAIR=1 / v4_attn_ws_set_pair(1); off by default: it
// measured 1.16x slower than the one-CTA kernel, twelfth session call 2, see NOTES): the two 64-head
// groups of a work item run as a 2-CTA cluster (blockIdx.x = 2 k + rank); each CTA's producer gathers
// and converts only rows 32 rank .. 32 rank + 31 of every tile (8 per warp) and stores their BF16
// values (and flags) into both CTAs' buffers (st.shared::cluster for the peer). full[b] then counts
// 128 local + 128 peer producer arrivals, empty[b] one arrival per consumer warp of both CTAs (16):
// a producer overwrites buffer b in both CTAs only after both CTAs' P V of the tile held there.
// FENCE (PAIR only): 0 = the consumers wait on full[b] with the default (CTA-scope) acquire and arrive
// on empty[b] with plain arrivals, the producer's remote full arrival stays release.cluster after its
// fence.proxy.async (MEMBAR.ALL.GPU in SASS): the default. 1 = cluster-scope acquire / release
// everywhere (call 1's form: CCTL.IVALL after every consumer wait, MEMBAR.ALL.GPU + ERRBAR before
// every consumer arrival; 1.12x slower than the one-CTA kernel).
// F16 (thirteenth session, helper v4c; env V4WS_F16 / v4_attn_ws_set_f16; the default on every list since the fourteenth session, before only where idx_ld > 256 (setting 2); in-place one-CTA form
// only): Q, K and P in FP16 instead of BF16, both wgmma in f16. Q and the BF16 RoPE part of each row
// are converted BF16 -> FP16 in shared memory (Q once per CTA by the threads that copied it; RoPE
// block 7 by the producer lanes that convert the row); E4M3 -> FP16 by cvt.rn.f16x2.e4m3x2 and one
// mul.rn.f16x2 by 2^(s-127) (a normal FP16 for s in 113..142; s < 113: 2^-14 then 2^(s-113)).
// Exact for s in 112..134 (the product's lowest bit >= 2^-24, its largest 448 x 2^7 < 65504); a
// block with s > 134 (amax > 57344) overflows FP16 -- not produced by the compressor's RMS-normed
// rows. Q / RoPE values below 2^-14 lose bits (FP16 subnormals), P gains 3 mantissa bits.
// QE (fourteenth session, helper v4d; env V4WS_QE / v4_attn_ws_set_qe; one-CTA forms only): "early Q".
// The mbarriers are initialised and the CTA synchronised first; then the producer starts tile 0's
// gather at once while the 256 consumer threads alone copy Q (and convert it to FP16 in the F16 form)
// and meet at named barrier 3 before their first S. QE = 0: all 384 threads copy (and convert) Q and
// the producer starts only after it (the thirteenth session's order).
// DBG 3 (experiments only): the producer neither gathers nor converts (it still loads the indices and
// writes the flags, then arrives): the consumers' own floor; wrong outputs.
// CD (fourteenth session, helper v4d; env V4WS_CD / v4_attn_ws_set_cd; with QE only): leaner consumer
// code, from the first ncu of the F16 kernel (warpgroup 1 spent more time waiting for warpgroup 0's
// S + softmax than in its own P V, and the S loop issued ~13 instructions per HGMMA, mostly uniform
// descriptor arithmetic): (1) the wgmma descriptors are built once (Q, P, and K / V of buffer 0) and
// each k step adds a constant to the descriptor's low word (the 14-bit address field cannot carry:
// shared addresses < 256 KB); (2) the row-valid flags become one 16-bit ballot per producer warp
// (a 64-bit mask per buffer, one LDS.64 per consumer thread instead of 16 LDS); (3) O is rescaled
// only when some row's max changed (alpha != 1 in the warp; ex2(0) = 1 exactly), which after the
// first tiles of a long list is rare.
// ST (fifteenth session, helper v4e; env V4WS_ST / v4_attn_ws_set_st; F16 + QE + CD, DBG 0 only): a
// half third stage for the producer. Rows 0..7 of each warp's 16 rows of tile j+1 are gathered into a
// raw staging ring (kOffStg, 18.5 KB of the free shared memory) right after the warp's full(j)
// arrival, i.e. while it waits for empty (P V(j-1)); only rows 8..15 are still gathered in place after
// that wait, and their copies land while the warp converts the 8 staged rows (16 B per lane and block,
// 4 lanes per row) into the buffer. Before: all 16 rows gathered in place after the wait, then the
// whole copy latency exposed before the first conversion. Measured (v4e call 1, same run): 0.965-0.98x
// of the default at the long-list decode points (CSA Pro 512 x 64K 491.5 vs 480.8 us), 1.00x at prefill:
// off by default (NOTES, fifteenth session).
// EP (fifteenth session, helper v4e; env V4WS_EP / v4_attn_ws_set_ep; F16 + QE + CD, DBG 0): the epilogue
// through shared memory (wg_store::store_rows_staged): O staged in the Q tile and KV buffer 0 (free once
// the last P V is done; the producer has exited), then 16-B coalesced stores. ncu of the default (v4d,
// and call 1 here): the 32-bit STG of store_rows were lg-throttled, ~8% of all stall samples.
// V16 (sixteenth session, helper v4f; env V4WS_V16 / v4_attn_ws_set_v16; F16 + QE + CD, DBG 0, not ST): the
// caller's pool rows are kV4RowBytes16 = 592 B (the 584-B row + 8 pad bytes: 16-B aligned), so the producer
// gathers by 16-B cp.async (.cg): per row and lane one copy of bytes 16 l .. (blocks 0..6 for l < 28, RoPE
// chunks 0..3 for l >= 28) and, on lanes 0..4, one of bytes 512 + 16 l (RoPE chunks 4..7; lane 4: the 7
// scales + pad into 16-B scale rows at kOffSc16): 2 LDGSTS per lane and row instead of 3 (8-B copies:
// the 584-B row is only 8-B aligned), half the copy instructions per byte. Destinations as before (the
// conversion is unchanged but for the scale stride). The default since v4f call 1 (1.01-1.09x, same run).
// ST + V16 (seventeenth session, helper v4i; V4WS_ST=1 with V16 on): the staged producer on 592-B rows -- rows
// 0..7 of each warp's next tile by 16-B copies into a staging ring (kOffStg16, 640-B rows) right after full(j),
// rows 8..15 by V16's in-place 16-B issue after the empty wait; the conversion as in ST. With or without EP.
// Measured (v4i call 1, same run): 1.016-1.069x of the V16 default at 23 of 24 points, 1.005x at CSA prefill
// 4096 after 64K; off by default (dsv4.cu, kV4wsStDefault).
// Tried and removed (seventeenth session, helper v4h; NOTES.md): PS (P V in two halves, double-buffered P / alpha,
// no barrier after P V; d699531) and SH (the producer's scales read once per tile, one-multiply conversion;
// 1bf99ff), both correct and sanitizer-clean, 0.95-1.03x and 0.99-1.005x of V16 at the reference points.
template <int DBG, int REG, bool PAIR, int FENCE = 0, bool F16 = false, bool QE = false, bool CD = false, bool ST = false,
          bool EP = false, bool V16 = false>
__global__ void __launch_bounds__(384, 1) v4_attn_ws_kernel(MqaArgs a, const int4* __restrict__ work) {
  static_assert(!EP || (F16 && QE && CD && !PAIR && DBG == 0), "the staged epilogue is built on F16 + QE + CD only");
  static_assert(!V16 || (F16 && QE && CD && !PAIR && DBG == 0), "the 16-B gather is built on F16 + QE + CD only");
  constexpr int kRowB = V16 ? v4ws::kRow16 : kV4RowBytes;  // pool row stride (bytes)
  constexpr int kScS = V16 ? 16 : 8;                 // scale row stride in shared memory
  static_assert(!ST || (F16 && QE && CD && !PAIR && DBG == 0), "the staged form is built on F16 + QE + CD only");
  static_assert(!(F16 && PAIR), "the F16 form is the one-CTA producer only");
  static_assert(!(QE && PAIR), "the early-Q form is the one-CTA kernel only");
  static_assert(!CD || QE, "the lean consumer form is built with the early-Q form only");
  using namespace sm90;
  using namespace v4ws;
  constexpr float kLog2e = 1.4426950408889634f;
  extern __shared__ uint8_t smem_raw[];
  // 1024-B alignment by an offset from smem_raw (not through an integer cast): the compiler then
  // knows every pointer below is shared and emits LDS/STS (the cast form gave generic LD/ST, ncu call 2)
  uint8_t* smem = smem_raw + ((1024u - (sm90::saddr(smem_raw) & 1023u)) & 1023u);
  const uint32_t sb = saddr(smem);
  uint8_t* sP = smem + kOffP;
  uint8_t* sSc = smem + kOffSc;
  int* sFlag = reinterpret_cast<int*>(smem + kOffFlag);
  float* sAlpha = reinterpret_cast<float*>(smem + kOffF);
  float* sM = sAlpha + 64;
  float* sL = sM + 64;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kOffBar);
  uint64_t* empty = full + 2;

  const int4 wk = work[blockIdx.y];
  const int qi = wk.x, rb = wk.y, re = wk.z, slot = wk.w;
  const int head0 = blockIdx.x * 64, H = a.H;
  const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31;
  const int ntiles = (re - rb + 63) / 64;

  const uint32_t rank = PAIR ? cluster_ctarank() : 0u, peer = rank ^ 1u;
  if (tid == 0) {
    mbar_init(&full[0], PAIR ? 256 : 128);
    mbar_init(&full[1], PAIR ? 256 : 128);
    mbar_init(&empty[0], PAIR ? 16 : 256);
    mbar_init(&empty[1], PAIR ? 16 : 256);
    if (PAIR) mbar_fence_init();
  }
  constexpr int NT = 384, RPW = PAIR ? 8 : 16;  // threads, rows per producer warp
  constexpr int LPR = 32 / RPW, BPL = 64 / LPR;       // conversion: lanes per row, raw bytes per lane
  // Q tile (padded heads read as zeros), swizzled, by threads 0 .. nthr-1 (F16: each thread converts
  // the chunks it copied, once its own copies have landed)
  auto load_q = [&](int nthr) {
    const bf16* qsrc = a.q + (static_cast<size_t>(qi) * H + head0) * 512;
    for (int u = tid; u < 64 * 64; u += nthr) {
      const int r = u >> 6, ch = u & 63;
      const bool ok = head0 + r < H;
      cp_async16(smem + (ch >> 3) * 8192 + r * 128 + (((ch & 7) ^ (r & 7)) << 4),
                 qsrc + static_cast<size_t>(ok ? r : 0) * 512 + ch * 8, ok);
    }
    cp_async_commit();
    cp_async_wait<0>();
    if constexpr (F16) {
      for (int u = tid; u < 64 * 64; u += nthr) {
        const int r = u >> 6, ch = u & 63;
        uint4* p = reinterpret_cast<uint4*>(smem + (ch >> 3) * 8192 + r * 128 + (((ch & 7) ^ (r & 7)) << 4));
        *p = bf16x8_to_f16x8(*p);
      }
    }
    fence_proxy_async();  // generic writes of Q -> the wgmma (async proxy) reads
  };
  if constexpr (QE) {
    __syncthreads();  // mbarriers initialised; the producer goes on to tile 0 at once (Q: consumers, below)
  } else {
    load_q(NT);
    if constexpr (PAIR) cluster_sync_any();  // both CTAs' mbarriers initialised before any remote arrive
    else __syncthreads();
  }

  if (wg >= 2) {
#include "attention/dsv4_attn_ws_producer.cuh"  // the producer warpgroup (a fragment of this body)
  }

#include "attention/dsv4_attn_ws_consumer.cuh"  // the consumer warpgroups and the epilogue (a fragment of this body)
}

}  // namespace
}  // namespace servesim::attn
