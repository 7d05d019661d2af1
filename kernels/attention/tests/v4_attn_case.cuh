// servesim attention kernel tests: the V4 attention case helpers of test_v4_attn.cu and test_v4_pool.cu
// (both compiled into test_mqa): v4_case (random FP8 rows at the stride the case's form reads), v4_attend_check
// (v4_attn over a given pool against ref_attn on its dequantised rows) and the settings helpers.
#pragma once
#include "attention/dsv4.cuh"
#include "attention/mqa.cuh"
#include "attention/tests/ref_attn.cuh"
#include "attention/tests/test_util.cuh"

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>

namespace servesim::attn::test {
// A pool on the device: `rows` rows at a stride of `rowb` bytes; deq[r * 512 ..] = row r dequantised.
struct V4Pool {
  const uint8_t* p = nullptr;
  int rowb = kV4RowBytes, rows = 0;
  const std::vector<double>* deq = nullptr;
};
struct V4Check {
  double err = 0;
  int n_slots = 0;   // the plan's split slots (0: no query split)
  bool ep = false;   // the launch ran the staged epilogue (one-CTA F16 + QE + CD form; with ST only on 592-B rows)
  std::string form;  // the form's flags as the report line prints them, e.g. " f16 qe cd st ep v16"
};

// mode 0: mqa_make_plan (forced split if force_split > 0); 1: v4_attn_plan (the wgmma kernel's
// own plan; mla_decode_plan before the nineteenth session); 2: the mma.sync kernel (variant 1) at any H; 3: the
// warp-specialised kernel (variant 3) with v4_attn_plan; 4: variant 3 with mqa_make_plan (forced split if
// force_split > 0); 5: the second session's wgmma kernel (variant 2) with v4_attn_plan; 6: variant 0 with an unsplit plan
// (mqa_make_plan with min_split_rows INT_MAX: one work item per query). Variant 0 (modes 0, 1, 6) =
// variant 3. Rows 128..191 of lists of >= 256 rows are all -1 (a whole masked 64-row tile), and every
// 37th row from row 5.
inline int v4_mode_variant(int mode) { return mode == 2 ? 1 : mode == 5 ? 2 : (mode >= 3 && mode <= 4) ? 3 : 0; }

// v4_attn over `pool` (MqaArgs::pool_row_bytes = pool.rowb) with random indices into it and random q, against
// ref_attn on the dequantised rows.
inline V4Check v4_attend_check(int H, const std::vector<int>& nrows, int force_split, bool with_sink, int mode, const V4Pool& pool,
                        const char* tag = "") {
  const int D = 512;
  const int nq = static_cast<int>(nrows.size());
  const int ld = *std::max_element(nrows.begin(), nrows.end());
  const int variant = v4_mode_variant(mode);
  std::vector<double> qd;
  auto q = rand_bf16(static_cast<size_t>(nq) * H * D, -0.3f, 0.3f, &qd);
  std::uniform_int_distribution<int> pick(0, pool.rows - 1);
  std::vector<int> idx(static_cast<size_t>(nq) * ld, -1);
  for (int i = 0; i < nq; ++i)
    for (int r = 0; r < nrows[i]; ++r)
      idx[static_cast<size_t>(i) * ld + r] = (r % 37 == 5 || (nrows[i] >= 256 && r >= 128 && r < 192)) ? -1 : pick(rng());
  auto sink = rand_f32(H, -2, 2);
  DevBuf<bf16> dq, dout;
  DevBuf<int> didx;
  DevBuf<float> dsink, dlse, opart, lpart;
  dq.upload(q); didx.upload(idx); dsink.upload(sink);
  dout.alloc(static_cast<size_t>(nq) * H * D);
  dlse.alloc(static_cast<size_t>(nq) * H);
  poison(dout.p, dout.n);
  MqaPlan plan = (mode == 1 || mode == 3 || mode == 5) ? v4_attn_plan(nrows, H)
                 : mode == 6                          ? mqa_make_plan(nrows, 0, INT_MAX)
                                                      : mqa_make_plan(nrows, 0, 256, force_split);
  opart.alloc(std::max<size_t>(1, mqa_part_floats(plan, H)));
  lpart.alloc(std::max<size_t>(1, mqa_lse_floats(plan, H)));
  MqaArgs a;
  a.q = dq.p; a.nq = nq; a.H = H; a.pool = pool.p; a.pool_row_bytes = pool.rowb; a.indices = didx.p; a.idx_ld = ld;
  a.sink = with_sink ? dsink.p : nullptr; a.sm_scale = 1.0f / std::sqrt(512.0f);
  a.out = dout.p; a.lse = dlse.p; a.o_part = opart.p; a.lse_part = lpart.p;
  v4_attn_set_variant(variant);
  v4_attn(a, plan);
  v4_attn_set_variant(0);
  SS_CUDA(cudaDeviceSynchronize());
  auto got = to_double(dout.download());
  std::vector<double> ref(got.size());
  for (int i = 0; i < nq; ++i) {
    std::vector<const double*> keys;
    for (int r = 0; r < nrows[i]; ++r) {
      const int id = idx[static_cast<size_t>(i) * ld + r];
      if (id >= 0) keys.push_back(&(*pool.deq)[static_cast<size_t>(id) * D]);
    }
    ref_attn(&qd[static_cast<size_t>(i) * H * D], H, D, keys, D, a.sm_scale, with_sink ? sink.data() : nullptr,
             &ref[static_cast<size_t>(i) * H * D], nullptr);
  }
  V4Check c;
  c.err = rel_err(got, ref);
  c.n_slots = plan.n_slots;
  char name[160];
  v4_attn_set_variant(variant);
  const bool ws1 = v4_attn_config(H) == std::string("wgmma_ws_m64_tn64") && !v4_attn_ws_uses_pair(H);  // the one-CTA kernel
  const bool fqc = ws1 && v4_attn_ws_uses_f16(ld) && v4_attn_ws_uses_qe() && v4_attn_ws_uses_cd();
  c.ep = fqc && (!v4_attn_ws_uses_st() || pool.rowb != kV4RowBytes) && v4_attn_ws_uses_ep(plan.n_slots > 0);  // ST: EP with V16 only
  c.form = std::string(variant == 3 && v4_attn_ws_uses_pair(H) ? " pair" : "") + (ws1 && v4_attn_ws_uses_f16(ld) ? " f16" : "") +
           (ws1 && v4_attn_ws_uses_qe() ? " qe" : "") + (ws1 && v4_attn_ws_uses_qe() && v4_attn_ws_uses_cd() ? " cd" : "") +
           (fqc && v4_attn_ws_uses_st() ? " st" : "") + (c.ep ? " ep" : "") + (pool.rowb != kV4RowBytes ? " v16" : "");
  std::snprintf(name, sizeof name, "v4_attn out (H=%d nq=%d split=%d sink=%d mode=%d %s%s)%s", H, nq, force_split, with_sink, mode,
                v4_attn_config(H), c.form.c_str(), tag);
  v4_attn_set_variant(0);
  report(name, c.err, 1e-2);
  EXPECT_LT(c.err, 1e-2);
  return c;
}

// Random rows from fill_v4_rows, stored at the stride v4_attn_pool_row_bytes gives for the case's form: 584,
// or 592 (V16) with the 8 pad bytes (and the 584-B row's unused last byte) 0xA5.
inline V4Check v4_case(int H, const std::vector<int>& nrows, int force_split, bool with_sink, int mode = 0, const char* tag = "") {
  const int D = 512, pool_rows = 6000;
  const int ld = *std::max_element(nrows.begin(), nrows.end());
  v4_attn_set_variant(v4_mode_variant(mode));
  const int rowb = v4_attn_pool_row_bytes(H, ld);  // 592 in the V16 form (V4WS_V16), else 584
  v4_attn_set_variant(0);
  DevBuf<uint8_t> pool(static_cast<size_t>(pool_rows) * kV4RowBytes);
  fill_v4_rows(pool.p, pool_rows, rng()());
  SS_CUDA(cudaDeviceSynchronize());
  const std::vector<uint8_t> hp = pool.download();
  DevBuf<uint8_t> pool16;
  if (rowb != kV4RowBytes) {
    std::vector<uint8_t> h16(static_cast<size_t>(pool_rows) * rowb, 0xA5);
    for (int r = 0; r < pool_rows; ++r)
      std::memcpy(&h16[static_cast<size_t>(r) * rowb], &hp[static_cast<size_t>(r) * kV4RowBytes], kV4RowBytes - 1);
    pool16.upload(h16);
  }
  std::vector<double> deq(static_cast<size_t>(pool_rows) * D);
  for (int r = 0; r < pool_rows; ++r) v4_row_dequant_host(&hp[static_cast<size_t>(r) * kV4RowBytes], &deq[static_cast<size_t>(r) * D]);
  V4Pool p;
  p.p = rowb != kV4RowBytes ? pool16.p : pool.p;
  p.rowb = rowb;
  p.rows = pool_rows;
  p.deq = &deq;
  return v4_attend_check(H, nrows, force_split, with_sink, mode, p, tag);
}

// 16-B gathers from 592-B pool rows (V4WS_V16, sixteenth session): every setting of the V16 form explicit.
inline void v16_forms(bool on) {
  v4_attn_ws_set_pair(on ? 0 : -1);
  v4_attn_ws_set_f16(on ? 1 : -1);
  v4_attn_ws_set_qe(on ? 1 : -1);
  v4_attn_ws_set_cd(on ? 1 : -1);
  v4_attn_ws_set_st(on ? 0 : -1);
  v4_attn_ws_set_v16(on ? 1 : -1);
}
// Every v4_attn / v4_attn_ws setting back to its default (-1: env unset in the test runs).
inline void v4_defaults() {
  v4_attn_set_variant(0);
  v4_attn_ws_set_pair(-1);
  v4_attn_ws_set_f16(-1);
  v4_attn_ws_set_qe(-1);
  v4_attn_ws_set_cd(-1);
  v4_attn_ws_set_st(-1);
  v4_attn_ws_set_ep(-1);
  v4_attn_ws_set_v16(-1);
}

}  // namespace servesim::attn::test
