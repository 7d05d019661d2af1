// servesim attention kernels: multi-query attention over a list of KV rows with one shared KV
// head (model-facts.md 2.2-2.4, 3.1):
//   * K3 gated-MLA absorbed decode: q_lat [B, 96, 576] bf16 over a paged BF16 latent cache
//     (576 values per token, page size 64); K = all 576, V = the first 512; scale 1/sqrt(192).
//   * DeepSeek V4 CSA sparse attention (top-k compressed rows + window rows), HCA attention (all
//     compressed rows + window) and window-only attention: q [nq, H, 512] bf16 over rows gathered
//     by index from an FP8 pool of 584-B rows (attn_common.cuh) dequantised to BF16, K = V = 512,
//     with the per-head attention sink; scale 1/sqrt(512). Prefill is the same op with one query
//     token per list (FlashMLA sparse prefill style).
// Output: out [nq, H, 512] bf16 normalised; lse [nq, H] natural-log (optional).
// Flash-decoding: rows of a query are split into work items (mqa_make_plan); items of queries with
// several splits write fp32 partials that mqa_combine merges (with the sink).
// Errors: std::invalid_argument for unsupported head counts or missing pointers.
#pragma once
#include "attention/attn_common.cuh"

#include <vector>

namespace servesim::attn {

struct MqaPlan {
  int n_work = 0, n_slots = 0, nq = 0;
  DevBuf<int4> work;          // (query, row_begin, row_end, slot or -1 for a direct write)
  DevBuf<int> q_slot_begin;   // [nq+1]
};
/// Splits each query's `rows[q]` rows into work items so that about `target_items` items exist
/// per head group (default 2 per SM), at least `min_split_rows` rows per split (unless
/// `force_split_rows` > 0, used by the tests to exercise the split path). Host metadata.
MqaPlan mqa_make_plan(const std::vector<int>& rows, int target_items = 0, int min_split_rows = 256,
                      int force_split_rows = 0);
/// Work split for mla_decode variant 0 (one 256-thread CTA per SM, heads in groups of 64): with
/// W = SMs / ceil(H/64) CTAs of a head group per wave and t_q = ceil(rows[q]/64) tiles, it picks the
/// tiles per item `per` (over per = max(4, ceil(max_q t_q / s)), s = 1, 2, ...) minimising
/// ceil(sum_q ceil(t_q/per) / W) * (per + 2), i.e. whole waves of items of about equal length;
/// each query is cut into ceil(t_q/per) equal parts (multiples of 64 rows). Host metadata.
MqaPlan mla_decode_plan(const std::vector<int>& rows, int H);
/// The split of mla_decode_plan / v4_attn_plan (host only, no CUDA call): tiles (64 rows) per work item for `rows`
/// at H heads on `sms` SMs; a query of t tiles is cut into ceil(t / per) equal parts, so a result >= the longest
/// query's tiles splits no query. rule 0: the wave cost above (mla_decode_plan's rule). rule 1: rule 0, then, where
/// it splits, no split if a list schedule of the unsplit items (longest first, each to the CTA slot free first, W
/// slots, an item costing its tiles + 2) ends no later than that of rule 0's items: a prefill chunk's causal ramp
/// (prefix 0) is not split; lists of equal length (decode batches) keep rule 0's split. Other rules throw
/// std::invalid_argument.
long mla_decode_plan_tiles(const std::vector<int>& rows, int H, int sms, int rule);
/// The plan of the V4 attention kernels (v4_attn, variants 2 / 3; issue 12, nineteenth session, helper v4p):
/// mla_decode_plan's split under v4_attn_plan_rule() -- rule 1 by default (the nineteenth session: 1.44-1.84x at the
/// CSA prefill chunks at prefix 0 that rule 0 split, the same plan elsewhere; kernels/attention/NOTES.md). Set by
/// v4_attn_plan_set_rule (-1: env SERVESIM_V4_PLAN_RULE, unset = 1; 0; 1; std::invalid_argument otherwise).
/// K3 MLA decode (mla_decode, mla_decode_fp8) keeps mla_decode_plan (rule 0).
MqaPlan v4_attn_plan(const std::vector<int>& rows, int H);
void v4_attn_plan_set_rule(int rule);
int v4_attn_plan_rule();
/// Partial-output scratch sizes the caller must provide for a plan.
inline size_t mqa_part_floats(const MqaPlan& p, int H, int DV = 512) { return static_cast<size_t>(p.n_slots) * H * DV; }
inline size_t mqa_lse_floats(const MqaPlan& p, int H) { return static_cast<size_t>(p.n_slots) * H; }

struct MqaArgs {
  const bf16* q = nullptr;  // [nq, H, DK]
  int nq = 0, H = 0;
  // K3 paged BF16 latent cache
  const bf16* cache = nullptr;       // [pages, page_size, 576]
  const int* block_table = nullptr;  // [nq, max_pages]
  int max_pages = 0, page_size = 64;
  long cache_pages = 0;              // pages in `cache` (bounds of the TMA view; 0 = not given)
  // V4 FP8 row pool
  const uint8_t* pool = nullptr;  // [rows, pool_row_bytes]: the 584-B row of attn_common.cuh at that stride
  // Bytes per pool row (the row stride) as the caller allocated it: it must equal
  // v4_attn_pool_row_bytes(H, idx_ld) (dsv4.cuh: 592 where the V16 form runs, else 584), else v4_attn /
  // v4_attn_ws throw std::invalid_argument naming both sizes before any CUDA call. 0 = not stated: read
  // as 584 (kV4RowBytes), so a caller that predates the field and the V16 default fails loudly.
  int pool_row_bytes = 0;
  const int* indices = nullptr;   // [nq, idx_ld], -1 = no row
  int idx_ld = 0;
  const float* sink = nullptr;  // [H] natural-log sink logits, or null
  float sm_scale = 0.f;
  bf16* out = nullptr;   // [nq, H, 512]
  float* lse = nullptr;  // [nq, H] or null
  float* o_part = nullptr;    // [n_slots, H, 512]
  float* lse_part = nullptr;  // [n_slots, H]
};

/// K3 MLA absorbed decode, any H (heads per GPU = 96/TP).
/// variant 0 (default): sm_90a kernel, one CTA per (64-head group, work item), two warpgroups:
///   TMA loads of whole 64-token pages into 128-B swizzled smem (2 stages), S = Q K^T on wgmma
///   (warpgroup 0), online softmax, O += P V on wgmma (each warpgroup 256 of the 512 columns);
///   needs page_size % 64 == 0 (else falls back to variant 2). The last head group is padded.
/// variant 3: the same with 32-token tiles in 4 stages; warpgroup 0 issues S(j+1) before P V(j) and
///   runs softmax(j+1) while P V(j) is on the tensor pipe (same plan, page_size % 64 == 0).
/// variant 4: "seesaw": tiles in pairs, S of the even tile on warpgroup 0 and of the odd one on
///   warpgroup 1 at once, each warpgroup's softmax overlapping the other's GEMMs, P over the RoPE
///   column block of its own stage, per-column-block mbarriers and per-half stage release (same
///   plan, page_size % 64 == 0; mqa.cu wgs namespace). Measured 1.00-1.06x variant 0 at 128 heads,
///   0.96-1.00x below (NOTES.md, issue 12 fourth session): not the default.
/// variant 5: variant 4 with both P0 V0 halves issued right after softmax 0 (K0 released early);
///   no faster than variant 0 (same notes).
/// variant 10 (issue 12, tenth session; NOTES.md; same plan, page_size % 64 == 0): variant 4 with S1 over
///   K1's column blocks 4-7, 0-3, 8 and each warpgroup's own P from registers (RS wgmma): 1.04-1.11x
///   variant 0 at 128 heads (486 TF/s at 512 x 4K in the lead's table call).
/// variants 11 / 12 (issue 12, eleventh session; same plan): variant 10 with the cheaper softmax (raw-S
///   max, one FFMA per exponential, masking only in a partial tile), O rescales skipped when a warp's
///   factors are all 1, and S1 issued only after warpgroup 0 has issued all of S0 (11) or S0's column
///   blocks 0-3 (12). Variant 12 is 1.06x variant 10 at the 128-head median (494 TF/s at 512 x 4K),
///   1.02-1.07x at 16-96 heads, and is the kernel of costmodels/data/h200/mla_decode.json (bench_attn's
///   default); variant 11 is 1.05x at the 128-head median but 0.93x at 512 x 4K (an experiment).
///   This API's default stays 0.
/// variant 13 (issue 12, twenty-fourth session, helper mla128c; same plan, page_size % 64 == 0; NOTES.md):
///   variant 12 with P0 in its own 8-KB shared-memory buffer (K0's block 8 refilled with blocks 0-3) and
///   warpgroup 1's P0 V0R issued before softmax 1 (O_R = c1 (c0 O_R + P0 V0R) + P1 V1R), so K0's blocks
///   4-7 go back to TMA right after softmax 1. Opt-in: measured slower than 12 (same run, H=128 median
///   0.905x, 0.86-1.06x per point; 0.90-0.97x at 32-96 heads): warpgroup 1 must wait for P0 V0R (queued
///   behind P0 V0L) before it may rescale O_R by c1 and issue P1 V1R, which delays P1 for warpgroup 0.
/// variant 14 (issue 12, twenty-fourth session, helper mla128d; same plan, page_size % 64 == 0; NOTES.md):
///   variant 12's schedule unchanged, only c1 P0 stored into its own 8-KB shared-memory buffer instead of
///   over K0's column block 8, so block 8 goes back to TMA with blocks 0-3 (after P0 V0L). Opt-in.
/// variant 15 (same session, helper mla128d; same plan, page_size % 64 == 0; NOTES.md): variant 13 with
///   lazy rescaling (the running max moves only by > 8 in log2 units) and P1 V1R chained right behind
///   P0 V0R unless a row of warpgroup 1 rescales (one bar.red.or vote per pair). Opt-in.
/// variants 6-9 (the tenth session's 2-CTA multicast, S1 reorder, L2 prefetch and block-table-ahead
///   experiments, all no faster than 10) were removed in the eleventh session: std::invalid_argument.
///   SERVESIM_MLA_NOLOAD=1 makes variant 4 skip the page loads after tiles 0 and 1 (timing
///   diagnostic only: wrong results).
/// variant 1 / 2: the earlier mma.sync kernel with 32-row / 64-row tiles (heads in groups of 48,
///   32 or 16; variant 1 needs H % 48 == 0, else it runs variant 2's configuration).
void mla_decode(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s = 0, int variant = 0);
/// V4 attention over FP8 rows chosen by `indices`, any H (groups of 64, 32 or 16, last padded).
/// H % 64 == 0 and variant 0 (default) = variant 3: the warp-specialised sm_90a kernel v4_attn_ws
/// (dsv4.cuh; issue 12, seventh session). Variant 2: the second session's sm_90a kernel (the MLA
/// decode wgmma structure: 64-head groups, S and P V on wgmma, rows gathered by cp.async and
/// dequantised into the swizzled BF16 tile by all threads between the GEMMs). v4_attn_plan(rows, H)
/// is the wave-balanced plan of both (any plan works). Otherwise (or variant 1) the mma.sync kernel.
void v4_attn(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s = 0);
void v4_attn_set_variant(int v);
bool v4_attn_uses_wgmma(int H);
/// Merges the fp32 partials of a split plan into out / lse (the combine step of mla_decode and
/// v4_attn; no-op for a plan without splits). Used by mla_decode_fp8 (mla_fp8.cuh).
void mla_combine(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s = 0);
/// Name of the kernel configuration the two calls above use for H heads (for the tables).
const char* mla_decode_config(int H, int variant = 0);
const char* v4_attn_config(int H);

}  // namespace servesim::attn
