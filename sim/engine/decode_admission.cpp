// Decode admission: which decode DP rank a prefilled request's KV goes to, and when.
//
// A request needs room for its whole KV (prompt + output) on one rank. Requests are considered in
// the order they finished prefill. One that fits on some rank takes the rank the decode router
// picks among the ranks with room that no earlier waiting request holds. One that fits nowhere
// waits and holds the rank with the most free KV (where it will fit first): no later request is
// admitted there, so that rank drains until the waiting request fits (or another rank frees more
// and the hold moves there); later requests still go to every other rank. One that fits only on a
// held rank waits behind its holder, holding nothing. Behind the eighth waiting request
// (kMaxWaits) the queue waits in order. This is how SGLang's
// disaggregated decode admits: each decode DP rank keeps a FIFO prealloc queue, and a head that does
// not fit blocks its own rank only (python/sglang/srt/disaggregation/decode.py,
// DecodePreallocQueue.pop_preallocated: `break` when a request's tokens exceed what its rank can
// allocate). Here the waiting request's rank is chosen while it waits rather than on arrival.
// Before the twenty-seventh session one FIFO spanned every decode rank, so a 1M-token request that
// fitted nowhere held back every smaller request behind it (agent-10k K3: ~1.7 s of each request's
// TTFT whatever its size; engine review, twenty-seventh session).
#include "sim/engine/engine.hpp"

#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>

#include <algorithm>
#include <climits>
#include <limits>

