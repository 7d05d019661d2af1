// servesim scenarios: numeric storage formats and their sizes.
#pragma once
#include <string>
#include <string_view>

namespace servesim {

/// Storage format of a tensor (weights, KV cache, states, messages).
enum class DType { fp32, bf16, fp16, fp8, mxfp4 };

/// Bytes per stored element, scales included.
///  - fp8: e4m3 plus one fp32 scale per 128x128 block = 1 + 4/16384 (model-facts §2 notation:
///    "FP8 (+128x128 scales) ≈ 1.0 B/param").
///  - mxfp4: 4-bit values plus one E8M0 byte per group of 32 = 0.5 + 1/32 = 0.53125
///    (model-facts §2 notation).
double bytes_per_element(DType t);

/// Parses "fp32" | "bf16" | "fp16" | "fp8" | "mxfp4". Throws std::invalid_argument naming the
/// accepted spellings otherwise.
DType parse_dtype(std::string_view s);
std::string_view to_string(DType t);

}  // namespace servesim
