// An arena's stash of freed medium blocks (design/medium_classes.h): a LIFO per medium class,
// where the blocks that threads' medium bins give back (threads/medium_bins.h) wait for the
// next bin that runs dry (other large frees go to the large-run cache as before), so that a miss in
// a thread's bins costs the arena's lock and a pop instead of a split of a free run, and a bin's
// overflow a push instead of a coalesce (as gperftools' central free lists serve its thread
// caches). Like the large-run cache (large_run_cache.h), a stashed block keeps its pages active and
// its first page entry Cached (a second free of it is reported), and the stash is given back to the
// run manager at each decay purge, before a block grows in place, and at a reset.
//
// Bounds: kSlots blocks per class and kMaxBytes in all; a block that would pass either goes to
// the run manager.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace pagemalloc {

template <class MediumClasses>
class MediumStash {
 public:
  static constexpr unsigned kClasses = MediumClasses::kCount;
  static constexpr unsigned kSlots = 32;
  static constexpr std::size_t kMaxBytes = std::size_t{8} << 20;

  // A stashed block of class c, or nullptr.
  void* take(unsigned c) {
    Stack& s = stacks_[c];
    if (s.count == 0) return nullptr;
    bytes_ -= MediumClasses::bytes(c);
    pages_ -= MediumClasses::kPages[c];
    --blocks_;
    return s.slots[--s.count];
  }

  // Stashes block (of class c) unless that passes a bound; false then.
  bool put(unsigned c, void* block) {
    Stack& s = stacks_[c];
    if (s.count == kSlots || bytes_ + MediumClasses::bytes(c) > kMaxBytes) return false;
    s.slots[s.count++] = block;
    bytes_ += MediumClasses::bytes(c);
    pages_ += MediumClasses::kPages[c];
    ++blocks_;
    return true;
  }

  // Hands every stashed block to give_back(void* block, unsigned c) and empties the stash.
  template <class GiveBack>
  void flush(GiveBack give_back) {
    for (unsigned c = 0; c < kClasses; ++c) {
      for (unsigned i = 0; i < stacks_[c].count; ++i) give_back(stacks_[c].slots[i], c);
      stacks_[c].count = 0;
    }
    bytes_ = pages_ = blocks_ = 0;
  }
  // Forgets every block (a reset frees them by walking the page map).
  void clear() {
    for (Stack& s : stacks_) s.count = 0;
    bytes_ = pages_ = blocks_ = 0;
  }

  [[nodiscard]] bool empty() const { return blocks_ == 0; }
  [[nodiscard]] std::size_t blocks() const { return blocks_; }
  [[nodiscard]] std::size_t total_pages() const { return pages_; }
  // Calls f(void* block, unsigned c) for every stashed block (the invariant checks).
  template <class F>
  void for_each(F f) const {
    for (unsigned c = 0; c < kClasses; ++c)
      for (unsigned i = 0; i < stacks_[c].count; ++i) f(stacks_[c].slots[i], c);
  }

 private:
  struct Stack {
    unsigned count = 0;
    void* slots[kSlots];
  };
  std::array<Stack, kClasses == 0 ? 1 : kClasses> stacks_{};
  std::size_t bytes_ = 0;
  std::size_t pages_ = 0;
  std::size_t blocks_ = 0;
};

}  // namespace pagemalloc
