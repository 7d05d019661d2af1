// servesim attention kernels: v4_attn_ws_kernel's producer warpgroup (warpgroup 2: index pipeline, gathers
// into the KV buffers, E4M3 -> BF16 / FP16 conversion, full / empty handshake; the forms DBG / REG / PAIR /
// FENCE / F16 / ST / V16 are described above the kernel in dsv4_attn_ws.cuh).
// NOT a standalone header: a fragment of the kernel's body, included by dsv4_attn_ws.cuh inside
// `if (wg >= 2) { ... }` (split out verbatim in the seventeenth session so that no file is over ~500 lines;
// the kernel's locals -- a, smem, sb, full, empty, rb, re, qi, ntiles, tid, lane, ... -- are in scope).
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
      // V16 (seventeenth session, helper v4i): 592-B pool rows, 16-B copies, staging rows at a 640-B stride
      constexpr int kSO = V16 ? kOffStg16 : kOffStg, kSR = V16 ? kStgRow16 : kStgRow;
      const uint32_t stw = sb + kSO + pw * 8 * kSR;  // this warp's 8 staging rows
      const uint8_t* stl = smem + kSO + (pw * 8 + di8) * kSR;  // the lane's staged row
      // rows 0..7 of a tile (indices: lanes 0..7 of ids) -> staging, the row's 584 (V16: 592) B contiguous
      auto stage = [&](int ids) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const int id = __shfl_sync(0xffffffffu, ids, i);
          const bool ok = id >= 0;
          if constexpr (V16) {  // lane l: bytes 16 l ..; lanes 0..4 also 512 + 16 l .. (lane 4: scales + pad)
            const uint32_t sz = ok ? 16u : 0u;
            const uint8_t* src = a.pool + static_cast<size_t>(ok ? id : 0) * kRowB + lane * 16;
            const uint32_t d = stw + i * kSR + lane * 16;
            cp_async16_s(d, src, sz);
            cp_async16_sp(lane <= 4, d + 512, src + 512, sz);
          } else {
            const uint32_t sz = ok ? 8u : 0u;
            const uint8_t* src = a.pool + static_cast<size_t>(ok ? id : 0) * kV4RowBytes + lane * 8;
            const uint32_t d = stw + i * kSR + lane * 8;
            cp_async8_s(d, src, sz);
            cp_async8_s(d + 256, src + 256, sz);
            cp_async8_sp(lane <= 8, d + 512, src + 512, sz);
          }
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
        uint8_t* scb = V16 ? smem + kOffSc16 + b * 1024 : sSc + b * 512;
        const uint32_t kvs = sb + kOffKV + b * kKV, scs = sb + kOffSc + b * 512;
        // rows 8..15 in place (as the two-stage form; V16: its 16-B issue, destinations as there)
        if constexpr (V16) {
          const uint32_t t1 = v16_b1 + b * kKV, t2 = v16_b2 + b * v16_bs2;
#pragma unroll
          for (int i = 8; i < 16; ++i) {
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
        for (int i = 8; i < (V16 ? 8 : 16); ++i) {
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
            prefetch_l2(a.pool + static_cast<size_t>(id) * kRowB + (part == 5 ? kRowB - 1 : part * 128));
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
          convert(kvb, dr, kvb + wreg + (8 + di8) * 64 + 16 * dh8, 8192u, scb + dr * kScS);
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
