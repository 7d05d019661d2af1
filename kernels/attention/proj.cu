// servesim attention kernels: cuBLASLt GEMM plans (see proj.cuh).
#include "attention/proj.cuh"

#include <algorithm>
#include <mutex>

namespace servesim::attn {

namespace {
#define SS_LT(call)                                                                                 \
  do {                                                                                              \
    cublasStatus_t s_ = (call);                                                                     \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                                                \
      throw std::runtime_error(std::string(#call) + " failed: cuBLAS status " + std::to_string((int)s_)); \
  } while (0)

struct LtHandle {
  cublasLtHandle_t h = nullptr;
  void* ws = nullptr;
  size_t ws_bytes = 64ull << 20;
  LtHandle() {
    SS_LT(cublasLtCreate(&h));
    SS_CUDA(cudaMalloc(&ws, ws_bytes));
  }
};
LtHandle& lt() {
  static LtHandle* x = new LtHandle();  // lives for the process
  return *x;
}
__global__ void set_ones(float* p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = 1.f;
}
}  // namespace

const char* gemm_kind_name(GemmKind k) {
  switch (k) {
    case GemmKind::kBF16: return "bf16";
    case GemmKind::kFP8Tensor: return "fp8_tensor_scale";
    case GemmKind::kFP8Block: return "fp8_block_scale";
  }
  return "?";
}

GemmPlan::~GemmPlan() { destroy(); }
void GemmPlan::destroy() {
  if (op_) cublasLtMatmulDescDestroy(op_);
  if (la_) cublasLtMatrixLayoutDestroy(la_);
  if (lb_) cublasLtMatrixLayoutDestroy(lb_);
  if (lc_) cublasLtMatrixLayoutDestroy(lc_);
  op_ = nullptr; la_ = lb_ = lc_ = nullptr;
  ok_ = false;
}

bool GemmPlan::create(GemmKind kind, const GemmShape& in) {
  destroy();
  kind_ = kind;
  sh_ = in;
  if (sh_.M <= 0 || sh_.N <= 0 || sh_.K <= 0 || sh_.batch <= 0) throw std::invalid_argument("GemmPlan: bad shape");
  if (!sh_.ldx) sh_.ldx = sh_.K;
  if (!sh_.ldw) sh_.ldw = sh_.K;
  if (!sh_.ldd) sh_.ldd = sh_.N;
  if (!sh_.stride_x) sh_.stride_x = sh_.ldx * sh_.M;
  if (!sh_.stride_w) sh_.stride_w = sh_.ldw * sh_.N;
  if (!sh_.stride_d) sh_.stride_d = sh_.ldd * sh_.M;
  const bool fp8 = kind != GemmKind::kBF16;
  const cudaDataType_t tin = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  SS_LT(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  SS_LT(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  SS_LT(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  // cuBLAS column-major view: C (N x M) = W^T-op (N x K) * X (K x M)
  SS_LT(cublasLtMatrixLayoutCreate(&la_, tin, sh_.K, sh_.N, sh_.ldw));
  SS_LT(cublasLtMatrixLayoutCreate(&lb_, tin, sh_.K, sh_.M, sh_.ldx));
  SS_LT(cublasLtMatrixLayoutCreate(&lc_, CUDA_R_16BF, sh_.N, sh_.M, sh_.ldd));
  if (sh_.batch > 1) {
    const int32_t bc = sh_.batch;
    const int64_t sa = sh_.stride_w, sb = sh_.stride_x, sc = sh_.stride_d;
    for (auto* l : {la_, lb_, lc_}) SS_LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
    SS_LT(cublasLtMatrixLayoutSetAttribute(la_, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, sizeof sa));
    SS_LT(cublasLtMatrixLayoutSetAttribute(lb_, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sb, sizeof sb));
    SS_LT(cublasLtMatrixLayoutSetAttribute(lc_, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sc, sizeof sc));
  }
  size_t ones_n = 1;
  if (kind == GemmKind::kFP8Block) {
    const cublasLtMatmulMatrixScale_t ma = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    const cublasLtMatmulMatrixScale_t mb = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    if (cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &ma, sizeof ma) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mb, sizeof mb) != CUBLAS_STATUS_SUCCESS) {
      destroy();
      return false;
    }
    const size_t kb = (sh_.K + 127) / 128;
    ones_n = std::max(kb * ((sh_.N + 127) / 128), kb * static_cast<size_t>(sh_.M)) * sh_.batch;
  }
  if (fp8) {
    ones_.alloc(ones_n);
    set_ones<<<64, 256>>>(ones_.p, ones_n);
    SS_LAUNCH_CHECK();
    const float* p = ones_.p;
    SS_LT(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &p, sizeof p));
    SS_LT(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &p, sizeof p));
  }
  cublasLtMatmulPreference_t pref = nullptr;
  SS_LT(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = lt().ws_bytes;
  SS_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t res{};
  int count = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt().h, op_, la_, lb_, lc_, lc_, pref, 1, &res, &count);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || count == 0) {
    destroy();
    return false;
  }
  algo_ = res.algo;
  ok_ = true;
  SS_CUDA(cudaDeviceSynchronize());
  return true;
}

void GemmPlan::run(const void* X, const void* W, bf16* D, cudaStream_t s, const float* sx, const float* sw) const {
  if (!ok_) throw std::runtime_error("GemmPlan::run on a plan that was not created");
  if (kind_ != GemmKind::kBF16) {
    const float* pa = sw ? sw : ones_.p;
    const float* pb = sx ? sx : ones_.p;
    SS_LT(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa, sizeof pa));
    SS_LT(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb, sizeof pb));
  }
  const float alpha = 1.f, beta = 0.f;
  if (s == 0) s = cudaStreamPerThread;  // this library is built with --default-stream per-thread
  SS_LT(cublasLtMatmul(lt().h, op_, &alpha, W, la_, X, lb_, &beta, D, lc_, D, lc_, &algo_, lt().ws, lt().ws_bytes, s));
}

}  // namespace servesim::attn
