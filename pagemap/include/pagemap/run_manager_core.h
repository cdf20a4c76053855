// What every run manager shares: chunks, boundary tags, the dirty-run list and the decay.
//
// A variant (CRTP `Derived`) supplies only its free-run index:
//
//   Node* find_fit(PageCount n)                  the best-fitting free run of >= n pages
//   void index_insert(Node*, PageCount pages)    / index_remove(Node*, PageCount pages)
//   FreeSpan left_neighbour(chunk, PageIndex first)   the free run ending at first-1, if any
//   FreeSpan right_neighbour(chunk, PageIndex end)    the free run starting at end, if any
//   template <class F> void for_each_free(F)     every free run (for the invariant checks)
//   const char* check_index() const              the index's own invariants
//
// The core splits and coalesces, writes the boundary tags (page_map.h), keeps free runs
// that may hold dirty pages on a list ordered by the time they were freed, and purges from
// its old end: a run free for longer than the decay has its pages returned to the OS, and a
// chunk that is wholly free and purged is released. Freed runs are always taken as dirty.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>

#include "pagemap/counters.h"
#include "pagemap/intrusive_list.h"
#include "pagemap/page_map.h"
#include "pagemap/pages.h"
#include "pagemap/pal.h"
#include "pagemap/run_manager.h"

namespace pagemalloc {

// Every variant's per-page node starts with this: membership of the dirty-run list.
struct DirtyLink {
  DirtyLink* dirty_prev;
  DirtyLink* dirty_next;
  std::uint64_t freed_at_ms;  // when the run's pages became dirty
};

// A free run as found by a variant: its first page, length and dirtiness. pages == 0: none.
struct FreeSpan {
  std::byte* chunk = nullptr;
  PageIndex first;
  PageCount pages;
  bool dirty = false;
  explicit operator bool() const { return pages.value() != 0; }
  [[nodiscard]] PageIndex end_index() const { return first + pages; }
};

template <class Derived, class NodeT, Pal P>
class RunManagerCore {
 public:
  using Node = NodeT;
  using Layout = ChunkLayout<Node>;
  static_assert(std::is_base_of_v<DirtyLink, Node>);

  constexpr explicit RunManagerCore(P& pal) : pal_(pal) {}
  ~RunManagerCore() { release_all(); }
  RunManagerCore(const RunManagerCore&) = delete;
  RunManagerCore& operator=(const RunManagerCore&) = delete;

  AllocatedRun alloc(PageCount n) {
    counters_.operation();
    Node* node = self().find_fit(n);
    const bool new_chunk = node == nullptr;
    if (new_chunk) {
      if (!add_chunk()) return {Run{}, false};
      node = self().find_fit(n);
    }
    FreeSpan span = span_at(node);
    Run run{span.chunk, span.first, n};
    if (!span.dirty && !pal_.commit(run.base(), n.bytes())) {
      // The chunk taken for this call goes back with the failure: purge() releases only
      // chunks that were used (dirty), so an unused one would stay until an alloc reused it.
      if (new_chunk) release_chunk(span);
      return {Run{}, false};
    }
    carve(span, n);
    write_allocated_tags(span.chunk, span.first, n);
    return {run, !span.dirty};
  }

  void free(Run run) {
    counters_.operation();
    PageIndex first = run.first;
    PageCount pages = run.pages;
    PageCount newly_dirty = run.pages;
    if (FreeSpan left = self().left_neighbour(run.chunk, first)) {
      detach(left);
      first = left.first;
      pages = pages + left.pages;
      if (!left.dirty) newly_dirty = newly_dirty + left.pages;
      counters_.coalesce();
    }
    if (FreeSpan right = self().right_neighbour(run.chunk, first + pages)) {
      detach(right);
      pages = pages + right.pages;
      if (!right.dirty) newly_dirty = newly_dirty + right.pages;
      counters_.coalesce();
    }
    free_pages_ = free_pages_ + run.pages;
    dirty_pages_ = dirty_pages_ + newly_dirty;
    attach(FreeSpan{run.chunk, first, pages, true}, now_ms_);
  }

