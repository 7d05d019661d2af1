#include "sim/kvcache/kv_store.hpp"

#include <stdexcept>

namespace servesim {

KvStore::KvStore(TierSpec spec, int nodes, const std::function<std::unique_ptr<EvictionPolicy>()>& policy)
    : spec_(spec), node2_(static_cast<size_t>(nodes), 0.0), node3_(static_cast<size_t>(nodes), 0.0) {
  for (int n = 0; n < nodes; ++n) pol2_.push_back(policy()), pol3_.push_back(policy());
}

double KvStore::bytes_on(Tier t, int node) const { return (t == Tier::l2 ? node2_ : node3_)[static_cast<size_t>(node)]; }

std::vector<KvStore::Demotion> KvStore::put_l2(long long session, long long tokens, double bytes, int node, double t_s) {
  // an older copy of the same session is stale: released (it left the store), not dropped, which
  // counts only what capacity pushed out (rev25: 17 GB of replaced copies read as a too-small L2)
  if (objects_.count(session)) erase(session, false);
  const size_t n = static_cast<size_t>(node);
  offloaded_ += bytes;
  objects_[session] = Object{session, tokens, bytes, node, Tier::l2, false, ++next_gen_};
  policy(Tier::l2, node).make_evictable(static_cast<std::uint64_t>(session), 0, t_s);
  node2_[n] += bytes;
  l2_bytes_ += bytes;
  std::vector<Demotion> out;
  std::uint64_t key = 0;
  while (node2_[n] > spec_.host_bytes_per_node && policy(Tier::l2, node).victim(key)) {
    Object& v = objects_.at(static_cast<long long>(key));
    policy(Tier::l2, node).forget(key);
    if (spec_.storage_enabled) {  // make room in L3 by dropping what its policy gives up first
      std::uint64_t k3 = 0;
      while (node3_[n] + v.bytes > spec_.storage_bytes_per_node && policy(Tier::l3, node).victim(k3)) erase(static_cast<long long>(k3), true);
    }
    if (spec_.storage_enabled && node3_[n] + v.bytes <= spec_.storage_bytes_per_node) {
      // demote: L2 room is given up now, L3 room reserved now; the copy is in flight until demoted()
      node2_[n] -= v.bytes, l2_bytes_ -= v.bytes;
      node3_[n] += v.bytes, l3_bytes_ += v.bytes;
      v.tier = Tier::l3;
      v.busy = true;
      out.push_back({v.session, node, v.bytes, v.gen});
    } else {
      erase(v.session, true);
    }
  }
  return out;
}

void KvStore::demoted(long long session, std::uint64_t gen, double t_s) {
  auto it = objects_.find(session);
  if (it == objects_.end() || it->second.gen != gen) return;  // replaced or dropped meanwhile
  Object& o = it->second;
  o.busy = false;
  policy(Tier::l3, o.node).make_evictable(static_cast<std::uint64_t>(session), 0, t_s);
}

const KvStore::Object* KvStore::find(long long session) const {
  auto it = objects_.find(session);
  return it == objects_.end() || it->second.busy ? nullptr : &it->second;
}

KvStore::Object KvStore::take_for_load(long long session) {
  Object& o = objects_.at(session);
  if (o.busy) throw std::logic_error("KvStore: object is busy");
  o.busy = true;
  policy(o.tier, o.node).forget(static_cast<std::uint64_t>(session));
  return o;
}

void KvStore::release(long long session, double) {
  if (objects_.count(session)) erase(session, false);
}

void KvStore::erase(long long session, bool dropped) {
  auto it = objects_.find(session);
  const Object o = it->second;
  const size_t n = static_cast<size_t>(o.node);
  policy(o.tier, o.node).forget(static_cast<std::uint64_t>(session));
  if (o.tier == Tier::l2) node2_[n] -= o.bytes, l2_bytes_ -= o.bytes;
  else node3_[n] -= o.bytes, l3_bytes_ -= o.bytes;
  objects_.erase(it);
  left_ += o.bytes;
  if (dropped) dropped_ += o.bytes;
}

}  // namespace servesim
