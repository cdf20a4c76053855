// Stress test of the pm_ API under many threads; tools/test.sh also runs it under
// ThreadSanitizer (ctest label "threads").
//
// Terms:
//   slot     one of kSlotCount std::atomic<void*> shared by every thread. A thread publishes a
//            block by exchanging it into a random slot, and takes ownership of whatever the
//            exchange returns: most of the time a block that another thread allocated and
//            wrote, which it then checks and frees (a cross-thread free) or reallocates.
//   owner    the thread that last wrote a block. The block's first word is a header holding
//            its requested size, its owner and how it was allocated (with a check value); the
//            rest holds a pattern derived from (size, owner) and the offset, so a block that a
//            thread finds in a slot can be checked without any other record.
//   wave     kThreadsPerWave threads created together and joined together. Several waves run
//            one after the other, so thread caches are created and returned many times.
//
// Each thread allocates with pm_malloc, pm_calloc, pm_mallocx(PM_ALIGN(64) | PM_ZERO) and
// pm_realloc; sizes are mostly small (8 B .. 16 KiB), some large (16 KiB .. 1 MiB), rarely
// huge (above 2 MiB). Zeroed blocks are checked zero before they are written; a reallocated
// block must keep the old size's pattern up to the smaller size. Frees alternate between
// pm_free, pm_dallocx and pm_sdallocx. Blocks up to 16 KiB are written and checked entirely;
// larger ones at their first and last 4 KiB and at the first word of every 4 KiB in between
// (large blocks are page-aligned, so two overlapping ones share those words). Meanwhile some
// threads call pm_purge, and all read the statistics now and then (allocated <= active <=
// mapped must hold in every snapshot).
//
// After each wave the main thread checks every block left in the slots, and that the
// statistics' `allocated` is exactly its starting value plus the usable sizes of those blocks:
// a thread's cache goes back to the arena when the thread exits, so nothing else may count.
// It then frees half of them; the rest are freed by the next wave's threads, after the threads
// that allocated them have gone. After each wave pm_purge must leave no dirty page, and mapped
// memory must not run away from what it was after the first wave. At the end, with nothing
// live, `allocated` is back to its start, and only what the arena keeps on purpose stays
// mapped: each size class's current slab (kept even when empty) and the chunk it pins.
//
// Scale: PAGEMALLOC_STRESS_SCALE (a positive number, default 1) multiplies the operations per
// thread; the default count is smaller under sanitizers. The seed is PAGEMALLOC_TEST_SEED when
// set, otherwise a fixed default; a failure prints it. Threads interleave differently on every
// run, but each thread's sequence of sizes and choices follows from the seed.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <pagemalloc/pagemalloc.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "design/size_classes.h"
#include "failure_log.h"

