// The shadow heap: what the fuzz harness knows about every live block and explicit arena,
// and the checks of the allocator's answers against it.
//
//   live block   address -> requested size, usable size, alignment, arena, the seed and layout
//                of the pattern written over it (block_pattern.h)
//   arena        a live explicit arena: its blocks and bytes, as pm_arena_stats_get must say;
//                kAnyAutomatic stands for the automatic arenas (which one is the heap's choice)
//
// A new or moved block must: be aligned; have pm_sallocx == pm_malloc_usable_size == the
// pm_nallocx of its request >= the size asked; overlap no other live block; sit in the arena
// it was asked for, as the address map says (an explicit one, an automatic one named with
// PM_ARENA, or any automatic one); read zero where PM_ZERO or calloc promise it. A block's
// pattern must be intact when it is freed, reallocated or looked at, up to the size kept by a
// reallocation. The statistics must match the model: each explicit arena's blocks and bytes,
// and the heap's allocated bytes (those it held when the model started, plus the model's).
// A bump arena's blocks must have the usable size pm_nallocx gives with PM_ARENA(i); those of
// one created with PM_ARENA_NO_FREE stay counted after their free, until the reset ("kept").
//
// The first failed check is kept as a sentence; everything after it is skipped (ok() false).
#pragma once

#include <fmt/format.h>
#include <pagemalloc/pagemalloc.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "arena/arena.h"
#include "block_pattern.h"
#include "chunks/address_map.h"
#include "explicit/bump_space.h"
#include "huge/huge.h"
#include "pagemap/pages.h"
#include "support/flags.h"

namespace pagemalloc::fuzz {

// An arena "index" for blocks of the automatic arenas, whichever holds them; also what the
// automatic arenas' huge manager answers for its blocks.
inline constexpr unsigned kAnyAutomatic = kNoArena;

struct BlockRecord {
  std::size_t requested = 0;       // the size asked for last: what pm_sdallocx may be given
  std::size_t usable = 0;          // what pm_sallocx must say
  std::size_t align = 1;           // the alignment asked for last (1: none)
  unsigned arena = kAnyAutomatic;  // an explicit arena's index, or kAnyAutomatic
  std::uint64_t seed = 0;          // of the pattern written over the block
  Layout layout;                   // where that pattern lies
};

// What a block was asked for, to check the allocator's answer against.
struct Request {
  std::size_t size = 0;
  std::size_t align = 1;
  bool zero = false;               // the whole block (new) or its growth (resized) reads zero
  unsigned arena = kAnyAutomatic;  // kAnyAutomatic, an automatic index named, or an explicit one
};

class ShadowHeap {
 public:
  // Requires: the heap holds no block of explicit arenas, and no other thread allocates.
  ShadowHeap() {
    long n = 0;
    pm_ctl("narenas", &n, nullptr);
    automatic_arenas_ = unsigned(n);
    baseline_allocated_ = heap_allocated();
  }

  // With PAGEMALLOC_FUZZ_TRACE set, every call and its answer go to stderr (to follow a
  // failing replay step by step).
  template <class... Args>
  void trace(fmt::format_string<Args...> format, Args&&... args) {
    if (trace_) fmt::print(stderr, "{}\n", fmt::format(format, std::forward<Args>(args)...));
  }

  [[nodiscard]] bool ok() const { return failure_.empty(); }
  [[nodiscard]] const std::string& failure() const { return failure_; }
  void fail(std::string what) {
    if (failure_.empty()) failure_ = std::move(what);
  }

  [[nodiscard]] unsigned automatic_arenas() const { return automatic_arenas_; }
  [[nodiscard]] bool is_explicit(unsigned arena) const {
    return arena != kAnyAutomatic && arena >= automatic_arenas_;
  }
  [[nodiscard]] std::size_t live_blocks() const { return live_.size(); }
  [[nodiscard]] std::size_t live_bytes() const { return live_bytes_; }
  [[nodiscard]] std::byte* block(std::size_t i) const { return live_[i].p; }
  [[nodiscard]] const BlockRecord& record(std::byte* p) const {
    return live_[index_of_.at(key(p))].record;
  }
  [[nodiscard]] const std::vector<unsigned>& arenas() const { return arenas_; }

