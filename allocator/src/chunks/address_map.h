// The address map: for every chunk-sized granule of the address space (2 MiB, or 1 MiB in a
// design with smaller chunks: kLgChunkSize), who owns it.
//
// An entry is 0 (not pagemalloc's), an arena chunk (tagged pointer to its arena), a bump
// arena's chunk (tagged pointer to its BumpSpace, bump_space.h) or the first or last granule
// of a huge extent (tagged pointer to its record). A two-level radix tree over
// the 48-bit address space: the root is static, leaves (128 KiB, one per 32 GiB) are mapped
// on first use and never freed. Reads take no lock.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "pagemap/pages.h"

namespace pagemalloc {

class AddressMap {
 public:
  enum Tag : std::uintptr_t { kArenaChunk = 1, kHuge = 2, kBumpChunk = 3 };
  static constexpr std::uintptr_t kTagMask = 3;

  constexpr AddressMap() = default;

  [[nodiscard]] std::uintptr_t get(const void* address) const {
    auto key = reinterpret_cast<std::uintptr_t>(address) >> kLgChunkSize;
    if ((key >> (kRootBits + kLeafBits)) != 0) return 0;
    Leaf* leaf = root_[key >> kLeafBits].load(std::memory_order_acquire);
    if (leaf == nullptr) return 0;
    return leaf->entries[key & (kLeafSize - 1)].load(std::memory_order_acquire);
  }

  // False when the leaf could not be mapped.
  [[gnu::hot]] bool set(const void* address, std::uintptr_t value);

  static std::uintptr_t tag(const void* owner, Tag t) {
    return reinterpret_cast<std::uintptr_t>(owner) | t;
  }
  static Tag tag_of(std::uintptr_t v) { return Tag(v & kTagMask); }
  template <class T>
  static T* owner_of(std::uintptr_t v) {
    return reinterpret_cast<T*>(v & ~kTagMask);
  }

 private:
  static constexpr unsigned kRootBits = 13;
  static constexpr unsigned kLeafBits = 48 - kLgChunkSize - kRootBits;
  static constexpr std::size_t kLeafSize = std::size_t{1} << kLeafBits;
  struct Leaf {
    std::atomic<std::uintptr_t> entries[kLeafSize];
  };

  std::atomic<Leaf*> root_[std::size_t{1} << kRootBits] = {};
};

// Counts every change to an entry that named an arena chunk (the chunk released, or tagged
// anew) and every change of the checks option (set_checks, config.h), in every Config's map:
// a thread cache that found a chunk to be its arena's trusts that while the count stays the
// same (ThreadCache::owns_chunk). Huge extents come and go without counting: no cache
// remembers them. Hidden: free reads it with one load, not through the global offset table.
[[gnu::visibility("hidden")]] inline constinit std::atomic<std::uint64_t> g_ownership_changes{0};

// The process's one address map.
// One map per Config of the process (allocator.h): each heap knows its own chunks only.
template <class Config>
inline constinit AddressMap g_address_map;

}  // namespace pagemalloc
