// An arena's cache of freed large blocks, as they were (tcmalloc's page heap cache of spans,
// mimalloc's segment cache, at the scale of one arena): a program that frees a large block
// and asks for one of the same length (a buffer of 128 KiB replaced in a loop, a block of each
// of a few lengths in turn) gets the same pages back, without a split or a coalesce in the run
// manager, and its lines are still in the processor's caches. A request takes the shortest
// cached run at least as long as it asks (the newest of equals); the arena gives what is left
// of a longer one back to the run manager, one free instead of a free and a split.
//
// It holds at most kSlots runs of at most kMaxPages pages each, kMaxTotalPages in all; a run
// that would pass either bound evicts the oldest first, and so does each request that finds no
// run long enough, so that runs the requests go past return to the run manager one request
// after another, to be coalesced and cut again, as without the cache. The arena keeps a cached
// run's first page entry PageKind::Cached (pagemap/page_map.h), so a second free of the block
// is still reported, and the run manager sees the run as allocated until the arena gives it
// back: when it is evicted, at each decay purge (an idle program's cached runs decay as its
// free runs do), before a block grows in place into the pages after it, and at a reset.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "pagemap/pages.h"

namespace pagemalloc {

class LargeRunCache {
 public:
  static constexpr std::size_t kSlots = 8;
  static constexpr std::size_t kMaxPages = 64;        // 256 KiB of 4 KiB pages
  static constexpr std::size_t kMaxTotalPages = 256;  // 1 MiB

  struct Entry {
    std::byte* base = nullptr;
    std::size_t pages = 0;
  };

  static constexpr bool fits(PageCount pages) { return pages.value() <= kMaxPages; }

  // The shortest cached run of at least `pages` pages (the newest of those), taken out of the
  // cache; an Entry with a null base if none.
  Entry take(PageCount pages) {
    std::size_t best = count_;
    for (std::size_t i = count_; i-- > 0;) {
      const std::size_t length = entries_[i].pages;
      if (length >= pages.value() && (best == count_ || length < entries_[best].pages)) {
        best = i;
        if (length == pages.value()) break;
      }
    }
    return best == count_ ? Entry{} : remove(best);
  }

  // Requires: fits(pages). Caches the run, after handing each run it evicts (the oldest first,
  // until the new one fits the bounds) to give_back(Entry).
  template <class GiveBack>
  void put(std::byte* base, PageCount pages, GiveBack give_back) {
    while (count_ == kSlots || total_pages_ + pages.value() > kMaxTotalPages)
      evict_oldest(give_back);
    entries_[count_++] = Entry{base, pages.value()};
    total_pages_ += pages.value();
  }

  // Hands the oldest cached run, if any, to give_back(Entry).
  template <class GiveBack>
  void evict_oldest(GiveBack give_back) {
    if (count_ != 0) give_back(remove(0));
  }

  // Hands every cached run to give_back(Entry), oldest first, and empties the cache.
  template <class GiveBack>
  void flush(GiveBack give_back) {
    for (std::size_t i = 0; i < count_; ++i) give_back(entries_[i]);
    count_ = 0;
    total_pages_ = 0;
  }

  // Forgets every run (a reset frees them by walking the page map).
  void clear() {
    count_ = 0;
    total_pages_ = 0;
  }

  [[nodiscard]] bool empty() const { return count_ == 0; }
  [[nodiscard]] std::size_t size() const { return count_; }
  [[nodiscard]] std::size_t total_pages() const { return total_pages_; }
  [[nodiscard]] const Entry& operator[](std::size_t i) const { return entries_[i]; }

 private:
  // Takes entry i out, the newer ones moving down a slot (the entries stay oldest first).
  Entry remove(std::size_t i) {
    const Entry removed = entries_[i];
    for (std::size_t j = i + 1; j < count_; ++j) entries_[j - 1] = entries_[j];
    --count_;
    total_pages_ -= removed.pages;
    return removed;
  }

  std::array<Entry, kSlots> entries_{};
  std::size_t count_ = 0;
  std::size_t total_pages_ = 0;
};

}  // namespace pagemalloc
