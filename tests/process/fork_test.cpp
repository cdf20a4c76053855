// Fork safety: the child of a multithreaded parent can allocate.
//
// While worker threads allocate and free blocks of every kind (small, large, huge), take
// statistics, start and end short-lived threads (whose caches come and go), fill and reset an
// explicit arena and create and destroy others, the main thread forks again and again. Each
// child allocates and frees a lot of every kind, checks what it wrote, takes statistics,
// purges, uses the parent's explicit arena and one of its own, starts a thread of its own
// that allocates, and exits with 0, or with a code naming the first check that failed. A child that
// deadlocks on a lock held by a thread that did not survive the fork is killed by an alarm, and the
// parent reports the signal.
//
// The child touches no allocator but pagemalloc (its arrays are on the stack): the system
// allocator of a sanitizer build is not fork-safe (GCC 12's AddressSanitizer does not lock
// its allocator around fork, so a child that calls it may wait forever on a lock a parent
// thread held). For the same reason the child starts its own thread only without
// AddressSanitizer: a new thread allocates through it.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
constexpr unsigned kChildAlarmSeconds = 60;

// A block filled with a pattern that depends on its address and a salt.
struct Block {
  unsigned char* start = nullptr;
  std::size_t size = 0;
  unsigned char salt = 0;
};

unsigned char pattern_byte(std::size_t offset, unsigned char salt) {
  return static_cast<unsigned char>((offset * 131 + salt) & 0xff);
}

// Writes the first and last 4 KiB and every 4 KiB in between (a huge block is not touched
// whole: the test is about locks, not bandwidth).
template <class Visit>
void for_each_probe(const Block& b, Visit visit) {
  const std::size_t stride = b.size <= 8 * KiB ? 1 : 4 * KiB;
  for (std::size_t i = 0; i < b.size; i += stride) visit(i);
  if (b.size != 0) visit(b.size - 1);
}

bool fill_and_keep(Block& b, std::size_t size, unsigned char salt) {
  b.start = static_cast<unsigned char*>(pm_malloc(size));
  b.size = size;
  b.salt = salt;
  if (b.start == nullptr) return false;
  for_each_probe(b, [&](std::size_t i) { b.start[i] = pattern_byte(i, salt); });
  return true;
}

bool intact(const Block& b) {
  bool ok = true;
  for_each_probe(b, [&](std::size_t i) { ok &= b.start[i] == pattern_byte(i, b.salt); });
  return ok;
}

std::size_t size_of_kind(std::mt19937_64& rng) {
  const unsigned kind = unsigned(rng() % 100);
  if (kind < 80) return 1 + rng() % 2048;                // small
  if (kind < 97) return 20 * KiB + rng() % (900 * KiB);  // large
  return 3 * MiB + rng() % (6 * MiB);                    // huge
}

// The parent's workers: allocation traffic on every lock of the heap until told to stop.
class Workers {
 public:
  explicit Workers(unsigned count) : shared_arena_(pm_arena_create()) {
    for (unsigned t = 0; t < count; ++t) threads_.emplace_back([this, t] { run(t); });
    threads_.emplace_back([this] { churn_threads(); });
    threads_.emplace_back([this] { churn_arenas(); });
  }
  ~Workers() { stop(); }

  void stop() {
    stop_.store(true);
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
  }
  int failures() const { return failures_.load(); }
  // An explicit arena that one worker fills and resets over and over.
  unsigned shared_arena() const { return shared_arena_; }

 private:
  void run(unsigned id) {
    std::mt19937_64 rng(0xf0f0 + id);
    std::vector<Block> live(64);
    unsigned char salt = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
      Block& slot = live[rng() % live.size()];
      if (slot.start != nullptr) {
        if (!intact(slot)) failures_.fetch_add(1);
        pm_free(slot.start);
        slot = {};
      } else if (!fill_and_keep(slot, size_of_kind(rng), ++salt)) {
        failures_.fetch_add(1);
      }
      if (rng() % 256 == 0) {
        pm_stats stats{};
        pm_stats_get(&stats);
      }
    }
    for (Block& b : live)
      if (b.start != nullptr) pm_free(b.start);
  }

  // Threads that start, allocate and end: their caches are created and torn down under the
  // cache registry's lock.
  void churn_threads() {
    while (!stop_.load(std::memory_order_relaxed)) {
      std::thread short_lived([] {
        void* blocks[32];
        for (void*& p : blocks) p = pm_malloc(48);
        for (void* p : blocks) pm_free(p);
      });
      short_lived.join();
    }
  }

  // Fills the shared arena and resets it; creates, fills and destroys other arenas.
  void churn_arenas() {
    if (shared_arena_ == 0) failures_.fetch_add(1);
    std::mt19937_64 rng(0xa7e4a);
    for (unsigned round = 0; !stop_.load(std::memory_order_relaxed); ++round) {
      const unsigned arena = round % 4 == 0 ? pm_arena_create() : shared_arena_;
      for (int i = 0; i < 200; ++i)
        if (pm_mallocx(size_of_kind(rng), PM_ARENA(arena)) == nullptr) failures_.fetch_add(1);
      if (arena == shared_arena_ ? pm_arena_reset(arena) != 0 : pm_arena_destroy(arena) != 0)
        failures_.fetch_add(1);
    }
  }

  const unsigned shared_arena_;
  std::atomic<bool> stop_{false};
  std::atomic<int> failures_{0};
  std::vector<std::thread> threads_;
};

