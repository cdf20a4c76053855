// The fake OS layer (pagemap/testing/pal_fake.h) the run-manager tests run over: reservations
// are zero-filled, refusals happen on demand.
#include <gtest/gtest.h>

#include "run_manager_support.h"

namespace pagemalloc {
namespace {

constexpr std::size_t kDirectedPalCapacity = std::size_t{32} << 20;  // 16 chunks

// --- The fake OS layer ----------------------------------------------------------------------

// The run managers take a fresh chunk's pages as zeroed (AllocatedRun::zeroed) and its page map
// as unwritten (0), as the Pal contract promises for reserve(): the fake must keep it too, in
// every build (a sanitizer's allocator may fill fresh heap memory with a pattern).
TEST(FakePal, ReserveReturnsZeroFilledMemory) {
  FakePal pal(kDirectedPalCapacity);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(testing::Message() << "reservation " << i);
    auto* chunk = static_cast<std::byte*>(pal.reserve(kChunkSize, kChunkSize));
    ASSERT_NE(chunk, nullptr);
    EXPECT_TRUE(is_chunk_aligned(chunk));
    std::size_t nonzero = 0;
    for (std::size_t b = 0; b < kChunkSize; ++b) nonzero += chunk[b] != std::byte{0};
    EXPECT_EQ(nonzero, 0u) << "the first byte is " << std::to_integer<unsigned>(chunk[0]);
  }
}

TEST(FakePal, RefusesOnDemandAndReusesReleasedRanges) {
  FakePal pal(kDirectedPalCapacity);
  void* first = pal.reserve(kChunkSize, kChunkSize);
  ASSERT_NE(first, nullptr);
  std::memset(first, 0x5a, kPageSize);
  pal.release(first, kChunkSize);
  EXPECT_EQ(pal.live_reservations(), 0);
  void* again = pal.reserve(kChunkSize, kChunkSize);
  EXPECT_EQ(again, first);
  EXPECT_EQ(static_cast<std::byte*>(again)[0], std::byte{0});
  pal.refuse_all(true);
  EXPECT_EQ(pal.reserve(kChunkSize, kChunkSize), nullptr);
  pal.refuse_all(false);
  pal.fail_reserve_in(2);
  EXPECT_NE(pal.reserve(kChunkSize, kChunkSize), nullptr);
  EXPECT_EQ(pal.reserve(kChunkSize, kChunkSize), nullptr);
  EXPECT_NE(pal.reserve(kChunkSize, kChunkSize), nullptr);
  EXPECT_EQ(pal.live_reservations(), 3);
}

}  // namespace
}  // namespace pagemalloc
