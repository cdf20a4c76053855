// The heap profiler's parts, each against a model: the logarithm the sampling draws with, the
// countdown's distribution (intervals of the mean asked for, each allocation sampled with
// probability 1 - exp(-size / mean)), the table of live samples (a std::map beside it through
// adds, removals and growths, with addresses chosen to collide) and the table of stacks (one
// record per distinct stack, found again by its frames).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

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

}  // namespace