namespace {

using pagemalloc::test::FailureLog;

using pagemalloc::kChunkSize;
using pagemalloc::kNumClasses;
using pagemalloc::kPageSize;
using pagemalloc::kSizeClasses;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderSanitizer = true;
#else
constexpr bool kUnderSanitizer = false;
#endif

constexpr unsigned kThreadsPerWave = 32;
constexpr unsigned kWaves = 4;
constexpr unsigned kOwnerBits = 14;  // thread ids in a block's header
static_assert(kWaves * kThreadsPerWave <= 1u << kOwnerBits);
constexpr std::size_t kSlotCount = 512;
// Allocations per thread and wave at scale 1.
constexpr unsigned kOperationsPerThread = kUnderSanitizer ? 1000 : 6000;

// While the other threads allocate: one thread in kPurgingThreadPeriod calls pm_purge halfway
// through its work, and every thread reads the statistics once in kStatisticsPeriod
// operations (at random).
constexpr unsigned kPurgingThreadPeriod = 8;
constexpr unsigned kStatisticsPeriod = 500;
// A thread yields the CPU every kYieldPeriod operations, so that threads interleave even on
// two cores and most blocks are freed by another thread than the one that wrote them.
constexpr unsigned kYieldPeriod = 32;

constexpr std::size_t kMaxSmall = pagemalloc::kMaxSmallSize;
constexpr std::size_t kMaxLarge = kChunkSize / 2;       // 1 MiB, or 512 KiB with 1 MiB chunks
constexpr std::size_t kMaxHuge = kChunkSize + 4 * MiB;  // huge blocks start above kChunkSize
static_assert(kMaxLarge < kChunkSize);
// Small blocks are checked whole; a larger one (at least 16 KiB: past a page, also where the
// small sizes end at 2 KiB) at its ends and every kSampleStride.
constexpr std::size_t kFullyCheckedBytes = std::max<std::size_t>(kMaxSmall, 16 * 1024);
constexpr std::size_t kSampleStride = kPageSize;
constexpr std::size_t kZeroAlignment = 64;

// With no block live and everything purged, what may stay: each size class's current slab
// (which the arena keeps even when empty), each pinning its chunk, and the metadata pools.
constexpr std::size_t kIdleActiveBound = [] {
  std::size_t pages = 0;
  for (const auto& size_class : kSizeClasses) pages += size_class.slab_pages;
  return pages * kPageSize;
}();
constexpr std::size_t kMetadataBound = 8 * MiB;
constexpr std::size_t kIdleMappedBound = kNumClasses * kChunkSize + kMetadataBound;
// Mapped memory after the pm_purge that ends each wave, with half the blocks still live, may
// vary with fragmentation, but not grow past this factor of the first wave's: a wave
// allocates gigabytes, so freed memory that never came back would show at once.
// Where slabs end at 2 KiB (the 2008 designs, presets.h), most blocks are runs: the live half
// pins more chunks (2.1-2.2 times the first wave's mapped memory seen), still far from what
// a wave's gigabytes would leave if freed memory never came back.
constexpr std::size_t kMappedGrowthFactor = pagemalloc::kMaxSmallSize < 16384 ? 3 : 2;

std::uint64_t BaseSeed() {
  if (const char* text = std::getenv("PAGEMALLOC_TEST_SEED")) {
    return std::strtoull(text, nullptr, 0);
  }
  return 0x57e55c0ffee;
}

double OperationScale() {
  if (const char* text = std::getenv("PAGEMALLOC_STRESS_SCALE")) {
    const double scale = std::strtod(text, nullptr);
    if (scale > 0) return scale;
  }
  return 1.0;
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9;
  x ^= x >> 27;
  x *= 0x94d049bb133111eb;
  return x ^ (x >> 31);
}

// --- The block header: the first word of every block -----------------------------------------

enum class Origin : std::uint8_t { Malloc, Calloc, AlignedZero, Realloc };

constexpr const char* name_of(Origin origin) {
  switch (origin) {
    case Origin::Malloc: return "pm_malloc";
    case Origin::Calloc: return "pm_calloc";
    case Origin::AlignedZero: return "pm_mallocx(PM_ALIGN(64) | PM_ZERO)";
    case Origin::Realloc: return "pm_realloc";
  }
  return "?";
}

struct BlockHeader {
  std::size_t size;     // bytes requested, >= 8
  std::uint32_t owner;  // the thread that wrote the block, < 2^kOwnerBits
  Origin origin;
};

// Bits: size 0..35, owner 36..49, origin 50..51, check 52..63.
constexpr unsigned kOwnerShift = 36;
constexpr unsigned kOriginShift = kOwnerShift + kOwnerBits;
constexpr unsigned kCheckShift = kOriginShift + 2;
static_assert(kMaxHuge < std::uint64_t{1} << kOwnerShift);
constexpr std::uint64_t kPayloadMask = (std::uint64_t{1} << kCheckShift) - 1;

std::uint64_t check_bits(std::uint64_t payload) { return mix(payload) >> kCheckShift; }

std::uint64_t encode(const BlockHeader& h) {
  const std::uint64_t payload = std::uint64_t(h.size) | std::uint64_t(h.owner) << kOwnerShift |
                                std::uint64_t(h.origin) << kOriginShift;
  return payload | check_bits(payload) << kCheckShift;
}

std::optional<BlockHeader> decode(std::uint64_t word) {
  const std::uint64_t payload = word & kPayloadMask;
  if (word >> kCheckShift != check_bits(payload)) return std::nullopt;
  return BlockHeader{std::size_t(payload & ((std::uint64_t{1} << kOwnerShift) - 1)),
                     std::uint32_t((payload >> kOwnerShift) & ((1u << kOwnerBits) - 1)),
                     Origin((payload >> kOriginShift) & 3)};
}

// --- The pattern -------------------------------------------------------------------------------

// The word at `offset` (a multiple of 8, > 0) of a block of `size` bytes written by `owner`;
// never zero, so that it cannot pass for zeroed memory.
std::uint64_t pattern_word(std::size_t size, std::uint32_t owner, std::size_t offset) {
  return mix(size * 0x9E3779B97F4A7C15 ^ std::uint64_t(owner) << 40 ^ offset) | 1;
}

// Calls visit_word(offset) for every checked word after the header (offset > 0, a multiple of
// 8, offset + 8 <= size) and visit_byte(offset) for each byte of a partial last word.
template <class VisitWord, class VisitByte>
void for_each_checked_position(std::size_t size, VisitWord visit_word, VisitByte visit_byte) {
  const std::size_t words_end = size & ~std::size_t{7};
  if (size <= kFullyCheckedBytes) {
    for (std::size_t o = 8; o < words_end; o += 8) visit_word(o);
  } else {
    const std::size_t tail_start = (size - kSampleStride) & ~std::size_t{7};
    for (std::size_t o = 8; o < kSampleStride; o += 8) visit_word(o);
    for (std::size_t o = kSampleStride; o < tail_start; o += kSampleStride) visit_word(o);
    for (std::size_t o = tail_start; o < words_end; o += 8) visit_word(o);
  }
  for (std::size_t o = words_end; o < size; ++o) visit_byte(o);
}

std::uint64_t load_word(const std::byte* block, std::size_t offset) {
  std::uint64_t word;
  std::memcpy(&word, block + offset, sizeof word);
  return word;
}

void store_word(std::byte* block, std::size_t offset, std::uint64_t word) {
  std::memcpy(block + offset, &word, sizeof word);
}

std::byte pattern_byte(std::size_t size, std::uint32_t owner, std::size_t offset) {
  return std::byte(pattern_word(size, owner, offset) & 0xff);
}

void write_block(void* p, const BlockHeader& h) {
  auto* block = static_cast<std::byte*>(p);
  store_word(block, 0, encode(h));
  for_each_checked_position(
      h.size, [&](std::size_t o) { store_word(block, o, pattern_word(h.size, h.owner, o)); },
      [&](std::size_t o) { block[o] = pattern_byte(h.size, h.owner, o); });
}

constexpr std::size_t kIntact = SIZE_MAX;

// The first checked offset below `limit` where the block differs from h's pattern, or
// kIntact. The header is not checked here.
std::size_t first_pattern_mismatch(const void* p, const BlockHeader& h, std::size_t limit) {
  const auto* block = static_cast<const std::byte*>(p);
  std::size_t bad = kIntact;
  for_each_checked_position(
      h.size,
      [&](std::size_t o) {
        if (bad == kIntact && o + 8 <= limit &&
            load_word(block, o) != pattern_word(h.size, h.owner, o))
          bad = o;
      },
      [&](std::size_t o) {
        if (bad == kIntact && o < limit && block[o] != pattern_byte(h.size, h.owner, o)) bad = o;
      });
  return bad;
}

// The first checked offset of a block of `size` bytes that is not zero, or kIntact.
std::size_t first_nonzero(const void* p, std::size_t size) {
  const auto* block = static_cast<const std::byte*>(p);
  if (load_word(block, 0) != 0) return 0;
  std::size_t bad = kIntact;
  for_each_checked_position(
      size,
      [&](std::size_t o) {
        if (bad == kIntact && load_word(block, o) != 0) bad = o;
      },
      [&](std::size_t o) {
        if (bad == kIntact && block[o] != std::byte{0}) bad = o;
      });
  return bad;
}

// --- Shared state ------------------------------------------------------------------------------

using SharedSlots = std::array<std::atomic<void*>, kSlotCount>;

struct Tally {
  std::atomic<std::uint64_t> allocations{0};
  std::atomic<std::uint64_t> taken_from_other_threads{0};
  std::atomic<std::uint64_t> reallocations{0};
  std::atomic<std::uint64_t> huge_allocations{0};
  std::atomic<std::uint64_t> concurrent_purges{0};
};

// Checks a block taken from a slot: its header, usable size and pattern. The header, or
// nullopt (recorded as a failure) when the block is damaged and must not be freed.
std::optional<BlockHeader> checked_header(const void* p, FailureLog& failures,
                                          std::string_view where) {
  const std::uint64_t word = load_word(static_cast<const std::byte*>(p), 0);
  const std::optional<BlockHeader> h = decode(word);
  if (!h || h->size < 8 || h->size > kMaxHuge) {
    failures.record(fmt::format("{}: block {} has a damaged header {:#018x}", where, p, word));
    return std::nullopt;
  }
  const std::size_t usable = pm_malloc_usable_size(p);
  if (usable < h->size) {
    failures.record(
        fmt::format("{}: block {} of {} bytes (from {} by thread {}) reports usable size {}", where,
                    p, h->size, name_of(h->origin), h->owner, usable));
    return std::nullopt;
  }
  if (const std::size_t bad = first_pattern_mismatch(p, *h, h->size); bad != kIntact) {
    failures.record(
        fmt::format("{}: block {} of {} bytes (from {} by thread {}) changed at offset {}", where,
                    p, h->size, name_of(h->origin), h->owner, bad));
    return std::nullopt;
  }
  return h;
}

// --- One worker thread -------------------------------------------------------------------------

class Worker {
 public:
  Worker(std::uint32_t id, std::uint64_t seed, unsigned operations, SharedSlots& slots,
         FailureLog& failures, Tally& tally)
      : id_(id),
        where_(fmt::format("thread {}", id)),
        rng_(mix(seed ^ mix(id + 1))),
        operations_(operations),
        slots_(slots),
        failures_(failures),
        tally_(tally) {}

