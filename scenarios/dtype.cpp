#include "scenarios/dtype.hpp"

#include <stdexcept>

namespace servesim {

double bytes_per_element(DType t) {
  switch (t) {
    case DType::fp32: return 4.0;
    case DType::bf16: return 2.0;
    case DType::fp16: return 2.0;
    case DType::fp8: return 1.0 + 4.0 / (128.0 * 128.0);
    case DType::mxfp4: return 0.5 + 1.0 / 32.0;
  }
  return 0.0;
}

DType parse_dtype(std::string_view s) {
  if (s == "fp32") return DType::fp32;
  if (s == "bf16") return DType::bf16;
  if (s == "fp16") return DType::fp16;
  if (s == "fp8") return DType::fp8;
  if (s == "mxfp4") return DType::mxfp4;
  throw std::invalid_argument("unknown dtype \"" + std::string(s) + "\" (expected fp32, bf16, fp16, fp8 or mxfp4)");
}

std::string_view to_string(DType t) {
  switch (t) {
    case DType::fp32: return "fp32";
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    case DType::fp8: return "fp8";
    case DType::mxfp4: return "mxfp4";
  }
  return "?";
}

}  // namespace servesim
