// Tests of the intrusive red-black tree (rbtree/rbtree.h) against a std::multimap model.
//
// Random sequences of insert, erase (of a random live node), find, lower_bound, upper_bound,
// next and prev — millions of operations in all, over small and large key ranges (many equal
// keys, and few) — are applied to the tree and to a std::multimap<key, id>; every answer must
// name the same node, the in-order walk must match the model (equal keys keep insertion order,
// as in the multimap), and check_invariants() must pass (after every step while the tree is
// small, at intervals when large). One variant carries an augmentation (subtree node counts)
// that check_invariants() verifies, and one counts visits and rotations through an observer.
// The seed is PAGEMALLOC_TEST_SEED when set; a failure prints it.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "rbtree/rbtree.h"

namespace pagemalloc::rb {
namespace {

std::uint64_t TestSeed() {
  if (const char* s = std::getenv("PAGEMALLOC_TEST_SEED")) return std::strtoull(s, nullptr, 0);
  return 20261121;
}

struct ByKey : RbLink {};

struct TestNode : ByKey {
  int key = 0;
  int id = 0;
  std::size_t subtree_nodes = 1;  // this node and all below it (the augmentation)
  bool in_tree = false;
};

struct TestTraits : LinkAsBase<TestNode, ByKey> {
  using Node = TestNode;
  using Key = int;
  static int key(const TestNode& n) { return n.key; }
};

struct SubtreeNodes {
  static constexpr bool kEnabled = true;
  static std::size_t count(const TestNode* n) { return n == nullptr ? 0 : n->subtree_nodes; }
  static void update(TestNode* n, const TestNode* left, const TestNode* right) {
    n->subtree_nodes = 1 + count(left) + count(right);
  }
  static bool holds(const TestNode* n, const TestNode* left, const TestNode* right) {
    return n->subtree_nodes == 1 + count(left) + count(right);
  }
};

struct CountingObserver {
  std::uint64_t* visits;
  std::uint64_t* rotations;
  void visited() { ++*visits; }
  void rotated() { ++*rotations; }
};

using PlainTree = RbTree<TestTraits>;
using AugmentedTree = RbTree<TestTraits, SubtreeNodes>;
using CountedTree = RbTree<TestTraits, NoAugment, CountingObserver>;

static_assert(sizeof(PlainTree) == 2 * sizeof(void*), "NoObserver must take no space");

// One random run: `operations` steps with keys in [0, key_range), at most `max_nodes` live.
struct Scenario {
  std::size_t operations;
  int key_range;
  std::size_t max_nodes;
  std::size_t check_every;  // check_invariants() and the in-order walk every this many steps
};

template <class Tree>
class TreeModel {
 public:
  TreeModel(Tree& tree, std::size_t max_nodes, std::uint64_t seed)
      : tree_(tree),
        nodes_(std::make_unique<TestNode[]>(max_nodes)),
        max_nodes_(max_nodes),
        rng_(seed) {
    for (std::size_t i = 0; i < max_nodes; ++i) {
      nodes_[i].id = int(i);
      free_ids_.push_back(int(i));
    }
  }

  void run(const Scenario& s) {
    std::uniform_int_distribution<int> key(0, s.key_range - 1);
    for (std::size_t step = 0; step < s.operations; ++step) {
      SCOPED_TRACE(testing::Message() << "step " << step);
      const unsigned action = rng_() % 100;
      if (action < 40) {
        insert(key(rng_));
      } else if (action < 75) {
        erase_random();
      } else if (action < 85) {
        check_bounds(key(rng_));
      } else {
        check_neighbours();
      }
      if (testing::Test::HasFatalFailure()) return;
      if (step % s.check_every == 0 || tree_.size() < 16) check_whole();
      if (testing::Test::HasFatalFailure()) return;
    }
    check_whole();
    while (!live_.empty()) erase_random();
    check_whole();
    ASSERT_TRUE(tree_.empty());
  }

