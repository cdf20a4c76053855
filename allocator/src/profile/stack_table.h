// The heap profiler's call stacks, each kept once (a hash of its return addresses finds it),
// with the counts of the samples taken at it: live (sampled blocks not yet freed) and in all
// (every sample since the start). Records are carved from blocks mapped from the OS, at most
// kMaxBytes in all: past that, a stack not seen before counts in the table's one record of no
// frames, and the stacks dropped so are counted. Not thread-safe: the profiler's lock guards it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "profile/backtrace.h"
#include "profile/mapped_table.h"

namespace pagemalloc {

struct StackRecord {
  std::uint64_t hash = 0;
  std::uint32_t depth = 0;
  std::uint64_t live_count = 0, live_bytes = 0;
  std::uint64_t total_count = 0, total_bytes = 0;
  std::uintptr_t pcs[1];  // depth of them (the record is allocated with room for all)
};

class StackTable {
 public:
  static constexpr std::size_t kMaxBytes = std::size_t{64} << 20;

  // The record of this stack, made if new; nullptr only when the OS refuses the first block.
  StackRecord* find_or_add(const std::uintptr_t* pcs, unsigned depth);
  // Calls visit(const StackRecord&) for every stack, the one of no frames too.
  template <class Visit>
  void for_each(Visit visit) const {
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i] != nullptr) visit(*slots_[i]);
  }
  [[nodiscard]] std::size_t stacks() const { return used_; }
  [[nodiscard]] std::uint64_t dropped() const { return dropped_; }
  [[nodiscard]] std::size_t mapped_bytes() const { return slots_.mapped_bytes() + block_bytes_; }

 private:
  static constexpr std::size_t kBlockBytes = std::size_t{1} << 20;
  static std::uint64_t hash_of(const std::uintptr_t* pcs, unsigned depth);
  StackRecord* carve(const std::uintptr_t* pcs, unsigned depth, std::uint64_t hash);
  bool grow();
  void insert(StackRecord* record);

  MappedTable<StackRecord*> slots_;  // open addressing, linear probing; half full at most
  std::size_t used_ = 0;
  std::byte* cursor_ = nullptr;  // the block records are carved from
  std::byte* end_ = nullptr;
  std::size_t block_bytes_ = 0;
  StackRecord* no_frames_ = nullptr;  // where stacks go once kMaxBytes is reached
  std::uint64_t dropped_ = 0;
};

}  // namespace pagemalloc
