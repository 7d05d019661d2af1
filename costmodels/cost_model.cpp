#include "costmodels/cost_model.hpp"

#include <algorithm>

namespace servesim {

std::string_view to_string(OpKind k) {
  switch (k) {
    case OpKind::attn_proj: return "attn_proj";
    case OpKind::kda_prefill: return "kda_prefill";
    case OpKind::kda_decode: return "kda_decode";
    case OpKind::kda_conv_norm: return "kda_conv_norm";
    case OpKind::mla_prefill: return "mla_prefill";
    case OpKind::mla_decode: return "mla_decode";
    case OpKind::csa_indexer: return "csa_indexer";
    case OpKind::csa_attn: return "csa_attn";
    case OpKind::hca_attn: return "hca_attn";
    case OpKind::swa_attn: return "swa_attn";
    case OpKind::mhc_mix: return "mhc_mix";
    case OpKind::dense_ffn: return "dense_ffn";
    case OpKind::moe_router: return "moe_router";
    case OpKind::moe_shared: return "moe_shared";
    case OpKind::moe_latent_proj: return "moe_latent_proj";
    case OpKind::moe_experts: return "moe_experts";
    case OpKind::moe_permute: return "moe_permute";
    case OpKind::lm_head: return "lm_head";
    case OpKind::mtp_proj: return "mtp_proj";
    case OpKind::layer_norm: return "layer_norm";
    case OpKind::count_: break;
  }
  return "?";
}

std::string_view to_string(Provenance p) {
  switch (p) {
    case Provenance::roofline: return "roofline";
    case Provenance::fitted: return "fitted";
    case Provenance::extrapolated: return "extrapolated";
  }
  return "?";
}

std::string_view to_string(OpClass c) {
  switch (c) {
    case OpClass::gemm: return "gemm";
    case OpClass::grouped_gemm: return "grouped_gemm";
    case OpClass::attention_decode: return "attention_decode";
    case OpClass::attention_prefill: return "attention_prefill";
    case OpClass::sparse_attention: return "sparse_attention";
    case OpClass::indexer: return "indexer";
    case OpClass::kda_prefill: return "kda_prefill";
    case OpClass::kda_decode: return "kda_decode";
    case OpClass::elementwise: return "elementwise";
    case OpClass::count_: break;
  }
  return "?";
}

double RooflineCostModel::peak_flop_per_s(DType math) const {
  switch (math) {
    case DType::fp8: return gpu_.fp8_ceiling_flop_per_s();
    case DType::mxfp4:
      return gpu_.fp4_flop_per_s > 0 ? gpu_.fp4_flop_per_s * gpu_.bf16_ceiling_flop_per_s() / gpu_.bf16_flop_per_s
                                     : gpu_.bf16_ceiling_flop_per_s();
    default: return gpu_.bf16_ceiling_flop_per_s();
  }
}

OpLatency RooflineCostModel::latency(const Op& op) const {
  if (op.flops <= 0 && op.bytes <= 0) return {0.0, Provenance::roofline};
  const OpEfficiency& e = gpu_.eff(op.cls);
  const double tc = op.flops / (e.compute * peak_flop_per_s(op.math));
  const double tm = op.bytes / (e.memory * gpu_.hbm_ceiling_bytes_per_s());
  return {e.fixed_s + std::max(tc, tm), Provenance::roofline};
}

}  // namespace servesim