 private:
  void insert(int key) {
    if (free_ids_.empty()) return erase_random();
    const int id = free_ids_.back();
    free_ids_.pop_back();
    TestNode& n = nodes_[std::size_t(id)];
    n.key = key;
    n.in_tree = true;
    tree_.insert(&n);
    model_.emplace(key, id);
    live_.push_back(id);
  }

  void erase_random() {
    if (live_.empty()) return;
    const std::size_t pick = rng_() % live_.size();
    const int id = live_[pick];
    live_[pick] = live_.back();
    live_.pop_back();
    TestNode& n = nodes_[std::size_t(id)];
    tree_.erase(&n);
    n.in_tree = false;
    auto [from, to] = model_.equal_range(n.key);
    for (auto it = from; it != to; ++it) {
      if (it->second == id) {
        model_.erase(it);
        break;
      }
    }
    free_ids_.push_back(id);
  }

  static int id_of(const TestNode* n) { return n == nullptr ? -1 : n->id; }
  template <class It>
  int model_id(It it) const {
    return it == model_.end() ? -1 : it->second;
  }

  void check_bounds(int key) {
    ASSERT_EQ(id_of(tree_.lower_bound(key)), model_id(model_.lower_bound(key))) << "key " << key;
    ASSERT_EQ(id_of(tree_.upper_bound(key)), model_id(model_.upper_bound(key))) << "key " << key;
    auto it = model_.find(key);  // the multimap's find may return any equal: take the first
    if (it != model_.end()) it = model_.lower_bound(key);
    ASSERT_EQ(id_of(tree_.find(key)), model_id(it)) << "key " << key;
  }

  void check_neighbours() {
    if (live_.empty()) {
      ASSERT_EQ(tree_.first(), nullptr);
      ASSERT_EQ(tree_.last(), nullptr);
      return;
    }
    TestNode& n = nodes_[std::size_t(live_[rng_() % live_.size()])];
    auto it = model_position(n);
    ASSERT_EQ(id_of(tree_.next(&n)), model_id(std::next(it)));
    ASSERT_EQ(id_of(tree_.prev(&n)), it == model_.begin() ? -1 : std::prev(it)->second);
    ASSERT_EQ(id_of(tree_.first()), model_.begin()->second);
    ASSERT_EQ(id_of(tree_.last()), model_.rbegin()->second);
  }

  std::multimap<int, int>::iterator model_position(const TestNode& n) {
    auto [from, to] = model_.equal_range(n.key);
    for (auto it = from; it != to; ++it)
      if (it->second == n.id) return it;
    return model_.end();
  }

  void check_whole() {
    const char* problem = tree_.check_invariants();
    ASSERT_EQ(problem, nullptr) << problem;
    ASSERT_EQ(tree_.size(), model_.size());
    auto it = model_.begin();
    for (TestNode* n = tree_.first(); n != nullptr; n = tree_.next(n), ++it) {
      ASSERT_NE(it, model_.end()) << "the tree holds more nodes than the model";
      ASSERT_EQ(n->key, it->first);
      ASSERT_EQ(n->id, it->second) << "equal keys out of insertion order";
      ASSERT_TRUE(n->in_tree);
    }
    ASSERT_EQ(it, model_.end()) << "the tree holds fewer nodes than the model";
  }

