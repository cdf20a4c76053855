// The thp option: every chunk an arena maps gets the advice the option names, as the kernel shows
// it in the mapping's VmFlags (/proc/self/smaps: "hg", "nh"): under "auto", MADV_HUGEPAGE for a
// chunk mapped for slabs once the arena has 4 chunks, MADV_NOHUGEPAGE for its first 4, for chunks
// mapped for large runs while its slabs hold fewer pages than its large runs, and for every chunk
// of the automatic arenas after the first; under "always" MADV_HUGEPAGE for every chunk after the
// first; "never", the default, MADV_NOHUGEPAGE; "default" none. A large run touched at one byte
// faults in no huge page under "auto". Under "auto" the chunks it advises have their first touch
// timed, and once fresh huge pages have overspent thp_budget the chunks it would advise get
// MADV_NOHUGEPAGE. And PAGEMALLOC_CONF's parsing of both options: a bad value or an unknown key
// gets one warning and changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "os/huge_page_budget.h"
#include "pagemalloc/pagemalloc.h"
#include "pagemap/page_map.h"
#include "support/options.h"

namespace {

// A field of the mapping that holds p in /proc/self/smaps ("VmFlags:", "AnonHugePages:"),
// the rest of its line ("" if no mapping holds p).
std::string smaps_field_of(const void* p, const std::string& field) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream header(line);
    if (header >> std::hex >> start >> dash >> end && dash == '-') {
      inside = start <= address && address < end;
    } else if (inside && line.rfind(field, 0) == 0) {
      return line.substr(field.size()) + " ";
    }
  }
  return "";
}

// The VmFlags of the mapping that holds p, as words separated by spaces.
std::string vm_flags_of(const void* p) { return smaps_field_of(p, "VmFlags:"); }

// Kilobytes of the mapping that holds p backed by huge pages.
long anon_huge_kb_of(const void* p) { return std::stol(smaps_field_of(p, "AnonHugePages:")); }

bool has_flag(const std::string& flags, const char* flag) {
  return flags.find(std::string(" ") + flag + " ") != std::string::npos;
}

long thp_mode() {
  long mode = -1;
  EXPECT_EQ(pm_ctl("thp", &mode, nullptr), 0);
  return mode;
}

// A large run of three quarters of a chunk (1.5 MiB in chunks of 2 MiB): two cannot share one.
constexpr std::size_t kLarge = pagemalloc::kChunkSize / 4 * 3;
static_assert(kLarge <= pagemalloc::kMaxRunPages.bytes());

// The VmFlags of an explicit arena's first two chunks, mapped while the option is `mode`: two
// blocks of kLarge cannot share a chunk.
struct ChunkFlags {
  std::string first, second;
};
ChunkFlags flags_of_new_chunks(long mode) {
  const long before = thp_mode();
  EXPECT_EQ(pm_ctl("thp", nullptr, &mode), 0);
  const unsigned arena = pm_arena_create();
  EXPECT_NE(arena, 0u);
  void* a = pm_mallocx(kLarge, PM_ARENA(arena));
  void* b = pm_mallocx(kLarge, PM_ARENA(arena));
  EXPECT_NE(a, nullptr);
  EXPECT_NE(b, nullptr);
  ChunkFlags flags{vm_flags_of(a), vm_flags_of(b)};
  EXPECT_EQ(pm_arena_destroy(arena), 0);
  EXPECT_EQ(pm_ctl("thp", nullptr, &before), 0);
  return flags;
}

long thp_budget() {
  long share = -1;
  EXPECT_EQ(pm_ctl("thp_budget", &share, nullptr), 0);
  return share;
}

