// Tests of the run managers (run_manager.h) over the fake OS layer (pal_fake.h).
//
// Every test is a TYPED_TEST over RunManagerTypes, so each variant meets the same contract:
//
//   - model tests: long random sequences of alloc, free, trim_head, grow_in_place,
//     shrink_in_place and advance_clock + purge (by age, or the oldest runs first until
//     enough pages), checked after every step against a std::map of the live runs:
//     check_invariants() passes, live runs never overlap and stay in their chunk's usable
//     pages, free + live pages == chunks * usable pages, grow_in_place succeeds exactly when
//     the free run after the run is long enough, alloc carves the best-fitting free run from
//     its start and takes a new chunk only when no free run fits, and the bytes written into
//     each live run survive everything else. The seed is PAGEMALLOC_TEST_SEED when set,
//     otherwise a fixed default; a failure prints it so that the run can be replayed.
//   - directed tests: best fit, coalescing of adjacent frees, trimming the head or shrinking
//     the tail of a run, growing into and being stopped by the next run, runs of
//     kMaxRunPages, dirty pages and the decay (purge by age or oldest first, purged pages
//     read zero, wholly free chunks go back to the OS), the OS refusing memory, and the
//     instrumentation counters;
//   - the fake OS layer itself: reservations are zero-filled, refusals happen on demand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "pagemap/counters.h"
#include "pagemap/page_map.h"
#include "pagemap/pagemap_runs.h"
#include "pagemap/pages.h"
#include "pagemap/pal_fake.h"
#include "pagemap/run_manager.h"
#include "rbtree/allocated_runs_tree.h"
#include "rbtree/hybrid_runs.h"
#include "rbtree/rbtree_runs.h"

namespace pagemalloc {

// Failure messages show page counts and indices as numbers (found by googletest through ADL).
inline void PrintTo(PageCount n, std::ostream* os) { *os << n.value() << " pages"; }
inline void PrintTo(PageIndex i, std::ostream* os) { *os << "page " << i.value(); }

namespace {

// googletest's fixtures have a member function named Run, which hides pagemalloc::Run inside
// test bodies.
using PageRun = ::pagemalloc::Run;

// The variants under test: every run manager meets the same contract.
// (AllocatedRunsTree is the rbtree variant with 2008's tree of allocated runs beside it.)
using RunManagerTypes = testing::Types<PagemapRuns<FakePal>, HybridRuns<FakePal>,
                                       RbtreeRuns<FakePal>, AllocatedRunsTree<RbtreeRuns<FakePal>>>;

static_assert(RunManager<PagemapRuns<FakePal>>);
static_assert(RunManager<HybridRuns<FakePal>>);
static_assert(RunManager<RbtreeRuns<FakePal>>);
static_assert(RunManager<AllocatedRunsTree<RbtreeRuns<FakePal>>>);

constexpr std::size_t kModelPalCapacity = std::size_t{256} << 20;    // 128 chunks
constexpr std::size_t kDirectedPalCapacity = std::size_t{32} << 20;  // 16 chunks

template <class Runs>
constexpr PageCount kUsablePages = Runs::Layout::kUsablePages;
template <class Runs>
constexpr PageIndex kFirstRunPage = Runs::Layout::kFirstRunPage;

std::uint64_t BaseSeed() {
  if (const char* text = std::getenv("PAGEMALLOC_TEST_SEED")) {
    return std::strtoull(text, nullptr, 0);
  }
  return 0x9e3779b97f4a7c15;
}

// --- Byte patterns --------------------------------------------------------------------------
//
// The first and last byte of every page of a live run hold values derived from the run's tag
// and the page's address, never zero. Because they depend on the address (not on the page's
// position in the run) they stay valid when a run loses its head or tail.

std::uint32_t PageNumber(const std::byte* page) {
  return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(page) >> kLgPageSize);
}
std::uint8_t FirstBytePattern(std::uint8_t tag, const std::byte* page) {
  return static_cast<std::uint8_t>((tag * 131u + PageNumber(page) * 7u) % 255u + 1u);
}
std::uint8_t LastBytePattern(std::uint8_t tag, const std::byte* page) {
  return static_cast<std::uint8_t>((tag * 17u + PageNumber(page) * 13u + 101u) % 255u + 1u);
}

void FillPattern(PageRun run, std::uint8_t tag, std::size_t from_page = 0) {
  for (std::size_t i = from_page; i < run.pages.value(); ++i) {
    std::byte* page = run.base() + i * kPageSize;
    page[0] = std::byte{FirstBytePattern(tag, page)};
    page[kPageSize - 1] = std::byte{LastBytePattern(tag, page)};
  }
}

testing::AssertionResult HasPattern(PageRun run, std::uint8_t tag) {
  for (std::size_t i = 0; i < run.pages.value(); ++i) {
    const std::byte* page = run.base() + i * kPageSize;
    auto first = std::to_integer<unsigned>(page[0]);
    auto last = std::to_integer<unsigned>(page[kPageSize - 1]);
    if (first != FirstBytePattern(tag, page) || last != LastBytePattern(tag, page)) {
      return testing::AssertionFailure()
             << "page " << i << " of the run at " << static_cast<void*>(run.base()) << " ("
             << run.pages.value() << " pages) lost its pattern: first byte " << first << " (want "
             << unsigned(FirstBytePattern(tag, page)) << "), last byte " << last << " (want "
             << unsigned(LastBytePattern(tag, page)) << ")";
    }
  }
  return testing::AssertionSuccess();
}

// Every page's first and last byte is zero (the only bytes these tests ever write).
testing::AssertionResult ReadsZero(PageRun run) {
  for (std::size_t i = 0; i < run.pages.value(); ++i) {
    const std::byte* page = run.base() + i * kPageSize;
    if (page[0] != std::byte{0} || page[kPageSize - 1] != std::byte{0}) {
      return testing::AssertionFailure() << "page " << i << " of the run at "
                                         << static_cast<void*>(run.base()) << " is not zero";
    }
  }
  return testing::AssertionSuccess();
}

template <class Runs>
testing::AssertionResult InvariantsHold(const Runs& runs) {
  if (const char* problem = runs.check_invariants()) {
    return testing::AssertionFailure() << "check_invariants: " << problem;
  }
  return testing::AssertionSuccess();
}

// --- The model test -------------------------------------------------------------------------

// The steps of a random sequence, and their relative weights.
enum class Operation { Alloc, FreeWhole, FreePart, Grow, Shrink, Purge };

const char* NameOf(Operation op) {
  switch (op) {
    case Operation::Alloc: return "alloc";
    case Operation::FreeWhole: return "free";
    case Operation::FreePart: return "trim_head or shrink_in_place of a part";
    case Operation::Grow: return "grow_in_place";
    case Operation::Shrink: return "shrink_in_place";
    case Operation::Purge: return "advance_clock and purge";
  }
  return "?";
}

struct OperationMix {
  int alloc = 0;
  int free_whole = 0;
  int free_part = 0;  // the head (trim_head) or the tail (shrink_in_place) of a live run
  int grow = 0;
  int shrink = 0;
  int purge = 0;  // advance the clock, then purge
  std::size_t max_live_runs = 0;
};

// A random run length in 1 .. kMaxRunPages, mostly small.
PageCount SkewedRunLength(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> percent(0, 99);
  int p = percent(rng);
  auto between = [&](std::size_t lo, std::size_t hi) {
    return PageCount(std::uniform_int_distribution<std::size_t>(lo, hi)(rng));
  };
  if (p < 55) return between(1, 4);
  if (p < 80) return between(5, 32);
  if (p < 95) return between(33, 128);
  return between(129, kMaxRunPages.value());
}

// Drives one run manager with random operations and checks it against a std::map of the live
// runs. Every check returns an AssertionResult, so that a failure stops the sequence at the
// step that went wrong.
template <class Runs>
class RunManagerModel {
 public:
  // dirty_runs_first: the fit's preference (run_manager_core.h). Off, every alloc must take the
  // best fit of all the free runs; on, a free run that fits (the model does not track which
  // pages are clean: the run manager's checks hold it to its own counts).
  RunManagerModel(std::uint64_t seed, bool dirty_runs_first)
      : rng_(seed), dirty_runs_first_(dirty_runs_first) {
    runs_.set_dirty_runs_first(dirty_runs_first);
  }

