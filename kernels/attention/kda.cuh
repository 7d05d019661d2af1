// servesim attention kernels: Kimi K3 KDA (Kimi Delta Attention), model-facts.md sections 1.1,
// 2.1 and 3.1.
//
// Shapes (D = 128 = key dim = value dim, fixed; H heads; T tokens of all sequences packed):
//   q, k, v  [T, H, D] bf16  (after the short convolution + SiLU)
//   g        [T, H, D] bf16  raw decay-gate input f(x) (output of f_b), activated in the kernel:
//            g = lower_bound * sigmoid(exp(A_log[h]) * (f + dt_bias[h*D+d])), natural-log units,
//            per-token decay factor exp(g) (FlashKDA torch_ref with LOG2E folded out)
//   beta     [T, H] bf16 raw logits, beta = sigmoid(.) in the kernel
//   A_log    [H] fp32, dt_bias [H*D] fp32
//   state    [N, H, V=D, K=D], fp32 (prefill and decode) or bf16 (decode), layout [v][k]
//   out      [T, H, D] bf16, o_t = scale * S_t^T q_t  (scale = 1/sqrt(D) by default)
// Recurrence per token and head (K x V state S): S <- diag(exp(g_t)) S;
//   S <- S + beta_t k_t (v_t - S^T k_t)^T;  o_t = scale * S^T q_t, with q, k L2-normalised
//   (rsqrt(sum + 1e-6)). Chunked prefill uses C = 16 (FlashKDA).
// Errors: std::invalid_argument on bad sizes; CUDA errors as std::runtime_error.
#pragma once
#include "attention/attn_common.cuh"

#include <vector>

namespace servesim::attn {

constexpr int kKdaD = 128;
constexpr int kKdaChunk = 16;
/// Bytes of the K1 -> K2 workspace per (chunk, head): q~, k~, Kd (3 x 16x128 bf16), INV*beta and
/// Mqk (2 x 16x16 bf16), exp(Gamma_C) (128 fp32).
constexpr int kKdaChunkBytes = 3 * kKdaChunk * kKdaD * 2 + 2 * kKdaChunk * kKdaChunk * 2 + kKdaD * 4;

/// Chunk schedule for a packed batch of variable-length sequences (host-built metadata, like the
/// serving engines' per-step metadata; not part of the timed op).
struct KdaPlan {
  int num_seqs = 0, num_chunks = 0, total_tokens = 0;
  DevBuf<int> cu_seqlens;       // [N+1]
  DevBuf<int> chunk_start;      // [num_chunks] first token of each chunk
  DevBuf<int> chunk_len;        // [num_chunks] valid tokens (1..16)
  DevBuf<int> seq_chunk_begin;  // [N+1]
};
KdaPlan kda_make_plan(const std::vector<int>& cu_seqlens);
inline size_t kda_workspace_bytes(const KdaPlan& p, int H) {
  return static_cast<size_t>(p.num_chunks) * H * kKdaChunkBytes;
}

struct KdaPrefillArgs {
  const bf16 *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr;
  const float *A_log = nullptr, *dt_bias = nullptr;
  const float* init_state = nullptr;  // [N,H,D,D] fp32 or null (zeros)
  float* final_state = nullptr;       // [N,H,D,D] fp32 or null (not stored)
  bf16* out = nullptr;
  int H = 0;
  float scale = 0.08838834764831845f;  // 1/sqrt(128)
  float lower_bound = -5.f;            // |lower_bound| * 16 must stay below 88 (fp32 exp range)
};
/// Chunked prefill: K1 (token-parallel prep) then K2 (sequential over chunks). `workspace` must
/// hold kda_workspace_bytes(plan, H) bytes.
void kda_prefill(const KdaPrefillArgs& a, const KdaPlan& plan, void* workspace, cudaStream_t s = 0);
void kda_prefill_k1(const KdaPrefillArgs& a, const KdaPlan& plan, void* workspace, cudaStream_t s = 0);
void kda_prefill_k2(const KdaPrefillArgs& a, const KdaPlan& plan, const void* workspace, cudaStream_t s = 0);

struct KdaDecodeArgs {
  const bf16 *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr;  // [B,H,D], beta [B,H]
  const float *A_log = nullptr, *dt_bias = nullptr;
  void* state = nullptr;  // [B,H,D,D], updated in place
  bool state_bf16 = false;
  bf16* out = nullptr;  // [B,H,D]
  int B = 0, H = 0;
  float scale = 0.08838834764831845f;
  float lower_bound = -5.f;
};
/// One recurrent decode step for B sequences (one token each).
void kda_decode(const KdaDecodeArgs& a, cudaStream_t s = 0);

/// Causal depthwise conv (width 4) + SiLU over C channels (K3: C = 3*12288 for q, k, v) for a
/// packed varlen batch. x, y [T, C] bf16; w [C, 4] fp32 (w[c][3] multiplies the current token);
/// state_in / state_out [N, C, 3] bf16 (last three inputs, oldest first; state_in may be null).
void kda_short_conv_prefill(const bf16* x, const float* w, const bf16* state_in, bf16* state_out, bf16* y,
                            const KdaPlan& plan, int C, cudaStream_t s = 0);
/// Decode: x, y [B, C]; state [B, C, 3] updated in place.
void kda_short_conv_decode(const bf16* x, const float* w, bf16* state, bf16* y, int B, int C, cudaStream_t s = 0);

/// Sigmoid-gated RMSNorm (FLA FusedRMSNormGated): y = o * rsqrt(mean(o^2) + eps) * w * sigmoid(gate)
/// over rows of D = 128 (rows = T*H). o, gate, y [rows, 128] bf16; w [128] fp32.
void kda_gated_rmsnorm(const bf16* o, const bf16* gate, const float* w, bf16* y, long rows, float eps = 1e-6f,
                       cudaStream_t s = 0);

}  // namespace servesim::attn