  // A block the allocator just returned for r: checks it, writes its pattern, records it.
  void adopt(void* p, const Request& r, const char* call) {
    if (p == nullptr)
      return fail(fmt::format("{}({}, align {}) returned NULL", call, r.size, r.align));
    auto* bytes = static_cast<std::byte*>(p);
    trace("  {}({}, align {}, zero {}, arena {}) = {}", call, r.size, r.align, r.zero,
          std::int64_t(r.arena == kAnyAutomatic ? -1 : r.arena), fmt::ptr(p));
    const std::size_t usable = check_placement(bytes, r, call);
    if (!ok()) return;
    BlockRecord b{r.size,           usable,      r.align,
                  home_of(r.arena), next_seed(), Layout{key(bytes), usable}};
    if (r.zero) expect_zero(bytes, b.layout, 0, usable, call);
    write_pattern(bytes, b.layout, b.seed);
    insert(bytes, b);
  }

  // The block p became `now` (p itself when resized in place): checks `now` against r, the
  // bytes kept (the first `kept` of the old block) and, with r.zero, the growth. r.arena:
  // where `now` must be.
  void resized(std::byte* p, void* now, const Request& r, std::size_t kept, const char* call) {
    const BlockRecord old = record(p);
    auto* bytes = static_cast<std::byte*>(now);
    trace("  {}({} of {} bytes, {}, align {}, zero {}, arena {}) = {}", call, fmt::ptr(p),
          old.usable, r.size, r.align, r.zero,
          std::int64_t(r.arena == kAnyAutomatic ? -1 : r.arena), fmt::ptr(now));
    if (now != p) keep_if_never_freed(p);
    erase(p);
    const std::size_t usable = check_placement(bytes, r, call);
    if (!ok()) return;
    if (auto at =
            pattern_mismatch(bytes, old.layout, old.seed, kept < old.usable ? kept : old.usable))
      return fail(fmt::format("{}: block {} (now {}) lost its contents at offset {} of {} kept",
                              call, fmt::ptr(p), fmt::ptr(now), *at, kept));
    BlockRecord b{r.size, usable, r.align, home_of(r.arena), old.seed, Layout{key(bytes), usable}};
    if (r.zero && usable > old.usable) expect_zero(bytes, b.layout, old.usable, usable, call);
    write_pattern(bytes, b.layout, b.seed);
    insert(bytes, b);
  }

  // Checks the block's pattern and takes it out of the model (it is about to be freed).
  void release(std::byte* p, const char* call) {
    trace("  {}({} of {} bytes)", call, fmt::ptr(p), record(p).usable);
    verify(p, call);
    keep_if_never_freed(p);
    erase(p);
  }

  // Checks a live block: its pattern, and its usable size through both calls.
  void verify(std::byte* p, const char* call) {
    const BlockRecord& b = record(p);
    if (auto at = pattern_mismatch(p, b.layout, b.seed, b.usable))
      return fail(fmt::format("{}: block {} ({} bytes) was overwritten at offset {}", call,
                              fmt::ptr(p), b.usable, *at));
  }

  void check_usable(std::byte* p, const char* call) {
    const BlockRecord& b = record(p);
    const std::size_t s = pm_sallocx(p, 0), u = pm_malloc_usable_size(p);
    if (s != b.usable || u != b.usable)
      fail(fmt::format("{}: block {}: pm_sallocx {}, pm_malloc_usable_size {}, model {}", call,
                       fmt::ptr(p), s, u, b.usable));
  }

  // Explicit arenas (flags: as given to pm_arena_create_ex).
  void arena_created(unsigned arena, unsigned flags) {
    if (!is_explicit(arena)) return fail(fmt::format("pm_arena_create returned {}", arena));
    for (unsigned a : arenas_)
      if (a == arena) return fail(fmt::format("pm_arena_create returned live arena {}", arena));
    arenas_.push_back(arena);
    tallies_[arena] = {};
    kept_[arena] = {};
    no_free_[arena] = (flags & PM_ARENA_NO_FREE) != 0;
    check_arena_stats(arena);
  }
  // Every block of the arena is checked, then forgotten (it is about to be reset).
  void arena_reset(unsigned arena, const char* call) {
    for (std::size_t i = live_.size(); i-- > 0;) {
      if (live_[i].record.arena != arena) continue;
      std::byte* p = live_[i].p;
      verify(p, call);
      erase(p);
    }
    if (tallies_[arena].blocks != 0 || tallies_[arena].bytes != 0)
      fail(fmt::format("{}: the model's tally of arena {} is not zero", call, arena));
    kept_bytes_ -= kept_[arena].bytes;
    kept_[arena] = {};
  }
  void arena_destroyed(unsigned arena, const char* call) {
    arena_reset(arena, call);
    std::erase(arenas_, arena);
    tallies_.erase(arena);
    kept_.erase(arena);
    no_free_.erase(arena);
  }

