/* gc_arena_churn.c: a garbage collector's heap of 4 KiB arenas, each taken from
 * posix_memalign(4096, 4096), allocated and freed in waves beside small objects: the pattern
 * of SpiderMonkey 1.8 (Firefox 3.0), whose GC took every 4 KiB arena from posix_memalign
 * (js/src/jsgc.c, NewGCChunk, under MOZ_MEMORY) while its objects' slots and strings came from
 * malloc. Under an allocator whose small sizes end below a page (jemalloc's in 2008: 2 KiB)
 * every arena is a one-page run, so every arena taken or given back is a run-manager call.
 * Written for the tree-overhead study (papers/tree-overhead); not SpiderMonkey's code.
 *
 *   gc_arena_churn [waves=400] [arenas=1500] [survive_pct=30] [seed=1]
 *
 * Each wave allocates `arenas` arenas and, for each, 1-8 small objects (16-512 bytes) that
 * point into it; each arena is stamped with its number and each object with its arena's.
 * Then a collection: every arena of this wave and of those before survives with probability
 * survive_pct %, the others are checked and freed with their objects. What survives joins the
 * next wave's heap, so the number of live arenas settles near arenas * p / (1 - p). */
#include "memory_support.h"

struct object {
  struct arena* owner;
  uint64_t stamp;
  unsigned char payload[];
};

struct arena {
  uint64_t number;
  uint64_t object_count;
  struct object* objects[8];
  unsigned char cells[4096 - 16 - 8 * sizeof(struct object*)];
};

static uint64_t stamp_of(uint64_t number) { return number * 0x9E3779B97F4A7C15ULL + 7; }

static struct arena* new_arena(uint64_t number, struct random_state* r) {
  void* memory = NULL;
  if (posix_memalign(&memory, 4096, 4096) != 0 || memory == NULL)
    fail("posix_memalign(4096, 4096) failed");
  struct arena* a = memory;
  a->number = number;
  a->object_count = random_between(r, 1, 8);
  memset(a->cells, (int)(number & 0xff), sizeof a->cells);
  for (uint64_t i = 0; i < a->object_count; ++i) {
    const size_t size = (size_t)random_between(r, 16, 512);
    struct object* o = checked_malloc(size);
    o->owner = a;
    o->stamp = stamp_of(number);
    a->objects[i] = o;
  }
  return a;
}

static void check_and_free(struct arena* a) {
  if (((uintptr_t)a & 4095) != 0) fail("arena %p is not 4096-aligned", (void*)a);
  const unsigned char fill = (unsigned char)(a->number & 0xff);
  if (a->cells[0] != fill || a->cells[sizeof a->cells - 1] != fill)
    fail("arena %llu: cells overwritten", (unsigned long long)a->number);
  for (uint64_t i = 0; i < a->object_count; ++i) {
    struct object* o = a->objects[i];
    if (o->owner != a || o->stamp != stamp_of(a->number))
      fail("arena %llu: object %llu overwritten", (unsigned long long)a->number,
           (unsigned long long)i);
    free(o);
  }
  free(a);
}

int main(int argc, char** argv) {
  struct parameter p[] = {
      {"waves", 400, 1, 1000000, "allocation waves, each followed by a collection"},
      {"arenas", 1500, 1, 1000000, "arenas allocated per wave"},
      {"survive_pct", 30, 0, 90, "percent of the live arenas each collection keeps"},
      {"seed", 1, 0, UINT64_MAX, "random sequence"},
  };
  const int n = PARAMETER_COUNT(p);
  read_arguments(argc, argv, "4 KiB GC arenas in waves beside small objects (SpiderMonkey 1.8)", p,
                 n);
  const uint64_t waves = parameter(p, n, "waves");
  const uint64_t per_wave = parameter(p, n, "arenas");
  const uint64_t survive_pct = parameter(p, n, "survive_pct");
  struct random_state r = random_seeded(parameter(p, n, "seed"));
  /* The live arenas never exceed per_wave / (1 - 0.9) = 10 waves' worth. */
  const uint64_t capacity = per_wave * 11;
  struct arena** live = checked_malloc(capacity * sizeof *live);
  uint64_t live_count = 0, next_number = 0, freed = 0, most_live = 0;
  for (uint64_t wave = 0; wave < waves; ++wave) {
    for (uint64_t i = 0; i < per_wave && live_count < capacity; ++i)
      live[live_count++] = new_arena(next_number++, &r);
    if (live_count > most_live) most_live = live_count;
    uint64_t kept = 0;
    for (uint64_t i = 0; i < live_count; ++i) {
      if (random_between(&r, 1, 100) <= survive_pct) {
        live[kept++] = live[i];
      } else {
        check_and_free(live[i]);
        ++freed;
      }
    }
    live_count = kept;
  }
  for (uint64_t i = 0; i < live_count; ++i) check_and_free(live[i]);
  freed += live_count;
  free(live);
  if (freed != next_number)
    fail("%llu arenas made, %llu freed", (unsigned long long)next_number,
         (unsigned long long)freed);
  printf("arenas %llu most live %llu\nall checked\n", (unsigned long long)next_number,
         (unsigned long long)most_live);
  return 0;
}
