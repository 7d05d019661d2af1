#include "sim/kv_store.hpp"

#include <stdexcept>

namespace servesim {

KvStore::KvStore(TierSpec spec, int nodes)
    : spec_(spec), lru2_(static_cast<size_t>(nodes)), lru3_(static_cast<size_t>(nodes)), node2_(static_cast<size_t>(nodes), 0.0),
      node3_(static_cast<size_t>(nodes), 0.0) {}

double KvStore::bytes_on(Tier t, int node) const { return (t == Tier::l2 ? node2_ : node3_)[static_cast<size_t>(node)]; }

std::vector<KvStore::Demotion> KvStore::put_l2(long long session, long long tokens, double bytes, int node, double) {
  if (objects_.count(session)) erase(session, true);  // an older copy of the same session is stale
  const size_t n = static_cast<size_t>(node);
  offloaded_ += bytes;
  objects_[session] = Object{session, tokens, bytes, node, Tier::l2, false, ++next_gen_};
  lru2_[n].push_back(session);
  pos_[session] = std::prev(lru2_[n].end());
  node2_[n] += bytes;
  l2_bytes_ += bytes;
  std::vector<Demotion> out;
  for (auto it = lru2_[n].begin(); node2_[n] > spec_.host_bytes_per_node && it != lru2_[n].end();) {
    Object& v = objects_.at(*it);
    if (v.busy) {
      ++it;
      continue;
    }
    if (spec_.storage_enabled) {  // make room in L3 by dropping its oldest idle objects
      for (auto j = lru3_[n].begin(); j != lru3_[n].end() && node3_[n] + v.bytes > spec_.storage_bytes_per_node;) {
        const long long victim = *j++;
        if (!objects_.at(victim).busy) erase(victim, true);
      }
    }
    if (spec_.storage_enabled && node3_[n] + v.bytes <= spec_.storage_bytes_per_node) {
      // demote: L2 room is given up now, L3 room reserved now; the copy is in flight until demoted()
      it = lru2_[n].erase(it);
      pos_.erase(v.session);
      node2_[n] -= v.bytes, l2_bytes_ -= v.bytes;
      node3_[n] += v.bytes, l3_bytes_ += v.bytes;
      v.tier = Tier::l3;
      v.busy = true;
      out.push_back({v.session, node, v.bytes, v.gen});
    } else {
      ++it;
      erase(v.session, true);
    }
  }
  return out;
}

void KvStore::demoted(long long session, std::uint64_t gen, double) {
  auto it = objects_.find(session);
  if (it == objects_.end() || it->second.gen != gen) return;  // replaced or dropped meanwhile
  Object& o = it->second;
  lru3_[static_cast<size_t>(o.node)].push_back(session);
  pos_[session] = std::prev(lru3_[static_cast<size_t>(o.node)].end());
  o.busy = false;
  demoted_ += o.bytes;
}

const KvStore::Object* KvStore::find(long long session) const {
  auto it = objects_.find(session);
  return it == objects_.end() || it->second.busy ? nullptr : &it->second;
}

KvStore::Object KvStore::take_for_load(long long session) {
  Object& o = objects_.at(session);
  if (o.busy) throw std::logic_error("KvStore: object is busy");
  o.busy = true;
  return o;
}

void KvStore::release(long long session, double) {
  if (objects_.count(session)) erase(session, false);
}

void KvStore::erase(long long session, bool dropped) {
  auto it = objects_.find(session);
  const Object o = it->second;
  const size_t n = static_cast<size_t>(o.node);
  auto p = pos_.find(session);
  if (p != pos_.end()) {  // not listed while a demotion is in flight
    (o.tier == Tier::l2 ? lru2_[n] : lru3_[n]).erase(p->second);
    pos_.erase(p);
  }
  if (o.tier == Tier::l2) node2_[n] -= o.bytes, l2_bytes_ -= o.bytes;
  else node3_[n] -= o.bytes, l3_bytes_ -= o.bytes;
  objects_.erase(it);
  left_ += o.bytes;
  if (dropped) dropped_ += o.bytes;
}

}  // namespace servesim
