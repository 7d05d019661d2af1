// The EP all-to-all on the fabric as bandwidth held on the links it crosses (all_to_all_on_fabric,
// the default model): while an instance steps, each of its attention-TP groups sends and receives
// its inter-node all-to-all bytes through its NIC and its node's uplink, and those links lend the
// rest of their bandwidth to the flows SimGrid does simulate (KV transfers, offloads, load-backs).
//
// Why not flows: a rate-capped background flow is what max-min sharing with the EP traffic means,
// but SimGrid 3.32 ignores set_rate on host-to-host comms (test
// Flows.SimGrid332IgnoresTheRateOfAHostToHostComm), and one flow per group and step costs 8-10x a
// run without them. Holding bandwidth gives the other flows the same max-min answer as capped
// flows would (below), costs a link update only when an instance's rate changes, and lets decode
// keep several steps per event. The per-flow form stays available (RunOptions::all_to_all_flows)
// as the check: tests compare the two (RunOutputs.AllToAllReservationsMatchTheFlows,
// AllToAllOnFabric.AtAttentionTpTwo*).
#pragma once

#include <simgrid/s4u.hpp>

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace servesim {

/// Bandwidth held on SimGrid links by holders (instances), each hold standing for one rate-capped
/// background flow. A link with nominal bandwidth C (bytes/s, its bandwidth when first held) and
/// held rates r_1..r_k gets the bandwidth one more flow (a KV copy alone on it) would have under
/// max-min sharing with k flows capped at r_i: max(C − Σ r_i, x) with x + Σ min(r_i, x) = C (x = C
/// / (k + 1) when every r_i ≥ x). Several copies at once get that bandwidth shared among them,
/// where max-min would give them a little more: an approximation that binds only when the held
/// rates approach the link's bandwidth. Deterministic: a holder's links keep the order given.
/// Tests: tests/test_link_reservations.cpp.
class LinkReservations {
 public:
  /// Replaces everything `holder` holds by `rates` (link, bytes/s; a link may appear more than once:
  /// one flow each). An empty list releases the holder (its links go back to what the other
  /// holders leave). Throws std::invalid_argument on a negative or non-finite rate.
  void hold(int holder, std::vector<std::pair<simgrid::s4u::Link*, double>> rates);
  /// Bytes/s that `holder` holds on `link` now, summed over its flows there (0 if none).
  double held(int holder, const simgrid::s4u::Link* link) const;
  /// The bandwidth (bytes/s) a link of nominal C leaves to one more flow beside flows capped at
  /// `rates` (the rule above).
  static double left_over(double C, std::vector<double> rates);

 private:
  struct Link {
    double nominal = 0;
    std::vector<double> rates;     // one per held flow, in hold order
    unsigned long long stamp = 0;  // the hold() call that last touched it
  };
  unsigned long long calls_ = 0;
  std::unordered_map<simgrid::s4u::Link*, Link> links_;
  std::unordered_map<int, std::vector<std::pair<simgrid::s4u::Link*, double>>> holders_;
};

}  // namespace servesim
