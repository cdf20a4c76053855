// A ring of pointers that any thread may push to and one taker (under its arena's lock) takes
// from, without a lock: an arena's first inbox for small regions freed by threads of other
// arenas (arena.h), ahead of the chain of remote_frees.h.
//
// The chain links regions through their own memory: its taker reads every region it takes,
// one cold cache line after another, each load waiting for the one before (written by
// another core, each is a miss). The ring holds the pointers themselves: a taker copies them
// out of a few lines of its own, as it copies its stash, and the regions are next touched by
// the thread that allocates them. A pusher reserves slots with one compare-and-swap on the
// count of slots ever reserved, then writes them; the taker takes slots in order and stops at
// the first still empty (a pusher between its reservation and its write), nulls each slot it
// takes, and only then counts it taken, so that a pusher reuses only slots already emptied.
// The counts only grow (64 bits: they never wrap).
//
// The slots live outside the ring (an arena keeps every class's in one array) and must read
// null before the first push. A pusher that finds too little room pushes what fits.
#pragma once

#include <atomic>
#include <cstdint>

namespace pagemalloc {

class RemoteRing {
 public:
  // The ring over slots[0 .. capacity), capacity a power of two.
  struct Slots {
    void** slots;
    unsigned capacity;
    std::atomic_ref<void*> at(std::uint64_t i) const {
      return std::atomic_ref<void*>(slots[i & (capacity - 1)]);
    }
  };

  // The slots free for a pusher that read `taken` and then `reserved`. taken_ is read first:
  // it never passes reserved_, so reserved - taken cannot wrap. But it may be stale: between
  // the two loads the taker may have taken more and other pushers reserved past taken +
  // capacity, so reserved - taken may exceed the capacity. That reads as no room (the
  // subtraction would wrap to nearly 2^64, and the pusher would write over slots not yet
  // taken, whose pointers would be lost and at which the taker would wait forever).
  static constexpr std::uint64_t room(unsigned capacity, std::uint64_t reserved,
                                      std::uint64_t taken) {
    const std::uint64_t used = reserved - taken;
    return used < capacity ? capacity - used : 0;
  }

  // Pushes a prefix of regions[0..n) (non-null), as long as room allows; returns its length.
  unsigned push(Slots s, void* const* regions, unsigned n) {
    std::uint64_t first = 0;
    unsigned fits = 0;
    do {
      const std::uint64_t taken = taken_.load(std::memory_order_acquire);
      first = reserved_.load(std::memory_order_relaxed);
      const std::uint64_t open = room(s.capacity, first, taken);
      fits = open < n ? unsigned(open) : n;
      if (fits == 0) return 0;
    } while (!reserved_.compare_exchange_weak(first, first + fits, std::memory_order_relaxed,
                                              std::memory_order_relaxed));
    for (unsigned i = 0; i < fits; ++i)
      s.at(first + i).store(regions[i], std::memory_order_release);
    return fits;
  }

  // Taker only. Up to n pointers into out, oldest first; returns how many.
  unsigned take(Slots s, void** out, unsigned n) {
    std::uint64_t next = taken_.load(std::memory_order_relaxed);
    const std::uint64_t end = reserved_.load(std::memory_order_relaxed);
    unsigned got = 0;
    while (got < n && next != end) {
      std::atomic_ref<void*> slot = s.at(next);
      void* p = slot.load(std::memory_order_acquire);
      if (p == nullptr) break;  // reserved, not yet written
      slot.store(nullptr, std::memory_order_relaxed);
      out[got++] = p;
      ++next;
    }
    taken_.store(next, std::memory_order_release);
    return got;
  }

  // Taker only. Calls visit(void*) for every pointer it can take now.
  template <class Visit>
  void take_all(Slots s, Visit&& visit) {
    void* batch[64];
    while (unsigned got = take(s, batch, 64))
      for (unsigned i = 0; i < got; ++i) visit(batch[i]);
  }

  // Whether anything may be waiting (a relaxed look).
  [[nodiscard]] bool maybe_nonempty() const {
    return reserved_.load(std::memory_order_relaxed) != taken_.load(std::memory_order_relaxed);
  }
  // Slots reserved and not yet taken.
  [[nodiscard]] std::uint64_t count() const {
    return reserved_.load(std::memory_order_relaxed) - taken_.load(std::memory_order_relaxed);
  }

  // With no pusher left (reset(), or the child of a fork, whose only thread is the caller):
  // calls visit(void*) for every pointer written, empties every slot, and starts over. A slot
  // reserved by a thread that did not get to write it (a thread of the parent) stays empty:
  // its region is lost, as the regions in those threads' caches are.
  template <class Visit>
  void drain_alone(Slots s, Visit&& visit) {
    const std::uint64_t end = reserved_.load(std::memory_order_relaxed);
    for (std::uint64_t i = taken_.load(std::memory_order_relaxed); i != end; ++i) {
      void* p = s.at(i).exchange(nullptr, std::memory_order_relaxed);
      if (p != nullptr) visit(p);
    }
    taken_.store(end, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uint64_t> reserved_{0};  // slots ever reserved by pushers
  std::atomic<std::uint64_t> taken_{0};     // slots ever taken (written by the taker only)
};

}  // namespace pagemalloc