  testing::AssertionResult RunSteps(std::size_t steps, const OperationMix& mix) {
    std::discrete_distribution<int> pick({double(mix.alloc), double(mix.free_whole),
                                          double(mix.free_part), double(mix.grow),
                                          double(mix.shrink), double(mix.purge)});
    for (step_ = 0; step_ < steps; ++step_) {
      auto op = Operation(pick(rng_));
      if (live_.empty()) op = Operation::Alloc;
      if (op == Operation::Alloc && live_.size() >= mix.max_live_runs) op = Operation::FreeWhole;
      testing::AssertionResult done = testing::AssertionSuccess();
      switch (op) {
        case Operation::Alloc: done = Alloc(SkewedRunLength(rng_)); break;
        case Operation::FreeWhole: done = FreeWhole(); break;
        case Operation::FreePart: done = FreePart(); break;
        case Operation::Grow: done = Grow(); break;
        case Operation::Shrink: done = Shrink(); break;
        case Operation::Purge: done = AdvanceClockAndPurge(); break;
      }
      if (!done) return done << " (step " << step_ << ": " << NameOf(op) << ")";
      if (auto checked = CheckAll(); !checked) {
        return checked << " (after step " << step_ << ": " << NameOf(op) << ")";
      }
      if (step_ % 512 == 0) {
        if (auto intact = AllPatternsIntact(); !intact) return intact << " (step " << step_ << ")";
      }
    }
    if (auto intact = AllPatternsIntact(); !intact) return intact << " (at the end)";
    return FreeEverythingAndPurge();
  }

 private:
  struct Live {
    PageRun run;
    std::uint8_t tag;
  };
  using LiveMap = std::map<std::uintptr_t, Live>;

  static std::uintptr_t Key(PageRun run) { return reinterpret_cast<std::uintptr_t>(run.base()); }

  // The number of free pages right after `it`'s run: up to the next live run of the same
  // chunk, or the chunk's end. Coalescing makes this exactly the free run that follows it.
  std::size_t GapAfter(typename LiveMap::const_iterator it) const {
    const PageRun& run = it->second.run;
    auto next = std::next(it);
    if (next != live_.end() && next->second.run.chunk == run.chunk) {
      return next->second.run.first.value() - run.end().value();
    }
    return kPagesPerChunk - run.end().value();
  }

  // The free runs of the chunks that hold live runs, as the model sees them: the shortest
  // one of at least `n` pages (0 if none), and how many chunks hold live runs.
  struct FreeRunSurvey {
    std::size_t best_fit = 0;
    std::size_t live_chunks = 0;
  };
  FreeRunSurvey SurveyFreeRuns(PageCount n) const {
    FreeRunSurvey survey;
    auto consider = [&](std::size_t length) {
      if (length >= n.value() && (survey.best_fit == 0 || length < survey.best_fit)) {
        survey.best_fit = length;
      }
    };
    std::byte* chunk = nullptr;
    for (auto it = live_.begin(); it != live_.end(); ++it) {
      const PageRun& run = it->second.run;
      if (run.chunk != chunk) {
        chunk = run.chunk;
        ++survey.live_chunks;
        consider(run.first.value() - kFirstRunPage<Runs>.value());
      }
      consider(GapAfter(it));
    }
    return survey;
  }

  // The length of the free run, as the model saw it before the alloc, whose first pages
  // `run` took; 0 when `run` does not start a free run of the model.
  std::size_t FreeRunTakenBy(PageRun run) const {
    auto next = live_.lower_bound(Key(run));
    if (next != live_.begin()) {
      const PageRun& before = std::prev(next)->second.run;
      if (before.chunk == run.chunk && before.end() != run.first) return 0;
      if (before.chunk != run.chunk && run.first != kFirstRunPage<Runs>) return 0;
    } else if (run.first != kFirstRunPage<Runs>) {
      return 0;
    }
    if (next != live_.end() && next->second.run.chunk == run.chunk) {
      return next->second.run.first.value() - run.first.value();
    }
    return kPagesPerChunk - run.first.value();
  }

  std::size_t Uniform(std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng_);
  }

  typename LiveMap::iterator RandomLive() {
    auto it = live_.begin();
    std::advance(it, Uniform(0, live_.size() - 1));
    return it;
  }

  // alloc serves the best-fitting free run (with dirty runs first: a free run that fits), from
  // its start, and takes a new chunk only when no free run is long enough. Chunks that hold no
  // live run are wholly free.
  testing::AssertionResult Alloc(PageCount n) {
    FreeRunSurvey survey = SurveyFreeRuns(n);
    std::size_t chunks_before = runs_.chunks();
    std::size_t best_fit = survey.best_fit;
    bool some_chunk_wholly_free = chunks_before > survey.live_chunks;
    if (some_chunk_wholly_free && (best_fit == 0 || kUsablePages<Runs>.value() < best_fit)) {
      best_fit = kUsablePages<Runs>.value();
    }

    AllocatedRun got = runs_.alloc(n);
    if (!got.run) return testing::AssertionFailure() << "alloc(" << n.value() << ") failed";
    if (got.run.pages != n) {
      return testing::AssertionFailure()
             << "alloc(" << n.value() << ") returned " << got.run.pages.value() << " pages";
    }
    std::size_t expected_chunks = chunks_before + (best_fit == 0 ? 1 : 0);
    if (runs_.chunks() != expected_chunks) {
      return testing::AssertionFailure()
             << "alloc(" << n.value() << ") changed chunks() from " << chunks_before << " to "
             << runs_.chunks() << "; the shortest free run that fits has " << best_fit
             << " pages (0: none)";
    }
    std::size_t taken = FreeRunTakenBy(got.run);
    std::size_t expected_taken = best_fit == 0 ? kUsablePages<Runs>.value() : best_fit;
    if (dirty_runs_first_ && best_fit != 0 && taken >= n.value()) expected_taken = taken;
    if (taken != expected_taken) {
      return testing::AssertionFailure()
             << "alloc(" << n.value() << ") took the first pages of a free run of " << taken
             << " pages (0: not the start of a free run); the best fit has " << expected_taken;
    }
    if (got.zeroed) {
      if (auto zero = ReadsZero(got.run); !zero) return zero << " although alloc said zeroed";
    }
    auto [it, inserted] = live_.emplace(Key(got.run), Live{got.run, next_tag_++});
    if (!inserted) return testing::AssertionFailure() << "alloc returned a live run's address";
    FillPattern(got.run, it->second.tag);
    return NeighboursIntact(it);
  }

  testing::AssertionResult FreeWhole() {
    auto it = RandomLive();
    if (auto intact = HasPattern(it->second.run, it->second.tag); !intact) return intact;
    runs_.free(it->second.run);
    auto after = live_.erase(it);
    return AroundIntact(after);
  }

  // Gives back the head (trim_head) or the tail (shrink_in_place) of a live run.
  testing::AssertionResult FreePart() {
    auto it = RandomLive();
    Live live = it->second;
    if (live.run.pages.value() < 2) return FreeWhole();
    if (auto intact = HasPattern(live.run, live.tag); !intact) return intact;
    PageCount part(Uniform(1, live.run.pages.value() - 1));
    PageCount kept = live.run.pages - part;
    std::size_t free_before = runs_.free_pages().value();
    live_.erase(it);
    PageRun remaining;
    if (std::bernoulli_distribution(0.5)(rng_)) {
      runs_.trim_head(live.run, part);
      remaining = PageRun{live.run.chunk, live.run.first + part, kept};
    } else {
      runs_.shrink_in_place(live.run, kept);
      remaining = PageRun{live.run.chunk, live.run.first, kept};
    }
    if (runs_.free_pages().value() != free_before + part.value()) {
      return testing::AssertionFailure()
             << "giving back " << part.value() << " of " << live.run.pages.value()
             << " pages freed " << runs_.free_pages().value() - free_before;
    }
    auto inserted = live_.emplace(Key(remaining), Live{remaining, live.tag}).first;
    return NeighboursIntact(inserted);
  }

  testing::AssertionResult Grow() {
    auto it = RandomLive();
    Live& live = it->second;
    std::size_t pages = live.run.pages.value();
    if (pages >= kMaxRunPages.value()) return testing::AssertionSuccess();
    std::size_t room = kMaxRunPages.value() - pages;
    // Mostly by a little, sometimes to exactly the free run after it, sometimes past it.
    std::size_t gap = GapAfter(it);
    std::size_t by = Uniform(1, std::min<std::size_t>(room, 16));
    std::size_t shape = Uniform(0, 3);
    if (shape == 0 && gap >= 1) by = std::min(gap, room);
    if (shape == 1) by = std::min(gap + 1, room);
    PageCount target(pages + by);
    bool should_fit = gap >= by;

    std::size_t free_before = runs_.free_pages().value();
    bool grew = runs_.grow_in_place(live.run, target);
    if (grew != should_fit) {
      return testing::AssertionFailure()
             << "grow_in_place from " << pages << " to " << target.value() << " pages returned "
             << grew << " with " << gap << " free pages after the run";
    }
    if (!grew) {
      if (runs_.free_pages().value() != free_before) {
        return testing::AssertionFailure() << "a failed grow_in_place changed free_pages()";
      }
      return NeighboursIntact(it);
    }
    if (runs_.free_pages().value() + by != free_before) {
      return testing::AssertionFailure() << "grow_in_place by " << by << " pages took "
                                         << free_before - runs_.free_pages().value();
    }
    PageRun grown{live.run.chunk, live.run.first, target};
    live.run = grown;
    FillPattern(grown, live.tag, pages);
    return NeighboursIntact(it);
  }

