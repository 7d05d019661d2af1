// servesim attention kernels: the driver's cuTensorMapEncodeTiled, looked up once per process
// through the runtime (no -lcuda link), for the host code that builds TMA tensor maps (mqa.cu,
// dsv4.cu, mla_prefill_wg.cu). Throws std::runtime_error when the driver lacks it (CUDA < 12.0).
#pragma once
#include "attention/attn_common.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <mutex>
#include <stdexcept>

namespace servesim::attn {

inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    cudaDriverEntryPointQueryResult q;
    void* fn = nullptr;
    SS_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !fn) throw std::runtime_error("cuTensorMapEncodeTiled not found in the CUDA driver");
    encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  });
  return encode;
}

}  // namespace servesim::attn