// The child's explicit arenas: the parent's, reset and used again, and a new one.
int child_arena_workload(unsigned parent_arena, std::mt19937_64& rng) {
  if (parent_arena != 0 && pm_arena_reset(parent_arena) != 0) return 10;
  const unsigned own = pm_arena_create();
  if (own == 0) return 11;
  for (unsigned arena : {parent_arena, own}) {
    if (arena == 0) continue;
    std::array<void*, 300> blocks{};
    for (void*& block : blocks) {
      const std::size_t size = size_of_kind(rng);
      auto* p = static_cast<unsigned char*>(pm_mallocx(size, PM_ARENA(arena)));
      if (p == nullptr) return 12;
      p[0] = 0x11;
      p[size - 1] = 0x22;
      block = p;
    }
    for (std::size_t i = 0; i < blocks.size(); i += 3) pm_free(blocks[i]);
    pm_arena_stats stats{};
    if (pm_arena_stats_get(arena, &stats) != 0 || stats.blocks != 200) return 13;
    if (pm_arena_reset(arena) != 0) return 14;
  }
  return pm_arena_destroy(own) == 0 ? 0 : 15;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSystemAllocatorIsForkSafe = false;
#else
constexpr bool kSystemAllocatorIsForkSafe = true;
#endif

// A thread of the child's own: its cache comes from the registry.
int child_thread_workload() {
  std::atomic<int> thread_result{-1};
  std::thread helper([&] {
    Block b;
    int result = 0;
    for (int i = 0; i < 1000 && result == 0; ++i) {
      if (!fill_and_keep(b, 1 + std::size_t(i) % 3000, static_cast<unsigned char>(i))) result = 5;
      else if (!intact(b)) result = 6;
      pm_free(b.start);
    }
    thread_result.store(result);
  });
  helper.join();
  ::alarm(0);
  return thread_result.load();
}

// The child's work; returns 0, or the number of the first check that failed.
int child_workload(unsigned round, unsigned parent_arena = 0) {
  ::alarm(kChildAlarmSeconds);
  std::mt19937_64 rng(0xc41d + round);
  std::array<Block, 2000> blocks{};
  unsigned char salt = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      const std::size_t size = i % 1000 == 0 ? 3 * MiB + rng() % (4 * MiB)
                               : i % 50 == 0 ? 20 * KiB + rng() % (300 * KiB)
                                             : 1 + rng() % 4096;
      if (!fill_and_keep(blocks[i], size, ++salt)) return 1;
    }
    for (const Block& b : blocks)
      if (!intact(b)) return 2;
    for (std::size_t i = 0; i < blocks.size(); i += 2) {
      Block& b = blocks[i];
      auto* grown = static_cast<unsigned char*>(pm_realloc(b.start, b.size * 2));
      if (grown == nullptr) return 3;
      b.start = grown;
      if (!intact(b)) return 4;
    }
    for (Block& b : blocks) pm_free(b.start);
  }
  pm_stats stats{};
  pm_stats_get(&stats);
  pm_purge();
  if (const int failed = child_arena_workload(parent_arena, rng)) return failed;

  if (kSystemAllocatorIsForkSafe) return child_thread_workload();
  ::alarm(0);
  return 0;
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) +
           (sig == SIGALRM ? " (the alarm: deadlocked or stuck)" : "");
  }
  return "status " + std::to_string(status);
}

TEST(Fork, ChildOfABusyMultithreadedParentAllocates) {
  constexpr unsigned kForks = 25;
  Workers workers(3);
  for (unsigned round = 0; round < kForks; ++round) {
    // Let the workers get going between forks, so that some fork lands mid-operation.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const pid_t pid = ::fork();
    ASSERT_NE(pid, -1) << std::strerror(errno);
    if (pid == 0) ::_exit(child_workload(round, workers.shared_arena()));
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "fork " << round << ": the child " << describe_exit(status);
  }
  workers.stop();
  EXPECT_EQ(workers.failures(), 0) << "a worker found a block changed or an allocation failed";
}

TEST(Fork, ParentKeepsAllocatingAfterForks) {
  Block before;
  ASSERT_TRUE(fill_and_keep(before, 5000, 7));
  for (unsigned round = 0; round < 5; ++round) {
    const pid_t pid = ::fork();
    ASSERT_NE(pid, -1);
    if (pid == 0) ::_exit(child_workload(round) == 0 && intact(before) ? 0 : 99);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe_exit(status);
  }
  EXPECT_TRUE(intact(before));
  Block after;
  ASSERT_TRUE(fill_and_keep(after, 100 * KiB, 9));
  EXPECT_TRUE(intact(after));
  pm_free(after.start);
  pm_free(before.start);
}

}  // namespace