  bool grow_in_place(Run run, PageCount n) {
    counters_.operation();
    if (n <= run.pages) return true;
    FreeSpan right = self().right_neighbour(run.chunk, run.end());
    if (!right || run.pages + right.pages < n) return false;
    if (!right.dirty &&
        !pal_.commit(run.chunk + (right.first.value() << kLgPageSize), (n - run.pages).bytes()))
      return false;
    carve(right, n - run.pages);
    write_allocated_tags(run.chunk, run.first, n);
    counters_.grow_in_place();
    return true;
  }

  void shrink_in_place(Run run, PageCount n) {
    if (n >= run.pages) return;
    write_allocated_tags(run.chunk, run.first, n);
    free(Run{run.chunk, run.first + n, run.pages - n});
  }

  // Frees the first n pages of an allocated run; the rest stays allocated.
  void trim_head(Run run, PageCount n) {
    if (n.value() == 0 || n >= run.pages) return;
    write_allocated_tags(run.chunk, run.first + n, run.pages - n);
    write_allocated_tags(run.chunk, run.first, n);
    free(Run{run.chunk, run.first, n});
  }

  void advance_clock(std::uint64_t now_ms) { now_ms_ = now_ms; }

  PageCount purge(std::uint64_t min_age_ms) {
    return purge_from_oldest([&](const Node* node, PageCount) {
      return now_ms_ - node->freed_at_ms >= min_age_ms;  // freed_at <= now always
    });
  }

  // Purges dirty runs, the oldest first, until at least `at_least` pages are purged or none
  // is dirty (a huge block is about to take as many pages from the OS: huge.h).
  PageCount purge_oldest(PageCount at_least) {
    return purge_from_oldest([&](const Node*, PageCount purged) { return purged < at_least; });
  }

  [[nodiscard]] PageCount free_pages() const { return free_pages_; }
  [[nodiscard]] PageCount dirty_pages() const { return dirty_pages_; }
  [[nodiscard]] std::size_t chunks() const { return chunk_count_; }
  [[nodiscard]] const RunCounterValues& counters() const { return counters_.values(); }
  constexpr RunCounters& counters_mut() { return counters_; }

  [[nodiscard]] const char* check_invariants() const {
    std::size_t chunks_seen = 0;
    for (ChunkInfo* c = chunks_.front(); c != nullptr; c = c->next) {
      ++chunks_seen;
      std::byte* chunk = Layout::chunk_of(c);
      for (std::size_t i = 0; i < Layout::kHeaderPages.value(); ++i)
        if (page_map(chunk)[i] != PageEntry::header()) return "a header page is not tagged Header";
      for (auto& word : c->check_marks) word = 0;
    }
    if (chunks_seen != chunk_count_) return "the chunk list disagrees with the chunk count";

    const char* problem = nullptr;
    std::size_t free_total = 0, dirty_runs = 0;
    self().for_each_free([&](FreeSpan s) {
      if (problem != nullptr) return;
      problem = check_free_run(s);
      free_total += s.pages.value();
      dirty_runs += s.dirty ? 1 : 0;
    });
    if (problem != nullptr) return problem;
    if (free_total != free_pages_.value()) return "free page count disagrees with the free runs";

    std::size_t dirty_total = 0, dirty_listed = 0;
    std::uint64_t last_time = 0;
    for (DirtyLink* d = dirty_.front(); d != nullptr; d = d->dirty_next) {
      FreeSpan s = span_at(static_cast<Node*>(d));
      if (!s.dirty) return "a clean run is on the dirty list";
      if (d->freed_at_ms < last_time) return "the dirty list is not ordered by time";
      last_time = d->freed_at_ms;
      dirty_total += s.pages.value();
      ++dirty_listed;
    }
    if (dirty_listed != dirty_runs) return "a dirty run is missing from the dirty list";
    if (dirty_total != dirty_pages_.value()) return "dirty page count disagrees with the list";
    return self().check_index();
  }

