// A C++ program on the installed pagemalloc: a std::pmr container over an explicit arena
// (pagemalloc/memory_resource.h), built by tests/install/install_test.sh.
#include <pagemalloc/memory_resource.h>

#include <cstdio>
#include <vector>

int main() {
  pagemalloc::ArenaResource arena;
  std::pmr::vector<int> values(&arena);
  for (int i = 0; i < 100000; ++i) values.push_back(i);
  long sum = 0;
  for (int v : values) sum += v;
  if (sum != 4999950000L) {
    std::fprintf(stderr, "FAIL: sum %ld\n", sum);
    return 1;
  }
  std::printf("ok: a std::pmr::vector of %zu ints on an explicit arena\n", values.size());
  return 0;
}
