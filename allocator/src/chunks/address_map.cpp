// The address map's leaves are mapped on demand; two threads racing to map the same leaf
// keep the first and unmap the other. An entry that named an arena chunk and changes is
// counted (g_ownership_changes).
#include "chunks/address_map.h"

#include <sys/mman.h>

namespace pagemalloc {

bool AddressMap::set(const void* address, std::uintptr_t value) {
  auto key = reinterpret_cast<std::uintptr_t>(address) >> kLgChunkSize;
  if ((key >> (kRootBits + kLeafBits)) != 0) return false;
  auto& slot = root_[key >> kLeafBits];
  Leaf* leaf = slot.load(std::memory_order_acquire);
  if (leaf == nullptr) {
    void* mem = ::mmap(nullptr, sizeof(Leaf), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) return false;
    auto* fresh = static_cast<Leaf*>(mem);
    if (slot.compare_exchange_strong(leaf, fresh, std::memory_order_acq_rel)) {
      leaf = fresh;
    } else {
      ::munmap(mem, sizeof(Leaf));
    }
  }
  // A plain load and store, not an exchange (a locked instruction on every huge block's
  // malloc and free): only the entry's owner writes it. The count moves after the store, so
  // that a cache that reads the new count reads the new entry too.
  auto& entry = leaf->entries[key & (kLeafSize - 1)];
  const std::uintptr_t old = entry.load(std::memory_order_relaxed);
  entry.store(value, std::memory_order_release);
  if (tag_of(old) == kArenaChunk && old != value)
    g_ownership_changes.fetch_add(1, std::memory_order_acq_rel);
  return true;
}

}  // namespace pagemalloc
