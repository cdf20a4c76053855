// The heap profiler's live samples: each sampled block's address, the stack it was allocated
// at and the bytes it counts for, found by address when the block is freed. Open addressing
// with linear probing, at most half full, grown by mapping a table twice the size; a removal
// shifts the entries after it back (no tombstones). Not thread-safe: the profiler's lock
// guards it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "profile/mapped_table.h"
#include "profile/stack_table.h"

namespace pagemalloc {

struct LiveSample {
  std::uintptr_t address = 0;  // 0: an empty slot
  StackRecord* stack = nullptr;
  std::uint64_t bytes = 0;
};

class SampleTable {
 public:
  // Adds the sample (replacing one at the same address, which is returned in `replaced`
  // with found set); false when the table cannot grow.
  bool add(const LiveSample& sample, LiveSample& replaced, bool& found);
  // Removes the sample of this address into `out`; false if there is none.
  bool remove(std::uintptr_t address, LiveSample& out);
  [[nodiscard]] bool contains(std::uintptr_t address) const;
  // Removes every sample for which match(const LiveSample&) holds, calling removed(sample)
  // for each. (A removal shifts later entries back, into slots not yet looked at or into the
  // slot just emptied, which is looked at again; none moves from ahead to behind the scan.)
  template <class Match, class Removed>
  void remove_if(Match match, Removed removed) {
    for (std::size_t i = 0; i < slots_.size() && used_ != 0; ++i) {
      while (slots_[i].address != 0 && match(slots_[i])) {
        LiveSample gone{};
        remove(slots_[i].address, gone);
        removed(gone);
      }
    }
  }
  template <class Visit>
  void for_each(Visit visit) const {
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].address != 0) visit(slots_[i]);
  }
  // How many samples are live.
  [[nodiscard]] std::size_t size() const { return used_; }
  [[nodiscard]] std::size_t mapped_bytes() const { return slots_.mapped_bytes(); }

 private:
  static std::size_t home_of(std::uintptr_t address, std::size_t mask) {
    return std::size_t((address >> 4) * 0x9e3779b97f4a7c15u >> 20) & mask;
  }
  bool grow();
  void place(const LiveSample& sample);

  MappedTable<LiveSample> slots_;
  std::size_t used_ = 0;
};

}  // namespace pagemalloc
