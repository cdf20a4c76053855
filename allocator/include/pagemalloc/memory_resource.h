// pagemalloc::ArenaResource — a std::pmr::memory_resource over an explicit arena.
//
// Containers built on it (std::pmr::vector, std::pmr::unordered_map, ...) take their memory
// from one explicit arena of their own: reset() frees everything they hold at once (the
// containers must be destroyed or never touched again first), and the destructor destroys
// the arena. Each allocation honours the alignment the container asks for.
//
//   pagemalloc::ArenaResource arena;
//   std::pmr::vector<int> values(&arena);
//
// Header-only, compiled with the user's code: allocation failure throws std::bad_alloc (or
// aborts when exceptions are off), as memory_resource requires.
#ifndef PAGEMALLOC_MEMORY_RESOURCE_H
#define PAGEMALLOC_MEMORY_RESOURCE_H

#include <pagemalloc/pagemalloc.h>

#include <cstddef>
#include <cstdlib>
#include <memory_resource>
#include <new>

namespace pagemalloc {

class ArenaResource : public std::pmr::memory_resource {
 public:
  // Creates the arena; throws std::bad_alloc when pm_arena_create fails.
  ArenaResource() : arena_(pm_arena_create()) {
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

  [[noreturn]] static void fail() {
#if defined(__cpp_exceptions)
    throw std::bad_alloc();
#else
    std::abort();
#endif
  }

  unsigned arena_;
};

}  // namespace pagemalloc

#endif  // PAGEMALLOC_MEMORY_RESOURCE_H
