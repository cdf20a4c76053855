// The heap profiler in a process that allocates through pm_malloc and friends (prof:true set at
// run time through the configuration parser): samples are taken at the rate asked, every
// sampled block is forgotten when it is freed (small ones served as runs of pages among them),
// sampled blocks behave as any other (usable size, realloc's copy, sized frees with checks on,
// calloc's zeroes), and threads that allocate and free while prof.active is switched on and
// off and profiles are written leave no sample behind; explicit and bump arenas' blocks are
// sampled and forgotten at their frees and at their arena's reset; prof_interval writes a
// profile as the live bytes grow by it; a signal handler that allocates sampled blocks while
// its thread holds the profiler's lock does not wait for it. Run under ThreadSanitizer too (label
// threads).
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "pagemalloc/pagemalloc.h"
#include "profile/heap_profiler.h"
#include "support/options.h"

namespace {

using pagemalloc::HeapProfiler;

constexpr long kRate = 4096;

class HeapProfilerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pagemalloc::apply_conf("prof:true,prof_sample:4096");
    long on = 1;
    ASSERT_EQ(pm_ctl("prof.active", nullptr, &on), 0);
  }
  static std::size_t live_samples() { return HeapProfiler::counts().live_samples; }
};

TEST_F(HeapProfilerTest, SamplesAtTheRateAskedAndForgetsWhatIsFreed) {
  long rate = 0;
  ASSERT_EQ(pm_ctl("prof.sample", &rate, nullptr), 0);
  EXPECT_EQ(rate, kRate);
  const std::size_t before = live_samples();
  constexpr int kBlocks = 20000;
  std::vector<void*> blocks;
  for (int i = 0; i < kBlocks; ++i) {
    blocks.push_back(pm_malloc(64));
    ASSERT_NE(blocks.back(), nullptr);
    std::memset(blocks.back(), 7, 64);
  }
  const double p = 1 - std::exp(-64.0 / kRate);
  const double expected = kBlocks * p, sd = std::sqrt(kBlocks * p * (1 - p));
  const double got = double(live_samples() - before);
  EXPECT_NEAR(got, expected, 5 * sd);
  for (void* b : blocks) {
    for (int k = 0; k < 64; ++k) ASSERT_EQ(static_cast<unsigned char*>(b)[k], 7);
    pm_free(b);
  }
  EXPECT_EQ(live_samples(), before);
}

// A block freed and asked for again at once never leaves the thread cache's fast path; it is
// sampled as often as any other (the bins count their pops: ThreadCache::BinSampling).
TEST_F(HeapProfilerTest, BlocksThatStayOnTheFastPathAreSampledAtTheRate) {
  for (std::size_t size : {16, 64, 1024, 8192}) {
    const std::uint64_t before = HeapProfiler::counts().taken;
    constexpr int kPairs = 200000;
    for (int i = 0; i < kPairs; ++i) {
      void* volatile p = pm_malloc(size);
      static_cast<char*>(p)[0] = 1;
      pm_free(p);
    }
    const double p = 1 - std::exp(-double(size) / kRate);
    const double sd = std::sqrt(kPairs * p * (1 - p));
    EXPECT_NEAR(double(HeapProfiler::counts().taken - before), kPairs * p, 5 * sd + 2) << size;
  }
}

// Which allocation of a class is sampled does not depend on when the cache refills: one block
// in 64 allocated at one call (the first after each batch of 63 others) is sampled as often as
// the others, where sampling at the refills would favour it.
TEST_F(HeapProfilerTest, EveryAllocationOfAClassHasTheSameChance) {
  constexpr int kRounds = 4000, kBatch = 64;
  int sampled_first = 0, sampled_other = 0;
  std::vector<void*> blocks(kBatch);
  for (int r = 0; r < kRounds; ++r) {
    for (int i = 0; i < kBatch; ++i) blocks[i] = pm_malloc(256);
    sampled_first += HeapProfiler::is_sampled(blocks[0]) ? 1 : 0;
    for (int i = 1; i < kBatch; ++i) sampled_other += HeapProfiler::is_sampled(blocks[i]) ? 1 : 0;
    for (void* b : blocks) pm_free(b);
  }
  const double p = 1 - std::exp(-256.0 / kRate);
  const double first = kRounds * p, other = kRounds * (kBatch - 1) * p;
  EXPECT_NEAR(sampled_first, first, 5 * std::sqrt(first * (1 - p)) + 2);
  EXPECT_NEAR(sampled_other, other, 5 * std::sqrt(other * (1 - p)) + 2);
}