  testing::AssertionResult Shrink() {
    auto it = RandomLive();
    Live& live = it->second;
    std::size_t pages = live.run.pages.value();
    PageCount target(Uniform(1, pages));
    std::size_t free_before = runs_.free_pages().value();
    runs_.shrink_in_place(live.run, target);
    if (runs_.free_pages().value() != free_before + (pages - target.value())) {
      return testing::AssertionFailure()
             << "shrink_in_place from " << pages << " to " << target.value() << " pages gave back "
             << runs_.free_pages().value() - free_before;
    }
    live.run.pages = target;
    return NeighboursIntact(it);
  }

  testing::AssertionResult AdvanceClockAndPurge() {
    now_ms_ += Uniform(0, 20);
    runs_.advance_clock(now_ms_);
    bool purge_all = std::bernoulli_distribution(0.1)(rng_);
    std::size_t dirty_before = runs_.dirty_pages().value();
    if (!purge_all && std::bernoulli_distribution(0.3)(rng_)) {  // by pages instead of by age
      PageCount want(Uniform(0, 64));
      PageCount purged = runs_.purge_oldest(want);
      if (runs_.dirty_pages().value() + purged.value() != dirty_before ||
          (purged < want && runs_.dirty_pages().value() != 0)) {
        return testing::AssertionFailure() << "purge_oldest(" << want.value() << ") returned "
                                           << purged.value() << " pages but dirty pages went from "
                                           << dirty_before << " to " << runs_.dirty_pages().value();
      }
      return testing::AssertionSuccess();
    }
    std::uint64_t min_age = purge_all ? 0 : Uniform(0, 60);
    PageCount purged = runs_.purge(min_age);
    if (runs_.dirty_pages().value() + purged.value() != dirty_before) {
      return testing::AssertionFailure() << "purge(" << min_age << ") returned " << purged.value()
                                         << " pages but dirty pages went from " << dirty_before
                                         << " to " << runs_.dirty_pages().value();
    }
    if (purge_all) {
      if (runs_.dirty_pages().value() != 0) {
        return testing::AssertionFailure() << "purge(0) left dirty pages";
      }
      if (std::size_t live_chunks = SurveyFreeRuns(PageCount(1)).live_chunks;
          runs_.chunks() != live_chunks) {
        return testing::AssertionFailure()
               << "purge(0) kept " << runs_.chunks() - live_chunks << " wholly free chunks";
      }
    }
    return testing::AssertionSuccess();
  }

  // The runs just before and after `it` in address order, and `it` itself, kept their bytes.
  testing::AssertionResult NeighboursIntact(typename LiveMap::iterator it) {
    if (it != live_.begin()) {
      auto before = std::prev(it);
      if (auto ok = HasPattern(before->second.run, before->second.tag); !ok) return ok;
    }
    if (auto ok = HasPattern(it->second.run, it->second.tag); !ok) return ok;
    return AroundIntact(std::next(it));
  }

  // The runs at `it` and just before it (for the place where a run was just removed).
  testing::AssertionResult AroundIntact(typename LiveMap::iterator it) {
    if (it != live_.end()) {
      if (auto ok = HasPattern(it->second.run, it->second.tag); !ok) return ok;
    }
    if (it != live_.begin()) {
      auto before = std::prev(it);
      if (auto ok = HasPattern(before->second.run, before->second.tag); !ok) return ok;
    }
    return testing::AssertionSuccess();
  }

  testing::AssertionResult AllPatternsIntact() const {
    for (const auto& [key, live] : live_) {
      if (auto ok = HasPattern(live.run, live.tag); !ok) return ok;
    }
    return testing::AssertionSuccess();
  }

  // The checks made after every step.
  testing::AssertionResult CheckAll() const {
    if (auto ok = InvariantsHold(runs_); !ok) return ok;
    std::size_t live_pages = 0, live_chunks = 0;  // (the map keeps a chunk's runs together)
    const PageRun* previous = nullptr;
    for (const auto& [key, live] : live_) {
      const PageRun& run = live.run;
      if (!is_chunk_aligned(run.chunk) || !pal_.owns(run.chunk)) {
        return testing::AssertionFailure() << "a run's chunk is not a chunk of the Pal";
      }
      if (run.pages.value() == 0 || run.first < kFirstRunPage<Runs> ||
          run.end() > PageIndex(kPagesPerChunk)) {
        return testing::AssertionFailure()
               << "the run at page " << run.first.value() << " of " << run.pages.value()
               << " pages is outside its chunk's usable pages";
      }
      if (previous != nullptr && previous->base() + previous->pages.bytes() > run.base()) {
        return testing::AssertionFailure()
               << "live runs overlap: " << static_cast<void*>(previous->base()) << " ("
               << previous->pages.value() << " pages) and " << static_cast<void*>(run.base());
      }
      if (previous == nullptr || previous->chunk != run.chunk) ++live_chunks;
      previous = &run;
      live_pages += run.pages.value();
    }
    std::size_t free_pages = runs_.free_pages().value();
    if (free_pages + live_pages != runs_.chunks() * kUsablePages<Runs>.value()) {
      return testing::AssertionFailure()
             << "free_pages() " << free_pages << " + live pages " << live_pages << " != chunks() "
             << runs_.chunks() << " * usable pages " << kUsablePages<Runs>.value();
    }
    if (runs_.chunks() < live_chunks) {
      return testing::AssertionFailure() << "chunks() is below the chunks holding live runs";
    }
    if (runs_.dirty_pages() > runs_.free_pages()) {
      return testing::AssertionFailure() << "more dirty pages than free pages";
    }
    if (pal_.live_reservations() != static_cast<int>(runs_.chunks())) {
      return testing::AssertionFailure() << "the Pal holds " << pal_.live_reservations()
                                         << " reservations for " << runs_.chunks() << " chunks";
    }
    return testing::AssertionSuccess();
  }

  testing::AssertionResult FreeEverythingAndPurge() {
    while (!live_.empty()) {
      runs_.free(live_.begin()->second.run);
      live_.erase(live_.begin());
      if (auto ok = InvariantsHold(runs_); !ok) return ok << " (freeing everything)";
    }
    runs_.advance_clock(now_ms_);
    runs_.purge(0);
    if (auto ok = InvariantsHold(runs_); !ok) return ok << " (final purge)";
    if (runs_.chunks() != 0 || pal_.live_reservations() != 0 || runs_.free_pages().value() != 0) {
      return testing::AssertionFailure()
             << "after freeing everything and purge(0): " << runs_.chunks() << " chunks, "
             << pal_.live_reservations() << " reservations, " << runs_.free_pages().value()
             << " free pages";
    }
    return testing::AssertionSuccess();
  }

  FakePal pal_{kModelPalCapacity};
  Runs runs_{pal_};
  std::mt19937_64 rng_;
  LiveMap live_;
  std::uint8_t next_tag_ = 1;
  std::uint64_t now_ms_ = 0;
  std::size_t step_ = 0;
  bool dirty_runs_first_;
};

template <class Runs>
class RunManagerModelTest : public testing::Test {};
TYPED_TEST_SUITE(RunManagerModelTest, RunManagerTypes);

// Seeds differ per test so that the tests do not repeat each other's sequence. Each runs with
// the fit's two preferences: one best fit over every free run, and dirty runs first.
template <class Runs>
void ExpectModelHolds(const char* test, std::uint64_t salt, std::size_t steps,
                      const OperationMix& mix) {
  std::uint64_t seed = BaseSeed() ^ salt;
  SCOPED_TRACE(testing::Message() << test << ": replay with PAGEMALLOC_TEST_SEED=" << BaseSeed()
                                  << " (this test's seed " << seed << ")");
  for (bool dirty_runs_first : {false, true}) {
    SCOPED_TRACE(dirty_runs_first ? "dirty runs first" : "one best fit");
    EXPECT_TRUE(RunManagerModel<Runs>(seed, dirty_runs_first).RunSteps(steps, mix));
  }
}

