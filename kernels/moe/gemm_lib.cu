// Library GEMMs for the MoE family: cuBLAS bf16 (dense and grouped) and cuBLASLt FP8.
#include "moe/moe.cuh"
#include "common/cuda_check.cuh"

#include <map>
#include <stdexcept>
#include <tuple>

namespace servesim::kernels::moe {

void cublas_gemm_bf16(cublasHandle_t h, const bf16* A, const bf16* B, void* C, int M, int N, int K, bool c_fp32,
                      float beta, cudaStream_t stream) {
  if (M <= 0) return;
  SS_CUBLAS(cublasSetStream(h, stream));
  const float alpha = 1.f;
  // Column-major view: C^T[N, M] = W[N, K] (row-major = col-major K x N, op T) * X^T (K x M).
  SS_CUBLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, B, CUDA_R_16BF, K, A, CUDA_R_16BF, K, &beta, C,
                         c_fp32 ? CUDA_R_32F : CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

GroupedBf16Plan make_grouped_bf16(const std::vector<const bf16*>& X, const std::vector<const bf16*>& W,
                                  const std::vector<bf16*>& Y, const std::vector<int>& m, int N, int K) {
  GroupedBf16Plan p;
  p.N = N;
  p.K = K;
  std::vector<void*> a, b, c;
  for (size_t g = 0; g < m.size(); ++g) {
    if (m[g] <= 0) continue;
    p.m.push_back(m[g]);
    a.push_back(const_cast<bf16*>(W[g]));
    b.push_back(const_cast<bf16*>(X[g]));
    c.push_back(Y[g]);
  }
  const size_t G = p.m.size();
  p.alpha.assign(G, 1.f);
  p.beta.assign(G, 0.f);
  p.ta.assign(G, CUBLAS_OP_T);
  p.tb.assign(G, CUBLAS_OP_N);
  p.mm.assign(G, N);
  p.nn = p.m;
  p.kk.assign(G, K);
  p.lda.assign(G, K);
  p.ldb.assign(G, K);
  p.ldc.assign(G, N);
  p.gsize.assign(G, 1);
  if (G) {
    std::vector<void*> all;
    all.insert(all.end(), a.begin(), a.end());
    all.insert(all.end(), b.begin(), b.end());
    all.insert(all.end(), c.begin(), c.end());
    SS_CUDA(cudaMalloc(&p.d_ptrs, sizeof(void*) * all.size()));
    SS_CUDA(cudaMemcpy(p.d_ptrs, all.data(), sizeof(void*) * all.size(), cudaMemcpyHostToDevice));
  }
  return p;
}

void run_grouped_bf16(cublasHandle_t h, const GroupedBf16Plan& p, cudaStream_t stream) {
  const int G = static_cast<int>(p.m.size());
  if (!G) return;
  SS_CUBLAS(cublasSetStream(h, stream));
  void* const* A = p.d_ptrs;
  void* const* B = p.d_ptrs + G;
  void* const* C = p.d_ptrs + 2 * G;
  SS_CUBLAS(cublasGemmGroupedBatchedEx(h, p.ta.data(), p.tb.data(), p.mm.data(), p.nn.data(), p.kk.data(),
                                       p.alpha.data(), const_cast<const void* const*>(A), CUDA_R_16BF, p.lda.data(),
                                       const_cast<const void* const*>(B), CUDA_R_16BF, p.ldb.data(), p.beta.data(), C,
                                       CUDA_R_16BF, p.ldc.data(), G, p.gsize.data(), CUBLAS_COMPUTE_32F));
}

void free_grouped_bf16(GroupedBf16Plan& p) {
  if (p.d_ptrs) cudaFree(p.d_ptrs);
  p = GroupedBf16Plan{};
}

// ---- cuBLASLt FP8 ---------------------------------------------------------------------------

#define SS_LT(call)                                                                                      \
  do {                                                                                                   \
    cublasStatus_t s_ = (call);                                                                          \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                                                     \
      throw std::runtime_error(std::string(#call) + " failed: cuBLASLt status " + std::to_string(int(s_))); \
  } while (0)

struct LtPlan {
  bool ok = false;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

struct LtFp8 {
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::map<std::tuple<int, int, int, bool>, LtPlan> plans;
};

LtFp8* lt_fp8_create(size_t workspace_bytes) {
  auto* c = new LtFp8;
  SS_LT(cublasLtCreate(&c->lt));
  c->workspace_bytes = workspace_bytes;
  SS_CUDA(cudaMalloc(&c->workspace, workspace_bytes));
  return c;
}

void lt_fp8_destroy(LtFp8* c) {
  if (!c) return;
  for (auto& [key, p] : c->plans) {
    if (p.op) cublasLtMatmulDescDestroy(p.op);
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.d) cublasLtMatrixLayoutDestroy(p.d);
  }
  cudaFree(c->workspace);
  cublasLtDestroy(c->lt);
  delete c;
}

namespace {
LtPlan& get_plan(LtFp8* c, int M, int N, int K, bool block) {
  auto key = std::make_tuple(M, N, K, block);
  auto it = c->plans.find(key);
  if (it != c->plans.end()) return it->second;
  LtPlan& p = c->plans[key];
  // Column-major: D^T [N, M] = op_T(W) [N, K] * X^T [K, M]. cuBLASLt "A" = W, "B" = X.
  SS_LT(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  SS_LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  SS_LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (block) {
    const int32_t wm = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, xm = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    if (cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &wm, sizeof wm) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &xm, sizeof xm) != CUBLAS_STATUS_SUCCESS)
      return p;  // ok stays false
  }
  SS_LT(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, K, N, K));
  SS_LT(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, K, M, K));
  SS_LT(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_16BF, N, M, N));
  cublasLtMatmulPreference_t pref;
  SS_LT(cublasLtMatmulPreferenceCreate(&pref));
  SS_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &c->workspace_bytes,
                                             sizeof c->workspace_bytes));
  // Scale pointers must be set for the heuristic to see the scaled configuration.
  const void* dummy = c->workspace;
  cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &dummy, sizeof dummy);
  cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &dummy, sizeof dummy);
  cublasLtMatmulHeuristicResult_t res{};
  int n = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(c->lt, p.op, p.a, p.b, p.d, p.d, pref, 1, &res, &n);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS && n > 0) {
    p.algo = res.algo;
    p.ok = true;
  }
  return p;
}
}  // namespace

bool cublaslt_fp8_gemm(LtFp8* c, const void* X, const void* W, bf16* D, int M, int N, int K, bool block,
                       const float* x_scale, const float* w_scale, cudaStream_t stream) {
  if (M <= 0) return true;
  LtPlan& p = get_plan(c, M, N, K, block);
  if (!p.ok) return false;
  SS_LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof w_scale));
  SS_LT(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale, sizeof x_scale));
  const float alpha = 1.f, beta = 0.f;
  const cublasStatus_t st = cublasLtMatmul(c->lt, p.op, &alpha, W, p.a, X, p.b, &beta, D, p.d, D, p.d, &p.algo,
                                           c->workspace, c->workspace_bytes, stream);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {  // heuristic offered an algorithm the shape cannot run
    p.ok = false;
    return false;
  }
  SS_LT(st);
  return true;
}

}  // namespace servesim::kernels::moe