TEST_F(HeapProfilerTest, SampledBlocksBehaveAsAnyOther) {
  const std::size_t before = live_samples();
  long checks_before = 0, on = 1;
  ASSERT_EQ(pm_ctl("checks", &checks_before, &on), 0);  // sized frees checked
  std::mt19937 rng(5);
  std::vector<std::pair<char*, std::size_t>> blocks;
  for (int i = 0; i < 20000; ++i) {
    const std::size_t size = 1 + rng() % 3000;
    char* p = static_cast<char*>(i % 3 == 0 ? pm_calloc(1, size) : pm_malloc(size));
    ASSERT_NE(p, nullptr);
    ASSERT_GE(pm_malloc_usable_size(p), size);
    if (i % 3 == 0) {
      for (std::size_t k = 0; k < size; ++k) ASSERT_EQ(p[k], 0) << size;
    }
    std::memset(p, int(size & 0xff), size);
    blocks.emplace_back(p, size);
  }
  EXPECT_GT(live_samples(), before);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    auto& [p, size] = blocks[i];
    if (i % 2 == 0) {  // grown or shrunk by realloc: the first bytes stay
      const std::size_t to = 1 + rng() % 5000;
      char* q = static_cast<char*>(pm_realloc(p, to));
      ASSERT_NE(q, nullptr);
      for (std::size_t k = 0; k < std::min(size, to); ++k) ASSERT_EQ(q[k], char(size & 0xff));
      p = q;
      size = to;
      std::memset(p, int(size & 0xff), size);
    }
  }
  for (auto& [p, size] : blocks) pm_sdallocx(p, size, 0);
  pm_ctl("checks", nullptr, &checks_before);
  EXPECT_EQ(live_samples(), before);
}

