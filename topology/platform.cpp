#include "topology/platform.hpp"

#include <simgrid/kernel/routing/NetPoint.hpp>
#include <xbt/config.hpp>

#include <stdexcept>
#include <string>

namespace sg4 = simgrid::s4u;

namespace servesim {

void configure_network_model() {
  if (simgrid::config::is_default("network/model")) sg4::Engine::set_config("network/model:CM02");
  if (simgrid::config::is_default("network/crosstraffic")) sg4::Engine::set_config("network/crosstraffic:0");
  // RDMA, NVLink, PCIe and storage copies are not TCP-window-limited: without this, SimGrid caps
  // every flow at TCP-gamma / (2 × route latency) (4 MiB / 200 µs = 21 GB/s on the storage link).
  // 1e18 bytes, not 0: with 0 this SimGrid (3.32) shares skewed all-to-all flows far below the
  // max-min answer (tests/test_alltoall.cpp), with 1e18 the bound is simply never reached.
  if (simgrid::config::is_default("network/TCP-gamma")) sg4::Engine::set_config("network/TCP-gamma:1e18");
}

namespace {

using D = sg4::LinkInRoute::Direction;

/// One node's zone and the endpoints and links its GPUs and groups route through.
struct NodeParts {
  int n = 0;
  std::string nn;
  sg4::NetZone* z = nullptr;
  simgrid::kernel::routing::NetPoint* gw = nullptr;
  sg4::Host *sw = nullptr, *cpu = nullptr, *ssd = nullptr;
  sg4::Link* ssdl = nullptr;
  sg4::Link* far_nvl = nullptr;
  sg4::SplitDuplexLink* uplink = nullptr;
  std::vector<sg4::SplitDuplexLink*> nvl;
};

/// Gives a node zone the root's models without attaching it yet. SimGrid (3.32) checks every new
/// link's and host's name against every zone attached to the root (a recursive map walk per name),
/// which made building N nodes O(N^2) (2.5 s at 812 nodes, 9.9 s at 1,600): the nodes are built
/// detached and attached in order once complete (attach_nodes). Names are unique by construction.
void adopt_models(sg4::NetZone* z, const sg4::NetZone* root) {
  auto* zi = z->get_impl();
  const auto* ri = root->get_impl();
  zi->set_network_model(ri->get_network_model());
  zi->set_cpu_pm_model(ri->get_cpu_pm_model());
  zi->set_cpu_vm_model(ri->get_cpu_vm_model());
  zi->set_disk_model(ri->get_disk_model());
  zi->set_host_model(ri->get_host_model());
}

/// The node zone, its gateway, NVSwitch / host-memory / storage endpoints and the host NIC and
/// storage links with their routes.
NodeParts build_node_base(sg4::NetZone* root, int n, const FabricParams& f, double storage_bytes_per_s, double storage_latency_s,
                          Platform& p) {
  NodeParts np;
  np.n = n;
  np.nn = std::string("n") + std::to_string(n);
  const std::string& nn = np.nn;
  auto* z = sg4::create_full_zone(nn);
  np.z = z;
  adopt_models(z, root);
  auto* gw = z->create_router(nn + "gw");
  np.gw = gw;
  auto* sw = z->create_host(nn + "sw", 1.0)->seal();
  auto* cpu = z->create_host(nn + "cpu", 1.0)->seal();
  auto* ssd = z->create_host(nn + "ssd", 1.0)->seal();
  np.sw = sw;
  np.cpu = cpu;
  np.ssd = ssd;
  p.switches.push_back(sw);
  p.cpus.push_back(cpu);
  p.storage.push_back(ssd);
  auto* hnic = z->create_split_duplex_link(nn + "-hostnic", p.gpus_per_node * f.nic_bytes_per_s);
  hnic->set_latency(f.nic_latency_s)->seal();
  auto* ssdl = z->create_link(nn + "-storage", storage_bytes_per_s)->set_latency(storage_latency_s)->seal();
  np.ssdl = ssdl;
  z->add_route(cpu->get_netpoint(), gw, nullptr, nullptr, {sg4::LinkInRoute(hnic, D::UP)}, false);
  z->add_route(gw, cpu->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(hnic, D::DOWN)}, false);
  z->add_route(ssd->get_netpoint(), cpu->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(ssdl)}, true);
  z->add_route(ssd->get_netpoint(), gw, nullptr, nullptr, {sg4::LinkInRoute(ssdl), sg4::LinkInRoute(hnic, D::UP)}, false);
  z->add_route(gw, ssd->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(hnic, D::DOWN), sg4::LinkInRoute(ssdl)}, false);
  // the aggregate endpoint stands for "all other GPUs": its route adds the far side's link
  // latency (never its bandwidth, which the other GPUs' own links carry)
  np.far_nvl = z->create_link(nn + "-sw-far", 1e18)->set_latency(f.nvlink_latency_s)->seal();
  return np;
}


