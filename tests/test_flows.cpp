// KV flows on the platform (issue #10, item 13): RDMA, NVLink, PCIe and storage copies are not
// TCP-window-limited, so a lone transfer of S bytes on an idle path takes the path's latency plus
// S / its bottleneck rate; and no flow, lone or concurrent, is ever faster than the smallest
// capacity on its route. Two H200 nodes (hardware file: NVLink 450 GB/s per direction, NIC
// 400 Gb/s = 50 GB/s, PCIe 64 GB/s per direction; storage 25 GB/s per node, 100 µs).
// One SimGrid engine per process, so one TEST per case.
#include "helpers.hpp"
#include "topology/platform.hpp"

#include <gtest/gtest.h>
#include <simgrid/s4u.hpp>

#include <functional>
#include <utility>
#include <vector>

namespace sg4 = simgrid::s4u;
using namespace servesim;

namespace {

constexpr double S = 8e9;  // bytes: latencies (≤ 0.1 ms) are ≤ 0.1% of every transfer below

struct Flow {
  std::function<sg4::Host*(const Platform&)> src, dst;
  double bytes = S;
  double done_s = -1;
};

// This process's SimGrid engine (left alive: one per process) and a 2-node H200 platform with the
// given group endpoints.
std::pair<sg4::Engine*, Platform> two_nodes(const std::vector<GpuGroup>& groups) {
  int argc = 1;
  char name[] = "test";
  char* argv[] = {name, nullptr};
  auto* e = new sg4::Engine(&argc, argv);
  configure_network_model();
  ClusterSpec c;
  c.nodes = 2;
  return {e, build_platform(c, test::gpu("h200"), 25e9, 1e-4, groups)};
}

// Runs the flows together from t = 0 on a 2-node H200 platform with a TP-8 group endpoint at GPU 0.
std::vector<Flow> run(std::vector<Flow> flows) {
  const auto [e, p] = two_nodes({{0, 8}});
  for (auto& f : flows)
    sg4::Actor::create("f", p.frontend, [&f, &p] {
      sg4::Comm::sendto(f.src(p), f.dst(p), static_cast<uint64_t>(f.bytes));
      f.done_s = sg4::Engine::get_clock();
    });
  e->run();
  return flows;
}

void expect_line_rate(const std::vector<Flow>& r, double rate, const char* what) {
  for (const auto& f : r) {
    ASSERT_GT(f.done_s, 0) << what;
    EXPECT_NEAR(f.done_s, f.bytes / rate, 0.01 * f.bytes / rate) << what << ": " << f.bytes / f.done_s / 1e9 << " GB/s";
    EXPECT_GE(f.done_s, f.bytes / rate) << what << ": faster than its bottleneck";
  }
}

}  // namespace

TEST(Flows, NvlinkCopyRunsAtLineRate) {
  expect_line_rate(run({{[](const Platform& p) { return p.gpus[1]; }, [](const Platform& p) { return p.gpus[2]; }}}), 450e9, "NVLink GPU1→GPU2");
}

TEST(Flows, RdmaCopyBetweenNodesRunsAtNicRate) {
  expect_line_rate(run({{[](const Platform& p) { return p.gpus[1]; }, [](const Platform& p) { return p.gpus[9]; }}}), 50e9, "NIC node0→node1");
}

TEST(Flows, TpGroupTransferRunsAtTheGroupsEightNics) {
  // the TP-8 group endpoint at GPU 0 stands for 8 GPUs: 8 NICs, 400 GB/s, into one GPU of node 1 (50)
  expect_line_rate(run({{[](const Platform& p) { return p.endpoint(0); }, [](const Platform& p) { return p.gpus[9]; }}}), 50e9, "group→GPU");
}

TEST(Flows, HostMemoryLoadRunsAtPcieRate) {
  expect_line_rate(run({{[](const Platform& p) { return p.cpus[0]; }, [](const Platform& p) { return p.gpus[3]; }}}), 64e9, "PCIe host→GPU3");
}

TEST(Flows, StorageLoadRunsAtStorageRate) {
  expect_line_rate(run({{[](const Platform& p) { return p.storage[1]; }, [](const Platform& p) { return p.cpus[1]; }}}), 25e9, "storage→host");
}

