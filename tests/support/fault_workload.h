// A random workload of the pm_ API checked against a model of its live blocks, for the
// failure-injection tests (fault_injection_test.cpp): whatever the OS layer refuses, every
// call must either work or fail the documented way, and lose nothing.
//
// The allocator it drives is the build's Config over the fault-injecting OS layer
// (FaultyConfig), a second heap in the process beside the build's own, called through
// PmApi<FaultyConfig> (Faulty::malloc for pm_malloc, and so on: allocator/src/pm_api.h).
//
//   Block    a live block: address, usable size (pm_sallocx), the alignment asked for, its
//            explicit arena (0: none) and the byte that every one of its usable bytes holds
//   step     one call chosen at random: pm_malloc, pm_calloc, pm_mallocx (alignment, PM_ZERO,
//            PM_ARENA), pm_aligned_alloc, pm_posix_memalign, pm_realloc, pm_rallocx,
//            pm_xallocx, pm_free, pm_dallocx, pm_sdallocx, explicit arenas' create, reset and
//            destroy, pm_purge, and decay_ms set to 0 or 10 s; sizes small, large and huge
//   checks   after each call:
//            - a failure result (NULL; ENOMEM from pm_posix_memalign) comes with errno =
//              ENOMEM and only when the OS layer refused something during the call;
//            - a block given to a failed reallocation keeps its address, size and bytes;
//            - a new or resized block is aligned, has the usable size pm_nallocx promises,
//              reads zero where asked, and holds the bytes of the block it replaces;
//            - the statistics count exactly the live blocks: pm_stats_get's allocated (from
//              where it started) and each explicit arena's blocks and bytes;
//            and after a refused call, every 64 steps and on demand, the heap's invariants
//            (heap_invariants.h); at those last two, every byte of every live block too.
//
// Assertions are googletest's non-fatal ones, naming the step and the call; run() stops at
// the first failure.
#pragma once

#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api/pm_api.h"
#include "heap/allocator_impl.h"
#include "pagemap/testing/fault_injector.h"
#include "pagemap/testing/pal_fault_injecting.h"

namespace pagemalloc::test {

// The build's design, its chunks and huge blocks from an OS layer whose reserve, commit,
// grow and move fail when the process's fault injector says so.
struct FaultyConfig : BuildConfig {
  using Pal = FaultInjectingPal<LinuxPal>;
};
using Faulty = PmApi<FaultyConfig>;

inline constexpr std::size_t kKiB = 1024;
inline constexpr std::size_t kMiB = 1024 * kKiB;

// The offset of the first byte of [p, p + n) that is not `value`, or n.
inline std::size_t first_byte_not(const unsigned char* p, std::size_t n, unsigned char value) {
  if (n == 0 || (p[0] == value && std::memcmp(p, p + 1, n - 1) == 0)) return n;
  return std::size_t(std::find_if(p, p + n, [&](unsigned char b) { return b != value; }) - p);
}

inline pm_stats current_stats() {
  pm_stats s{};
  Faulty::stats_get(&s);
  return s;
}

// The sizes a workload asks for: small blocks (up to 16 KiB) for 55% of the new blocks, huge
// ones for huge_percent, large ones for the rest.
struct Sizes {
  std::size_t large_max = 1 * kMiB;  // a run: below a chunk
  std::size_t huge_max = 4 * kMiB;   // a huge block: above
  std::size_t huge_percent = 10;     // at most 45
};

class FaultWorkload {
 public:
  explicit FaultWorkload(std::uint64_t seed, Sizes sizes = {})
      : rng_(seed), sizes_(sizes), allocated_at_start_(current_stats().allocated) {}

  // `steps` random calls; stops early at the first failed assertion of the test.
  void run(std::uint64_t steps) {
    for (std::uint64_t i = 0; i < steps && !testing::Test::HasFailure(); ++i) {
      step();
      if (steps_ % 64 == 0) check_contents();
    }
  }

  // Every byte of every live block, and the heap's invariants.
  void check_contents() {
    for (const Block& b : live_) expect_bytes(b, 0, b.usable, b.tag, "contents check");
    check_heap("contents check");
  }

  // Frees every live block (with pm_free) and destroys every explicit arena.
  void free_everything() {
    check_contents();
    for (const Block& b : live_) Faulty::free(b.p);
    live_.clear();
    for (unsigned a : arenas_) EXPECT_EQ(Faulty::arena_destroy(a), 0) << "arena " << a;
    arenas_.clear();
    check_accounting("after freeing everything");
  }

  [[nodiscard]] std::uint64_t steps() const { return steps_; }
  // Calls that returned their failure result.
  [[nodiscard]] std::uint64_t refused() const { return refused_; }
  [[nodiscard]] std::size_t live_blocks() const { return live_.size(); }

