/* cfrac_like.c: many small short-lived allocations of bignum arithmetic, the pattern of cfrac
 * (Dave Barrett's continued-fraction factoring) in the small programs of mimalloc-bench (Daan
 * Leijen et al., https://github.com/daanx/mimalloc-bench). Written for this study; not cfrac's
 * code.
 *
 *   cfrac_like [steps=3000000] [seed=1]
 *
 * Bignums are immutable arrays of 32-bit limbs, each operation allocates its result and the
 * loop frees what it no longer needs, as cfrac's pcalloc/pdestroy do: the Fibonacci sequence
 * and a running product, both kept modulo a growing number of limbs (so sizes vary from 8 to
 * about 300 bytes) and a ring of the last 256 results kept live; the low limbs of every sum
 * and product are checked (truncation does not change them). */
#include "memory_support.h"

struct big {
  uint32_t limbs;
  uint32_t limb[];
};

static struct big* big_new(uint32_t limbs) {
  struct big* b = checked_malloc(sizeof(struct big) + limbs * sizeof(uint32_t));
  b->limbs = limbs;
  return b;
}

static struct big* big_from(uint64_t value) {
  struct big* b = big_new(2);
  b->limb[0] = (uint32_t)value;
  b->limb[1] = (uint32_t)(value >> 32);
  return b;
}

/* a + b, truncated to `keep` limbs. */
static struct big* big_add(const struct big* a, const struct big* b, uint32_t keep) {
  uint32_t n = (a->limbs > b->limbs ? a->limbs : b->limbs) + 1;
  if (n > keep) n = keep;
  struct big* r = big_new(n);
  uint64_t carry = 0;
  for (uint32_t i = 0; i < n; ++i) {
    carry += (i < a->limbs ? a->limb[i] : 0) + (uint64_t)(i < b->limbs ? b->limb[i] : 0);
    r->limb[i] = (uint32_t)carry;
    carry >>= 32;
  }
  return r;
}

/* a * b, truncated to `keep` limbs. */
static struct big* big_mul(const struct big* a, const struct big* b, uint32_t keep) {
  uint32_t n = a->limbs + b->limbs;
  if (n > keep) n = keep;
  struct big* r = big_new(n);
  memset(r->limb, 0, n * sizeof(uint32_t));
  for (uint32_t i = 0; i < a->limbs && i < n; ++i) {
    uint64_t carry = 0;
    for (uint32_t j = 0; j < b->limbs && i + j < n; ++j) {
      carry += (uint64_t)a->limb[i] * b->limb[j] + r->limb[i + j];
      r->limb[i + j] = (uint32_t)carry;
      carry >>= 32;
    }
    if (i + b->limbs < n) r->limb[i + b->limbs] = (uint32_t)carry;
  }
  return r;
}

/* The value modulo the prime p (Horner's rule over the limbs). */
static uint64_t big_mod(const struct big* a, uint64_t p) {
  unsigned __int128 r = 0;
  for (uint32_t i = a->limbs; i-- > 0;) r = ((r << 32) + a->limb[i]) % p;
  return (uint64_t)r;
}

int main(int argc, char** argv) {
  struct parameter p[] = {
      {"steps", 3000000, 1, 1ULL << 32, "arithmetic steps"},
      {"seed", 1, 0, UINT64_MAX, "random sequence"},
  };
  const int n = PARAMETER_COUNT(p);
  read_arguments(argc, argv, "small short-lived bignums (cfrac's pattern)", p, n);
  const uint64_t steps = parameter(p, n, "steps");
  struct random_state r = random_seeded(parameter(p, n, "seed"));
  /* A ring of recent sums stays live a while (cfrac keeps its factor base and partial
   * results), each replaced after `kHistory` steps. */
  enum { kHistory = 256 };
  struct big* history[kHistory] = {0};
  uint64_t checked = 0;
  struct big* a = big_from(1);
  struct big* b = big_from(1);
  struct big* product = big_from(1);
  for (uint64_t step = 0; step < steps; ++step) {
    const uint32_t keep = (uint32_t)random_between(&r, 2, 72);
    struct big* c = big_add(a, b, keep);
    struct big* factor = big_from(random_between(&r, 1, UINT32_MAX));
    struct big* next = big_mul(product, factor, keep);
    /* Check: modulo 2^32 the truncations do not matter. */
    if (next->limb[0] != (uint32_t)((uint64_t)product->limb[0] * factor->limb[0]))
      fail("step %llu: product's low limb", (unsigned long long)step);
    if (c->limb[0] != (uint32_t)(a->limb[0] + b->limb[0]))
      fail("step %llu: sum's low limb", (unsigned long long)step);
    checked += big_mod(c, 1000000007ULL) & 1;
    struct big** slot = &history[step % kHistory];
    if (*slot != NULL && (*slot)->limbs == 0) fail("history slot overwritten");
    free(*slot);
    *slot = big_add(c, product, keep);
    free(a);
    a = b;
    b = c;
    free(product);
    free(factor);
    product = next;
  }
  free(a);
  free(b);
  free(product);
  for (int i = 0; i < kHistory; ++i) free(history[i]);
  printf("steps %llu odd_residues %llu\nall checked\n", (unsigned long long)steps,
         (unsigned long long)checked);
  return 0;
}
