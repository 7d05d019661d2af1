// servesim attention kernels: flash-decoding MQA for K3 MLA decode and the V4 attention variants
// (see mqa.cuh): the host entry points (work plans, mla_decode's and v4_attn's dispatch over their
// kernel variants, the latent cache's tensor map, the launches). The kernels are in the parts
// included below, in the order they had when they were all in this file: mqa_fwd.cuh (the mma.sync
// flash-decoding kernel), mla_wgmma.cuh (MLA variant 0), v4_attn_wgmma.cuh (V4 variant 2),
// mla_wgmma4.cuh (MLA variant 3, mla_combine_kernel), mla_seesaw.cuh (4), mla_seesaw_rs.cuh
// (10-12), mla_seesaw_early.cuh (5), mla_seesaw_sp.cuh (13), mla_seesaw_p0.cuh (14), mla_seesaw_lz.cuh (15, added last). They stay one translation unit on purpose: compiled as
// separate .cu files, cicc chose different (equivalent) integer address arithmetic for the seven
// TMA kernels and ptxas spilled more in variant 10, so the split would not have been code-neutral.
#include "attention/mqa.cuh"
#include "attention/dsv4.cuh"
#include "attention/hopper.cuh"
#include "attention/tmap.cuh"
#include "attention/wg_store.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <string>
#include <type_traits>

namespace servesim::attn {

namespace {
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -INFINITY;
}  // namespace
}  // namespace servesim::attn

// the kernels (order matters: see above)
#include "attention/mqa_fwd.cuh"
#include "attention/mla_wgmma.cuh"
#include "attention/v4_attn_wgmma.cuh"
#include "attention/mla_wgmma4.cuh"
#include "attention/mla_seesaw.cuh"
#include "attention/mla_seesaw_rs.cuh"
#include "attention/mla_seesaw_early.cuh"
#include "attention/mla_seesaw_sp.cuh"
#include "attention/mla_seesaw_p0.cuh"
#include "attention/mla_seesaw_lz.cuh"

