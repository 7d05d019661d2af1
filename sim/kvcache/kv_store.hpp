// servesim sim: the session KV store below the GPUs — L2 host DRAM and L3 storage (SSD or a
// distributed store), per node, HiCache/Mooncake-style and cluster-global: a prefill rank on any
// node can load a session's KV from any node's tier over the fabric.
//
// An object is one idle session's KV (its whole history, one copy: latent/compressed caches once,
// recurrent states whole) with the number of history tokens it covers. Invariant (tested): every
// object is in exactly one of {being offloaded, L2, L3, being loaded back} until it is freed, and
//   bytes offloaded into the store = bytes held in L2 + L3 + bytes that left the store
// (loaded back, dropped for room, or released as stale: an older copy a newer offload replaces).
#pragma once
#include "scenarios/deployment.hpp"
#include "sim/kvcache/prefix_cache.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

namespace servesim {

class KvStore {
 public:
  enum class Tier { l2 = 2, l3 = 3 };
  struct Object {
    long long session = 0;
    long long tokens = 0;  ///< history tokens covered
    double bytes = 0;
    int node = 0;
    Tier tier = Tier::l2;  ///< where its bytes are counted (a demotion counts in L3 from its start)
    bool busy = false;     ///< being demoted or loaded back: neither evictable nor loadable
    std::uint64_t gen = 0; ///< distinguishes successive objects of one session
  };
  /// What the caller must do after a change: move objects L2→L3 (flows), nothing else is implicit.
  struct Demotion {
    long long session = 0;
    int node = 0;
    double bytes = 0;
    std::uint64_t gen = 0;
  };

  /// `policy` makes one eviction policy per node and tier (sim/prefix_cache.hpp; "lru" by default):
  /// it picks which idle object leaves L2 (demoted or dropped) or L3 (dropped).
  KvStore(TierSpec spec, int nodes, const std::function<std::unique_ptr<EvictionPolicy>()>& policy);

  /// An offload finished: the session's object now sits in `node`'s L2. Objects that no longer fit
  /// are demoted to L3 (returned: start their flows, then call demoted()) or, without L3 room,
  /// dropped (freed) immediately, least recently stored first.
  std::vector<Demotion> put_l2(long long session, long long tokens, double bytes, int node, double t_s);
  void demoted(long long session, std::uint64_t gen, double t_s);
  /// The object of `session` (nullptr when none or busy).
  const Object* find(long long session) const;
  /// True when the store has an object for `session`, busy or not.
  bool holds(long long session) const { return objects_.count(session) > 0; }
  /// Marks the object busy for a load-back; returns it (must exist and not be busy).
  Object take_for_load(long long session);
  /// The load-back finished (or the object is not needed, even while it is being demoted: the
  /// demotion's demoted() is then ignored): it leaves the store.
  void release(long long session, double t_s);

  double bytes(Tier t) const { return t == Tier::l2 ? l2_bytes_ : l3_bytes_; }
  double bytes_on(Tier t, int node) const;
  double offloaded_bytes() const { return offloaded_; }
  double left_bytes() const { return left_; }  ///< loaded back, dropped or released
  double dropped_bytes() const { return dropped_; }
  std::size_t objects() const { return objects_.size(); }

 private:
  void erase(long long session, bool dropped);
  EvictionPolicy& policy(Tier t, int node) { return *(t == Tier::l2 ? pol2_ : pol3_)[static_cast<size_t>(node)]; }
  TierSpec spec_;
  std::unordered_map<long long, Object> objects_;
  // per node: which idle objects of L2 / L3 go first (busy objects are not offered)
  std::vector<std::unique_ptr<EvictionPolicy>> pol2_, pol3_;
  std::vector<double> node2_, node3_;
  double l2_bytes_ = 0, l3_bytes_ = 0, offloaded_ = 0, left_ = 0, dropped_ = 0;
  std::uint64_t next_gen_ = 0;
};

}  // namespace servesim
