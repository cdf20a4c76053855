// Instrumentation of the run managers: how much work each operation does.
//
// With -DPAGEMALLOC_COUNTERS=ON every run manager counts tree nodes visited, rotations,
// page-map reads and writes, splits, coalesces and in-place grows. With it off, every
// counting call is an empty inline function behind `if constexpr`, and compiles to nothing.
#pragma once

#include <cstdint>

namespace pagemalloc {

// The inline namespace gives the counting and the non-counting RunCounters different linker
// names, so a program may link code built both ways (a benchmark built with counters beside
// the allocator library built without) without one definition replacing the other.
#ifdef PAGEMALLOC_COUNTERS
inline namespace counting_on {
inline constexpr bool kCountersEnabled = true;
#else
inline namespace counting_off {
inline constexpr bool kCountersEnabled = false;
#endif

struct RunCounterValues {
  std::uint64_t operations = 0;      // alloc, free, grow and shrink calls
  std::uint64_t nodes_visited = 0;   // tree nodes looked at (searches and fix-ups)
  std::uint64_t rotations = 0;       // tree rotations
  std::uint64_t map_reads = 0;       // page-map entries read
  std::uint64_t map_writes = 0;      // page-map entries written
  std::uint64_t splits = 0;          // free runs split to serve a request
  std::uint64_t coalesces = 0;       // free runs merged with a neighbour
  std::uint64_t grows_in_place = 0;  // runs grown into the free run after them
  std::uint64_t chunks_added = 0;    // chunks taken from the OS

  RunCounterValues& operator+=(const RunCounterValues& o) {
    operations += o.operations;
    nodes_visited += o.nodes_visited;
    rotations += o.rotations;
    map_reads += o.map_reads;
    map_writes += o.map_writes;
    splits += o.splits;
    coalesces += o.coalesces;
    grows_in_place += o.grows_in_place;
    chunks_added += o.chunks_added;
    return *this;
  }
};

class RunCounters {
 public:
  void operation() { add(&RunCounterValues::operations); }
  void node_visited(std::uint64_t n = 1) { add(&RunCounterValues::nodes_visited, n); }
  void rotation() { add(&RunCounterValues::rotations); }
  void map_read(std::uint64_t n = 1) { add(&RunCounterValues::map_reads, n); }
  void map_write(std::uint64_t n = 1) { add(&RunCounterValues::map_writes, n); }
  void split() { add(&RunCounterValues::splits); }
  void coalesce() { add(&RunCounterValues::coalesces); }
  void grow_in_place() { add(&RunCounterValues::grows_in_place); }
  void chunk_added() { add(&RunCounterValues::chunks_added); }

  [[nodiscard]] const RunCounterValues& values() const { return values_; }
  void reset() { values_ = {}; }

 private:
  void add(std::uint64_t RunCounterValues::*field, std::uint64_t n = 1) {
    if constexpr (kCountersEnabled) values_.*field += n;
  }
  RunCounterValues values_;
};

}  // inline namespace counting_on / counting_off
}  // namespace pagemalloc
