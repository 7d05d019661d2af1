// GPU communication measurements on one host (issue #4): NVLink all-to-all between two GPUs
// (NCCL send/recv, NCCL all-to-all, copy-engine peer copies), plain peer-to-peer copy bandwidth
// (copy engine and SM load/store kernels, one and both directions), and host<->device copies
// (pinned and pageable). Writes servesim.kernel-table/1 JSON files:
//   comm_nvlink_alltoall.json, comm_p2p_copy.json, comm_h2d.json, comm_d2h.json
// NCCL is loaded at run time with dlopen (path from $SERVESIM_NCCL_LIB or the usual places), so
// the binary builds and runs without linking NCCL; NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
// Usage: bench_comm --out DIR [--deadline-s S] [--quick] [--max-bytes B]
#include "common/bench.cuh"

#include <dlfcn.h>
#include <glob.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace servesim::kernels;
using json = nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;
Clock::time_point g_t0 = Clock::now();
double g_deadline = 1e9;
bool time_left() { return std::chrono::duration<double>(Clock::now() - g_t0).count() < g_deadline; }
std::vector<std::string> g_summary;
void note(const std::string& s) {
  std::printf("%s\n", s.c_str());
  std::fflush(stdout);
  g_summary.push_back(s);
}

/// Powers of two and 1.5x points in between, in [lo, hi] bytes.
std::vector<size_t> grid(size_t lo, size_t hi) {
  std::vector<size_t> v;
  for (size_t p = 1; p <= hi; p *= 2) {
    if (p >= lo) v.push_back(p);
    const size_t m = p * 3 / 2;
    if (m > p && m >= lo && m <= hi && m % 16 == 0) v.push_back(m);
  }
  std::sort(v.begin(), v.end());
  return v;
}

