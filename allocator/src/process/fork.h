// Fork safety: a child of a multithreaded parent gets a copy of the heap as it was at the
// fork, including any lock another thread held at that moment; that thread does not exist in
// the child, so the lock would never be released. pthread_atfork handlers take every lock of
// the heap before the fork (so the copy is consistent) and release them after it, in the
// parent and in the child (as jemalloc's and glibc's malloc do).
#pragma once

#include "design/allocator.h"

namespace pagemalloc {

// One heap's handlers (allocator.h: each Config's heap registers its own).
template <class Config>
class Allocator<Config>::Fork {
 public:
  // Registers the handlers (__register_atfork, fork_impl.h). Called once, by the heap's
  // initialization.
  [[gnu::hot]] static void install_handlers();

 private:
  [[gnu::hot]] static void prepare();
  // Whether the after-fork handler running now closes the prepare handler that took the locks.
  static bool closes_the_locking_prepare() { return t_depth_ == 1 && t_took_locks_; }
  static void leave();
  [[gnu::hot]] static void in_parent();
  [[gnu::hot]] static void in_child();

  // The prepare handlers this thread has entered and not yet closed (more than one only
  // through signal handlers), and whether the outermost one took the locks.
  static inline constinit thread_local unsigned t_depth_ = 0;
  static inline constinit thread_local bool t_took_locks_ = false;
};

}  // namespace pagemalloc
