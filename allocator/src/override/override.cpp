// The drop-in: the C allocation functions and every C++ operator new/delete, defined over the
// heap, so that LD_PRELOAD=libpagemalloc.so moves a whole program onto pagemalloc. Replace all
// of them or none: a program whose free() meets a pointer from another allocator's malloc()
// crashes. Built into libpagemalloc.so only; the static library exports pm_* alone.
#include <cerrno>
#include <cstddef>
#include <new>

#include "api/entry_points.h"
#include "heap/heap.h"
#include "override/weak_cxx_runtime.h"

using pagemalloc::heap;

namespace {

// operator new's failure path: call the new-handler until it gives up, then throw
// std::bad_alloc. Both come from the program's C++ runtime (weak_cxx_runtime.h): the drop-in
// does not load libstdc++ into a C program.
[[gnu::noinline]] void* new_or_throw(std::size_t size, std::size_t align) {
  for (;;) {
    if (void* p = heap().allocate(size, align, false)) return p;
    std::new_handler handler = pagemalloc::current_new_handler();
    if (handler == nullptr) pagemalloc::throw_bad_alloc();
    handler();
  }
}

// The nothrow forms: nullptr where the throwing form throws (a new-handler may throw
// std::bad_alloc too).
void* new_nothrow(std::size_t size, std::size_t align) noexcept {
  try {
    return new_or_throw(size, align);
  } catch (...) {
    return nullptr;
  }
}

inline void* new_fast(std::size_t size, std::size_t align) {
  void* p = heap().allocate(size, align, false);
  return p != nullptr ? p : new_or_throw(size, align);
}

}  // namespace

#define PAGEMALLOC_EXPORT extern "C" __attribute__((visibility("default")))

PAGEMALLOC_EXPORT void* malloc(size_t size) { return heap().allocate(size, 1, false); }

PAGEMALLOC_EXPORT void free(void* p) { heap().deallocate(p, "free"); }

PAGEMALLOC_EXPORT void* calloc(size_t count, size_t size) {
  return pagemalloc::calloc_checked(count, size);
}

PAGEMALLOC_EXPORT void* realloc(void* p, size_t size) {
  return pagemalloc::realloc_as_glibc(p, size, "realloc");
}

PAGEMALLOC_EXPORT void* reallocarray(void* p, size_t count, size_t size) {
  size_t total = 0;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc(p, total);
}

PAGEMALLOC_EXPORT int posix_memalign(void** out, size_t alignment, size_t size) {
  return pagemalloc::posix_memalign_checked(out, alignment, size);
}

PAGEMALLOC_EXPORT void* aligned_alloc(size_t alignment, size_t size) {
  return pagemalloc::aligned_alloc_checked(alignment, size);
}

PAGEMALLOC_EXPORT void* memalign(size_t alignment, size_t size) {
  return pagemalloc::aligned_alloc_checked(alignment, size);
}

PAGEMALLOC_EXPORT void* valloc(size_t size) {
  return heap().allocate(size, pagemalloc::kPageSize, false);
}

PAGEMALLOC_EXPORT void* pvalloc(size_t size) {
  const size_t rounded = (size + pagemalloc::kPageSize - 1) & ~(pagemalloc::kPageSize - 1);
  if (rounded < size) {
    errno = ENOMEM;
    return nullptr;
  }
  return heap().allocate(rounded == 0 ? pagemalloc::kPageSize : rounded, pagemalloc::kPageSize,
                         false);
}

// C23's sized frees: `size` (and `alignment`) as given to the allocation. With checks on, a
// size that does not match the block is reported, as pm_sdallocx's. glibc 2.43 has them too,
// so without these a program built there would hand pagemalloc's blocks to glibc.
PAGEMALLOC_EXPORT void free_sized(void* p, size_t size) {
  heap().deallocate_sized(p, size, 1, "free_sized");
}

PAGEMALLOC_EXPORT void free_aligned_sized(void* p, size_t alignment, size_t size) {
  heap().deallocate_sized(p, size, alignment, "free_aligned_sized");
}

