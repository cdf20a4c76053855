// The fork handlers and the heap's lock order.
//
// Locks are taken in one fixed order, the order in which any path that holds two of them
// nests them: the registry of explicit arenas, each explicit arena (its blocks, then its huge
// blocks), the automatic arenas (the lock that maps them, then each in index order), their
// huge blocks, then the thread caches' registry. glibc runs
// prepare handlers in the reverse order of registration, and parent and child handlers in
// the order of registration. These are registered at the heap's first use, before nearly any
// other library's, so they run last before the fork (after other handlers that may allocate)
// and first after it.
#include "fork.h"

#include <pthread.h>

#include "diagnostics.h"
#include "heap.h"
#include "thread_cache.h"

namespace pagemalloc {
namespace {

void prepare() { heap().lock_for_fork(); }
void in_parent() { heap().unlock_after_fork_in_parent(); }
void in_child() { heap().reset_after_fork_in_child(); }

}  // namespace

void install_fork_handlers() {
  if (pthread_atfork(&prepare, &in_parent, &in_child) != 0)
    warn("pthread_atfork failed: a child forked by a multithreaded program may deadlock");
}

void Heap::lock_for_fork() {
  explicit_.lock_for_fork();
  automatic_.lock_for_fork();
  huge_.lock_for_fork();
  ThreadCache::lock_for_fork();
}

void Heap::unlock_after_fork_in_parent() {
  ThreadCache::unlock_after_fork_in_parent();
  huge_.unlock_after_fork();
  automatic_.unlock_after_fork();
  explicit_.unlock_after_fork();
}

void Heap::reset_after_fork_in_child() {
  ThreadCache::reset_after_fork_in_child();
  huge_.unlock_after_fork();
  automatic_.unlock_after_fork();
  explicit_.unlock_after_fork();
}

}  // namespace pagemalloc