namespace servesim::attn {

namespace {
// Tensor map of the paged latent cache viewed as [rows, 576] bf16, box 64 x 64, 128-B swizzle.
CUtensorMap latent_cache_map(const bf16* cache, long rows, int box_rows) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  CUtensorMap m;
  const cuuint64_t dims[2] = {576, static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {576 * 2};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t estr[2] = {1, 1};
  const CUresult r = encode(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(cache), dims, strides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw std::runtime_error("mla_decode: cuTensorMapEncodeTiled failed (" + std::to_string(r) + ")");
  return m;
}

// SERVESIM_MLA_NOLOAD=1 (timing diagnostic only, wrong results): variant 4 loads tiles 0 and 1
// and then reuse them instead of loading the later pages, i.e. the seesaw schedule without page loads.
int seesaw_noload() {
  static int v = [] {
    const char* e = std::getenv("SERVESIM_MLA_NOLOAD");
    return e && std::atoi(e) == 1 ? -1 : 0;
  }();
  return v;
}
// SERVESIM_MLA_SMEM_GENERIC=1 (smemfix, comparison only): variant 12 runs its old form, the shared-memory
// base aligned through a uintptr_t cast (generic ld/st); default: the shared-space form (kSh, mla_seesaw_rs.cuh)
bool mla_smem_generic() {
  static const bool g = [] { const char* e = std::getenv("SERVESIM_MLA_SMEM_GENERIC"); return e && std::atoi(e) == 1; }();
  return g;
}
void launch_mla_wgmma(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s, bool ns4, int seesaw = 0) {
  if (a.H <= 0) throw std::invalid_argument("mqa: head count must be positive");
  if (!a.q || !a.out) throw std::invalid_argument("mqa: q and out are required");
  if (plan.n_slots > 0 && (!a.o_part || !a.lse_part)) throw std::invalid_argument("mqa: split plan needs o_part/lse_part");
  if (plan.nq != a.nq) throw std::invalid_argument("mqa: plan built for another query count");
  static bool attr = false, attr4 = false;
  if (!ns4 && !attr) {
    SS_CUDA(cudaFuncSetAttribute(mla_decode_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, wgk::kSmem));
    attr = true;
  }
  if (ns4 && !attr4) {
    SS_CUDA(cudaFuncSetAttribute(mla_decode_wgmma4_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, wgk4::kSmem));
    attr4 = true;
  }
  static bool attrS = false;
  if (seesaw && !attrS) {
    SS_CUDA(cudaFuncSetAttribute(mla_decode_seesaw_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, wgs::kSmem));
    SS_CUDA(cudaFuncSetAttribute(mla_decode_seesaw_rs_kernel<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, wgs::kSmem));
    SS_CUDA(cudaFuncSetAttribute(mla_decode_seesaw_rs_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, wgs::kSmem));
    SS_CUDA(cudaFuncSetAttribute(mla_decode_seesaw_rs_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, wgs::kSmem));
    SS_CUDA(cudaFuncSetAttribute(mla_decode_seesaw_rs_kernel<2, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, wgs::kSmem));
    SS_CUDA(cudaFuncSetAttribute(mla_decode_seesaw2_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, wgs::kSmem));
    SS_CUDA(cudaFuncSetAttribute(mla_decode_seesaw_sp_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, wgs::kSmemSp));
    SS_CUDA(cudaFuncSetAttribute(mla_decode_seesaw_p0_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, wgs::kSmemSp));
    SS_CUDA(cudaFuncSetAttribute(mla_decode_seesaw_lz_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, wgs::kSmemSp));
    attrS = true;
  }
  const long pages = a.cache_pages > 0 ? a.cache_pages : (1L << 24);
  const CUtensorMap tm = latent_cache_map(a.cache, pages * a.page_size, ns4 ? 32 : 64);
  const int groups = (a.H + 63) / 64;
  if (plan.n_work > 0) {
    if (seesaw == 2) mla_decode_seesaw2_kernel<<<dim3(groups, plan.n_work), 256, wgs::kSmem, s>>>(tm, a, plan.work.p);
    else if (seesaw == 7) mla_decode_seesaw_rs_kernel<0><<<dim3(groups, plan.n_work), 256, wgs::kSmem, s>>>(tm, a, plan.work.p);
    else if (seesaw == 8) mla_decode_seesaw_rs_kernel<1><<<dim3(groups, plan.n_work), 256, wgs::kSmem, s>>>(tm, a, plan.work.p);
    else if (seesaw == 9 && mla_smem_generic()) mla_decode_seesaw_rs_kernel<2><<<dim3(groups, plan.n_work), 256, wgs::kSmem, s>>>(tm, a, plan.work.p);
    else if (seesaw == 9) mla_decode_seesaw_rs_kernel<2, true><<<dim3(groups, plan.n_work), 256, wgs::kSmem, s>>>(tm, a, plan.work.p);
    else if (seesaw == 10) mla_decode_seesaw_sp_kernel<<<dim3(groups, plan.n_work), 256, wgs::kSmemSp, s>>>(tm, a, plan.work.p);
    else if (seesaw == 11) mla_decode_seesaw_p0_kernel<<<dim3(groups, plan.n_work), 256, wgs::kSmemSp, s>>>(tm, a, plan.work.p);
    else if (seesaw == 12) mla_decode_seesaw_lz_kernel<<<dim3(groups, plan.n_work), 256, wgs::kSmemSp, s>>>(tm, a, plan.work.p);
    else if (seesaw) mla_decode_seesaw_kernel<<<dim3(groups, plan.n_work), 256, wgs::kSmem, s>>>(tm, a, plan.work.p, seesaw_noload());
    else if (ns4) mla_decode_wgmma4_kernel<<<dim3(groups, plan.n_work), 256, wgk4::kSmem, s>>>(tm, a, plan.work.p);
    else mla_decode_wgmma_kernel<<<dim3(groups, plan.n_work), 256, wgk::kSmem, s>>>(tm, a, plan.work.p);
    SS_LAUNCH_CHECK();
  }
  if (plan.n_slots > 0) {
    mla_combine_kernel<<<dim3(a.nq, a.H), 128, 0, s>>>(a, plan.q_slot_begin.p);
    SS_LAUNCH_CHECK();
  }
}

MqaPlan plan_from_split(const std::vector<int>& rows, long per_rows) {
  MqaPlan p;
  p.nq = static_cast<int>(rows.size());
  std::vector<int4> work;
  std::vector<int> qsb(1, 0);
  int slot = 0;
  for (int q = 0; q < p.nq; ++q) {
    const int n = std::max(rows[q], 0);
    const int ns = static_cast<int>(std::max<long>(1, (n + per_rows - 1) / per_rows));
    if (ns == 1) {
      work.push_back(make_int4(q, 0, n, -1));
    } else {
      int len = (n + ns - 1) / ns;
      len = (len + 63) / 64 * 64;
      for (int b = 0; b < n; b += len) work.push_back(make_int4(q, b, std::min(n, b + len), slot++));
    }
    qsb.push_back(slot);
  }
  std::stable_sort(work.begin(), work.end(), [](const int4& x, const int4& y) { return (x.z - x.y) > (y.z - y.y); });
  p.n_work = static_cast<int>(work.size());
  p.n_slots = slot;
  p.work.upload(work);
  p.q_slot_begin.upload(qsb);
  return p;
}
}  // namespace

namespace {
// The rule of v4_attn_plan (-2: not read yet: from env SERVESIM_V4_PLAN_RULE, "0" or "1"; -1: unset, kV4PlanRuleDefault). Rule 1 since the
// nineteenth session (helper v4p, call 1, same run, best of 2): at the 8 CSA prefill table points at prefix 0 that
// rule 0 split (64 heads chunks 2048 / 3072, 128 heads 1536 - 8192) the unsplit plan was 1.44-1.84x faster (64 x
// 2048: 595.8 -> 343.1 us; ncu: split attention kernel 443 us + combine 149 us, unsplit kernel 349 us); every other
// CSA / HCA prefill point measured has the same plan under both rules.
int g_v4_plan_rule = -2;
constexpr int kV4PlanRuleDefault = 1;
int v4_plan_rule() {
  if (g_v4_plan_rule == -2) {
    const char* e = std::getenv("SERVESIM_V4_PLAN_RULE");
    const std::string v = e ? e : "";
    if (!v.empty() && v != "0" && v != "1") throw std::invalid_argument("SERVESIM_V4_PLAN_RULE must be 0 or 1, not \"" + v + "\"");
    g_v4_plan_rule = v.empty() ? -1 : v[0] - '0';
  }
  return g_v4_plan_rule < 0 ? kV4PlanRuleDefault : g_v4_plan_rule;
}
// Work items of one query of t tiles at `per` tiles per item (plan_from_split's cut, in tiles).
template <class F>
void items_of(long t, long per, F&& f) {
  const long ns = std::max<long>(1, (t + per - 1) / per);
  if (ns == 1) return f(t);
  const long len = (t + ns - 1) / ns;  // plan_from_split cuts rows into ceil(n / ns) rounded up to 64: in tiles
  for (long b = 0; b < t; b += len) f(std::min(t, b + len) - b);
}
// List schedule of the items (longest first, each to the CTA slot free first) on W slots; an item costs its tiles + 2.
long list_makespan(const std::vector<int>& rows, long per, long W) {
  std::vector<long> c;
  for (int r : rows) items_of((std::max(r, 0) + 63) / 64, per, [&](long t) { c.push_back(t + 2); });
  std::sort(c.begin(), c.end(), std::greater<long>());
  std::priority_queue<long, std::vector<long>, std::greater<long>> slots;
  for (long i = 0; i < W; ++i) slots.push(0);
  long end = 0;
  for (long x : c) {
    const long t = slots.top() + x;
    slots.pop();
    slots.push(t);
    end = std::max(end, t);
  }
  return end;
}
}  // namespace

void v4_attn_plan_set_rule(int rule) {
  if (rule < -1 || rule > 1) throw std::invalid_argument("v4_attn_plan_set_rule: rule must be -1, 0 or 1");
  g_v4_plan_rule = rule == -1 ? -2 : rule;  // -1: back to the environment's choice (read again at the next plan)
}
int v4_attn_plan_rule() { return v4_plan_rule(); }

long mla_decode_plan_tiles(const std::vector<int>& rows, int H, int sms, int rule) {
  if (rule < 0 || rule > 1) throw std::invalid_argument("mla_decode_plan_tiles: rule must be 0 or 1");
  const int groups = std::max(1, (H + 63) / 64);
  const long W = std::max(1, sms / groups);  // CTAs of one head group per wave (1 CTA/SM)
  long tmax = 1;
  for (int r : rows) tmax = std::max<long>(tmax, (std::max(r, 0) + 63) / 64);
  // candidate tiles per work item: ceil(tmax / s), at least 4 (256 rows); cost = waves x (per + 2)
  long best_per = tmax;
  double best_cost = 1e300;
  for (long s = 1; s <= std::min<long>(tmax, 1024); ++s) {
    const long per = std::max<long>(4, (tmax + s - 1) / s);
    long items = 0;
    for (int r : rows) items += std::max<long>(1, ((std::max(r, 0) + 63) / 64 + per - 1) / per);
    const double cost = static_cast<double>((items + W - 1) / W) * (per + 2);
    if (cost < best_cost - 1e-9) { best_cost = cost; best_per = per; }
    if (per == 4) break;
  }
  // Rule 1 (nineteenth session, helper v4p): the wave cost counts every item as `per` tiles long, so a causal ramp
  // (prefill at prefix 0: most lists short, the last ones long) looked like whole waves of long items and was split,
  // paying FP32 partials + the combine kernel (and no staged epilogue) for a tail that the unsplit items' own list
  // schedule already fills: there the unsplit plan is taken where its list schedule ends no later than the split
  // one's. Lists of equal length keep rule 0's choice (the list schedule of the split items is then never longer
  // than the unsplit one's: host test V4Attn.PlanRuleUnsplitsTheRamp).
  if (rule == 1 && best_per < tmax && list_makespan(rows, tmax, W) <= list_makespan(rows, best_per, W)) best_per = tmax;
  return best_per;
}

MqaPlan mla_decode_plan(const std::vector<int>& rows, int H) {
  return plan_from_split(rows, mla_decode_plan_tiles(rows, H, device_sm_count(), 0) * 64);
}
MqaPlan v4_attn_plan(const std::vector<int>& rows, int H) {
  return plan_from_split(rows, mla_decode_plan_tiles(rows, H, device_sm_count(), v4_plan_rule()) * 64);
}

MqaPlan mqa_make_plan(const std::vector<int>& rows, int target_items, int min_split_rows, int force_split_rows) {
  MqaPlan p;
  p.nq = static_cast<int>(rows.size());
  if (target_items <= 0) target_items = 2 * device_sm_count();
  long total = 0;
  for (int r : rows) total += std::max(r, 0);
  const int tile = 64;
  long per = force_split_rows > 0 ? force_split_rows
                                  : std::max<long>(min_split_rows, (total + target_items - 1) / std::max(1, target_items));
  per = (per + tile - 1) / tile * tile;
  std::vector<int4> work;
  std::vector<int> qsb(1, 0);
  int slot = 0;
  for (int q = 0; q < p.nq; ++q) {
    const int n = std::max(rows[q], 0);
    const int ns = static_cast<int>(std::max<long>(1, (n + per - 1) / per));
    if (ns == 1) {
      work.push_back(make_int4(q, 0, n, -1));
    } else {
      int len = (n + ns - 1) / ns;
      len = (len + tile - 1) / tile * tile;
      for (int b = 0; b < n; b += len) work.push_back(make_int4(q, b, std::min(n, b + len), slot++));
    }
    qsb.push_back(slot);
  }
  std::stable_sort(work.begin(), work.end(), [](const int4& x, const int4& y) { return (x.z - x.y) > (y.z - y.y); });
  p.n_work = static_cast<int>(work.size());
  p.n_slots = slot;
  p.work.upload(work);
  p.q_slot_begin.upload(qsb);
  return p;
}

void mla_combine(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s) {
  if (plan.n_slots > 0) {
    mla_combine_kernel<<<dim3(a.nq, a.H), 128, 0, s>>>(a, plan.q_slot_begin.p);
    SS_LAUNCH_CHECK();
  }
}

const char* mla_decode_config(int H, int variant) {
  if (variant == 0) return "wgmma_tma_m64_tn64";
  if (variant == 3) return "wgmma_tma_m64_tn32_ns4";
  if (variant == 4) return "wgmma_tma_m64_tn64_seesaw";
  if (variant == 5) return "wgmma_tma_m64_tn64_seesaw_early_pv0";
  if (variant == 10) return "wgmma_tma_m64_tn64_seesaw_rsp";
  if (variant == 11) return "wgmma_tma_m64_tn64_seesaw_rsp_s0first";
  if (variant == 12) return "wgmma_tma_m64_tn64_seesaw_rsp_fastsm";
  if (variant == 13) return "wgmma_tma_m64_tn64_seesaw_rsp_sp0";
  if (variant == 14) return "wgmma_tma_m64_tn64_seesaw_rsp_fastsm_p0buf";
  if (variant == 15) return "wgmma_tma_m64_tn64_seesaw_rsp_sp0_lazy";
  if (H >= 48 && H % 48 == 0) return variant == 1 ? "mt3_tn32_ns2" : "mt3_tn64_ns2";
  return H > 16 ? "mt2_tn32_ns3" : "mt1_tn32_ns3";
}
void mla_decode(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s, int variant) {
  if (!a.cache || !a.block_table) throw std::invalid_argument("mla_decode: cache and block_table required");
  if (variant >= 6 && variant <= 9)
    throw std::invalid_argument("mla_decode: variants 6-9 were removed (issue 12, eleventh session; NOTES.md)");
  if (variant >= 0 && variant <= 15 && variant != 1 && variant != 2 && a.page_size % 64 == 0) {
    launch_mla_wgmma(a, plan, s, variant == 3,
                     variant == 4 ? 1 : variant == 5 ? 2 : variant == 10 ? 7 : variant == 11 ? 8 : variant == 12 ? 9 : variant == 13 ? 10 : variant == 14 ? 11 : variant == 15 ? 12 : 0);
  } else if (a.H >= 48 && a.H % 48 == 0) {
    if (variant == 1) launch_mqa<576, 3, 32, 2, false>(a, plan, s);
    else launch_mqa<576, 3, 64, 2, false>(a, plan, s);
  } else if (a.H > 16) {
    launch_mqa<576, 2, 32, 3, false>(a, plan, s);
  } else {
    launch_mqa<576, 1, 32, 3, false>(a, plan, s);
  }
}
namespace {
int g_v4_attn_variant = 0;
// The V4 kernel that variant 0 means at H % 64 == 0: 2 = v4_attn_wgmma_kernel (issue 12, second
// session), 3 = the warp-specialised v4_attn_ws (dsv4.cu, issue 12, seventh session).
constexpr int kV4AttnDefault = 3;  // 1.2-1.6x variant 2 at every point measured (NOTES.md, seventh session)
int v4_attn_effective(int H) {
  const int v = g_v4_attn_variant == 0 ? kV4AttnDefault : g_v4_attn_variant;
  return (H % 64 == 0 && (v == 2 || v == 3)) ? v : 1;
}
}  // namespace
const char* v4_attn_config(int H) {
  if (v4_attn_effective(H) == 3) return "wgmma_ws_m64_tn64";
  if (v4_attn_effective(H) == 2) return "wgmma_m64_tn64";
  if (H % 64 == 0) return "mt4_tn64_ns2";
  return H > 16 ? "mt2_tn32_ns3" : "mt1_tn32_ns3";
}
void v4_attn_set_variant(int v) { g_v4_attn_variant = v; }
bool v4_attn_uses_wgmma(int H) { return v4_attn_effective(H) != 1; }

void v4_attn(const MqaArgs& a, const MqaPlan& plan, cudaStream_t s) {
  if (!a.pool || !a.indices) throw std::invalid_argument("v4_attn: pool and indices required");
  // The pool's row stride is the caller's (MqaArgs::pool_row_bytes, 0 = 584); the kernel chosen below reads
  // v4_attn_pool_row_bytes(H, idx_ld) bytes per row: a mismatch would read wrong bytes silently (host check,
  // before any CUDA call).
  {
    const int want = v4_attn_pool_row_bytes(a.H, a.idx_ld);
    const int got = a.pool_row_bytes != 0 ? a.pool_row_bytes : kV4RowBytes;
    if (got != want)
      throw std::invalid_argument("v4_attn: the pool's rows are " + std::to_string(got) + " B (MqaArgs::pool_row_bytes = " +
                                  std::to_string(a.pool_row_bytes) + (a.pool_row_bytes ? "" : ", not stated: read as 584") +
                                  ") but the kernel form for H=" + std::to_string(a.H) + ", idx_ld=" + std::to_string(a.idx_ld) +
                                  " (" + v4_attn_config(a.H) + ") reads " + std::to_string(want) +
                                  "-B rows (v4_attn_pool_row_bytes): store the pool at that stride and state it");
  }
  if (v4_attn_effective(a.H) == 3) {
    v4_attn_ws(a, plan, s);
    return;
  }
  if (v4_attn_uses_wgmma(a.H)) {
    if (!a.q || !a.out) throw std::invalid_argument("v4_attn: q and out are required");
    if (plan.n_slots > 0 && (!a.o_part || !a.lse_part)) throw std::invalid_argument("v4_attn: split plan needs o_part/lse_part");
    if (plan.nq != a.nq) throw std::invalid_argument("v4_attn: plan built for another query count");
    static bool attr = false;
    if (!attr) {
      SS_CUDA(cudaFuncSetAttribute(v4_attn_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, v4k::kSmem));
      attr = true;
    }
    if (plan.n_work > 0) {
      v4_attn_wgmma_kernel<<<dim3(a.H / 64, plan.n_work), 256, v4k::kSmem, s>>>(a, plan.work.p);
      SS_LAUNCH_CHECK();
    }
    if (plan.n_slots > 0) {
      mla_combine_kernel<<<dim3(a.nq, a.H), 128, 0, s>>>(a, plan.q_slot_begin.p);
      SS_LAUNCH_CHECK();
    }
    return;
  }
  if (a.H % 64 == 0) launch_mqa<512, 4, 64, 2, true>(a, plan, s);
  else if (a.H > 16) launch_mqa<512, 2, 32, 3, true>(a, plan, s);
  else launch_mqa<512, 1, 32, 3, true>(a, plan, s);
}

}  // namespace servesim::attn
