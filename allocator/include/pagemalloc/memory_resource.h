// pagemalloc::ArenaResource — a std::pmr::memory_resource over an explicit arena, and
// pagemalloc::BumpArena — a bump arena held by value, its fast path inlined in the caller.
//
// Containers built on an ArenaResource (std::pmr::vector, std::pmr::unordered_map, ...) take
// their memory from one explicit arena of their own, a bump arena (PM_ARENA_BUMP) unless the
// constructor is given other flags: reset() frees everything they hold at once (the
// containers must be destroyed or never touched again first), and the destructor destroys
// the arena. Each allocation honours the alignment the container asks for. Threads may share
// one ArenaResource: each bumps from a region of its own.
//
//   pagemalloc::ArenaResource arena;
//   std::pmr::vector<int> values(&arena);
//
// A BumpArena belongs to one thread at a time: it keeps the region it bumps from in the
// object, so an allocation that fits is an add, a compare and two stores in the caller's
// code. Its blocks are ordinary blocks of its arena for every pm_ call (pm_free,
// pm_malloc_usable_size, ...); reset() frees them all, in no time, and keeps the memory.
//
//   pagemalloc::BumpArena arena;
//   auto* node = arena.create<Node>(1, nullptr);
//   arena.reset();
//
// Header-only, compiled with the user's code: allocation failure throws std::bad_alloc (or
// aborts when exceptions are off), as memory_resource requires.
#ifndef PAGEMALLOC_MEMORY_RESOURCE_H
#define PAGEMALLOC_MEMORY_RESOURCE_H

#include <pagemalloc/pagemalloc.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory_resource>
#include <new>
#include <utility>

namespace pagemalloc {

namespace detail {

[[noreturn]] inline void allocation_failed() {
#if defined(__cpp_exceptions)
  throw std::bad_alloc();
#else
  std::abort();
#endif
}

}  // namespace detail

class ArenaResource : public std::pmr::memory_resource {
 public:
  // Creates the arena (flags as pm_arena_create_ex: PM_ARENA_BUMP, PM_ARENA_BUMP |
  // PM_ARENA_NO_FREE, or 0 for an arena of slabs and runs only); throws std::bad_alloc when
  // creation fails.
  explicit ArenaResource(unsigned flags = PM_ARENA_BUMP) : arena_(pm_arena_create_ex(flags)) {
    if (arena_ == 0) fail();
  }
  ~ArenaResource() override { pm_arena_destroy(arena_); }
  ArenaResource(const ArenaResource&) = delete;
  ArenaResource& operator=(const ArenaResource&) = delete;

  // The arena's index, for PM_ARENA() and pm_arena_stats_get.
  [[nodiscard]] unsigned arena() const noexcept { return arena_; }

  // Frees every block allocated through this resource.
  void reset() noexcept { pm_arena_reset(arena_); }

  [[nodiscard]] pm_arena_stats stats() const noexcept {
    pm_arena_stats out{};
    pm_arena_stats_get(arena_, &out);
    return out;
  }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    void* p = pm_mallocx(bytes, flags(alignment));
    if (p == nullptr) fail();
    return p;
  }

  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    pm_sdallocx(p, bytes, flags(alignment));
  }

  // Two resources are equal only when they are the same object: each has its own arena.
  [[nodiscard]] bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

 private:
  [[nodiscard]] int flags(std::size_t alignment) const noexcept {
    return PM_ALIGN(alignment) | PM_ARENA(arena_);
  }

  [[noreturn]] static void fail() { detail::allocation_failed(); }

  unsigned arena_;
};

class BumpArena {
 public:
  // Creates a bump arena: flags 0 (blocks may be freed one by one, which the arena counts)
  // or PM_ARENA_NO_FREE (deallocate does nothing). Throws std::bad_alloc when creation fails
  // (other flags too). The span it bumps from lives in the object: reset the arena through
  // reset(), not pm_arena_reset(arena()), which would leave the object bumping from a span
  // the arena hands out again.
  explicit BumpArena(unsigned flags = 0)
      : arena_(pm_arena_create_ex(PM_ARENA_BUMP | flags)),
        no_free_((flags & PM_ARENA_NO_FREE) != 0) {
    if (arena_ == 0) detail::allocation_failed();
    cursor_.arena = arena_;
  }
  ~BumpArena() {
    if (arena_ != 0) pm_arena_destroy(arena_);
  }
  BumpArena(BumpArena&& other) noexcept
      : cursor_(other.cursor_), arena_(std::exchange(other.arena_, 0u)), no_free_(other.no_free_) {
    other.cursor_ = pm_bump_cursor{};
  }
  BumpArena& operator=(BumpArena&& other) noexcept {
    std::swap(cursor_, other.cursor_);
    std::swap(arena_, other.arena_);
    std::swap(no_free_, other.no_free_);
    return *this;
  }
  BumpArena(const BumpArena&) = delete;
  BumpArena& operator=(const BumpArena&) = delete;

