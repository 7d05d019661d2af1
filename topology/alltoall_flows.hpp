// servesim topology: all-to-all as real SimGrid flows, at two granularities, to check the
// analytic model of costmodels/comm.hpp (tests/test_alltoall.cpp) and to calibrate it.
//  - pairwise: one flow per (source, destination) pair, G·(G−1) flows — the reference;
//  - aggregate: per GPU four flows (NVLink out to its NVSwitch endpoint, NVLink in from it, NIC out
//    to the spine, NIC in from it) carrying that GPU's total bytes each way — 4·G flows. Because
//    the NVSwitch and a non-blocking fabric do not constrain anything but the GPU's own links and
//    the node uplinks, this loads every link with exactly the pairwise volume.
// Both must be called from inside a SimGrid actor; they block until the last flow ends and return
// the elapsed simulated seconds.
#pragma once
#include "topology/platform.hpp"

#include <vector>

namespace servesim {

/// bytes[i][j]: bytes GPU group[i] sends to GPU group[j] (diagonal ignored).
using TrafficMatrix = std::vector<std::vector<double>>;

double alltoall_pairwise_flows(const Platform& p, const std::vector<int>& group, const TrafficMatrix& bytes);
double alltoall_aggregate_flows(const Platform& p, const std::vector<int>& group, const TrafficMatrix& bytes);

}  // namespace servesim
