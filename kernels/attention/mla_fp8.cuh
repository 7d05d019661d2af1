// servesim attention kernels: K3 / DeepSeek-V3-class MLA absorbed decode over a paged FP8 latent
// cache (issue 12, "FP8 KV variant").
//
// Cache layout (FlashMLA's FP8 KV cache, "fp8_ds_mla" dense form), 656 bytes per token:
//   [0, 512)    512 E4M3 values of the latent c_kv (NoPE part)
//   [512, 528)  4 fp32 scales, scale b multiplies values [128 b, 128 b + 128)
//   [528, 656)  64 BF16 values of the RoPE key k_pe
// Dequantised key (576 values) = [e4m3(v) * scale(v / 128) for the 512 | the 64 BF16]; V = its
// first 512 values (absorbed MLA, as mla_decode in mqa.cuh). Pages of page_size tokens (a multiple
// of 64) are contiguous: token t of page p at cache + (p * page_size + t) * 656.
//
// q [nq, H, 576] bf16, block_table [nq, max_pages], out [nq, H, 512] bf16, lse [nq, H] natural log
// (optional); the plan (mla_decode_plan or mqa_make_plan, mqa.cuh) and its o_part / lse_part
// scratch as for mla_decode. Errors: std::invalid_argument for a page size that is not a multiple
// of 64, a cache pointer that is not 16-B aligned, missing pointers or a plan of another batch.
#pragma once
#include "attention/mqa.cuh"

#include <cstdint>
#include <vector>

namespace servesim::attn {

constexpr int kMlaFp8TokenBytes = 656;  // 512 E4M3 + 4 x fp32 + 64 x bf16 (FlashMLA FP8 KV cache)
constexpr int kMlaFp8ScaleOff = 512;
constexpr int kMlaFp8RopeOff = 528;
constexpr int kMlaFp8Group = 128;  // values per fp32 scale

/// sm_90a kernel: one CTA = (64-head group, work item), 256 threads = two warpgroups, the
/// wgmma structure of mla_decode variant 0 (S = Q K^T by warpgroup 0, O += P V by both) with two
/// 16-bit KV tiles (FP16 latent + BF16 RoPE in the default variant 6) filled from the FP8 cache by the threads themselves (16-B loads into registers
/// while the tensor core runs, dequantised and stored into the swizzled tile after it). Any H
/// (the last 64-head group padded); MLA has no attention sink (a.sink must be null).
void mla_decode_fp8(const MqaArgs& a, const uint8_t* cache_fp8, const MqaPlan& plan, cudaStream_t s = 0);
/// Name of the kernel configuration (for the tables).
const char* mla_decode_fp8_config();
/// 4 (the default before the FP8-KV second pass, NOTES.md): the two warpgroups dequantise the column blocks their
/// own P V reads, between GEMMs (E4M3 -> fp32 x scale -> BF16, BF16 GEMMs). 5 (slower, 1.17x
/// v4's time; kept for the record): a third warpgroup (setmaxnreg 56) dequantises every tile while the two consumers
/// (setmaxnreg 224) run softmax and GEMMs. 6: variant 4 with the GEMMs in FP16: E4M3 -> FP16 is
/// exact (one cvt per pair) and the scale is one HMUL2 per pair, ~1 instruction per value instead of
/// ~3; Q's NoPE part (x a power of 2 that keeps it in the FP16 range) and P are FP16, the RoPE block
/// BF16. Needs dequantised latent values inside the FP16 range (|v| < 65504). 6 is the default and
/// the kernel of results/mla_decode_fp8kv.json (2.7% faster than 4 over its 702 shapes).
/// 11 (issue 12, fp8kv3; mla_fp8_seesaw.cuh): variant 6's FP16 GEMMs in the BF16 kernel's seesaw
/// schedule (two 64-row chains per SM ping-ponged over tile pairs), each 16-bit stage refilled from
/// the FP8 cache by the warpgroup that released it. Correct but 0.98x variant 6's speed (same run, 12 points; NOTES.md
/// "helper fp8kv3"): opt-in only.
/// 12 (issue 12, fp8kv4; mla_fp8_ring.cuh): variant 11 on 32-token tiles, refilled from a 3-slot FP8 staging ring
/// that cp.async.bulk fills. Correct but 0.86x variant 6's speed (NOTES.md "helper fp8kv4"): opt-in only.
/// 13 (fp8kv4): variant 6 with its shared-memory pointers kept in the shared address space (ld/st.shared instead of
/// generic); correct, 1.035x variant 6 in the same run (below the 1.05 gate): opt-in only.
void mla_decode_fp8_set_variant(int v);

/// Host: quantises one token's 576 latent values (512 NoPE + 64 RoPE) into the 656-B layout
/// (scale = max |v| / 448 of each 128-value group, 1 for an all-zero group; E4M3 round to nearest
/// even; RoPE rounded to BF16).
void mla_fp8_quantize_host(const float* lat576, uint8_t* out656);
/// Host: the 576 values the 656-B token stands for (E4M3 x fp32 scale, exact in double).
void mla_fp8_dequant_host(const uint8_t* tok656, double* out576);
/// Device: random tokens (E4M3 in [-448, 448], scales 2^-10 .. 2^-6 times [1, 2), RoPE in [-1, 1]).
void fill_mla_fp8_cache(uint8_t* p, size_t tokens, uint64_t seed, cudaStream_t s = 0);

}  // namespace servesim::attn