 private:
  struct Block {
    unsigned char* p;
    std::size_t usable;  // pm_sallocx(p)
    std::size_t align;   // asked for; 1: none
    unsigned arena;      // explicit arena; 0: an automatic one
    unsigned char tag;   // every usable byte holds it
  };
  // What a call asks for besides the size.
  struct Request {
    std::size_t align = 1;
    bool zero = false;
    unsigned arena = 0;  // 0: none named
    int flags = 0;       // the same, as *allocx flags
  };
  enum class Op {
    Malloc,
    Calloc,
    Mallocx,
    AlignedAlloc,
    PosixMemalign,
    Realloc,
    Rallocx,
    Xallocx,
    Free,
    Dallocx,
    Sdallocx,
    ArenaCreate,
    ArenaReset,
    ArenaDestroy,
    Purge,
    Decay,
  };
  static constexpr double kWeights[] = {12, 4, 14, 3, 3, 12, 14, 6, 8, 4, 4, 1, 1, 1, 1, 1};
  static constexpr std::size_t kMaxLive = 48;
  static constexpr std::size_t kMaxLiveBytes = 40 * kMiB;
  static constexpr unsigned kMaxArenas = 3;

  static std::uint64_t injected() { return g_fault_injector.failures(); }

  // --- Random choices -----------------------------------------------------------------------

  std::size_t uniform(std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng_);
  }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  // Small (spread over the powers of two), large or huge.
  std::size_t random_size() {
    const std::size_t kind = uniform(0, 99);
    if (kind < 55) {
      const std::size_t lg = uniform(0, 13);
      return uniform(std::size_t{1} << lg, std::size_t{2} << lg);
    }
    if (kind < 100 - sizes_.huge_percent) return uniform(16 * kKiB + 1, sizes_.large_max);
    return uniform(2 * kMiB + 1, sizes_.huge_max);
  }
  // Mostly near the old size (growth and shrinking in place), else anything.
  std::size_t resize_size(std::size_t usable) {
    const std::size_t kind = uniform(0, 9);
    if (kind < 4) return usable + uniform(1, usable * 2);
    if (kind < 7) return std::max<std::size_t>(1, usable / uniform(2, 4));
    return random_size();
  }
  Request random_request(bool may_name_arena) {
    constexpr std::size_t kAlignments[] = {1, 1, 16, 64, 4096, 64 * kKiB, 2 * kMiB, 4 * kMiB};
    Request r;
    r.align = kAlignments[uniform(0, std::size(kAlignments) - 1)];
    if (r.align > 1) r.flags |= PM_ALIGN(r.align);
    r.zero = chance(0.3);
    if (r.zero) r.flags |= PM_ZERO;
    if (may_name_arena && !arenas_.empty() && chance(0.4)) {
      r.arena = arenas_[uniform(0, arenas_.size() - 1)];
      r.flags |= PM_ARENA(r.arena);
    }
    return r;
  }
  // Only an alignment, of at least 8 (pm_posix_memalign's minimum).
  static Request aligned_only(std::size_t align) {
    const std::size_t a = align < 8 ? 8 : align;
    return Request{.align = a, .flags = PM_ALIGN(a)};
  }
  unsigned char new_tag() {
    tag_ = tag_ == 255 ? 1 : tag_ + 1;
    return tag_;
  }

  Op choose() {
    if (live_.empty()) return chance(0.5) ? Op::Malloc : Op::Mallocx;
    if (live_.size() >= kMaxLive || live_bytes() >= kMaxLiveBytes) return Op::Free;
    return Op(std::discrete_distribution<int>(std::begin(kWeights), std::end(kWeights))(rng_));
  }

  // --- The calls ----------------------------------------------------------------------------

  void step() {
    ++steps_;
    switch (const Op op = choose()) {
      case Op::Malloc:
      case Op::Calloc:
      case Op::Mallocx:
      case Op::AlignedAlloc:
      case Op::PosixMemalign: return allocate(op);
      case Op::Realloc:
      case Op::Rallocx: return reallocate(op);
      case Op::Xallocx: return resize_in_place();
      case Op::Free:
      case Op::Dallocx:
      case Op::Sdallocx: return free_one(op);
      case Op::ArenaCreate:
      case Op::ArenaReset:
      case Op::ArenaDestroy: return arena_call(op);
      case Op::Purge: Faulty::purge(); return check_accounting("pm_purge()");
      case Op::Decay: {
        const long decay = chance(0.5) ? 0 : 10000;
        EXPECT_EQ(pm_ctl("decay_ms", nullptr, &decay), 0);
        return;
      }
    }
  }

