// The fork handlers and the heap's lock order.
//
// Locks are taken in one fixed order, the order in which any path that holds two of them
// nests them: glibc's list of stdio streams, the registry of explicit arenas, each explicit
// arena (its blocks, then its huge blocks), the automatic arenas (the lock that maps them,
// then each in index order), their huge blocks, then the thread caches' registry.
//
// The stdio list comes first. glibc's fork() runs the prepare handlers, then takes that list's
// lock (_IO_list_lock), then its own malloc's locks. A thread inside fflush(NULL) holds the
// list's lock while it writes, and a write may allocate: had the prepare handler taken the
// heap's locks first, the forking thread would wait for the list while that thread waits for
// the heap. So the handler takes the list's lock itself before the heap's (the lock is
// recursive: glibc's own call after the handlers nests in it), and gives it back after them.
//
// A process with one thread forks without taking any lock, as glibc's malloc does: no other
// thread can hold one, and a fork from a signal handler that interrupted fork() itself (or an
// allocation) must not wait for a lock its own thread holds. A prepare handler entered again
// on a thread that is already inside one (the same case, once a process had threads) takes
// nothing either; each handler after the fork undoes only what its prepare did.
//
// glibc runs prepare handlers in the reverse order of registration, and parent and child
// handlers in the order of registration. These are registered at the heap's first use, before
// nearly any other library's, so they run last before the fork (after other handlers that may
// allocate) and first after it.
#pragma once

#include "process/fork.h"

#include "heap/heap.h"
#include "process/decay.h"
#include "profile/heap_profiler.h"
#include "support/diagnostics.h"
#include "support/lock.h"
#include "threads/thread_cache.h"

extern "C" {
// glibc's lock of its list of stdio streams (exported by libc.so.6 since 2.2.5).
void _IO_list_lock();
void _IO_list_unlock();
void _IO_list_resetlock();

// The registration of fork handlers. pthread_atfork is not in libc.so but a stub linked from
// libc_nonshared.a, which passes the calling object's __dso_handle on to __register_atfork;
// the linker puts that stub at the very end of the drop-in's text, far from the code every
// process runs (allocator/CMakeLists.txt), where fault-around would map up to 64 KiB more of
// the library in every process. __register_atfork itself is exported by libc.so (it is in the
// "Linux Standard Base Core Specification", version 5.0, The Linux Foundation, 2015,
// https://refspecs.linuxfoundation.org/LSB_5.0.0/LSB-Core-generic/LSB-Core-generic/baselib---register-atfork.html).
int __register_atfork(void (*prepare)(), void (*parent)(), void (*child)(), void* dso_handle);
extern void* __dso_handle;  // the linked object's (the C runtime's crtbegin files define it)
}

namespace pagemalloc {

template <class Config>
void Allocator<Config>::Fork::prepare() {
  if (t_depth_++ != 0 || single_threaded()) return;
  t_took_locks_ = true;
  _IO_list_lock();
  heap().lock_for_fork();
}

// Closes a prepare handler, after its locks are released: a signal handler that forks while
// they are still held must find this thread inside a prepare handler, or it would wait for
// them itself.
template <class Config>
void Allocator<Config>::Fork::leave() {
  if (--t_depth_ == 0) t_took_locks_ = false;
}

template <class Config>
void Allocator<Config>::Fork::in_parent() {
  if (closes_the_locking_prepare()) {
    heap().unlock_after_fork_in_parent();
    _IO_list_unlock();
  }
  leave();
}

template <class Config>
void Allocator<Config>::Fork::in_child() {
  heap().finish_initialization_in_child();
  if (closes_the_locking_prepare()) {
    heap().reset_after_fork_in_child();
    _IO_list_resetlock();  // the child's only thread: the list is free (as glibc resets it)
  }
  leave();
}

// Registered by __register_atfork itself (declared above), not by pthread_atfork.
template <class Config>
void Allocator<Config>::Fork::install_handlers() {
  if (__register_atfork(&prepare, &in_parent, &in_child, __dso_handle) != 0)
    warn(
        "the fork handlers could not be registered: a child forked by a multithreaded program "
        "may deadlock");
}

template <class Config>
void Allocator<Config>::Heap::lock_for_fork() {
  HeapProfiler::lock_for_fork();  // (a leaf: never held while another lock is taken)
  explicit_.lock_for_fork();
  automatic_.lock_for_fork();
  huge().lock_for_fork();
  ThreadCache::lock_for_fork();
}

template <class Config>
void Allocator<Config>::Heap::unlock_after_fork_in_parent() {
  ThreadCache::unlock_after_fork_in_parent();
  huge().unlock_after_fork();
  automatic_.unlock_after_fork();
  explicit_.unlock_after_fork();
  HeapProfiler::unlock_after_fork();
}

template <class Config>
void Allocator<Config>::Heap::reset_after_fork_in_child() {
  ThreadCache::reset_after_fork_in_child();
  Decay::forget_background_thread_in_child();
  huge().unlock_after_fork();
  automatic_.reset_in_child();
  automatic_.unlock_after_fork();
  explicit_.unlock_after_fork();
  HeapProfiler::unlock_after_fork();
}

}  // namespace pagemalloc