// Concurrent loads: four host→GPU loads into GPU 3 share its PCIe link (equal routes: 16 GB/s
// each); two loads into the TP-8 group share its 8 PCIe links (256 GB/s each); two storage reads
// of node 0 (to its host memory and to GPU 5) share the 25 GB/s storage link. SimGrid's CM02 model
// shares a link in inverse proportion to each flow's route latency (TCP-like), so the two storage
// reads (100 µs vs 101 µs) get 50.2% / 49.8% of it, not exactly half: the test checks their sum and
// that neither exceeds the link.
TEST(Flows, ConcurrentLoadsNeverExceedTheirBottleneck) {
  auto cpu0 = [](const Platform& p) { return p.cpus[0]; };
  auto gpu3 = [](const Platform& p) { return p.gpus[3]; };
  auto gpu5 = [](const Platform& p) { return p.gpus[5]; };
  auto grp = [](const Platform& p) { return p.endpoint(0); };
  auto ssd0 = [](const Platform& p) { return p.storage[0]; };
  const double s2 = 2e9;
  const auto r = run({{cpu0, gpu3}, {cpu0, gpu3}, {cpu0, gpu3}, {cpu0, gpu3}, {cpu0, grp}, {cpu0, grp}, {ssd0, cpu0, s2}, {ssd0, gpu5, s2}});
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(r[static_cast<size_t>(i)].done_s, S / 16e9, 0.01 * S / 16e9);
  for (int i = 4; i < 6; ++i) EXPECT_NEAR(r[static_cast<size_t>(i)].done_s, S / 256e9, 0.01 * S / 256e9);
  // together the storage reads move 4 GB at 25 GB/s; the later one ends at 0.16 s
  EXPECT_NEAR(std::max(r[6].done_s, r[7].done_s), 2 * s2 / 25e9, 0.01 * 2 * s2 / 25e9);
  const double bound[] = {64e9, 64e9, 64e9, 64e9, 512e9, 512e9, 25e9, 25e9};
  for (size_t i = 0; i < r.size(); ++i) EXPECT_LE(r[i].bytes / r[i].done_s, bound[i] * (1 + 1e-9)) << "flow " << i << " ran faster than its bottleneck";
}

// SimGrid 3.32 does not cap a host-to-host comm (Comm::sendto_init) at the rate set with set_rate:
// it gets its max-min fair share like any flow. That is why all_to_all_on_fabric's check form
// (KvMover::inject_all_to_all, run --all-to-all-flows) posts mailbox comms from the sending host,
// whose rate SimGrid does honour, and its default form holds bandwidth on links instead. This pins the
// library's behaviour: two flows from GPU 0 to GPU 8 of the other node share GPU 0's 50 GB/s NIC;
// one of 1 GB "capped" at 1 GB/s starts first, then a 4 GB copy. With the cap honoured the copy
// would take 4 / 49 s; as SimGrid 3.32 shares, the copy gets 25 GB/s until the 1 GB flow ends
// (at 2 x its remaining bytes over the NIC), then 50. If this fails after a SimGrid upgrade,
// host-to-host comms are capped now and the check form could use them again.
TEST(Flows, SimGrid332IgnoresTheRateOfAHostToHostComm) {
  const auto [e, p] = two_nodes({});
  double copy_s = -1;
  sg4::Actor::create("f", p.frontend, [&] {
    auto capped = sg4::Comm::sendto_init()->set_payload_size(1000000000)->set_rate(1e9);
    capped->set_source(p.gpu(0, 0));
    capped->set_destination(p.gpu(1, 0));
    const double t0 = sg4::Engine::get_clock();
    sg4::Comm::sendto(p.gpu(0, 0), p.gpu(1, 0), 4e9);
    copy_s = sg4::Engine::get_clock() - t0;
    if (!capped->test()) capped->cancel();
  });
  e->run();
  // uncapped: both at 25 GB/s until the 1 GB flow ends at 0.04 s, then the copy's last 3 GB at 50 GB/s
  EXPECT_NEAR(copy_s, 0.04 + 3e9 / 50e9, 2e-4);
  EXPECT_GT(copy_s, 4e9 / 49e9 * 1.2);  // far from the capped answer
}

// A one-byte copy takes its route's latency: over NVLink the GPU's link to the NVSwitch endpoint and
// the endpoint's link to the other GPU (2 x nvlink_latency_s); between nodes the two NICs
// (2 x nic_latency_s; the node uplinks and the spine add none). The 8 GB flows above cannot see a
// wrong latency (it is <= 0.1% of them).
TEST(Flows, OneByteNvlinkCopyTakesTwoLinkLatencies) {
  const auto r = run({{[](const Platform& p) { return p.gpus[1]; }, [](const Platform& p) { return p.gpus[2]; }, 1.0}});
  EXPECT_NEAR(r[0].done_s, 2 * test::gpu("h200").nvlink_latency_s, 1e-9);
}

TEST(Flows, OneByteRdmaCopyTakesTwoNicLatencies) {
  const auto r = run({{[](const Platform& p) { return p.gpus[1]; }, [](const Platform& p) { return p.gpus[9]; }, 1.0}});
  EXPECT_NEAR(r[0].done_s, 2 * test::gpu("h200").nic_latency_s, 1e-9);
}
