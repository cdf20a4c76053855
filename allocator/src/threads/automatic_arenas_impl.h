// The automatic arenas: the default count, the choice of a thread's arena, mapping on first use.
#pragma once

#include "threads/automatic_arenas.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <new>

#include "threads/thread_cache.h"

namespace pagemalloc {

// The mask is read by the system call itself: glibc's sched_getaffinity and CPU_COUNT lie in
// pages of libc's text that nothing else a small program runs touches (some 30 KiB resident
// by fault-around, in every process), and syscall() lies beside mmap. Its bits are counted one
// by one: std::popcount, on the baseline x86-64 without the instruction, calls libgcc's
// __popcountdi2, linked at the end of the drop-in's text, far from the code every process runs
// (allocator/CMakeLists.txt).
template <class Config>
unsigned Allocator<Config>::AutomaticArenas::affinity_cpus() {
  std::uint64_t mask[1024 / 64] = {};  // on the stack: this runs inside the first malloc
  const long bytes = ::syscall(SYS_sched_getaffinity, 0, sizeof(mask), mask);
  unsigned n = 0;
  for (long i = 0; i < bytes / long(sizeof(mask[0])); ++i)
    for (std::uint64_t bits = mask[i]; bits != 0; bits &= bits - 1) ++n;
  return n < 1 ? 1 : n;
}

template <class Config>
unsigned Allocator<Config>::AutomaticArenas::cpus() {
  const long forced = options().ncpus.load(std::memory_order_relaxed);
  return forced > 0 ? unsigned(forced) : affinity_cpus();
}

template <class Config>
unsigned Allocator<Config>::AutomaticArenas::default_count() {
  if constexpr (Config::kArenas != 0) return Config::kArenas;  // the design's number
  const unsigned n = cpus();
  const unsigned per_two_cpus = n < 2 ? 1 : n / 2;
  return per_two_cpus < kMaxDefaultArenas ? per_two_cpus : kMaxDefaultArenas;
}

// A new thread takes the mapped arena that the fewest live threads use, and maps another
// only when every mapped one has a thread (as jemalloc's arena choice): threads that come
// and go one after another reuse the arenas, and the pages, of those that ended, instead of
// spreading over every arena in turn (each arena holds its own slabs of every class a
// thread used). Threads that run at the same time still get arenas of their own, up to
// count(). The choice and the count go together under the mapping lock.
template <class Config>
typename Allocator<Config>::Arena& Allocator<Config>::AutomaticArenas::assign() {
  const unsigned n = count();
  if (n == 1) {
    first_.value.thread_arrived();
    return first_.value;
  }
  LockGuard guard(lock_);
  Arena* best = &first_.value;
  unsigned first_unmapped = n;
  for (unsigned i = 1; i < n; ++i) {
    Arena* a = others_[i].load(std::memory_order_relaxed);
    if (a == nullptr) {
      if (first_unmapped == n) first_unmapped = i;
    } else if (a->threads() < best->threads()) {
      best = a;
    }
  }
  if (best->threads() != 0 && first_unmapped != n) {
    if (Arena* fresh = map_locked(first_unmapped)) best = fresh;  // else share the least used
  }
  best->thread_arrived();
  return *best;
}

template <class Config>
void Allocator<Config>::AutomaticArenas::reset_in_child() {
  for_each([](Arena& a) {
    a.set_threads(0);
    a.settle_remote_in_child();
  });
  if (t_arena_ != nullptr) t_arena_->thread_arrived();
}

template <class Config>
typename Allocator<Config>::Arena* Allocator<Config>::AutomaticArenas::map(unsigned index) {
  LockGuard guard(lock_);
  return map_locked(index);
}

template <class Config>
typename Allocator<Config>::Arena* Allocator<Config>::AutomaticArenas::map_locked(unsigned index) {
  if (Arena* a = others_[index].load(std::memory_order_relaxed)) return a;
  void* mem =
      ::mmap(nullptr, kRecordBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return nullptr;
  Arena* a = new (mem) Arena(index, huge_, neighbours(), typename Arena::LeaveStashesUnwritten{});
  a->avoid_huge_pages();
  others_[index].store(a, std::memory_order_release);
  return a;
}

template <class Config>
std::size_t Allocator<Config>::AutomaticArenas::record_bytes() const {
  std::size_t bytes = 0;
  const unsigned n = count();
  for (unsigned i = 1; i < n; ++i)
    if (others_[i].load(std::memory_order_acquire) != nullptr) bytes += kRecordBytes;
  return bytes;
}

template <class Config>
void Allocator<Config>::AutomaticArenas::lock_for_fork() {
  lock_.lock();
  for_each([](Arena& a) { a.lock_for_fork(); });
}

template <class Config>
void Allocator<Config>::AutomaticArenas::unlock_after_fork() {
  for_each([](Arena& a) { a.unlock_after_fork(); });
  lock_.unlock();
}

}  // namespace pagemalloc
