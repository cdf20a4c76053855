// The OS layer an arena's run manager uses: Linux mmap (os_pal.h), plus a record in the
// address map of every chunk it reserves, so that free() can tell an arena's pointer from a
// foreign one (and find its arena), and a list of them, so that a reset can walk them all.
// Before a chunk is mapped, the huge blocks' manager beside the arena (if it has one) unmaps
// as many bytes of the free extents it caches (huge.h), so that a program whose memory moves
// from huge blocks to small ones does not keep both. Each chunk it maps gets the huge-page
// advice the thp option asks for (config.h), which under thp:auto depends on what the chunk is
// mapped for: the arena says, before each run it asks for, whether the run is a slab
// (ChunkUse).
#pragma once

#include <cstddef>
#include <span>

#include "address_map.h"
#include "chunk_list.h"
#include "config.h"
#include "huge.h"
#include "os_pal.h"

namespace pagemalloc {

// What the run that makes an arena map a chunk is for: slabs fill a chunk densely; a large run
// may be touched at one byte in a thousand.
enum class ChunkUse : unsigned char { Slabs, LargeRuns };

class ChunkPal {
 public:
  constexpr ChunkPal(const void* arena, HugeManager* huge) : arena_(arena), huge_(huge) {}

  // Requires: bytes == align == kChunkSize (the run managers reserve whole chunks only).
  void* reserve(std::size_t bytes, std::size_t align) {
    if (huge_ != nullptr) huge_->give_back(bytes);
    void* p = os_.reserve(bytes, align);
    if (p == nullptr) return nullptr;
    advise_huge_pages(p, bytes, chunks_.all().size());
    if (!chunks_.add(static_cast<std::byte*>(p))) {
      os_.release(p, bytes);
      return nullptr;
    }
    if (!address_map().set(p, AddressMap::tag(arena_, AddressMap::kArenaChunk))) {
      chunks_.remove(static_cast<std::byte*>(p));
      os_.release(p, bytes);
      return nullptr;
    }
    return p;
  }
  void release(void* p, std::size_t bytes) {
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

  // Every chunk reserved and not yet released.
  [[nodiscard]] std::span<std::byte* const> chunks() const { return chunks_.all(); }

 private:
  // The thp option (config.h): a chunk is one huge page's worth, aligned to it. An arena's
  // first chunk never gets MADV_HUGEPAGE: a thread that allocates a little from an arena of
  // its own does not make a whole chunk resident. Under auto, neither do its first
  // kSmallPageChunks: a heap that stays within them (a small program) gains little from huge
  // pages, and would pay for the unused part of its newest chunk.
  static constexpr std::size_t kSmallPageChunks = 4;
  void advise_huge_pages(void* p, std::size_t bytes, std::size_t chunks_before) const {
    switch (options().thp.load(std::memory_order_relaxed)) {
      case HugePages::Auto:
        if (chunks_before >= kSmallPageChunks && use_ == ChunkUse::Slabs)
          return LinuxPal::prefer_huge_pages(p, bytes);
        return LinuxPal::avoid_huge_pages(p, bytes);
      case HugePages::Always:
        if (chunks_before != 0) LinuxPal::prefer_huge_pages(p, bytes);
        return;
      case HugePages::Never: return LinuxPal::avoid_huge_pages(p, bytes);
      case HugePages::Default: return;
    }
  }

  const void* arena_;
  HugeManager* huge_;  // may be nullptr
  ChunkUse use_ = ChunkUse::Slabs;
  OsPal os_;
  ChunkList chunks_;
};
static_assert(Pal<ChunkPal>);

}  // namespace pagemalloc