TYPED_TEST(RunManagerModelTest, MixedOperationsMatchTheModel) {
  ExpectModelHolds<TypeParam>("mixed", 0, 60'000,
                              {.alloc = 30,
                               .free_whole = 14,
                               .free_part = 8,
                               .grow = 12,
                               .shrink = 8,
                               .purge = 3,
                               .max_live_runs = 96});
}

TYPED_TEST(RunManagerModelTest, AllocFreeChurnMatchesTheModel) {
  ExpectModelHolds<TypeParam>("churn", 0x1111, 55'000,
                              {.alloc = 50,
                               .free_whole = 45,
                               .free_part = 5,
                               .grow = 0,
                               .shrink = 0,
                               .purge = 1,
                               .max_live_runs = 128});
}

TYPED_TEST(RunManagerModelTest, ResizeHeavyMatchesTheModel) {
  ExpectModelHolds<TypeParam>("resize", 0x2222, 50'000,
                              {.alloc = 20,
                               .free_whole = 10,
                               .free_part = 10,
                               .grow = 35,
                               .shrink = 25,
                               .purge = 2,
                               .max_live_runs = 48});
}

TYPED_TEST(RunManagerModelTest, FewRunsWithFrequentPurgeMatchTheModel) {
  // Few live runs: chunks often become wholly free and are released and taken again.
  ExpectModelHolds<TypeParam>("purge", 0x3333, 40'000,
                              {.alloc = 30,
                               .free_whole = 25,
                               .free_part = 10,
                               .grow = 10,
                               .shrink = 10,
                               .purge = 15,
                               .max_live_runs = 12});
}

// --- The fake OS layer ----------------------------------------------------------------------

// The run managers take a fresh chunk's pages as zeroed (AllocatedRun::zeroed) and its page map
// as unwritten (0), as the Pal contract promises for reserve(): the fake must keep it too, in
// every build (a sanitizer's allocator may fill fresh heap memory with a pattern).
TEST(FakePal, ReserveReturnsZeroFilledMemory) {
  FakePal pal(kDirectedPalCapacity);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(testing::Message() << "reservation " << i);
    auto* chunk = static_cast<std::byte*>(pal.reserve(kChunkSize, kChunkSize));
    ASSERT_NE(chunk, nullptr);
    EXPECT_TRUE(is_chunk_aligned(chunk));
    std::size_t nonzero = 0;
    for (std::size_t b = 0; b < kChunkSize; ++b) nonzero += chunk[b] != std::byte{0};
    EXPECT_EQ(nonzero, 0u) << "the first byte is " << std::to_integer<unsigned>(chunk[0]);
  }
}

TEST(FakePal, RefusesOnDemandAndReusesReleasedRanges) {
  FakePal pal(kDirectedPalCapacity);
  void* first = pal.reserve(kChunkSize, kChunkSize);
  ASSERT_NE(first, nullptr);
  std::memset(first, 0x5a, kPageSize);
  pal.release(first, kChunkSize);
  EXPECT_EQ(pal.live_reservations(), 0);
  void* again = pal.reserve(kChunkSize, kChunkSize);
  EXPECT_EQ(again, first);
  EXPECT_EQ(static_cast<std::byte*>(again)[0], std::byte{0});
  pal.refuse_all(true);
  EXPECT_EQ(pal.reserve(kChunkSize, kChunkSize), nullptr);
  pal.refuse_all(false);
  pal.fail_reserve_in(2);
  EXPECT_NE(pal.reserve(kChunkSize, kChunkSize), nullptr);
  EXPECT_EQ(pal.reserve(kChunkSize, kChunkSize), nullptr);
  EXPECT_NE(pal.reserve(kChunkSize, kChunkSize), nullptr);
  EXPECT_EQ(pal.live_reservations(), 3);
}

// --- Directed tests -------------------------------------------------------------------------

template <class Runs>
class RunManagerTest : public testing::Test {
 protected:
  static constexpr PageCount kUsable = kUsablePages<Runs>;
  static constexpr PageIndex kFirst = kFirstRunPage<Runs>;

  PageRun Alloc(std::size_t pages) {
    AllocatedRun got = runs_.alloc(PageCount(pages));
    EXPECT_TRUE(got.run) << "alloc(" << pages << ")";
    EXPECT_EQ(got.run.pages.value(), pages);
    return got.run;
  }

  // Allocates runs until no free page is left in the existing chunks. Requires: their free
  // pages form runs of kMaxRunPages or of all that is left (as in a chunk carved from its start).
  std::vector<PageRun> FillExistingChunks() {
    std::vector<PageRun> fillers;
    std::size_t chunks = runs_.chunks();
    while (runs_.free_pages().value() > 0) {
      std::size_t n = std::min(runs_.free_pages().value(), kMaxRunPages.value());
      fillers.push_back(Alloc(n));
      if (runs_.chunks() != chunks) {
        ADD_FAILURE() << "filling the existing chunks took a new chunk";
        break;
      }
    }
    return fillers;
  }

  FakePal pal_{kDirectedPalCapacity};
  Runs runs_{pal_};
};
TYPED_TEST_SUITE(RunManagerTest, RunManagerTypes);

TYPED_TEST(RunManagerTest, FreshRunManagerIsEmpty) {
  EXPECT_EQ(this->runs_.chunks(), 0u);
  EXPECT_EQ(this->runs_.free_pages().value(), 0u);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 0u);
  EXPECT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.purge(0).value(), 0u);
}

TYPED_TEST(RunManagerTest, FirstAllocTakesOneZeroedChunk) {
  AllocatedRun got = this->runs_.alloc(PageCount(3));
  ASSERT_TRUE(got.run);
  EXPECT_TRUE(got.zeroed);
  EXPECT_TRUE(ReadsZero(got.run));
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_EQ(this->pal_.live_reservations(), 1);
  EXPECT_TRUE(is_chunk_aligned(got.run.chunk));
  EXPECT_GE(got.run.first, TestFixture::kFirst);
  EXPECT_EQ(this->runs_.free_pages(), TestFixture::kUsable - PageCount(3));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, AdjacentFreesCoalesceIntoOneRun) {
  for (bool left_first : {true, false}) {
    SCOPED_TRACE(left_first ? "left run freed first" : "right run freed first");
    PageRun left = this->Alloc(7);
    PageRun right = this->Alloc(12);
    ASSERT_EQ(right.first, left.end()) << "a fresh chunk is carved from its start";
    FillPattern(left, 1);
    FillPattern(right, 2);
    std::vector<PageRun> fillers = this->FillExistingChunks();
    ASSERT_EQ(this->runs_.free_pages().value(), 0u);
    std::size_t chunks = this->runs_.chunks();

    this->runs_.free(left_first ? left : right);
    ASSERT_TRUE(InvariantsHold(this->runs_));
    this->runs_.free(left_first ? right : left);
    ASSERT_TRUE(InvariantsHold(this->runs_));
    EXPECT_EQ(this->runs_.free_pages().value(), 19u);

    // The only free run is the coalesced one: one alloc of the combined size takes it.
    AllocatedRun both = this->runs_.alloc(PageCount(19));
    ASSERT_TRUE(both.run);
    EXPECT_EQ(both.run.base(), left.base());
    EXPECT_EQ(this->runs_.chunks(), chunks);
    EXPECT_EQ(this->runs_.free_pages().value(), 0u);
    EXPECT_FALSE(both.zeroed) << "the pages were used and not purged";
    EXPECT_TRUE(InvariantsHold(this->runs_));

    this->runs_.free(both.run);
    for (PageRun filler : fillers) this->runs_.free(filler);
    ASSERT_TRUE(InvariantsHold(this->runs_));
  }
}

