// What every run manager shares: chunks, boundary tags, free-run records, the dirty-run list
// and the decay.
//
// A variant (CRTP `Derived`) supplies only its free-run index, over records of its type `Node`
// (a RunRecord):
//
//   Node* find_fit(PageCount n)                  the best-fitting free run of >= n pages among
//                                                the mostly dirty ones, else among the others
//   void index_insert(Node*, PageCount pages)    / index_remove(Node*, PageCount pages), in
//                                                the part of the index node->mostly_dirty says
//   FreeSpan left_neighbour(chunk, PageIndex first)   the free run ending at first-1, if any
//   FreeSpan right_neighbour(chunk, PageIndex end)    the free run starting at end, if any
//   template <class F> void for_each_free(F)     every free run (for the invariant checks)
//   const char* check_index() const              the index's own invariants
//
// The core splits and coalesces, writes the boundary tags (page_map.h), keeps free runs
// that may hold dirty pages on a list ordered by the time they were freed, and purges from
// its old end: a run free for longer than the decay has its pages returned to the OS, and a
// chunk that is wholly free and purged is released. Freed runs are always taken as dirty, and
// so is a chunk the Pal hands over used (ReusesChunks, pal.h).
//
// Dirty runs first (set_dirty_runs_first, on unless a design says otherwise): each free run's
// record counts its clean pages, those not handed out since its chunk came or it was last
// purged (an upper bound: a run cut from the front of a free run is taken as cut from its
// dirty pages). A run at most 1/8 of whose pages are clean is "mostly dirty", and the fit
// looks among those before the others, as jemalloc's extents reuse dirty pages before retained
// ones. Otherwise a run that coalesced with a chunk's untouched tail, on the front of its
// length's list or lowest by address, would be cut again into that tail, faulting in fresh
// pages while freed ones sat resident elsewhere: a program that freed 1,600 blocks of 4 KiB and
// made them again faulted in 1.8 MiB more the second time (docs/measurements.md).
//
// Records live outside the chunks, in pools (record_pool.h): one per free run (its index
// links, its place on the dirty list, the run's address), found from the run's first and last
// page map entries, and one per chunk (the chunk list, scratch for the checks), found from the
// chunk's Header entry. So a chunk's only metadata page is its page map. A split or a merge
// hands the record on to the run that remains; a free run's record is taken from the pool only
// when a freed run has no free neighbour. Within a chunk free and allocated runs alternate, so
// there are never more free runs than allocated runs plus chunks: alloc reserves that many
// records before it changes anything (and fails cleanly when the pool cannot grow), and free,
// shrink_in_place and trim_head always find the record they need.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>

#include "pagemap/counters.h"
#include "pagemap/intrusive_list.h"
#include "pagemap/page_map.h"
#include "pagemap/pages.h"
#include "pagemap/pal.h"
#include "pagemap/record_pool.h"
#include "pagemap/run_manager.h"

namespace pagemalloc {

// Membership of the dirty-run list.
struct DirtyLink {
  DirtyLink* dirty_prev;
  DirtyLink* dirty_next;
  std::uint64_t freed_at_ms;  // when the run's pages became dirty
};

// Every variant's record of a free run starts with this.
struct RunRecord : DirtyLink {
  std::byte* run;                 // the run's first byte: its chunk (a mask) and first page
  std::uint32_t clean_pages = 0;  // at most this many of its pages clean (fresh or purged)
  bool mostly_dirty = false;      // at most 1/8 of them: in the part of the index searched first
};

// The run manager's record of a chunk.
struct ChunkInfo {
  ChunkInfo* prev = nullptr;  // the run manager's list of chunks
  ChunkInfo* next = nullptr;
  std::byte* chunk = nullptr;
  std::uint64_t check_marks[kPagesPerChunk / 64] = {};  // scratch for check_invariants()
};

// A free run as found by a variant: its first page, length, dirtiness and record.
// pages == 0: none.
struct FreeSpan {
  std::byte* chunk = nullptr;
  PageIndex first;
  PageCount pages;
  bool dirty = false;
  RunRecord* record = nullptr;
  explicit operator bool() const { return pages.value() != 0; }
  [[nodiscard]] PageIndex end_index() const { return first + pages; }
  [[nodiscard]] std::byte* base() const { return chunk + (first.value() << kLgPageSize); }
};

template <class Derived, class NodeT, Pal P>
class RunManagerCore {
 public:
  using Node = NodeT;
  using Layout = ChunkLayout;
  using RunRecords = RecordPool<Node>;
  using ChunkRecords = RecordPool<ChunkInfo>;
  static_assert(std::is_base_of_v<RunRecord, Node>);

