/*
 * pagemalloc — the public C API.
 *
 * Every function carries the pm_ prefix. The standard functions behave as glibc's; the
 * extended *allocx functions follow jemalloc's non-standard API, and their flags are encoded
 * exactly as jemalloc encodes MALLOCX_*, so code written for jemalloc ports by renaming.
 *
 *   flags = PM_ALIGN(a) | PM_ZERO | PM_ARENA(i)   a: a power of two (lg of it in the low 6
 *                                                 bits); i: an arena index (bits 20..31)
 *
 * Errors: allocation failure returns NULL with errno = ENOMEM; a bad alignment returns NULL
 * (EINVAL from pm_posix_memalign). Misuse (double free, foreign pointer, wrong size to
 * pm_sdallocx) aborts with a message naming the call and the pointer where detected.
 */
#ifndef PAGEMALLOC_PAGEMALLOC_H
#define PAGEMALLOC_PAGEMALLOC_H

#include <stddef.h>

/* The version of this header: the project's version (CMakeLists.txt, project(VERSION); a test
 * checks that they agree). pm_version() gives the library's, which may differ from the
 * header's when a program runs on a newer library than it was built with. */
#define PAGEMALLOC_VERSION_MAJOR 0
#define PAGEMALLOC_VERSION_MINOR 1
#define PAGEMALLOC_VERSION_PATCH 0
#define PAGEMALLOC_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, "MAJOR.MINOR.PATCH" (a static string). */
const char* pm_version(void);

/* Flags of the *allocx calls (the values of jemalloc's MALLOCX_*). These are macros because
 * C callers need them in constant expressions. PM_ARENA(i): allocate from arena i (an
 * explicit arena from pm_arena_create, or an automatic arena: 0 .. narenas-1, see pm_ctl),
 * bypassing the thread cache. */
#define PM_LG_ALIGN(lg) ((int)(lg))
#define PM_ALIGN(a) ((int)(__builtin_ffsll((long long)(a)) - 1))
#define PM_ZERO ((int)0x40)
#define PM_ARENA(i) ((int)(((unsigned)(i) + 1) << 20))

/* standard */
void* pm_malloc(size_t size);
void* pm_calloc(size_t count, size_t size);
void* pm_realloc(void* ptr, size_t size);
void pm_free(void* ptr);
int pm_posix_memalign(void** out, size_t alignment, size_t size);
void* pm_aligned_alloc(size_t alignment, size_t size);
void* pm_memalign(size_t alignment, size_t size);
size_t pm_malloc_usable_size(const void* ptr);

/* extended (jemalloc semantics) */
void* pm_mallocx(size_t size, int flags);
void* pm_rallocx(void* ptr, size_t size, int flags);
size_t pm_xallocx(void* ptr, size_t size, size_t extra, int flags);
size_t pm_sallocx(const void* ptr, int flags);
void pm_dallocx(void* ptr, int flags);
void pm_sdallocx(void* ptr, size_t size, int flags);
size_t pm_nallocx(size_t size, int flags);

/* Explicit arenas (jemalloc's arenas.create, arena.<i>.reset and arena.<i>.destroy).
 *
 * An explicit arena holds only the blocks allocated with PM_ARENA(i) in pm_mallocx or
 * pm_rallocx. Its blocks never enter a thread cache, and each arena has its own lock, so
 * threads may share one. Any free call (pm_free, pm_dallocx, pm_sdallocx, pm_realloc)
 * frees a block to the arena that holds it; a block moved by reallocation goes to the arena
 * named in the flags or, without one, stays in its explicit arena.
 *
 *   pm_arena_create   returns the new arena's index, or 0 with errno = EAGAIN (all 4095
 *                     indices taken) or ENOMEM. Indices 0 .. narenas-1 are the automatic
 *                     arenas (pm_ctl "narenas"), never explicit ones, so 0 is unambiguous
 *   pm_arena_reset    frees every block of the arena at once (small, large and huge); its
 *                     pages stay mapped for its next blocks. Returns 0, or EINVAL when i
 *                     names no explicit arena. Using or freeing a block of the arena after a
 *                     reset is misuse (reported as a double free while its page is unused)
 *   pm_arena_destroy  a reset, then every page of the arena back to the OS; the index may be
 *                     returned by a later pm_arena_create. 0, or EINVAL
 *   pm_arena_stats_get  the arena's live blocks and bytes (below). 0, or EINVAL
 *
 * pm_mallocx or pm_rallocx with PM_ARENA(i) of an index that names no arena: NULL with
 * errno = EINVAL. */
unsigned pm_arena_create(void);
int pm_arena_reset(unsigned arena);
int pm_arena_destroy(unsigned arena);