TYPED_TEST(RunManagerTest, FreeBetweenTwoFreeRunsCoalescesAllThree) {
  PageRun a = this->Alloc(5);
  PageRun b = this->Alloc(6);
  PageRun c = this->Alloc(7);
  PageRun guard = this->Alloc(1);
  std::vector<PageRun> fillers = this->FillExistingChunks();
  FillPattern(guard, 9);
  this->runs_.free(a);
  this->runs_.free(c);
  this->runs_.free(b);
  ASSERT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.free_pages().value(), 18u);
  AllocatedRun all = this->runs_.alloc(PageCount(18));
  ASSERT_TRUE(all.run);
  EXPECT_EQ(all.run.base(), a.base());
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_TRUE(HasPattern(guard, 9));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, FreeingEverythingLeavesOneWholeFreeRun) {
  std::vector<PageRun> runs;
  for (std::size_t n : {3, 1, 40, 2, 17, 9}) runs.push_back(this->Alloc(n));
  std::shuffle(runs.begin(), runs.end(), std::mt19937_64(BaseSeed()));
  for (PageRun run : runs) {
    this->runs_.free(run);
    ASSERT_TRUE(InvariantsHold(this->runs_));
  }
  EXPECT_EQ(this->runs_.free_pages(), TestFixture::kUsable);
  AllocatedRun biggest = this->runs_.alloc(kMaxRunPages);
  ASSERT_TRUE(biggest.run);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_EQ(biggest.run.first, TestFixture::kFirst);
}

TYPED_TEST(RunManagerTest, AllocTakesTheBestFittingFreeRun) {
  // Free runs of 3, 8 and 5 pages between live walls, then the rest of the chunk.
  PageRun three = this->Alloc(3);
  this->Alloc(1);
  PageRun eight = this->Alloc(8);
  this->Alloc(1);
  PageRun five = this->Alloc(5);
  this->Alloc(1);
  this->runs_.free(three);
  this->runs_.free(eight);
  this->runs_.free(five);
  ASSERT_TRUE(InvariantsHold(this->runs_));

  AllocatedRun four = this->runs_.alloc(PageCount(4));
  ASSERT_TRUE(four.run);
  EXPECT_EQ(four.run.base(), five.base()) << "4 pages fit best in the 5-page run";
  AllocatedRun two = this->runs_.alloc(PageCount(2));
  ASSERT_TRUE(two.run);
  EXPECT_EQ(two.run.base(), three.base()) << "2 pages fit best in the 3-page run";
  AllocatedRun six = this->runs_.alloc(PageCount(6));
  ASSERT_TRUE(six.run);
  EXPECT_EQ(six.run.base(), eight.base()) << "6 pages fit best in the 8-page run";
  AllocatedRun nine = this->runs_.alloc(PageCount(9));
  ASSERT_TRUE(nine.run);
  EXPECT_GT(nine.run.base(), five.base()) << "9 pages fit only in the rest of the chunk";
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, GrowInPlaceTakesTheFollowingFreeRun) {
  PageRun run = this->Alloc(4);
  FillPattern(run, 3);
  PageCount free_before = this->runs_.free_pages();

  ASSERT_TRUE(this->runs_.grow_in_place(run, PageCount(20)));
  run.pages = PageCount(20);
  EXPECT_EQ(this->runs_.free_pages(), free_before - PageCount(16));
  EXPECT_TRUE(InvariantsHold(this->runs_));
  FillPattern(run, 3, 4);

  // The next run is carved right after the grown one: nothing overlaps.
  PageRun next = this->Alloc(10);
  EXPECT_GE(next.base(), run.base() + run.pages.bytes());
  FillPattern(next, 4);
  EXPECT_TRUE(HasPattern(run, 3));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, GrowInPlaceFailsWhenTheNextRunIsAllocated) {
  PageRun run = this->Alloc(4);
  PageRun next = this->Alloc(6);
  ASSERT_EQ(next.first, run.end());
  FillPattern(run, 5);
  FillPattern(next, 6);
  PageCount free_before = this->runs_.free_pages();

  EXPECT_FALSE(this->runs_.grow_in_place(run, PageCount(5)));
  EXPECT_EQ(this->runs_.free_pages(), free_before);
  EXPECT_TRUE(HasPattern(run, 5));
  EXPECT_TRUE(HasPattern(next, 6));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  // Growing to its own length or less is a success that changes nothing.
  EXPECT_TRUE(this->runs_.grow_in_place(run, PageCount(4)));
  EXPECT_TRUE(this->runs_.grow_in_place(run, PageCount(2)));
  EXPECT_EQ(this->runs_.free_pages(), free_before);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, GrowInPlaceFailsWhenTheFollowingFreeRunIsTooShort) {
  PageRun run = this->Alloc(4);
  PageRun hole = this->Alloc(3);
  PageRun wall = this->Alloc(2);
  ASSERT_EQ(hole.first, run.end());
  ASSERT_EQ(wall.first, hole.end());
  this->runs_.free(hole);  // three free pages between run and wall
  FillPattern(run, 7);
  FillPattern(wall, 8);
  PageCount free_before = this->runs_.free_pages();

  EXPECT_FALSE(this->runs_.grow_in_place(run, PageCount(8)));
  EXPECT_EQ(this->runs_.free_pages(), free_before);
  EXPECT_TRUE(InvariantsHold(this->runs_));

  EXPECT_TRUE(this->runs_.grow_in_place(run, PageCount(7)));  // exactly the hole
  EXPECT_EQ(this->runs_.free_pages(), free_before - PageCount(3));
  run.pages = PageCount(7);
  FillPattern(run, 7, 4);
  EXPECT_TRUE(HasPattern(run, 7));
  EXPECT_TRUE(HasPattern(wall, 8));
  EXPECT_TRUE(InvariantsHold(this->runs_));
  EXPECT_FALSE(this->runs_.grow_in_place(run, PageCount(8)));
}

TYPED_TEST(RunManagerTest, ShrinkInPlaceGivesPagesBackThatCoalesceWithTheFollowingFreeRun) {
  PageRun run = this->Alloc(30);
  FillPattern(run, 10);
  PageCount free_before = this->runs_.free_pages();

  this->runs_.shrink_in_place(run, PageCount(10));
  run.pages = PageCount(10);
  EXPECT_EQ(this->runs_.free_pages(), free_before + PageCount(20));
  EXPECT_TRUE(HasPattern(run, 10));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  // The 20 pages joined the free run after them: a run longer than that free run was before
  // the shrink fits in this chunk, right after the shrunk run.
  PageCount longer = std::min(TestFixture::kUsable - PageCount(10), kMaxRunPages);
  ASSERT_GT(longer, TestFixture::kUsable - PageCount(30));
  AllocatedRun after = this->runs_.alloc(longer);
  ASSERT_TRUE(after.run);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_EQ(after.run.first, run.end());
  EXPECT_TRUE(HasPattern(run, 10));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, ShrinkThenGrowBackInPlace) {
  PageRun run = this->Alloc(16);
  PageRun wall = this->Alloc(1);
  FillPattern(run, 11);
  FillPattern(wall, 12);
  this->runs_.shrink_in_place(run, PageCount(5));
  EXPECT_TRUE(InvariantsHold(this->runs_));
  run.pages = PageCount(5);
  EXPECT_TRUE(this->runs_.grow_in_place(run, PageCount(16)));
  run.pages = PageCount(16);
  EXPECT_FALSE(this->runs_.grow_in_place(run, PageCount(17)));
  EXPECT_TRUE(HasPattern(PageRun{run.chunk, run.first, PageCount(5)}, 11));
  EXPECT_TRUE(HasPattern(wall, 12));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  // Shrinking to its own length changes nothing.
  PageCount free_before = this->runs_.free_pages();
  this->runs_.shrink_in_place(run, PageCount(16));
  EXPECT_EQ(this->runs_.free_pages(), free_before);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, TrimHeadFreesTheFirstPagesAndKeepsTheRest) {
  PageRun run = this->Alloc(12);
  PageRun wall = this->Alloc(1);
  FillPattern(run, 13);
  FillPattern(wall, 14);
  PageCount free_before = this->runs_.free_pages();

  this->runs_.trim_head(run, PageCount(3));
  ASSERT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.free_pages(), free_before + PageCount(3));
  PageRun rest{run.chunk, run.first + PageCount(3), PageCount(9)};
  EXPECT_TRUE(HasPattern(rest, 13));
  EXPECT_TRUE(HasPattern(wall, 14));

  // The head is a free run of its own: an exact fit takes it back.
  AllocatedRun head = this->runs_.alloc(PageCount(3));
  ASSERT_TRUE(head.run);
  EXPECT_EQ(head.run.base(), run.base());
  EXPECT_TRUE(HasPattern(rest, 13));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  // The rest is a run of its own: it can be trimmed again, shrunk and freed whole.
  this->runs_.trim_head(rest, PageCount(2));
  rest = PageRun{rest.chunk, rest.first + PageCount(2), PageCount(7)};
  this->runs_.shrink_in_place(rest, PageCount(4));
  rest.pages = PageCount(4);
  ASSERT_TRUE(InvariantsHold(this->runs_));
  EXPECT_TRUE(HasPattern(rest, 13));
  this->runs_.free(rest);
  EXPECT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.free_pages(), free_before + PageCount(12) - head.run.pages);
}