// Sets the thp option and thp_budget for the scope and restores the ones before. The budget is
// off unless asked for: what this machine's huge pages cost must not change which advice a
// test sees.
class ScopedThp {
 public:
  explicit ScopedThp(long mode, long budget = 0) : before_(thp_mode()), budget_(thp_budget()) {
    EXPECT_EQ(pm_ctl("thp", nullptr, &mode), 0);
    EXPECT_EQ(pm_ctl("thp_budget", nullptr, &budget), 0);
  }
  ~ScopedThp() {
    EXPECT_EQ(pm_ctl("thp", nullptr, &before_), 0);
    EXPECT_EQ(pm_ctl("thp_budget", nullptr, &budget_), 0);
  }
  ScopedThp(const ScopedThp&) = delete;
  ScopedThp& operator=(const ScopedThp&) = delete;

 private:
  long before_, budget_;
};

TEST(HugePages, NeverIsTheDefault) { EXPECT_EQ(thp_mode(), 2); }

TEST(HugePages, ChunksMappedForLargeRunsHaveTheirModesAdvice) {
  const ChunkFlags always = flags_of_new_chunks(1);
  EXPECT_TRUE(has_flag(always.second, "hg")) << "VmFlags:" << always.second;
  EXPECT_FALSE(has_flag(always.second, "nh")) << "VmFlags:" << always.second;
  EXPECT_FALSE(has_flag(always.first, "hg")) << "first chunk's VmFlags:" << always.first;
  const ChunkFlags automatic = flags_of_new_chunks(3);
  const ChunkFlags never = flags_of_new_chunks(2);
  for (const ChunkFlags* f : {&automatic, &never}) {
    EXPECT_TRUE(has_flag(f->first, "nh")) << "first chunk's VmFlags:" << f->first;
    EXPECT_TRUE(has_flag(f->second, "nh")) << "VmFlags:" << f->second;
    EXPECT_FALSE(has_flag(f->second, "hg")) << "VmFlags:" << f->second;
  }
  const ChunkFlags system = flags_of_new_chunks(0);
  for (const std::string* flags : {&system.first, &system.second}) {
    EXPECT_FALSE(has_flag(*flags, "hg")) << "VmFlags:" << *flags;
    EXPECT_FALSE(has_flag(*flags, "nh")) << "VmFlags:" << *flags;
  }
}

// Under auto, an explicit arena: its first chunks, and chunks mapped for large runs while its
// slabs hold fewer pages than its large runs, are advised MADV_NOHUGEPAGE; once it has 4 chunks
// and small blocks have filled what is left of those, the chunk mapped for the next slab is
// advised MADV_HUGEPAGE.
TEST(HugePages, AutoAdvisesHugePagesForSlabChunksOnly) {
  const ScopedThp automatic(3);
  const unsigned arena = pm_arena_create();
  ASSERT_NE(arena, 0u);
  const auto chunk_of = [](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) >> pagemalloc::kLgChunkSize;
  };
  std::vector<std::uintptr_t> large_chunks;
  for (int i = 0; i < 4; ++i) {
    void* large = pm_mallocx(kLarge, PM_ARENA(arena));
    ASSERT_NE(large, nullptr);
    EXPECT_TRUE(has_flag(vm_flags_of(large), "nh")) << "large run's VmFlags:" << vm_flags_of(large);
    large_chunks.push_back(chunk_of(large));
  }
  void* in_slab_chunk = nullptr;
  for (int i = 0; i < 16384 && in_slab_chunk == nullptr; ++i) {
    void* p = pm_mallocx(1024, PM_ARENA(arena));
    ASSERT_NE(p, nullptr);
    if (std::find(large_chunks.begin(), large_chunks.end(), chunk_of(p)) == large_chunks.end())
      in_slab_chunk = p;
  }
  ASSERT_NE(in_slab_chunk, nullptr) << "16 MiB of 1 KiB blocks stayed in the first four chunks";
  EXPECT_TRUE(has_flag(vm_flags_of(in_slab_chunk), "hg"))
      << "slab chunk's VmFlags:" << vm_flags_of(in_slab_chunk);
  EXPECT_EQ(pm_arena_destroy(arena), 0);
}

