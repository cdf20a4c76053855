// HeapProfiler (heap_profiler.h): the samples' bookkeeping under one lock, and the dumps.
#include "profile/heap_profiler.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "profile/backtrace.h"
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
};
constinit ProfilerState g_profiler{};

std::uint64_t sample_mean() {
  const long mean = options().prof_sample.load(std::memory_order_relaxed);
  return mean < 1 ? 1 : std::uint64_t(mean);
}

}  // namespace

void HeapProfiler::record(const void* p, std::size_t bytes) {
  ThreadProfile& t = t_profile;
  const bool was_sampling = t.sampling;
  t.busy = true;
  t.sampling = false;
  std::uintptr_t pcs[kMaxStackDepth];
  const unsigned depth = capture_backtrace(pcs, kMaxStackDepth);
  {
    LockGuard guard(g_profiler.lock);
    if (StackRecord* stack = g_profiler.stacks.find_or_add(pcs, depth)) {
      LiveSample replaced{};
      bool found = false;
      if (g_profiler.samples.add(LiveSample{reinterpret_cast<std::uintptr_t>(p), stack, bytes},
                                 replaced, found)) {
        if (found) {  // a block freed where the profiler did not see it (an arena's reset)
          --replaced.stack->live_count;
          replaced.stack->live_bytes -= replaced.bytes;
        }
        ++stack->live_count;
        stack->live_bytes += bytes;
        ++stack->total_count;
        stack->total_bytes += bytes;
        ++g_profiler.taken;
        g_profiler.live.store(g_profiler.samples.size(), std::memory_order_relaxed);
      }
    }
  }
  t.busy = false;
  t.sampling = was_sampling;
}

// A free or move made while the thread is inside the profiler (a signal handler's, which may
// have interrupted it holding the lock) leaves the sample counted live rather than wait for
// the lock the thread holds.
void HeapProfiler::forget(const void* p) {
  if (g_profiler.live.load(std::memory_order_relaxed) == 0 || t_profile.busy) return;
  LockGuard guard(g_profiler.lock);
  LiveSample gone{};
  if (!g_profiler.samples.remove(reinterpret_cast<std::uintptr_t>(p), gone)) return;
  --gone.stack->live_count;
  gone.stack->live_bytes -= gone.bytes;
  g_profiler.live.store(g_profiler.samples.size(), std::memory_order_relaxed);
}

void HeapProfiler::moved(const void* p, const void* q) {
  if (g_profiler.live.load(std::memory_order_relaxed) == 0 || t_profile.busy) return;
  LockGuard guard(g_profiler.lock);
  LiveSample sample{};
  if (!g_profiler.samples.remove(reinterpret_cast<std::uintptr_t>(p), sample)) return;
  sample.address = reinterpret_cast<std::uintptr_t>(q);
  LiveSample replaced{};
  bool found = false;
  if (!g_profiler.samples.add(sample, replaced, found)) {  // no room: counted freed
    --sample.stack->live_count;
    sample.stack->live_bytes -= sample.bytes;
  }
  g_profiler.live.store(g_profiler.samples.size(), std::memory_order_relaxed);
}

bool HeapProfiler::is_sampled(const void* p) {
  if (g_profiler.live.load(std::memory_order_relaxed) == 0 || t_profile.busy) return false;
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

}  // namespace

int HeapProfiler::dump(const char* path) {
  if (!enabled()) return ENOENT;
  char generated[kProfPrefixCapacity + 64];
  if (path == nullptr) {
    if (!dump_path(generated, sizeof(generated), 'm')) return ENAMETOOLONG;
    path = generated;
  }
  ThreadProfile& t = t_profile;
  const bool was_busy = t.busy, was_sampling = t.sampling;
  t.busy = true;
  t.sampling = false;
  const int error = dump_to(path);
  t.busy = was_busy;
  t.sampling = was_sampling;
  return error;
}

void HeapProfiler::dump_at_exit() {
  if (!enabled() || !options().prof_final.load(std::memory_order_relaxed)) return;
  char path[kProfPrefixCapacity + 64];
  if (!dump_path(path, sizeof(path), 'f'))
    return warn("prof_final: the profile's path is too long");
  t_profile.busy = true;
  t_profile.sampling = false;
  if (const int error = dump_to(path); error != 0) {
    char message[kProfPrefixCapacity + 128];
    auto r = fmt::format_to_n(message, sizeof(message) - 1,
                              "prof_final: cannot write {} (errno {})", path, error);
    warn(std::string_view(message, r.size < sizeof(message) ? r.size : sizeof(message) - 1));
  }
}

HeapProfiler::Counts HeapProfiler::counts() {
  LockGuard guard(g_profiler.lock);
  return Counts{g_profiler.samples.size(), g_profiler.stacks.stacks(),
                std::size_t(g_profiler.stacks.dropped()),
                g_profiler.samples.mapped_bytes() + g_profiler.stacks.mapped_bytes(),
                g_profiler.taken};
}

// Every heap's fork handlers call these (a program may assemble several heaps, each with its
// Config): the lock is taken by the first and released by the last, in the forking thread.
namespace {
constinit thread_local unsigned t_fork_depth = 0;
}

void HeapProfiler::lock_for_fork() {
  if (t_fork_depth++ == 0) g_profiler.lock.lock();
}
void HeapProfiler::unlock_after_fork() {
  if (--t_fork_depth == 0) g_profiler.lock.unlock();
}

}  // namespace pagemalloc
