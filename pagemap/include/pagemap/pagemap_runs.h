// The "pagemap" run manager: every operation O(1).
//
// Neighbours for coalescing come from the page map's boundary tags (the entry just before a
// run and the one just after it). Free runs are indexed by exact length in one list per
// length (1 .. 512 pages), and a two-level bitmap of the non-empty lists finds the smallest
// list that fits with two count-trailing-zeros — the linear page-map structures that
// "Overzealous use of my red-black tree hammer" (Evans, 2008) went back to, carried on to the
// fit as well (as TLSF and mimalloc's spans do).
//
// Within a list, the most recently freed run is served first: its pages are the warmest.
// The mostly dirty runs have lists and bitmaps of their own, searched first
// (run_manager_core.h). The lists run through the free runs' records, outside the chunks.
#pragma once

#include <bit>
#include <cstdint>

#include "pagemap/intrusive_list.h"
#include "pagemap/run_manager_core.h"
#include "pagemap/zero_start_array.h"

namespace pagemalloc {

struct PagemapNode : RunRecord {
  PagemapNode* prev;  // the free list of runs of this run's length
  PagemapNode* next;
};

template <Pal P>
class PagemapRuns : public RunManagerCore<PagemapRuns<P>, PagemapNode, P> {
  using Core = RunManagerCore<PagemapRuns<P>, PagemapNode, P>;
  friend Core;
  using List = IntrusiveList<PagemapNode, &PagemapNode::prev, &PagemapNode::next>;
  static constexpr std::size_t kLists = kPagesPerChunk + 1;  // index = run length in pages
  static constexpr std::size_t kWords = kLists / 64 + 1;
  static_assert(kWords <= 64, "the summary bitmap is one word");

 public:
  static constexpr const char* kName = "pagemap";
  using Core::Core;
  // Requires: the manager's memory reads zero (an arena's): the free lists' heads are left
  // unwritten (16 KiB that a small program would otherwise make resident).
  PagemapRuns(P& pal, ZeroStartUnwritten)
      : Core(pal), by_length_{ByLength(kUnwritten), ByLength(kUnwritten)} {}

 private:
  // Free runs of one kind by exact length: a list per length and a two-level bitmap of the
  // non-empty lists.
  struct ByLength {
    ByLength() = default;
    explicit ByLength(ZeroStartUnwritten) : lists(kUnwritten) {}
    ZeroStartArray<List, kLists> lists;
    std::uint64_t words[kWords] = {};
    std::uint64_t summary = 0;

    PagemapNode* find(PageCount n) const {
      std::size_t w = n.value() / 64;
      std::uint64_t bits = words[w] & (~std::uint64_t{0} << (n.value() % 64));
      if (bits == 0) {
        std::uint64_t above = summary & ~((std::uint64_t{2} << w) - 1);
        if (above == 0) return nullptr;
        w = std::size_t(std::countr_zero(above));
        bits = words[w];
      }
      std::size_t length = w * 64 + std::size_t(std::countr_zero(bits));
      return lists[length].front();
    }
    void insert(PagemapNode* node, std::size_t length) {
      lists[length].push_front(node);
      words[length / 64] |= std::uint64_t{1} << (length % 64);
      summary |= std::uint64_t{1} << (length / 64);
    }
    void remove(PagemapNode* node, std::size_t length) {
      lists[length].remove(node);
      if (lists[length].empty()) {
        words[length / 64] &= ~(std::uint64_t{1} << (length % 64));
        if (words[length / 64] == 0) summary &= ~(std::uint64_t{1} << (length / 64));
      }
    }
  };

  PagemapNode* find_fit(PageCount n) {
    if (PagemapNode* node = by_length_[1].find(n)) return node;
    return by_length_[0].find(n);
  }

  void index_insert(PagemapNode* node, PageCount pages) {
    by_length_[node->mostly_dirty].insert(node, pages.value());
  }

  void index_remove(PagemapNode* node, PageCount pages) {
    by_length_[node->mostly_dirty].remove(node, pages.value());
  }

  FreeSpan left_neighbour(std::byte* chunk, PageIndex first) const {
    return this->free_run_ending_before(chunk, first);
  }
  FreeSpan right_neighbour(std::byte* chunk, PageIndex end) const {
    return this->free_run_starting_at(chunk, end);
  }

  template <class F>
  void for_each_free(F&& visit) const {
    for (const ByLength& index : by_length_)
      for (std::size_t length = 1; length < kLists; ++length)
        for (PagemapNode* n = index.lists[length].front(); n != nullptr; n = n->next)
          visit(this->span_at(n));
  }

  const char* check_index() const {
    for (bool mostly_dirty : {false, true}) {
      const ByLength& index = by_length_[mostly_dirty];
      for (std::size_t length = 0; length < kLists; ++length) {
        bool listed = !index.lists[length].empty();
        bool marked = (index.words[length / 64] >> (length % 64)) & 1;
        if (listed != marked) return "the bitmap disagrees with the free lists";
        for (PagemapNode* n = index.lists[length].front(); n != nullptr; n = n->next) {
          if (this->span_at(n).pages.value() != length) return "a run is on the wrong free list";
          if (n->mostly_dirty != mostly_dirty)
            return "a run is among the mostly dirty runs or the others by mistake";
        }
      }
      for (std::size_t w = 0; w < kWords; ++w)
        if (((index.summary >> w) & 1) != (index.words[w] != 0))
          return "the summary bitmap is stale";
    }
    return nullptr;
  }

  ByLength by_length_[2];  // [1]: the mostly dirty runs, searched first; [0]: the others
};

}  // namespace pagemalloc
