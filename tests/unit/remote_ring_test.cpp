// The ring of pointers that an arena's remote frees go to first (remote_ring.h), alone and in
// an arena: what is pushed is taken once, in order, across laps of the ring; a push that finds
// too little room takes what fits; the arena hands out the ring's regions on its next refill
// and sends what the ring cannot hold to its chain; a fork's child empties the rings.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "arena/arena.h"
#include "arena/remote_ring.h"

namespace {

using pagemalloc::Arena;
using pagemalloc::RemoteRing;

// A ring of `capacity` slots over storage of its own, and distinct non-null pointers to push.
struct TestRing {
  explicit TestRing(unsigned capacity) : storage(capacity, nullptr) {}
  RemoteRing::Slots slots() { return {storage.data(), unsigned(storage.size())}; }
  static void* pointer(std::uintptr_t i) { return reinterpret_cast<void*>((i + 1) * 16); }

  std::vector<void*> storage;
  RemoteRing ring;
};

TEST(RemoteRing, TakesWhatWasPushedOnceInOrderOverManyLaps) {
  TestRing t(16);
  EXPECT_FALSE(t.ring.maybe_nonempty());
  std::uintptr_t pushed = 0, taken = 0;
  for (int lap = 0; lap < 50; ++lap) {
    void* batch[5];
    for (int round = 0; round < 2; ++round) {
      for (void*& p : batch) p = TestRing::pointer(pushed++);
      ASSERT_EQ(t.ring.push(t.slots(), batch, 5), 5u);
    }
    EXPECT_EQ(t.ring.count(), 10u);
    void* out[16];
    ASSERT_EQ(t.ring.take(t.slots(), out, 16), 10u);
    for (unsigned i = 0; i < 10; ++i) EXPECT_EQ(out[i], TestRing::pointer(taken++));
    EXPECT_FALSE(t.ring.maybe_nonempty());
  }
  for (void* slot : t.storage) EXPECT_EQ(slot, nullptr) << "a taken slot is emptied";
}

TEST(RemoteRing, APushThatFindsTooLittleRoomTakesWhatFits) {
  TestRing t(8);
  void* batch[6];
  for (unsigned i = 0; i < 6; ++i) batch[i] = TestRing::pointer(i);
  EXPECT_EQ(t.ring.push(t.slots(), batch, 6), 6u);
  EXPECT_EQ(t.ring.push(t.slots(), batch, 6), 2u) << "8 slots: 2 left";
  EXPECT_EQ(t.ring.push(t.slots(), batch, 6), 0u);
  void* out[3];
  ASSERT_EQ(t.ring.take(t.slots(), out, 3), 3u);  // a partial take frees 3 slots
  EXPECT_EQ(t.ring.push(t.slots(), batch, 6), 3u);
  EXPECT_EQ(t.ring.count(), 8u);
  std::vector<void*> rest;
  t.ring.take_all(t.slots(), [&](void* p) { rest.push_back(p); });
  const std::vector<void*> expected = {batch[3], batch[4], batch[5], batch[0],
                                       batch[1], batch[0], batch[1], batch[2]};
  EXPECT_EQ(rest, expected);
}

TEST(RemoteRing, TakeStopsAtASlotReservedButNotYetWritten) {
  TestRing t(8);
  void* batch[4];
  for (unsigned i = 0; i < 4; ++i) batch[i] = TestRing::pointer(i);
  ASSERT_EQ(t.ring.push(t.slots(), batch, 4), 4u);
  // As if the pusher of slot 2 were between its reservation and its write.
  void* written = t.storage[2];
  t.storage[2] = nullptr;
  void* out[8];
  ASSERT_EQ(t.ring.take(t.slots(), out, 8), 2u);
  EXPECT_TRUE(t.ring.maybe_nonempty());
  t.storage[2] = written;  // the write lands
  ASSERT_EQ(t.ring.take(t.slots(), out, 8), 2u);
  EXPECT_EQ(out[0], batch[2]);
  EXPECT_EQ(out[1], batch[3]);
}

// A pusher reads the taken count, is preempted, and reads the reserved count after the taker
// took more and other pushers reserved past what its taken count allows: it must see no room,
// not a difference that wrapped around (it would write over slots not yet taken).
TEST(RemoteRing, APusherWithAStaleTakenCountSeesNoRoomBeyondTheCapacity) {
  constexpr unsigned kCapacity = 64;
  EXPECT_EQ(RemoteRing::room(kCapacity, 100, 100), kCapacity);
  EXPECT_EQ(RemoteRing::room(kCapacity, 130, 100), 34u);
  EXPECT_EQ(RemoteRing::room(kCapacity, 164, 100), 0u);
  // Stale: taken was 100 when read; the taker has since taken up to 150 and pushers reserved
  // up to 200. Only the stale view is known: no room, never 2^64 - 36.
  EXPECT_EQ(RemoteRing::room(kCapacity, 200, 100), 0u);
}

TEST(RemoteRing, DrainingAloneSkipsSlotsNeverWrittenAndStartsOver) {
  TestRing t(8);
  void* batch[5];
  for (unsigned i = 0; i < 5; ++i) batch[i] = TestRing::pointer(i);
  ASSERT_EQ(t.ring.push(t.slots(), batch, 5), 5u);
  t.storage[1] = nullptr;  // reserved by a thread that is gone (a fork's parent)
  std::vector<void*> drained;
  t.ring.drain_alone(t.slots(), [&](void* p) { drained.push_back(p); });
  EXPECT_EQ(drained, (std::vector<void*>{batch[0], batch[2], batch[3], batch[4]}));
  EXPECT_FALSE(t.ring.maybe_nonempty());
  EXPECT_EQ(t.ring.push(t.slots(), batch, 5), 5u) << "every slot is free again";
}

// ---------------------------------------------------------------------------------------------
// In an arena: a remote free that finds the lock held.

// n regions of the class from a fresh arena.
std::vector<void*> take_regions(Arena& arena, unsigned size_class, unsigned n) {
  std::vector<void*> regions(n);
  unsigned got = 0;
  while (got < n) {
    const unsigned more = arena.alloc_batch(size_class, regions.data() + got, n - got);
    if (more == 0) break;
    got += more;
  }
  regions.resize(got);
  return regions;
}

TEST(ArenaRemoteRing, ARemoteFreeWhileTheLockIsHeldWaitsInTheRingForTheNextRefill) {
  auto arena = std::make_unique<Arena>(4101);
  constexpr unsigned kClass = 0;  // 8 bytes: too small for the chain, not for the ring
  std::vector<void*> regions = take_regions(*arena, kClass, 40);
  ASSERT_EQ(regions.size(), 40u);
  const std::size_t allocated = arena->stats().allocated;
  arena->lock_for_fork();  // held, as by another thread: the free does not wait for it
  arena->free_remote(regions.data(), 40);
  arena->unlock_after_fork();
  std::vector<void*> again(40);
  ASSERT_EQ(arena->alloc_batch(kClass, again.data(), 40), 40u);
  EXPECT_EQ(again, regions) << "the ring's regions come first, in the order they were freed";
  EXPECT_EQ(arena->stats().allocated, allocated);
  EXPECT_EQ(arena->check_blocks(), nullptr);
}

TEST(ArenaRemoteRing, WhatTheRingCannotHoldGoesToTheChainAndNothingIsLost) {
  auto arena = std::make_unique<Arena>(4102);
  constexpr unsigned kClass = 3;  // 48 bytes
  const unsigned capacity = pagemalloc::remote_ring_capacity(kClass);
  const unsigned n = capacity + capacity / 2;
  std::vector<void*> regions = take_regions(*arena, kClass, n);
  ASSERT_EQ(regions.size(), n);
  arena->lock_for_fork();
  for (unsigned i = 0; i < n; i += 64)
    arena->free_remote(regions.data() + i, n - i < 64 ? n - i : 64);
  arena->unlock_after_fork();
  std::vector<void*> again(n);
  unsigned got = 0;
  while (got < n) {
    const unsigned more = arena->alloc_batch(kClass, again.data() + got, n - got);
    ASSERT_NE(more, 0u);
    got += more;
  }
  EXPECT_EQ(std::set<void*>(again.begin(), again.end()),
            std::set<void*>(regions.begin(), regions.end()))
      << "every region comes back, from the ring and from the chain, before any slab's";
  EXPECT_EQ(arena->check_blocks(), nullptr);
}

TEST(ArenaRemoteRing, AForksChildTakesTheRingsRegionsBack) {
  auto arena = std::make_unique<Arena>(4103);
  constexpr unsigned kClass = 5;
  std::vector<void*> regions = take_regions(*arena, kClass, 30);
  ASSERT_EQ(regions.size(), 30u);
  const std::size_t allocated = arena->stats().allocated;
  arena->lock_for_fork();
  arena->free_remote(regions.data(), 30);
  arena->settle_remote_in_child();  // as the child does, the lock held
  arena->unlock_after_fork();
  EXPECT_EQ(arena->stats().allocated, allocated - 30 * pagemalloc::kSizeClasses[kClass].size);
  EXPECT_EQ(arena->check_blocks(), nullptr);
}

}  // namespace