  Tree& tree_;
  std::unique_ptr<TestNode[]> nodes_;
  std::size_t max_nodes_;
  std::mt19937_64 rng_;
  std::multimap<int, int> model_;
  std::vector<int> live_;
  std::vector<int> free_ids_;
};

constexpr Scenario kManyEqualKeys{400'000, 8, 64, 1};
constexpr Scenario kSmallTree{600'000, 1'000, 48, 1};
constexpr Scenario kLargeTree{1'200'000, 1'000'000, 20'000, 4'096};

template <class Tree>
void RunScenario(Tree& tree, const Scenario& s, std::uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (set PAGEMALLOC_TEST_SEED to replay)");
  TreeModel<Tree> model(tree, s.max_nodes, seed);
  model.run(s);
}

TEST(RbTree, ManyEqualKeysMatchTheModel) {
  PlainTree tree;
  RunScenario(tree, kManyEqualKeys, TestSeed());
}

TEST(RbTree, SmallTreeCheckedAfterEveryStepMatchesTheModel) {
  PlainTree tree;
  RunScenario(tree, kSmallTree, TestSeed() + 1);
}

TEST(RbTree, LargeTreeMatchesTheModel) {
  PlainTree tree;
  RunScenario(tree, kLargeTree, TestSeed() + 2);
}

TEST(RbTree, AugmentationStaysExactThroughRotations) {
  AugmentedTree tree;
  RunScenario(tree, kSmallTree, TestSeed() + 3);
  RunScenario(tree, Scenario{200'000, 100'000, 5'000, 1'024}, TestSeed() + 4);
}

TEST(RbTree, AugmentationAtTheRootCountsEveryNode) {
  AugmentedTree tree;
  std::vector<TestNode> nodes(1000);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].key = int(i * 7919 % 1000);
    tree.insert(&nodes[i]);
    ASSERT_EQ(tree.root()->subtree_nodes, i + 1);
  }
  for (std::size_t i = 0; i < nodes.size(); i += 2) tree.erase(&nodes[i]);
  EXPECT_EQ(tree.root()->subtree_nodes, nodes.size() / 2);
  EXPECT_EQ(tree.check_invariants(), nullptr);
}

TEST(RbTree, ObserverCountsLogarithmicVisitsAndSomeRotations) {
  std::uint64_t visits = 0, rotations = 0;
  CountedTree tree(CountingObserver{&visits, &rotations});
  constexpr std::size_t kNodes = 1 << 16;
  std::vector<TestNode> nodes(kNodes);
  for (std::size_t i = 0; i < kNodes; ++i) {
    nodes[i].key = int(i);  // ascending inserts: the worst case for an unbalanced tree
    tree.insert(&nodes[i]);
  }
  EXPECT_GT(rotations, kNodes / 2);
  visits = 0;
  for (int k = 0; k < 1000; ++k) ASSERT_NE(tree.find(k * 61), nullptr);
  // A red-black tree of 2^16 nodes is at most 2 * log2(2^16 + 1) ~ 32 deep.
  EXPECT_LE(visits, 1000u * 33u);
  EXPECT_GE(visits, 1000u * 16u);
  EXPECT_EQ(tree.check_invariants(), nullptr);
}

TEST(RbTree, CheckInvariantsReportsABrokenTree) {
  PlainTree tree;
  std::vector<TestNode> nodes(64);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].key = int(i);
    tree.insert(&nodes[i]);
  }
  ASSERT_EQ(tree.check_invariants(), nullptr);
  TestNode* root = tree.root();
  const int saved = root->key;
  root->key = -1;  // now smaller than everything in its right subtree and its left subtree
  EXPECT_NE(tree.check_invariants(), nullptr);
  root->key = saved;
  ASSERT_EQ(tree.check_invariants(), nullptr);
  root->parent_and_colour |= 1;  // a red root
  EXPECT_NE(tree.check_invariants(), nullptr);
  root->parent_and_colour &= ~std::uintptr_t{1};
  EXPECT_EQ(tree.check_invariants(), nullptr);
}

TEST(RbTree, EmptyTreeAnswersNothing) {
  PlainTree tree;
  EXPECT_TRUE(tree.empty());
  EXPECT_EQ(tree.first(), nullptr);
  EXPECT_EQ(tree.last(), nullptr);
  EXPECT_EQ(tree.lower_bound(3), nullptr);
  EXPECT_EQ(tree.upper_bound(3), nullptr);
  EXPECT_EQ(tree.find(3), nullptr);
  EXPECT_EQ(tree.check_invariants(), nullptr);
}

}  // namespace
}  // namespace pagemalloc::rb
