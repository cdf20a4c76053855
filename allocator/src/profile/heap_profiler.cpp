// HeapProfiler (heap_profiler.h): the samples' bookkeeping under one lock, and the dumps.
#include "profile/heap_profiler.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "os/clock.h"
#include "profile/backtrace.h"
#include "profile/leak_report.h"
#include "profile/profile_writer.h"
#include "profile/sample_table.h"
#include "profile/sampling.h"
#include "profile/stack_table.h"
#include "support/diagnostics.h"
#include "support/format.h"
#include "support/lock.h"

namespace pagemalloc {
namespace {

struct ProfilerState {
  Lock lock;
  StackTable stacks;
  SampleTable samples;
  std::atomic<std::size_t> live{0};  // samples.size(), read without the lock
  std::atomic<std::uint64_t> dumps{0};
  std::uint64_t taken = 0;
  // The bytes the live samples stand for (sample_weight), and where prof_interval's next
  // profile is due.
  double live_estimate = 0;
  double next_interval_profile = 0;
  std::uint64_t next_timed_profile_ms = 0;  // prof_interval_ms's
};
constinit ProfilerState g_profiler{};

std::uint64_t sample_mean() {
  const long mean = options().prof_sample.load(std::memory_order_relaxed);
  return mean < 1 ? 1 : std::uint64_t(mean);
}

// Requires: the lock held. A sample of `bytes` counted live (sign 1) or freed (-1).
void count_live(std::size_t bytes, int sign) {
  g_profiler.live_estimate += sign * sample_weight(bytes, sample_mean());
  // (Rounding: never below nothing, and nothing once no sample is live.)
  if (g_profiler.live_estimate < 0 || g_profiler.samples.size() == 0) g_profiler.live_estimate = 0;
}

// Requires: the lock held. Whether prof_interval's profile is due (then the next is set).
bool interval_profile_due() {
  const long interval = options().prof_interval.load(std::memory_order_relaxed);
  if (interval <= 0) return false;
  if (g_profiler.next_interval_profile == 0) g_profiler.next_interval_profile = double(interval);
  if (g_profiler.live_estimate < g_profiler.next_interval_profile) return false;
  g_profiler.next_interval_profile = g_profiler.live_estimate + double(interval);
  return true;
}

// Requires: the lock held. Whether prof_interval_ms's profile is due (then the next is set).
bool timed_profile_due() {
  const long interval = options().prof_interval_ms.load(std::memory_order_relaxed);
  if (interval <= 0) return false;
  const std::uint64_t now = now_ms();
  if (g_profiler.next_timed_profile_ms == 0) g_profiler.next_timed_profile_ms = now + interval;
  if (now < g_profiler.next_timed_profile_ms) return false;
  g_profiler.next_timed_profile_ms = now + std::uint64_t(interval);
  return true;
}

void dump_interval_profile(char kind);

// While it lives, the calling thread is inside the profiler: its allocations are not sampled
// and its frees look for no sample, so that a signal handler that allocates or frees while the
// thread holds the profiler's lock never waits for it (its blocks go unsampled, a sample it
// frees stays counted live). The signal fences keep the marks on their side of the lock.
class InsideProfiler {
 public:
  InsideProfiler() : thread_(t_profile), was_busy_(thread_.busy), was_sampling_(thread_.sampling) {
    thread_.busy = true;
    thread_.sampling = false;
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  ~InsideProfiler() {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    thread_.busy = was_busy_;
    thread_.sampling = was_sampling_;
  }
  InsideProfiler(const InsideProfiler&) = delete;
  InsideProfiler& operator=(const InsideProfiler&) = delete;

 private:
  ThreadProfile& thread_;
  bool was_busy_, was_sampling_;
};

}  // namespace

void HeapProfiler::record(const void* p, std::size_t bytes) {
  // A block a bin chose (ThreadCache::pop_sampling) in a signal handler that interrupted the
  // profiler: served as a sample's pages, and left unrecorded.
  if (t_profile.busy) return;
  InsideProfiler inside;
  std::uintptr_t pcs[kMaxStackDepth];
  const unsigned depth = capture_backtrace(pcs, kMaxStackDepth);
  bool grown_profile_due = false, timed_profile_due_now = false;
  {
    LockGuard guard(g_profiler.lock);
    if (StackRecord* stack = g_profiler.stacks.find_or_add(pcs, depth)) {
      LiveSample replaced{};
      bool found = false;
      if (g_profiler.samples.add(LiveSample{reinterpret_cast<std::uintptr_t>(p), stack, bytes},
                                 replaced, found)) {
        if (found) {  // a block freed where the profiler did not see it
          --replaced.stack->live_count;
          replaced.stack->live_bytes -= replaced.bytes;
          count_live(replaced.bytes, -1);
        }
        count_live(bytes, 1);
        grown_profile_due = interval_profile_due();
        timed_profile_due_now = timed_profile_due();
        ++stack->live_count;
        stack->live_bytes += bytes;
        ++stack->total_count;
        stack->total_bytes += bytes;
        ++g_profiler.taken;
        g_profiler.live.store(g_profiler.samples.size(), std::memory_order_relaxed);
      }
    }
  }
  if (grown_profile_due) dump_interval_profile('i');
  if (timed_profile_due_now) dump_interval_profile('t');
}

// A free or move made while the thread is inside the profiler (a signal handler's, which may
// have interrupted it holding the lock) leaves the sample counted live rather than wait for
// the lock the thread holds.
void HeapProfiler::forget(const void* p) {
  if (g_profiler.live.load(std::memory_order_relaxed) == 0 || t_profile.busy) return;
  InsideProfiler inside;
  LockGuard guard(g_profiler.lock);
  LiveSample gone{};
  if (!g_profiler.samples.remove(reinterpret_cast<std::uintptr_t>(p), gone)) return;
  --gone.stack->live_count;
  gone.stack->live_bytes -= gone.bytes;
  count_live(gone.bytes, -1);
  g_profiler.live.store(g_profiler.samples.size(), std::memory_order_relaxed);
}

void HeapProfiler::forget_where(bool (*belongs)(std::uintptr_t, const void*), const void* context) {
  if (g_profiler.live.load(std::memory_order_relaxed) == 0 || t_profile.busy) return;
  InsideProfiler inside;
  LockGuard guard(g_profiler.lock);
  g_profiler.samples.remove_if([&](const LiveSample& s) { return belongs(s.address, context); },
                               [](const LiveSample& gone) {
                                 --gone.stack->live_count;
                                 gone.stack->live_bytes -= gone.bytes;
                                 count_live(gone.bytes, -1);
                               });
  g_profiler.live.store(g_profiler.samples.size(), std::memory_order_relaxed);
}

void HeapProfiler::moved(const void* p, const void* q) {
  if (g_profiler.live.load(std::memory_order_relaxed) == 0 || t_profile.busy) return;
  InsideProfiler inside;
  LockGuard guard(g_profiler.lock);
  LiveSample sample{};
  if (!g_profiler.samples.remove(reinterpret_cast<std::uintptr_t>(p), sample)) return;
  sample.address = reinterpret_cast<std::uintptr_t>(q);
  LiveSample replaced{};
  bool found = false;
  if (!g_profiler.samples.add(sample, replaced, found)) {  // no room: counted freed
    --sample.stack->live_count;
    sample.stack->live_bytes -= sample.bytes;
    count_live(sample.bytes, -1);
  }
  g_profiler.live.store(g_profiler.samples.size(), std::memory_order_relaxed);
}

bool HeapProfiler::is_sampled(const void* p) {
  if (g_profiler.live.load(std::memory_order_relaxed) == 0 || t_profile.busy) return false;
  InsideProfiler inside;
  LockGuard guard(g_profiler.lock);
  return g_profiler.samples.contains(reinterpret_cast<std::uintptr_t>(p));
}

namespace {

// prof_prefix.PID.SEQ.KIND.heap into buffer; false if it does not fit.
bool dump_path(char* buffer, std::size_t capacity, char kind) {
  const std::uint64_t sequence = g_profiler.dumps.fetch_add(1, std::memory_order_relaxed);
  auto r =
      fmt::format_to_n(buffer, capacity - 1, "{}.{}.{}.{}.heap",
                       static_cast<const char*>(options().prof_prefix), ::getpid(), sequence, kind);
  if (r.size >= capacity) return false;
  buffer[r.size] = '\0';
  return true;
}

int dump_to(const char* path) {
  CancellationHeldOff no_cancel;  // open, write and close are cancellation points
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  bool written;
  {
    LockGuard guard(g_profiler.lock);
    written = write_heap_profile(fd, sample_mean(), g_profiler.stacks);
  }
  const int error = written ? 0 : errno == 0 ? EIO : errno;
  ::close(fd);
  return error;
}

// Requires: the thread marked busy (inside the profiler). Warns once if a profile cannot be
// written, as prof_final does.
void warn_unwritten(const char* option, const char* path, int error) {
  char message[kProfPrefixCapacity + 128];
  auto r = fmt::format_to_n(message, sizeof(message) - 1, "{}: cannot write {} (errno {})", option,
                            path, error);
  warn(std::string_view(message, r.size < sizeof(message) ? r.size : sizeof(message) - 1));
}

// KIND i: prof_interval's; t: prof_interval_ms's.
void dump_interval_profile(char kind) {
  static std::atomic<bool> warned{false};
  char path[kProfPrefixCapacity + 64];
  if (!dump_path(path, sizeof(path), kind)) return;
  if (const int error = dump_to(path); error != 0 && !warned.exchange(true))
    warn_unwritten(kind == 'i' ? "prof_interval" : "prof_interval_ms", path, error);
}

}  // namespace

int HeapProfiler::dump(const char* path) {
  if (!enabled()) return ENOENT;
  char generated[kProfPrefixCapacity + 64];
  if (path == nullptr) {
    if (!dump_path(generated, sizeof(generated), 'm')) return ENAMETOOLONG;
    path = generated;
  }
  if (t_profile.busy) return EDEADLK;  // (a signal handler's, inside the profiler)
  InsideProfiler inside;
  return dump_to(path);
}

void HeapProfiler::dump_at_exit() {
  if (!enabled()) return;
  t_profile.busy = true;
  t_profile.sampling = false;
  if (options().prof_final.load(std::memory_order_relaxed)) {
    char path[kProfPrefixCapacity + 64];
    if (!dump_path(path, sizeof(path), 'f')) warn("prof_final: the profile's path is too long");
    else if (const int error = dump_to(path); error != 0) warn_unwritten("prof_final", path, error);
  }
  if (options().prof_leak.load(std::memory_order_relaxed)) {
    CancellationHeldOff no_cancel;
    LockGuard guard(g_profiler.lock);
    write_leak_report(STDERR_FILENO, sample_mean(), g_profiler.stacks);
  }
}

HeapProfiler::Counts HeapProfiler::counts() {
  // (A signal handler's, inside the profiler: the one count read without the lock.)
  if (t_profile.busy) return Counts{g_profiler.live.load(std::memory_order_relaxed), 0, 0, 0, 0, 0};
  InsideProfiler inside;
  LockGuard guard(g_profiler.lock);
  return Counts{g_profiler.samples.size(),
                g_profiler.stacks.stacks(),
                std::size_t(g_profiler.stacks.dropped()),
                g_profiler.samples.mapped_bytes() + g_profiler.stacks.mapped_bytes(),
                g_profiler.taken,
                std::uint64_t(g_profiler.live_estimate)};
}

// Every heap's fork handlers call these (a program may assemble several heaps, each with its
// Config): the lock is taken by the first and released by the last, in the forking thread.
namespace {
constinit thread_local unsigned t_fork_depth = 0;
}  // namespace

void HeapProfiler::lock_for_fork() {
  if (t_fork_depth++ == 0) g_profiler.lock.lock();
}
void HeapProfiler::unlock_after_fork() {
  if (--t_fork_depth == 0) g_profiler.lock.unlock();
}

}  // namespace pagemalloc