// ---- NCCL through dlopen --------------------------------------------------------------------------
struct Nccl {
  void* lib = nullptr;
  std::string path;
  decltype(&ncclCommInitAll) CommInitAll = nullptr;
  decltype(&ncclCommDestroy) CommDestroy = nullptr;
  decltype(&ncclGroupStart) GroupStart = nullptr;
  decltype(&ncclGroupEnd) GroupEnd = nullptr;
  decltype(&ncclSend) Send = nullptr;
  decltype(&ncclRecv) Recv = nullptr;
  decltype(&ncclGetErrorString) ErrStr = nullptr;
  decltype(&ncclGetVersion) GetVersion = nullptr;
  void* AlltoAll = nullptr;  // ncclAlltoAll (NCCL >= 2.28), optional
  bool load() {
    std::vector<std::string> cands;
    if (const char* e = std::getenv("SERVESIM_NCCL_LIB")) cands.push_back(e);
    cands.push_back("libnccl.so.2");
    cands.push_back("/usr/local/cuda/lib64/libnccl.so.2");
    glob_t g;
    for (const char* pat : {"/opt/*/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
                            "/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
                            "/usr/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2"}) {
      if (glob(pat, 0, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) cands.push_back(g.gl_pathv[i]);
      globfree(&g);
    }
    for (const auto& c : cands) {
      lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib) { path = c; break; }
    }
    if (!lib) return false;
    CommInitAll = reinterpret_cast<decltype(CommInitAll)>(dlsym(lib, "ncclCommInitAll"));
    CommDestroy = reinterpret_cast<decltype(CommDestroy)>(dlsym(lib, "ncclCommDestroy"));
    GroupStart = reinterpret_cast<decltype(GroupStart)>(dlsym(lib, "ncclGroupStart"));
    GroupEnd = reinterpret_cast<decltype(GroupEnd)>(dlsym(lib, "ncclGroupEnd"));
    Send = reinterpret_cast<decltype(Send)>(dlsym(lib, "ncclSend"));
    Recv = reinterpret_cast<decltype(Recv)>(dlsym(lib, "ncclRecv"));
    ErrStr = reinterpret_cast<decltype(ErrStr)>(dlsym(lib, "ncclGetErrorString"));
    GetVersion = reinterpret_cast<decltype(GetVersion)>(dlsym(lib, "ncclGetVersion"));
    AlltoAll = dlsym(lib, "ncclAlltoAll");
    return CommInitAll && CommDestroy && GroupStart && GroupEnd && Send && Recv && ErrStr;
  }
};
Nccl nccl;
#define SS_NCCL(call)                                                                                  \
  do {                                                                                                 \
    ncclResult_t r_ = (call);                                                                          \
    if (r_ != ncclSuccess)                                                                             \
      throw std::runtime_error(std::string(#call) + " failed: " + (nccl.ErrStr ? nccl.ErrStr(r_) : "?")); \
  } while (0)

// ---- two-device timing ------------------------------------------------------------------------------
struct Dev2 {
  cudaStream_t s[2];
  cudaEvent_t start, mid1, end;
  void init() {
    for (int d = 0; d < 2; ++d) {
      SS_CUDA(cudaSetDevice(d));
      SS_CUDA(cudaStreamCreateWithFlags(&s[d], cudaStreamNonBlocking));
    }
    SS_CUDA(cudaSetDevice(1));
    SS_CUDA(cudaEventCreate(&mid1));
    SS_CUDA(cudaSetDevice(0));
    SS_CUDA(cudaEventCreate(&start));
    SS_CUDA(cudaEventCreate(&end));
  }
};

/// Times `op` (which enqueues on d.s[0] and/or d.s[1]) from a start event on device 0 (device 1
/// waits on it) to the later of both streams' ends. Warm-up 2, then >= min_runs runs and until
/// ~min_ms of timed work (at most 50 runs); median/p10/p90 in microseconds.
Timing time2(Dev2& d, const std::function<void()>& op, int min_runs = 10, double min_ms = 30) {
  std::vector<double> us;
  double tot = 0;
  for (int i = 0; i < 2 + 50; ++i) {
    if (i >= 2 + min_runs && tot >= min_ms) break;
    SS_CUDA(cudaSetDevice(0));
    SS_CUDA(cudaEventRecord(d.start, d.s[0]));
    SS_CUDA(cudaSetDevice(1));
    SS_CUDA(cudaStreamWaitEvent(d.s[1], d.start, 0));
    op();
    SS_CUDA(cudaSetDevice(1));
    SS_CUDA(cudaEventRecord(d.mid1, d.s[1]));
    SS_CUDA(cudaSetDevice(0));
    SS_CUDA(cudaStreamWaitEvent(d.s[0], d.mid1, 0));
    SS_CUDA(cudaEventRecord(d.end, d.s[0]));
    SS_CUDA(cudaEventSynchronize(d.end));
    SS_CUDA(cudaGetLastError());
    float ms = 0;
    SS_CUDA(cudaEventElapsedTime(&ms, d.start, d.end));
    if (i >= 2) { us.push_back(1000.0 * ms); tot += ms; }
  }
  std::sort(us.begin(), us.end());
  auto q = [&](double f) { return us[static_cast<size_t>(std::lround(f * (us.size() - 1)))]; };
  return Timing{q(0.5), q(0.1), q(0.9), static_cast<int>(us.size())};
}

/// SM copy over NVLink: plain 16-byte loads and stores, grid-stride (src or dst may be a peer's).
__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n16) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n16;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}
void sm_copy(const void* src, void* dst, size_t bytes, cudaStream_t s, int sms) {
  const size_t n16 = bytes / 16;
  const int blocks = static_cast<int>(std::min<size_t>((n16 + 511) / 512, size_t(sms) * 4));
  copy_kernel<<<std::max(blocks, 1), 512, 0, s>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), n16);
}

__global__ void fill_kernel(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = static_cast<uint32_t>(i * 2654435761u) ^ seed;
}

uint32_t pattern(size_t i, uint32_t seed) { return static_cast<uint32_t>(i * 2654435761u) ^ seed; }
void fill(uint32_t* p, size_t n, uint32_t seed, cudaStream_t s) {
  fill_kernel<<<1024, 256, 0, s>>>(p, n, seed);
  SS_LAUNCH_CHECK();
}

struct Ctx {
  GpuInfo gpu;
  std::string out;
  bool quick = false;
  size_t max_bytes = size_t(1) << 30;
  Dev2 d;
  int sms = 132;
  bool peer = false;
};

