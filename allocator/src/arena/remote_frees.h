// The second part of an arena's inbox of small regions freed by threads whose caches belong
// to other arenas (mimalloc's thread_free list, snmalloc's message queues): what the inbox's
// ring of pointers (remote_ring.h) has no room for. Such a thread pushes a batch without
// taking the arena's lock, and the arena takes the inbox under its lock on its next refill of
// the class, handing the regions out first (arena.h). The same stack holds an arena's large
// blocks whose free found its lock held.
//
// The inbox is a stack linked through each region's second word; the first keeps the freed
// key (thread_cache.h), so a second free of a region waiting here is still caught: the free
// that finds the key asks the arena, which collects its inbox before it looks. Regions of the
// 8-byte class have no second word and never come here. A push and a take are one
// compare-and-swap and one exchange; a batch is linked before it is pushed. A taker walks the
// chain it took (each link a read of a region that may be cold), so an arena walks only as far
// as a refill needs and keeps the rest of the chain for the next one.
#pragma once

#include <atomic>
#include <cstddef>

namespace pagemalloc {

class RemoteFrees {
 public:
  static constexpr std::size_t kMinRegionSize = 2 * sizeof(void*);

  // Pushes regions[0..n) (n > 0, each at least kMinRegionSize bytes and in no list); returns
  // how many regions the inbox holds now, at least.
  std::size_t push(void* const* regions, unsigned n) {
    for (unsigned i = 0; i + 1 < n; ++i) link(regions[i]) = regions[i + 1];
    void* head = head_.load(std::memory_order_relaxed);
    do link(regions[n - 1]) = head;
    while (!head_.compare_exchange_weak(head, regions[0], std::memory_order_release,
                                        std::memory_order_relaxed));
    return count_.fetch_add(n, std::memory_order_relaxed) + n;
  }

  // Whether anything may be waiting (a relaxed look, for a caller about to take the lock).
  [[nodiscard]] bool maybe_nonempty() const {
    return head_.load(std::memory_order_relaxed) != nullptr;
  }

  // Takes every region, as a chain to walk with next(); nullptr when empty. The count restarts
  // from zero (a push racing with the take may be counted on either side: the count only
  // decides when a pusher collects).
  void* take_chain() {
    // An empty inbox, the common case, is left without an atomic exchange (which would wait
    // for the taker's buffered stores).
    if (!maybe_nonempty()) return nullptr;
    count_.store(0, std::memory_order_relaxed);
    return head_.exchange(nullptr, std::memory_order_acquire);
  }
  // The region after p in a taken chain.
  static void* next(void* p) { return link(p); }

  // Takes every region: calls visit(void*) for each, in some order.
  template <class Visit>
  void take_all(Visit&& visit) {
    for (void* p = take_chain(); p != nullptr;) {
      void* after = next(p);
      visit(p);
      p = after;
    }
  }

  [[nodiscard]] std::size_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  static void*& link(void* region) { return static_cast<void**>(region)[1]; }

  std::atomic<void*> head_{nullptr};
  std::atomic<std::size_t> count_{0};
};

}  // namespace pagemalloc