// glibc's malloc_trim: every free page goes back to the OS now (pm_purge; `pad` is not kept
// back). 1 if any page went back, else 0, as glibc's. Programs call it often (after every
// request, or every few frees): it reads no statistics, which would walk every arena's stashes
// and every thread's cache.
PAGEMALLOC_EXPORT int malloc_trim(size_t) { return heap().purge() > 0 ? 1 : 0; }

PAGEMALLOC_EXPORT size_t malloc_usable_size(void* p) {
  return heap().usable_size(p, "malloc_usable_size");
}

// glibc's own names for its allocation functions, which some programs and libraries call to
// reach the C library's malloc past any interposer: the same functions, so that a block from
// either name may be freed by either (jemalloc, mimalloc and tcmalloc define them too).
PAGEMALLOC_EXPORT void* __libc_malloc(size_t) __attribute__((alias("malloc"), copy(malloc)));
PAGEMALLOC_EXPORT void __libc_free(void*) __attribute__((alias("free"), copy(free)));
PAGEMALLOC_EXPORT void* __libc_calloc(size_t, size_t)
    __attribute__((alias("calloc"), copy(calloc)));
PAGEMALLOC_EXPORT void* __libc_realloc(void*, size_t)
    __attribute__((alias("realloc"), copy(realloc)));
PAGEMALLOC_EXPORT void* __libc_memalign(size_t, size_t)
    __attribute__((alias("memalign"), copy(memalign)));
PAGEMALLOC_EXPORT void* __libc_valloc(size_t) __attribute__((alias("valloc"), copy(valloc)));
PAGEMALLOC_EXPORT void* __libc_pvalloc(size_t) __attribute__((alias("pvalloc"), copy(pvalloc)));

// C++ operators: plain, array, nothrow, sized, aligned, and their combinations.
void* operator new(std::size_t n) { return new_fast(n, 1); }
void* operator new[](std::size_t n) { return new_fast(n, 1); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return new_nothrow(n, 1); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return new_nothrow(n, 1); }
void* operator new(std::size_t n, std::align_val_t a) { return new_fast(n, std::size_t(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return new_fast(n, std::size_t(a)); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return new_nothrow(n, std::size_t(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return new_nothrow(n, std::size_t(a));
}

void operator delete(void* p) noexcept { heap().deallocate(p, "operator delete"); }
void operator delete[](void* p) noexcept { heap().deallocate(p, "operator delete[]"); }
// The forms whose further arguments change nothing (a free ignores the alignment, and the
// nothrow forms are the plain ones) are the plain forms' code under other names: one copy of
// the free path in the text's hot part, not seven (tests/dropin/hot_text.sh).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wattribute-alias"
void operator delete(void*, const std::nothrow_t&) noexcept __attribute__((alias("_ZdlPv")));
void operator delete[](void*, const std::nothrow_t&) noexcept __attribute__((alias("_ZdaPv")));
void operator delete(void*, std::align_val_t) noexcept __attribute__((alias("_ZdlPv")));
void operator delete[](void*, std::align_val_t) noexcept __attribute__((alias("_ZdaPv")));
void operator delete(void*, std::align_val_t, const std::nothrow_t&) noexcept
    __attribute__((alias("_ZdlPv")));
void operator delete[](void*, std::align_val_t, const std::nothrow_t&) noexcept
    __attribute__((alias("_ZdaPv")));
#pragma GCC diagnostic pop
void operator delete(void* p, std::size_t n) noexcept {
  heap().deallocate_sized(p, n, 1, "operator delete");
}
void operator delete[](void* p, std::size_t n) noexcept {
  heap().deallocate_sized(p, n, 1, "operator delete[]");
}
void operator delete(void* p, std::size_t n, std::align_val_t a) noexcept {
  heap().deallocate_sized(p, n, std::size_t(a), "operator delete");
}
void operator delete[](void* p, std::size_t n, std::align_val_t a) noexcept {
  heap().deallocate_sized(p, n, std::size_t(a), "operator delete[]");
}
