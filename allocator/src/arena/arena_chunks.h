// The OS layer an arena's run manager uses: the Config's (Linux mmap), plus a record in the
// address map of every chunk it reserves, so that free() can tell an arena's pointer from a
// foreign one (and find its arena), and a list of them, so that a reset can walk them all.
// Before a chunk is mapped, the huge blocks' manager beside the arena (if it has one) hands
// over a granule of the free extents it caches, pages resident as they are (huge.h,
// take_used_chunk), so that a program whose memory moves from huge blocks to small ones
// neither keeps both nor faults the pages in again. Each chunk it maps or takes gets the huge-page
// advice the thp option asks for (config.h), which under thp:auto depends on how densely the
// chunk will be used: the arena says, before each run it asks for, whether the run is a slab
// or a large run among as many pages of slabs (dense), or a large run that may be touched at
// one byte in a thousand (ChunkUse), and, for a chunk it advises MADV_HUGEPAGE, on what such
// chunks' faults have cost so far (huge_page_budget.h). In a design that validates frees
// (kValidateFree), it also keeps the chunks in an address tree that every free searches
// (chunk_tree.h).
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>

#include "build_config.h"
#include "chunks/address_map.h"
#include "chunks/chunk_list.h"
#include "chunks/chunk_tree.h"
#include "design/allocator.h"
#include "huge/huge.h"
#include "os/clock.h"
#include "os/huge_page_budget.h"
#include "support/options.h"

namespace pagemalloc {

// How densely the run that makes an arena map a chunk (and what follows it there) will be
// touched. Slabs fill a chunk densely. A large run may be touched at one byte in a thousand,
// unless its arena's slabs hold at least as many pages as its large runs: then whatever part
// of the large runs stays untouched at most doubles what the arena makes resident, and the
// chunk, most of which small blocks will fill, is taken as dense (a heap of strings and tables
// whose arrays grow by realloc, as an interpreter's).
enum class ChunkUse : unsigned char { Dense, MaybeSparse };

template <class Config>
class Allocator<Config>::ArenaChunks {
 public:
  constexpr ArenaChunks(const void* arena, HugeManager* huge) : arena_(arena), huge_(huge) {}

  // Requires: bytes == align == kChunkSize (the run managers reserve whole chunks only).
  void* reserve(std::size_t bytes, std::size_t align) {
    return adopt(os_.reserve(bytes, align), bytes, /*fresh=*/true);
  }
  // A free granule of the huge blocks' manager beside the arena, its pages as they are
  // (ReusesChunks, pal.h); nullptr if it caches none.
  void* take_used_chunk() {
    return huge_ == nullptr ? nullptr : adopt(huge_->take_chunk(), kChunkSize, /*fresh=*/false);
  }
  void release(void* p, std::size_t bytes) {
    validated_.erase(static_cast<std::byte*>(p));
    address_map().set(p, 0);
    chunks_.remove(static_cast<std::byte*>(p));
    os_.release(p, bytes);
  }
  bool commit(void* p, std::size_t bytes) { return os_.commit(p, bytes); }
  void decommit(void* p, std::size_t bytes) { os_.decommit(p, bytes); }
  bool grow(void* p, std::size_t old_bytes, std::size_t new_bytes) {
    return os_.grow(p, old_bytes, new_bytes);
  }

  // The run the arena asks for next (and any chunk mapped for it) is for `use`.
  void next_run_for(ChunkUse use) { use_ = use; }
  // Under auto, every chunk from now on is advised as one that may be used sparsely.
  void avoid_huge_pages() { huge_pages_under_auto_ = false; }

  // Every chunk reserved and not yet released.
  [[nodiscard]] std::span<std::byte* const> chunks() const { return chunks_.all(); }

  // Where frees are validated: the tree of the chunks (chunk_tree.h); an empty stand-in in
  // every other design.
  using ValidatedChunks = std::conditional_t<Config::kValidateFree, ChunkTree, NoChunkTree>;
  ValidatedChunks& validated_chunks() { return validated_; }

