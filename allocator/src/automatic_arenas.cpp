// The automatic arenas: the default count, round-robin assignment, mapping on first use.
#include "automatic_arenas.h"

#include <sched.h>
#include <sys/mman.h>

#include <new>

namespace pagemalloc {
namespace {

constexpr std::size_t kRecordBytes = (sizeof(Arena) + kPageSize - 1) / kPageSize * kPageSize;

}  // namespace

unsigned AutomaticArenas::default_count() {
  cpu_set_t cpus;  // on the stack: this runs inside the first malloc
  CPU_ZERO(&cpus);
  const int n = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  const unsigned per_cpu = 4 * unsigned(n < 1 ? 1 : n);
  return per_cpu < kMaxDefaultArenas ? per_cpu : kMaxDefaultArenas;
}

Arena& AutomaticArenas::assign() {
  const unsigned n = count();
  if (n == 1) return first_;
  Arena* a = at(next_.fetch_add(1, std::memory_order_relaxed) % n);
  return a != nullptr ? *a : first_;  // no memory for another arena: share the first
}

Arena* AutomaticArenas::map(unsigned index) {
  LockGuard guard(lock_);
  if (Arena* a = others_[index].load(std::memory_order_relaxed)) return a;
  void* mem =
      ::mmap(nullptr, kRecordBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return nullptr;
  Arena* a = new (mem) Arena(index, huge_, neighbours(), Arena::LeaveStashesUnwritten{});
  others_[index].store(a, std::memory_order_release);
  return a;
}

std::size_t AutomaticArenas::record_bytes() const {
  std::size_t bytes = 0;
  const unsigned n = count();
  for (unsigned i = 1; i < n; ++i)
    if (others_[i].load(std::memory_order_acquire) != nullptr) bytes += kRecordBytes;
  return bytes;
}

void AutomaticArenas::lock_for_fork() {
  lock_.lock();
  for_each([](Arena& a) { a.lock_for_fork(); });
}

void AutomaticArenas::unlock_after_fork() {
  for_each([](Arena& a) { a.unlock_after_fork(); });
  lock_.unlock();
}

}  // namespace pagemalloc
