// servesim attention kernels: DeepSeek V4 compressor, lightning indexer and top-k
// (model-facts.md 1.2, 2.3, 2.4, 3.1; compressor math from the community copy of the official
// inference model.py: overlap_transform, per-channel softmax pooling, RMSNorm, RoPE, FP8 quant).
//
// Compressor (ratio R = 4 with overlap, or R = 128 without), head dim D = 512 (main KV) or 128
// (indexer keys). kv, score [rows, coff*D] bf16 (outputs of the wkv / wgate projections, coff = 2
// when R == 4 else 1); ape [R, coff*D] fp32; norm_w [D] fp32. Entry e pools the R rows starting
// at row entries[e].x (its own group, second half of the features when coff = 2) and, when R == 4
// and its position entries[e].y >= R, the R rows before (first half): per channel softmax over
// (score + ape) of those rows, weighted sum of kv; then RMSNorm(D) * norm_w, RoPE (GPT-J
// interleaved, theta 160000) on the last 64 dims at the entry's position, then
//   D = 512: FP8 row of 584 B (attn_common.cuh) with UE8M0 scales 2^ceil(log2(amax/448)) per 64, stored
//            at a stride of CompressorArgs::out_row_bytes (584 by default; 592 for the V16 attention form);
//   D = 128: 128-point Walsh-Hadamard rotation (/sqrt(128)), E4M3 with one fp32 scale amax/448.
//
// Indexer: logits[i, j] = sum_h w[i, h] * ReLU(s_j * q[i, h, :] . k[j, :]) for j < key_len[i]
// (q, k E4M3; w fp32 folds the q scales and 1/sqrt(128)); 64 heads x 128. Top-k: indices of the
// `topk` largest logits of each row (unordered), -1 padded when key_len < topk.
// Errors: std::invalid_argument on unsupported shapes.
#pragma once
#include "attention/attn_common.cuh"
#include "attention/mqa.cuh"