TYPED_TEST(RunManagerTest, TrimHeadCoalescesWithTheFreeRunBeforeIt) {
  PageRun before = this->Alloc(5);
  PageRun run = this->Alloc(10);
  PageRun wall = this->Alloc(1);
  std::vector<PageRun> fillers = this->FillExistingChunks();
  FillPattern(run, 30);
  FillPattern(wall, 31);
  this->runs_.free(before);
  this->runs_.trim_head(run, PageCount(4));
  ASSERT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.free_pages().value(), 9u);

  AllocatedRun joined = this->runs_.alloc(PageCount(9));
  ASSERT_TRUE(joined.run);
  EXPECT_EQ(joined.run.base(), before.base());
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_TRUE(HasPattern(PageRun{run.chunk, run.first + PageCount(4), PageCount(6)}, 30));
  EXPECT_TRUE(HasPattern(wall, 31));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, TrimHeadOfNoPagesChangesNothing) {
  PageRun run = this->Alloc(6);
  this->Alloc(1);
  PageCount free_before = this->runs_.free_pages();
  this->runs_.trim_head(run, PageCount(0));
  EXPECT_EQ(this->runs_.free_pages(), free_before);
  EXPECT_TRUE(InvariantsHold(this->runs_));
  this->runs_.free(run);
  EXPECT_EQ(this->runs_.free_pages(), free_before + PageCount(6));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

// The page where a run is later split may have been the end of a free run before: the old
// boundary tag there must not be taken for a free neighbour.
TYPED_TEST(RunManagerTest, TrimHeadOfARunBuiltFromCoalescedRunsKeepsTheRest) {
  PageRun first = this->Alloc(10);
  PageRun second = this->Alloc(10);
  PageRun wall = this->Alloc(1);
  this->runs_.free(second);
  this->runs_.free(first);  // one free run of 20 pages; its page 10 was a free run's first page
  PageRun whole = this->Alloc(20);
  ASSERT_EQ(whole.base(), first.base());
  FillPattern(whole, 15);
  FillPattern(wall, 16);
  PageCount free_before = this->runs_.free_pages();

  this->runs_.trim_head(whole, PageCount(10));
  ASSERT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.free_pages(), free_before + PageCount(10));
  PageRun rest{whole.chunk, whole.first + PageCount(10), PageCount(10)};
  EXPECT_TRUE(HasPattern(rest, 15));
  // A run longer than the freed head must not be placed over the rest.
  AllocatedRun next = this->runs_.alloc(PageCount(15));
  ASSERT_TRUE(next.run);
  EXPECT_TRUE(next.run.base() >= rest.base() + rest.pages.bytes() ||
              next.run.base() + next.run.pages.bytes() <= rest.base())
      << "alloc(15) returned a run over the live rest of the trimmed run";
  this->runs_.free(rest);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, ShrinkOfARunBuiltFromCoalescedRunsKeepsTheRest) {
  PageRun first = this->Alloc(10);
  PageRun second = this->Alloc(10);
  PageRun wall = this->Alloc(1);
  this->runs_.free(first);
  this->runs_.free(second);  // one free run of 20 pages; its page 9 was a free run's last page
  PageRun whole = this->Alloc(20);
  ASSERT_EQ(whole.base(), first.base());
  FillPattern(whole, 17);
  FillPattern(wall, 18);
  PageCount free_before = this->runs_.free_pages();

  this->runs_.shrink_in_place(whole, PageCount(10));
  ASSERT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.free_pages(), free_before + PageCount(10));
  PageRun rest{whole.chunk, whole.first, PageCount(10)};
  EXPECT_TRUE(HasPattern(rest, 17));
  AllocatedRun next = this->runs_.alloc(PageCount(15));
  ASSERT_TRUE(next.run);
  EXPECT_TRUE(next.run.base() >= rest.base() + rest.pages.bytes() ||
              next.run.base() + next.run.pages.bytes() <= rest.base())
      << "alloc(15) returned a run over the live rest of the shrunk run";
  this->runs_.free(rest);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

// After growing into the free run that follows, the grown run's interior holds that free
// run's old first tag; trimming or shrinking the grown run there must not read it.
TYPED_TEST(RunManagerTest, TrimAndShrinkOfAGrownRunKeepTheRest) {
  PageRun run = this->Alloc(4);
  PageRun next = this->Alloc(8);
  PageRun wall = this->Alloc(1);
  this->runs_.free(next);  // a free run of 8 pages right after run
  ASSERT_TRUE(this->runs_.grow_in_place(run, PageCount(12)));
  run.pages = PageCount(12);
  FillPattern(run, 32);
  FillPattern(wall, 33);
  PageCount free_before = this->runs_.free_pages();

  this->runs_.trim_head(run, PageCount(4));  // splits at the grown-into run's first page
  ASSERT_TRUE(InvariantsHold(this->runs_));
  PageRun rest{run.chunk, run.first + PageCount(4), PageCount(8)};
  EXPECT_EQ(this->runs_.free_pages(), free_before + PageCount(4));
  EXPECT_TRUE(HasPattern(rest, 32));
  this->runs_.shrink_in_place(rest, PageCount(3));
  rest.pages = PageCount(3);
  ASSERT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.free_pages(), free_before + PageCount(9));
  EXPECT_TRUE(HasPattern(rest, 32));
  EXPECT_TRUE(HasPattern(wall, 33));
}

TYPED_TEST(RunManagerTest, AllocOfMaxRunPagesWorks) {
  AllocatedRun a = this->runs_.alloc(kMaxRunPages);
  ASSERT_TRUE(a.run);
  EXPECT_EQ(a.run.pages, kMaxRunPages);
  EXPECT_GE(a.run.first, TestFixture::kFirst);
  EXPECT_LE(a.run.end().value(), kPagesPerChunk);
  FillPattern(a.run, 19);

  AllocatedRun b = this->runs_.alloc(kMaxRunPages);
  ASSERT_TRUE(b.run);
  EXPECT_NE(b.run.chunk, a.run.chunk);
  EXPECT_EQ(this->runs_.chunks(), 2u);
  FillPattern(b.run, 20);
  EXPECT_TRUE(HasPattern(a.run, 19));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  this->runs_.free(a.run);
  this->runs_.free(b.run);
  EXPECT_EQ(this->runs_.free_pages(), TestFixture::kUsable + TestFixture::kUsable);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, FreedRunsAreDirty) {
  PageRun a = this->Alloc(8);
  PageRun wall = this->Alloc(1);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 0u) << "a fresh chunk is clean";
  this->runs_.free(a);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 8u);
  this->runs_.free(wall);  // coalesces with a and the clean rest: all of it may be dirty now
  EXPECT_GE(this->runs_.dirty_pages().value(), 9u);
  EXPECT_LE(this->runs_.dirty_pages(), this->runs_.free_pages());
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

// Dirty runs first (run_manager_core.h): pages handed out and freed are reused before fresh
// ones, even where the fresh ones are the better fit; with one best fit over every free run,
// the fresh ones are taken.
TYPED_TEST(RunManagerTest, FreedPagesAreReusedBeforeAShorterFreshTail) {
  const std::size_t usable = TestFixture::kUsable.value();
  for (bool dirty_runs_first : {true, false}) {
    SCOPED_TRACE(dirty_runs_first ? "dirty runs first" : "one best fit");
    FakePal pal{kDirectedPalCapacity};
    TypeParam runs{pal};
    runs.set_dirty_runs_first(dirty_runs_first);
    AllocatedRun freed = runs.alloc(PageCount(100));
    AllocatedRun wall = runs.alloc(PageCount(1));
    AllocatedRun filler = runs.alloc(PageCount(usable - 100 - 1 - 20));  // 20 fresh pages left
    ASSERT_TRUE(freed.run && wall.run && filler.run);
    runs.free(freed.run);
    AllocatedRun got = runs.alloc(PageCount(10));
    ASSERT_TRUE(got.run);
    if (dirty_runs_first) {
      EXPECT_EQ(got.run.base(), freed.run.base()) << "the freed pages, not the fresh tail";
      EXPECT_FALSE(got.zeroed);
    } else {
      EXPECT_EQ(got.run.first, filler.run.end()) << "the shortest free run that fits";
      EXPECT_TRUE(got.zeroed);
    }
    EXPECT_TRUE(InvariantsHold(runs));
    for (const AllocatedRun& r : {got, wall, filler}) runs.free(r.run);
    EXPECT_TRUE(InvariantsHold(runs));
  }
}

