// servesim attention kernels: v4_attn_ws_kernel's consumer warpgroups (warpgroups 0 and 1: early Q, S = Q K^T
// on warpgroup 0, online softmax, O += P V split over both, and the epilogue; forms described above the
// kernel in dsv4_attn_ws.cuh).
// NOT a standalone header: a fragment of the kernel's body, included by dsv4_attn_ws.cuh after the
// producer's branch (split out verbatim in the seventeenth session so that no file is over ~500 lines; the
// kernel's locals -- a, smem, sb, sP, sFlag, sAlpha, sM, sL, full, empty, ntiles, tid, wg, lane, load_q,
// ... -- are in scope).
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
