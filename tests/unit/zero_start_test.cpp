// Tests of the tables that begin as fresh memory's zero bytes (pagemap/zero_start_array.h):
//
//   - built the ordinary way, a ZeroStartArray constructs every element over memory of any
//     contents; built unwritten, it leaves every byte as it was;
//   - zero_bytes_construct tells a type whose constructed state is zero bytes from one whose
//     is not, and the types left unwritten in an arena are of the first kind (a stash, a free
//     list's head);
//   - a pagemap run manager built unwritten in a fresh mapping splits and coalesces as one built
//     the ordinary way, and its invariants hold;
//   - an arena built unwritten in a fresh mapping (as every arena is) and used for small blocks
//     leaves the pages of its unused stash sets and of its unused free lists out of memory.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstddef>
#include <cstring>
#include <new>
#include <vector>

#include "arena/arena.h"
#include "pagemap/intrusive_list.h"
#include "pagemap/pagemap_runs.h"
#include "pagemap/testing/pal_fake.h"
#include "pagemap/zero_start_array.h"
#include "resident_pages.h"
#include "support/lock.h"

namespace pagemalloc {
namespace {

struct StartsAtSeven {
  int value = 7;
};
struct Node {
  Node* prev;
  Node* next;
};
using NodeList = IntrusiveList<Node, &Node::prev, &Node::next>;

// Fresh anonymous memory of `bytes`, unmapped at the end of the test.
class FreshMapping {
 public:
  explicit FreshMapping(std::size_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
  }
  ~FreshMapping() {
    if (base_ != nullptr) munmap(base_, bytes_);
  }
  FreshMapping(const FreshMapping&) = delete;
  FreshMapping& operator=(const FreshMapping&) = delete;
  [[nodiscard]] std::byte* base() const { return base_; }

 private:
  std::size_t bytes_;
  std::byte* base_ = nullptr;
};

TEST(ZeroStartArrayTest, OrdinaryConstructionConstructsEveryElementOverAnyBytes) {
  using Array = ZeroStartArray<StartsAtSeven, 100>;
  alignas(Array) std::byte storage[sizeof(Array)];
  std::memset(storage, 0xa5, sizeof storage);
  compiler_sees_bytes(storage);
  auto* array = ::new (static_cast<void*>(storage)) Array();
  for (const StartsAtSeven& e : *array) EXPECT_EQ(e.value, 7);
  EXPECT_EQ(array->end() - array->begin(), 100);
}

TEST(ZeroStartArrayTest, UnwrittenConstructionLeavesEveryByte) {
  using Array = ZeroStartArray<NodeList, 64>;
  alignas(Array) std::byte storage[sizeof(Array)];
  std::memset(storage, 0x5a, sizeof storage);
  compiler_sees_bytes(storage);
  ::new (static_cast<void*>(storage)) Array(kUnwritten);
  for (std::byte b : storage) ASSERT_EQ(b, std::byte{0x5a});
}

TEST(ZeroStartArrayTest, UnwrittenOverZeroBytesGivesEmptyLists) {
  using Array = ZeroStartArray<NodeList, 64>;
  alignas(Array) std::byte storage[sizeof(Array)] = {};
  compiler_sees_bytes(storage);
  auto* lists = ::new (static_cast<void*>(storage)) Array(kUnwritten);
  Node a{}, b{};
  for (NodeList& list : *lists) EXPECT_TRUE(list.empty());
  (*lists)[3].push_front(&a);
  (*lists)[3].push_back(&b);
  EXPECT_EQ((*lists)[3].front(), &a);
  EXPECT_TRUE((*lists)[2].empty());
  EXPECT_TRUE((*lists)[4].empty());
}

TEST(ZeroStartArrayTest, ZeroBytesConstructTellsTheTypesApart) {
  EXPECT_FALSE(zero_bytes_construct<StartsAtSeven>());
  EXPECT_TRUE(zero_bytes_construct<NodeList>());
  EXPECT_TRUE(zero_bytes_construct<Lock>());
  EXPECT_TRUE(Arena::stash_starts_as_zero_bytes());
}

// The same allocations and frees through runs: its invariants hold after each step; returns
// the free pages after each step.
template <class Runs>
std::vector<std::size_t> split_and_coalesce(Runs& runs) {
  std::vector<std::size_t> free_pages;
  std::vector<Run> live;
  for (std::size_t pages : {1, 3, 7, 64, 2, 200, 1})
    if (AllocatedRun r = runs.alloc(PageCount(pages)); r.run) live.push_back(r.run);
  EXPECT_EQ(live.size(), 7u);
  EXPECT_EQ(runs.check_invariants(), nullptr);
  free_pages.push_back(runs.free_pages().value());
  for (std::size_t i = 0; i < live.size(); i += 2) runs.free(live[i]);
  EXPECT_EQ(runs.check_invariants(), nullptr);
  free_pages.push_back(runs.free_pages().value());
  for (std::size_t i = 1; i < live.size(); i += 2) runs.free(live[i]);
  EXPECT_EQ(runs.check_invariants(), nullptr);
  free_pages.push_back(runs.free_pages().value());
  return free_pages;
}

TEST(ZeroStartArrayTest, PagemapRunsBuiltUnwrittenInAFreshMappingSplitAndCoalesce) {
  using Runs = PagemapRuns<FakePal>;
  FakePal ordinary_pal{std::size_t{16} << 20};
  Runs ordinary(ordinary_pal);
  const std::vector<std::size_t> expected = split_and_coalesce(ordinary);

  FakePal pal{std::size_t{16} << 20};
  FreshMapping memory(sizeof(Runs));
  ASSERT_NE(memory.base(), nullptr);
  auto* runs = ::new (static_cast<void*>(memory.base())) Runs(pal, kUnwritten);
  EXPECT_EQ(split_and_coalesce(*runs), expected);
  runs->~Runs();
}

TEST(ZeroStartArrayTest, AnArenaBuiltUnwrittenKeepsItsUnusedTablesOutOfMemory) {
  FreshMapping memory(sizeof(Arena));
  ASSERT_NE(memory.base(), nullptr);
  auto* arena = ::new (static_cast<void*>(memory.base()))
      Arena(7, nullptr, {}, Arena::LeaveStashesUnwritten{});
  std::vector<void*> blocks(200);
  unsigned got = 0;
  for (int tries = 0; tries < 1000 && got < blocks.size(); ++tries)
    got += arena->alloc_batch(4, blocks.data() + got, unsigned(blocks.size()) - got);
  ASSERT_EQ(got, blocks.size());
  arena->free_batch(blocks.data(), got, "test");
  // The arena's last page (its rings' slots): written by nothing above.
  using test::resident_pages;
  EXPECT_EQ(resident_pages(memory.base() + sizeof(Arena) - 1, 1), 0u);
  const std::size_t resident =
      resident_pages(memory.base(), (sizeof(Arena) + kPageSize - 1) / kPageSize);
  EXPECT_LT(resident * kPageSize, std::size_t{48} << 10)
      << "of an arena of " << sizeof(Arena) << " bytes";
}

}  // namespace
}  // namespace pagemalloc