/* Bump arenas: pm_arena_create_ex(flags) creates an explicit arena of the kind the flags name
 * (0: as pm_arena_create). Returns its index, or 0 with errno = EINVAL (unknown flags,
 * PM_ARENA_NO_FREE without PM_ARENA_BUMP), EAGAIN or ENOMEM.
 *
 *   PM_ARENA_BUMP     blocks of up to 16 KiB with an alignment of up to a page are bumped
 *                     from a span of the arena's chunks that the calling thread holds: an
 *                     add, a compare and two stores, no lock (a thread takes its next span
 *                     under the arena's lock when its span is full: 128 KiB, then twice the
 *                     last, up to 512 KiB). Larger blocks come from the arena's slabs, runs
 *                     and huge extents as in any explicit arena. A bumped block's size is
 *                     rounded up to 16 bytes. pm_free of a block is bookkeeping (the arena's
 *                     live count): its memory comes back at pm_arena_reset, which takes time
 *                     in the number of chunks, not of blocks, and keeps every chunk for the
 *                     next round. pm_rallocx of the block a thread bumped last grows it in
 *                     place while its span has room. A block freed twice is reported; with
 *                     checks on (pm_ctl "checks"), so is the use of a block after a reset
 *                     (then each reset also clears a map of 256 KiB per chunk)
 *   PM_ARENA_NO_FREE  with PM_ARENA_BUMP: blocks are never freed one by one; pm_free of one
 *                     does nothing (the block stays counted until the reset), as in a
 *                     monotonic buffer.
 *
 * pm_arena_stats_get of a bump arena: blocks and allocated are the live count and bytes
 * (bumped minus freed, from every thread; the blocks a pagemalloc::BumpArena bumps inline
 * count when it takes its next span or its stats() is asked), active counts the regions
 * (128 KiB) handed out, mapped the chunks and their size maps. pm_nallocx with PM_ARENA(i)
 * of a bump arena answers for its blocks. */
#define PM_ARENA_BUMP 0x1u
#define PM_ARENA_NO_FREE 0x2u
unsigned pm_arena_create_ex(unsigned flags);

/* The state of pagemalloc::BumpArena's inline fast path (pagemalloc/memory_resource.h): a
 * span of a bump arena lent to one owner, who bumps blocks from it without a call. A block
 * of size bytes at next (16-aligned) takes stride = size rounded up to 16 (16 for 0), and its
 * length stride / 16 is written as an unsigned short at address (next >> 3) + size_map;
 * blocks counts them; the bytes bumped are next - begin - skipped (skipped: gaps left by
 * alignment). Fields belong to the library: a program sets arena and zeroes the
 * rest, then calls pm_arena_bump, which serves the block (from a new span when this one is
 * full) and returns NULL with errno = ENOMEM (EINVAL: arena names no bump arena);
 * pm_arena_bump_flush hands the counts to the arena. After pm_arena_reset of the arena, the
 * owner sets next, end and begin to NULL, blocks and skipped to 0 before bumping again.
 * freeable is set by the library with each span: 1 when the arena's blocks may be freed one
 * by one (no PM_ARENA_NO_FREE). */
typedef struct pm_bump_cursor {
  char* next;
  char* end;
  unsigned long long size_map;
  char* begin;
  size_t blocks;
  size_t skipped;
  unsigned arena;
  unsigned epoch;
  unsigned span;
  unsigned freeable;
} pm_bump_cursor;
void* pm_arena_bump(pm_bump_cursor* cursor, size_t size, int flags);
void pm_arena_bump_flush(pm_bump_cursor* cursor);
/* pm_arena_bump_free_inline (below) as a call, for a binding that can only call; it also
 * checks that the cursor's span is of its arena's current epoch (a cursor not cleared after
 * pm_arena_reset or pm_arena_destroy frees through pm_free, which reports the misuse). */
void pm_arena_bump_free(pm_bump_cursor* cursor, void* ptr);

/* A block of size bytes (16-byte aligned) bumped from the cursor: inline while its span has
 * room (an add, a compare and three stores, as pagemalloc::BumpArena's), else pm_arena_bump
 * with flags 0. The path for C programs; a binding that can only call takes pm_arena_bump,
 * whose span with room serves the block with no lock. NULL with errno = ENOMEM (EINVAL:
 * the cursor's arena names no bump arena). */
static inline void* pm_arena_bump_inline(pm_bump_cursor* cursor, size_t size) {
  /* stride - 1 wraps for a size of 0 and of nearly SIZE_MAX: the call serves those. */
  const size_t stride = (size + 15) & ~(size_t)15;
  char* const block = cursor->next;
  if (stride - 1 < (size_t)cursor->end - (size_t)block) { /* 0 while the cursor is empty */
    cursor->next = block + stride;
    *(unsigned short*)(((size_t)block >> 3) + cursor->size_map) = (unsigned short)(stride >> 4);
    ++cursor->blocks;
    return block;
  }
  {
    /* The call gets a copy, never the cursor's address: a cursor whose address no call has seen
     * stays in registers across the caller's own calls and stores (a memset of the block). */
    pm_bump_cursor copy = *cursor;
    void* const refilled = pm_arena_bump(&copy, size, 0);
    *cursor = copy;
    return refilled;
  }
}