  // pm_arena_stats_get of the arena against the model.
  void check_arena_stats(unsigned arena) {
    pm_arena_stats s{};
    if (const int error = pm_arena_stats_get(arena, &s))
      return fail(fmt::format("pm_arena_stats_get({}) failed: {}", arena, error));
    const Tally& t = tallies_[arena];
    const Tally& k = kept_[arena];
    if (s.blocks != t.blocks + k.blocks || s.allocated != t.bytes + k.bytes)
      return fail(fmt::format(
          "arena {}: {} blocks of {} bytes; the model has {} of {} ({} of {} "
          "kept)",
          arena, s.blocks, s.allocated, t.blocks + k.blocks, t.bytes + k.bytes, k.blocks, k.bytes));
    if (s.active < s.allocated || s.mapped < s.active)
      fail(fmt::format("arena {}: allocated {} <= active {} <= mapped {} does not hold", arena,
                       s.allocated, s.active, s.mapped));
  }
  // Every explicit arena's statistics, and the heap's allocated bytes.
  void check_stats() {
    for (unsigned a : arenas_) check_arena_stats(a);
    const std::size_t allocated = heap_allocated();
    if (allocated != baseline_allocated_ + live_bytes_ + kept_bytes_)
      fail(fmt::format("pm_stats_get: {} bytes allocated; expected {} before + {} live + {} kept",
                       allocated, baseline_allocated_, live_bytes_, kept_bytes_));
  }

 private:
  struct Live {
    std::byte* p;
    BlockRecord record;
  };
  struct Tally {
    std::size_t blocks = 0;
    std::size_t bytes = 0;
  };

