// The heap profiler's parts, each against a model: the logarithm the sampling draws with and
// the exponential its estimates scale by, the countdown's distribution (intervals of the mean asked
// for, each allocation sampled with probability 1 - exp(-size / mean)), the table of live samples
// (a std::map beside it through adds, removals and growths, with addresses chosen to collide) and
// the table of stacks (one record per distinct stack, found again by its frames) and the leak
// report (its totals and its stacks, largest first, read back from a file).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "profile/leak_report.h"
#include "profile/sample_table.h"
#include "profile/sampling.h"
#include "profile/stack_table.h"

namespace {

using pagemalloc::LiveSample;
using pagemalloc::SampleCountdown;
using pagemalloc::SampleTable;
using pagemalloc::StackRecord;
using pagemalloc::StackTable;

TEST(ProfilerSampling, NegativeLogMatchesTheLibrary) {
  for (double u : {1.0, 0.999999, 0.75, 0.5, 0.3, 0.1, 1e-3, 1e-9, 1.1e-16})
    EXPECT_NEAR(pagemalloc::negative_log(u), -std::log(u), 1e-7 * (1 - std::log(u))) << u;
}

TEST(ProfilerSampling, NegativeExpMatchesTheLibrary) {
  for (double x : {0.0, 1e-12, 1e-4, 0.1, 0.5, 0.69314718, 1.0, 2.5, 10.0, 50.0, 300.0, 699.0})
    EXPECT_NEAR(pagemalloc::negative_exp(x) / std::exp(-x), 1.0, 1e-12) << x;
  EXPECT_EQ(pagemalloc::negative_exp(800), 0.0);
}

TEST(ProfilerSampling, ASampleStandsForTheBytesItsChanceImplies) {
  constexpr std::uint64_t kMean = 4096;
  for (std::size_t bytes : {1, 16, 100, 2048, 4096, 65536, 1 << 20}) {
    const double r = double(bytes) / kMean;
    const double expected = double(bytes) / -std::expm1(-r);
    EXPECT_NEAR(pagemalloc::sample_weight(bytes, kMean) / expected, 1.0, 1e-12) << bytes;
  }
  EXPECT_EQ(pagemalloc::sample_weight(0, kMean), 0.0);
  // Small blocks stand for about the mean, large ones for themselves.
  EXPECT_NEAR(pagemalloc::sample_weight(1, kMean), double(kMean), 1.0);
  EXPECT_NEAR(pagemalloc::sample_weight(1 << 20, kMean), double(1 << 20), 1e-6);
}

TEST(ProfilerSampling, IntervalsAverageTheMean) {
  SampleCountdown countdown;
  constexpr std::uint64_t kMean = 4096;
  // One byte at a time: a sample ends each interval.
  std::uint64_t bytes = 0, samples = 0;
  while (samples < 20000) {
    ++bytes;
    if (countdown.take(1, kMean)) ++samples;
  }
  const double mean = double(bytes) / double(samples);
  EXPECT_NEAR(mean, double(kMean), 0.03 * kMean);  // the mean's sd is 0.7 % here
}

TEST(ProfilerSampling, AnAllocationIsSampledWithTheReadersProbability) {
  SampleCountdown countdown;
  constexpr std::uint64_t kMean = 4096;
  for (std::size_t size : {64, 1024, 4096, 16384}) {
    constexpr int kAllocations = 40000;
    int sampled = 0;
    for (int i = 0; i < kAllocations; ++i) sampled += countdown.take(size, kMean) ? 1 : 0;
    const double p = 1 - std::exp(-double(size) / double(kMean));
    const double sd = std::sqrt(kAllocations * p * (1 - p));
    EXPECT_NEAR(sampled, kAllocations * p, 5 * sd + 1) << size;
  }
}

TEST(ProfilerSampleTable, FollowsAMapThroughAddsRemovalsAndGrowths) {
  SampleTable table;
  std::map<std::uintptr_t, std::uint64_t> model;
  std::mt19937_64 rng(7);
  StackRecord stack{};
  // Addresses on few distinct 16-byte steps collide often in a table of 1024 or more slots.
  auto address = [&] { return (rng() % 6000 + 1) * 16; };
  for (int step = 0; step < 200000; ++step) {
    const std::uintptr_t a = address();
    if (rng() % 3 != 0) {
      LiveSample replaced{};
      bool found = false;
      ASSERT_TRUE(table.add(LiveSample{a, &stack, std::uint64_t(step)}, replaced, found));
      EXPECT_EQ(found, model.count(a) == 1);
      if (found) {
        EXPECT_EQ(replaced.bytes, model[a]);
      }
      model[a] = std::uint64_t(step);
    } else {
      LiveSample out{};
      const bool removed = table.remove(a, out);
      ASSERT_EQ(removed, model.count(a) == 1) << a;
      if (removed) {
        EXPECT_EQ(out.bytes, model[a]);
        model.erase(a);
      }
    }
    ASSERT_EQ(table.size(), model.size());
  }
  for (const auto& [a, bytes] : model) EXPECT_TRUE(table.contains(a)) << a;
  std::size_t visited = 0;
  table.for_each([&](const LiveSample& s) {
    ++visited;
    EXPECT_EQ(model.at(s.address), s.bytes);
  });
  EXPECT_EQ(visited, model.size());
  EXPECT_FALSE(table.contains(16 * 7001));
}

TEST(ProfilerSampleTable, RemovesEveryMatchAndKeepsTheRestReachable) {
  SampleTable table;
  StackRecord stack{};
  std::mt19937_64 rng(11);
  std::map<std::uintptr_t, std::uint64_t> model;
  // Clustered addresses: runs of entries that wrap around the table's end.
  while (model.size() < 3000) {
    const std::uintptr_t a = (rng() % 4000 + 1) * 16;
    LiveSample replaced{};
    bool found = false;
    ASSERT_TRUE(table.add(LiveSample{a, &stack, a / 16}, replaced, found));
    model[a] = a / 16;
  }
  std::size_t removed = 0;
  table.remove_if([](const LiveSample& s) { return s.bytes % 3 == 0; },
                  [&](const LiveSample& s) {
                    EXPECT_EQ(s.bytes % 3, 0u);
                    ++removed;
                  });
  std::size_t kept = 0;
  for (const auto& [a, bytes] : model) {
    const bool matched = bytes % 3 == 0;
    EXPECT_EQ(table.contains(a), !matched) << a;
    kept += matched ? 0 : 1;
  }
  EXPECT_EQ(removed + kept, model.size());
  EXPECT_EQ(table.size(), kept);
}

TEST(ProfilerStackTable, KeepsEachStackOnce) {
  StackTable table;
  std::vector<std::vector<std::uintptr_t>> stacks;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 5000; ++i) {
    std::vector<std::uintptr_t> s(1 + rng() % pagemalloc::kMaxStackDepth);
    for (auto& pc : s) pc = 0x400000 + rng() % 4096;
    s[0] = 0x800000 + std::uintptr_t(i) * 8;  // (distinct stacks)
    stacks.push_back(s);
  }
  stacks.push_back({});  // the stack of no frames
  stacks.push_back({0x401000, 0x402000});
  stacks.push_back({0x401000, 0x402000, 0x403000});  // a longer stack with the same start
  std::vector<StackRecord*> records;
  for (const auto& s : stacks) records.push_back(table.find_or_add(s.data(), unsigned(s.size())));
  EXPECT_EQ(table.stacks(), stacks.size());
  for (std::size_t i = 0; i < stacks.size(); ++i) {
    ASSERT_NE(records[i], nullptr);
    EXPECT_EQ(table.find_or_add(stacks[i].data(), unsigned(stacks[i].size())), records[i]);
    ASSERT_EQ(records[i]->depth, stacks[i].size());
    for (std::size_t f = 0; f < stacks[i].size(); ++f) EXPECT_EQ(records[i]->pcs[f], stacks[i][f]);
  }
  EXPECT_EQ(table.stacks(), stacks.size());
  EXPECT_EQ(table.dropped(), 0u);
  std::size_t visited = 0;
  table.for_each([&](const StackRecord&) { ++visited; });
  EXPECT_EQ(visited, stacks.size());
}