  void run(std::latch& start) {
    start.arrive_and_wait();
    for (unsigned i = 0; i < operations_; ++i) {
      if (i % kYieldPeriod == kYieldPeriod - 1) std::this_thread::yield();
      if (i == operations_ / 2 && id_ % kPurgingThreadPeriod == 0) {
        pm_purge();
        tally_.concurrent_purges.fetch_add(1, std::memory_order_relaxed);
      }
      if (rng_() % kStatisticsPeriod == 0) check_statistics();
      void* carried = allocate_fresh();
      // A block taken from a slot is freed, or reallocated and published once more.
      for (int hop = 0; carried != nullptr && hop < 2; ++hop) {
        void* taken = slots_[rng_() % kSlotCount].exchange(carried, std::memory_order_acq_rel);
        carried = nullptr;
        if (taken == nullptr) continue;
        const std::optional<BlockHeader> h = checked_header(taken, failures_, where());
        if (!h) continue;  // damaged: leave it alone
        if (h->owner != id_)
          tally_.taken_from_other_threads.fetch_add(1, std::memory_order_relaxed);
        if (hop == 0 && rng_() % 4 == 0) {
          carried = reallocate(taken, *h);
        } else {
          free_block(taken, *h);
        }
      }
    }
  }

 private:
  const std::string& where() const { return where_; }