  static std::uintptr_t key(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
  static std::size_t heap_allocated() {
    pm_stats s{};
    pm_stats_get(&s);
    return s.allocated;
  }
  std::uint64_t next_seed() { return ++seeds_ * 0x9E3779B97F4A7C15ull; }

  // Where a block asked for in `arena` is recorded: its explicit arena, or any automatic one.
  [[nodiscard]] unsigned home_of(unsigned arena) const {
    return is_explicit(arena) ? arena : kAnyAutomatic;
  }

  // The arena the heap's metadata say holds p: an arena's index for a slab or run, the huge
  // manager's arena (kAnyAutomatic for the automatic arenas' manager) for a huge block.
  static unsigned holder_of(const void* p) {
    if (is_chunk_aligned(p)) {
      const HugeManager* huge = HugeManager::owner_of(p);
      return huge == nullptr ? kArenaIndices : huge->arena();
    }
    const std::uintptr_t entry = address_map().get(chunk_base_of(p));
    if (AddressMap::tag_of(entry) == AddressMap::kBumpChunk)
      return AddressMap::owner_of<BumpSpace>(entry)->index();
    if (AddressMap::tag_of(entry) != AddressMap::kArenaChunk) return kArenaIndices;
    return AddressMap::owner_of<Arena>(entry)->index();
  }

  // A bumped block of a PM_ARENA_NO_FREE arena, about to be freed: it stays counted.
  void keep_if_never_freed(std::byte* p) {
    const BlockRecord& b = record(p);
    if (b.arena == kAnyAutomatic || !no_free_[b.arena] || BumpSpace::owner_of(p) == nullptr) return;
    kept_[b.arena].blocks += 1;
    kept_[b.arena].bytes += b.usable;
    kept_bytes_ += b.usable;
  }

  // Checks a block returned for r; returns its usable size.
  std::size_t check_placement(std::byte* p, const Request& r, const char* call) {
    if (key(p) % r.align != 0)
      fail(fmt::format("{}: {} is not aligned to {}", call, fmt::ptr(p), r.align));
    const std::size_t usable = pm_sallocx(p, 0);
    const std::size_t usable_size = pm_malloc_usable_size(p);
    // With PM_ARENA(i): a bump arena's blocks have sizes of their own.
    const int flags =
        (r.align > 1 ? PM_ALIGN(r.align) : 0) | (is_explicit(r.arena) ? PM_ARENA(r.arena) : 0);
    const std::size_t expected = pm_nallocx(r.size, flags);
    if (usable != usable_size || usable != expected || usable < r.size || usable == 0)
      fail(fmt::format("{}({}, align {}): pm_sallocx {}, pm_malloc_usable_size {}, pm_nallocx {}",
                       call, r.size, r.align, usable, usable_size, expected));
    const unsigned holder = holder_of(p);
    const bool huge = is_chunk_aligned(p);
    const bool in_its_arena = r.arena == kAnyAutomatic
                                  ? (huge ? holder == kAnyAutomatic : holder < automatic_arenas_)
                              : is_explicit(r.arena) ? holder == r.arena
                                                     : holder == (huge ? kAnyAutomatic : r.arena);
    if (!in_its_arena)
      fail(fmt::format("{}: {} is held by arena {}, asked for {}", call, fmt::ptr(p),
                       std::int64_t(holder == kNoArena ? -1 : holder),
                       std::int64_t(r.arena == kAnyAutomatic ? -1 : r.arena)));
    check_no_overlap(p, usable, call);
    return usable;
  }

  // Requires: p is not in the model.
  void check_no_overlap(const std::byte* p, std::size_t usable, const char* call) {
    const auto after = index_of_.lower_bound(key(p));
    if (after != index_of_.end() && after->first < key(p) + usable)
      return fail(fmt::format("{}: {} + {} overlaps the live block at {:#x}", call, fmt::ptr(p),
                              usable, after->first));
    if (after == index_of_.begin()) return;
    const auto before = std::prev(after);
    const std::size_t before_usable = live_[before->second].record.usable;
    if (before->first + before_usable > key(p))
      fail(fmt::format("{}: {} + {} overlaps the live block at {:#x} + {}", call, fmt::ptr(p),
                       usable, before->first, before_usable));
  }

  void expect_zero(const std::byte* p, const Layout& layout, std::size_t from, std::size_t to,
                   const char* call) {
    if (auto at = nonzero_byte(p, layout, from, to))
      fail(fmt::format("{}: block {} is not zero at offset {} (zeroed range {}..{})", call,
                       fmt::ptr(p), *at, from, to));
  }

  void insert(std::byte* p, const BlockRecord& b) {
    index_of_[key(p)] = live_.size();
    live_.push_back({p, b});
    live_bytes_ += b.usable;
    if (b.arena != kAnyAutomatic) {
      tallies_[b.arena].blocks += 1;
      tallies_[b.arena].bytes += b.usable;
    }
  }
  void erase(std::byte* p) {
    const auto it = index_of_.find(key(p));
    const std::size_t i = it->second;
    const BlockRecord& b = live_[i].record;
    live_bytes_ -= b.usable;
    if (b.arena != kAnyAutomatic) {
      tallies_[b.arena].blocks -= 1;
      tallies_[b.arena].bytes -= b.usable;
    }
    index_of_.erase(it);
    if (i + 1 != live_.size()) {
      live_[i] = live_.back();
      index_of_[key(live_[i].p)] = i;
    }
    live_.pop_back();
  }

  unsigned automatic_arenas_ = 1;
  std::size_t baseline_allocated_ = 0;  // the heap's allocated bytes when the model started
  std::vector<Live> live_;              // in no order: a random block in O(1)
  std::map<std::uintptr_t, std::size_t> index_of_;  // address -> position in live_
  std::size_t live_bytes_ = 0;
  std::vector<unsigned> arenas_;  // live explicit arenas
  std::unordered_map<unsigned, Tally> tallies_;
  std::unordered_map<unsigned, Tally> kept_;  // NO_FREE arenas' freed bumped blocks
  std::unordered_map<unsigned, bool> no_free_;
  std::size_t kept_bytes_ = 0;
  std::uint64_t seeds_ = 0;
  std::string failure_;
  bool trace_ = std::getenv("PAGEMALLOC_FUZZ_TRACE") != nullptr;
};

}  // namespace pagemalloc::fuzz