json dt_bytes() { return {{"data", "bytes"}}; }

// ---- all-to-all --------------------------------------------------------------------------------------
void bench_alltoall(Ctx& c) {
  Table tab("comm_nvlink_alltoall", "any",
            "All-to-all between the 2 GPUs of one host over NVLink: each GPU sends bytes_per_peer to the other and "
            "keeps bytes_per_peer for itself. Variants: nccl_sendrecv (ncclSend/ncclRecv in one group, as PyTorch "
            "all_to_all_single does), nccl_alltoall (ncclAlltoAll when the library has it), ce_peer_copy (each GPU "
            "cudaMemcpyPeerAsync's its chunk to the other plus a local copy: the CUDA IPC peer-copy path in one process). "
            "One process drives both GPUs; time from a common start event to the later GPU's end",
            "0", "bytes_per_peer (bytes one GPU sends over NVLink; tbps is the per-direction algorithm bandwidth)", c.gpu);
  if (!nccl.load()) {
    note("NCCL not found (set SERVESIM_NCCL_LIB): nccl variants skipped");
  } else {
    int v = 0;
    if (nccl.GetVersion) nccl.GetVersion(&v);
    note("NCCL loaded from " + nccl.path + " version " + std::to_string(v));
  }
  ncclComm_t comms[2] = {nullptr, nullptr};
  const int devs[2] = {0, 1};
  if (nccl.lib) SS_NCCL(nccl.CommInitAll(comms, 2, devs));
  const size_t maxb = c.max_bytes;
  void *sb[2], *rb[2];
  for (int g = 0; g < 2; ++g) {
    SS_CUDA(cudaSetDevice(g));
    SS_CUDA(cudaMalloc(&sb[g], 2 * maxb));
    SS_CUDA(cudaMalloc(&rb[g], 2 * maxb));
    fill(static_cast<uint32_t*>(sb[g]), 2 * maxb / 4, 100 + g, c.d.s[g]);
    SS_CUDA(cudaStreamSynchronize(c.d.s[g]));
  }
  auto nccl_sendrecv = [&](size_t S) {
    SS_NCCL(nccl.GroupStart());
    for (int g = 0; g < 2; ++g)
      for (int p = 0; p < 2; ++p) {
        SS_NCCL(nccl.Send(static_cast<char*>(sb[g]) + p * S, S, ncclInt8, p, comms[g], c.d.s[g]));
        SS_NCCL(nccl.Recv(static_cast<char*>(rb[g]) + p * S, S, ncclInt8, p, comms[g], c.d.s[g]));
      }
    SS_NCCL(nccl.GroupEnd());
  };
  using A2A = ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  auto nccl_a2a = [&](size_t S) {
    SS_NCCL(nccl.GroupStart());
    for (int g = 0; g < 2; ++g) SS_NCCL(reinterpret_cast<A2A>(nccl.AlltoAll)(sb[g], rb[g], S, ncclInt8, comms[g], c.d.s[g]));
    SS_NCCL(nccl.GroupEnd());
  };
  auto ce = [&](size_t S) {
    for (int g = 0; g < 2; ++g) {
      SS_CUDA(cudaSetDevice(g));
      const int p = 1 - g;
      SS_CUDA(cudaMemcpyPeerAsync(static_cast<char*>(rb[p]) + g * S, p, static_cast<char*>(sb[g]) + p * S, g, S, c.d.s[g]));
      SS_CUDA(cudaMemcpyAsync(static_cast<char*>(rb[g]) + g * S, static_cast<char*>(sb[g]) + g * S, S,
                              cudaMemcpyDeviceToDevice, c.d.s[g]));
    }
  };
  // correctness: rb[g] chunk p must equal sb[p] chunk g
  auto check = [&](const char* name, const std::function<void(size_t)>& op) {
    const size_t S = size_t(1) << 20;
    for (int g = 0; g < 2; ++g) { SS_CUDA(cudaSetDevice(g)); SS_CUDA(cudaMemset(rb[g], 0, 2 * S)); }
    op(S);
    for (int g = 0; g < 2; ++g) { SS_CUDA(cudaSetDevice(g)); SS_CUDA(cudaDeviceSynchronize()); }
    size_t bad = 0;
    std::vector<uint32_t> h(S / 4);
    for (int g = 0; g < 2; ++g)
      for (int p = 0; p < 2; ++p) {
        SS_CUDA(cudaSetDevice(g));
        SS_CUDA(cudaMemcpy(h.data(), static_cast<char*>(rb[g]) + p * S, S, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < S / 4; ++i) bad += h[i] != pattern(g * S / 4 + i, 100 + p);
      }
    note(std::string("check ") + name + " 1 MiB per peer: " + (bad ? "FAIL (" + std::to_string(bad) + " words)" : "PASS"));
    if (bad) throw std::runtime_error(std::string("all-to-all data mismatch: ") + name);
  };
  if (nccl.lib) check("nccl_sendrecv", nccl_sendrecv);
  if (nccl.AlltoAll) check("nccl_alltoall", nccl_a2a);
  if (c.peer) check("ce_peer_copy", ce);
  for (size_t S : c.quick ? std::vector<size_t>{1024, 1 << 20, 64 << 20} : grid(1024, maxb)) {
    if (!time_left()) break;
    json shape = {{"world", 2}, {"bytes_per_peer", S}, {"devices", {0, 1}}};
    auto add = [&](const char* v, const Timing& t) {
      tab.add(v, shape, dt_bytes(), t, 0, double(S));
      if (S == (size_t(64) << 20) || S == maxb)
        note(std::string("alltoall ") + v + " " + std::to_string(S >> 20) + " MiB/peer: " + std::to_string(t.us_median) +
             " us, " + std::to_string(S / t.us_median / 1e3) + " GB/s per direction");
    };
    if (nccl.lib) add("nccl_sendrecv", time2(c.d, [&] { nccl_sendrecv(S); }));
    if (nccl.AlltoAll) add("nccl_alltoall", time2(c.d, [&] { nccl_a2a(S); }));
    if (c.peer) add("ce_peer_copy", time2(c.d, [&] { ce(S); }));
  }
  tab.write(c.out);
  for (int g = 0; g < 2; ++g) {
    SS_CUDA(cudaSetDevice(g));
    cudaFree(sb[g]);
    cudaFree(rb[g]);
    if (comms[g]) nccl.CommDestroy(comms[g]);
  }
  SS_CUDA(cudaSetDevice(0));
}

// ---- peer-to-peer copies ------------------------------------------------------------------------------
void bench_p2p(Ctx& c) {
  Table tab("comm_p2p_copy", "any",
            "Peer-to-peer copy between the 2 GPUs over NVLink: ce_* = cudaMemcpyPeerAsync (copy engines), sm_* = a "
            "copy kernel of 16-byte loads/stores on the source GPU writing the peer's memory (peer access on); *_uni = "
            "GPU0 -> GPU1 only, *_bidir = both directions at once (bytes and tbps per direction)",
            "0", "bytes copied in one direction", c.gpu);
  if (!c.peer) { note("peer access unavailable: comm_p2p_copy skipped"); tab.write(c.out); return; }
  const size_t maxb = c.max_bytes;
  void *a[2], *b[2];
  for (int g = 0; g < 2; ++g) {
    SS_CUDA(cudaSetDevice(g));
    SS_CUDA(cudaMalloc(&a[g], maxb));
    SS_CUDA(cudaMalloc(&b[g], maxb));
    fill(static_cast<uint32_t*>(a[g]), maxb / 4, 7 + g, c.d.s[g]);
    SS_CUDA(cudaDeviceSynchronize());
  }
  auto ce = [&](size_t S, bool bi) {
    SS_CUDA(cudaSetDevice(0));
    SS_CUDA(cudaMemcpyPeerAsync(b[1], 1, a[0], 0, S, c.d.s[0]));
    if (bi) {
      SS_CUDA(cudaSetDevice(1));
      SS_CUDA(cudaMemcpyPeerAsync(b[0], 0, a[1], 1, S, c.d.s[1]));
    }
  };
  auto sm = [&](size_t S, bool bi) {
    SS_CUDA(cudaSetDevice(0));
    sm_copy(a[0], b[1], S, c.d.s[0], c.sms);
    if (bi) {
      SS_CUDA(cudaSetDevice(1));
      sm_copy(a[1], b[0], S, c.d.s[1], c.sms);
    }
  };
  {  // correctness of the SM copy over NVLink
    const size_t S = size_t(8) << 20;
    sm(S, true);
    for (int g = 0; g < 2; ++g) { SS_CUDA(cudaSetDevice(g)); SS_CUDA(cudaDeviceSynchronize()); }
    std::vector<uint32_t> h(S / 4);
    size_t bad = 0;
    for (int g = 0; g < 2; ++g) {
      SS_CUDA(cudaSetDevice(1 - g));
      SS_CUDA(cudaMemcpy(h.data(), b[1 - g], S, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < S / 4; ++i) bad += h[i] != pattern(i, 7 + g);
    }
    note(std::string("check sm peer copy 8 MiB both ways: ") + (bad ? "FAIL" : "PASS"));
    if (bad) throw std::runtime_error("peer copy data mismatch");
  }
  double best = 0;
  std::string best_v;
  for (size_t S : c.quick ? std::vector<size_t>{1024, 1 << 20, 64 << 20} : grid(1024, maxb)) {
    if (!time_left()) break;
    json shape = {{"bytes", S}, {"src", 0}, {"dst", 1}};
    auto add = [&](const char* v, const Timing& t) {
      tab.add(v, shape, dt_bytes(), t, 0, double(S));
      const double gbs = S / t.us_median / 1e3;
      if (S >= (size_t(1) << 20) && gbs > best) { best = gbs; best_v = std::string(v) + " at " + std::to_string(S) + " B"; }
      if (S == (size_t(64) << 20) || S == maxb)
        note(std::string("p2p ") + v + " " + std::to_string(S >> 20) + " MiB: " + std::to_string(gbs) + " GB/s per direction");
    };
    add("ce_uni", time2(c.d, [&] { ce(S, false); }));
    add("ce_bidir", time2(c.d, [&] { ce(S, true); }));
    if (S >= 16) {
      add("sm_uni", time2(c.d, [&] { sm(S, false); }));
      add("sm_bidir", time2(c.d, [&] { sm(S, true); }));
    }
  }
  note("best p2p copy: " + std::to_string(best) + " GB/s per direction (" + best_v + ")");
  tab.write(c.out);
  for (int g = 0; g < 2; ++g) {
    SS_CUDA(cudaSetDevice(g));
    cudaFree(a[g]);
    cudaFree(b[g]);
  }
  SS_CUDA(cudaSetDevice(0));
}

// ---- host <-> device ----------------------------------------------------------------------------------
void bench_host(Ctx& c) {
  Table th("comm_h2d", "any", "Host-to-device cudaMemcpyAsync over PCIe on GPU 0: pinned (cudaMallocHost) and pageable "
           "(malloc, pre-touched) host buffers", "0", "bytes copied", c.gpu);
  Table td("comm_d2h", "any", "Device-to-host cudaMemcpyAsync over PCIe on GPU 0: pinned and pageable host buffers", "0",
           "bytes copied", c.gpu);
  const size_t maxb = c.quick ? (size_t(256) << 20) : (size_t(4) << 30);
  SS_CUDA(cudaSetDevice(0));
  void* dev = nullptr;
  SS_CUDA(cudaMalloc(&dev, maxb));
  SS_CUDA(cudaMemset(dev, 3, maxb));
  void* pinned = nullptr;
  SS_CUDA(cudaMallocHost(&pinned, maxb));
  std::memset(pinned, 1, maxb);
  void* pageable = std::malloc(maxb);
  if (!pageable) throw std::runtime_error("malloc of pageable buffer failed");
  std::memset(pageable, 2, maxb);
  cudaStream_t s = c.d.s[0];
  for (size_t S : c.quick ? std::vector<size_t>{64 << 10, 1 << 20, 64 << 20} : grid(size_t(64) << 10, maxb)) {
    if (!time_left()) break;
    for (int pin = 1; pin >= 0; --pin) {
      void* h = pin ? pinned : pageable;
      const char* v = pin ? "pinned" : "pageable";
      json shape = {{"bytes", S}, {"host_memory", v}, {"device", 0}};
      const int runs = S >= (size_t(256) << 20) ? 3 : 10;
      auto h2d = [&](int) { SS_CUDA(cudaMemcpyAsync(dev, h, S, cudaMemcpyHostToDevice, s)); };
      auto d2h = [&](int) { SS_CUDA(cudaMemcpyAsync(h, dev, S, cudaMemcpyDeviceToHost, s)); };
      const Timing t1 = time_op(h2d, s, 1, runs, 30.0);
      th.add(v, shape, dt_bytes(), t1, 0, double(S));
      const Timing t2 = time_op(d2h, s, 1, runs, 30.0);
      td.add(v, shape, dt_bytes(), t2, 0, double(S));
      if (S == (size_t(64) << 20) || S == maxb || S == (size_t(64) << 10))
        note(std::string("host ") + v + " " + std::to_string(S >> 10) + " KiB: h2d " + std::to_string(S / t1.us_median / 1e3) +
             " GB/s (" + std::to_string(t1.us_median) + " us), d2h " + std::to_string(S / t2.us_median / 1e3) + " GB/s");
    }
  }
  th.write(c.out);
  td.write(c.out);
  cudaFreeHost(pinned);
  std::free(pageable);
  cudaFree(dev);
}

}  // namespace

int main(int argc, char** argv) {
  Ctx c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) c.out = argv[++i];
    else if (a == "--deadline-s" && i + 1 < argc) g_deadline = std::atof(argv[++i]);
    else if (a == "--quick") c.quick = true;
    else if (a == "--max-bytes" && i + 1 < argc) c.max_bytes = std::strtoull(argv[++i], nullptr, 10);
    else { std::fprintf(stderr, "usage: bench_comm --out DIR [--deadline-s S] [--quick] [--max-bytes B]\n"); return 2; }
  }
  if (c.out.empty()) { std::fprintf(stderr, "--out is required\n"); return 2; }
  setenv("NCCL_NVLS_ENABLE", "0", 1);  // never NVLink multicast on these machines (KINDS.md)
  try {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) { std::fprintf(stderr, "no CUDA device\n"); return 1; }
    c.gpu = query_gpu(0);
    c.sms = c.gpu.sm_count;
    std::printf("bench_comm: %d GPU(s), %s\n", n, c.gpu.name.c_str());
    auto section = [&](const char* name, void (*fn)(Ctx&)) {
      if (!time_left()) { note(std::string("SKIPPED (deadline): ") + name); return; }
      try { fn(c); } catch (const std::exception& e) { note(std::string("ERROR in ") + name + ": " + e.what()); cudaGetLastError(); }
    };
    if (n >= 2) {
      int can01 = 0, can10 = 0;
      SS_CUDA(cudaDeviceCanAccessPeer(&can01, 0, 1));
      SS_CUDA(cudaDeviceCanAccessPeer(&can10, 1, 0));
      c.peer = can01 && can10;
      if (c.peer) {
        SS_CUDA(cudaSetDevice(0));
        SS_CUDA(cudaDeviceEnablePeerAccess(1, 0));
        SS_CUDA(cudaSetDevice(1));
        SS_CUDA(cudaDeviceEnablePeerAccess(0, 0));
        SS_CUDA(cudaSetDevice(0));
      }
      note(std::string("peer access 0<->1: ") + (c.peer ? "yes" : "no"));
      c.d.init();
      section("alltoall", bench_alltoall);
      section("p2p", bench_p2p);
    } else {
      note("only one GPU: all-to-all and peer copies skipped");
      SS_CUDA(cudaSetDevice(0));
      SS_CUDA(cudaStreamCreateWithFlags(&c.d.s[0], cudaStreamNonBlocking));
    }
    section("host", bench_host);
    std::printf("\n==== bench_comm summary ====\n");
    for (const auto& s : g_summary) std::printf("%s\n", s.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_comm: %s\n", e.what());
    return 1;
  }
  return 0;
}
