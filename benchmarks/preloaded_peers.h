// The aligned (re)allocation functions of jemalloc and mimalloc, found in the allocator that
// LD_PRELOAD put under this process.
//
// jemalloc cannot be dlopen'ed (its thread-local storage is static) and replaces malloc when
// linked, so it is measured in a process of its own started with
// LD_PRELOAD=libjemalloc.so.2, and mimalloc likewise. Looking its functions up at run time with
// dlsym(RTLD_DEFAULT) lets one binary serve every allocator: a table is complete only in a
// process that runs on that allocator. Debian's libjemalloc.so.2 exports mallocx, rallocx and
// dallocx without a prefix; libmimalloc.so.2 exports mi_malloc_aligned, mi_realloc_aligned and
// mi_free (both checked with nm -D).
#ifndef PAGEMALLOC_BENCHMARKS_PRELOADED_PEERS_H
#define PAGEMALLOC_BENCHMARKS_PRELOADED_PEERS_H

#include <dlfcn.h>

#include <bit>
#include <cstddef>

namespace pagemalloc::bench {

// A function of the allocator preloaded under this process, or nullptr when it has none.
template <class Function>
Function* preloaded(const char* name) {
  return reinterpret_cast<Function*>(dlsym(RTLD_DEFAULT, name));
}

// jemalloc's *allocx API, as Apache Arrow used it.
struct JemallocApi {
  void* (*mallocx)(std::size_t size, int flags) = preloaded<void*(std::size_t, int)>("mallocx");
  void* (*rallocx)(void* ptr, std::size_t size,
                   int flags) = preloaded<void*(void*, std::size_t, int)>("rallocx");
  void (*dallocx)(void* ptr, int flags) = preloaded<void(void*, int)>("dallocx");

  // MALLOCX_ALIGN(a): the base-2 logarithm of the alignment, in the low bits of the flags.
  static constexpr int align(std::size_t alignment) { return std::countr_zero(alignment); }

  [[nodiscard]] bool complete() const {
    return mallocx != nullptr && rallocx != nullptr && dallocx != nullptr;
  }
};

// mimalloc's aligned allocation and reallocation.
struct MimallocApi {
  void* (*malloc_aligned)(std::size_t size, std::size_t alignment) =
      preloaded<void*(std::size_t, std::size_t)>("mi_malloc_aligned");
  void* (*realloc_aligned)(void* ptr, std::size_t size, std::size_t alignment) =
      preloaded<void*(void*, std::size_t, std::size_t)>("mi_realloc_aligned");
  void (*free)(void* ptr) = preloaded<void(void*)>("mi_free");

  [[nodiscard]] bool complete() const {
    return malloc_aligned != nullptr && realloc_aligned != nullptr && free != nullptr;
  }
};

// The tables of this process, looked up once.
inline const JemallocApi& jemalloc() {
  static const JemallocApi api;
  return api;
}

inline const MimallocApi& mimalloc() {
  static const MimallocApi api;
  return api;
}

}  // namespace pagemalloc::bench

#endif  // PAGEMALLOC_BENCHMARKS_PRELOADED_PEERS_H