 private:
  // The thp option (config.h): a chunk of 2 MiB is one huge page's worth, aligned to it (a
  // chunk of 1 MiB is half of one, which it shares with its neighbour when both have the
  // same advice). An arena's first chunk never gets MADV_HUGEPAGE: a thread that allocates
  // a little from an arena of its own does not make a whole chunk resident. Under auto, neither do
  // its first kSmallPageChunks: a heap that stays within them (a small program) gains little from
  // huge pages, and would pay for the unused part of its newest chunk. Nor does a chunk that may be
  // used sparsely (ChunkUse), nor any chunk of an arena told to avoid them (the automatic
  // arenas after the first: automatic_arenas.h). Nor, once what fresh huge pages cost exceeds
  // its budget (huge_page_budget.h), does any chunk until the budget allows one again.
  static constexpr std::size_t kSmallPageChunks = 4;
  void advise_huge_pages(void* p, std::size_t bytes, std::size_t chunks_before, bool fresh) const {
    switch (options().thp.load(std::memory_order_relaxed)) {
      case HugePages::Auto:
        if (huge_pages_under_auto_ && chunks_before >= kSmallPageChunks && use_ == ChunkUse::Dense)
          return advise_within_budget(p, bytes, fresh);
        return LinuxPal::avoid_huge_pages(p, bytes);
      case HugePages::Always:
        if (chunks_before != 0) LinuxPal::prefer_huge_pages(p, bytes);
        return;
      case HugePages::Never: return LinuxPal::avoid_huge_pages(p, bytes);
      case HugePages::Default: return;
    }
  }

  // MADV_HUGEPAGE if the budget allows it, and a fresh chunk's first touch timed and charged:
  // the run manager writes the chunk's header there next, so the fault is one it would take
  // anyway (a zero written over the mapping's zero changes nothing). A used chunk's pages are
  // resident already: nothing to time.
  static void advise_within_budget(void* p, std::size_t bytes, bool fresh) {
    HugePageBudget& budget = g_huge_page_budget;
    if (!budget.allows(now_ns(), options().thp_budget.load(std::memory_order_relaxed))) {
      budget.count_refusal();
      return LinuxPal::avoid_huge_pages(p, bytes);
    }
    LinuxPal::prefer_huge_pages(p, bytes);
    if (!fresh) return;
    const std::uint64_t before = now_ns();
    *static_cast<volatile std::byte*>(p) = std::byte{0};
    budget.charge(now_ns() - before);
  }

  // Advises and records a chunk just mapped (fresh) or taken used (unmapped again if it cannot
  // be recorded).
  [[gnu::hot]] void* adopt(void* p, std::size_t bytes, bool fresh) {
    if (p == nullptr) return nullptr;
    advise_huge_pages(p, bytes, chunks_.all().size(), fresh);
    if (!chunks_.add(static_cast<std::byte*>(p))) {
      os_.release(p, bytes);
      return nullptr;
    }
    if (!address_map().set(p, AddressMap::tag(arena_, AddressMap::kArenaChunk))) {
      chunks_.remove(static_cast<std::byte*>(p));
      os_.release(p, bytes);
      return nullptr;
    }
    if (!validated_.insert(static_cast<std::byte*>(p))) {
      address_map().set(p, 0);
      chunks_.remove(static_cast<std::byte*>(p));
      os_.release(p, bytes);
      return nullptr;
    }
    return p;
  }

  const void* arena_;
  HugeManager* huge_;  // may be nullptr
  ChunkUse use_ = ChunkUse::Dense;
  bool huge_pages_under_auto_ = true;
  OsPal os_;
  ChunkList chunks_;
  [[no_unique_address]] ValidatedChunks validated_;
};

// The build's.
using ArenaChunks = Allocator<BuildConfig>::ArenaChunks;
static_assert(ReusesChunks<ArenaChunks>);

}  // namespace pagemalloc
