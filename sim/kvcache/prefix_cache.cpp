#include "sim/kvcache/prefix_cache.hpp"

#include "sim/kvcache/prefix_index.hpp"

#include <algorithm>
#include <stdexcept>

namespace servesim {

PrefixCache::PrefixCache(int block_tokens, double block_bytes, double checkpoint_bytes, std::unique_ptr<EvictionPolicy> eviction)
    : block_tokens_(block_tokens), block_bytes_(block_bytes), checkpoint_bytes_(checkpoint_bytes), eviction_(std::move(eviction)) {}

PrefixCache::~PrefixCache() = default;

double PrefixCache::node_bytes(const Node& n) const {
  const double blocks = static_cast<double>(n.ids.size() - 1) + static_cast<double>(n.last_tokens) / block_tokens_;
  return blocks * block_bytes_ + (n.checkpoint ? checkpoint_bytes_ : 0.0);
}

// The policy hears only of changes (what it holds is mirrored in offered / offered_s): a request's
// path refreshes every node on it, most of them inner nodes it never held or leaves it holds as they were.
void PrefixCache::refresh(Node* n) {
  if (n == &root_) return;
  if (n->pins == 0 && n->children.empty()) {
    if (n->offered && n->offered_s == n->last_use) return;
    eviction_->make_evictable(n->key, n->end, n->last_use);
    n->offered = true, n->offered_s = n->last_use;
  } else if (n->offered) {
    eviction_->forget(n->key);
    n->offered = false;
  }
}

PrefixCache::Node* PrefixCache::split(Node* n, int k) {
  auto owned = std::make_unique<Node>();
  Node* top = owned.get();
  top->key = next_key_++;
  top->parent = n->parent;
  top->ids.assign(n->ids.begin(), n->ids.begin() + k);
  top->last_tokens = block_tokens_;  // a split point lies before the (possibly partial) last block
  top->end = n->end - static_cast<int>(n->ids.size()) + k;
  top->pins = n->pins;
  top->last_use = n->last_use;
  n->parent->children.set(top->ids.front(), top);
  n->ids.erase(n->ids.begin(), n->ids.begin() + k);
  n->parent = top;
  top->children.set(n->ids.front(), n);
  nodes_.emplace(top->key, std::move(owned));
  refresh(top);
  changed();  // the same blocks, cut differently: match results stay, but say so (cheap, rare)
  return top;
}

template <class F>
int PrefixCache::descend(const std::uint64_t* ids, int n, int& last_len, F&& on_full_node) const {
  const Node* node = &root_;
  int pos = 0;
  last_len = block_tokens_;
  while (pos < n) {
    const Node* c = node->children.find(ids[pos]);
    if (!c) break;
    int k = 0;
    const int len = static_cast<int>(c->ids.size());
    while (k < len && pos + k < n && c->ids[static_cast<size_t>(k)] == ids[pos + k]) ++k;
    pos += k;
    last_len = k == len ? c->last_tokens : block_tokens_;
    if (k < len) break;
    on_full_node(*c);
    node = c;
  }
  return pos;
}

PrefixMatch PrefixCache::match(const Request& r) const {
  PrefixMatch m;
  if (!usable(r)) return m;
  int last_len = 0, cp_blocks = 0;
  const int pos = descend(r.block_hashes.data(), static_cast<int>(r.block_hashes.size()), last_len, [&](const Node& c) {
    if (c.checkpoint && static_cast<long long>(c.end) * block_tokens_ < r.input_tokens) cp_blocks = c.end;
  });
  m.present_blocks = pos;
  if (checkpoint_bytes_ > 0) {
    m.pin_blocks = cp_blocks;
    m.tokens = static_cast<long long>(cp_blocks) * block_tokens_;
  } else {
    m.pin_blocks = pos;
    m.tokens = resumable_tokens(pos, last_len, r);
  }
  return m;
}

PrefixWalk PrefixCache::walk(const std::uint64_t* ids, int n) const {
  PrefixWalk w;
  w.present = descend(ids, n, w.last_tokens, [&](const Node& c) {
    if (c.checkpoint) w.checkpoint_end = c.end;
  });
  return w;
}

// Mirrors match(): for a rank whose match of r stops where the walk stopped, the walk saw the same
// nodes; only the checkpoint rule depends on r (match takes the deepest checkpoint before r's end).
long long PrefixCache::tokens_from_walk(const PrefixWalk& w, const Request& r) const {
  if (checkpoint_bytes_ > 0) {
    if (static_cast<long long>(w.checkpoint_end) * block_tokens_ >= r.input_tokens) return -1;
    return static_cast<long long>(w.checkpoint_end) * block_tokens_;
  }
  return resumable_tokens(w.present, w.last_tokens, r);
}

// Without checkpoints: the tokens of `present` leading blocks (the last one `last_len` tokens), less
// r's last token, whose logits the prefill must compute.
long long PrefixCache::resumable_tokens(int present, int last_len, const Request& r) const {
  const long long t = present > 0 ? static_cast<long long>(present - 1) * block_tokens_ + last_len : 0;
  return std::min(t, r.input_tokens - 1);
}

void PrefixCache::changed() {
  if (index_) index_->touched(index_rank_);
}

std::vector<PrefixCache::Node*> PrefixCache::path(const Request& r, int blocks) {
  std::vector<Node*> out;
  Node* node = &root_;
  int pos = 0;
  while (pos < blocks) {
    Node* c = node->children.find(r.block_hashes[static_cast<size_t>(pos)]);
    if (!c) throw std::logic_error("PrefixCache::path: block not cached");
    const int len = static_cast<int>(c->ids.size());
    if (pos + len > blocks) c = split(c, blocks - pos);
    pos += static_cast<int>(c->ids.size());
    out.push_back(c);
    node = c;
  }
  return out;
}

void PrefixCache::add_pins(Node* n, int delta) {
  const bool was = n->pins > 0;
  n->pins += delta;
  const bool is = n->pins > 0;
  if (was != is) pinned_bytes_ += (is ? 1 : -1) * node_bytes(*n);
}

void PrefixCache::pin(const Request& r, int blocks) {
  if (blocks <= 0) return;
  for (Node* n : path(r, blocks)) {
    add_pins(n, 1);
    refresh(n);
  }
}

void PrefixCache::unpin(const Request& r, int blocks, double t_s) {
  if (blocks <= 0) return;
  for (Node* n : path(r, blocks)) {
    add_pins(n, -1);
    n->last_use = t_s;
    refresh(n);
  }
}

double PrefixCache::release_and_insert(const Request& r, int pinned, double t_s) {
  const double before = bytes_;
  if (!usable(r)) {
    return 0.0;
  }
  const auto& ids = r.block_hashes;
  const int n = static_cast<int>(ids.size());
  // follow what is cached, splitting at a divergence
  Node* node = &root_;
  int pos = 0;
  while (pos < n) {
    Node* c = node->children.find(ids[static_cast<size_t>(pos)]);
    if (!c) break;
    int k = 0;
    const int len = static_cast<int>(c->ids.size());
    while (k < len && pos + k < n && c->ids[static_cast<size_t>(k)] == ids[static_cast<size_t>(pos + k)]) ++k;
    if (k < len) c = split(c, k);
    pos += k;
    node = c;
  }
  if (pos < n) {  // the new suffix becomes one leaf
    auto owned = std::make_unique<Node>();
    Node* leaf = owned.get();
    leaf->key = next_key_++;
    leaf->parent = node;
    leaf->ids.assign(ids.begin() + pos, ids.end());
    leaf->last_tokens = static_cast<int>(std::min<long long>(block_tokens_, r.input_tokens - static_cast<long long>(n - 1) * block_tokens_));
    leaf->end = n;
    node->children.set(leaf->ids.front(), leaf);
    nodes_.emplace(leaf->key, std::move(owned));
    bytes_ += node_bytes(*leaf);
    if (index_) index_->add(index_rank_, leaf->ids, pos);
    changed();
    refresh(node);
    node = leaf;
  }
  // State checkpoints (models with per-sequence state, e.g. KDA, SWA windows: a cached prefix is
  // resumable only where the state was saved), at node boundaries: at the last whole block, which a
  // longer prompt extending this one resumes from; and at the last whole block before the prompt's
  // last token, which an identical prompt resumes from (its last token's logits must be computed,
  // so a prompt of exactly k blocks cannot resume at block k). The two differ only when the prompt
  // is an exact multiple of the block size.
  if (checkpoint_bytes_ > 0)
    for (long long at : {r.input_tokens / block_tokens_, (r.input_tokens - 1) / block_tokens_}) {
      const int whole = static_cast<int>(std::min<long long>(at, n));
      if (whole <= 0) continue;
      Node* cp = path(r, whole).back();
      if (!cp->checkpoint) {
        cp->checkpoint = true;
        changed();
        bytes_ += checkpoint_bytes_;
        if (cp->pins > 0) pinned_bytes_ += checkpoint_bytes_;
      }
    }
  // release the pins and mark the whole path used now
  std::vector<Node*> all = path(r, n);
  int end = 0;
  for (Node* x : all) {
    end += static_cast<int>(x->ids.size());
    if (end <= pinned) add_pins(x, -1);
    x->last_use = t_s;
    refresh(x);
  }
  return bytes_ - before;
}

double PrefixCache::evict(double want) {
  double freed = 0;
  std::uint64_t key = 0;
  while (freed < want && eviction_->victim(key)) {
    eviction_->forget(key);
    auto it = nodes_.find(key);
    Node* n = it->second.get();
    freed += node_bytes(*n);
    Node* parent = n->parent;
    if (index_) index_->remove(index_rank_, n->ids, n->end - static_cast<int>(n->ids.size()));
    changed();
    parent->children.erase(n->ids.front());
    nodes_.erase(it);
    refresh(parent);
  }
  bytes_ -= freed;
  return freed;
}

}  // namespace servesim