  // The arena's index, for PM_ARENA() (pm_mallocx from other threads) and pm_arena_stats_get.
  [[nodiscard]] unsigned arena() const noexcept { return arena_; }

  // size bytes aligned to `alignment` (a power of two). Up to 16 bytes of alignment and
  // while the span has room: inline; otherwise one call (a new span, or the arena's slabs
  // and runs for blocks over 16 KiB or alignments over a page).
  [[nodiscard]] void* allocate(std::size_t size,
                               std::size_t alignment = alignof(std::max_align_t)) {
    // size - 1 wraps for a size of 0: the call serves those. Both tests fold away when the
    // size and alignment are constants, and move out of a loop that keeps them.
    if (alignment <= kGranule) [[likely]] {
      // stride - 1 wraps for a size of 0 (and of nearly SIZE_MAX): the call serves those.
      // One compare: the test also moves out of a loop that keeps the size.
      const std::size_t stride = (size + kGranule - 1) & ~(kGranule - 1);
      char* block = cursor_.next;
      if (stride - 1 < std::size_t(cursor_.end - block)) [[likely]] {
        cursor_.next = block + stride;
        *length_entry(block) = static_cast<unsigned short>(stride / kGranule);
        ++cursor_.blocks;
        return block;
      }
    }
    return refill(size, alignment);
  }

  // A T made in the arena (its destructor is never run by the arena).
  template <class T, class... Args>
  [[nodiscard]] T* create(Args&&... args) {
    return ::new (allocate(sizeof(T), alignof(T))) T(std::forward<Args>(args)...);
  }

  // A block of this arena: counted as freed (its memory comes back at reset), or nothing
  // with PM_ARENA_NO_FREE. A block of the span it bumps from is freed inline; others (and
  // misuse, which is reported) take pm_free.
  void deallocate(void* p) noexcept {
    if (!no_free_) pm_arena_bump_free_inline(&cursor_, p);
  }

  // The block p of old_size bytes (as allocated or last reallocated), now of new_size: in
  // place when it is the last block bumped and the span has room, else moved (its first
  // bytes copied) to a new block.
  [[nodiscard]] void* reallocate(void* p, std::size_t old_size, std::size_t new_size,
                                 std::size_t alignment = alignof(std::max_align_t)) {
    char* block = static_cast<char*>(p);
    const std::size_t stride = (new_size + kGranule - 1) & ~(kGranule - 1);
    if (p != nullptr && block + stride_of(old_size) == cursor_.next &&
        stride - 1 < std::size_t(cursor_.end - block)) {
      cursor_.next = block + stride;
      *length_entry(block) = static_cast<unsigned short>(stride / kGranule);
      return p;
    }
    void* q = allocate(new_size, alignment);
    if (p != nullptr) {
      std::memcpy(q, p, old_size < new_size ? old_size : new_size);
      deallocate(p);
    }
    return q;
  }

  // Frees every block at once; the memory stays for the next ones.
  void reset() noexcept {
    pm_arena_reset(arena_);
    cursor_.next = cursor_.end = cursor_.begin = nullptr;  // the span's size stays
    cursor_.blocks = 0;
    cursor_.skipped = 0;
  }

  [[nodiscard]] pm_arena_stats stats() noexcept {
    pm_bump_cursor cursor = cursor_;
    pm_arena_bump_flush(&cursor);
    cursor_ = cursor;
    pm_arena_stats out{};
    pm_arena_stats_get(arena_, &out);
    return out;
  }

 private:
  static constexpr std::size_t kGranule = 16;
  // As pm_bump_cursor says: the bytes a block takes, and where its length is written.
  static constexpr std::size_t stride_of(std::size_t size) {
    return size == 0 ? kGranule : (size + kGranule - 1) & ~(kGranule - 1);
  }
  [[nodiscard]] unsigned short* length_entry(const char* block) const noexcept {
    return reinterpret_cast<unsigned short*>((reinterpret_cast<std::uintptr_t>(block) >> 3) +
                                             cursor_.size_map);
  }

  // The library's calls get a copy of the cursor, never the object's address: an object whose
  // address no call has seen keeps its cursor in registers across the caller's own calls (a
  // memset of the block, say), where the compiler would otherwise store and reload it around
  // each, as the block it writes might be the cursor.
  void* refill(std::size_t size, std::size_t alignment) {
    pm_bump_cursor cursor = cursor_;
    void* p = pm_arena_bump(&cursor, size, PM_ALIGN(alignment));
    cursor_ = cursor;
    if (p == nullptr) detail::allocation_failed();
    return p;
  }

  pm_bump_cursor cursor_{};
  unsigned arena_;
  bool no_free_;
};

}  // namespace pagemalloc

#endif  // PAGEMALLOC_MEMORY_RESOURCE_H