/* pm_free(p) of a block of the cursor's arena: inline when p is a live block the cursor
 * bumped since its counts were last handed to the arena (the block's length entry marked
 * freed, its count and bytes taken off the cursor's: a compare, a load and three stores), else
 * the call, which serves every other block and reports misuse (a double free, a pointer into a
 * block). With PM_ARENA_NO_FREE every block takes the call. The cursor must be cleared after
 * a reset, as for pm_arena_bump_inline. */
static inline void pm_arena_bump_free_inline(pm_bump_cursor* cursor, void* p) {
  /* One compare for both tests: p in [begin, next) and 16-aligned (begin is), the offset
   * rotated right by 4 so that an unaligned one is out of range. */
  const size_t offset = (size_t)p - (size_t)cursor->begin;
  const size_t granule = (offset >> 4) | (offset << (sizeof(size_t) * 8 - 4));
  if (granule < ((size_t)cursor->next - (size_t)cursor->begin) >> 4 && cursor->freeable) {
    unsigned short* const entry = (unsigned short*)(((size_t)p >> 3) + cursor->size_map);
    const unsigned length = *entry;
    if (length - 1u < 0x7FFFu) { /* live: 1 to 0x7FFF granules (freed: the top bit set) */
      cursor->skipped += (size_t)length << 4; /* bytes bumped: next - begin - skipped */
      *entry = (unsigned short)(length | 0x8000u);
      --cursor->blocks;
      return;
    }
  }
  pm_free(p);
}

typedef struct pm_arena_stats {
  size_t blocks;    /* live blocks */
  size_t allocated; /* bytes in live blocks (usable sizes) */
  size_t active;    /* bytes of pages holding live blocks */
  size_t mapped;    /* bytes mapped from the OS for the arena, its metadata included */
} pm_arena_stats;
int pm_arena_stats_get(unsigned arena, pm_arena_stats* out);

/* introspection */
typedef struct pm_stats {
  size_t allocated;      /* bytes in live blocks (usable sizes) */
  size_t active;         /* bytes of pages holding live blocks (slabs, runs, huge) */
  size_t mapped;         /* bytes mapped from the OS and not yet released */
  size_t dirty;          /* bytes of free pages still resident (returned after the decay) */
  size_t retained;       /* bytes of free pages returned to the OS, address space kept */
  size_t copied;         /* bytes copied by reallocation, since start */
  size_t grown_in_place; /* reallocations that grew a block without moving it */
  size_t moved;          /* reallocations that moved a block (by copy or by remapping) */
  size_t purged;         /* bytes of free pages returned to the OS since start: by the decay,
                          * by pm_purge, and by an arena to make room for a huge block
                          * mapped beside it */
  size_t populated;      /* bytes of fresh pages faulted in ahead of their first touch, since
                          * start (the populate option) */
} pm_stats;

/* Fills *out with a consistent snapshot of the statistics. */
void pm_stats_get(pm_stats* out);
/* Writes the statistics as text (json == 0) or as one JSON object (json != 0) to the file
 * descriptor fd (2 for stderr). */
void pm_stats_print(int fd, int json);
/* Returns freed pages to the OS now, ignoring the decay. */
void pm_purge(void);

/* Control: read (old != NULL) and/or set (new_value != NULL) an option by name.
 * Names: "decay_ms" (long), "checks" (int), "thp" (0 default, 1 always, 2 never, 3 auto: the
 * huge-page advice for chunks mapped from then on, 2 unless set; EINVAL for another value),
 * "thp_budget" (long N >= 0: under thp auto, fresh huge pages' faults beyond what small pages
 * would cost stay within 1/N of the run time; 0 no limit),
 * "background_thread" (int: 1 starts a thread that returns free pages after the decay while
 * the program is idle, 0 stops it), "populate" (int: 1, the default, faults in fresh pages that
 * will be touched, slabs of small regions and realloc's copies, with one call each),
 * "narenas" (read only: how many automatic arenas the threads are spread over; EPERM when set),
 * "prof" (read only: 1 when PAGEMALLOC_CONF gave prof:true; EPERM when set), "prof.active"
 * (int: 0 stops the heap profiler's sampling, 1 starts it again; each thread follows at its
 * next allocation that misses its cache; ENOENT without prof:true), "prof.sample" (read only:
 * the mean bytes between samples).
 * Returns 0, or EINVAL for an unknown name. */
int pm_ctl(const char* name, long* old_value, const long* new_value);

/* The heap profiler (PAGEMALLOC_CONF prof:true; docs/configuration.md): writes a profile of the
 * sampled allocations, in the format jemalloc's profiler writes (jeprof reads it), to path, or
 * with NULL to prof_prefix.PID.SEQ.m.heap. Returns 0, ENOENT without prof:true, or the errno of
 * the file's creation or writing. */
int pm_prof_dump(const char* path);

#ifdef __cplusplus
}
#endif

#endif /* PAGEMALLOC_PAGEMALLOC_H */