// Fills a new explicit arena's first 4 chunks with large runs, then allocates 1 KiB blocks
// until one lies in a fifth chunk, mapped for slabs: that block (nullptr if none did).
void* block_in_a_slab_chunk_after_four(unsigned arena) {
  const auto chunk_of = [](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) >> pagemalloc::kLgChunkSize;
  };
  std::vector<std::uintptr_t> large_chunks;
  for (int i = 0; i < 4; ++i) {
    void* large = pm_mallocx(kLarge, PM_ARENA(arena));
    if (large == nullptr) return nullptr;
    large_chunks.push_back(chunk_of(large));
  }
  for (int i = 0; i < 16384; ++i) {
    void* p = pm_mallocx(1024, PM_ARENA(arena));
    if (p == nullptr) return nullptr;
    if (std::find(large_chunks.begin(), large_chunks.end(), chunk_of(p)) == large_chunks.end())
      return p;
  }
  return nullptr;
}

// Under auto, the first touch of a chunk advised MADV_HUGEPAGE is timed (huge_page_budget.h):
// the one chunk advised here adds one to the count of timed chunks.
TEST(HugePages, AutoTimesTheFirstTouchOfTheChunkItAdvises) {
  const ScopedThp automatic(3);
  const unsigned arena = pm_arena_create();
  ASSERT_NE(arena, 0u);
  const auto before = pagemalloc::g_huge_page_budget.totals();
  void* in_slab_chunk = block_in_a_slab_chunk_after_four(arena);
  ASSERT_NE(in_slab_chunk, nullptr);
  EXPECT_TRUE(has_flag(vm_flags_of(in_slab_chunk), "hg"));
  const auto after = pagemalloc::g_huge_page_budget.totals();
  EXPECT_EQ(after.touched, before.touched + 1);
  EXPECT_EQ(after.refused, before.refused);
  EXPECT_EQ(pm_arena_destroy(arena), 0);
}

// Under auto with a budget that fresh huge pages have overspent (charged here by hand: 1000 s
// of faults beyond small pages' cost, far beyond 1/64 of this run), the chunk the rules would
// advise MADV_HUGEPAGE is advised MADV_NOHUGEPAGE instead, and counted as refused.
TEST(HugePages, AutoGivesSmallPagesOnceHugePagesHaveOverspentTheirBudget) {
  const ScopedThp automatic(3, 64);
  pagemalloc::g_huge_page_budget.charge(1000ULL * 1000 * 1000 * 1000);
  const unsigned arena = pm_arena_create();
  ASSERT_NE(arena, 0u);
  const auto before = pagemalloc::g_huge_page_budget.totals();
  void* in_slab_chunk = block_in_a_slab_chunk_after_four(arena);
  ASSERT_NE(in_slab_chunk, nullptr);
  EXPECT_TRUE(has_flag(vm_flags_of(in_slab_chunk), "nh"))
      << "slab chunk's VmFlags:" << vm_flags_of(in_slab_chunk);
  const auto after = pagemalloc::g_huge_page_budget.totals();
  EXPECT_EQ(after.refused, before.refused + 1);
  EXPECT_EQ(after.touched, before.touched);
  EXPECT_EQ(pm_arena_destroy(arena), 0);
  // thp_budget:0 lifts the limit for the chunks mapped from then on.
  const long unlimited = 0;
  ASSERT_EQ(pm_ctl("thp_budget", nullptr, &unlimited), 0);
  const unsigned second = pm_arena_create();
  ASSERT_NE(second, 0u);
  void* unlimited_block = block_in_a_slab_chunk_after_four(second);
  ASSERT_NE(unlimited_block, nullptr);
  EXPECT_TRUE(has_flag(vm_flags_of(unlimited_block), "hg"));
  EXPECT_EQ(pm_arena_destroy(second), 0);
}