  // Returns every chunk to the OS (the run manager is being torn down).
  void release_all() {
    while (ChunkInfo* c = chunks_.front()) {
      chunks_.remove(c);
      pal_.release(Layout::chunk_of(c), kChunkSize);
    }
    chunk_count_ = 0;
  }

 protected:
  // The free run whose first page holds `node`.
  FreeSpan span_at(const Node* node) const {
    std::byte* chunk = chunk_base_of(node);
    PageIndex first = Layout::index_of(node);
    PageEntry e = read_entry(chunk, first);
    return FreeSpan{chunk, first, e.pages(), e.dirty()};
  }

  PageEntry read_entry(std::byte* chunk, PageIndex i) const {
    const_cast<RunCounters&>(counters_).map_read();
    return page_entry(chunk, i);
  }

  static Node* node_at(std::byte* chunk, PageIndex i) { return Layout::node(chunk, i); }

  // The neighbours of a run found through the boundary tags, O(1): the free run whose last
  // page is first-1, and the free run whose first page is `end` (for variants that coalesce
  // through the page map).
  FreeSpan free_run_ending_before(std::byte* chunk, PageIndex first) const {
    PageEntry before = read_entry(chunk, first - PageCount(1));  // a header page at the start
    if (!before.is_free()) return {};
    return FreeSpan{chunk, first - before.pages(), before.pages(), before.dirty()};
  }
  FreeSpan free_run_starting_at(std::byte* chunk, PageIndex end) const {
    if (end >= PageIndex(kPagesPerChunk)) return {};
    PageEntry after = read_entry(chunk, end);
    if (!after.is_free()) return {};
    return FreeSpan{chunk, end, after.pages(), after.dirty()};
  }

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
  const Derived& self() const { return static_cast<const Derived&>(*this); }

  // Purges dirty runs from the oldest while go_on(run, pages purged so far) says so. A chunk
  // left wholly free goes back to the OS; any other run is decommitted and becomes clean.
  template <class GoOn>
  PageCount purge_from_oldest(GoOn go_on) {
    PageCount purged;
    while (!dirty_.empty()) {
      auto* node = static_cast<Node*>(dirty_.front());
      if (!go_on(node, purged)) break;
      FreeSpan span = span_at(node);
      dirty_.remove(node);
      dirty_pages_ = dirty_pages_ - span.pages;
      purged = purged + span.pages;
      if (span.first == Layout::kFirstRunPage && span.pages == Layout::kUsablePages) {
        release_chunk(span);
        continue;
      }
      pal_.decommit(Run{span.chunk, span.first, span.pages}.base(), span.pages.bytes());
      write_free_tags(span.chunk, span.first, span.pages, false);
    }
    return purged;
  }

  void write_free_tags(std::byte* chunk, PageIndex first, PageCount pages, bool dirty) {
    page_entry(chunk, first) = PageEntry::free(pages, dirty);
    page_entry(chunk, first + pages - PageCount(1)) = PageEntry::free(pages, dirty);
    counters_.map_write(2);
  }
  void write_allocated_tags(std::byte* chunk, PageIndex first, PageCount pages) {
    page_entry(chunk, first) = PageEntry::allocated(pages);
    page_entry(chunk, first + pages - PageCount(1)) = PageEntry::allocated(pages);
    counters_.map_write(2);
  }

  // Makes `span` a free run: tags, index, and (when dirty) the dirty list's tail.
  void attach(FreeSpan span, std::uint64_t freed_at) {
    write_free_tags(span.chunk, span.first, span.pages, span.dirty);
    Node* node = node_at(span.chunk, span.first);
    self().index_insert(node, span.pages);
    if (span.dirty) {
      node->freed_at_ms = freed_at;
      dirty_.push_back(node);
    }
  }