TEST_F(HeapProfilerTest, ThreadsLeaveNoSampleWhileItIsSwitchedAndDumped) {
  const std::size_t before = live_samples();
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      std::mt19937 rng(t + 1);
      std::vector<void*> live(256, nullptr);
      for (int i = 0; i < 60000; ++i) {
        const unsigned slot = rng() % live.size();
        pm_free(live[slot]);
        const unsigned kind = rng() % 100;
        const std::size_t size = kind < 90   ? 16 + rng() % 1000
                                 : kind < 99 ? 70000 + rng() % 100000
                                             : 3 << 20;
        live[slot] = pm_malloc(size);
        ASSERT_NE(live[slot], nullptr);
        static_cast<char*>(live[slot])[0] = char(i);
      }
      for (void* p : live) pm_free(p);
    });
  }
  std::thread switcher([&done] {
    long on = 0;
    for (int i = 0; !done.load(); ++i) {
      on = i % 2;
      pm_ctl("prof.active", nullptr, &on);
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    on = 1;
    pm_ctl("prof.active", nullptr, &on);
  });
  const std::string path = "/tmp/pagemalloc-profile-test." + std::to_string(::getpid()) + ".heap";
  for (int d = 0; d < 5; ++d) {
    EXPECT_EQ(pm_prof_dump(path.c_str()), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& t : threads) t.join();
  done = true;
  switcher.join();
  EXPECT_EQ(live_samples(), before);
  std::FILE* f = std::fopen(path.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char header[64] = {};
  ASSERT_NE(std::fgets(header, sizeof(header), f), nullptr);
  EXPECT_STREQ(header, "heap_v2/4096\n");
  std::fclose(f);
  std::remove(path.c_str());
}

// Blocks of every size through pm_mallocx with PM_ARENA(i) of an explicit arena, and of a bump
// arena (bumped ones and the larger ones its own arena serves): sampled at the rate, forgotten
// at pm_free, and every one still live forgotten at the arena's reset and destroy.
TEST_F(HeapProfilerTest, ExplicitAndBumpArenasBlocksAreSampledAndForgottenAtTheirReset) {
  for (unsigned kind : {0u, unsigned(PM_ARENA_BUMP)}) {
    const std::size_t before = live_samples();
    const unsigned arena = kind == 0 ? pm_arena_create() : pm_arena_create_ex(kind);
    ASSERT_NE(arena, 0u);
    constexpr int kBlocks = 8000;
    std::vector<void*> blocks;
    for (int i = 0; i < kBlocks; ++i) {
      const std::size_t size = i % 100 == 0 ? 200000 : i % 1000 == 1 ? (3 << 20) : 64 + i % 512;
      void* p = pm_mallocx(size, PM_ARENA(arena));
      ASSERT_NE(p, nullptr);
      std::memset(p, 1, size < 4096 ? size : 4096);
      blocks.push_back(p);
    }
    const std::size_t sampled = live_samples() - before;
    EXPECT_GT(sampled, 100u) << "kind " << kind;  // some 2,700 expected at 4 KiB
    // The first half freed one by one: their samples go.
    for (int i = 0; i < kBlocks / 2; ++i) pm_free(blocks[std::size_t(i)]);
    const std::size_t left = live_samples() - before;
    EXPECT_LT(left, sampled) << "kind " << kind;
    EXPECT_GT(left, 0u) << "kind " << kind;
    ASSERT_EQ(pm_arena_reset(arena), 0);
    EXPECT_EQ(live_samples(), before) << "kind " << kind << ": the reset left samples";
    // Again, then destroyed with blocks live.
    for (int i = 0; i < 2000; ++i) ASSERT_NE(pm_mallocx(64 + i % 4000, PM_ARENA(arena)), nullptr);
    EXPECT_GT(live_samples(), before);
    ASSERT_EQ(pm_arena_destroy(arena), 0);
    EXPECT_EQ(live_samples(), before) << "kind " << kind << ": the destroy left samples";
  }
}

// prof_interval: a profile each time the live samples' estimate grows by the interval. 64 MiB
// kept live in 64 KiB blocks at 4 KiB sampling, an interval of 16 MiB: about four profiles
// (the estimate's error at that size is some 1 %), none while the same bytes are freed and
// allocated again.
TEST_F(HeapProfilerTest, AnIntervalProfileIsWrittenAsTheLiveBytesGrowByTheInterval) {
  const std::string prefix = "/tmp/pagemalloc-interval-" + std::to_string(::getpid());
  pagemalloc::apply_conf(("prof_interval:16777216,prof_prefix:" + prefix).c_str());
  auto profiles = [&] {
    unsigned n = 0;
    for (unsigned seq = 0; seq < 1000; ++seq) {
      const std::string path =
          prefix + "." + std::to_string(::getpid()) + "." + std::to_string(seq) + ".i.heap";
      if (::access(path.c_str(), F_OK) == 0) ++n;
    }
    return n;
  };
  const double start = double(HeapProfiler::counts().live_estimate);
  std::vector<void*> blocks;
  for (int i = 0; i < 1024; ++i) blocks.push_back(pm_malloc(65536));
  const double grown = double(HeapProfiler::counts().live_estimate) - start;
  EXPECT_NEAR(grown, 64.0 * (1 << 20), 0.05 * 64 * (1 << 20));
  const unsigned written = profiles();
  EXPECT_GE(written, 3u);
  EXPECT_LE(written, 5u);
  for (int round = 0; round < 3; ++round) {
    for (void*& b : blocks) {
      pm_free(b);
      b = pm_malloc(65536);
    }
  }
  EXPECT_LE(profiles(), written + 1) << "a steady heap wrote profiles";
  for (void* b : blocks) pm_free(b);
  pagemalloc::apply_conf("prof_interval:0,prof_prefix:pagemalloc");
  for (unsigned seq = 0; seq < 1000; ++seq)
    std::remove((prefix + "." + std::to_string(::getpid()) + "." + std::to_string(seq) + ".i.heap")
                    .c_str());
}

// A thread that only asks the profiler (its counts, whether a block is a sample: each holds the
// profiler's lock) is interrupted two thousand times by a handler that allocates and frees
// blocks sampled two times in three (prof_sample 64), and every 64th time asks for the counts
// and a profile (which it gets, or EDEADLK while its thread is inside the profiler). A handler
// that waited for the lock its thread holds would never return: a watchdog fails the test
// after 60 s. The next signal is sent once the handler before has returned and the thread has
// asked again, so that every signal finds the thread asking (one sent while a handler runs
// would be delivered at its return, before the thread asks anything).
std::atomic<unsigned> g_entered{0};        // handlers begun
std::atomic<unsigned> g_handled{0};        // handlers returned
std::atomic<int> g_handler_dump_error{0};  // a result of pm_prof_dump other than 0 or EDEADLK
char g_handler_dump_path[128];
void allocate_in_handler(int) {
  const unsigned n = g_entered.fetch_add(1, std::memory_order_relaxed);
  void* p = pm_malloc(64 * (1 + n % 4));
  if (p != nullptr) std::memset(p, 1, 64);
  pm_free(p);
  if (n % 64 == 0) {
    (void)HeapProfiler::counts();
    const int error = pm_prof_dump(g_handler_dump_path);
    if (error != 0 && error != EDEADLK) g_handler_dump_error.store(error);
  }
  g_handled.fetch_add(1, std::memory_order_release);
}

TEST_F(HeapProfilerTest, ASignalHandlerThatAllocatesNeverWaitsForTheProfiler) {
  pagemalloc::apply_conf("prof_sample:64");
  std::snprintf(g_handler_dump_path, sizeof(g_handler_dump_path),
                "/tmp/pagemalloc-handler-profile.%d.heap", int(::getpid()));
  struct sigaction action {};
  action.sa_handler = allocate_in_handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  struct sigaction before {};
  ASSERT_EQ(sigaction(SIGUSR1, &action, &before), 0);
  // The thread's countdown was drawn at the suite's rate (4096 bytes on average), so the first
  // blocks may all pass unsampled (64 of 256 bytes did about one time in fifty): the thread
  // keeps allocating until one of its blocks is a sample, so that the asker has one to see.
  std::vector<void*> kept;
  bool holds_a_sample = false;
  for (int i = 0; i < 64 || (!holds_a_sample && i < 4096); ++i) {
    kept.push_back(pm_malloc(256));
    holds_a_sample = holds_a_sample || HeapProfiler::is_sampled(kept.back());
  }
  ASSERT_TRUE(holds_a_sample) << kept.size() << " blocks of 256 bytes at prof_sample 64";
  const std::size_t live_before = live_samples();
  std::atomic<bool> asking{true}, finished{false};
  std::atomic<unsigned> questions{0};  // the asker's questions so far
  std::thread watchdog([&finished] {
    for (int i = 0; i < 600 && !finished.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!finished.load()) {
      std::fputs("a signal handler waited for the profiler's lock: no progress in 60 s\n", stderr);
      std::_Exit(1);
    }
  });
  std::thread asker([&] {
    std::size_t seen = 0;
    while (asking.load(std::memory_order_relaxed))
      for (void* p : kept) {
        seen += HeapProfiler::counts().live_samples + HeapProfiler::is_sampled(p);
        questions.fetch_add(1, std::memory_order_relaxed);
      }
    EXPECT_GT(seen, 0u);
  });
  const pthread_t target = asker.native_handle();
  // Each signal is sent once the one before has returned and the thread has asked again, so
  // that a loaded machine (which delays delivery) makes the test slower, never a signal lost
  // or one that finds the thread between handlers; 30 s at most.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  const auto wait_for = [&end](const auto& done) {
    while (!done() && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  };
  unsigned sent = 0;
  while (g_handled.load() < 2000 && std::chrono::steady_clock::now() < end) {
    const unsigned handled_before = g_handled.load();
    const unsigned asked_before = questions.load();
    wait_for([&] { return questions.load() > asked_before; });
    pthread_kill(target, SIGUSR1);
    ++sent;
    wait_for([&] { return g_handled.load() > handled_before; });
  }
  asking = false;
  asker.join();
  finished = true;
  watchdog.join();
  ASSERT_EQ(sigaction(SIGUSR1, &before, nullptr), 0);
  const unsigned handled = g_handled.load();
  EXPECT_GT(handled, 1000u) << sent << " sent";
  // The handler's sampled blocks (those it allocated while its thread was outside the
  // profiler) were forgotten at its frees: the books hold what they held before.
  EXPECT_EQ(live_samples(), live_before);
  EXPECT_EQ(g_handler_dump_error.load(), 0) << "pm_prof_dump in the handler";
  std::remove(g_handler_dump_path);
  for (void* p : kept) pm_free(p);
  pagemalloc::apply_conf("prof_sample:4096");
}

TEST_F(HeapProfilerTest, ADumpToAPathThatCannotBeMadeSaysWhy) {
  EXPECT_EQ(pm_prof_dump("/nonexistent-directory/profile.heap"), ENOENT);
  EXPECT_EQ(pm_ctl("prof", nullptr, nullptr), 0);
  long one = 1;
  EXPECT_EQ(pm_ctl("prof", nullptr, &one), EPERM);
  EXPECT_EQ(pm_ctl("prof.sample", nullptr, &one), EPERM);
}

}  // namespace
