// The pool-wide prefix index (sim/kvcache/prefix_index.hpp) against what each rank's own radix tree
// answers: by hand on a small case, then on random caches (inserts, checkpoints, evictions, partial
// last blocks, prompts past the indexed positions), every answer compared with PrefixCache::match.
#include "sim/kvcache/prefix_cache.hpp"
#include "sim/kvcache/prefix_index.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <random>

using namespace servesim;

namespace {

struct Pool {
  std::vector<std::unique_ptr<PrefixCache>> caches;
  std::unique_ptr<PrefixIndex> index;
  Pool(int ranks, int block_tokens, double checkpoint_bytes) {
    std::vector<PrefixCache*> raw;
    for (int g = 0; g < ranks; ++g) {
      caches.push_back(std::make_unique<PrefixCache>(block_tokens, 1.0, checkpoint_bytes, make_eviction_policy("lru")));
      raw.push_back(caches.back().get());
    }
    index = std::make_unique<PrefixIndex>(raw);
  }
};

// A prompt of `tokens` tokens whose blocks are the chained ids of `content` (one symbol per block;
// the last block's id also carries its length, so a partial block never equals a whole one).
Request prompt(const std::vector<int>& content, long long tokens, int block_tokens) {
  Request r;
  r.block_tokens = block_tokens;
  r.input_tokens = tokens;
  r.output_tokens = 1;
  std::uint64_t h = 1469598103934665603ULL;
  const long long n = (tokens + block_tokens - 1) / block_tokens;
  for (long long i = 0; i < n; ++i) {
    const long long len = std::min<long long>(block_tokens, tokens - i * block_tokens);
    h = (h ^ static_cast<std::uint64_t>(content[static_cast<size_t>(i)] * 1000003 + len)) * 1099511628211ULL;
    r.block_hashes.push_back(h);
  }
  return r;
}

void insert(PrefixCache& c, const Request& r, double t) { c.release_and_insert(r, 0, t); }

}  // namespace

// 100 ranks hold a 3-block system prompt; rank 5 also holds a session's next 2 blocks; rank 7 holds
// only the first block. Plain (MLA) caches, 16-token blocks; the asked prompt is 5 whole blocks
// + 6 tokens (6 blocks).
TEST(PrefixIndex, HandCase) {
  const int bt = 16;
  Pool pool(100, bt, 0.0);
  const std::vector<int> sys = {1, 2, 3}, session = {1, 2, 3, 40, 41, 42};
  for (int g = 0; g < 100; ++g)
    if (g != 7) insert(*pool.caches[static_cast<size_t>(g)], prompt(sys, 3 * bt, bt), 1.0);
  insert(*pool.caches[7], prompt({1}, bt, bt), 1.0);
  insert(*pool.caches[5], prompt(session, 5 * bt, bt), 2.0);
  const Request ask = prompt(session, 5 * bt + 6, bt);
  EXPECT_EQ(pool.index->holders(ask.block_hashes[0]), 100u);
  EXPECT_EQ(pool.index->holders(ask.block_hashes[2]), 99u);
  EXPECT_EQ(pool.index->holders(ask.block_hashes[3]), 1u);
  EXPECT_EQ(pool.index->holders(ask.block_hashes[5]), 0u);  // the partial last block is nobody's
  std::vector<long long> out;
  pool.index->match_all(ask, out);
  ASSERT_EQ(out.size(), 100u);
  EXPECT_EQ(out[5], 5 * bt);  // 5 whole blocks
  EXPECT_EQ(out[7], 1 * bt);  // the first block only
  EXPECT_EQ(out[0], 3 * bt);  // the system prompt
  EXPECT_EQ(out[99], 3 * bt);
  // the same prompt again, after rank 0 evicts everything: the memo must see the change
  pool.caches[0]->evict(1e18);
  pool.index->match_all(ask, out);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[1], 3 * bt);
  EXPECT_EQ(pool.index->holders(ask.block_hashes[0]), 99u);
}

// Checkpoint (KDA-style) caches, 8-token blocks, 40 ranks. Every rank holds {1,2,3,4,5,6}, {1,2,3,4,9,9}
// and {1,2,3,8} as prompts of whole blocks: nodes end at 3, 4 and 6, checkpoints at 3 (from
// {1,2,3,8}: (input-1)/bt), 5 and 6, none at 4.
TEST(PrefixIndex, HandCaseCheckpoints) {
  const int bt = 8;
  Pool pool(40, bt, 1.0);
  for (auto& c : pool.caches)
    for (const std::vector<int>& p : {std::vector<int>{1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 9, 9}, {1, 2, 3, 8}}) insert(*c, prompt(p, static_cast<long long>(p.size()) * bt, bt), 1.0);
  const Request ask = prompt({1, 2, 3, 4, 77}, 5 * bt, bt);  // the first 4 blocks are everybody's
  std::vector<long long> out;
  pool.index->match_all(ask, out);
  EXPECT_EQ(out[3], 3 * bt);  // resumes at the checkpoint at block 3
  // rank 3 prefills exactly {1,2,3,4}: a checkpoint at 4 (no new block, no split): it must be seen
  insert(*pool.caches[3], prompt({1, 2, 3, 4}, 4 * bt, bt), 2.0);
  pool.index->match_all(ask, out);
  EXPECT_EQ(out[3], 4 * bt);
  EXPECT_EQ(out[2], 3 * bt);
  // a row with more ids than its tokens fill (5 ids, 3 blocks + 1 token): the deepest checkpoint on
  // the common walk (4) lies past the prompt's end, so the rank's own match takes the one at 3
  Request odd = prompt({1, 2, 3, 4, 77}, 5 * bt, bt);
  odd.input_tokens = 3 * bt + 1;
  pool.index->match_all(odd, out);
  EXPECT_EQ(out[3], 3 * bt);
  EXPECT_EQ(pool.caches[3]->match(odd).tokens, 3 * bt);
}