/// One endpoint of node np.n standing for `size` GPUs (a GPU: size 1; an attention-TP group: its
/// members): its host and its NVLink, NIC and PCIe links at size × one GPU's rate, and its routes
/// to the NVSwitch, the gateway, host memory and storage. The links' creation order (NVLink, NIC,
/// PCIe) fixes SimGrid's ids and so the run's determinism.
struct Endpoint {
  sg4::Host* host;
  sg4::SplitDuplexLink* nvl;
};
Endpoint add_endpoint(const NodeParts& np, const std::string& name, int size, const FabricParams& f, const GpuSpec& gpu) {
  auto* z = np.z;
  auto* host = z->create_host(name, 1.0)->seal();
  auto* nvl = z->create_split_duplex_link(name + "-nvl", size * f.nvlink_bytes_per_s);
  nvl->set_latency(f.nvlink_latency_s)->seal();
  auto* nic = z->create_split_duplex_link(name + "-nic", size * f.nic_bytes_per_s);
  nic->set_latency(f.nic_latency_s)->seal();
  auto* pcie = z->create_split_duplex_link(name + "-pcie", size * gpu.pcie_bytes_per_s_per_direction);
  pcie->set_latency(1e-6)->seal();
  auto *h = host->get_netpoint(), *sw = np.sw->get_netpoint(), *cpu = np.cpu->get_netpoint(), *ssd = np.ssd->get_netpoint();
  z->add_route(h, sw, nullptr, nullptr, {sg4::LinkInRoute(nvl, D::UP), sg4::LinkInRoute(np.far_nvl)}, false);
  z->add_route(sw, h, nullptr, nullptr, {sg4::LinkInRoute(np.far_nvl), sg4::LinkInRoute(nvl, D::DOWN)}, false);
  z->add_route(h, np.gw, nullptr, nullptr, {sg4::LinkInRoute(nic, D::UP)}, false);
  z->add_route(np.gw, h, nullptr, nullptr, {sg4::LinkInRoute(nic, D::DOWN)}, false);
  z->add_route(h, cpu, nullptr, nullptr, {sg4::LinkInRoute(pcie, D::UP)}, false);
  z->add_route(cpu, h, nullptr, nullptr, {sg4::LinkInRoute(pcie, D::DOWN)}, false);
  z->add_route(h, ssd, nullptr, nullptr, {sg4::LinkInRoute(pcie, D::UP), sg4::LinkInRoute(np.ssdl)}, false);
  z->add_route(ssd, h, nullptr, nullptr, {sg4::LinkInRoute(np.ssdl), sg4::LinkInRoute(pcie, D::DOWN)}, false);
  return {host, nvl};
}

/// The node's GPU hosts, their NVLink / NIC / PCIe links and routes, and the GPU-to-GPU NVLink routes.
void add_node_gpus(NodeParts& np, const FabricParams& f, const GpuSpec& gpu, Platform& p) {
  auto* z = np.z;
  auto& nvl = np.nvl;
  for (int i = 0; i < p.gpus_per_node; ++i) {
    const Endpoint e = add_endpoint(np, np.nn + "g" + std::to_string(i), 1, f, gpu);
    p.gpus.push_back(e.host);
    nvl.push_back(e.nvl);
  }
  const int n = np.n;
  for (int i = 0; i < p.gpus_per_node; ++i)
    for (int j = 0; j < p.gpus_per_node; ++j)
      if (i != j)
        z->add_route(p.gpu(n, i)->get_netpoint(), p.gpu(n, j)->get_netpoint(), nullptr, nullptr,
                     {sg4::LinkInRoute(nvl[i], D::UP), sg4::LinkInRoute(nvl[j], D::DOWN)}, false);
}

/// An aggregate endpoint of a GPU group already placed in this node.
using GroupEndpoint = Endpoint;

/// The aggregate endpoint of `grp` (inside node np.n): its host, links of size × a member's and
/// routes to the gateway, host memory, storage, NVSwitch, the node's GPUs and the groups in `gs`.
GroupEndpoint add_group_endpoint(const NodeParts& np, const GpuGroup& grp, const FabricParams& f, const GpuSpec& gpu,
                                 const std::vector<GroupEndpoint>& gs, Platform& p) {
  auto* z = np.z;
  const auto& nvl = np.nvl;
  const int n = np.n;
  const std::string gn = np.nn + "t" + std::to_string(grp.first_gpu % p.gpus_per_node) + "x" + std::to_string(grp.size);
  const Endpoint e = add_endpoint(np, gn, grp.size, f, gpu);
  auto* gnvl = e.nvl;
  auto* hp = e.host->get_netpoint();
  for (int j = 0; j < p.gpus_per_node; ++j) {
    z->add_route(hp, p.gpu(n, j)->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(gnvl, D::UP), sg4::LinkInRoute(nvl[j], D::DOWN)}, false);
    z->add_route(p.gpu(n, j)->get_netpoint(), hp, nullptr, nullptr, {sg4::LinkInRoute(nvl[j], D::UP), sg4::LinkInRoute(gnvl, D::DOWN)}, false);
  }
  for (const GroupEndpoint& o : gs) {
    z->add_route(hp, o.host->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(gnvl, D::UP), sg4::LinkInRoute(o.nvl, D::DOWN)}, false);
    z->add_route(o.host->get_netpoint(), hp, nullptr, nullptr, {sg4::LinkInRoute(o.nvl, D::UP), sg4::LinkInRoute(gnvl, D::DOWN)}, false);
  }
  return e;
}

