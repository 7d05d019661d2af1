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
}

Platform build_platform(const ClusterSpec& cluster, const GpuSpec& gpu, double storage_bytes_per_s, double storage_latency_s,
                        const std::vector<GpuGroup>& groups) {
  if (cluster.nodes < 1) throw std::invalid_argument("cluster.nodes must be ≥ 1");
  const FabricParams f = fabric_params(cluster, gpu);
  Platform p;
  p.gpus_per_node = gpu.gpus_per_node;
  auto* root = sg4::create_star_zone("fabric");
  using D = sg4::LinkInRoute::Direction;
  for (int n = 0; n < cluster.nodes; ++n) {
    const std::string nn = "n" + std::to_string(n);
    auto* z = sg4::create_full_zone(nn);
    z->set_parent(root);
    auto* gw = z->create_router(nn + "gw");
    auto* sw = z->create_host(nn + "sw", 1.0)->seal();
    auto* cpu = z->create_host(nn + "cpu", 1.0)->seal();
    auto* ssd = z->create_host(nn + "ssd", 1.0)->seal();
    p.switches.push_back(sw);
    p.cpus.push_back(cpu);
    p.storage.push_back(ssd);
    auto* hnic = z->create_split_duplex_link(nn + "-hostnic", p.gpus_per_node * f.nic_bytes_per_s);
    hnic->set_latency(f.nic_latency_s)->seal();
    auto* ssdl = z->create_link(nn + "-storage", storage_bytes_per_s)->set_latency(storage_latency_s)->seal();
    z->add_route(cpu->get_netpoint(), gw, nullptr, nullptr, {sg4::LinkInRoute(hnic, D::UP)}, false);
    z->add_route(gw, cpu->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(hnic, D::DOWN)}, false);
    z->add_route(ssd->get_netpoint(), cpu->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(ssdl)}, true);
    z->add_route(ssd->get_netpoint(), gw, nullptr, nullptr, {sg4::LinkInRoute(ssdl), sg4::LinkInRoute(hnic, D::UP)}, false);
    z->add_route(gw, ssd->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(hnic, D::DOWN), sg4::LinkInRoute(ssdl)}, false);
    std::vector<sg4::SplitDuplexLink*> nvl, nic;
    // the aggregate endpoint stands for "all other GPUs": its route adds the far side's link
    // latency (never its bandwidth, which the other GPUs' own links carry)
    auto* far_nvl = z->create_link(nn + "-sw-far", 1e18)->set_latency(f.nvlink_latency_s)->seal();
    for (int i = 0; i < p.gpus_per_node; ++i) {
      const std::string gi = nn + "g" + std::to_string(i);
      p.gpus.push_back(z->create_host(gi, 1.0)->seal());
      nvl.push_back(z->create_split_duplex_link(gi + "-nvl", f.nvlink_bytes_per_s));
      nvl.back()->set_latency(f.nvlink_latency_s)->seal();
      nic.push_back(z->create_split_duplex_link(gi + "-nic", f.nic_bytes_per_s));
      nic.back()->set_latency(f.nic_latency_s)->seal();
      auto* pcie = z->create_split_duplex_link(gi + "-pcie", gpu.pcie_bytes_per_s_per_direction);
      pcie->set_latency(1e-6)->seal();
      auto* h = p.gpus.back()->get_netpoint();
      z->add_route(h, sw->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(nvl[i], D::UP), sg4::LinkInRoute(far_nvl)}, false);
      z->add_route(sw->get_netpoint(), h, nullptr, nullptr, {sg4::LinkInRoute(far_nvl), sg4::LinkInRoute(nvl[i], D::DOWN)}, false);
      z->add_route(h, gw, nullptr, nullptr, {sg4::LinkInRoute(nic[i], D::UP)}, false);
      z->add_route(gw, h, nullptr, nullptr, {sg4::LinkInRoute(nic[i], D::DOWN)}, false);
      z->add_route(h, cpu->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(pcie, D::UP)}, false);
      z->add_route(cpu->get_netpoint(), h, nullptr, nullptr, {sg4::LinkInRoute(pcie, D::DOWN)}, false);
      z->add_route(h, ssd->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(pcie, D::UP), sg4::LinkInRoute(ssdl)}, false);
      z->add_route(ssd->get_netpoint(), h, nullptr, nullptr, {sg4::LinkInRoute(ssdl), sg4::LinkInRoute(pcie, D::DOWN)}, false);
    }
    for (int i = 0; i < p.gpus_per_node; ++i)
      for (int j = 0; j < p.gpus_per_node; ++j)
        if (i != j)
          z->add_route(p.gpu(n, i)->get_netpoint(), p.gpu(n, j)->get_netpoint(), nullptr, nullptr,
                       {sg4::LinkInRoute(nvl[i], D::UP), sg4::LinkInRoute(nvl[j], D::DOWN)}, false);
    // aggregate endpoints of GPU groups in this node
    struct G {
      sg4::Host* host;
      sg4::SplitDuplexLink* nvl;
    };
    std::vector<G> gs;
    for (const auto& grp : groups) {
      if (grp.size <= 1 || grp.first_gpu / p.gpus_per_node != n) continue;
      if ((grp.first_gpu + grp.size - 1) / p.gpus_per_node != n) throw std::invalid_argument("a GPU group must lie inside one node");
      const std::string gn = nn + "t" + std::to_string(grp.first_gpu % p.gpus_per_node) + "x" + std::to_string(grp.size);
      auto* h = z->create_host(gn, 1.0)->seal();
      auto* gnvl = z->create_split_duplex_link(gn + "-nvl", grp.size * f.nvlink_bytes_per_s);
      gnvl->set_latency(f.nvlink_latency_s)->seal();
      auto* gnic = z->create_split_duplex_link(gn + "-nic", grp.size * f.nic_bytes_per_s);
      gnic->set_latency(f.nic_latency_s)->seal();
      auto* gpcie = z->create_split_duplex_link(gn + "-pcie", grp.size * gpu.pcie_bytes_per_s_per_direction);
      gpcie->set_latency(1e-6)->seal();
      auto* np = h->get_netpoint();
      z->add_route(np, gw, nullptr, nullptr, {sg4::LinkInRoute(gnic, D::UP)}, false);
      z->add_route(gw, np, nullptr, nullptr, {sg4::LinkInRoute(gnic, D::DOWN)}, false);
      z->add_route(np, cpu->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(gpcie, D::UP)}, false);
      z->add_route(cpu->get_netpoint(), np, nullptr, nullptr, {sg4::LinkInRoute(gpcie, D::DOWN)}, false);
      z->add_route(np, ssd->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(gpcie, D::UP), sg4::LinkInRoute(ssdl)}, false);
      z->add_route(ssd->get_netpoint(), np, nullptr, nullptr, {sg4::LinkInRoute(ssdl), sg4::LinkInRoute(gpcie, D::DOWN)}, false);
      z->add_route(np, sw->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(gnvl, D::UP), sg4::LinkInRoute(far_nvl)}, false);
      z->add_route(sw->get_netpoint(), np, nullptr, nullptr, {sg4::LinkInRoute(far_nvl), sg4::LinkInRoute(gnvl, D::DOWN)}, false);
      for (int j = 0; j < p.gpus_per_node; ++j) {
        z->add_route(np, p.gpu(n, j)->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(gnvl, D::UP), sg4::LinkInRoute(nvl[j], D::DOWN)}, false);
        z->add_route(p.gpu(n, j)->get_netpoint(), np, nullptr, nullptr, {sg4::LinkInRoute(nvl[j], D::UP), sg4::LinkInRoute(gnvl, D::DOWN)}, false);
      }
      for (const G& o : gs) {
        z->add_route(np, o.host->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(gnvl, D::UP), sg4::LinkInRoute(o.nvl, D::DOWN)}, false);
        z->add_route(o.host->get_netpoint(), np, nullptr, nullptr, {sg4::LinkInRoute(o.nvl, D::UP), sg4::LinkInRoute(gnvl, D::DOWN)}, false);
      }
      gs.push_back({h, gnvl});
      p.groups[grp.first_gpu] = h;
    }
    z->seal();
    auto* up = root->create_split_duplex_link(nn + "-uplink", p.gpus_per_node * f.nic_bytes_per_s / f.oversubscription);
    up->set_latency(0)->seal();
    root->add_route(z->get_netpoint(), nullptr, gw, nullptr, {sg4::LinkInRoute(up, D::UP)}, true);
  }
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
  root->seal();
  return p;
}

}  // namespace servesim