  // A snapshot of the statistics taken while other threads allocate must still be ordered.
  void check_statistics() {
    pm_stats stats{};
    pm_stats_get(&stats);
    if (stats.allocated > stats.active || stats.active > stats.mapped)
      failures_.record(
          fmt::format("{}: statistics out of order: allocated {}, active {}, mapped {}", where(),
                      stats.allocated, stats.active, stats.mapped));
  }

  // Sizes: 90% small (log-uniform over 8 B .. 16 KiB), 9.5% large (16 KiB .. 1 MiB),
  // 0.5% huge (2 MiB .. 6 MiB).
  std::size_t random_size() {
    const unsigned kind = rng_() % 1000;
    if (kind < 5) return kChunkSize + 1 + rng_() % (kMaxHuge - kChunkSize);
    if (kind < 100) return log_uniform(kMaxSmall + 1, kMaxLarge);
    return log_uniform(8, kMaxSmall);
  }

  // A size whose highest bit is uniform over [lo, hi]'s, clamped into [lo, hi].
  std::size_t log_uniform(std::size_t lo, std::size_t hi) {
    const unsigned low_bit = unsigned(std::bit_width(lo)) - 1;
    const unsigned high_bit = unsigned(std::bit_width(hi)) - 1;
    const unsigned bit = low_bit + unsigned(rng_() % (high_bit - low_bit + 1));
    const std::size_t value = (std::size_t{1} << bit) + rng_() % (std::size_t{1} << bit);
    return std::clamp(value, lo, hi);
  }

