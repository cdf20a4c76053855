// The run managers' model tests: long random sequences of alloc, free, trim_head,
// grow_in_place, shrink_in_place and advance_clock + purge (by age, or the oldest runs first
// until enough pages), checked after every step against a std::map of the live runs:
// check_invariants() passes, live runs never overlap and stay in their chunk's usable pages,
// free + live pages == chunks * usable pages, grow_in_place succeeds exactly when the free run
// after the run is long enough, alloc carves the best-fitting free run from its start and takes
// a new chunk only when no free run fits, and the bytes written into each live run survive
// everything else. Every test is a TYPED_TEST over RunManagerTypes. The seed is
// PAGEMALLOC_TEST_SEED when set, otherwise a fixed default; a failure prints it so that the run
// can be replayed.
#include <gtest/gtest.h>

#include "run_manager_support.h"

namespace pagemalloc {
namespace {

constexpr std::size_t kModelPalCapacity = std::size_t{256} << 20;  // 128 chunks

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

}  // namespace
}  // namespace pagemalloc