  // Takes `span` out of the index and the dirty list (it is about to be merged).
  void detach(FreeSpan span) {
    Node* node = node_at(span.chunk, span.first);
    self().index_remove(node, span.pages);
    if (span.dirty) dirty_.remove(node);
  }

  // Takes the first n pages of the free run `span`; the rest stays free, in the same place of
  // the dirty list.
  void carve(FreeSpan span, PageCount n) {
    Node* old_node = node_at(span.chunk, span.first);
    self().index_remove(old_node, span.pages);
    if (span.pages > n) {
      PageIndex rest = span.first + n;
      PageCount rest_pages = span.pages - n;
      write_free_tags(span.chunk, rest, rest_pages, span.dirty);
      Node* rest_node = node_at(span.chunk, rest);
      self().index_insert(rest_node, rest_pages);
      if (span.dirty) {
        rest_node->freed_at_ms = old_node->freed_at_ms;
        dirty_.replace(old_node, rest_node);
      }
      counters_.split();
    } else if (span.dirty) {
      dirty_.remove(old_node);
    }
    free_pages_ = free_pages_ - n;
    if (span.dirty) dirty_pages_ = dirty_pages_ - n;
  }

  bool add_chunk() {
    auto* chunk = static_cast<std::byte*>(pal_.reserve(kChunkSize, kChunkSize));
    if (chunk == nullptr) return false;
    for (std::size_t i = 0; i < Layout::kHeaderPages.value(); ++i)
      page_map(chunk)[i] = PageEntry::header();
    auto* info = new (Layout::info(chunk)) ChunkInfo{};
    chunks_.push_back(info);
    ++chunk_count_;
    counters_.chunk_added();
    free_pages_ = free_pages_ + Layout::kUsablePages;
    attach(FreeSpan{chunk, Layout::kFirstRunPage, Layout::kUsablePages, false}, now_ms_);
    return true;
  }

  void release_chunk(FreeSpan whole) {
    self().index_remove(node_at(whole.chunk, whole.first), whole.pages);
    free_pages_ = free_pages_ - whole.pages;
    chunks_.remove(Layout::info(whole.chunk));
    --chunk_count_;
    pal_.release(whole.chunk, kChunkSize);
  }

  const char* check_free_run(FreeSpan s) const {
    if (s.pages.value() == 0) return "a free run of zero pages";
    if (s.first < Layout::kFirstRunPage || s.end_index() > PageIndex(kPagesPerChunk))
      return "a free run lies outside its chunk's usable pages";
    PageEntry head = page_entry(s.chunk, s.first);
    PageEntry tail = page_entry(s.chunk, s.first + s.pages - PageCount(1));
    if (!head.is_free() || head.pages() != s.pages) return "a free run's first tag is wrong";
    if (tail != head) return "a free run's last tag differs from its first";
    if (page_entry(s.chunk, s.first - PageCount(1)).is_free())
      return "a free run has a free run just before it (not coalesced)";
    if (s.end_index() < PageIndex(kPagesPerChunk) && page_entry(s.chunk, s.end_index()).is_free())
      return "a free run has a free run just after it (not coalesced)";
    auto* marks = Layout::info(s.chunk)->check_marks;
    for (std::size_t i = s.first.value(); i < s.end_index().value(); ++i) {
      std::uint64_t bit = std::uint64_t{1} << (i % 64);
      if ((marks[i / 64] & bit) != 0) return "two free runs overlap";
      marks[i / 64] |= bit;
    }
    return nullptr;
  }

  P& pal_;
  IntrusiveList<ChunkInfo, &ChunkInfo::prev, &ChunkInfo::next> chunks_;
  IntrusiveList<DirtyLink, &DirtyLink::dirty_prev, &DirtyLink::dirty_next> dirty_;
  std::size_t chunk_count_ = 0;
  PageCount free_pages_;
  PageCount dirty_pages_;
  std::uint64_t now_ms_ = 0;
  RunCounters counters_;
};

}  // namespace pagemalloc
