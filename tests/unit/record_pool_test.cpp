// Tests of the record pool (record_pool.h), the run managers' store of free-run and chunk
// records outside the chunks:
//
//   - reserve(n) makes room for n records, take() hands out distinct, aligned records (their
//     default member initializers run) from that room without mapping, and give() recycles
//     them (the last given is the next taken); in_use() and capacity() follow;
//   - records are dense: a pool's records lie in 64 KiB blocks, one after the other;
//   - growth refused (refuse_growth, fail_growth_in) fails reserve() and changes nothing; the
//     records already reserved are still handed out;
//   - release_all() forgets everything, and the pool can be used again.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

#include "pagemap/record_pool.h"

namespace pagemalloc {
namespace {

struct Record {
  std::uint64_t words[5];     // left as they are by take()
  std::uint64_t marker = 42;  // 48 bytes, as a pagemap free-run record
};
using Pool = RecordPool<Record>;

TEST(RecordPool, TakesDistinctAlignedInitializedRecordsFromWhatWasReserved) {
  Pool pool;
  EXPECT_EQ(pool.capacity(), 0u);
  ASSERT_TRUE(pool.reserve(3 * Pool::kRecordsPerBlock));
  EXPECT_EQ(pool.capacity(), 3 * Pool::kRecordsPerBlock);
  EXPECT_EQ(pool.mapped_bytes(), 3 * Pool::kBlockBytes);

  std::set<Record*> seen;
  std::vector<Record*> taken;
  for (std::size_t i = 0; i < pool.capacity(); ++i) {
    Record* r = pool.take();
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(r) % 16, 0u);
    ASSERT_EQ(r->marker, 42u);
    ASSERT_TRUE(pool.holds(r));
    ASSERT_TRUE(seen.insert(r).second) << "a record handed out twice";
    r->marker = 7;
    taken.push_back(r);
  }
  EXPECT_EQ(pool.in_use(), pool.capacity());
  EXPECT_EQ(pool.mapped_bytes(), 3 * Pool::kBlockBytes) << "take() must not map";

  pool.give(taken[10]);
  EXPECT_EQ(pool.in_use(), pool.capacity() - 1);
  Record* again = pool.take();
  EXPECT_EQ(again, taken[10]);
  EXPECT_EQ(again->marker, 42u) << "a recycled record's initializers run again";
}

TEST(RecordPool, RecordsAreDenseWithinABlock) {
  Pool pool;
  ASSERT_TRUE(pool.reserve(4));
  Record* a = pool.take();
  Record* b = pool.take();
  EXPECT_EQ(reinterpret_cast<std::byte*>(b) - reinterpret_cast<std::byte*>(a),
            std::ptrdiff_t(Pool::kRecordSize));
  EXPECT_EQ(Pool::kRecordSize, 48u);
  EXPECT_FALSE(pool.holds(reinterpret_cast<std::byte*>(a) + 8)) << "not a record's start";
  int outside = 0;
  EXPECT_FALSE(pool.holds(&outside));
}

TEST(RecordPool, RefusedGrowthFailsReserveAndChangesNothing) {
  Pool pool;
  ASSERT_TRUE(pool.reserve(1));
  const std::size_t capacity = pool.capacity();
  pool.refuse_growth(true);
  EXPECT_TRUE(pool.reserve(capacity)) << "no growth needed";
  EXPECT_FALSE(pool.reserve(capacity + 1));
  EXPECT_EQ(pool.capacity(), capacity);
  EXPECT_EQ(pool.mapped_bytes(), Pool::kBlockBytes);
  for (std::size_t i = 0; i < capacity; ++i) ASSERT_NE(pool.take(), nullptr);
  EXPECT_EQ(pool.in_use(), capacity);

  pool.refuse_growth(false);
  EXPECT_TRUE(pool.reserve(capacity + 1));
  EXPECT_NE(pool.take(), nullptr);
}

TEST(RecordPool, FailGrowthInFailsExactlyTheNthBlock) {
  Pool pool;
  pool.fail_growth_in(2);
  EXPECT_TRUE(pool.reserve(1));                            // block 1
  EXPECT_FALSE(pool.reserve(Pool::kRecordsPerBlock + 1));  // block 2 refused
  EXPECT_EQ(pool.capacity(), Pool::kRecordsPerBlock);
  EXPECT_TRUE(pool.reserve(Pool::kRecordsPerBlock + 1));  // block 3 is mapped
  EXPECT_EQ(pool.capacity(), 2 * Pool::kRecordsPerBlock);
}

TEST(RecordPool, ReleaseAllForgetsEverythingAndThePoolWorksAgain) {
  Pool pool;
  ASSERT_TRUE(pool.reserve(2 * Pool::kRecordsPerBlock));
  for (std::size_t i = 0; i < Pool::kRecordsPerBlock + 5; ++i) pool.take();
  pool.release_all();
  EXPECT_EQ(pool.capacity(), 0u);
  EXPECT_EQ(pool.in_use(), 0u);
  EXPECT_EQ(pool.mapped_bytes(), 0u);
  ASSERT_TRUE(pool.reserve(1));
  Record* r = pool.take();
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(pool.holds(r));
}

}  // namespace
}  // namespace pagemalloc
