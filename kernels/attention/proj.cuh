// servesim attention kernels: dense projections of the attention layers through cuBLASLt.
// D[M, N] (row-major, bf16) = X[M, K] (row-major) * W[N, K]^T, optionally a strided batch
// (grouped low-rank output projection of V4: o_groups independent GEMMs; MLA absorption: one per
// head). Kinds:
//   kBF16       BF16 x BF16, fp32 accumulate
//   kFP8Tensor  E4M3 x E4M3, one fp32 scale per tensor (scale pointers on the device)
//   kFP8Block   E4M3 x E4M3 with DeepSeek-style scales: X 1x128 (VEC128_32F), W 128x128
//               (BLK128x128_32F); available only where cuBLASLt supports it (create() says so)
// Plans are created once (descriptor + heuristic) so the timed call only enqueues the GEMM.
// Errors: std::runtime_error on cuBLASLt failures other than "no algorithm".
#pragma once
#include "attention/attn_common.cuh"

#include <cublasLt.h>

#include <memory>

namespace servesim::attn {

enum class GemmKind { kBF16, kFP8Tensor, kFP8Block };
const char* gemm_kind_name(GemmKind k);

struct GemmShape {
  int M = 0, N = 0, K = 0;
  int batch = 1;
  long long ldx = 0, ldw = 0, ldd = 0;           // leading dims (elements); 0 = packed (K, K, N)
  long long stride_x = 0, stride_w = 0, stride_d = 0;  // batch strides (elements); 0 = packed
};

class GemmPlan {
 public:
  GemmPlan() = default;
  ~GemmPlan();
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;
  /// Builds descriptors and picks cuBLASLt's first heuristic algorithm. Returns false when
  /// cuBLASLt offers none (e.g. a scale mode unsupported on this GPU).
  bool create(GemmKind kind, const GemmShape& shape);
  /// Enqueues D = X * W^T. For kFP8Tensor sx/sw point to one fp32 each; for kFP8Block to
  /// ceil(K/128)*M and ceil(K/128)*ceil(N/128) fp32 values (null: the plan's own all-ones scales).
  void run(const void* X, const void* W, bf16* D, cudaStream_t s = 0, const float* sx = nullptr,
           const float* sw = nullptr) const;
  bool ok() const { return ok_; }

 private:
  void destroy();
  GemmKind kind_ = GemmKind::kBF16;
  GemmShape sh_{};
  bool ok_ = false;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  DevBuf<float> ones_;  // default scales
};

// ---- own FP8 block-scaled dense GEMM for small M (proj_fp8.cu) -----------------------------------
/// Y[M, N] bf16 = X[M, K] * W[N, K]^T with DeepSeek-style scales: X e4m3 with one fp32 scale per
/// 1x128 (row, K block), stored K-block-major x_scale[kb * x_scale_ld + m] (as DeepGEMM takes them);
/// W e4m3 with one fp32 scale per 128x128 block, w_scale[ceil(N/128)][K/128]; fp32 accumulation.
/// wgmma + TMA, warp-specialised (the G = 1 form of kernels/moe's FP8 grouped kernel, variant 0):
/// `rows` (128 or 64) weight rows x BT tokens per CTA, BT = 8..256 from M (<= 64 with 64-row tiles),
/// and split-K over grid.z when the tiles do not fill the GPU (partials added into an fp32
/// workspace, or reduced inside a cluster; the last split of a tile writes bf16).
struct Fp8DenseConfig {
  int bt = 0, m_tiles = 0, n_tiles = 0, split = 1;
  bool cluster = false;  // split partials reduced in a thread-block cluster through DSMEM (split <= 8; no workspace)
  int rows = 128;        // weight rows per CTA: 128 (two consumer warpgroups) or 64 (one; bt <= 64; or, at bt 128,
                         // two warpgroups x 64 tokens sharing the weight tile: helper pj3's token-split form, pipe 0 / 1)
  bool pdl = false;      // launched with programmatic dependent launch (see fp8_dense_gemm)
  int pipe = 0;          // consumer pipeline (pipe argument): 0 = weight scale by a global load one k-block ahead and
                         // the promotion after each k-block's wgmma; 1 = weight scales staged in shared memory with
                         // the ring (loaded by the scale warp); 2 = 1 + the promotion of k-block i overlaps the
                         // wgmma of i+1 (bt <= 128; not bt 64 at 128 rows)
};
/// The launch shape fp8_dense_gemm uses (force_split / force_bt > 0 override the heuristic;
/// force_cluster > 0: reduce the splits inside a cluster through distributed shared memory instead
/// of the fp32 workspace; force_rows 64 / 128: weight rows per CTA, 0 = 64 where bt <= 64 and the
/// 128-row tiles do not fill the SMs, else 128; pdl > 0: programmatic
/// dependent launch; pipe 0 / 1 / 2: Fp8DenseConfig::pipe). Throws std::invalid_argument unless N % 8 == 0,
/// K % 128 == 0, 1 <= split <= K/128 (<= 8 with the cluster reduction), rows in {64, 128}, bt <= 64 or 128 at
/// 64 rows, pipe in 0..2, and at pipe 2 bt <= 128, not bt 64 with 128 rows, not bt 128 with 64 rows.
/// 64 rows at bt 128 is the token-split form (two consumer warpgroups share each weight tile; NOTES.md,
/// twentieth session, helper pj3; opt-in, slower at the median of M 65-128): force_rows 64 with force_bt 0
/// launches it wherever the heuristic picks tile width 128, so pass force_bt too when the form matters.
Fp8DenseConfig fp8_dense_plan(int M, int N, int K, int force_split = 0, int force_bt = 0, int force_cluster = 0,
                              int force_rows = 0, int pdl = 0, int pipe = 0);
/// Workspace bytes for a config (0 without split). The workspace must be zero-filled ONCE before
/// its first use (cudaMemset); each call leaves it zero again, so calls can be graph-captured. Calls
/// sharing a workspace must run in stream order (not concurrently).
size_t fp8_dense_workspace_bytes(const Fp8DenseConfig& c);
/// Enqueues the GEMM; returns the config used. x_scale_ld >= M. y 16-byte aligned.
/// pdl > 0: launched with programmatic dependent launch (cudaLaunchAttributeProgrammaticStreamSerialization):
/// the kernel's prologue and its first weight-tile loads overlap the previous kernel in the stream
/// (or graph); it reads x, x_scale and writes y / the workspace only after that kernel completed.
/// Contract: w and w_scale must NOT be written by any kernel that may still be running when this one
/// starts (under PDL, with every kernel of a chain triggering early, that can be more than the one
/// immediately before it). The kernel triggers its own dependents at its start: a PDL-launched kernel
/// after it must wait (griddepcontrol.wait) before reading y.
/// Throws std::invalid_argument (shapes, as fp8_dense_plan; x_scale_ld < M; workspace too small),
/// std::runtime_error on CUDA errors.
Fp8DenseConfig fp8_dense_gemm(const void* x, const float* x_scale, int x_scale_ld, const void* w, const float* w_scale,
                              bf16* y, int M, int N, int K, void* workspace, size_t workspace_bytes,
                              cudaStream_t s = 0, int force_split = 0, int force_bt = 0, int force_cluster = 0,
                              int force_rows = 0, int pdl = 0, int pipe = 0);

}  // namespace servesim::attn
