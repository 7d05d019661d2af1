// The KV store below the GPUs: placement, demotion, drops and its conservation ledger, by hand.
#include "sim/kvcache/kv_store.hpp"
#include "sim/kvcache/prefix_cache.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <tuple>

using namespace servesim;

namespace {
TierSpec spec(double l2, bool l3, double l3_cap) {
  TierSpec t;
  t.enabled = true, t.host_bytes_per_node = l2, t.storage_enabled = l3, t.storage_bytes_per_node = l3_cap;
  return t;
}
const auto lru = [] { return make_eviction_policy("lru"); };
void ledger(const KvStore& s) {
  EXPECT_DOUBLE_EQ(s.offloaded_bytes(), s.bytes(KvStore::Tier::l2) + s.bytes(KvStore::Tier::l3) + s.left_bytes());
}
}  // namespace

TEST(KvStore, FillsL2ThenDemotesTheOldestToL3) {
  KvStore s(spec(100, true, 1000), 2, lru);
  EXPECT_TRUE(s.put_l2(1, 10, 60, 0, 0.0).empty());
  const auto d = s.put_l2(2, 10, 60, 0, 1.0);  // 120 > 100: session 1 (oldest) goes down
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].session, 1);
  EXPECT_DOUBLE_EQ(s.bytes_on(KvStore::Tier::l2, 0), 60);
  EXPECT_DOUBLE_EQ(s.bytes_on(KvStore::Tier::l3, 0), 60);  // reserved while the copy is in flight
  EXPECT_EQ(s.find(1), nullptr);                            // busy until demoted
  s.demoted(1, d[0].gen, 2.0);
  ASSERT_NE(s.find(1), nullptr);
  EXPECT_EQ(s.find(1)->tier, KvStore::Tier::l3);
  EXPECT_TRUE(s.put_l2(3, 10, 30, 1, 3.0).empty());  // another node has its own L2
  ledger(s);
}

TEST(KvStore, WithoutRoomBelowObjectsAreDroppedAndCounted) {
  KvStore s(spec(100, false, 0), 1, lru);
  s.put_l2(1, 10, 70, 0, 0.0);
  s.put_l2(2, 10, 70, 0, 1.0);  // no L3: session 1 is dropped
  EXPECT_EQ(s.objects(), 1u);
  EXPECT_DOUBLE_EQ(s.dropped_bytes(), 70);
  EXPECT_DOUBLE_EQ(s.left_bytes(), 70);
  const KvStore::Object o = s.take_for_load(2);
  EXPECT_EQ(o.tokens, 10);
  s.release(2, 2.0);  // loaded back: it leaves the store
  EXPECT_EQ(s.objects(), 0u);
  EXPECT_DOUBLE_EQ(s.left_bytes(), 140);
  ledger(s);
}

TEST(KvStore, StaleDemotionDoesNotMoveTheNewerObject) {
  KvStore s(spec(100, true, 1000), 1, lru);
  s.put_l2(1, 10, 80, 0, 0.0);
  const auto d = s.put_l2(2, 10, 80, 0, 1.0);
  ASSERT_EQ(d.size(), 1u);
  s.put_l2(1, 20, 10, 0, 2.0);  // session 1 comes back before its demotion lands: the old copy is stale
  s.demoted(1, d[0].gen, 3.0);  // ignored
  ASSERT_NE(s.find(1), nullptr);
  EXPECT_EQ(s.find(1)->tier, KvStore::Tier::l2);
  EXPECT_EQ(s.find(1)->tokens, 20);
  EXPECT_DOUBLE_EQ(s.dropped_bytes(), 0);  // the replaced copy was released, not pushed out by capacity
  EXPECT_DOUBLE_EQ(s.left_bytes(), 80);
  ledger(s);
}

TEST(PrefixCacheEvictable, PinnedNodesAndTheirAncestorsAreNotEvictable) {
  PrefixCache c(100, 1000.0, 0.0, make_eviction_policy("lru"));
  Request a, b;
  a.input_tokens = 300, a.block_tokens = 100, a.block_hashes = {1, 2, 3};
  b.input_tokens = 250, b.block_tokens = 100, b.block_hashes = {1, 4, 5};  // shares block 1
  c.release_and_insert(a, 0, 0.0);
  c.release_and_insert(b, 0, 1.0);
  EXPECT_DOUBLE_EQ(c.bytes(), 3000 + 1500);  // 5 blocks, b's last one half full
  EXPECT_DOUBLE_EQ(c.evictable_bytes(), 4500);  // nothing pinned: all of it
  const PrefixMatch m = c.match(b);
  EXPECT_EQ(m.present_blocks, 3);
  EXPECT_EQ(m.tokens, 249);  // at least one token is computed
  c.pin(b, m.pin_blocks);
  EXPECT_DOUBLE_EQ(c.evictable_bytes(), 2000);  // only a's blocks 2 and 3
  EXPECT_DOUBLE_EQ(c.evict(1e9), 2000);
  EXPECT_EQ(c.match(a).present_blocks, 1);  // block 1 stays: b pins it
}