  constexpr explicit RunManagerCore(P& pal) : pal_(pal) {}
  ~RunManagerCore() { release_all(); }
  RunManagerCore(const RunManagerCore&) = delete;
  RunManagerCore& operator=(const RunManagerCore&) = delete;

  [[gnu::hot]] AllocatedRun alloc(PageCount n) {
    counters_.operation();
    Node* node = self().find_fit(n);
    const bool new_chunk = node == nullptr;
    if (new_chunk) {
      if (!add_chunk()) return {Run{}, false};
      node = self().find_fit(n);
    }
    FreeSpan span = span_at(node);
    Run run{span.chunk, span.first, n};
    // The record a free of this run may need is reserved now, before anything changes. The
    // chunk taken for this call goes back with a failure: purge() releases only chunks that
    // were used (dirty), so an unused one would stay until an alloc reused it.
    if (!records_.reserve(allocated_runs_ + 1 + chunk_count_) ||
        (!span.dirty && !pal_.commit(run.base(), n.bytes()))) {
      if (new_chunk) {
        if (span.dirty) {  // a used chunk (add_chunk)
          dirty_.remove(node);
          dirty_pages_ = dirty_pages_ - span.pages;
        }
        release_chunk(span);
      }
      return {Run{}, false};
    }
    carve(span, n);
    write_allocated_tags(span.chunk, span.first, n);
    ++allocated_runs_;
    return {run, !span.dirty};
  }

  [[gnu::hot]] void free(Run run) {
    --allocated_runs_;
    free_pages_of(run);
  }

