// LinkReservations (sim/engine/a2a_reservations.hpp): the bandwidth a link leaves to one more flow
// beside flows capped at the held rates, by hand (max-min water-filling), and holding / releasing on
// a real SimGrid link.
#include "sim/engine/a2a_reservations.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

using servesim::LinkReservations;
namespace sg4 = simgrid::s4u;

// x + Σ min(r_i, x) = C, and at least C − Σ r_i.
TEST(LinkReservations, LeftOverIsTheMaxMinShareOfOneMoreFlow) {
  EXPECT_DOUBLE_EQ(LinkReservations::left_over(100, {}), 100);
  EXPECT_DOUBLE_EQ(LinkReservations::left_over(100, {30}), 70);   // below the fair share: the cap
  EXPECT_DOUBLE_EQ(LinkReservations::left_over(100, {80}), 50);   // above it: an equal share
  // 10 + 10 + 10 keep their caps, 60 and the copy split the remaining 70: 35 each
  EXPECT_DOUBLE_EQ(LinkReservations::left_over(100, {10, 60, 10, 10}), 35);
  // an uplink at oversubscription 4 (2 NICs' worth) with 8 groups at 0.2 NIC each: 0.4 NIC left,
  // the rates' sum being below C
  EXPECT_NEAR(LinkReservations::left_over(2, std::vector<double>(8, 0.2)), 0.4, 1e-12);
  // the same 8 groups at 0.5 NIC (4 > 2): each flow and the copy get 2 / 9
  EXPECT_NEAR(LinkReservations::left_over(2, std::vector<double>(8, 0.5)), 2.0 / 9, 1e-12);
}

// Two holders on one link, one of them twice (two groups behind one uplink); release restores the
// nominal bandwidth exactly; an unchanged hold changes nothing; a negative rate is refused.
TEST(LinkReservations, HoldAndReleaseOnASimGridLink) {
  int argc = 1;
  char arg0[] = "test";
  char* argv[] = {arg0, nullptr};
  sg4::Engine e(&argc, argv);
  auto* z = sg4::create_full_zone("z");
  sg4::Link* l = z->create_link("l", 100)->seal();
  z->seal();
  LinkReservations res;
  res.hold(1, {{l, 30}});
  EXPECT_DOUBLE_EQ(l->get_bandwidth(), 70);
  res.hold(2, {{l, 30}, {l, 30}});  // 30 + 30 + 30 held: max-min gives the copy 25 (> 100 − 90)
  EXPECT_DOUBLE_EQ(l->get_bandwidth(), 25);
  EXPECT_DOUBLE_EQ(res.held(2, l), 60);
  EXPECT_DOUBLE_EQ(res.held(1, l), 30);
  res.hold(2, {{l, 30}, {l, 30}});
  EXPECT_DOUBLE_EQ(l->get_bandwidth(), 25);
  res.hold(2, {});
  EXPECT_DOUBLE_EQ(l->get_bandwidth(), 70);
  EXPECT_DOUBLE_EQ(res.held(2, l), 0);
  res.hold(1, {});
  EXPECT_DOUBLE_EQ(l->get_bandwidth(), 100);
  EXPECT_THROW(res.hold(3, {{l, -1}}), std::invalid_argument);
  EXPECT_DOUBLE_EQ(l->get_bandwidth(), 100);
}