TEST(HugePages, ThpBudgetDefaultsTo64AndRefusesANegativeShare) {
  EXPECT_EQ(thp_budget(), 64);
  const long negative = -1;
  EXPECT_EQ(pm_ctl("thp_budget", nullptr, &negative), EINVAL);
  EXPECT_EQ(thp_budget(), 64);
}

// Under auto, a large run among more pages of slabs (an interpreter's heap, whose tables grow
// by realloc) is taken as densely used: once 10 MiB of small blocks fill the arena's first
// chunks, a chunk mapped for a block of kLarge is advised MADV_HUGEPAGE. Two such blocks cannot
// share a chunk, so at least one of them makes the arena map a chunk for it.
TEST(HugePages, AutoAdvisesHugePagesForALargeRunAmongMorePagesOfSlabs) {
  const ScopedThp automatic(3);
  const unsigned arena = pm_arena_create();
  ASSERT_NE(arena, 0u);
  std::vector<void*> small;
  for (int i = 0; i < 10240; ++i) {
    small.push_back(pm_mallocx(1024, PM_ARENA(arena)));
    ASSERT_NE(small.back(), nullptr);
  }
  for (int i = 0; i < 2; ++i) {
    void* large = pm_mallocx(kLarge, PM_ARENA(arena));
    ASSERT_NE(large, nullptr);
    EXPECT_TRUE(has_flag(vm_flags_of(large), "hg")) << "large run's VmFlags:" << vm_flags_of(large);
  }
  EXPECT_EQ(pm_arena_destroy(arena), 0);
}

// The advice of the chunk that holds the last of 12 MiB of 1 KiB blocks (past the first 4
// chunks of an arena) that pm_malloc gives the calling thread; the blocks are freed.
std::string flags_after_12_mib_of_small_blocks() {
  std::vector<void*> blocks;
  for (int i = 0; i < 12 * 1024; ++i) blocks.push_back(pm_malloc(1024));
  const std::string flags = vm_flags_of(blocks.back());
  for (void* p : blocks) pm_free(p);
  return flags;
}

// Under auto, only the first automatic arena (the main thread's here) gets huge pages: a
// second thread, given an arena of its own, gets chunks advised MADV_NOHUGEPAGE for the same
// blocks.
TEST(HugePages, AutoAdvisesHugePagesOnlyInTheFirstAutomaticArena) {
  const ScopedThp automatic(3);
  long arenas = 0;
  ASSERT_EQ(pm_ctl("narenas", &arenas, nullptr), 0);
  if (arenas < 2) GTEST_SKIP() << "one automatic arena: every thread shares the first";
  const std::string main_flags = flags_after_12_mib_of_small_blocks();
  EXPECT_TRUE(has_flag(main_flags, "hg")) << "first arena's VmFlags:" << main_flags;
  std::string thread_flags;
  std::thread([&] { thread_flags = flags_after_12_mib_of_small_blocks(); }).join();
  EXPECT_TRUE(has_flag(thread_flags, "nh")) << "second arena's VmFlags:" << thread_flags;
  EXPECT_FALSE(has_flag(thread_flags, "hg")) << "second arena's VmFlags:" << thread_flags;
}

// The reason for auto: 1 byte written in each of 64 large runs of 256 KiB, in chunks of their
// own arena, faults in no huge page (under "always" each chunk's first touch may fault in all
// 2 MiB of it, eight times the blocks' size).
TEST(HugePages, ASparselyTouchedLargeRunFaultsInNoHugePageUnderAuto) {
  const ScopedThp automatic(3);
  const unsigned arena = pm_arena_create();
  ASSERT_NE(arena, 0u);
  std::vector<char*> blocks;
  for (int i = 0; i < 64; ++i) {
    auto* p = static_cast<char*>(pm_mallocx(256 << 10, PM_ARENA(arena)));
    ASSERT_NE(p, nullptr);
    p[0] = 1;
    blocks.push_back(p);
  }
  int with_huge_pages = 0;
  for (char* p : blocks) with_huge_pages += anon_huge_kb_of(p) > 0 ? 1 : 0;
  EXPECT_EQ(with_huge_pages, 0) << "mappings of sparsely touched large runs hold huge pages";
  EXPECT_EQ(pm_arena_destroy(arena), 0);
}

