/* espresso_like.c: covers of cubes built, combined and thrown away, the pattern of espresso
 * (the logic minimizer) in the small programs of mimalloc-bench (Daan Leijen et al.,
 * https://github.com/daanx/mimalloc-bench). Written for this study; not espresso's code.
 *
 *   espresso_like [rounds=6000] [covers=24] [most_cubes=1500] [seed=1]
 *
 * A cube is a bit vector of 2-8 words allocated on its own (with a check word), a cover an
 * array of cube pointers. Each round intersects two random live covers cube by cube (keeping
 * the non-empty intersections, at most most_cubes), or complements a cover's cubes one by one,
 * and the result replaces a random live cover, whose cubes are checked and freed. */
#include "memory_support.h"

struct cube {
  uint32_t words;
  uint32_t check; /* xor of the words */
  uint32_t bit[];
};

struct cover {
  uint32_t count;
  struct cube** cube;
};

static struct cube* cube_new(uint32_t words) {
  struct cube* c = checked_malloc(sizeof(struct cube) + words * sizeof(uint32_t));
  c->words = words;
  return c;
}

static void cube_seal(struct cube* c) {
  uint32_t x = 0;
  for (uint32_t i = 0; i < c->words; ++i) x ^= c->bit[i];
  c->check = x;
}

static void cover_free(struct cover* f) {
  for (uint32_t i = 0; i < f->count; ++i) {
    struct cube* c = f->cube[i];
    uint32_t x = 0;
    for (uint32_t k = 0; k < c->words; ++k) x ^= c->bit[k];
    if (x != c->check) fail("a cube changed while live");
    free(c);
  }
  free(f->cube);
  f->cube = NULL;
  f->count = 0;
}

static struct cover cover_random(struct random_state* r, uint32_t words, uint32_t cubes) {
  struct cover f = {cubes, checked_malloc((cubes ? cubes : 1) * sizeof(struct cube*))};
  for (uint32_t i = 0; i < cubes; ++i) {
    struct cube* c = cube_new(words);
    for (uint32_t k = 0; k < words; ++k)
      c->bit[k] = (uint32_t)(random_next(r) | random_next(r) | random_next(r));
    cube_seal(c);
    f.cube[i] = c;
  }
  return f;
}

/* Non-empty pairwise intersections of a's and b's cubes, at most `most`. */
static struct cover cover_intersect(const struct cover* a, const struct cover* b, uint32_t most,
                                    struct random_state* r) {
  struct cover f = {0, checked_malloc((most ? most : 1) * sizeof(struct cube*))};
  for (uint32_t tries = 0; f.count < most && tries < 4 * most && a->count && b->count; ++tries) {
    const struct cube* x = a->cube[random_between(r, 0, a->count - 1)];
    const struct cube* y = b->cube[random_between(r, 0, b->count - 1)];
    const uint32_t words = x->words < y->words ? x->words : y->words;
    struct cube* c = cube_new(words);
    uint32_t any = 0;
    for (uint32_t k = 0; k < words; ++k) any |= c->bit[k] = x->bit[k] & y->bit[k];
    if (any == 0) {
      free(c);
      continue;
    }
    cube_seal(c);
    f.cube[f.count++] = c;
  }
  return f;
}

static struct cover cover_complement(const struct cover* a) {
  struct cover f = {a->count, checked_malloc((a->count ? a->count : 1) * sizeof(struct cube*))};
  for (uint32_t i = 0; i < a->count; ++i) {
    struct cube* c = cube_new(a->cube[i]->words);
    for (uint32_t k = 0; k < c->words; ++k) c->bit[k] = ~a->cube[i]->bit[k];
    cube_seal(c);
    if (c->check != (a->cube[i]->words % 2 ? ~a->cube[i]->check : a->cube[i]->check))
      fail("complement's check word");
    f.cube[i] = c;
  }
  return f;
}

int main(int argc, char** argv) {
  struct parameter p[] = {
      {"rounds", 6000, 1, 1ULL << 32, "covers built"},
      {"covers", 24, 2, 4096, "live covers"},
      {"most_cubes", 1500, 1, 1 << 20, "cubes in a cover, at most"},
      {"seed", 1, 0, UINT64_MAX, "random sequence"},
  };
  const int n = PARAMETER_COUNT(p);
  read_arguments(argc, argv, "covers of cubes built and freed (espresso's pattern)", p, n);
  const uint64_t rounds = parameter(p, n, "rounds");
  const uint32_t covers = (uint32_t)parameter(p, n, "covers");
  const uint32_t most = (uint32_t)parameter(p, n, "most_cubes");
  struct random_state r = random_seeded(parameter(p, n, "seed"));
  struct cover* live = checked_malloc(covers * sizeof *live);
  for (uint32_t i = 0; i < covers; ++i)
    live[i] =
        cover_random(&r, (uint32_t)random_between(&r, 2, 8), (uint32_t)random_between(&r, 1, most));
  uint64_t cubes_built = 0;
  for (uint64_t round = 0; round < rounds; ++round) {
    const uint32_t i = (uint32_t)random_between(&r, 0, covers - 1);
    const uint32_t j = (uint32_t)random_between(&r, 0, covers - 1);
    struct cover f;
    switch (random_next(&r) % 8) {
      case 0: f = cover_complement(&live[i]); break;
      case 1:
        f = cover_random(&r, (uint32_t)random_between(&r, 2, 8),
                         (uint32_t)random_between(&r, 1, most));
        break;
      default:
        f = cover_intersect(&live[i], &live[j], (uint32_t)random_between(&r, 1, most), &r);
        break;
    }
    if (f.count == 0) { /* an empty intersection: its array goes, a small random cover instead */
      free(f.cube);
      f = cover_random(&r, 2, 1 + (uint32_t)(round % 16));
    }
    cubes_built += f.count;
    const uint32_t victim = (uint32_t)random_between(&r, 0, covers - 1);
    cover_free(&live[victim]);
    live[victim] = f;
  }
  for (uint32_t i = 0; i < covers; ++i) cover_free(&live[i]);
  free(live);
  printf("rounds %llu cubes_built %llu\nall checked\n", (unsigned long long)rounds,
         (unsigned long long)cubes_built);
  return 0;
}