namespace servesim {

// The decode ranks ordered by least_loaded's key: fewest admitted sequences, then most free KV
// bytes, then candidate order (instance, rank), with order statistics (GNU pb_ds): the rank
// least_loaded_decode would pick from the candidate vector, and its tied peers, are found in
// O(running levels · log ranks) instead of a scan of every rank per dispatch (issue 15: 7,140
// decode ranks at 10,000 nodes). Same choice, same tie rotation (Router::rotate_decode_tie).
struct DecodePool::RankIndex {
  struct Key {
    int running = 0;
    double free = 0;
    int instance = 0, rank = 0;
    bool operator<(const Key& o) const {
      if (running != o.running) return running < o.running;
      if (free != o.free) return free > o.free;
      return instance != o.instance ? instance < o.instance : rank < o.rank;
    }
  };
  __gnu_pbds::tree<Key, __gnu_pbds::null_type, std::less<Key>, __gnu_pbds::rb_tree_tag, __gnu_pbds::tree_order_statistics_node_update> t;
};

DecodePool::DecodePool(Engine& e) : e_(e), mtp_rng_(e.opt.seed ^ 0x6d7470ULL), tokens_per_step_(e.d.decode.tokens_per_step()) {}

DecodePool::~DecodePool() = default;

void DecodePool::build_index() {
  index_ = std::make_unique<RankIndex>();
  for (const auto& q : inst_)
    for (size_t k = 0; k < q.ranks.size(); ++k) reindex(q, k, true);
}

namespace {
// The first rank (the most free) of the running level after `running`, in index order.
template <class Tree>
auto next_level(const Tree& t, int running) {
  return t.lower_bound({running + 1, std::numeric_limits<double>::infinity(), INT_MIN, INT_MIN});
}
}  // namespace

void DecodePool::reindex(const Instance& q, size_t rank, bool insert) {
  if (!index_) return;
  const Rank& dr = q.ranks[rank];
  const RankIndex::Key k{dr.admitted, dr.capacity - dr.reserved, q.id, static_cast<int>(rank)};
  if (insert) index_->t.insert(k);
  else index_->t.erase(k);
}

bool DecodePool::held(int instance, int rank) const {
  return !held_.empty() && held_[static_cast<size_t>(instance) * inst_.front().ranks.size() + static_cast<size_t>(rank)] != 0;
}

void DecodePool::hold(int instance, int rank) {
  const size_t dp = inst_.front().ranks.size();
  if (held_.empty()) held_.assign(inst_.size() * dp, 0);
  const size_t i = static_cast<size_t>(instance) * dp + static_cast<size_t>(rank);
  held_[i] = 1;
  held_list_.push_back(i);
}

// The best rank with room for `need` bytes that no waiting request holds: the first such rank in
// key order of the lowest running level that has one; among its ties (same running and free), the
// router's turn. With nothing held this is exactly least_loaded_decode's choice.
bool DecodePool::pick_indexed(double need, int& instance, int& rank) {
  using Key = RankIndex::Key;
  auto& t = index_->t;
  auto it = t.begin();
  while (it != t.end()) {
    const int level = it->running;
    while (it != t.end() && it->running == level && it->free >= need && held(it->instance, it->rank)) ++it;
    if (it != t.end() && it->running == level && it->free >= need) break;
    it = next_level(t, level);
  }
  if (it == t.end()) return false;
  const std::size_t first = t.order_of_key({it->running, it->free, INT_MIN, INT_MIN});
  const std::size_t ties = t.order_of_key({it->running, it->free, INT_MAX, INT_MAX}) - first;
  if (held_list_.empty()) {
    if (ties > 1) it = t.find_by_order(first + e_.decode_router->rotate_decode_tie(ties));
  } else if (ties > 1) {
    std::vector<Key> free_ties;
    for (auto j = t.find_by_order(first); free_ties.size() < ties && j != t.end() && j->running == it->running && j->free == it->free; ++j)
      if (!held(j->instance, j->rank)) free_ties.push_back(*j);
    if (free_ties.size() > 1) {
      const Key& k = free_ties[e_.decode_router->rotate_decode_tie(free_ties.size())];
      instance = k.instance, rank = k.rank;
      return true;
    }
  }
  instance = it->instance, rank = it->rank;
  return true;
}

// The rank a request that fits nowhere holds: the most free KV among the ranks not held (lowest
// instance, then rank, on a tie). False when every rank is held.
bool DecodePool::hold_most_free() {
  double best = -std::numeric_limits<double>::infinity();
  int bi = -1, br = -1;
  if (index_) {  // each running level's first rank not held is that level's most free
    auto& t = index_->t;
    for (auto it = t.begin(); it != t.end();) {
      const int level = it->running;
      while (it != t.end() && it->running == level && held(it->instance, it->rank)) ++it;
      if (it != t.end() && it->running == level) {
        if (it->free > best || (it->free == best && std::make_pair(it->instance, it->rank) < std::make_pair(bi, br)))
          best = it->free, bi = it->instance, br = it->rank;
      }
      it = next_level(t, level);
    }
  } else {
    for (const auto& q : inst_)
      for (size_t k = 0; k < q.ranks.size(); ++k) {
        const double free = q.ranks[k].capacity - q.ranks[k].reserved;
        if (!held(q.id, static_cast<int>(k)) && free > best) best = free, bi = q.id, br = static_cast<int>(k);
      }
  }
  if (bi < 0) return false;
  hold(bi, br);
  return true;
}

bool DecodePool::place(const ReqState* r, int& instance, int& rank) {
  const double need = r->kv_whole_bytes;
  if (index_) return pick_indexed(need, instance, rank);
  std::vector<DecodeCandidate>& cand = cand_;
  cand.clear();
  for (auto& q : inst_)
    for (size_t k = 0; k < q.ranks.size(); ++k) {
      const auto& dr = q.ranks[k];
      const double free = dr.capacity - dr.reserved;
      if (free >= need && !held(q.id, static_cast<int>(k))) cand.push_back({q.id, static_cast<int>(k), free, dr.admitted});
    }
  if (cand.empty()) return false;
  const DecodeCandidate& c = cand[e_.decode_router->pick_decode(r->req, cand)];
  instance = c.instance, rank = c.rank;
  return true;
}

void DecodePool::enqueue(ReqState* r) {
  pending_.push_back(r);
  dispatch_pending();
}

void DecodePool::dispatch_pending() {
  if (dispatching_) {  // a guard: transfers start asynchronously, but were one to re-enter, run the pass again after this one
    redispatch_ = true;
    return;
  }
  dispatching_ = true;
  do {
    redispatch_ = false;
    dispatch_once();
  } while (redispatch_);
  dispatching_ = false;
}

// Requests a pass looks past: behind the kMaxWaits-th request that cannot be admitted the queue
// waits in order. An assumption that bounds a pass at O(kMaxWaits · log ranks): when more wait the
// pool is overloaded (a capacity search's failing point), where what matters is that it fails; at
// a served load a few requests wait. (Each freed KV byte re-runs the pass: with no bound an
// overloaded K3 pool took 171 s for one run.)
constexpr std::size_t kMaxWaits = 8;

// The most free KV bytes of any rank, held or not.
double DecodePool::max_free_any() const {
  double best = 0;
  if (index_) {  // each running level's first rank is its most free
    const auto& t = index_->t;
    for (auto it = t.begin(); it != t.end(); it = next_level(t, it->running))
      best = std::max(best, it->free);
    return best;
  }
  for (const auto& q : inst_)
    for (const auto& dr : q.ranks) best = std::max(best, dr.capacity - dr.reserved);
  return best;
}

void DecodePool::dispatch_once() {
  std::size_t waiting = 0;
  for (std::size_t i = 0; i < pending_.size();) {  // (by index: robust to an enqueue from inside)
    ReqState* r = pending_[i];
    int instance = 0, rank = 0;
    if (!place(r, instance, rank)) {
      if (++waiting > kMaxWaits) break;
      // it waits; it holds a rank only if no rank, held or not, has room for it: one that fits on a
      // rank an earlier waiting request holds queues behind that request there, holding nothing
      if (max_free_any() < r->kv_whole_bytes && !hold_most_free()) break;  // every rank is held
      ++i;
      continue;
    }
    const double need = r->kv_whole_bytes;
    Instance& q = inst_[static_cast<size_t>(instance)];
    Rank& dr = q.ranks[static_cast<size_t>(rank)];
    reindex(q, static_cast<size_t>(rank), false);
    dr.reserved += need;
    ++dr.admitted;
    reindex(q, static_cast<size_t>(rank), true);
    r->kv_decode_bytes = need;
    r->rec.decode_instance = q.id;
    r->decode_rank = rank;
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    emit_memory(q.id);
    e_.mover.transfer(r);
  }
  for (size_t i : held_list_) held_[i] = 0;
  held_list_.clear();
}

}  // namespace servesim
