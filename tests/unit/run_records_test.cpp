// Tests of where the run managers keep their metadata (run_manager_core.h): the chunk header
// is the page map alone, free runs and chunks have records outside the chunks, and running
// out of records never loses anything. Every test runs for every variant:
//
//   - a chunk's header is one page; the first run starts at page 1 and a chunk has 511 usable
//     pages; the Header entry points at the chunk's record;
//   - over the Linux OS layer, allocating and freeing sparsely touched runs makes resident no
//     page of the chunk but the page map and the touched pages (mincore), and a purge takes
//     the freed ones away again;
//   - the record pool refusing to grow fails an alloc cleanly (nothing changes, no chunk is
//     kept) while every free, trim_head and shrink_in_place still works; so does a refused
//     chunk record, before any chunk is reserved;
//   - check_invariants() finds a free run whose tags and record do not point at each other.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

#include "pagemap/page_map.h"
#include "pagemap/pagemap_runs.h"
#include "pagemap/pages.h"
#include "pagemap/pal_linux.h"
#include "pagemap/testing/pal_fake.h"
#include "rbtree/hybrid_runs.h"
#include "rbtree/rbtree_runs.h"

namespace pagemalloc {
namespace {

using PageRun = ::pagemalloc::Run;

// The Linux OS layer with huge pages refused for every chunk, so that residency is counted
// in 4 KiB pages whatever the system's THP mode.
class SmallPagesPal : public LinuxPal {
 public:
  void* reserve(std::size_t bytes, std::size_t align) {
    void* p = LinuxPal::reserve(bytes, align);
    if (p != nullptr) LinuxPal::avoid_huge_pages(p, bytes);
    return p;
  }
};
static_assert(Pal<SmallPagesPal>);

template <template <class> class Runs>
struct Variant {
  template <class P>
  using Over = Runs<P>;
};
using Variants = testing::Types<Variant<PagemapRuns>, Variant<HybridRuns>, Variant<RbtreeRuns>>;

template <class V>
class RunRecordsTest : public testing::Test {
 protected:
  using Runs = typename V::template Over<FakePal>;
  FakePal pal_{std::size_t{32} << 20};
  Runs runs_{pal_};

