// servesim attention kernels: DeepSeek V4 warp-specialised attention kernel v4_attn_ws_kernel (v4_attn
// variant 3; forms DBG / REG / PAIR / FENCE / F16, described above the kernel). Layout and helpers:
// dsv4_attn_ws_helpers.cuh.
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
template <int DBG, int REG, bool PAIR, int FENCE = 0, bool F16 = false, bool QE = false, bool CD = false, bool ST = false,
          bool EP = false, bool V16 = false>
__global__ void __launch_bounds__(384, 1) v4_attn_ws_kernel(MqaArgs a, const int4* __restrict__ work) {
  static_assert(!EP || (F16 && QE && CD && !PAIR && DBG == 0), "the staged epilogue is built on F16 + QE + CD only");
  static_assert(!V16 || (F16 && QE && CD && !PAIR && !ST && DBG == 0), "the 16-B gather is built on F16 + QE + CD (not ST) only");
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
    // ------------------------------- producer -------------------------------
    if constexpr (REG == 0) asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n" ::: "memory");
    if constexpr (REG == 1) asm volatile("setmaxnreg.dec.sync.aligned.u32 88;\n" ::: "memory");
    if constexpr (REG == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 72;\n" ::: "memory");
    const int pt = tid - 256, pw = pt >> 5;
    const int rw0 = (PAIR ? 32 * static_cast<int>(rank) : 0) + RPW * pw;  // the warp's first row of a tile
    const int* idx = a.indices + static_cast<size_t>(qi) * a.idx_ld;
    // lane l holds the index of row rw0 + (l & (RPW - 1)) of a tile
    auto load_idx = [&](int j) -> int {
      const int r = rb + 64 * j + rw0 + (lane & (RPW - 1));
      return (j < ntiles && r < re) ? __ldg(idx + r) : -1;
    };
    // the lane's three 8-B chunks of a row: ch = lane, lane + 32, lane + 64 (source offset 8 ch)
    // Warp pw owns rows 16 pw .. 16 pw + 15 of every tile: it gathers and converts them alone (no
    // producer-wide barrier). Row 16 pw + i's E4M3 bytes of block c are staged at 2048 pw + 1024 + 64 i
    // inside the block, i.e. inside the 2 KB that the warp's own BF16 rows of that block occupy.
    const uint32_t wreg = 128 * rw0 + 64 * RPW;  // the warp's raw staging inside each block
    const uint32_t dA = (lane >> 3) * 8192 + wreg + (lane & 7) * 8;  // + 64 i
    const bool bRope = lane >= 24;
    const uint32_t dB = bRope ? 7 * 8192 + (lane & 1) * 8 : ((lane + 32) >> 3) * 8192 + wreg + (lane & 7) * 8;
    const int qB = (lane - 24) >> 1;               // RoPE 16-B chunk (lane >= 24)
    const uint32_t dC = 7 * 8192 + (lane & 1) * 8;  // lane < 8: RoPE chunk 4 + lane / 2
    const int qC = 4 + (lane >> 1);
    const int di = lane / LPR, dh = lane % LPR;  // conversion: row RPW pw + di, elements BPL dh .. of a block
    const int dr = rw0 + di;
    const uint32_t psb = PAIR ? v4_mapa(sb, peer) : 0u;  // the peer CTA's smem base (shared::cluster)
    int id_cur = load_idx(0), id_nxt = load_idx(1);
    // V16: the lane's two copy destinations per row (see the issue loop); copy 1 = bytes 16 lane ..,
    // copy 2 (lanes 0..4) = bytes 512 + 16 lane ..
    const bool c1rope = lane >= 28;
    const uint32_t v16_b1 = sb + kOffKV + (c1rope ? 7 * 8192 + 128 * rw0 : (lane >> 2) * 8192 + wreg + (lane & 3) * 16);
    const uint32_t v16_s1 = c1rope ? 128u : 64u, v16_x1 = c1rope ? static_cast<uint32_t>(lane - 28) << 4 : 0u;
    const uint32_t v16_m1 = c1rope ? 0x70u : 0u;
    const bool c2sc = lane == 4;  // lanes 0..3: RoPE chunks 4..7; lane 4: the scales
    const uint32_t v16_b2 = c2sc ? sb + kOffSc16 + 16 * rw0 : sb + kOffKV + 7 * 8192 + 128 * rw0;
    const uint32_t v16_bs2 = c2sc ? 1024u : static_cast<uint32_t>(kKV), v16_s2 = c2sc ? 16u : 128u;
    const uint32_t v16_x2 = c2sc ? 0u : static_cast<uint32_t>(4 + (lane & 3)) << 4, v16_m2 = c2sc ? 0u : 0x70u;
    if constexpr (ST) {
      // 8 rows x 4 lanes: lane (di8, dh8) converts row di8 of a half, bytes 16 dh8 .. of each block
      const int di8 = lane >> 2, dh8 = lane & 3;
      const uint32_t stw = sb + kOffStg + pw * 8 * kStgRow;  // this warp's 8 staging rows
      const uint8_t* stl = smem + kOffStg + (pw * 8 + di8) * kStgRow;  // the lane's staged row
      // rows 0..7 of a tile (indices: lanes 0..7 of ids) -> staging, the row's 584 B contiguous
      auto stage = [&](int ids) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const int id = __shfl_sync(0xffffffffu, ids, i);
          const bool ok = id >= 0;
          const uint32_t sz = ok ? 8u : 0u;
          const uint8_t* src = a.pool + static_cast<size_t>(ok ? id : 0) * kV4RowBytes + lane * 8;
          const uint32_t d = stw + i * kStgRow + lane * 8;
          cp_async8_s(d, src, sz);
          cp_async8_s(d + 256, src + 256, sz);
          cp_async8_sp(lane <= 8, d + 512, src + 512, sz);
        }
        cp_async_commit();
      };
      // E4M3 block c of one row (16 B per lane: values 16 dh8 ..) -> FP16 chunks 2 dh8, 2 dh8 + 1 of row dr
      // in block c of buffer kvb; raw(c) / sc(c) give the lane's raw bytes and the row's scale byte.
      // In place (rows 8..15) block c's raw bytes lie inside block c's own rows 12..15 of the warp: all
      // lanes have loaded them (__syncwarp) before any lane writes block c.
      auto convert = [&](uint8_t* kvb, int dr, const uint8_t* raw0, uint32_t rstep, const uint8_t* sc) {
        uint4 x = *reinterpret_cast<const uint4*>(raw0);
        uint32_t s = sc[0];
#pragma unroll 1
        for (int c = 0; c < 7; ++c) {
          __syncwarp();
          const uint32_t w[4] = {x.x, x.y, x.z, x.w};
          const uint32_t cs = s;
          if (c < 6) {
            x = *reinterpret_cast<const uint4*>(raw0 + (c + 1) * rstep);
            s = sc[c + 1];
          }
          const bool two = cs < 113;
          const uint32_t e1 = two ? 1u : min(cs, 142u) - 112u;
          const uint32_t h2 = cs >= 99 ? (cs - 98u) << 10 : (cs >= 89 ? 1u << (cs - 89u) : 0u);
          const uint32_t f1 = (e1 << 10) * 0x00010001u, f2 = h2 * 0x00010001u;
#pragma unroll
          for (int k = 0; k < 2; ++k) {
            const uint2 lo = e4m3x4_to_f16_scaled(w[2 * k], f1, f2, two);
            const uint2 hi = e4m3x4_to_f16_scaled(w[2 * k + 1], f1, f2, two);
            *reinterpret_cast<uint4*>(kvb + c * 8192 + dr * 128 + ((((2 * dh8 + k) ^ dr) & 7) << 4)) =
                make_uint4(lo.x, lo.y, hi.x, hi.y);
          }
        }
      };
      stage(id_cur);  // tile 0's rows 0..7
      for (int j = 0; j < ntiles; ++j) {
        const int b = j & 1;
        if (j >= 2) mbar_wait(&empty[b], ((j - 2) >> 1) & 1);
        const int id_nn = load_idx(j + 2);
        uint8_t* kvb = smem + kOffKV + b * kKV;
        uint8_t* scb = sSc + b * 512;
        const uint32_t kvs = sb + kOffKV + b * kKV, scs = sb + kOffSc + b * 512;
        // rows 8..15 in place (as the two-stage form)
#pragma unroll
        for (int i = 8; i < 16; ++i) {
          const int r = rw0 + i;
          const int id = __shfl_sync(0xffffffffu, id_cur, i);
          const bool ok = id >= 0;
          const uint32_t sz = ok ? 8u : 0u;
          const uint8_t* src = a.pool + static_cast<size_t>(ok ? id : 0) * kV4RowBytes + lane * 8;
          const uint32_t b2 = bRope ? kvs + dB + r * 128 + (((qB ^ r) & 7) << 4) : kvs + dB + i * 64;
          const uint32_t b3 = lane < 8 ? kvs + dC + r * 128 + (((qC ^ r) & 7) << 4) : scs + r * 8;
          cp_async8_s(kvs + dA + i * 64, src, sz);
          cp_async8_s(b2, src + 256, sz);
          cp_async8_sp(lane <= 8, b3, src + 512, sz);
        }
        cp_async_commit();
        {  // the tile's row-valid mask (bits 0..15 = the warp's 16 rows)
          const uint32_t bal = __ballot_sync(0xffffffffu, id_cur >= 0);
          if (lane == 0) reinterpret_cast<uint16_t*>(sFlag)[b * 4 + pw] = static_cast<uint16_t>(bal);
        }
        // L2 prefetch of tile j+1's rows 8..15 (rows 0..7 are staged at the end of this tile)
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          const int i = k * 5 + lane / 6, part = lane % 6;
          const int id = __shfl_sync(0xffffffffu, id_nxt, 8 + (i & 7));
          if (lane < 30 && i < 8 && id >= 0)
            prefetch_l2(a.pool + static_cast<size_t>(id) * kV4RowBytes + (part == 5 ? kV4RowBytes - 1 : part * 128));
        }
        cp_async_wait<1>();  // this lane's staged copies of tile j (committed one tile ago) have landed
        __syncwarp();
        {  // rows 0..7 from staging: blocks 0..6, then the BF16 RoPE part (raw bytes 448..575) -> block 7
          const int dr = rw0 + di8;
          convert(kvb, dr, stl + 16 * dh8, 64u, stl + 576);
#pragma unroll
          for (int k = 0; k < 2; ++k) {
            const int q = 2 * dh8 + k;
            *reinterpret_cast<uint4*>(kvb + 7 * 8192 + dr * 128 + (((q ^ dr) & 7) << 4)) =
                bf16x8_to_f16x8(*reinterpret_cast<const uint4*>(stl + 448 + 16 * q));
          }
        }
        cp_async_wait<0>();  // rows 8..15 in place
        __syncwarp();
        {
          const int dr = rw0 + 8 + di8;
          convert(kvb, dr, kvb + wreg + (8 + di8) * 64 + 16 * dh8, 8192u, scb + dr * 8);
#pragma unroll
          for (int k = 0; k < 2; ++k) {
            uint4* p = reinterpret_cast<uint4*>(kvb + 7 * 8192 + dr * 128 + ((((2 * dh8 + k) ^ dr) & 7) << 4));
            *p = bf16x8_to_f16x8(*p);
          }
        }
        fence_proxy_async();
        mbar_arrive(&full[b]);
        // tile j+1's rows 0..7 -> staging (its rows of tile j were read above), while the warp waits for empty
        __syncwarp();
        if (j + 1 < ntiles) stage(id_nxt);
        else cp_async_commit();  // an empty group keeps the wait_group count
        id_cur = id_nxt;
        id_nxt = id_nn;
      }
    } else {  // the two-stage producer: every row in place
      for (int j = 0; j < ntiles; ++j) {
        const int b = j & 1;
        if (j >= 2) {  // P V(j-2) done (in both CTAs when PAIR): buffer b is free
          if constexpr (PAIR && FENCE == 1) mbar_wait_cl(&empty[b], ((j - 2) >> 1) & 1);
          else mbar_wait(&empty[b], ((j - 2) >> 1) & 1);
        }
        const int id_nn = load_idx(j + 2);
        uint8_t* kvb = smem + kOffKV + b * kKV;
        uint8_t* scb = V16 ? smem + kOffSc16 + b * 1024 : sSc + b * 512;
        // branch-free issue: 32-bit shared addresses, the third copy predicated (lanes 0-8 only)
        const uint32_t kvs = sb + kOffKV + b * kKV, scs = sb + kOffSc + b * 512;
        if constexpr (V16) {
          // dst of row i = t + i * step + (x ^ (msk & ((i & 7) << 4))): rw0 % 16 == 0, so (r & 7) = (i & 7)
          const uint32_t t1 = v16_b1 + b * kKV, t2 = v16_b2 + b * v16_bs2;
#pragma unroll
          for (int i = 0; i < RPW; ++i) {
            const int id = __shfl_sync(0xffffffffu, id_cur, i);
            const bool ok = id >= 0;
            const uint32_t sz = ok ? 16u : 0u;
            const uint8_t* src = a.pool + static_cast<size_t>(ok ? id : 0) * kRowB + lane * 16;
            const uint32_t c7 = static_cast<uint32_t>(i & 7) << 4;
            cp_async16_s(t1 + i * v16_s1 + (v16_x1 ^ (v16_m1 & c7)), src, sz);
            cp_async16_sp(lane <= 4, t2 + i * v16_s2 + (v16_x2 ^ (v16_m2 & c7)), src + 512, sz);
          }
        }
  #pragma unroll
        for (int i = 0; i < (V16 ? 0 : RPW); ++i) {
          const int r = rw0 + i;
          const int id = __shfl_sync(0xffffffffu, id_cur, i);
          const bool ok = id >= 0;
          const uint32_t sz = ok ? 8u : 0u;
          const uint8_t* src = a.pool + static_cast<size_t>(ok ? id : 0) * kV4RowBytes + lane * 8;
          if (DBG != 2 && DBG != 3) {
            const uint32_t b2 = bRope ? kvs + dB + r * 128 + (((qB ^ r) & 7) << 4) : kvs + dB + i * 64;
            const uint32_t b3 = lane < 8 ? kvs + dC + r * 128 + (((qC ^ r) & 7) << 4) : scs + r * 8;
            cp_async8_s(kvs + dA + i * 64, src, sz);
            cp_async8_s(b2, src + 256, sz);
            cp_async8_sp(lane <= 8, b3, src + 512, sz);
          }
          if (!CD && lane == 0) {
            sFlag[b * 64 + r] = ok;
            if constexpr (PAIR) st_cluster4(psb + kOffFlag + 4 * (b * 64 + r), ok ? 1u : 0u);
          }
        }
        cp_async_commit();
        if constexpr (CD) {  // lanes l and l + 16 hold row rw0 + l: bits 0..15 = the warp's 16 rows
          const uint32_t bal = __ballot_sync(0xffffffffu, id_cur >= 0);
          if (lane == 0) reinterpret_cast<uint16_t*>(sFlag)[b * 4 + pw] = static_cast<uint16_t>(bal);
        }
        // L2 prefetch of tile j+1's rows: 6 lanes per row (5 lines at +128 k and the last byte)
  #pragma unroll
        for (int k = 0; k < (RPW + 4) / 5; ++k) {
          const int i = k * 5 + lane / 6, part = lane % 6;
          const int id = __shfl_sync(0xffffffffu, id_nxt, i & (RPW - 1));
          if (DBG != 3 && lane < 30 && i < RPW && id >= 0)
            prefetch_l2(a.pool + static_cast<size_t>(id) * kRowB + (part == 5 ? kRowB - 1 : part * 128));
        }
        cp_async_wait<0>();
        __syncwarp();  // every copy of this warp's rows of tile j has landed
        if constexpr (PAIR) {  // the BF16 RoPE block (7) of the warp's rows, as landed, to the peer
          const uint32_t o7 = kOffKV + b * kKV + 7 * 8192 + dr * 128 + 32 * dh;
          st_cluster16(psb + o7, *reinterpret_cast<const uint4*>(smem + o7));
          st_cluster16(psb + o7 + 16, *reinterpret_cast<const uint4*>(smem + o7 + 16));
        }
        // block c+1's raw bytes are loaded before block c is converted (different 8-KB blocks)
        const uint8_t* raw = kvb + wreg + di * 64 + dh * BPL;
        constexpr int NX = BPL / 16;  // uint4 of raw bytes per lane and block
        uint4 x[NX];
  #pragma unroll
        for (int u = 0; u < NX; ++u) x[u] = *reinterpret_cast<const uint4*>(raw + 16 * u);
        uint32_t s = scb[dr * kScS];
  #pragma unroll 1
        for (int c = 0; c < 7; ++c) {
          if (DBG == 1 || DBG == 3) continue;
          __syncwarp();  // the warp's raw bytes of block c are in registers
          uint32_t w[4 * NX];
  #pragma unroll
          for (int u = 0; u < NX; ++u) {
            w[4 * u] = x[u].x; w[4 * u + 1] = x[u].y; w[4 * u + 2] = x[u].z; w[4 * u + 3] = x[u].w;
          }
          const uint32_t cs = s;
          if (c < 6) {
  #pragma unroll
            for (int u = 0; u < NX; ++u) x[u] = *reinterpret_cast<const uint4*>(raw + (c + 1) * 8192 + 16 * u);
            s = scb[dr * kScS + c + 1];
          }
          bool two;
          uint32_t f1, f2;
          if constexpr (F16) {  // FP16 2^(s-127): biased exponent s - 112 (normal for s in 113..142)
            two = cs < 113;
            const uint32_t e1 = two ? 1u : min(cs, 142u) - 112u;
            const uint32_t h2 = cs >= 99 ? (cs - 98u) << 10 : (cs >= 89 ? 1u << (cs - 89u) : 0u);  // 2^(s-113)
            f1 = (e1 << 10) * 0x00010001u;
            f2 = h2 * 0x00010001u;
          } else {
            two = cs > 134;
            const uint32_t h1 = two ? (247u << 7) : ((cs + 120u) << 7), h2 = cs << 7;
            f1 = h1 | (h1 << 16);
            f2 = h2 | (h2 << 16);
          }
  #pragma unroll
          for (int k = 0; k < 2 * NX; ++k) {  // 16-B output chunks (8 values) of this lane
            const uint2 lo = F16 ? e4m3x4_to_f16_scaled(w[2 * k], f1, f2, two) : e4m3x4_to_bf16_scaled(w[2 * k], f1, f2, two);
            const uint2 hi = F16 ? e4m3x4_to_f16_scaled(w[2 * k + 1], f1, f2, two) : e4m3x4_to_bf16_scaled(w[2 * k + 1], f1, f2, two);
            const uint32_t ob = c * 8192 + dr * 128 + ((((2 * NX * dh + k) ^ dr) & 7) << 4);
            const uint4 v = make_uint4(lo.x, lo.y, hi.x, hi.y);
            *reinterpret_cast<uint4*>(kvb + ob) = v;
            if constexpr (PAIR) st_cluster16(psb + kOffKV + b * kKV + ob, v);
          }
        }
        if constexpr (F16) {  // the row's BF16 RoPE part (block 7, landed in place) -> FP16, same chunks
          if (DBG != 1 && DBG != 3) {
  #pragma unroll
            for (int k = 0; k < 2 * NX; ++k) {
              uint4* p = reinterpret_cast<uint4*>(kvb + 7 * 8192 + dr * 128 + ((((2 * NX * dh + k) ^ dr) & 7) << 4));
              *p = bf16x8_to_f16x8(*p);
            }
          }
        }
        if constexpr (PAIR) {
          fence_proxy_async_all();  // this CTA's and the peer's buffer: generic writes -> wgmma (async proxy)
          if constexpr (FENCE == 1) mbar_arrive_local_cluster(&full[b]);
          else mbar_arrive(&full[b]);
          mbar_arrive_remote(v4_mapa(saddr(&full[b]), peer));  // release.cluster: orders the remote stores
        } else {
          fence_proxy_async();
          mbar_arrive(&full[b]);
        }
        id_cur = id_nxt;
        id_nxt = id_nn;
      }
    }
    if constexpr (PAIR) cluster_sync_any();  // the peer may still arrive on this CTA's barriers
    return;
  }

  // ------------------------------- consumers -------------------------------
  if constexpr (REG == 0) asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
  if constexpr (REG == 1) asm volatile("setmaxnreg.inc.sync.aligned.u32 208;\n" ::: "memory");
  if constexpr (REG == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 216;\n" ::: "memory");
  if constexpr (QE) {  // early Q: the consumers alone copy (and convert) Q, after the register split
    load_q(256);       // (before it, in call 1's build, the QE forms spilled 4 B: ptxas -v)
    named_bar_sync(3, 256);  // every consumer thread's Q chunks are in place
  }
  const int w4 = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
  const int rA = 16 * w4 + g, rB = rA + 8;
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  float m0 = kNegInf, m1 = kNegInf, l0 = 0.f, l1 = 0.f;
  const float sl2 = a.sm_scale * kLog2e;
  // CD: descriptors of k step 0 (buffer 0); a k step / buffer adds (byte offset >> 4) to the low word
  const uint64_t dQ0 = sw128_desc(sb, 16, 1024), dK0 = sw128_desc(sb + kOffKV, 16, 1024);
  const uint64_t dP0 = sw128_desc(sb + kOffP, 16, 1024), dV0 = sw128_desc(sb + kOffKV + wg * 4 * 8192, 8192, 1024);

  for (int j = 0; j < ntiles; ++j) {
    const int b = j & 1;
    if constexpr (PAIR && FENCE == 1) mbar_wait_uniform_cluster(&full[b], (j >> 1) & 1);
    else mbar_wait_uniform(&full[b], (j >> 1) & 1);
    const uint32_t kv = sb + kOffKV + b * kKV;
    float alA, alB;
    if (wg == 0) {
      float s[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) s[i] = 0.f;
      fence_regs(s);
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < 32; ++ks) {
        const uint32_t off = (ks >> 2) * 8192 + (ks & 3) * 32;
        const uint64_t da = CD ? desc_add(dQ0, off >> 4) : sw128_desc(sb + off, 16, 1024);
        const uint64_t db = CD ? desc_add(dK0, (b * kKV + off) >> 4) : sw128_desc(kv + off, 16, 1024);
        if constexpr (F16) fp8k::wgmma_m64n64k16_ss_f16(s, da, db, ks > 0);
        else wgmma_m64n64k16_ss(s, da, db, ks > 0);
      }
      wg_commit();
      wg_wait<0>();
      fence_regs(s);
      float mxA = kNegInf, mxB = kNegInf;
      uint2 fm = make_uint2(0u, 0u);  // CD: the tile's row-valid mask (rows 0..31, 32..63), shifted to this thread's columns
      if constexpr (CD) {
        fm = *reinterpret_cast<const uint2*>(reinterpret_cast<const uint16_t*>(sFlag) + b * 4);
        fm.x >>= 2 * t4;
        fm.y >>= 2 * t4;
      }
#pragma unroll
      for (int jj = 0; jj < 8; ++jj)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const bool v = CD ? (((jj < 4 ? fm.x : fm.y) >> (8 * (jj & 3) + e)) & 1u) != 0 : sFlag[b * 64 + 8 * jj + 2 * t4 + e] != 0;
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
      // a tile of only -1 rows keeps m = -inf: its p are exp2(-inf - -inf) -> guard with the max
      const float bA = mnA == kNegInf ? 0.f : mnA, bB = mnB == kNegInf ? 0.f : mnB;
      alA = (m0 == kNegInf) ? 0.f : fast_exp2(m0 - mnA);
      alB = (m1 == kNegInf) ? 0.f : fast_exp2(m1 - mnB);
      float sumA = 0.f, sumB = 0.f;
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        const float p0 = fast_exp2(s[4 * jj] - bA), p1 = fast_exp2(s[4 * jj + 1] - bA);
        const float p2 = fast_exp2(s[4 * jj + 2] - bB), p3 = fast_exp2(s[4 * jj + 3] - bB);
        sumA += p0 + p1;
        sumB += p2 + p3;
        *reinterpret_cast<uint32_t*>(sP + rA * 128 + ((jj ^ (rA & 7)) << 4) + 4 * t4) = F16 ? pack_f16(p0, p1) : pack_bf16(p0, p1);
        *reinterpret_cast<uint32_t*>(sP + rB * 128 + ((jj ^ (rB & 7)) << 4) + 4 * t4) = F16 ? pack_f16(p2, p3) : pack_bf16(p2, p3);
      }
      l0 = l0 * alA + sumA;
      l1 = l1 * alB + sumB;
      m0 = mnA;
      m1 = mnB;
      if (t4 == 0) {
        sAlpha[rA] = alA;
        sAlpha[rB] = alB;
      }
      fence_proxy_async();
    }
    named_bar_sync(1, 256);  // one bar.sync instruction for both warpgroups (synccheck)
    if (wg == 1) {
      alA = sAlpha[rA];
      alB = sAlpha[rB];
    }
    if (!CD || !__all_sync(0xffffffffu, alA == 1.f && alB == 1.f)) {
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        o[4 * i] *= alA;
        o[4 * i + 1] *= alA;
        o[4 * i + 2] *= alB;
        o[4 * i + 3] *= alB;
      }
    }
    fence_regs(o);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint64_t da = CD ? desc_add(dP0, kk * 2) : sw128_desc(sb + kOffP + kk * 32, 16, 1024);
      const uint64_t db = CD ? desc_add(dV0, (b * kKV + kk * 2048) >> 4) : sw128_desc(kv + wg * 4 * 8192 + kk * 2048, 8192, 1024);
      if constexpr (F16) fp8k::wgmma_m64n256k16_ss_tb_f16(o, da, db, 1);
      else wgmma_m64n256k16_ss_tb(o, da, db, 1);
    }
    wg_commit();
    wg_wait<0>();
    fence_regs(o);
    if constexpr (PAIR) {  // one arrival per warp, on this CTA's and the peer's empty[b]
      __syncwarp();
      if (lane == 0) {
        if constexpr (FENCE == 1) {
          mbar_arrive_local_cluster(&empty[b]);
          mbar_arrive_remote(v4_mapa(saddr(&empty[b]), peer));
        } else {  // the wgmma reads of buffer b are complete (wait_group 0): no data to order
          mbar_arrive(&empty[b]);
          mbar_arrive_remote_plain(v4_mapa(saddr(&empty[b]), peer));
        }
      }
    } else {
      mbar_arrive(&empty[b]);
    }
    named_bar_sync(2, 256);  // both halves of P V done: P and alpha may be overwritten
  }

  if (wg == 0) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    if (t4 == 0) {
      sM[rA] = m0; sM[rB] = m1;
      sL[rA] = l0; sL[rB] = l1;
    }
  }
  named_bar_sync(4, 256);
  m0 = sM[rA]; m1 = sM[rB];
  l0 = sL[rA]; l1 = sL[rB];
  if constexpr (EP) {  // Q (64 KB) and KV buffer 0 (the next 64 KB): no wgmma reads them any more
    wg_store::store_rows_staged(a, o, m0, m1, l0, l1, head0, H, rA, rB, wg, t4, qi, slot, smem, tid, 4);
  } else {
    wg_store::store_rows(a, o, m0, m1, l0, l1, head0, H, rA, rB, wg, t4, qi, slot);
  }
  if constexpr (PAIR) cluster_sync_any();  // the peer's producer / consumers may still touch this CTA's smem
}

}  // namespace
}  // namespace servesim::attn