// The report of a table with three stacks holding live samples and one with none.
TEST(ProfilerLeakReport, ListsTheLiveStacksLargestFirstWithTheirEstimates) {
  StackTable table;
  const std::uintptr_t small[] = {0x401000, 0x402000}, large[] = {0x403000},
                       middle[] = {0x404000, 0x405000, 0x406000}, freed[] = {0x407000};
  StackRecord* s = table.find_or_add(small, 2);
  StackRecord* l = table.find_or_add(large, 1);
  StackRecord* m = table.find_or_add(middle, 3);
  StackRecord* f = table.find_or_add(freed, 1);
  ASSERT_TRUE(s && l && m && f);
  s->live_count = 4, s->live_bytes = 4 * 64;     // stands for about 4 * 4096 bytes
  l->live_count = 1, l->live_bytes = 1 << 20;    // stands for itself
  m->live_count = 2, m->live_bytes = 2 * 8192;   // stands for about 2 * 9474 bytes
  f->total_count = 9, f->total_bytes = 9 * 100;  // nothing live
  char path[] = "/tmp/pagemalloc-leak-report-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(pagemalloc::write_leak_report(fd, 4096, table));
  ::close(fd);
  std::FILE* in = std::fopen(path, "r");
  ASSERT_NE(in, nullptr);
  std::vector<std::string> lines;
  char line[512];
  while (std::fgets(line, sizeof(line), in) != nullptr) lines.emplace_back(line);
  std::fclose(in);
  std::remove(path);
  ASSERT_EQ(lines.size(), 1u + 3 + (1 + 3 + 2));  // the summary, three headers, their frames
  const double expected = 4 * pagemalloc::sample_weight(64, 4096) + double(1 << 20) +
                          2 * pagemalloc::sample_weight(8192, 4096);
  double bytes = 0, blocks = 0;
  unsigned stacks = 0, samples = 0;
  ASSERT_EQ(std::sscanf(lines[0].c_str(),
                        "pagemalloc: prof_leak: about %lf bytes in %lf blocks live at exit, from "
                        "%u call stacks (%u samples",
                        &bytes, &blocks, &stacks, &samples),
            4)
      << lines[0];
  EXPECT_NEAR(bytes, expected, 1.0);
  EXPECT_EQ(stacks, 3u);
  EXPECT_EQ(samples, 7u);
  EXPECT_EQ(lines[1].rfind("Leak of about 1048576 bytes in about 1 blocks", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].find("@ 0x403000"), 4u) << lines[2];
  EXPECT_EQ(lines[3].rfind("Leak of about 18948 bytes in about 2 blocks", 0), 0u) << lines[3];
  EXPECT_EQ(lines[7].rfind("Leak of about 16512 bytes in about 258 blocks", 0), 0u) << lines[7];
  EXPECT_EQ(lines[8].find("@ 0x401000"), 4u) << lines[8];
}

}  // namespace