TEST(HugePages, CtlRefusesAnUnknownMode) {
  const long before = thp_mode();
  const long bad = 4;
  EXPECT_EQ(pm_ctl("thp", nullptr, &bad), EINVAL);
  EXPECT_EQ(thp_mode(), before);
}

// PAGEMALLOC_CONF's entries as the first call would apply them; stderr is captured.
class ConfTest : public ::testing::Test {
 protected:
  void TearDown() override {
    pagemalloc::options().thp = saved_;
    pagemalloc::options().thp_budget = saved_budget_;
  }
  static std::string apply(const char* conf) {
    ::testing::internal::CaptureStderr();
    pagemalloc::apply_conf(conf);
    return ::testing::internal::GetCapturedStderr();
  }
  // out holds `warning` and no other PAGEMALLOC_CONF line.
  static void expect_one_warning(const std::string& out, const std::string& warning) {
    EXPECT_NE(out.find(warning), std::string::npos) << out;
    EXPECT_EQ(out.find("PAGEMALLOC_CONF", out.find("PAGEMALLOC_CONF") + 1), std::string::npos)
        << "more than one warning: " << out;
  }
  pagemalloc::HugePages saved_ = pagemalloc::options().thp.load();
  long saved_budget_ = pagemalloc::options().thp_budget.load();
};

TEST_F(ConfTest, ThpTakesItsFourValues) {
  using pagemalloc::HugePages;
  EXPECT_EQ(apply("thp:never"), "");
  EXPECT_EQ(pagemalloc::options().thp.load(), HugePages::Never);
  EXPECT_EQ(apply("thp:default"), "");
  EXPECT_EQ(pagemalloc::options().thp.load(), HugePages::Default);
  EXPECT_EQ(apply("thp:always"), "");
  EXPECT_EQ(pagemalloc::options().thp.load(), HugePages::Always);
  EXPECT_EQ(apply("thp:auto"), "");
  EXPECT_EQ(pagemalloc::options().thp.load(), HugePages::Auto);
}

TEST_F(ConfTest, ThpBudgetTakesAShareOrZero) {
  EXPECT_EQ(apply("thp_budget:0"), "");
  EXPECT_EQ(pagemalloc::options().thp_budget.load(), 0);
  EXPECT_EQ(apply("thp_budget:16"), "");
  EXPECT_EQ(pagemalloc::options().thp_budget.load(), 16);
  expect_one_warning(apply("thp_budget:-2"),
                     "PAGEMALLOC_CONF: bad value in 'thp_budget:-2' ignored");
  expect_one_warning(apply("thp_budget:half"),
                     "PAGEMALLOC_CONF: bad value in 'thp_budget:half' ignored");
  EXPECT_EQ(pagemalloc::options().thp_budget.load(), 16);
}

TEST_F(ConfTest, ABadValueWarnsOnceAndChangesNothing) {
  pagemalloc::options().thp = pagemalloc::HugePages::Never;
  expect_one_warning(apply("thp:sometimes"),
                     "PAGEMALLOC_CONF: bad value in 'thp:sometimes' ignored");
  EXPECT_EQ(pagemalloc::options().thp.load(), pagemalloc::HugePages::Never);
}

TEST_F(ConfTest, AnUnknownKeyWarnsOnceAndTheOtherEntriesStillApply) {
  pagemalloc::options().thp = pagemalloc::HugePages::Always;
  expect_one_warning(apply("no_such_key:1,thp:never"),
                     "PAGEMALLOC_CONF: unknown key in 'no_such_key:1' ignored");
  EXPECT_EQ(pagemalloc::options().thp.load(), pagemalloc::HugePages::Never);
}

}  // namespace