  void* allocate_fresh() {
    const std::size_t size = random_size();
    const unsigned pick = rng_() % 10;
    const Origin origin = pick < 5   ? Origin::Malloc
                          : pick < 7 ? Origin::Calloc
                                     : Origin::AlignedZero;
    void* p = nullptr;
    switch (origin) {
      case Origin::Malloc: p = pm_malloc(size); break;
      case Origin::Calloc: p = size % 8 == 0 ? pm_calloc(size / 8, 8) : pm_calloc(1, size); break;
      case Origin::AlignedZero: p = pm_mallocx(size, PM_ALIGN(kZeroAlignment) | PM_ZERO); break;
      case Origin::Realloc: break;
    }
    tally_.allocations.fetch_add(1, std::memory_order_relaxed);
    if (size > kChunkSize) tally_.huge_allocations.fetch_add(1, std::memory_order_relaxed);
    if (p == nullptr) {
      failures_.record(
          fmt::format("{}: {} of {} bytes returned NULL", where(), name_of(origin), size));
      return nullptr;
    }
    if (origin == Origin::AlignedZero &&
        reinterpret_cast<std::uintptr_t>(p) % kZeroAlignment != 0) {
      failures_.record(fmt::format("{}: {} of {} bytes returned {}, not 64-byte aligned", where(),
                                   name_of(origin), size, p));
    }
    if (origin != Origin::Malloc) {
      if (const std::size_t bad = first_nonzero(p, size); bad != kIntact) {
        failures_.record(fmt::format("{}: {} of {} bytes returned {}, not zero at offset {}",
                                     where(), name_of(origin), size, p, bad));
      }
    }
    write_block(p, BlockHeader{size, id_, origin});
    return p;
  }

  // Reallocates a checked block to a random size; the old pattern must survive up to the
  // smaller size. Returns the block rewritten as this thread's, or nullptr.
  void* reallocate(void* old_block, const BlockHeader& old) {
    const std::size_t size = random_size();
    void* p = pm_realloc(old_block, size);
    tally_.reallocations.fetch_add(1, std::memory_order_relaxed);
    if (p == nullptr) {
      failures_.record(fmt::format("{}: pm_realloc({}, {}) of a block of {} bytes returned NULL",
                                   where(), old_block, size, old.size));
      return nullptr;
    }
    const std::size_t kept = std::min(old.size, size);
    if (load_word(static_cast<const std::byte*>(p), 0) != encode(old)) {
      failures_.record(fmt::format("{}: pm_realloc({}, {}) -> {} lost the header of the block",
                                   where(), old_block, size, p));
    } else if (const std::size_t bad = first_pattern_mismatch(p, old, kept); bad != kIntact) {
      failures_.record(
          fmt::format("{}: pm_realloc({}, {}) -> {} of a block of {} bytes (by thread "
                      "{}) lost its contents at offset {}",
                      where(), old_block, size, p, old.size, old.owner, bad));
    }
    write_block(p, BlockHeader{size, id_, Origin::Realloc});
    return p;
  }

  void free_block(void* p, const BlockHeader& h) {
    const int flags = h.origin == Origin::AlignedZero ? PM_ALIGN(kZeroAlignment) : 0;
    switch (rng_() % 3) {
      case 0: pm_free(p); break;
      case 1: pm_dallocx(p, flags); break;
      default: pm_sdallocx(p, h.size, flags); break;
    }
  }

