// The ring of remote frees (remote_ring.h) under concurrent pushers, and an arena's inbox
// under threads that free its regions while its owner refills from it: nothing is lost,
// nothing is taken twice, each pusher's pointers come out in the order it pushed them, and
// the arena's books balance. Run under ThreadSanitizer too (label threads).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "arena/arena.h"
#include "arena/remote_ring.h"

namespace {

using pagemalloc::Arena;
using pagemalloc::RemoteRing;

TEST(StressRemoteRing, ConcurrentPushersAndATakerLoseNothingAndKeepEachPushersOrder) {
  constexpr unsigned kPushers = 3, kPerPusher = 100000, kCapacity = 64;
  std::vector<void*> storage(kCapacity, nullptr);
  const RemoteRing::Slots slots{storage.data(), kCapacity};
  RemoteRing ring;
  // Pusher t's i-th pointer encodes (t, i); never null.
  auto pointer = [](std::uintptr_t t, std::uintptr_t i) {
    return reinterpret_cast<void*>(((i + 1) << 8) | (t << 4));
  };
  std::vector<std::thread> pushers;
  for (unsigned t = 0; t < kPushers; ++t) {
    pushers.emplace_back([&, t] {
      std::uintptr_t next = 0;
      unsigned batch_size = 1 + t;
      while (next < kPerPusher) {
        void* batch[9];
        const unsigned n = unsigned(std::min<std::uintptr_t>(batch_size, kPerPusher - next));
        for (unsigned k = 0; k < n; ++k) batch[k] = pointer(t, next + k);
        const unsigned pushed = ring.push(slots, batch, n);
        next += pushed;
        if (pushed == 0) std::this_thread::yield();
        batch_size = batch_size % 9 + 1;
      }
    });
  }
  std::vector<std::uintptr_t> expected_next(kPushers, 0);
  std::size_t taken = 0;
  bool in_order = true;
  while (taken < std::size_t{kPushers} * kPerPusher) {
    void* out[16];
    const unsigned got = ring.take(slots, out, 16);
    for (unsigned k = 0; k < got; ++k) {
      const auto v = reinterpret_cast<std::uintptr_t>(out[k]);
      const std::uintptr_t t = (v >> 4) & 0xf, i = (v >> 8) - 1;
      in_order &= t < kPushers && expected_next[t] == i;
      if (t < kPushers) expected_next[t] = i + 1;
    }
    taken += got;
    if (got == 0) std::this_thread::yield();
  }
  for (std::thread& p : pushers) p.join();
  EXPECT_TRUE(in_order) << "a pusher's pointers came out of order, or twice";
  for (unsigned t = 0; t < kPushers; ++t) EXPECT_EQ(expected_next[t], kPerPusher);
  EXPECT_FALSE(ring.maybe_nonempty());
}

// Threads free an arena's regions (free_remote: to the stash when the lock is free, else to
// the ring, else to the chain) while the owner takes batches back and hands them out again.
TEST(StressRemoteRing, AnArenasInboxUnderFreeingThreadsAndItsOwner) {
  constexpr unsigned kFreers = 2, kRounds = 2000, kBatch = 48;
  constexpr unsigned kClass = 2;
  auto arena = std::make_unique<Arena>(4201);
  std::atomic<unsigned> round_done{0};
  std::atomic<bool> stop{false};
  // Each round the owner allocates a batch per freer and hands it over; the freer frees it
  // in pieces. Every region the owner gets must be distinct from every region still live.
  std::vector<std::atomic<std::vector<void*>*>> mailbox(kFreers);
  for (auto& m : mailbox) m.store(nullptr);
  std::vector<std::thread> freers;
  for (unsigned t = 0; t < kFreers; ++t) {
    freers.emplace_back([&, t] {
      while (!stop.load(std::memory_order_acquire)) {
        std::vector<void*>* batch = mailbox[t].exchange(nullptr, std::memory_order_acq_rel);
        if (batch == nullptr) {
          std::this_thread::yield();
          continue;
        }
        for (std::size_t i = 0; i < batch->size(); i += 7) {
          const unsigned n = unsigned(std::min<std::size_t>(7, batch->size() - i));
          arena->free_remote(batch->data() + i, n);
        }
        delete batch;
        round_done.fetch_add(1, std::memory_order_release);
      }
    });
  }
  bool distinct = true;
  for (unsigned r = 0; r < kRounds; ++r) {
    for (unsigned t = 0; t < kFreers; ++t) {
      auto* batch = new std::vector<void*>(kBatch);
      unsigned got = 0;
      while (got < kBatch) got += arena->alloc_batch(kClass, batch->data() + got, kBatch - got);
      distinct &= std::set<void*>(batch->begin(), batch->end()).size() == kBatch;
      while (mailbox[t].load(std::memory_order_acquire) != nullptr) std::this_thread::yield();
      mailbox[t].store(batch, std::memory_order_release);
    }
  }
  while (round_done.load(std::memory_order_acquire) < kRounds * kFreers) std::this_thread::yield();
  stop.store(true, std::memory_order_release);
  for (std::thread& f : freers) f.join();
  EXPECT_TRUE(distinct) << "a refill handed out a region twice";
  EXPECT_EQ(arena->stats().allocated, 0u) << "a region freed remotely was lost";
  EXPECT_EQ(arena->check_blocks(), nullptr);
}

}  // namespace
