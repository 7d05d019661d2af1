// servesim kernels, MoE family (issue #4): routers, token permutation/combine, activations,
// RMSNorm, DSV4 mHC mixing, and the MXFP4 W4A16 grouped expert GEMM, plus cuBLAS/cuBLASLt
// wrappers for the BF16 and FP8 comparison GEMMs.
//
// Conventions for every function here:
// - All pointers are device pointers unless the name says host_. Matrices are row-major.
// - Activations are bf16 (__nv_bfloat16), accumulation fp32. Router logits are fp32.
// - Every launcher enqueues on `stream`, never synchronises, and throws std::runtime_error on a
//   CUDA launch error and std::invalid_argument on an unsupported shape (stated per function).
// - Model constants come from /work/shared/reference/model-facts.md §1.1 (K3), §1.2 (DSV4) and
//   §2.5 (MoE costs); the section is named next to each constant.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstdint>
#include <vector>

namespace servesim::kernels::moe {

using bf16 = __nv_bfloat16;

// ---- model constants -------------------------------------------------------------------------
// Kimi K3 (model-facts.md §1.1): hidden 7168, LatentMoE latent 3584, 896 routed experts top-16,
// expert intermediate 3072, 2 shared experts fused as one GLU of width 6144 on the full hidden,
// dense layer 0 intermediate 33792, sigmoid + correction bias routing, renormalised, scale 1.0.
constexpr int kK3Hidden = 7168, kK3Latent = 3584, kK3Experts = 896, kK3TopK = 16, kK3Inter = 3072;
constexpr int kK3SharedInter = 6144, kK3DenseInter = 33792;
constexpr float kK3RouteScale = 1.0f;
// DeepSeek V4 (model-facts.md §1.2): Pro hidden 7168, 384 experts; Flash hidden 4096, 256
// experts; both top-6, sqrt(softplus) scores + bias, normalised, scale 2.5 (Pro) / 1.5 (Flash);
// intermediate 3072 (Pro) / 2048 (Flash); one shared expert; SwiGLU clamped at 10; first 3
// layers hash-routed; mHC with 4 streams, 20 Sinkhorn iterations, eps 1e-6.
constexpr int kV4ProHidden = 7168, kV4ProExperts = 384, kV4ProInter = 3072;
constexpr int kV4FlashHidden = 4096, kV4FlashExperts = 256, kV4FlashInter = 2048;
constexpr int kV4TopK = 6;
constexpr float kV4ProRouteScale = 2.5f, kV4FlashRouteScale = 1.5f, kV4SwigluLimit = 10.0f;
constexpr int kHcMult = 4, kHcSinkhornIters = 20;
constexpr float kHcEps = 1e-6f, kHcNormEps = 1e-6f;

// ---- routers ---------------------------------------------------------------------------------
enum class ScoreFn { kSigmoid, kSqrtSoftplus };

/// Top-k routing from fp32 logits [T, E]. score = sigmoid(logit) (K3) or sqrt(softplus(logit))
/// (DSV4); experts are chosen by score + bias[e] (noaux_tc correction bias), ties to the lower
/// expert id; weights = chosen unbiased scores / their sum * route_scale.
/// Writes ids [T, k] (int32) and weights [T, k] (fp32), in descending biased-score order.
/// Throws std::invalid_argument unless 1 <= k <= 32, k <= E <= 1024.
void router_topk(ScoreFn fn, const float* logits, const float* bias, int T, int E, int k, float route_scale,
                 int* ids, float* weights, cudaStream_t stream);

/// DSV4 hash routing (first 3 layers): ids[t, j] = tid2eid[token_ids[t] * k + j]; weights =
/// sqrt(softplus(logits[t, ids])) normalised * route_scale. tid2eid is [vocab, k] int32.
void router_hash(const float* logits, const int* token_ids, const int* tid2eid, int T, int E, int k,
                 float route_scale, int* ids, float* weights, cudaStream_t stream);

// ---- dispatch: permutation and combine --------------------------------------------------------
/// Device scratch for one dispatch. Allocate with `alloc_dispatch(E, T*k)`; free with free_dispatch.
struct Dispatch {
  int E = 0, max_rows = 0;
  int* counts = nullptr;        // [E] tokens routed to each expert
  int* row_offsets = nullptr;   // [E+1] exclusive prefix sum of counts (rows of the permuted buffer)
  int* tile_offsets = nullptr;  // [E+1] prefix sum of ceil(counts / bt) (token tiles of the GEMM)
  int* cursor = nullptr;        // [E] scratch
  int* pos = nullptr;           // [T*k] permuted row of (token t, slot j)
  int* row_token = nullptr;     // [T*k] token of each permuted row
};
Dispatch alloc_dispatch(int E, int max_rows);
void free_dispatch(Dispatch& d);

/// Gather tokens by expert, ONE kernel launch (no memset, no global atomics; graph-capturable).
/// x [T, D] bf16 -> x_perm [T*k, D] bf16, rows of expert e contiguous at row_offsets[e], in (token,
/// slot) order (deterministic). Also fills counts, row_offsets, tile_offsets (for GEMM token tile
/// `bt`), pos and row_token (Dispatch::cursor is not used). D % 8 == 0 required.
/// Bytes moved: 2*T*D read + 2*T*k*D written (+ index traffic; every CTA reads all T*k ids).
void moe_permute(const bf16* x, const int* ids, int T, int k, int D, int bt, Dispatch& d, bf16* x_perm,
                 cudaStream_t stream);
/// The previous form (memset + histogram + scan + scatter launches; row order inside an expert not
/// deterministic): same outputs, kept for the benchmark's before/after rows.
void moe_permute_3launch(const bf16* x, const int* ids, int T, int k, int D, int bt, Dispatch& d, bf16* x_perm,
                         cudaStream_t stream);

/// Combine (the weighted scatter-add written as a gather, deterministic), one launch: out[t] =
/// sum_j weights[t, j] * y_perm[pos[t, j]] in fp32, stored bf16 (CTAs of 128 16-byte columns of one
/// token, so a decode step spreads over D/1024 CTAs per token). If gamma != nullptr the fp32 sum
/// is RMS-normalised (K3 LatentMoE norm after combine, eps) and multiplied by gamma [D] (one CTA
/// per token).
void moe_combine(const bf16* y_perm, const int* pos, const float* weights, int T, int k, int D,
                 const bf16* gamma, float eps, bf16* out, cudaStream_t stream);

// ---- elementwise -----------------------------------------------------------------------------
/// K3 SiTU GLU (model-facts.md §1.1): h [rows, 2I] = [a | b]; out [rows, I] =
/// 4*tanh(a/4)*sigmoid(a) * 25*tanh(b/25). fp32 math, bf16 storage. I % 8 == 0.
void act_situ(const bf16* h, int rows, int I, bf16* out, cudaStream_t stream);
/// DSV4 clamped SwiGLU (swiglu_limit 10): out = silu(min(a, limit)) * clamp(b, -limit, limit).
void act_swiglu(const bf16* h, int rows, int I, float limit, bf16* out, cudaStream_t stream);
/// RMSNorm over rows of x [rows, D]: out = x / sqrt(mean(x^2) + eps) * gamma. D % 8 == 0.
void rmsnorm(const bf16* x, const bf16* gamma, int rows, int D, float eps, bf16* out, cudaStream_t stream);

// ---- DSV4 mHC ------------------------------------------------------------------------------
/// mHC pre (model-facts.md §1.2; DSV4 hc_pre): x [T, 4, D] bf16 residual streams; mixes_raw
/// [T, 24] fp32 = x_flat * hc_fn^T (computed by the caller, e.g. cublas_gemm_bf16 with fp32 out);
/// hc_scale [3], hc_base [24] fp32. Per token: r = rsqrt(mean(x_flat^2) + norm_eps), mixes =
/// mixes_raw * r; pre = sigmoid(m[0:4]*s0 + b) + eps; post = 2 sigmoid(m[4:8]*s1 + b); comb =
/// softmax_row(m[8:24]*s2 + b) + eps, column-normalised, then 19 x (row, column) normalisations.
/// Writes y [T, D] bf16 = sum_i pre_i x_i, post [T, 4], comb [T, 4, 4] fp32.
void mhc_pre(const bf16* x, const float* mixes_raw, const float* hc_scale, const float* hc_base, int T, int D,
             bf16* y, float* post, float* comb, cudaStream_t stream);
/// mHC post: out[t, i] = post[t, i] * f[t] + sum_j comb[t, j, i] * res[t, j]; f [T, D],
/// res/out [T, 4, D] bf16.
void mhc_post(const bf16* f, const bf16* res, const float* post, const float* comb, int T, int D, bf16* out,
              cudaStream_t stream);

// ---- MXFP4 weights ---------------------------------------------------------------------------
/// E2M1 code (4 bits: sign, 2 exponent, 1 mantissa) -> value {0, .5, 1, 1.5, 2, 3, 4, 6} * sign.
double e2m1_value(uint8_t code);
/// E8M0 scale byte s -> 2^(s-127) (s = 255 is NaN in OCP MX; not produced here).
double e8m0_value(uint8_t s);
/// Bytes of one prepacked expert matrix [N, K]: N*K/2 codes + N*K/32 scales.
inline size_t w4a16_matrix_bytes(int N, int K) { return size_t(N) * K / 2 + size_t(N) * K / 32; }
/// Prepack one expert matrix for the W4A16 kernel (host). codes [N*K] (one E2M1 code per byte,
/// low nibble), scales [N*K/32] (E8M0 per 32 consecutive K of a row). Writes
/// w4a16_matrix_bytes(N, K) bytes to host_out. Throws std::invalid_argument unless N % 128 == 0,
/// K % 64 == 0 and every scale byte is <= 128 (scale <= 2; the fast dequant folds 2^126 in).
void w4a16_prepack(const uint8_t* host_codes, const uint8_t* host_scales, int N, int K, uint8_t* host_out);
/// Inverse of the above for one element (host): the dequantised weight W[n, k] read back from a
/// prepacked buffer through the exact fragment mapping the kernel uses (test helper).
double w4a16_packed_value(const uint8_t* host_packed, int N, int K, int n, int k);

/// Decode-friendly prepack (NOTES.md §8): each 32-bit word holds the 8 E2M1 codes of the 4 bf16x2
/// A-fragment registers j = 0..3 of one k16 step; code bit b (0 = mantissa, 1-2 = exponent,
/// 3 = sign) of register j's low element sits at bit kW4A16CodeBit[j][b], its high element 16 above.
/// The placement makes register j cheap to extract: w4a16_reg_bits(w, j) puts sign and E2M1 bits
/// where a bf16 has them (exponent 8..7, mantissa 6), i.e. code * 2^-126 in each half.
constexpr int kW4A16CodeBit[4][4] = {{6, 7, 8, 15}, {3, 4, 5, 12}, {0, 1, 2, 9}, {10, 13, 14, 11}};
__host__ __device__ __forceinline__ uint32_t w4a16_reg_bits(uint32_t w, int j) {
  constexpr uint32_t M = 0x81C081C0u;
  switch (j) {
    case 0: return w & M;
    case 1: return (w << 3) & M;
    case 2: return (w << 6) & M;
    default: return ((w >> 6) & 0x01800180u) | ((w >> 4) & 0x00400040u) | ((w << 4) & 0x80008000u);
  }
}

/// Selects the kernel of the W4A16 GEMM (0..8 and 11..23, see gemm_w4a16.cu; 20 = default):
/// 0 one m64nBT wgmma per k16 step overlapped with the next stage, 1 the same without overlap,
/// 2 BT/8 m64n8 wgmmas per k16 step, 3 that without overlap, 4 = 0 with two k-blocks per
/// pipeline stage at BT <= 64 when K % 256 == 0, 5 = warp-specialised decode kernel (producer warp
/// with one bulk copy per stage, mbarriers, two k-blocks per stage) at BT <= 32 when K % 256 == 0
/// (else 0), 6 = 5 with one k-block per stage (slower, kept for comparison), 7 = stream-K form of 5
/// (persistent grid of resident-CTA count, equal k-unit ranges per CTA, fp32 fix-up of split tiles
/// through a library-owned workspace; BT <= 32 when K % 256 == 0, else as 5), 8 = 5 plus, at BT 256
/// with x_rows known, the prefill kernel (TMA producer + dequantisation warpgroup writing bf16 weight
/// tiles to shared memory, two consumer warpgroups of SS wgmma; NOTES.md §13), else as 5. (The
/// persistent prefill forms 9 / 10 measured slower at every shape and were removed, NOTES.md §14.)
/// 11..16 = 8 with another prefill kernel at BT 256 with x_rows (NOTES.md §15-17; else as 8): 11 (the
/// default until §17) = a dedicated producer warp and 3 dequantising warps, 12 = 11 with two k-blocks per
/// dequantisation round, 13 = 8 with two k-blocks per round, 14 = the producer in a consumer warp and
/// 4 dequantising warps (1.02-1.04x 11, NOTES.md §16-17), 15 (the default until §18) = 14 with a separate barrier
/// for each load slot's weight block (issued first; the dequantising warps no longer wait for the token
/// tile; as fast as 14 within noise, §17), 16 = 15 with the weight blocks in their own 7-slot ring,
/// loaded and released by the dequantising warps (~10% slower than 15, §17; kept for comparison).
/// 17 (the default from NOTES.md §18 to §19) = 15 with kernel 17 in place of 5 at BT <= 32 with K % 256 == 0: variant 5's
/// decode kernel with the byte-permute dequantisation (dequant_word_p, same prepack, bit-identical values; 1.05-1.07x
/// kernel 5); 15's prefill kernel at BT 256 with x_rows, else 0. 18 = 17 with kernel 18 (15's prefill kernel with
/// dequant_word_p; as fast as 15 within noise, §18) at BT 256 with x_rows. 19 = 17 with kernel 19 (kernel 17 with
/// both rows' E8M0 factors in one register, broadcast in the HMUL2) at BT <= 32. 20 (the DEFAULT since NOTES.md §19)
/// = 17 with kernel 20 (kernel 17 reshaped for 3 CTAs per SM: 62 registers, 7 stages) at BT 8 with K % 256 == 0 when
/// the launched grid, N / 128 x max_tiles CTAs (idle CTAs included), is more than 2 CTAs per SM, or when N or
/// max_tiles is not known (0), and (since §20) at BT 16 on every grid (its wrong values there, w4g, were ptxas reading
/// the accumulators before the last wgmma wait; fixed; 0.87-0.97x kernel 17's time at m 9-16); kernel 17 at BT 32
/// and on the other BT 8 grids. 21 = 20 without the grid rule (kernel 20 at every BT 8 / 16 grid, and since §21 at BT 32, built for 2 CTAs per SM; tests, comparisons).
/// 22 (NOTES.md §22) = 20 with kernel 22 (kernel 20 with K split across the 2 CTAs of a cluster, partials reduced in
/// distributed shared memory) at BT 8 / 16, K % 256 == 0, K >= 512, on grids of at most 2 CTAs per SM (N and max_tiles known);
/// 23 = 20 with kernel 23 (kernel 22 built for 4 CTAs per SM) at BT 8 under the same rule. Both correct but SLOWER than 20
/// there (1.05-1.20x, §22): opt-in only (tests, comparisons).
/// Throws std::invalid_argument for any other value (9 / 10 were removed).
/// 24 (NOTES.md §23, diagnosis only) = kernel 24 (kernel 20 writing a per-CTA timeline to the w4a16_set_trace buffer) at
/// every BT 8 grid with K % 256 == 0; else as 21.
/// 25 (NOTES.md §23) = 20 with the early prologue (the group from one round of loads, the first weight copies issued
/// before the CTA barrier) on grids that fit in one wave: kernel 25 (kernel 17 + it) at BT 8 on grids of <= 2 CTAs per
/// SM, kernel 26 (kernel 20 + it) at BT 8 on grids of 2-3 CTAs per SM and at BT 16 on grids of <= 3 CTAs per SM (N and
/// max_tiles known, K % 256 == 0); else as 20. Measured SLOWER (1.03-1.14x variant 20's time, §23): opt-in only.
void w4a16_set_variant(int v);
/// Variant 24's timeline buffer (device, 10 x 64-bit words per CTA of the launched grid, N / 128 x max_tiles CTAs):
/// smid, blockIdx.x + 65536 blockIdx.y, globaltimer at entry / exit (ns), SM clock64 at entry, at the first stage's full
/// barrier, at the first bulk-copy issue, after the main loop, at exit, stages.
void w4a16_set_trace(unsigned long long* buf);
/// Test helper (NOTES.md §18): for each of n (word, 4 scale bytes) pairs (device arrays) writes the 4 bf16x2
/// registers of the dequantisation of kernels 0-16 (out_old) and of kernels 17 / 18 (out_new), 4 x n
/// each (out_new2, if given: kernel 19's dequant_word_q with the factor pair); even i use scale bytes 0 / 2, odd i
/// bytes 1 / 3 as the two rows' factors.
void w4a16_dequant_pair(const uint32_t* words, const uint32_t* scales, int n, uint32_t* out_old, uint32_t* out_new,
                        cudaStream_t stream, uint32_t* out_new2 = nullptr);
/// Variant 7 only: force the stream-K grid to `ctas` CTAs (tests); 0 = resident
/// CTAs per SM x SMs.
void w4a16_set_streamk_ctas(int ctas);
int w4a16_variant();
/// The kernel variant that w4a16_grouped_gemm runs under the current w4a16_set_variant for tile width
/// bt, K and x_rows (e.g. variant 8 runs 5 at bt <= 32, 0 at bt 64 / 128 and at bt 256 without
/// x_rows; variant 20 also on the grid: N and max_tiles as given to w4a16_grouped_gemm, 0 = not known, which
/// reports 20 at bt 8: pass both to get the kernel a launch runs): the value bench tables record as kernel_variant.
int w4a16_kernel_for(int bt, int K, long long x_rows, int N = 0, int max_tiles = 0);

/// Token tile widths the W4A16 kernel is compiled for.
constexpr int kW4A16TileWidths[] = {8, 16, 32, 64, 128, 256};
/// Tile width the layer uses for `avg_rows_per_active_expert` (smallest >= avg, at most 256).
int w4a16_pick_bt(double avg_rows_per_active_expert);

/// Grouped GEMM Y[r, :] = X[r, :] * W_e^T for every permuted row r of group e (W4A16: MXFP4
/// weights dequantised to bf16 in registers, bf16 wgmma, fp32 accumulation, bf16 out).
/// x [rows, K] bf16; w_pool: prepacked matrices, matrix of group g at
/// w_pool + expert_ids[g] * w4a16_matrix_bytes(N, K) (expert_ids == nullptr: identity);
/// row_offsets [G+1] and tile_offsets [G+1] (tiles of width bt) as moe_permute writes them;
/// max_tiles >= tile_offsets[G] bounds the grid (see w4a16_max_tiles). y [rows, N] bf16.
/// FLOPs 2*rows*N*K. Throws std::invalid_argument unless N % 128 == 0, K % 128 == 0, bt is one of
/// kW4A16TileWidths.
/// x_rows: rows allocated in x (>= row_offsets[G]), or 0 if unknown; variant 8's prefill kernel
/// (BT = 256) needs it for its TMA tensor map (rows past x_rows read as zeros) and otherwise runs as 5.
void w4a16_grouped_gemm(const bf16* x, const uint8_t* w_pool, const int* expert_ids, const int* row_offsets,
                        const int* tile_offsets, int G, int N, int K, int bt, int max_tiles, bf16* y,
                        cudaStream_t stream, long long x_rows = 0);
/// Upper bound on token tiles for `rows` rows spread over at most G non-empty groups.
inline int w4a16_max_tiles(long long rows, int G, int bt) {
  const long long g = rows < G ? rows : G;
  return static_cast<int>((rows + bt - 1) / bt + g);
}

// ---- library GEMMs ---------------------------------------------------------------------------
/// C[M, N] = A[M, K] * B[N, K]^T (+ beta*C) through cublasGemmEx, bf16 in, fp32 accumulate,
/// C bf16 (c_fp32 == false) or fp32. The "TN" layout of nn.Linear weights [N, K].
void cublas_gemm_bf16(cublasHandle_t h, const bf16* A, const bf16* B, void* C, int M, int N, int K, bool c_fp32,
                      float beta, cudaStream_t stream);
/// Grouped bf16 GEMM through cublasGemmGroupedBatchedEx: for each group g with m_g > 0,
/// Y_g[m_g, N] = X_g[m_g, K] * W_g[N, K]^T. Built once (device pointer arrays uploaded), run many
/// times. Group sizes are host-known (the library needs them on the host).
struct GroupedBf16Plan {
  int N = 0, K = 0;
  std::vector<int> m;                 // per non-empty group
  std::vector<float> alpha, beta;     // 1, 0
  std::vector<cublasOperation_t> ta, tb;
  std::vector<int> mm, nn, kk, lda, ldb, ldc, gsize;
  void** d_ptrs = nullptr;            // [3][groups]: W_g, X_g, Y_g
};
GroupedBf16Plan make_grouped_bf16(const std::vector<const bf16*>& X, const std::vector<const bf16*>& W,
                                  const std::vector<bf16*>& Y, const std::vector<int>& m, int N, int K);
void run_grouped_bf16(cublasHandle_t h, const GroupedBf16Plan& plan, cudaStream_t stream);
void free_grouped_bf16(GroupedBf16Plan& plan);

/// FP8 (e4m3) GEMM through cuBLASLt: D[M, N] bf16 = X_fp8[M, K] * W_fp8[N, K]^T, fp32
/// accumulation. block == false: per-tensor fp32 scales x_scale[1], w_scale[1]. block == true:
/// DeepSeek-style scales, X 1x128 (CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, M*K/128 floats) and
/// W 128x128 blocks (BLK128x128_32F, (N/128)*(K/128) floats). Plans (descriptors + heuristic
/// algorithm) are cached per (M, N, K, block). Returns false (and runs nothing) when cuBLASLt
/// offers no algorithm for the configuration. Requires M, N, K multiples of 16 (K of 128 for block).
struct LtFp8;
LtFp8* lt_fp8_create(size_t workspace_bytes = 64u << 20);
void lt_fp8_destroy(LtFp8* ctx);
bool cublaslt_fp8_gemm(LtFp8* ctx, const void* X, const void* W, bf16* D, int M, int N, int K, bool block,
                       const float* x_scale, const float* w_scale, cudaStream_t stream);

// ---- FP8 block-scaled grouped GEMM (own kernel, gemm_fp8.cu) ---------------------------------------
/// DeepSeek-style FP8: X e4m3 with one fp32 scale per 1x128 (row, 128-K block), W e4m3 [E, N, K]
/// with one fp32 scale per 128x128 block, w_scale [E, N/128, K/128]. Y = sum_kb (X_kb W_kb^T) *
/// x_scale * w_scale, fp32 accumulation, bf16 out. Activation scales are stored K-block-major
/// ("MN-major", as DeepGEMM takes them): x_scale[kb * ld + row].
/// Token tile widths (wgmma N side) the kernel is compiled for (192, 256: variant 0 only; 256 runs
/// as two 128-token wgmma groups), and the pick for a row count: the smallest of 8..128 that holds
/// it, above 128 the one of 128/192/256 with the fewest padded rows (ties to the wider).
constexpr int kFp8TileWidths[] = {8, 16, 32, 64, 128, 192, 256};
int fp8_pick_bt(double rows_per_group);
/// Kernel variant: 0 (default) warp-specialised, TMA producer warpgroup + 2 consumer warpgroups on
/// mbarriers; 1 = all threads load with cp.async, CTA barrier per k-block (first version);
/// 2 / 3 = tokens-as-M kernels (gemm_fp8_tm.cu) at bt 128: 128 tokens x 128 weight rows with two
/// temporaries (promotion overlapped) / 128 x 256 (N % 256 == 0, else 128x128); 4 / 5 = 2 / 3 in
/// 2-CTA clusters sharing the token tile by TMA multicast (when N / tile width is even; 128x256: as
/// fast as variant 3, 128x128: 0.75-0.8x of variant 2, NOTES.md §9). Variants
/// 2-5 run variant 0 at bt != 128; fp8_pick_bt gives 128 above 64 rows for variants >= 1.
/// Throws std::invalid_argument outside 0..5. Default kFp8DefaultVariant = 3: 1.11-1.45x faster than
/// variant 0 at 256-4096 rows per expert on the H200 (NOTES.md §9); within 1-2% at 192 rows.
constexpr int kFp8DefaultVariant = 3;
void fp8_set_variant(int v);
int fp8_variant();
/// Variant 0, non-persistent, bt >= 128: clusters of 2 CTAs (adjacent N-tiles) share the token tile
/// through TMA multicast when N/128 is even (default off: measured slower, NOTES.md §7).
void fp8_set_cluster(bool on);
bool fp8_cluster();
/// Variant 0: persistent tile loop, one CTA per resident slot (default off: measured 3-10% slower
/// than one CTA per tile, NOTES.md §7).
void fp8_set_persistent(bool on);
bool fp8_persistent();
/// Masked layout (decode): x [G, max_m, K], y [G, max_m, N]; group g holds masked_m[g] (device,
/// clamped to max_m) valid rows; rows past it are neither used nor written. x_scale [K/128][ld],
/// ld = x_scale_ld >= G*max_m, a multiple of 4 (TMA stride). w [num_experts, N, K]; group g uses
/// expert expert_ids[g] (nullptr: g). No host synchronisation: graph-capturable.
/// Throws std::invalid_argument unless N % 128 == 0, K % 256 == 0, K <= 16384, bt in kFp8TileWidths.
void fp8_grouped_gemm_masked(const void* x, const float* x_scale, int x_scale_ld, const void* w, const float* w_scale,
                             int num_experts, const int* expert_ids, const int* masked_m, int G, int max_m, int N,
                             int K, int bt, bf16* y, cudaStream_t stream);
/// Contiguous layout (prefill): x [x_rows, K], rows of group g at row_offsets[g] .. row_offsets[g+1]
/// (no alignment needed), tile_offsets [G+1] prefix sums of ceil(count / bt) (moe_permute writes
/// both), max_tiles >= tile_offsets[G] bounds the grid; x_scale ld = x_scale_ld (>= x_rows, % 4 == 0).
void fp8_grouped_gemm_contiguous(const void* x, long long x_rows, const float* x_scale, int x_scale_ld, const void* w,
                                 const float* w_scale, int num_experts, const int* expert_ids, const int* row_offsets,
                                 const int* tile_offsets, int G, int N, int K, int bt, int max_tiles, bf16* y,
                                 cudaStream_t stream);

// ---- device fills (random data without host transfers) ------------------------------------------
/// Fills with a counter-based hash RNG: bf16 uniform in [-amp, amp]; codes uniform 4-bit; scale
/// bytes uniform in [lo, hi].
void fill_bf16(bf16* p, size_t n, uint64_t seed, float amp, cudaStream_t stream);
void fill_f32(float* p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t stream);
void fill_bytes(uint8_t* p, size_t n, uint64_t seed, int lo, int hi, cudaStream_t stream);
/// Fills a prepacked W4A16 pool directly (random codes and scales in [lo, hi]; codes at random).
void fill_w4a16_pool(uint8_t* p, size_t n_matrices, int N, int K, uint64_t seed, int scale_lo, int scale_hi,
                     cudaStream_t stream);

}  // namespace servesim::kernels::moe
