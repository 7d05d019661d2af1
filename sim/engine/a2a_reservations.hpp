// The EP all-to-all on the fabric as bandwidth held on the links it crosses (all_to_all_on_fabric,
// the default model): while an instance steps, each of its attention-TP groups sends and receives
// its inter-node all-to-all bytes through its NIC and its node's uplink, and those links lend the
// rest of their bandwidth to the flows SimGrid does simulate (KV transfers, offloads, load-backs).
//
// Why not flows: a rate-capped background flow is what max-min sharing with the EP traffic means,
// but SimGrid 3.32 ignores set_rate on host-to-host comms (test
// Flows.SimGrid332IgnoresTheRateOfAHostToHostComm), and one flow per group and step costs 8-10x a
// run without them. Holding bandwidth is the same max-min answer for the other flows while the EP
// rate is below their fair share (a capped flow takes its cap, the others share the rest), costs a
// link update only when an instance's rate changes, and lets decode keep several steps per event.
// The per-flow form stays available (RunOptions::all_to_all_flows) as the check: tests compare the
// two (RunOutputs.AllToAllReservationsMatchTheFlows, AllToAllOnFabric.AtAttentionTpTwo*).
#pragma once

#include <simgrid/s4u.hpp>

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace servesim {

/// Bandwidth held on SimGrid links by holders (instances). A link's bandwidth is
/// max(nominal − Σ held, kFloor · nominal) bytes/s; nominal is its bandwidth when first held.
/// Deterministic: a holder's links are kept in the order given.
class LinkReservations {
 public:
  /// Least share of a link's nominal bandwidth left to the simulated flows however much is held:
  /// under max-min sharing a capped EP flow takes at most an equal share from one competing flow,
  /// so a KV copy alone beside it keeps at least half the link (several copies at once would get
  /// less; this is the one-copy case, chosen, not fitted; it did not bind in the checks of
  /// bench/RESULTS.md).
  static constexpr double kFloor = 0.5;
  /// Replaces everything `holder` holds by `rates` (link, bytes/s; a link may appear more than once
  /// and its rates add up). Rates must be ≥ 0. An empty list releases the holder.
  void hold(int holder, std::vector<std::pair<simgrid::s4u::Link*, double>> rates);
  /// Bytes/s that `holder` holds on `link` now (0 if none).
  double held(int holder, const simgrid::s4u::Link* link) const;

 private:
  struct Link {
    double nominal = 0, held = 0;
    unsigned long long stamp = 0;  // the hold() call that last set it
  };
  unsigned long long calls_ = 0;
  void apply(simgrid::s4u::Link* l);
  std::unordered_map<simgrid::s4u::Link*, Link> links_;
  std::unordered_map<int, std::vector<std::pair<simgrid::s4u::Link*, double>>> holders_;
};

}  // namespace servesim