/// Aggregate endpoints of the GPU groups (size > 1) that start in node np.n.
void add_node_groups(const NodeParts& np, const std::vector<GpuGroup>& groups, const FabricParams& f, const GpuSpec& gpu, Platform& p) {
  std::vector<GroupEndpoint> gs;
  for (const auto& grp : groups) {
    if (grp.size <= 1 || grp.first_gpu / p.gpus_per_node != np.n) continue;
    if ((grp.first_gpu + grp.size - 1) / p.gpus_per_node != np.n) throw std::invalid_argument("a GPU group must lie inside one node");
    gs.push_back(add_group_endpoint(np, grp, f, gpu, gs, p));
    p.groups[grp.first_gpu] = gs.back().host;
  }
}

/// The node's uplink to the root star (created right after the node's own links: the creation
/// order fixes SimGrid's ids).
void add_node_uplink(sg4::NetZone* root, NodeParts& np, const FabricParams& f, const Platform& p) {
  np.uplink = root->create_split_duplex_link(np.nn + "-uplink", p.gpus_per_node * f.nic_bytes_per_s / f.oversubscription);
  np.uplink->set_latency(0)->seal();
}

/// Attaches the finished node zones to the root in node order, seals each and routes it to the
/// root star by its uplink.
void attach_nodes(sg4::NetZone* root, const std::vector<NodeParts>& nodes) {
  for (const NodeParts& np : nodes) {
    np.z->set_parent(root);
    np.z->seal();
    root->add_route(np.z->get_netpoint(), nullptr, np.gw, nullptr, {sg4::LinkInRoute(np.uplink, D::UP)}, true);
  }
}

/// The spine endpoint and the frontend, in a zone of their own connected to the root by a trunk.
void build_core_zone(sg4::NetZone* root, const FabricParams& f, Platform& p) {
  // The spine endpoint and the frontend live in a zone of their own: SimGrid 3.32's star zone does
  // not route between a child zone and a host placed directly in the star (out_of_range).
  auto* sz = sg4::create_full_zone("core");
  sz->set_parent(root);
  auto* sgw = sz->create_router("core-gw");
  p.spine = sz->create_host("spine", 1.0)->seal();
  p.frontend = sz->create_host("frontend", 1.0)->seal();
  auto* core = sz->create_link("spine-core", 1e18)->set_latency(f.nic_latency_s)->seal();  // the far NIC's latency
  auto* fe = sz->create_link("frontend-link", 1e18)->set_latency(0)->seal();
  sz->add_route(p.spine->get_netpoint(), sgw, nullptr, nullptr, {sg4::LinkInRoute(core)}, true);
  sz->add_route(p.frontend->get_netpoint(), sgw, nullptr, nullptr, {sg4::LinkInRoute(fe)}, true);
  sz->add_route(p.spine->get_netpoint(), p.frontend->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(core), sg4::LinkInRoute(fe)}, true);
  sz->seal();
  auto* trunk = root->create_link("core-trunk", 1e18)->set_latency(0)->seal();
  root->add_route(sz->get_netpoint(), nullptr, sgw, nullptr, {sg4::LinkInRoute(trunk)}, true);
}

}  // namespace

Platform build_platform(const ClusterSpec& cluster, const GpuSpec& gpu, double storage_bytes_per_s, double storage_latency_s,
                        const std::vector<GpuGroup>& groups) {
  if (cluster.nodes < 1) throw std::invalid_argument("cluster.nodes must be ≥ 1");
  const FabricParams f = fabric_params(cluster, gpu);
  Platform p;
  p.gpus_per_node = gpu.gpus_per_node;
  // SimGrid 3.32 walks every zone attached to the engine's root zone for each new link's name and,
  // in each zone's seal, for its hosts (NetZoneImpl::get_all_hosts → Engine::get_filtered_hosts):
  // O(nodes²) over a cluster (about 100 s at 10,000 nodes). The engine's root is an empty zone while
  // the fabric and its node zones are built beside it (each node zone sealed there), so those walks
  // find nothing to walk; the finished fabric is attached to it last and sealed with it. Routes never climb above the fabric (the common
  // ancestor of any two endpoints), so they are the same as with the fabric as the root.
  auto* top = sg4::create_empty_zone("servesim");
  auto* root = sg4::create_star_zone("fabric");
  adopt_models(root, top);
  std::vector<NodeParts> nodes;
  nodes.reserve(static_cast<size_t>(cluster.nodes));
  for (int n = 0; n < cluster.nodes; ++n) {
    NodeParts np = build_node_base(root, n, f, storage_bytes_per_s, storage_latency_s, p);
    add_node_gpus(np, f, gpu, p);
    add_node_groups(np, groups, f, gpu, p);
    add_node_uplink(root, np, f, p);
    nodes.push_back(std::move(np));
  }
  attach_nodes(root, nodes);
  build_core_zone(root, f, p);
  root->set_parent(top);
  top->seal();
  return p;
}

}  // namespace servesim
