// The fuzz harness's operations: each step reads an operation and its arguments from a byte
// source (byte_source.h), makes the pm_ call and has the shadow heap (shadow_heap.h) check the
// answer. libFuzzer's inputs and the replay test's seeded streams both go through run_session.
//
//   operations  every entry point: pm_malloc, pm_calloc, pm_realloc, pm_free,
//               pm_posix_memalign, pm_aligned_alloc, pm_memalign, pm_mallocx, pm_rallocx,
//               pm_xallocx, pm_sallocx, pm_malloc_usable_size, pm_dallocx, pm_sdallocx,
//               pm_nallocx, pm_arena_create / create_ex (bump arenas, with and without
//               PM_ARENA_NO_FREE) / reset / destroy / stats_get, pm_stats_get,
//               pm_purge, pm_ctl (decay_ms, checks), bad arguments (each must fail as
//               documented and change nothing), and a few steps on another thread (its own
//               cache and automatic arena; frees of the main thread's blocks)
//   sizes       small (up to 16 KiB, mostly a few hundred bytes), large (page runs up to the
//               chunk), huge (above the chunk) and the edges between them
//   alignments  none half the time, else 1 B .. 64 KiB, rarely 128 KiB .. 8 MiB
//   arenas      the *allocx calls name no arena, an automatic one, a live explicit one, or
//               (rarely) an index that names none, which must fail with EINVAL
//   bounds      at most kMaxLiveBlocks blocks and kMaxLiveBytes bytes live (an allocation
//               past them frees a block instead) and kMaxExplicitArenas explicit arenas
//
// A session starts on a clean heap and ends on one: it frees every block it holds, destroys
// its explicit arenas and restores the options it changed. The heap's invariants
// (heap_invariants.h) and the statistics are checked every `check_every` steps and at the end.
#pragma once

#include <fmt/format.h>
#include <pagemalloc/pagemalloc.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "byte_source.h"
#include "heap/heap_invariants.h"
#include "op_table.h"
#include "pagemap/page_map.h"
#include "shadow_heap.h"

namespace pagemalloc::fuzz {

struct SessionResult {
  std::uint64_t operations = 0;
  std::string failure;  // empty: every check passed
};

template <ByteSource S>
class Driver {
 public:
  Driver(S& source, ShadowHeap& model) : c_(source), model_(model) {
    pm_ctl("decay_ms", &saved_decay_, nullptr);
    pm_ctl("checks", &saved_checks_, nullptr);
  }

  [[nodiscard]] std::uint64_t steps() const { return steps_; }

  // One operation, its checks included.
  void step(bool on_other_thread = false) {
    const Op op = kOpOfByte[c_.byte()];
    ++steps_;
    note(op);
    model_.trace("step {}: {}", steps_, op_name(op));
    switch (op) {
      case Op::Malloc: return op_malloc();
      case Op::Calloc: return op_calloc();
      case Op::Realloc: return op_realloc();
      case Op::Free: return op_free(op);
      case Op::PosixMemalign: return op_posix_memalign();
      case Op::AlignedAlloc: return op_aligned_alloc();
      case Op::Mallocx: return op_mallocx();
      case Op::Rallocx: return op_rallocx();
      case Op::Xallocx: return op_xallocx();
      case Op::Sallocx: return op_sallocx();
      case Op::Dallocx: return op_free(op);
      case Op::Sdallocx: return op_free(op);
      case Op::Nallocx: return op_nallocx();
      case Op::ArenaCreate: return op_arena_create();
      case Op::ArenaReset: return op_arena_reset_or_destroy(false);
      case Op::ArenaDestroy: return op_arena_reset_or_destroy(true);
      case Op::Stats: return model_.check_stats();
      case Op::Purge: return op_purge();
      case Op::CheckHeap: return check_heap();
      case Op::SetDecay: return op_set_decay();
      case Op::SetChecks: return op_set_checks();
      case Op::OtherThread: return on_other_thread ? void() : op_other_thread();
      case Op::BadInput: return op_bad_input();
    }
  }

  void check_heap() {
    if (const char* problem = check_heap_invariants())
      model_.fail(fmt::format("heap invariants: {}", problem));
    model_.check_stats();
  }