  void allocate(Op op) {
    std::size_t size = random_size();
    Request r = random_request(op == Op::Mallocx);
    const std::uint64_t injected_before = injected();
    errno = 0;
    void* p = nullptr;
    std::string call;
    switch (op) {
      case Op::Malloc:
        r = Request{};
        call = fmt::format("pm_malloc({})", size);
        p = Faulty::malloc(size);
        break;
      case Op::Calloc: {
        const std::size_t unit = std::size_t{1} << uniform(0, 5);
        r = Request{.zero = true};
        call = fmt::format("pm_calloc({}, {})", size / unit + 1, unit);
        p = Faulty::calloc(size / unit + 1, unit);
        size = (size / unit + 1) * unit;
        break;
      }
      case Op::Mallocx:
        call = fmt::format("pm_mallocx({}, {:#x})", size, r.flags);
        p = Faulty::mallocx(size, r.flags);
        break;
      case Op::AlignedAlloc:
        r = aligned_only(r.align);
        call = fmt::format("pm_aligned_alloc({}, {})", r.align, size);
        p = Faulty::aligned_alloc(r.align, size);
        break;
      default: {
        r = aligned_only(r.align);
        call = fmt::format("pm_posix_memalign({}, {})", r.align, size);
        static int sentinel;
        void* out = &sentinel;
        const int result = Faulty::posix_memalign(&out, r.align, size);
        if (result != 0) {  // its failure result is the error number, not errno
          EXPECT_EQ(out, &sentinel) << where(call) << ": *out changed by a failed call";
          errno = result;
        }
        p = result == 0 ? out : nullptr;
        break;
      }
    }
    const int error = errno;
    if (p == nullptr) return refused(call, error, injected_before);
    Block b{static_cast<unsigned char*>(p), Faulty::sallocx(p, 0), r.align, r.arena, new_tag()};
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % r.align, 0u) << where(call);
    EXPECT_EQ(b.usable, Faulty::nallocx(size, r.flags & ~PM_ZERO)) << where(call);
    if (r.zero) expect_bytes(b, 0, b.usable, 0, call);
    fill(b);
    live_.push_back(b);
    check_accounting(call);
  }

  // A live block; for resizing, more often a large one (huge blocks grow in more ways).
  Block& random_block(bool prefer_large) {
    std::size_t pick = uniform(0, live_.size() - 1);
    if (prefer_large && chance(0.3)) {
      for (int i = 0; i < 3; ++i) {
        const std::size_t other = uniform(0, live_.size() - 1);
        if (live_[other].usable > live_[pick].usable) pick = other;
      }
    }
    return live_[pick];
  }

  void reallocate(Op op) {
    Block& b = random_block(true);
    const std::size_t size = resize_size(b.usable);
    Request r = op == Op::Rallocx ? random_request(true) : Request{};
    if (op == Op::Rallocx && r.align > 1 && chance(0.5)) {  // keep the block's own alignment
      r.flags = (r.flags & ~0x3f) | PM_ALIGN(b.align);
      r.align = b.align;
    }
    const std::string call =
        op == Op::Realloc ? fmt::format("pm_realloc({}, {})", fmt::ptr(b.p), size)
                          : fmt::format("pm_rallocx({}, {}, {:#x})", fmt::ptr(b.p), size, r.flags);
    const std::uint64_t injected_before = injected();
    errno = 0;
    void* q = op == Op::Realloc ? Faulty::realloc(b.p, size) : Faulty::rallocx(b.p, size, r.flags);
    const int error = errno;
    if (q == nullptr) {
      refused(call, error, injected_before);
      EXPECT_EQ(Faulty::sallocx(b.p, 0), b.usable) << where(call) << ": the old block changed";
      return expect_bytes(b, 0, b.usable, b.tag, call);
    }
    const std::size_t usable = Faulty::sallocx(q, 0);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(q) % r.align, 0u) << where(call);
    EXPECT_EQ(usable, Faulty::nallocx(size, r.flags & ~PM_ZERO)) << where(call);
    Block moved{static_cast<unsigned char*>(q), usable, r.align, b.arena, b.tag};
    if (q != b.p && r.arena != 0) moved.arena = r.arena;
    expect_bytes(moved, 0, std::min(b.usable, size), b.tag, call);
    if (r.zero && usable > b.usable) expect_bytes(moved, b.usable, usable, 0, call);
    moved.tag = new_tag();
    fill(moved);
    b = moved;
    check_accounting(call);
  }

  void resize_in_place() {
    Block& b = random_block(true);
    const std::size_t size = resize_size(b.usable);
    const std::size_t extra = chance(0.5) ? 0 : uniform(0, size);
    const int flags = chance(0.3) ? PM_ZERO : 0;
    const std::string call =
        fmt::format("pm_xallocx({}, {}, {}, {:#x})", fmt::ptr(b.p), size, extra, flags);
    const std::size_t usable = Faulty::xallocx(b.p, size, extra, flags);
    EXPECT_EQ(usable, Faulty::sallocx(b.p, 0)) << where(call);
    expect_bytes(b, 0, std::min(b.usable, usable), b.tag, call);
    if (flags != 0 && usable > b.usable) {
      Block grown = b;
      grown.usable = usable;
      expect_bytes(grown, b.usable, usable, 0, call);
    }
    b.usable = usable;
    b.tag = new_tag();
    fill(b);
    check_accounting(call);
  }

  void free_one(Op op) {
    const std::size_t i = uniform(0, live_.size() - 1);
    const Block b = live_[i];
    live_[i] = live_.back();
    live_.pop_back();
    expect_bytes(b, 0, b.usable, b.tag, "before a free");
    if (op == Op::Free) Faulty::free(b.p);
    else if (op == Op::Dallocx) Faulty::dallocx(b.p, 0);
    else Faulty::sdallocx(b.p, b.usable, 0);
    check_accounting("a free");
  }

  void arena_call(Op op) {
    if (op == Op::ArenaCreate) {
      if (arenas_.size() >= kMaxArenas) return;
      const unsigned a = Faulty::arena_create();
      EXPECT_NE(a, 0u) << "pm_arena_create";
      if (a != 0) arenas_.push_back(a);
      return;
    }
    if (arenas_.empty()) return;
    const std::size_t i = uniform(0, arenas_.size() - 1);
    const unsigned a = arenas_[i];
    std::erase_if(live_, [a](const Block& b) { return b.arena == a; });
    if (op == Op::ArenaReset) {
      EXPECT_EQ(Faulty::arena_reset(a), 0) << "pm_arena_reset(" << a << ")";
    } else {
      EXPECT_EQ(Faulty::arena_destroy(a), 0) << "pm_arena_destroy(" << a << ")";
      arenas_.erase(arenas_.begin() + std::ptrdiff_t(i));
    }
    check_accounting("an arena's reset or destroy");
  }

  // --- Checks -------------------------------------------------------------------------------

  std::string where(const std::string& call) const {
    return fmt::format("step {}: {}", steps_, call);
  }

  // A call returned its failure result.
  void refused(const std::string& call, int error, std::uint64_t injected_before) {
    ++refused_;
    EXPECT_EQ(error, ENOMEM) << where(call);
    EXPECT_GT(injected(), injected_before)
        << where(call) << ": failed although the OS layer refused nothing";
    check_accounting(call);
    check_heap(call);
  }

  void check_heap(const std::string& call) const {
    const char* problem = Faulty::heap().check_invariants();
    EXPECT_EQ(problem, nullptr) << where(call) << ": " << (problem != nullptr ? problem : "");
  }

  void fill(const Block& b) { std::memset(b.p, b.tag, b.usable); }

  // Bytes [from, to) of b hold `value`.
  void expect_bytes(const Block& b, std::size_t from, std::size_t to, unsigned char value,
                    const std::string& call) const {
    const std::size_t at = first_byte_not(b.p + from, to - from, value);
    EXPECT_EQ(at, to - from) << where(call)
                             << fmt::format(": block {} (usable {}) byte {} is {:#x}, not {:#x}",
                                            fmt::ptr(b.p), b.usable, from + at,
                                            at < to - from ? b.p[from + at] : 0, value);
  }

  std::size_t live_bytes() const {
    std::size_t bytes = 0;
    for (const Block& b : live_) bytes += b.usable;
    return bytes;
  }

  void check_accounting(const std::string& call) const {
    EXPECT_EQ(current_stats().allocated, allocated_at_start_ + live_bytes())
        << where(call) << ": pm_stats_get's allocated does not count exactly the live blocks";
    for (unsigned a : arenas_) {
      std::size_t blocks = 0, bytes = 0;
      for (const Block& b : live_) {
        if (b.arena == a) {
          ++blocks;
          bytes += b.usable;
        }
      }
      pm_arena_stats s{};
      EXPECT_EQ(Faulty::arena_stats_get(a, &s), 0) << where(call);
      EXPECT_EQ(s.blocks, blocks) << where(call) << ": arena " << a;
      EXPECT_EQ(s.allocated, bytes) << where(call) << ": arena " << a;
    }
  }

  std::mt19937_64 rng_;
  const Sizes sizes_;
  const std::size_t allocated_at_start_;  // pm_stats_get's allocated before the first step
  std::vector<Block> live_;
  std::vector<unsigned> arenas_;  // live explicit arenas
  std::uint64_t steps_ = 0;
  std::uint64_t refused_ = 0;
  unsigned char tag_ = 0;
};

}  // namespace pagemalloc::test
