#include "scenarios/model_spec.hpp"

namespace servesim {

int ModelSpec::count_attention(int a) const {
  int n = 0;
  for (const auto& l : layers) n += (l.attention == a);
  return n;
}

int ModelSpec::count_ffn(int f) const {
  int n = 0;
  for (const auto& l : layers) n += (l.ffn == f);
  return n;
}


const FfnSpec* ModelSpec::main_moe() const {
  const FfnSpec* best = nullptr;
  int best_n = 0;
  for (size_t i = 0; i < ffn_kinds.size(); ++i) {
    const int n = count_ffn(static_cast<int>(i));
    if (ffn_kinds[i].op == FfnOp::moe && n > best_n) best = &ffn_kinds[i], best_n = n;
  }
  return best;
}

std::string_view to_string(AttentionOp op) {
  switch (op) {
    case AttentionOp::kda: return "kda";
    case AttentionOp::mla: return "mla";
    case AttentionOp::csa: return "csa";
    case AttentionOp::hca: return "hca";
    case AttentionOp::swa: return "swa";
  }
  return "?";
}

}  // namespace servesim