  // Frees every block, destroys every explicit arena, restores the options; then the heap
  // must be as the session found it.
  void finish() {
    const std::vector<unsigned> arenas = model_.arenas();
    for (unsigned a : arenas) {
      model_.arena_destroyed(a, "pm_arena_destroy");
      if (const int error = pm_arena_destroy(a))
        model_.fail(fmt::format("pm_arena_destroy({}) at the end: {}", a, error));
    }
    while (model_.ok() && model_.live_blocks() > 0) {
      std::byte* p = model_.block(model_.live_blocks() - 1);
      model_.release(p, "pm_free");
      pm_free(p);
    }
    pm_ctl("decay_ms", nullptr, &saved_decay_);
    pm_ctl("checks", nullptr, &saved_checks_);
    if (model_.ok()) check_heap();
  }

  // The last operations, oldest first (for a failure's report).
  [[nodiscard]] std::string recent() const {
    std::string out;
    const std::uint64_t n = std::min<std::uint64_t>(steps_, kRecent);
    for (std::uint64_t i = steps_ - n; i < steps_; ++i)
      out += fmt::format(" {}:{}", i + 1, op_name(recent_[i % kRecent]));
    return out;
  }

 private:
  static constexpr std::size_t kRecent = 24;

  void note(Op op) { recent_[(steps_ - 1) % kRecent] = op; }

  // --- drawing arguments ---

  std::size_t draw_size() {
    const std::uint8_t kind = c_.byte();
    if (kind < 200) {  // small: lg uniform in 1..14, then uniform below 2^lg: mostly tiny
      const unsigned lg = 1 + unsigned(c_.below(14));
      return 1 + c_.below(std::size_t{1} << lg);
    }
    if (kind < 240) {  // large: [2^(lg-1), 2^lg) for lg 15..21 (the last reaches past a run)
      const unsigned lg = 15 + unsigned(c_.below(7));
      return (std::size_t{1} << (lg - 1)) + c_.below(std::size_t{1} << (lg - 1));
    }
    if (kind < 250) return kChunkSize + c_.below(3 * kChunkSize);  // huge: 2 .. 8 MiB
    return kEdgeSizes[c_.below(std::size(kEdgeSizes))];
  }

  std::size_t draw_align() {
    const std::uint8_t b = c_.byte();
    if (b < 128) return 1;
    if (b < 248) return std::size_t{1} << (b % 17);  // 1 B .. 64 KiB
    return std::size_t{1} << (17 + b % 7);           // 128 KiB .. 8 MiB
  }

  static int align_flag(std::size_t align) {
    return align > 1 ? PM_LG_ALIGN(std::countr_zero(align)) : 0;
  }
  static int arena_flag(unsigned arena) { return arena == kAnyAutomatic ? 0 : PM_ARENA(arena); }

  // The arena an *allocx call names (kAnyAutomatic: none); `names_none` when the index names
  // no arena.
  unsigned draw_arena(bool& names_none) {
    names_none = false;
    const std::uint8_t b = c_.byte();
    const auto& arenas = model_.arenas();
    if (b < 160) return kAnyAutomatic;
    if (b < 192) return unsigned(c_.below(model_.automatic_arenas()));
    if (b < 250) return arenas.empty() ? kAnyAutomatic : arenas[c_.below(arenas.size())];
    const unsigned first = model_.automatic_arenas();
    const unsigned index = first + unsigned(c_.below(kArenaIndices - first));
    names_none = std::find(arenas.begin(), arenas.end(), index) == arenas.end();
    return index;
  }

  // An explicit index that names no live arena, or an automatic one (neither can be reset).
  unsigned draw_index_of_no_explicit_arena() {
    if (c_.one_in(2)) return unsigned(c_.below(model_.automatic_arenas()));
    const auto& arenas = model_.arenas();
    unsigned index = model_.automatic_arenas() + unsigned(c_.below(64));
    while (std::find(arenas.begin(), arenas.end(), index) != arenas.end()) ++index;
    return index;
  }

  std::byte* pick() {
    const std::size_t n = model_.live_blocks();
    return n == 0 ? nullptr : model_.block(c_.below(n));
  }

  // Whether `more` bytes (and, when `adds_block`, one more block) would pass the bounds.
  [[nodiscard]] bool over_bounds(std::size_t more, bool adds_block) const {
    return (adds_block && model_.live_blocks() >= kMaxLiveBlocks) ||
           model_.live_bytes() + more > kMaxLiveBytes;
  }

  // Where a reallocated block must be: where it was when it stayed, else the arena named,
  // else its own explicit arena or any automatic one.
  static unsigned home_after_move(const BlockRecord& old, unsigned named, bool moved) {
    if (!moved) return old.arena;
    return named != kAnyAutomatic ? named : old.arena;
  }

  // --- operations ---

  void op_malloc() {
    const std::size_t size = draw_size();
    if (over_bounds(size, true)) return op_free(Op::Free);
    model_.adopt(pm_malloc(size), Request{size}, "pm_malloc");
  }

