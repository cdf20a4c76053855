// Deterministic mode: with PAGEMALLOC_CONF=deterministic:true, one single-threaded call
// sequence gives the same layout and the same statistics in every process that runs it.
//
// The test runs this binary again, twice, as children with the option set (and address-space
// randomization left as the system has it). Each child plays a seeded sequence of small,
// large and huge allocations, reallocations and frees, and prints one line per block it got:
// where the block lies, as (the ordinal of its 2 MiB chunk in order of first appearance,
// its offset in that chunk), so that a layout that only moved as a whole with the mapping
// base compares equal; then the statistics. The two children's lines must be the same.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <pagemalloc/pagemalloc.h>
#include <sys/personality.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "design/size_classes.h"

namespace {

constexpr char kChildVariable[] = "PAGEMALLOC_TEST_LAYOUT_CHILD";
constexpr char kLinePrefix[] = "layout ";
constexpr std::uintptr_t kChunk = std::uintptr_t{2} << 20;
constexpr int kOperations = 10000;

// Names each block by (chunk ordinal, offset) and prints it.
class LayoutPrinter {
 public:
  void print(const char* what, const void* p) {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    const auto [it, added] = ordinals_.try_emplace(address / kChunk, ordinals_.size());
    std::fputs(
        fmt::format("{}{} chunk {} offset {:#x}\n", kLinePrefix, what, it->second, address % kChunk)
            .c_str(),
        stdout);
  }

 private:
  std::map<std::uintptr_t, std::size_t> ordinals_;
};

std::size_t random_size(std::mt19937_64& random) {
  const auto roll = random() % 100;
  if (roll < 80) return 1 + random() % 2048;               // small
  if (roll < 97) return 16 * 1024 + random() % (1 << 20);  // large
  return (2 << 20) + random() % (6 << 20);                 // huge
}

// The child's part: the sequence, its layout, then the statistics.
void play_sequence_and_print_layout() {
  std::mt19937_64 random(20261122);
  LayoutPrinter printer;
  std::vector<void*> live;
  for (int i = 0; i < kOperations; ++i) {
    const auto roll = random() % 10;
    if (roll < 4 || live.empty()) {
      void* p = pm_malloc(random_size(random));
      printer.print("malloc", p);
      live.push_back(p);
    } else if (roll < 6) {
      void*& p = live[random() % live.size()];
      p = pm_realloc(p, random_size(random));
      printer.print("realloc", p);
    } else {
      const std::size_t victim = random() % live.size();
      pm_free(live[victim]);
      live[victim] = live.back();
      live.pop_back();
    }
  }
  pm_stats stats{};
  pm_stats_get(&stats);
  std::fputs(fmt::format("{}stats allocated {} active {} mapped {} dirty {} retained {} "
                         "copied {} grown_in_place {} moved {}\n",
                         kLinePrefix, stats.allocated, stats.active, stats.mapped, stats.dirty,
                         stats.retained, stats.copied, stats.grown_in_place, stats.moved)
                 .c_str(),
             stdout);
  for (void* p : live) pm_free(p);
}

// Where slabs end at 2 KiB and empty slabs go back at once (the 2008 designs: presets.h),
// most blocks are runs and chunks empty, go back to the OS and are mapped again often. Where
// the OS puts a new chunk (the one just released, or another) and, for a tree run manager,
// the order of the chunks' addresses, which it searches lowest first, follow address-space
// randomization, which changes from process to process. In those designs the children run
// without it.
constexpr bool kLayoutFollowsAddresses = pagemalloc::kMaxSmallSize < 16384;

// Runs this test in a child process with deterministic:true; returns its layout lines.
std::vector<std::string> layout_of_a_fresh_process() {
  const std::string command = fmt::format(
      "{}=1 PAGEMALLOC_CONF=deterministic:true /proc/{}/exe "
      "--gtest_filter=Deterministic.SameLayoutAndStatisticsInEveryProcess 2>&1",
      kChildVariable, ::getpid());
  std::vector<std::string> lines;
  FILE* child = ::popen(command.c_str(), "r");
  if (child == nullptr) return lines;
  char buffer[256];
  while (std::fgets(buffer, sizeof(buffer), child) != nullptr) {
    std::string line(buffer);
    if (line.rfind(kLinePrefix, 0) == 0) lines.push_back(line);
  }
  ::pclose(child);
  return lines;
}

TEST(Deterministic, SameLayoutAndStatisticsInEveryProcess) {
  if (std::getenv(kChildVariable) != nullptr) {
    play_sequence_and_print_layout();
    return;
  }
  if (kLayoutFollowsAddresses) {
    const int persona = ::personality(0xffffffff);
    if (persona == -1 || ::personality(unsigned(persona) | ADDR_NO_RANDOMIZE) == -1)
      GTEST_SKIP() << "this design's layout follows the chunks' addresses, and randomization "
                      "cannot be turned off here";
  }
  const std::vector<std::string> first = layout_of_a_fresh_process();
  const std::vector<std::string> second = layout_of_a_fresh_process();
  ASSERT_GT(first.size(), std::size_t{kOperations / 3}) << "the child printed no layout";
  ASSERT_EQ(first.size(), second.size());
  for (std::size_t i = 0; i < first.size(); ++i)
    ASSERT_EQ(first[i], second[i]) << "line " << i << " differs between two runs";
}

}  // namespace