  [[gnu::hot]] bool grow_in_place(Run run, PageCount n) {
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

  [[gnu::hot]] void shrink_in_place(Run run, PageCount n) {
    if (n >= run.pages) return;
    write_allocated_tags(run.chunk, run.first, n);
    free_pages_of(Run{run.chunk, run.first + n, run.pages - n});
  }

  // Frees the first n pages of an allocated run; the rest stays allocated.
  void trim_head(Run run, PageCount n) {
    if (n.value() == 0 || n >= run.pages) return;
    write_allocated_tags(run.chunk, run.first + n, run.pages - n);
    write_allocated_tags(run.chunk, run.first, n);
    free_pages_of(Run{run.chunk, run.first, n});
  }

  void advance_clock(std::uint64_t now_ms) { now_ms_ = now_ms; }

  // Whether the fit looks among the mostly dirty runs first (see the top of this file). Set
  // before the first alloc.
  constexpr void set_dirty_runs_first(bool on) { dirty_runs_first_ = on; }

  PageCount purge(std::uint64_t min_age_ms) {
    return purge_from_oldest([&](const Node* node, PageCount) {
      return now_ms_ - node->freed_at_ms >= min_age_ms;  // freed_at <= now always
    });
  }

  // Purges dirty runs, the oldest first, until at least `at_least` pages are purged or none
  // is dirty (a huge block is about to take as many pages from the OS: huge.h).
  [[gnu::hot]] PageCount purge_oldest(PageCount at_least) {
    return purge_from_oldest([&](const Node*, PageCount purged) { return purged < at_least; });
  }

  [[nodiscard]] PageCount free_pages() const { return free_pages_; }
  [[nodiscard]] PageCount dirty_pages() const { return dirty_pages_; }
  [[nodiscard]] std::size_t chunks() const { return chunk_count_; }
  [[nodiscard]] const RunCounterValues& counters() const { return counters_.values(); }
  constexpr RunCounters& counters_mut() { return counters_; }
  // The record pools (tests make their growth fail; statistics read their size).
  constexpr RunRecords& run_records() { return records_; }
  constexpr ChunkRecords& chunk_records() { return chunk_records_; }
  [[nodiscard]] std::size_t record_bytes() const {
    return records_.mapped_bytes() + chunk_records_.mapped_bytes();
  }

  [[nodiscard]] const char* check_invariants() const {
    std::size_t chunks_seen = 0;
    for (ChunkInfo* c = chunks_.front(); c != nullptr; c = c->next) {
      ++chunks_seen;
      if (c->chunk == nullptr || !is_chunk_aligned(c->chunk))
        return "a chunk record holds no chunk";
      if (page_map(c->chunk)[0] != PageEntry::header(c))
        return "a chunk's header entry does not point at the chunk's record";
      for (auto& word : c->check_marks) word = 0;
    }
    if (chunks_seen != chunk_count_) return "the chunk list disagrees with the chunk count";
    if (chunk_records_.in_use() != chunk_count_)
      return "the chunk records in use disagree with the chunk count";

    const char* problem = nullptr;
    std::size_t free_total = 0, dirty_runs = 0, free_runs = 0;
    self().for_each_free([&](FreeSpan s) {
      if (problem != nullptr) return;
      problem = check_free_run(s);
      free_total += s.pages.value();
      dirty_runs += s.dirty ? 1 : 0;
      if (problem == nullptr) problem = check_clean_pages(s);
      ++free_runs;
    });
    if (problem != nullptr) return problem;
    if (free_total != free_pages_.value()) return "free page count disagrees with the free runs";
    if (free_runs != records_.in_use())
      return "the free-run records in use disagree with the free runs (a record leaked)";
    if (records_.capacity() < allocated_runs_ + chunk_count_)
      return "fewer free-run records reserved than allocated runs plus chunks";

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

  // Returns every chunk and record to the OS (the run manager is being torn down).
  void release_all() {
    while (ChunkInfo* c = chunks_.front()) {
      chunks_.remove(c);
      pal_.release(c->chunk, kChunkSize);
    }
    chunk_count_ = 0;
    allocated_runs_ = 0;
    records_.release_all();
    chunk_records_.release_all();
  }

 protected:
  // The free run `node` records.
  FreeSpan span_at(const Node* node) const {
    std::byte* chunk = chunk_base_of(node->run);
    PageIndex first = page_index_of(node->run);
    PageEntry e = read_entry(chunk, first);
    return FreeSpan{chunk, first, e.pages(), e.dirty(), const_cast<Node*>(node)};
  }

  PageEntry read_entry(std::byte* chunk, PageIndex i) const {
    const_cast<RunCounters&>(counters_).map_read();
    return load_entry(chunk, i);  // a neighbour's first entry may be a thread's to change
  }

  // The neighbours of a run found through the boundary tags, O(1): the free run whose last
  // page is first-1, and the free run whose first page is `end` (for variants that coalesce
  // through the page map). Both ends of a free run hold its record.
  FreeSpan free_run_ending_before(std::byte* chunk, PageIndex first) const {
    PageEntry before = read_entry(chunk, first - PageCount(1));  // the header at the start
    if (!before.is_free()) return {};
    return FreeSpan{chunk, first - before.pages(), before.pages(), before.dirty(),
                    static_cast<RunRecord*>(before.record())};
  }
  FreeSpan free_run_starting_at(std::byte* chunk, PageIndex end) const {
    if (end >= PageIndex(kPagesPerChunk)) return {};
    PageEntry after = read_entry(chunk, end);
    if (!after.is_free()) return {};
    return FreeSpan{chunk, end, after.pages(), after.dirty(),
                    static_cast<RunRecord*>(after.record())};
  }

  static Node* node_of(const FreeSpan& span) { return static_cast<Node*>(span.record); }

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
  const Derived& self() const { return static_cast<const Derived&>(*this); }

  static ChunkInfo* chunk_info(std::byte* chunk) {
    return static_cast<ChunkInfo*>(page_entry(chunk, PageIndex(0)).record());
  }

  // Gives a run back, coalescing it with its free neighbours. The merged run keeps a
  // neighbour's record; only a run with no free neighbour takes one from the reserve.
  [[gnu::hot]] void free_pages_of(Run run) {
    counters_.operation();
    PageIndex first = run.first;
    PageCount pages = run.pages;
    PageCount newly_dirty = run.pages;
    RunRecord* record = nullptr;
    std::uint32_t clean = 0;  // the neighbours' clean pages: the run's own are all dirty
    if (FreeSpan left = self().left_neighbour(run.chunk, first)) {
      clean += left.record->clean_pages;
      detach(left);
      first = left.first;
      pages = pages + left.pages;
      if (!left.dirty) newly_dirty = newly_dirty + left.pages;
      record = left.record;
      counters_.coalesce();
    }
    if (FreeSpan right = self().right_neighbour(run.chunk, first + pages)) {
      clean += right.record->clean_pages;
      detach(right);
      pages = pages + right.pages;
      if (!right.dirty) newly_dirty = newly_dirty + right.pages;
      if (record == nullptr) record = right.record;
      else records_.give(node_of(right));
      counters_.coalesce();
    }
    if (record == nullptr) record = records_.take();
    free_pages_ = free_pages_ + run.pages;
    dirty_pages_ = dirty_pages_ + newly_dirty;
    attach(FreeSpan{run.chunk, first, pages, true, record}, now_ms_, clean);
  }

  // Purges dirty runs from the oldest while go_on(run, pages purged so far) says so. A chunk
  // left wholly free goes back to the OS; any other run is decommitted and becomes clean.
  template <class GoOn>
  [[gnu::hot]] PageCount purge_from_oldest(GoOn go_on) {
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
      pal_.decommit(span.base(), span.pages.bytes());
      write_free_tags(span.chunk, span.first, span.pages, false, node);
      const bool was_mostly_dirty = node->mostly_dirty;
      if (was_mostly_dirty) self().index_remove(node, span.pages);
      node->clean_pages = std::uint32_t(span.pages.value());  // clean now: among the others
      if (was_mostly_dirty) index_place(node, span.pages);
    }
    return purged;
  }

  void write_free_tags(std::byte* chunk, PageIndex first, PageCount pages, bool dirty,
                       const RunRecord* record) {
    const PageEntry e = PageEntry::free(pages, dirty, record);
    page_entry(chunk, first) = e;
    page_entry(chunk, first + pages - PageCount(1)) = e;
    counters_.map_write(2);
  }
  void write_allocated_tags(std::byte* chunk, PageIndex first, PageCount pages) {
    page_entry(chunk, first) = PageEntry::allocated(pages);
    page_entry(chunk, first + pages - PageCount(1)) = PageEntry::allocated(pages);
    counters_.map_write(2);
  }

  // Puts `node`, a free run of `pages` pages whose clean_pages is set, in the index: among the
  // mostly dirty runs if it is one and they come first.
  [[gnu::hot]] void index_place(Node* node, PageCount pages) {
    node->mostly_dirty = dirty_runs_first_ && std::size_t{node->clean_pages} * 8 <= pages.value();
    self().index_insert(node, pages);
  }

  // Makes `span` a free run recorded by span.record, `clean` of its pages clean: tags, index,
  // and (when dirty) the dirty list's tail.
  [[gnu::hot]] void attach(FreeSpan span, std::uint64_t freed_at, std::uint32_t clean) {
    Node* node = node_of(span);
    node->run = span.base();
    node->clean_pages = clean;
    write_free_tags(span.chunk, span.first, span.pages, span.dirty, node);
    index_place(node, span.pages);
    if (span.dirty) {
      node->freed_at_ms = freed_at;
      dirty_.push_back(node);
    }
  }

  // Takes `span` out of the index and the dirty list (it is about to be merged).
  [[gnu::hot]] void detach(FreeSpan span) {
    Node* node = node_of(span);
    self().index_remove(node, span.pages);
    if (span.dirty) dirty_.remove(node);
  }

  // Takes the first n pages of the free run `span`; the rest stays free with the same record,
  // in the same place of the dirty list.
  [[gnu::hot]] void carve(FreeSpan span, PageCount n) {
    Node* node = node_of(span);
    self().index_remove(node, span.pages);
    if (span.pages > n) {
      PageIndex rest = span.first + n;
      PageCount rest_pages = span.pages - n;
      node->run = span.chunk + (rest.value() << kLgPageSize);
      write_free_tags(span.chunk, rest, rest_pages, span.dirty, node);
      if (node->clean_pages > rest_pages.value())  // the pages taken count as dirty ones
        node->clean_pages = std::uint32_t(rest_pages.value());
      index_place(node, rest_pages);
      counters_.split();
    } else {
      if (span.dirty) dirty_.remove(node);
      records_.give(node);
    }
    free_pages_ = free_pages_ - n;
    if (span.dirty) dirty_pages_ = dirty_pages_ - n;
  }

  // The records a chunk needs (its own, and one more free run's) are reserved first. A chunk
  // the Pal hands over used (ReusesChunks) is one free run of dirty pages, on the dirty list
  // as if just freed; its page map is cleared first, to read as a fresh chunk's.
  [[gnu::hot]] bool add_chunk() {
    if (!records_.reserve(allocated_runs_ + chunk_count_ + 1) ||
        !chunk_records_.reserve(chunk_count_ + 1))
      return false;
    std::byte* chunk = nullptr;
    if constexpr (ReusesChunks<P>) chunk = static_cast<std::byte*>(pal_.take_used_chunk());
    const bool used = chunk != nullptr;
    if (used) std::memset(chunk, 0, Layout::kHeaderPages.bytes());
    else chunk = static_cast<std::byte*>(pal_.reserve(kChunkSize, kChunkSize));
    if (chunk == nullptr) return false;
    ChunkInfo* info = chunk_records_.take();
    info->chunk = chunk;
    page_map(chunk)[0] = PageEntry::header(info);  // the page map's own page
    chunks_.push_back(info);
    ++chunk_count_;
    counters_.chunk_added();
    free_pages_ = free_pages_ + Layout::kUsablePages;
    if (used) dirty_pages_ = dirty_pages_ + Layout::kUsablePages;
    // A used chunk's pages are resident as its last holder left them, perhaps not all touched:
    // they count as clean.
    attach(FreeSpan{chunk, Layout::kFirstRunPage, Layout::kUsablePages, used, records_.take()},
           now_ms_, std::uint32_t(Layout::kUsablePages.value()));
    return true;
  }

  void release_chunk(FreeSpan whole) {
    Node* node = node_of(whole);
    self().index_remove(node, whole.pages);
    records_.give(node);
    free_pages_ = free_pages_ - whole.pages;
    ChunkInfo* info = chunk_info(whole.chunk);
    chunks_.remove(info);
    chunk_records_.give(info);
    --chunk_count_;
    pal_.release(whole.chunk, kChunkSize);
  }

  const char* check_clean_pages(FreeSpan s) const {
    const RunRecord& r = *s.record;
    if (r.clean_pages > s.pages.value()) return "a free run counts more clean pages than it has";
    if (!s.dirty && r.clean_pages != s.pages.value())
      return "a clean run does not count all its pages clean";
    if (r.mostly_dirty != (dirty_runs_first_ && std::size_t{r.clean_pages} * 8 <= s.pages.value()))
      return "a run is among the mostly dirty runs or the others by mistake";
    return nullptr;
  }

  const char* check_free_run(FreeSpan s) const {
    if (s.pages.value() == 0) return "a free run of zero pages";
    if (s.first < Layout::kFirstRunPage || s.end_index() > PageIndex(kPagesPerChunk))
      return "a free run lies outside its chunk's usable pages";
    ChunkInfo* info = chunk_info(s.chunk);
    if (info == nullptr || info->chunk != s.chunk)
      return "a free run lies in a chunk without a chunk record";
    PageEntry head = page_entry(s.chunk, s.first);
    PageEntry tail = page_entry(s.chunk, s.first + s.pages - PageCount(1));
    if (!head.is_free() || head.pages() != s.pages) return "a free run's first tag is wrong";
    if (tail != head) return "a free run's last tag differs from its first";
    if (head.record() != s.record || s.record->run != s.base())
      return "a free run's tags and its record do not point at each other";
    // (The neighbours' entries may be a thread's to change: load_entry.)
    if (load_entry(s.chunk, s.first - PageCount(1)).is_free())
      return "a free run has a free run just before it (not coalesced)";
    if (s.end_index() < PageIndex(kPagesPerChunk) && load_entry(s.chunk, s.end_index()).is_free())
      return "a free run has a free run just after it (not coalesced)";
    auto* marks = info->check_marks;
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
  RunRecords records_;
  ChunkRecords chunk_records_;
  std::size_t chunk_count_ = 0;
  std::size_t allocated_runs_ = 0;  // alloc()s not yet freed
  PageCount free_pages_;
  PageCount dirty_pages_;
  std::uint64_t now_ms_ = 0;
  bool dirty_runs_first_ = true;
  RunCounters counters_;
};

}  // namespace pagemalloc