  void op_calloc() {
    const std::size_t total = draw_size();
    const std::size_t count = 1 + c_.below(8);
    const std::size_t each = total / count;
    if (over_bounds(total, true)) return op_free(Op::Free);
    model_.adopt(pm_calloc(count, each), Request{count * each, 1, true}, "pm_calloc");
  }

  void op_realloc() {
    std::byte* p = pick();
    const std::size_t size = draw_size();
    if (over_bounds(size, p == nullptr)) return op_free(Op::Free);
    if (p == nullptr || c_.one_in(16)) {
      model_.adopt(pm_realloc(nullptr, size), Request{size}, "pm_realloc(NULL)");
      return;
    }
    if (size == 0) {  // frees, as glibc's
      model_.release(p, "pm_realloc(0)");
      if (pm_realloc(p, 0) != nullptr) model_.fail("pm_realloc(p, 0) did not return NULL");
      return;
    }
    const BlockRecord old = model_.record(p);
    void* q = pm_realloc(p, size);
    if (q == nullptr) return model_.fail(fmt::format("pm_realloc({}) returned NULL", size));
    model_.resized(p, q, Request{size, 1, false, home_after_move(old, kAnyAutomatic, q != p)}, size,
                   "pm_realloc");
  }

  void op_free(Op how) {
    std::byte* p = pick();
    if (p == nullptr) return pm_free(nullptr);
    const BlockRecord b = model_.record(p);
    switch (how) {
      case Op::Dallocx: model_.release(p, "pm_dallocx"); return pm_dallocx(p, align_flag(b.align));
      case Op::Sdallocx:
        model_.release(p, "pm_sdallocx");
        // Any size from the one asked for to the usable size names the block.
        return pm_sdallocx(p, c_.one_in(2) ? b.requested : b.usable, align_flag(b.align));
      default: model_.release(p, "pm_free"); return pm_free(p);
    }
  }

  void op_posix_memalign() {
    const std::size_t align = std::max(draw_align(), sizeof(void*));
    const std::size_t size = draw_size();
    if (over_bounds(size + align, true)) return op_free(Op::Free);
    void* p = nullptr;
    if (const int error = pm_posix_memalign(&p, align, size))
      return model_.fail(fmt::format("pm_posix_memalign({}, {}) failed: {}", align, size, error));
    model_.adopt(p, Request{size, align}, "pm_posix_memalign");
  }

  void op_aligned_alloc() {
    const std::size_t align = draw_align();
    const std::size_t size = draw_size();
    if (over_bounds(size + align, true)) return op_free(Op::Free);
    if (c_.one_in(2))
      model_.adopt(pm_aligned_alloc(align, size), Request{size, align}, "pm_aligned_alloc");
    else model_.adopt(pm_memalign(align, size), Request{size, align}, "pm_memalign");
  }

  void op_mallocx() {
    const std::size_t align = draw_align();
    const std::size_t size = draw_size();
    const bool zero = c_.one_in(4);
    bool names_none = false;
    const unsigned arena = draw_arena(names_none);
    if (over_bounds(size + align, true)) return op_free(Op::Free);
    const int flags = align_flag(align) | (zero ? PM_ZERO : 0) | arena_flag(arena);
    errno = 0;
    void* p = pm_mallocx(size, flags);
    if (names_none) {
      if (p != nullptr || errno != EINVAL)
        model_.fail(fmt::format("pm_mallocx with PM_ARENA({}), no such arena: {}, errno {}", arena,
                                fmt::ptr(p), errno));
      return;
    }
    model_.adopt(p, Request{size, align, zero, arena}, "pm_mallocx");
  }

  // A new size for the block: any, or near its usable size (to hit in-place growth and
  // shrinking across a page or a class).
  std::size_t draw_resize(const BlockRecord& b) {
    if (c_.one_in(2)) return draw_size();
    const std::size_t delta = c_.below(3 * kPageSize);
    return c_.one_in(2) ? b.usable + delta : b.usable - std::min(b.usable, delta);
  }