  const std::uint32_t id_;
  const std::string where_;  // "thread <id>", for failure messages
  std::mt19937_64 rng_;
  const unsigned operations_;
  SharedSlots& slots_;
  FailureLog& failures_;
  Tally& tally_;
};

pm_stats current_stats() {
  pm_stats stats{};
  pm_stats_get(&stats);
  return stats;
}

// --- The test ----------------------------------------------------------------------------------

TEST(Stress, ThreadWavesShareBlocksAndReturnTheirCaches) {
  const std::uint64_t seed = BaseSeed();
  SCOPED_TRACE(fmt::format("seed {:#x} (set PAGEMALLOC_TEST_SEED to replay)", seed));
  const unsigned operations = std::max(1u, unsigned(kOperationsPerThread * OperationScale()));

  const pm_stats start = current_stats();
  SharedSlots slots{};
  FailureLog failures;
  Tally tally;
  std::mt19937_64 main_rng(mix(seed));
  std::size_t mapped_after_first_wave = 0;

  for (unsigned wave = 0; wave < kWaves; ++wave) {
    SCOPED_TRACE(fmt::format("wave {}", wave));
    std::vector<std::thread> threads;
    threads.reserve(kThreadsPerWave);
    std::latch all_started(kThreadsPerWave);  // every thread of the wave starts at once
    for (unsigned t = 0; t < kThreadsPerWave; ++t) {
      const auto id = std::uint32_t(wave * kThreadsPerWave + t);
      threads.emplace_back(
          [&, id] { Worker(id, seed, operations, slots, failures, tally).run(all_started); });
    }
    for (std::thread& thread : threads) thread.join();
    ASSERT_EQ(failures.count(), 0) << "first failure: " << failures.first();

    // Every block left in the slots is intact, and `allocated` counts exactly these blocks.
    std::size_t live_usable = 0;
    for (std::atomic<void*>& slot : slots) {
      void* p = slot.load(std::memory_order_acquire);
      if (p == nullptr) continue;
      ASSERT_TRUE(checked_header(p, failures, "main thread")) << failures.first();
      live_usable += pm_malloc_usable_size(p);
    }
    EXPECT_EQ(current_stats().allocated, start.allocated + live_usable)
        << "`allocated` is not the usable bytes of the live blocks (thread caches not returned "
           "at exit?)";

    // Half of the blocks outlive their threads and are freed by the next wave; after the
    // last wave, all go.
    for (std::atomic<void*>& slot : slots) {
      void* p = slot.load(std::memory_order_acquire);
      if (p == nullptr || (wave + 1 < kWaves && main_rng() % 2 == 0)) continue;
      pm_free(p);
      slot.store(nullptr, std::memory_order_release);
    }
    pm_purge();
    const pm_stats purged = current_stats();
    EXPECT_EQ(purged.dirty, 0u) << "pm_purge left dirty pages";
    if (wave == 0) mapped_after_first_wave = purged.mapped;
    EXPECT_LE(purged.mapped, kMappedGrowthFactor * mapped_after_first_wave)
        << "mapped memory grew across waves (" << mapped_after_first_wave
        << " bytes after the first)";
  }

  const pm_stats drained = current_stats();
  EXPECT_EQ(drained.allocated, start.allocated) << "allocated bytes did not come back";
  pm_purge();
  const pm_stats purged = current_stats();
  EXPECT_EQ(purged.allocated, start.allocated);
  EXPECT_EQ(purged.dirty, 0u) << "pm_purge left dirty pages";
  EXPECT_LE(purged.active, kIdleActiveBound) << "pages stay active with no block live";
  EXPECT_LE(purged.mapped, kIdleMappedBound)
      << "chunks stay mapped with no block live (at most one per size class may)";

  EXPECT_GT(tally.taken_from_other_threads.load(), tally.allocations.load() / 4)
      << "too few blocks changed threads for the test to mean anything";
  fmt::print(
      "{} allocations ({} huge), {} reallocations, {} blocks taken from another thread, "
      "{} purges among them; at the end, mapped {} KiB, active {} KiB\n",
      tally.allocations.load(), tally.huge_allocations.load(), tally.reallocations.load(),
      tally.taken_from_other_threads.load(), tally.concurrent_purges.load(), purged.mapped / KiB,
      purged.active / KiB);
}

}  // namespace