namespace servesim::attn {

struct CompressorArgs {
  const bf16* kv = nullptr;
  const bf16* score = nullptr;
  const float* ape = nullptr;
  const float* norm_w = nullptr;
  const int2* entries = nullptr;  // [n] (first row of the entry's own group, position of that row)
  int n = 0;
  uint8_t* out = nullptr;    // D=512: [n, out_row_bytes]; D=128: [n, 128] E4M3
  float* out_scale = nullptr;  // D=128: [n]
  // D=512 only: bytes between consecutive output rows (the KV pool's row stride), >= 584 and a multiple of
  // 8 (std::invalid_argument otherwise). Each row is the 584-B row of attn_common.cuh (byte 583 = 0), the
  // bytes 584..out_row_bytes-1 are written 0. Default 584 (kV4RowBytes). A pool that v4_attn reads states
  // v4_attn_pool_row_bytes(H, idx_ld) here (592 under the default V16 form) and in MqaArgs::pool_row_bytes.
  int out_row_bytes = kV4RowBytes;
  float rope_theta = 160000.f;
  float eps = 1e-6f;
};
/// ratio 4 or 128; head_dim 512 or 128 (128 only with ratio 4: the CSA indexer keys).
void v4_compress(const CompressorArgs& a, int ratio, int head_dim, cudaStream_t s = 0);

constexpr int kIdxHeads = 64;
struct IndexerArgs {
  const uint8_t* q = nullptr;      // [nq, 64, 128] E4M3
  const float* w = nullptr;        // [nq, 64]
  const uint8_t* keys = nullptr;   // [nk, 128] E4M3
  const float* kscale = nullptr;   // [nk]
  const int* key_begin = nullptr;  // [nq] first key row seen by query i
  const int* key_len = nullptr;    // [nq] keys seen by query i
  float* logits = nullptr;         // [nq, ld]; columns >= key_len[i] are not written
  int nq = 0, ld = 0, max_len = 0;
  long nkeys = 0;                  // rows of keys / kscale (> 0 selects the sm_90a wgmma kernel)
};
/// Default (issue 12): FP8 wgmma + TMA kernel, CTA = (chunk of v4_indexer_chunk keys, query); with
/// nkeys == 0 or variant 1 the issue-3 mma.sync kernel.
void v4_indexer_logits(const IndexerArgs& a, cudaStream_t s = 0);
int v4_indexer_chunk(int nq, int max_len);

/// idx [nq, topk] int32 from logits [nq, ld] fp32 with row lengths len [nq] (each <= max_len, <= ld): the positions
/// of the topk largest logits of each row, unordered (ties: any of the equal keys); rows with len <= topk get
/// 0..len-1 then -1. Default (seventeenth session), topk <= 2048 and (nq >= 192 or max_len >= 49152): the one-read
/// threshold filter (topk_filter_kernel, dsv4_topk_filter.cuh: a cluster of v4_topk_filter_cluster CTAs per row, a
/// sample-chosen threshold, candidates in shared memory, exact select over them; falls back to an exact select over
/// the row). Elsewhere, or variants 1-3: the one-CTA radix kernel (issue 3; or the radix cluster kernel). The
/// shared-memory row select (topk_row_kernel, dsv4_topk_row.cuh: one CTA of 512 threads per row, the row read once
/// into shared memory, a linear first digit, exact digits over that bin's keys): by default (twenty-third session)
/// the sparse form of its lean form (topk_row_sparse_kernel, dsv4_topk_row_lean.cuh) for topk <= 2048 and
/// 1024 <= max_len <= 32768 at nq <= 132, 2048 <= max_len <= 12288 at nq <= 264, 6144 <= max_len <= 12288 at nq <= 512
/// (where it measured faster); variant 6 runs form 3 (topk_row_kernel), variant 7 the lean form (topk_row_lean_kernel)
/// and variant 8 the sparse form wherever topk <= 2048 and 0 < max_len <= 32768. max_len = 0 (unknown) runs the
/// filter with one CTA per row when nq >= 192, else the one-CTA radix kernel.
/// max_len is in logits per row (0 = unknown); every len[i] should be <= max_len (not checked on the device). The
/// threshold filter reads a longer row whole (the last CTA of its cluster scans up to len[i]; max_len only sets the
/// cluster size and the chunks); the row select reads a longer row from device memory on every pass (correct, slow);
/// the radix cluster kernel (variants 2 / 3) does not read such a row's tail. Throws std::invalid_argument when
/// topk <= 0, or when a cluster kernel (the filter, or variants 2/3's radix cluster) would run with nq > 65,535 rows
/// (its grid's y limit: split the call); CUDA errors
/// as std::runtime_error (SS_CUDA).
void v4_topk(const float* logits, int ld, const int* len, int nq, int topk, int* idx, cudaStream_t s = 0, int max_len = 0);
/// CTAs per row (1..8) of the v4 radix cluster kernel (variant 2/3), 0 when max_len > 8 x 32768.
int v4_topk_cluster_size(int nq, int max_len);
bool v4_topk_uses_cluster(int nq, int max_len);
/// CTAs per row (1, 2, 4, 8) of the threshold filter, and whether v4_topk runs it for this shape (max_len in logits
/// per row, 0 = unknown).
int v4_topk_filter_cluster(int nq, int max_len);
bool v4_topk_uses_filter(int nq, int max_len, int topk);
/// Whether v4_topk runs the shared-memory row select for this shape: under variant 0 (the default, sparse form) for
/// topk <= 2048 and 1024 <= max_len <= 32768 with nq <= 132, or 2048 <= max_len <= 12288 with nq <= 264, or
/// 6144 <= max_len <= 12288 with nq <= 512; under variants 6 (form 3), 7 (lean form) and 8 (sparse form) for topk <= 2048 and
/// 0 < max_len <= 32768 logits per row (any nq); never under the others. Host-only (no CUDA call); throws nothing.
bool v4_topk_uses_row(int nq, int max_len, int topk);
/// Whether that row select is the lean form (topk_row_lean_kernel, dsv4_topk_row_lean.cuh, twenty-second session):
/// under variant 7 (opt-in) wherever v4_topk_uses_row; never under the others (the default runs the sparse form). Host-only.
bool v4_topk_uses_row_lean(int nq, int max_len, int topk);
/// Whether v4_topk runs the sparse form of the lean row select (topk_row_sparse_kernel, twenty-third session): under
/// variant 0 (the default) wherever v4_topk_uses_row, and variant 8 wherever variants 6 / 7 run theirs (topk <= 2048,
/// 0 < max_len <= 32768).
bool v4_topk_uses_row_sparse(int nq, int max_len, int topk);
/// Variant 8's placement bound: per warp and 128 keys, up to smax flagged keys of a kind are placed by a warp-uniform
/// loop, more by ballot ranks (default 0 = always ranks: the loop measured slower, tk4 call 1).
void v4_topk_set_sparse_max(int smax);
/// The kernel v4_topk runs for a shape: "radix_row_sparse", "radix_row_lean", "radix_row_smem", "threshold_filter", "radix_cluster_smem" or "radix_1cta".
const char* v4_topk_kernel_name(int nq, int max_len, int topk);

/// Kernel choice (bench, tests): indexer 0 = wgmma (default), 1 = the issue-3 kernel; top-k 0 = the default (v4_topk:
/// threshold filter / one-CTA radix / the sparse form of the lean row select in its region); 1 = always the one-CTA radix kernel;
/// 2 = always the radix cluster kernel (where max_len allows); 3 = the default before the seventeenth session
/// (cluster kernel for batch <= 16 x rows >= 98304 and batch >= 256 x rows <= 12288, else one-CTA);
/// 4 = the threshold filter at every shape with topk <= 2048; 5 = the seventeenth session's default (filter / one-CTA
/// radix, never the row select; the comparison baseline of run_tkm.sh); 6 = the row select wherever topk <= 2048 and
/// 0 < max_len <= 32768, else as 5; 7 = as 6 with the lean row select (topk_row_lean_kernel); 8 = as 7 with its
/// sparse form (topk_row_sparse_kernel, twenty-third session).
/// Throws std::invalid_argument outside indexer 0..1 / top-k 0..8.
void v4_set_variants(int indexer_variant, int topk_variant);
const char* v4_indexer_variant_name();
const char* v4_topk_variant_name();

/// V4 CSA/HCA/window attention, warp-specialised sm_90a kernel (issue 12, seventh session; v4_attn
/// variant 3): same arguments, plans (v4_attn_plan, or any mqa plan) and partial buffers as v4_attn; H % 64 == 0.
/// 384 threads per (64-head group, work item): a producer warpgroup gathers each 64-row tile into a
/// BF16 KV buffer and dequantises it there (two buffers) while two consumer warpgroups run S = Q K^T,
/// the online softmax and O += P V on wgmma for the previous tile. dsv4_attn_ws.cuh and
/// dsv4_attn_ws_helpers.cuh (parts of dsv4.cu) have the details.
void v4_attn_ws(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s = 0);
/// At H % 128 == 0 the two 64-head groups of a work item run as a 2-CTA cluster whose producers
/// each gather and convert half of every tile into both CTAs (issue 12, twelfth session). pair 0 =
/// off (the one-CTA kernel everywhere), 1 = on; default from env V4WS_PAIR (unset = 0: the pair
/// kernel is correct but measured 1.16x slower, NOTES "twelfth session").
void v4_attn_ws_set_pair(int pair);
bool v4_attn_ws_uses_pair(int H);
/// Operand type of the in-place one-CTA kernel (issue 12, thirteenth session, helper v4c): f16 1 =
/// Q, K and P in FP16 (E4M3 dequantised by cvt.rn.f16x2.e4m3x2 + one f16x2 multiply by the UE8M0
/// scale; both wgmma f16; exact for scales 2^-15 .. 2^7, i.e. per-64 amax <= 57344), 0 = BF16 (the
/// twelfth session's kernel), 2 = the thirteenth session's rule (F16 when idx_ld > 256), -1 = the
/// default: F16 on every list since the fourteenth session (helper v4d: with the early-Q start it is
/// faster than BF16 on short lists too). Not used by the pair form. Default from env V4WS_F16
/// (unset = -1).
/// F16 contract (the caller's guarantee): every 64-value E4M3 block of the pool rows that the
/// indices reach has a UE8M0 scale byte s <= 134 (scale <= 2^7, block amax <= 448 x 2^7 = 57344);
/// the compressor's RMS-normed rows satisfy it. Then the dequantised K is exact for s in 112..134
/// (below 112 low bits are lost to FP16 subnormals, below 89 the block flushes to zero). Not checked
/// at run time. Otherwise: for s in 135..142 every value whose magnitude exceeds 65504 after scaling
/// becomes +-inf in FP16 (mul.rn.f16x2), and s > 142 is clamped to 2^15 (min(s, 142) in the kernel),
/// so the block is scaled by 2^(142 - s) too little; either way the scores and outputs of the affected
/// queries are wrong (inf / NaN through the softmax), without an error. Q and the BF16 RoPE part are
/// converted BF16 -> FP16: |values| must stay below 65504 (they overflow to inf otherwise) and
/// values below 2^-14 lose bits. A caller that cannot guarantee this sets v4_attn_ws_set_f16(0)
/// (or V4WS_F16=0): the BF16 form has FP32's exponent range (two multiplies for s > 134).
///
/// Settings of v4_attn_ws (forms: pair > F16 > BF16): V4WS_PAIR / set_pair(1) takes the pair kernel
/// where H % 128 == 0 (the F16 setting is then not applied); otherwise F16 as set above. The
/// experiment variables V4WS_DEBUG (0-3), V4WS_REG (0-2, default 1) and V4WS_FENCE (0-1, pair only)
/// are never silently dropped: v4_attn_ws throws std::invalid_argument naming the variables when
/// a setting is out of range or the chosen form ignores it -- V4WS_PAIR=1 (at H % 128 == 0) with
/// V4WS_F16=1 / set_f16(1); V4WS_FENCE=1 without the pair kernel or with V4WS_DEBUG; V4WS_REG != 1
/// with V4WS_DEBUG, V4WS_FENCE=1 or the F16 form (the default); V4WS_DEBUG=3 outside the F16 form;
/// and the explicit QE / CD settings below where the form lacks them.
void v4_attn_ws_set_f16(int f16);
bool v4_attn_ws_uses_f16(int idx_ld);
/// Start order of the one-CTA kernel (issue 12, fourteenth session, helper v4d): qe 1 = "early Q"
/// (the producer gathers tile 0 while the consumer warpgroups alone copy -- and in the F16 form
/// convert -- the Q tile), 0 = Q first by all threads, then the pipeline (before the fourteenth
/// session), -1 = the default (1). Default from env V4WS_QE (unset = -1). Not in the pair form,
/// V4WS_REG != 1 or the BF16 debug forms (the default is 0 there; an explicit 1 throws).
void v4_attn_ws_set_qe(int qe);
bool v4_attn_ws_uses_qe();
/// Lean consumer of the early-Q form (fourteenth session, helper v4d): cd 1 = wgmma descriptors built
/// once per CTA, row-valid flags as one 64-bit mask per tile, O rescaled only when a row max changed;
/// 0 = the consumer code before; -1 = the default (1). Default from env V4WS_CD (unset = -1). Only
/// with the early-Q form (an explicit 1 without it throws).
void v4_attn_ws_set_cd(int cd);
bool v4_attn_ws_uses_cd();
/// Staged producer of the F16 + early-Q + lean-consumer form (fifteenth session, helper v4e): st 1 =
/// rows 0..7 of each producer warp's 16 rows of the next tile are gathered into a raw staging ring
/// (18.5 KB more shared memory) while the warp waits for its buffer, only rows 8..15 in place after the
/// wait; 0 = every row in place after the wait; -1 = the default: 1 where the 16-B gather form is on
/// (v4_attn_ws_uses_v16; seventeenth session: 1.005-1.069x at the 24 reference points; the default since the
/// eighteenth, kV4wsStDefault in dsv4.cu says why), else 0.
/// Default from env V4WS_ST (unset = -1). An explicit 1 where the form lacks it (pair, BF16, QE or CD off, V4WS_DEBUG) throws. With the
/// 16-B gather form on (v4_attn_ws_uses_v16, the default) the staged form reads 592-B pool rows by 16-B
/// copies (ST + V16, seventeenth session: 20 KB of staging at 640-B rows) and takes the staged epilogue
/// by the same rule as the in-place form; with V16 off, 584-B rows, 8-B copies and no staged epilogue.
void v4_attn_ws_set_st(int st);
bool v4_attn_ws_uses_st();
/// Staged epilogue of the same form (fifteenth session, helper v4e): ep 1 = O written to shared memory
/// (the Q tile and KV buffer 0, free after the last tile), then stored as coalesced 16-B chunks; 0 = the
/// per-thread 32-bit (BF16) / 64-bit (FP32 partial) stores of wg_store::store_rows; -1 = the default: 1
/// for a launch whose plan splits no query (plan.n_slots == 0), 0 for one that does (measured: 1.02-1.31x
/// unsplit, 0.93-1.06x split; kernels/attention/NOTES.md). Default from env V4WS_EP (unset = -1). An
/// explicit 1 where the form lacks it (pair, BF16, QE or CD off, V4WS_DEBUG, V4WS_ST=1 without V16) throws.
void v4_attn_ws_set_ep(int ep);
/// Whether a launch of the one-CTA F16 form uses the staged epilogue; split: its plan has n_slots > 0.
bool v4_attn_ws_uses_ep(bool split);
/// 16-B gathers from 592-B pool rows (sixteenth session, helper v4f): v16 1 = the caller's pool rows are
/// kV4RowBytes16 = 592 B (the 584-B row of attn_common.cuh, then 8 bytes that are never used), 16-B aligned,
/// and the F16 + QE + CD kernel (not V4WS_ST, no V4WS_DEBUG) gathers them by 16-B cp.async (2 copy
/// instructions per lane and row instead of 3); 0 = 584-B rows, 8-B copies; -1 = the default (1 since the
/// sixteenth session: 1.01-1.09x at every reference point, kernels/attention/NOTES.md). Default
/// from env V4WS_V16 (unset = -1). The pool layout is the caller's: allocate v4_attn_pool_row_bytes(H,
/// idx_ld) bytes per row. An explicit 1 where the form lacks it throws.
constexpr int kV4RowBytes16 = 592;
void v4_attn_ws_set_v16(int v16);
bool v4_attn_ws_uses_v16();
/// Bytes per pool row that v4_attn expects at H heads and idx_ld: kV4RowBytes16 where it runs the
/// warp-specialised kernel's V16 form (variant 3, F16 + QE + CD, v16 on), kV4RowBytes (584) everywhere else.
/// Depends on the current settings (variant, V4WS_* / set_*): ask after setting them, before allocating.
///
/// Pool-stride contract (sixteenth session, helper v4g). Units: bytes between the starts of consecutive
/// pool rows. The caller allocates the pool at v4_attn_pool_row_bytes(H, idx_ld) bytes per row, states that
/// value in MqaArgs::pool_row_bytes (0 = not stated, read as 584) and, where the compressor writes the pool,
/// in CompressorArgs::out_row_bytes (default 584; its rows at 592 equal its 584-B rows in bytes 0..583, bytes
/// 584..591 are 0). v4_attn and v4_attn_ws throw std::invalid_argument naming both sizes when the stated
/// stride differs from the one the chosen form reads (checked on the host before any CUDA call; an
/// unchecked mismatch would read every row but the first at the wrong offset, and the V16 form would read
/// 8 bytes past a 584-B pool's last row). v4_compress throws when out_row_bytes < 584 or % 8 != 0. Not
/// checked (the caller's): that the allocation holds max index + 1 rows of that stride.
int v4_attn_pool_row_bytes(int H, int idx_ld);

}  // namespace servesim::attn