// A freed run that coalesces with more than 1/8 of its pages clean comes after the mostly
// dirty runs; a run of one page freed beside a few clean ones stays among them.
TYPED_TEST(RunManagerTest, ARunJoinedToManyCleanPagesComesAfterTheMostlyDirtyOnes) {
  const std::size_t usable = TestFixture::kUsable.value();
  AllocatedRun dirty = this->runs_.alloc(PageCount(usable - 111));
  AllocatedRun wall = this->runs_.alloc(PageCount(1));
  AllocatedRun small = this->runs_.alloc(PageCount(8));  // 102 fresh pages after it
  ASSERT_TRUE(dirty.run && wall.run && small.run);
  this->runs_.free(small.run);  // 110 free pages, 102 of them clean
  this->runs_.free(dirty.run);  // longer than those 110, all dirty
  AllocatedRun got = this->runs_.alloc(PageCount(10));
  ASSERT_TRUE(got.run);
  EXPECT_EQ(got.run.base(), dirty.run.base())
      << "the mostly dirty run, though the run with the fresh tail fits better";
  EXPECT_TRUE(InvariantsHold(this->runs_));

  this->runs_.free(got.run);
  this->runs_.purge(0);  // every run clean: one best fit again
  AllocatedRun after_purge = this->runs_.alloc(PageCount(10));
  ASSERT_TRUE(after_purge.run);
  EXPECT_EQ(after_purge.run.first, wall.run.end()) << "the shortest free run that fits";
  EXPECT_TRUE(InvariantsHold(this->runs_));
  this->runs_.free(after_purge.run);
  this->runs_.free(wall.run);
}

TYPED_TEST(RunManagerTest, PurgeTakesOnlyRunsFreeForAtLeastTheMinimumAge) {
  PageRun older = this->Alloc(4);
  PageRun wall1 = this->Alloc(1);
  PageRun newer = this->Alloc(6);
  PageRun wall2 = this->Alloc(1);
  FillPattern(wall1, 21);
  FillPattern(wall2, 22);

  this->runs_.advance_clock(1000);
  this->runs_.free(older);
  this->runs_.advance_clock(1050);
  this->runs_.free(newer);
  this->runs_.advance_clock(1100);
  ASSERT_EQ(this->runs_.dirty_pages().value(), 10u);

  // older has been free for 100 ms, newer for 50 ms.
  EXPECT_EQ(this->runs_.purge(101).value(), 0u);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 10u);
  EXPECT_EQ(this->runs_.purge(100).value(), 4u);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 6u);
  EXPECT_TRUE(ReadsZero(older));
  EXPECT_TRUE(InvariantsHold(this->runs_));
  EXPECT_EQ(this->runs_.purge(51).value(), 0u);
  EXPECT_EQ(this->runs_.purge(50).value(), 6u);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 0u);
  EXPECT_EQ(this->runs_.purge(0).value(), 0u) << "nothing is left to purge";
  EXPECT_EQ(this->runs_.chunks(), 1u) << "the chunk still holds live runs";
  EXPECT_TRUE(HasPattern(wall1, 21));
  EXPECT_TRUE(HasPattern(wall2, 22));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, PurgeOldestTakesTheOldestRunsUntilEnoughPages) {
  PageRun oldest = this->Alloc(4);
  PageRun wall1 = this->Alloc(1);
  PageRun middle = this->Alloc(6);
  PageRun wall2 = this->Alloc(1);
  PageRun youngest = this->Alloc(3);
  PageRun wall3 = this->Alloc(1);
  FillPattern(wall1, 31);
  FillPattern(wall2, 32);
  FillPattern(wall3, 33);
  this->runs_.advance_clock(10);
  this->runs_.free(oldest);
  this->runs_.advance_clock(20);
  this->runs_.free(middle);
  this->runs_.advance_clock(30);
  this->runs_.free(youngest);
  ASSERT_EQ(this->runs_.dirty_pages().value(), 13u);

  EXPECT_EQ(this->runs_.purge_oldest(PageCount(0)).value(), 0u);
  // 3 pages asked: the oldest run (4) is enough, and whole runs go.
  EXPECT_EQ(this->runs_.purge_oldest(PageCount(3)).value(), 4u);
  EXPECT_TRUE(ReadsZero(oldest));
  EXPECT_EQ(this->runs_.dirty_pages().value(), 9u);
  // 7 pages: the middle run (6) is not enough, the youngest (3) goes too.
  EXPECT_EQ(this->runs_.purge_oldest(PageCount(7)).value(), 9u);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 0u);
  EXPECT_EQ(this->runs_.purge_oldest(PageCount(100)).value(), 0u) << "nothing is dirty";
  EXPECT_TRUE(HasPattern(wall1, 31));
  EXPECT_TRUE(HasPattern(wall2, 32));
  EXPECT_TRUE(HasPattern(wall3, 33));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, PurgeWithAHugeMinimumAgePurgesNothing) {
  PageRun a = this->Alloc(4);
  this->Alloc(1);
  this->runs_.advance_clock(10);
  this->runs_.free(a);
  this->runs_.advance_clock(20);
  EXPECT_EQ(this->runs_.purge(UINT64_MAX).value(), 0u)
      << "the run has been free for 10 ms, not for 2^64-1";
  EXPECT_EQ(this->runs_.purge(UINT64_MAX - 5).value(), 0u);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 4u);
}

