/* glibc_malloc_shim.c: an LD_PRELOAD library that makes a program linked against jemalloc
 * (Debian's redis-server) allocate with glibc's malloc instead.
 *
 *   cc -shared -fPIC -O2 -o libglibc_malloc_shim.so glibc_malloc_shim.c -ldl
 *   LD_PRELOAD=$PWD/libglibc_malloc_shim.so redis-server ...
 *
 * real_programs.py builds it this way for the "glibc" row of redis-server. A preload comes
 * before every library in the symbol search order, so each entry point exported here wins
 * over libjemalloc.so.2's. It must export every entry point that jemalloc exports and the
 * program (or a library it loads) calls, or that call goes to an idle jemalloc with glibc's
 * pointers:
 *   - the C set (malloc, free, calloc, realloc, posix_memalign, aligned_alloc, memalign,
 *     valloc, pvalloc, malloc_usable_size): forwarded to glibc's __libc_* functions, or to
 *     glibc's own definition found with dlsym on libc.so.6;
 *   - the C++ operators new and delete (jemalloc exports them and comes before libstdc++ in
 *     redis-server's search order): forwarded to libstdc++'s definitions, which call malloc
 *     and free and so land here;
 *   - the jemalloc extensions redis-server calls (`nm -D /usr/bin/redis-server`): mallctl
 *     (statistics, background thread, purge) answers ENOENT as for an unknown name; nallocx
 *     gives the usable size glibc would give; malloc_stats_print prints one line; sdallocx,
 *     dallocx, mallocx, rallocx, xallocx, sallocx behave as their glibc equivalents.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

extern void* __libc_malloc(size_t size);
extern void __libc_free(void* ptr);
extern void* __libc_calloc(size_t count, size_t size);
extern void* __libc_realloc(void* ptr, size_t size);
extern void* __libc_memalign(size_t alignment, size_t size);
extern void* __libc_valloc(size_t size);
extern void* __libc_pvalloc(size_t size);

/* Looks `name` up in an already loaded library (never loads one); NULL when it is absent. */
static void* find_in_loaded_library(const char* library, const char* name) {
  void* handle = dlopen(library, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == NULL) return NULL;
  void* symbol = dlsym(handle, name);
  dlclose(handle);
  return symbol;
}

EXPORT void* malloc(size_t size) { return __libc_malloc(size); }
EXPORT void free(void* ptr) { __libc_free(ptr); }
EXPORT void* calloc(size_t count, size_t size) { return __libc_calloc(count, size); }
EXPORT void* realloc(void* ptr, size_t size) { return __libc_realloc(ptr, size); }
EXPORT void* memalign(size_t alignment, size_t size) { return __libc_memalign(alignment, size); }
EXPORT void* aligned_alloc(size_t alignment, size_t size) {
  return __libc_memalign(alignment, size);
}
EXPORT void* valloc(size_t size) { return __libc_valloc(size); }
EXPORT void* pvalloc(size_t size) { return __libc_pvalloc(size); }

EXPORT int posix_memalign(void** result, size_t alignment, size_t size) {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0 || alignment == 0)
    return EINVAL;
  int saved_errno = errno;
  void* ptr = __libc_memalign(alignment, size);
  if (ptr == NULL) return ENOMEM;
  errno = saved_errno;
  *result = ptr;
  return 0;
}

typedef size_t (*usable_size_fn)(void*);
static _Atomic(usable_size_fn) glibc_usable_size;

EXPORT size_t malloc_usable_size(void* ptr) {
  usable_size_fn fn = atomic_load_explicit(&glibc_usable_size, memory_order_acquire);
  if (fn == NULL) {
    fn = (usable_size_fn)find_in_loaded_library("libc.so.6", "malloc_usable_size");
    if (fn == NULL) abort();
    atomic_store_explicit(&glibc_usable_size, fn, memory_order_release);
  }
  return fn(ptr);
}

/* ---- jemalloc's extensions, as glibc would answer them ---- */

/* The usable size glibc's malloc gives for `size`: chunks are multiples of 16 bytes, at least
 * 32, with 8 bytes of header. */
static size_t glibc_usable_size_for(size_t size) {
  size_t chunk = (size + 8 + 15) & ~(size_t)15;
  if (chunk < 32) chunk = 32;
  return chunk - 8;
}

/* jemalloc's MALLOCX_LG_ALIGN(la) is la in the low 6 bits; MALLOCX_ZERO is 0x40. */
static size_t alignment_of_flags(int flags) {
  int lg = flags & 0x3f;
  return lg == 0 ? 0 : (size_t)1 << lg;
}