  PageRun Alloc(std::size_t pages) {
    AllocatedRun r = runs_.alloc(PageCount(pages));
    EXPECT_TRUE(r.run) << "alloc(" << pages << ") failed";
    return r.run;
  }
  testing::AssertionResult InvariantsHold() {
    if (const char* problem = runs_.check_invariants())
      return testing::AssertionFailure() << problem;
    return testing::AssertionSuccess();
  }
};
TYPED_TEST_SUITE(RunRecordsTest, Variants);

TYPED_TEST(RunRecordsTest, HeaderIsOnePageAndPointsAtTheChunkRecord) {
  PageRun first = this->Alloc(1);
  EXPECT_EQ(first.first.value(), 1u);
  EXPECT_EQ(this->runs_.free_pages().value(), kPagesPerChunk - 2);
  const PageEntry header = page_entry(first.chunk, PageIndex(0));
  EXPECT_EQ(header.kind(), PageKind::Header);
  EXPECT_NE(header.record(), nullptr);
  EXPECT_TRUE(this->runs_.chunk_records().holds(header.record()));
  EXPECT_EQ(page_entry(first.chunk, PageIndex(1)).kind(), PageKind::Allocated);
  // The free rest of the chunk: its first and last entries hold one record.
  const PageEntry rest = page_entry(first.chunk, PageIndex(2));
  ASSERT_TRUE(rest.is_free());
  EXPECT_EQ(rest.pages().value(), kPagesPerChunk - 2);
  EXPECT_EQ(page_entry(first.chunk, PageIndex(kPagesPerChunk - 1)), rest);
  EXPECT_TRUE(this->runs_.run_records().holds(rest.record()));
  EXPECT_TRUE(this->InvariantsHold());

  // A run of all the usable pages fills a chunk of its own.
  PageRun whole = this->Alloc(kPagesPerChunk - 1);
  EXPECT_EQ(whole.first.value(), 1u);
  EXPECT_EQ(this->runs_.chunks(), 2u);
  EXPECT_TRUE(this->InvariantsHold());
}

// Which pages of [base, base + pages) are resident.
std::set<std::size_t> ResidentPages(const std::byte* base, std::size_t pages) {
  std::vector<unsigned char> in_core(pages);
  EXPECT_EQ(::mincore(const_cast<std::byte*>(base), pages * kPageSize, in_core.data()), 0);
  std::set<std::size_t> resident;
  for (std::size_t i = 0; i < pages; ++i)
    if ((in_core[i] & 1) != 0) resident.insert(i);
  return resident;
}

TYPED_TEST(RunRecordsTest, SparseRunsMakeOnlyThePageMapAndTheirTouchedPagesResident) {
  using Runs = typename TypeParam::template Over<SmallPagesPal>;
  SmallPagesPal pal;
  Runs runs{pal};
  // Seven runs of 8 .. 56 pages (in one chunk of either size), one byte touched in each (a
  // table filled sparsely).
  std::vector<PageRun> live;
  std::set<std::size_t> touched{0};  // the page map
  for (std::size_t i = 0; i < 7; ++i) {
    AllocatedRun r = runs.alloc(PageCount(8 * (i + 1)));
    ASSERT_TRUE(r.run);
    r.run.base()[0] = std::byte{1};
    touched.insert(r.run.first.value());
    live.push_back(r.run);
  }
  ASSERT_EQ(runs.chunks(), 1u);
  std::byte* chunk = live[0].chunk;
  EXPECT_EQ(ResidentPages(chunk, kPagesPerChunk), touched);

  // Frees make free runs (records, tags in the page map) and touch nothing else; a run
  // allocated over a freed one touches only what the program writes.
  runs.free(live[1]);
  runs.free(live[4]);
  runs.free(live[5]);
  EXPECT_EQ(ResidentPages(chunk, kPagesPerChunk), touched);
  AllocatedRun again = runs.alloc(PageCount(8));
  ASSERT_TRUE(again.run);
  again.run.base()[kPageSize * 3] = std::byte{1};
  touched.insert(again.run.first.value() + 3);
  EXPECT_EQ(ResidentPages(chunk, kPagesPerChunk), touched);
  ASSERT_EQ(runs.check_invariants(), nullptr) << runs.check_invariants();

  // The purge gives the freed runs' pages back; the page map and the live runs stay.
  runs.purge(0);
  std::set<std::size_t> kept{0, again.run.first.value() + 3};
  for (std::size_t i : {0, 2, 3, 6}) kept.insert(live[i].first.value());
  for (std::size_t i : {1, 4, 5})  // a freed run's touched page that `again` now holds
    if (live[i].first >= again.run.first && live[i].first < again.run.end())
      kept.insert(live[i].first.value());
  EXPECT_EQ(ResidentPages(chunk, kPagesPerChunk), kept);
  ASSERT_EQ(runs.check_invariants(), nullptr) << runs.check_invariants();
}

TYPED_TEST(RunRecordsTest, RefusedRecordsFailAllocCleanlyAndFreesStillWork) {
  // A fresh run manager has no records: the first alloc fails before it reserves a chunk.
  this->runs_.run_records().refuse_growth(true);
  EXPECT_FALSE(this->runs_.alloc(PageCount(3)).run);
  EXPECT_EQ(this->pal_.reserve_calls(), 0);
  EXPECT_EQ(this->runs_.chunks(), 0u);
  EXPECT_TRUE(this->InvariantsHold());
  this->runs_.run_records().refuse_growth(false);

  // Runs of 3 pages until the pool, refused growth from the 2nd run on, runs out.
  std::vector<PageRun> live{this->Alloc(3)};
  this->runs_.run_records().refuse_growth(true);
  const std::size_t capacity = this->runs_.run_records().capacity();
  for (;;) {
    const PageCount free_before = this->runs_.free_pages();
    const std::size_t chunks_before = this->runs_.chunks();
    AllocatedRun r = this->runs_.alloc(PageCount(3));
    if (!r.run) {
      EXPECT_EQ(this->runs_.free_pages(), free_before);
      EXPECT_EQ(this->runs_.chunks(), chunks_before) << "the chunk taken for it is kept";
      EXPECT_EQ(this->pal_.live_reservations(), int(chunks_before));
      break;
    }
    r.run.base()[0] = std::byte{7};
    live.push_back(r.run);
    ASSERT_LE(live.size() + this->runs_.chunks(), capacity) << "more runs than records reserved";
  }
  EXPECT_GE(live.size() + this->runs_.chunks() + 1, capacity) << "failed before the pool ran out";
  EXPECT_EQ(this->runs_.run_records().capacity(), capacity);
  EXPECT_TRUE(this->InvariantsHold());

  // With growth still refused, every call that makes free runs works: each run gives up its
  // head or its tail (a new free run between two live ones), then half are freed, then all.
  for (std::size_t i = 0; i < live.size(); ++i) {
    if (i % 2 == 0) {
      this->runs_.trim_head(live[i], PageCount(1));
      live[i] = PageRun{live[i].chunk, live[i].first + PageCount(1), PageCount(2)};
    } else {
      this->runs_.shrink_in_place(live[i], PageCount(2));
      live[i].pages = PageCount(2);
    }
  }
  ASSERT_TRUE(this->InvariantsHold());
  for (std::size_t i = 0; i < live.size(); i += 2) this->runs_.free(live[i]);
  ASSERT_TRUE(this->InvariantsHold());
  for (std::size_t i = 1; i < live.size(); i += 2) {
    EXPECT_EQ(live[i].base()[0], std::byte{7});
    this->runs_.free(live[i]);
  }
  ASSERT_TRUE(this->InvariantsHold());
  EXPECT_EQ(this->runs_.free_pages().value(), this->runs_.chunks() * (kPagesPerChunk - 1));
  EXPECT_EQ(this->runs_.run_records().in_use(), this->runs_.chunks());

  this->runs_.run_records().refuse_growth(false);
  EXPECT_TRUE(this->runs_.alloc(PageCount(3)).run);
  EXPECT_TRUE(this->InvariantsHold());
}

TYPED_TEST(RunRecordsTest, RefusedChunkRecordFailsAllocBeforeAnyChunkIsReserved) {
  this->runs_.chunk_records().refuse_growth(true);
  EXPECT_FALSE(this->runs_.alloc(PageCount(5)).run);
  EXPECT_EQ(this->pal_.reserve_calls(), 0);
  EXPECT_EQ(this->runs_.chunks(), 0u);
  EXPECT_TRUE(this->InvariantsHold());
  this->runs_.chunk_records().refuse_growth(false);
  PageRun r = this->Alloc(5);
  EXPECT_EQ(this->runs_.chunks(), 1u);
  this->runs_.free(r);
  EXPECT_TRUE(this->InvariantsHold());
}

TYPED_TEST(RunRecordsTest, ChecksFindATagAndARecordThatDoNotPointAtEachOther) {
  PageRun a = this->Alloc(4);
  this->Alloc(4);
  this->runs_.free(a);
  ASSERT_TRUE(this->InvariantsHold());
  PageEntry& head = page_entry(a.chunk, a.first);
  const PageEntry saved = head;
  auto* record = static_cast<RunRecord*>(saved.record());
  ASSERT_NE(record, nullptr);
  ASSERT_EQ(record->run, a.base());

  head = PageEntry::free(a.pages, saved.dirty());  // the tag lost its record
  EXPECT_FALSE(this->InvariantsHold());
  head = saved;
  ASSERT_TRUE(this->InvariantsHold());

  // The tail's record points elsewhere.
  page_entry(a.chunk, a.last()) = PageEntry::free(a.pages, saved.dirty(), record + 1);
  EXPECT_FALSE(this->InvariantsHold());
  page_entry(a.chunk, a.last()) = saved;
  EXPECT_TRUE(this->InvariantsHold());
}

}  // namespace
}  // namespace pagemalloc