TYPED_TEST(RunManagerTest, PurgedPagesReadZeroAndAllocOverThemReportsZeroed) {
  PageRun a = this->Alloc(8);
  PageRun wall = this->Alloc(1);
  FillPattern(a, 23);
  FillPattern(wall, 24);
  std::size_t decommitted_before = this->pal_.decommitted_bytes();

  this->runs_.free(a);
  EXPECT_EQ(this->runs_.purge(0).value(), 8u);
  EXPECT_GE(this->pal_.decommitted_bytes() - decommitted_before, a.pages.bytes());
  EXPECT_TRUE(ReadsZero(a));
  EXPECT_EQ(this->runs_.dirty_pages().value(), 0u);
  EXPECT_TRUE(HasPattern(wall, 24));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  AllocatedRun again = this->runs_.alloc(PageCount(8));
  ASSERT_TRUE(again.run);
  EXPECT_EQ(again.run.base(), a.base());
  EXPECT_TRUE(again.zeroed);
  FillPattern(again.run, 25);

  // A run reused without a purge in between is not zeroed.
  this->runs_.free(again.run);
  AllocatedRun dirty = this->runs_.alloc(PageCount(8));
  ASSERT_TRUE(dirty.run);
  EXPECT_EQ(dirty.run.base(), a.base());
  EXPECT_FALSE(dirty.zeroed);
  EXPECT_TRUE(HasPattern(dirty.run, 25));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, AllocOfPartOfAPurgedRunReportsZeroed) {
  PageRun a = this->Alloc(20);
  this->Alloc(1);
  FillPattern(a, 26);
  this->runs_.free(a);
  this->runs_.purge(0);
  AllocatedRun part = this->runs_.alloc(PageCount(20 - 1));
  ASSERT_TRUE(part.run);
  EXPECT_TRUE(part.zeroed);
  EXPECT_TRUE(ReadsZero(part.run));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, WhollyFreeChunkIsReleasedOnPurge) {
  PageRun in_first = this->Alloc(10);
  this->FillExistingChunks();  // the first chunk stays full
  PageRun in_second = this->Alloc(10);
  ASSERT_EQ(this->runs_.chunks(), 2u);
  ASSERT_EQ(this->pal_.live_reservations(), 2);
  FillPattern(in_first, 27);

  this->runs_.free(in_second);
  this->runs_.advance_clock(500);
  EXPECT_EQ(this->runs_.purge(1000).value(), 0u) << "too young to purge";
  EXPECT_EQ(this->runs_.chunks(), 2u);
  EXPECT_EQ(this->pal_.live_reservations(), 2);

  PageCount purged = this->runs_.purge(500);
  EXPECT_EQ(purged, TestFixture::kUsable);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_EQ(this->pal_.live_reservations(), 1);
  EXPECT_EQ(this->runs_.free_pages().value(), 0u);
  EXPECT_EQ(this->runs_.dirty_pages().value(), 0u);
  EXPECT_TRUE(HasPattern(in_first, 27));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  // The run manager takes a chunk again when it needs one.
  AllocatedRun again = this->runs_.alloc(PageCount(10));
  ASSERT_TRUE(again.run);
  EXPECT_TRUE(again.zeroed);
  EXPECT_EQ(this->runs_.chunks(), 2u);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, ChunkWithLiveRunsIsNotReleasedOnPurge) {
  PageRun a = this->Alloc(10);
  PageRun b = this->Alloc(10);
  this->runs_.free(a);
  this->runs_.purge(0);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_EQ(this->pal_.live_reservations(), 1);
  this->runs_.free(b);
  this->runs_.purge(0);
  EXPECT_EQ(this->runs_.chunks(), 0u);
  EXPECT_EQ(this->pal_.live_reservations(), 0);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, RefusedChunkFailsTheAllocAndLeavesEverythingIntact) {
  PageRun big = this->Alloc(kMaxRunPages.value());
  FillPattern(big, 28);
  PageCount free_before = this->runs_.free_pages();

  this->pal_.refuse_all(true);
  AllocatedRun refused = this->runs_.alloc(kMaxRunPages);
  EXPECT_FALSE(refused.run);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_EQ(this->runs_.free_pages(), free_before);
  EXPECT_TRUE(HasPattern(big, 28));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  // What fits in the existing chunk is still served.
  AllocatedRun small = this->runs_.alloc(PageCount(1));
  EXPECT_TRUE(small.run);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_TRUE(InvariantsHold(this->runs_));

  this->pal_.refuse_all(false);
  AllocatedRun later = this->runs_.alloc(kMaxRunPages);
  ASSERT_TRUE(later.run);
  EXPECT_EQ(this->runs_.chunks(), 2u);
  FillPattern(later.run, 29);
  EXPECT_TRUE(HasPattern(big, 28));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

// A clean (purged or never used) run is committed before it is handed out; when the OS
// refuses, the alloc or the grow fails and every run stays as it was.
TYPED_TEST(RunManagerTest, RefusedCommitFailsTheAllocOrGrowAndLosesNothing) {
  PageRun kept = this->Alloc(4);
  FillPattern(kept, 31);
  PageCount free_before = this->runs_.free_pages();
  const int commits_before = this->pal_.commit_calls();

  this->pal_.refuse_commit(true);
  EXPECT_FALSE(this->runs_.alloc(PageCount(8)).run);
  EXPECT_FALSE(this->runs_.grow_in_place(kept, PageCount(6)));
  EXPECT_GT(this->pal_.commit_calls(), commits_before);
  EXPECT_EQ(this->runs_.free_pages(), free_before);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_TRUE(HasPattern(kept, 31));
  EXPECT_TRUE(InvariantsHold(this->runs_));

  this->pal_.refuse_commit(false);
  AllocatedRun later = this->runs_.alloc(PageCount(8));
  ASSERT_TRUE(later.run);
  EXPECT_TRUE(later.zeroed);
  EXPECT_TRUE(this->runs_.grow_in_place(kept, PageCount(6)) ||
              later.run.first == kept.end());  // the alloc may have taken the pages after it
  EXPECT_TRUE(HasPattern(kept, 31));
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, OneRefusedReserveFailsOneAlloc) {
  this->pal_.fail_reserve_in(1);
  EXPECT_FALSE(this->runs_.alloc(PageCount(1)).run);
  EXPECT_EQ(this->runs_.chunks(), 0u);
  EXPECT_EQ(this->runs_.free_pages().value(), 0u);
  EXPECT_TRUE(InvariantsHold(this->runs_));
  AllocatedRun next = this->runs_.alloc(PageCount(1));
  EXPECT_TRUE(next.run);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, CountersFollowTheOperations) {
  PageRun a = this->Alloc(4);                               // takes a chunk, splits its free run
  PageRun b = this->Alloc(4);                               // splits again
  ASSERT_TRUE(this->runs_.grow_in_place(b, PageCount(6)));  // splits the rest
  b.pages = PageCount(6);
  this->runs_.free(a);  // between the header and b: nothing to coalesce
  this->runs_.free(b);  // coalesces with a and with the rest
  const RunCounterValues& counters = this->runs_.counters();

  if constexpr (kCountersEnabled) {
    EXPECT_EQ(counters.operations, 5u);
    EXPECT_EQ(counters.chunks_added, 1u);
    EXPECT_EQ(counters.splits, 3u);
    EXPECT_EQ(counters.coalesces, 2u);
    EXPECT_EQ(counters.grows_in_place, 1u);
    if (std::string(TypeParam::kName) == "pagemap") {
      EXPECT_EQ(counters.nodes_visited, 0u);  // lists and bitmaps only: no tree
      EXPECT_EQ(counters.rotations, 0u);
    } else {
      EXPECT_GE(counters.nodes_visited, 2u);  // every alloc searches the by-size tree
    }
    EXPECT_GE(counters.map_reads, 2u);    // each alloc reads the tag of the run it takes
    EXPECT_GE(counters.map_writes, 10u);  // two boundary tags per run written
  } else {
    EXPECT_EQ(counters.operations, 0u);
    EXPECT_EQ(counters.nodes_visited, 0u);
    EXPECT_EQ(counters.rotations, 0u);
    EXPECT_EQ(counters.map_reads, 0u);
    EXPECT_EQ(counters.map_writes, 0u);
    EXPECT_EQ(counters.splits, 0u);
    EXPECT_EQ(counters.coalesces, 0u);
    EXPECT_EQ(counters.grows_in_place, 0u);
    EXPECT_EQ(counters.chunks_added, 0u);
  }
  EXPECT_TRUE(InvariantsHold(this->runs_));
}

TYPED_TEST(RunManagerTest, NameIsNotEmpty) { EXPECT_FALSE(std::string(TypeParam::kName).empty()); }

// ---------------------------------------------------------------------------------------------
// The tree of allocated runs (allocated_runs_tree.h): it knows every allocated run's length
// through splits, frees, grows, shrinks and trimmed heads, and nothing of freed ones.

TEST(AllocatedRunsTree, KnowsEachAllocatedRunsLengthAndForgetsFreedOnes) {
  FakePal pal(kDirectedPalCapacity);
  AllocatedRunsTree<RbtreeRuns<FakePal>> runs(pal);
  std::vector<PageRun> live;
  for (std::size_t n : {1, 3, 8, 2, 17}) live.push_back(runs.alloc(PageCount(n)).run);
  for (const PageRun& r : live) EXPECT_EQ(runs.pages_of(r.base()), r.pages);
  runs.free(live[1]);
  EXPECT_EQ(runs.pages_of(live[1].base()).value(), 0u) << "a freed run is still in the tree";
  EXPECT_EQ(runs.pages_of(live[1].base() + kPageSize).value(), 0u);
  // The freed pages after live[0] let it grow; then shrink it again.
  ASSERT_TRUE(runs.grow_in_place(live[0], PageCount(4)));
  EXPECT_EQ(runs.pages_of(live[0].base()).value(), 4u);
  runs.shrink_in_place(PageRun{live[0].chunk, live[0].first, PageCount(4)}, PageCount(2));
  EXPECT_EQ(runs.pages_of(live[0].base()).value(), 2u);
  // A trimmed head moves the run's key: found at its new start only.
  runs.trim_head(live[2], PageCount(5));
  EXPECT_EQ(runs.pages_of(live[2].base()).value(), 0u);
  EXPECT_EQ(runs.pages_of(live[2].base() + PageCount(5).bytes()).value(), 3u);
  EXPECT_TRUE(InvariantsHold(runs));
  runs.free(PageRun{live[0].chunk, live[0].first, PageCount(2)});
  runs.free(PageRun{live[2].chunk, live[2].first + PageCount(5), PageCount(3)});
  runs.free(live[3]);
  runs.free(live[4]);
  for (const PageRun& r : live) EXPECT_EQ(runs.pages_of(r.base()).value(), 0u);
  EXPECT_TRUE(InvariantsHold(runs));
}

// Its searches count as the rbtree variant's own: more nodes visited for the same calls.
TEST(AllocatedRunsTree, ItsSearchesCountAsTreeWork) {
  if (!kCountersEnabled) GTEST_SKIP() << "built without PAGEMALLOC_COUNTERS";
  FakePal plain_pal(kDirectedPalCapacity), tracked_pal(kDirectedPalCapacity);
  RbtreeRuns<FakePal> plain(plain_pal);
  AllocatedRunsTree<RbtreeRuns<FakePal>> tracked(tracked_pal);
  for (int i = 0; i < 64; ++i) {
    plain.free(plain.alloc(PageCount(1 + i % 5)).run);
    tracked.free(tracked.alloc(PageCount(1 + i % 5)).run);
  }
  EXPECT_GT(tracked.counters().nodes_visited, plain.counters().nodes_visited);
}

}  // namespace
}  // namespace pagemalloc