EXPORT int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen) {
  (void)name;
  (void)oldp;
  (void)oldlenp;
  (void)newp;
  (void)newlen;
  return ENOENT;
}
EXPORT size_t nallocx(size_t size, int flags) {
  (void)flags;
  return glibc_usable_size_for(size);
}
EXPORT void malloc_stats_print(void (*write_cb)(void*, const char*), void* cbopaque,
                               const char* opts) {
  (void)opts;
  if (write_cb != NULL) write_cb(cbopaque, "glibc malloc (through glibc_malloc_shim)\n");
}
EXPORT void* mallocx(size_t size, int flags) {
  size_t alignment = alignment_of_flags(flags);
  void* ptr = alignment ? __libc_memalign(alignment, size) : __libc_malloc(size);
  if (ptr != NULL && (flags & 0x40)) memset(ptr, 0, malloc_usable_size(ptr));
  return ptr;
}
EXPORT void* rallocx(void* ptr, size_t size, int flags) {
  if (alignment_of_flags(flags) == 0 && !(flags & 0x40)) return __libc_realloc(ptr, size);
  void* moved = mallocx(size, flags);
  if (moved == NULL) return NULL;
  size_t old_size = malloc_usable_size(ptr);
  memcpy(moved, ptr, old_size < size ? old_size : size);
  __libc_free(ptr);
  return moved;
}
EXPORT size_t xallocx(void* ptr, size_t size, size_t extra, int flags) {
  (void)size;
  (void)extra;
  (void)flags;
  return malloc_usable_size(ptr);
}
EXPORT size_t sallocx(const void* ptr, int flags) {
  (void)flags;
  return malloc_usable_size((void*)ptr);
}
EXPORT void dallocx(void* ptr, int flags) {
  (void)flags;
  __libc_free(ptr);
}
EXPORT void sdallocx(void* ptr, size_t size, int flags) {
  (void)size;
  (void)flags;
  __libc_free(ptr);
}

/* ---- the C++ operators: libstdc++'s own definitions (they call malloc/free above) ---- */

/* Declares `symbol` forwarding to libstdc++'s definition of the same name, with a fallback
 * that calls glibc directly when libstdc++ is not loaded. */
#define FORWARD_TO_LIBSTDCXX(ret, symbol, params, args, fallback)            \
  EXPORT ret symbol params {                                                 \
    static _Atomic(ret(*) params) target;                                    \
    ret(*fn) params = atomic_load_explicit(&target, memory_order_acquire);   \
    if (fn == NULL) {                                                        \
      fn = (ret(*) params)find_in_loaded_library("libstdc++.so.6", #symbol); \
      if (fn == NULL) {                                                      \
        fallback;                                                            \
      }                                                                      \
      atomic_store_explicit(&target, fn, memory_order_release);              \
    }                                                                        \
    return fn args;                                                          \
  }

/* Without libstdc++ there is no bad_alloc to throw: an allocation failure aborts. */
static void* checked(void* ptr) {
  if (ptr == NULL) abort();
  return ptr;
}

typedef struct {
  char unused;
} nothrow_t_stub;
FORWARD_TO_LIBSTDCXX(void*, _Znwm, (size_t n), (n), return checked(__libc_malloc(n)))
FORWARD_TO_LIBSTDCXX(void*, _Znam, (size_t n), (n), return checked(__libc_malloc(n)))
FORWARD_TO_LIBSTDCXX(void*, _ZnwmRKSt9nothrow_t, (size_t n, const nothrow_t_stub* t), (n, t),
                     return __libc_malloc(n))
FORWARD_TO_LIBSTDCXX(void*, _ZnamRKSt9nothrow_t, (size_t n, const nothrow_t_stub* t), (n, t),
                     return __libc_malloc(n))
FORWARD_TO_LIBSTDCXX(void*, _ZnwmSt11align_val_t, (size_t n, size_t a), (n, a),
                     return checked(__libc_memalign(a, n)))
FORWARD_TO_LIBSTDCXX(void*, _ZnamSt11align_val_t, (size_t n, size_t a), (n, a),
                     return checked(__libc_memalign(a, n)))
FORWARD_TO_LIBSTDCXX(void*, _ZnwmSt11align_val_tRKSt9nothrow_t,
                     (size_t n, size_t a, const nothrow_t_stub* t), (n, a, t),
                     return __libc_memalign(a, n))
FORWARD_TO_LIBSTDCXX(void*, _ZnamSt11align_val_tRKSt9nothrow_t,
                     (size_t n, size_t a, const nothrow_t_stub* t), (n, a, t),
                     return __libc_memalign(a, n))

/* The deletes only free: no lookup is needed. */
EXPORT void _ZdlPv(void* p) { __libc_free(p); }
EXPORT void _ZdaPv(void* p) { __libc_free(p); }
EXPORT void _ZdlPvm(void* p, size_t n) {
  (void)n;
  __libc_free(p);
}
EXPORT void _ZdaPvm(void* p, size_t n) {
  (void)n;
  __libc_free(p);
}
EXPORT void _ZdlPvRKSt9nothrow_t(void* p, const nothrow_t_stub* t) {
  (void)t;
  __libc_free(p);
}
EXPORT void _ZdaPvRKSt9nothrow_t(void* p, const nothrow_t_stub* t) {
  (void)t;
  __libc_free(p);
}
EXPORT void _ZdlPvSt11align_val_t(void* p, size_t a) {
  (void)a;
  __libc_free(p);
}
EXPORT void _ZdaPvSt11align_val_t(void* p, size_t a) {
  (void)a;
  __libc_free(p);
}
EXPORT void _ZdlPvmSt11align_val_t(void* p, size_t n, size_t a) {
  (void)n;
  (void)a;
  __libc_free(p);
}
EXPORT void _ZdaPvmSt11align_val_t(void* p, size_t n, size_t a) {
  (void)n;
  (void)a;
  __libc_free(p);
}
EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void* p, size_t a, const nothrow_t_stub* t) {
  (void)a;
  (void)t;
  __libc_free(p);
}
EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void* p, size_t a, const nothrow_t_stub* t) {
  (void)a;
  (void)t;
  __libc_free(p);
}