  void op_rallocx() {
    std::byte* p = pick();
    if (p == nullptr) return op_mallocx();
    const BlockRecord old = model_.record(p);
    const std::size_t size = draw_resize(old);
    const std::size_t align = draw_align();
    const bool zero = c_.one_in(4);
    bool names_none = false;
    const unsigned arena = draw_arena(names_none);
    if (size > old.usable && over_bounds(size + align, false)) return op_free(Op::Free);
    errno = 0;
    void* q = pm_rallocx(p, size, align_flag(align) | (zero ? PM_ZERO : 0) | arena_flag(arena));
    if (q == nullptr) {
      if (!names_none || errno != EINVAL)
        return model_.fail(
            fmt::format("pm_rallocx({}, align {}) returned NULL, errno {}", size, align, errno));
      return model_.verify(p, "pm_rallocx (failed)");  // the block is untouched
    }
    if (names_none && q != p)
      return model_.fail(fmt::format("pm_rallocx moved a block to arena {}, which is none", arena));
    model_.resized(p, q, Request{size, align, zero, home_after_move(old, arena, q != p)}, size,
                   "pm_rallocx");
  }

  void op_xallocx() {
    std::byte* p = pick();
    if (p == nullptr) return;
    const BlockRecord old = model_.record(p);
    const std::size_t size = draw_resize(old);
    const std::size_t extra = c_.one_in(2) ? 0 : c_.below(kChunkSize);
    const bool zero = c_.one_in(4);
    if (size + extra > old.usable && over_bounds(size + extra, false)) return;
    const std::size_t usable = pm_xallocx(p, size, extra, zero ? PM_ZERO : 0);
    model_.trace("  pm_xallocx({} of {} bytes, {}, extra {}) = {}", fmt::ptr(p), old.usable, size,
                 extra, usable);
    // At most the pages the ask covers, or its medium class's (as pm_nallocx says).
    const std::size_t most =
        std::max({old.usable, (size + extra + kPageSize - 1) / kPageSize * kPageSize,
                  pm_nallocx(size + extra, 0)});
    if ((usable != old.usable && usable < size) || usable > most)
      return model_.fail(fmt::format("pm_xallocx({}, extra {}) of a {}-byte block: {}", size, extra,
                                     old.usable, usable));
    model_.resized(p, p, Request{usable, old.align, zero, old.arena}, usable, "pm_xallocx");
  }

  void op_sallocx() {
    if (std::byte* p = pick()) {
      model_.check_usable(p, "pm_sallocx");
      model_.verify(p, "pm_sallocx");
    }
  }

  void op_nallocx() {
    const std::size_t size = draw_size();
    const int flags = align_flag(draw_align());
    const std::size_t n = pm_nallocx(size, flags);
    if (n < size || n == 0 || pm_nallocx(n, flags) != n || pm_nallocx(size + 1, flags) < n)
      model_.fail(
          fmt::format("pm_nallocx({}, flags {:#x}) = {}: not a usable size, not a fixed "
                      "point or not monotonic",
                      size, flags, n));
  }

  void op_arena_create() {
    if (model_.arenas().size() >= kMaxExplicitArenas) return op_arena_reset_or_destroy(true);
    // An arena of slabs and runs, a bump arena, or a bump arena that never frees a block.
    constexpr unsigned kKinds[] = {0, PM_ARENA_BUMP, PM_ARENA_BUMP | PM_ARENA_NO_FREE};
    const unsigned flags = kKinds[c_.below(3)];
    model_.arena_created(flags == 0 ? pm_arena_create() : pm_arena_create_ex(flags), flags);
  }

  void op_arena_reset_or_destroy(bool destroy) {
    const char* call = destroy ? "pm_arena_destroy" : "pm_arena_reset";
    const auto& arenas = model_.arenas();
    if (arenas.empty() || c_.one_in(16)) {
      const unsigned none = draw_index_of_no_explicit_arena();
      const int error = destroy ? pm_arena_destroy(none) : pm_arena_reset(none);
      if (error != EINVAL)
        model_.fail(fmt::format("{}({}), not an explicit arena: {}", call, none, error));
      return;
    }
    const unsigned a = arenas[c_.below(arenas.size())];
    if (destroy) model_.arena_destroyed(a, call);
    else model_.arena_reset(a, call);
    if (const int error = destroy ? pm_arena_destroy(a) : pm_arena_reset(a))
      return model_.fail(fmt::format("{}({}): {}", call, a, error));
    if (!destroy) return model_.check_arena_stats(a);
    pm_arena_stats s{};
    errno = 0;
    if (pm_arena_stats_get(a, &s) != EINVAL || pm_mallocx(8, PM_ARENA(a)) != nullptr ||
        errno != EINVAL)
      model_.fail(fmt::format("arena {} still answers after pm_arena_destroy", a));
  }

  void op_purge() {
    pm_purge();
    pm_stats s{};
    pm_stats_get(&s);
    if (s.dirty != 0) model_.fail(fmt::format("pm_purge left {} dirty bytes", s.dirty));
    model_.check_stats();
  }