namespace {

// Random pools: a few popular system prompts (held by most ranks), sessions that extend them on a
// few ranks, evictions; after each change, every rank's answer from the index equals its own match.
void random_pool(int block_tokens, double checkpoint_bytes, unsigned seed, long long max_blocks) {
  const int ranks = 90;
  Pool pool(ranks, block_tokens, checkpoint_bytes);
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  std::vector<std::vector<int>> systems = {{1, 2, 3, 4}, {1, 2, 9}, {5}, {6, 7, 8, 9, 10, 11}};
  auto random_prompt = [&]() {
    std::vector<int> content = systems[static_cast<size_t>(pick(4))];
    const int session = pick(30), extra = pick(static_cast<int>(max_blocks));
    for (int i = 0; i < extra; ++i) content.push_back(100 + session * 50 + i);  // a session's history: the same run for a session
    const long long whole = static_cast<long long>(content.size());
    const long long tokens = whole * block_tokens - (pick(3) == 0 ? pick(block_tokens - 1) : 0);  // sometimes a partial last block
    Request r = prompt(content, tokens, block_tokens);
    if (pick(8) == 0) r.input_tokens = std::max<long long>(1, tokens - 2LL * block_tokens);  // more ids than the tokens fill (an odd trace row)
    return r;
  };
  // most ranks get the system prompts: above PrefixIndex::kFewHolders
  for (int g = 0; g < ranks; ++g)
    for (size_t s = 0; s < systems.size(); ++s)
      if (pick(10) < 8) insert(*pool.caches[static_cast<size_t>(g)], prompt(systems[s], static_cast<long long>(systems[s].size()) * block_tokens, block_tokens), 0.5);
  std::vector<long long> out;
  long long compared = 0, deep = 0, shallow = 0;
  for (int step = 0; step < 1500; ++step) {
    const int what = pick(10);
    PrefixCache& c = *pool.caches[static_cast<size_t>(pick(ranks))];
    if (what < 4) insert(c, random_prompt(), step);
    else if (what < 5) {  // a cached system prompt's first k blocks again: often only new checkpoints, no new block
      const auto& sys = systems[static_cast<size_t>(pick(4))];
      const int k = 1 + pick(static_cast<int>(sys.size()));
      insert(c, prompt(std::vector<int>(sys.begin(), sys.begin() + k), static_cast<long long>(k) * block_tokens, block_tokens), step);
    } else if (what < 6) c.evict(static_cast<double>(pick(40)));
    const Request ask = random_prompt();
    pool.index->match_all(ask, out);
    ASSERT_EQ(out.size(), static_cast<size_t>(ranks));
    for (int g = 0; g < ranks; ++g) {
      const long long want = pool.caches[static_cast<size_t>(g)]->match(ask).tokens;
      ASSERT_EQ(out[static_cast<size_t>(g)], want) << "step " << step << " rank " << g;
      ++compared;
      deep += want > 6LL * block_tokens;
      shallow += want > 0 && want <= 6LL * block_tokens;
    }
  }
  EXPECT_GT(compared, 100000);
  EXPECT_GT(deep, 100);     // session hits past the system prompts were compared
  EXPECT_GT(shallow, 1000); // and system-prompt hits
}

}  // namespace

TEST(PrefixIndex, RandomPlainCachesAnswerAsEachRank) { random_pool(4, 0.0, 11, 12); }
TEST(PrefixIndex, RandomCheckpointCachesAnswerAsEachRank) { random_pool(4, 0.5, 12, 12); }
// 16,384-token blocks: only the first 4 positions are indexed (kIndexedTokens = 65,536)
TEST(PrefixIndex, PromptsPastTheIndexedPositionsAnswerAsEachRank) {
  static_assert(PrefixIndex::kIndexedTokens / 16384 == 4);
  random_pool(16384, 0.0, 13, 8);
  random_pool(16384, 0.5, 14, 8);
}

// The index must see every block from the start: a cache that already holds some is refused.
TEST(PrefixIndex, RefusesACacheThatAlreadyHoldsBlocks) {
  PrefixCache c(16, 1.0, 0.0, make_eviction_policy("lru"));
  insert(c, prompt({1, 2}, 32, 16), 0.0);
  EXPECT_THROW(PrefixIndex({&c}), std::logic_error);
  PrefixCache empty(16, 1.0, 0.0, make_eviction_policy("lru"));
  EXPECT_NO_THROW(PrefixIndex({&empty}));
}