// The LRU policy on its own: its order by hand (oldest use first; at one time the deepest node
// first; then the lower key), then against a plain reference (the minimum of the live entries by a
// linear scan) over random refreshes, forgets and evictions -- the heap's stale entries must never
// surface, whatever the call order.
TEST(LruEviction, OldestThenDeepestThenLowestKey) {
  auto p = make_eviction_policy("lru");
  std::uint64_t k = 0;
  EXPECT_FALSE(p->victim(k));
  p->make_evictable(7, 3, 2.0);
  p->make_evictable(5, 1, 1.0);
  p->make_evictable(9, 4, 1.0);  // same time as 5, deeper: first
  p->make_evictable(4, 4, 1.0);  // same time and depth as 9, lower key: first of all
  ASSERT_TRUE(p->victim(k));
  EXPECT_EQ(k, 4u);
  p->forget(4);
  ASSERT_TRUE(p->victim(k));
  EXPECT_EQ(k, 9u);
  p->make_evictable(9, 4, 3.0);  // used again: now the newest
  ASSERT_TRUE(p->victim(k));
  EXPECT_EQ(k, 5u);
  p->forget(5);
  ASSERT_TRUE(p->victim(k));
  EXPECT_EQ(k, 7u);
  p->forget(7), p->forget(9), p->forget(12345);  // an unknown key is ignored
  EXPECT_FALSE(p->victim(k));
}

TEST(LruEviction, MatchesALinearScanOverRandomCalls) {
  auto p = make_eviction_policy("lru");
  std::map<std::uint64_t, std::tuple<double, int, std::uint64_t>> ref;  // key -> (t, -depth, key)
  std::mt19937_64 g(7);
  int checks = 0;
  for (int i = 0; i < 200000; ++i) {
    const std::uint64_t key = g() % 500;
    const int op = static_cast<int>(g() % 10);
    if (op < 6) {  // use or offer: times from a few values so that ties in time are common
      const double t = static_cast<double>(i / 50) + static_cast<double>(g() % 3);
      const int depth = static_cast<int>(g() % 4);
      p->make_evictable(key, depth, t);
      ref[key] = {t, -depth, key};
    } else if (op < 8) {
      p->forget(key);
      ref.erase(key);
    } else {  // evict the victim, as PrefixCache::evict does
      std::uint64_t v = 0;
      const bool got = p->victim(v);
      ASSERT_EQ(got, !ref.empty());
      if (!got) continue;
      auto best = ref.begin();
      for (auto it = ref.begin(); it != ref.end(); ++it)
        if (it->second < best->second) best = it;
      ASSERT_EQ(v, best->first) << "call " << i;
      p->forget(v);
      ref.erase(best);
      ++checks;
    }
  }
  EXPECT_GT(checks, 30000);
}

// Refreshes without evictions pile stale entries into the heap until it is rebuilt from the live
// ones (at 2 x live + 64 entries); the victims drained afterwards are still in LRU order.
TEST(LruEviction, RebuildKeepsTheOrder) {
  LruEviction p;
  for (int round = 0; round < 2000; ++round)
    for (std::uint64_t k = 0; k < 20; ++k) p.make_evictable(k, static_cast<int>(k % 3), static_cast<double>(round) + static_cast<double>((k * 7) % 20) / 20);
  EXPECT_EQ(p.size(), 20u);
  EXPECT_LE(p.heap_entries(), 2 * 20 + 64u);  // 40,000 offers: rebuilt many times
  // last round: key k used at 1999 + (7k mod 20)/20; depth ties never occur (distinct times)
  std::vector<std::uint64_t> expect(20);
  for (std::uint64_t k = 0; k < 20; ++k) expect[(k * 7) % 20] = k;
  for (std::uint64_t want : expect) {
    std::uint64_t v = 0;
    ASSERT_TRUE(p.victim(v));
    EXPECT_EQ(v, want);
    p.forget(v);
  }
  std::uint64_t v = 0;
  EXPECT_FALSE(p.victim(v));
}
