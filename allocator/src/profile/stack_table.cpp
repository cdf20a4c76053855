// StackTable (stack_table.h).
#include "profile/stack_table.h"

#include <sys/mman.h>

#include <cstring>

namespace pagemalloc {

std::uint64_t StackTable::hash_of(const std::uintptr_t* pcs, unsigned depth) {
  std::uint64_t h = 0xcbf29ce484222325u ^ depth;
  for (unsigned i = 0; i < depth; ++i) {
    h ^= pcs[i];
    h *= 0x100000001b3u;
    h ^= h >> 29;
  }
  return h;
}

StackRecord* StackTable::carve(const std::uintptr_t* pcs, unsigned depth, std::uint64_t hash) {
  const std::size_t bytes =
      (offsetof(StackRecord, pcs) + sizeof(std::uintptr_t) * (depth == 0 ? 1 : depth) + 15) &
      ~std::size_t{15};
  if (std::size_t(end_ - cursor_) < bytes) {
    if (block_bytes_ + kBlockBytes > kMaxBytes) return nullptr;
    void* block =
        ::mmap(nullptr, kBlockBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED) return nullptr;
    cursor_ = static_cast<std::byte*>(block);
    end_ = cursor_ + kBlockBytes;
    block_bytes_ += kBlockBytes;
  }
  auto* record = reinterpret_cast<StackRecord*>(cursor_);
  cursor_ += bytes;
  record->hash = hash;
  record->depth = depth;
  if (depth != 0) std::memcpy(record->pcs, pcs, sizeof(std::uintptr_t) * depth);
  return record;
}

bool StackTable::grow() {
  MappedTable<StackRecord*> bigger;
  if (!bigger.map(slots_.size() == 0 ? 4096 : slots_.size() * 2)) return false;
  slots_.swap(bigger);
  for (std::size_t i = 0; i < bigger.size(); ++i)
    if (bigger[i] != nullptr) insert(bigger[i]);
  bigger.unmap();
  return true;
}

void StackTable::insert(StackRecord* record) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = record->hash & mask;
  while (slots_[i] != nullptr) i = (i + 1) & mask;
  slots_[i] = record;
}

StackRecord* StackTable::find_or_add(const std::uintptr_t* pcs, unsigned depth) {
  const std::uint64_t hash = hash_of(pcs, depth);
  if (slots_.size() != 0) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash & mask; slots_[i] != nullptr; i = (i + 1) & mask) {
      StackRecord* r = slots_[i];
      // (no frames: nothing to compare, and pcs may be null)
      if (r->hash == hash && r->depth == depth &&
          (depth == 0 || std::memcmp(r->pcs, pcs, sizeof(std::uintptr_t) * depth) == 0))
        return r;
    }
  }
  if ((used_ + 1) * 2 > slots_.size() && !grow()) return no_frames_;
  StackRecord* record = carve(pcs, depth, hash);
  if (record == nullptr) {  // past kMaxBytes, or no memory: the stack of no frames
    ++dropped_;
    if (no_frames_ == nullptr && depth != 0) {
      no_frames_ = find_or_add(pcs, 0);  // (its few bytes come from the last block's end)
    }
    return no_frames_;
  }
  if (depth == 0) no_frames_ = record;
  insert(record);
  ++used_;
  return record;
}

}  // namespace pagemalloc
