// larson_bench: the Larson server simulation with a fixed amount of work: each thread replaces
// random blocks of its array, then hands the array to a new thread and exits, so the blocks it
// made are freed by its successor.
//
//   larson_bench [threads=4] [slots=5000] [ops=20000] [generations=100] [least=8] [most=1000]
//                [seed=1]
//
// The main thread fills `threads` arrays of `slots` blocks of [least, most] bytes (uniform).
// Then, for `generations` generations, one thread per array performs `ops` replacements (free
// the block at a random slot after checking its tag, allocate a new block of random size
// there) and exits; the next generation's thread takes the array over, so every block is freed
// by a thread other than the one that allocated it, often after that thread has exited. At the
// end the main thread checks and frees every block, and the number of blocks freed must equal
// the number allocated.
//
// Modelled on larson (Paul Larson and Murali Krishnan, "Memory Allocation for Long-Running
// Server Applications", ISMM 1998, https://doi.org/10.1145/286860.286880), as mimalloc-bench
// runs it: "larson 5 8 1000 5000 100 4141 N" (Daan Leijen et al.,
// https://github.com/daanx/mimalloc-bench). The original runs for a fixed time and reports a
// throughput; this one runs fixed work, so its wall time is the measure.
#include "workload_support.h"

#include <atomic>
#include <cstdint>
#include <thread>

using namespace pagemalloc::cross_thread;

int main(int argc, char** argv) {
  Arguments arguments(
      argc, argv, "Larson's server simulation: threads replace blocks, then hand arrays over.",
      {{"threads", 4, 1, 256, "threads in each generation (one per array)"},
       {"slots", 5000, 1, 10'000'000, "blocks in each array"},
       {"ops", 20000, 1, 100'000'000, "replacements by each thread"},
       {"generations", 100, 1, 1'000'000, "threads that take each array over in turn"},
       {"least", 8, 8, 1ULL << 30, "smallest block (bytes)"},
       {"most", 1000, 8, 1ULL << 30, "largest block (bytes, >= least)"},
       {"seed", 1, 0, UINT64_MAX, "random seed"}});
  const std::size_t threads = arguments["threads"], slots = arguments["slots"];
  const std::size_t least = arguments["least"], most = arguments["most"];
  if (least > most) {
    fmt::print(stderr, "larson_bench: need least <= most\n");
    return 2;
  }

  std::atomic<std::uint64_t> allocated{0}, freed{0};
  std::vector<std::vector<Block>> arrays(threads, std::vector<Block>(slots));
  Random main_random(arguments["seed"]);
  std::uint64_t serial = 0;
  for (auto& array : arrays) {
    for (Block& block : array) {
      std::size_t size = main_random.between(least, most);
      block = {allocate_tagged(size, serial), size, serial};
      ++serial;
    }
  }
  allocated += serial;

  for (std::uint64_t generation = 0; generation < arguments["generations"]; ++generation) {
    std::vector<std::thread> workers;
    for (std::size_t t = 0; t < threads; ++t) {
      workers.emplace_back([&, t, generation] {
        std::uint64_t name = (generation + 1) * threads + t;
        Random random(arguments["seed"] * 1000003 + name);
        std::vector<Block>& array = arrays[t];
        std::uint64_t made = 0;
        for (std::uint64_t i = 0; i < arguments["ops"]; ++i) {
          Block& block = array[random.next() % slots];
          check_and_free(block.pointer, block.size, block.identity);
          std::size_t size = random.between(least, most);
          std::uint64_t identity = (name << 40) | made++;
          block = {allocate_tagged(size, identity), size, identity};
        }
        allocated += made;
        freed += made;
      });
    }
    for (auto& worker : workers) worker.join();
  }
  for (auto& array : arrays) {
    for (const Block& block : array) check_and_free(block.pointer, block.size, block.identity);
    freed += array.size();
  }
  if (freed != allocated) fail("allocated {} blocks, freed {}", allocated.load(), freed.load());
  fmt::print("larson {}: {} blocks allocated and freed, all checked\n", arguments.describe(),
             allocated.load());
  return 0;
}
