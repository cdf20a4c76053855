// Fork safety: a child of a multithreaded parent gets a copy of the heap as it was at the
// fork, including any lock another thread held at that moment; that thread does not exist in
// the child, so the lock would never be released. pthread_atfork handlers take every lock of
// the heap before the fork (so the copy is consistent) and release them after it, in the
// parent and in the child (as jemalloc's and glibc's malloc do).
#pragma once

namespace pagemalloc {

// Registers the handlers with pthread_atfork. Called once, by the heap's initialization.
void install_fork_handlers();

}  // namespace pagemalloc