  void op_set_decay() {
    // Mostly the default; now and then every free purges (0, 5 ms) or none does (-1).
    constexpr long kDecays[] = {0, 5, 1000, 10000, 10000, 10000, -1, -1};
    const long decay = kDecays[c_.below(std::size(kDecays))];
    pm_ctl("decay_ms", nullptr, &decay);
  }

  void op_set_checks() {
    long checks = 0;
    pm_ctl("checks", &checks, nullptr);
    checks = !checks;
    pm_ctl("checks", nullptr, &checks);
  }

  // A few steps on a new thread: its own cache and arena, and frees of this thread's blocks.
  // This thread waits, so the model and the source are never used by two threads at once.
  void op_other_thread() {
    const std::size_t n = 1 + c_.below(64);
    std::thread([&] {
      for (std::size_t i = 0; i < n && model_.ok(); ++i) step(true);
    }).join();
  }

  // Arguments every call must refuse as documented, changing nothing.
  void op_bad_input() {
    constexpr std::size_t kHuge = ~std::size_t{0};
    errno = 0;
    void* p = nullptr;
    const std::size_t which = c_.below(10);
    switch (which) {
      case 0: p = pm_malloc(kHuge - c_.below(4096)); break;
      case 1: p = pm_calloc(kHuge / 2, 3); break;
      case 2: p = pm_mallocx(kHuge, align_flag(draw_align())); break;
      case 3: p = pm_aligned_alloc(48, 100); break;
      case 4: {
        const int error = pm_posix_memalign(&p, c_.one_in(2) ? 4 : 24, 100);
        if (error != EINVAL || p != nullptr)
          model_.fail(fmt::format("pm_posix_memalign: {}", error));
        return;
      }
      case 5:
        if (pm_nallocx(kHuge, 0) != 0) model_.fail("pm_nallocx(SIZE_MAX) is not 0");
        return;
      case 6: {
        pm_arena_stats s{};
        if (pm_arena_stats_get(draw_index_of_no_explicit_arena(), &s) != EINVAL ||
            (!model_.arenas().empty() && pm_arena_stats_get(model_.arenas()[0], nullptr) != EINVAL))
          model_.fail("pm_arena_stats_get of no arena, or into NULL, did not fail with EINVAL");
        return;
      }
      case 9: {
        const unsigned flags = c_.one_in(2) ? PM_ARENA_NO_FREE : 0x4u << c_.below(28);
        if (pm_arena_create_ex(flags) != 0 || errno != EINVAL)
          model_.fail(fmt::format("pm_arena_create_ex({:#x}) did not fail with EINVAL", flags));
        return;
      }
      default: {  // a live block asked to become impossibly large: it stays as it is
        std::byte* b = pick();
        if (b == nullptr) return;
        const std::size_t usable = model_.record(b).usable;
        if (which == 7 ? pm_rallocx(b, kHuge, 0) != nullptr || errno != ENOMEM
                       : pm_xallocx(b, kHuge, 0, 0) != usable)
          model_.fail(
              fmt::format("resizing a block to SIZE_MAX did not fail cleanly (errno {})", errno));
        model_.check_usable(b, "pm_sallocx after a failed resize");
        return model_.verify(b, "a failed resize");
      }
    }
    const int expected = which == 3 ? EINVAL : ENOMEM;
    if (p != nullptr || errno != expected)
      model_.fail(fmt::format("bad input {}: {}, errno {} (expected NULL, {})", which, fmt::ptr(p),
                              errno, expected));
  }

  Choices<S> c_;
  ShadowHeap& model_;
  long saved_decay_ = 10000;
  long saved_checks_ = 0;
  std::uint64_t steps_ = 0;
  std::array<Op, kRecent> recent_{};
};

// Runs up to max_steps operations from the source (fewer when it runs out) on a clean heap,
// checking the heap every check_every steps, then cleans up (Driver::finish).
template <ByteSource S>
SessionResult run_session(S& source, std::uint64_t max_steps, std::uint64_t check_every) {
  ShadowHeap model;
  Driver<S> driver(source, model);
  while (model.ok() && driver.steps() < max_steps && !source.exhausted()) {
    driver.step();
    if (model.ok() && driver.steps() % check_every == 0) driver.check_heap();
  }
  if (model.ok()) driver.finish();
  SessionResult result{driver.steps(), {}};
  if (!model.ok())
    result.failure = fmt::format("step {}: {}\n  last steps:{}", driver.steps(), model.failure(),
                                 driver.recent());
  return result;
}

}  // namespace pagemalloc::fuzz
