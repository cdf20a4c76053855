// thread_churn_bench: short-lived threads in waves, each handed a block, each handing blocks
// back after it has exited.
//
//   thread_churn_bench [waves=200] [threads=64] [blocks=32] [kept=4] [least=16] [most=300000]
//                      [seed=1]
//
// Each wave, the main thread allocates one block per thread and starts `threads` threads. Each
// thread checks and frees the block it was handed (a remote free: the main thread allocated
// it), allocates `blocks` blocks of [least, most] bytes (log-uniform: as many blocks under 1 KiB
// as between 1 and 300 KiB), keeps `kept` of them, frees the rest itself and exits. The main
// thread joins the wave's threads, then checks and frees the kept blocks: blocks of threads
// that are gone. So every wave creates and tears down `threads` threads' allocator state (a
// thread cache, the chunks it remembers) and frees blocks across threads both ways. At the end
// the blocks freed must equal the blocks allocated.
//
// Modelled on the pattern of stress-ng's pthread stressor (waves of up to 64 threads that live
// a few milliseconds each; Colin Ian King, stress-ng, https://github.com/ColinIanKing/stress-ng,
// stress-pthread.c), with every thread joined and allocating.
#include "workload_support.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <thread>
#include <vector>

using namespace pagemalloc::cross_thread;

namespace {

// A size in [least, most], its power-of-two band drawn uniformly, then a size in that band.
std::size_t log_uniform(Random& random, std::size_t least, std::size_t most) {
  const unsigned low = std::bit_width(least) - 1, high = std::bit_width(most) - 1;
  const unsigned band = static_cast<unsigned>(random.between(low, high));
  const std::size_t from = std::max(least, std::size_t{1} << band);
  const std::size_t to = std::min(most, (std::size_t{2} << band) - 1);  // band <= 30
  return random.between(from, to);
}

}  // namespace

int main(int argc, char** argv) {
  Arguments arguments(argc, argv, "Short-lived threads in waves, handing blocks both ways.",
                      {{"waves", 200, 1, 100'000'000, "waves of threads"},
                       {"threads", 64, 1, 1024, "threads started in each wave"},
                       {"blocks", 32, 1, 1'000'000, "blocks each thread allocates"},
                       {"kept", 4, 0, 1'000'000, "of those, blocks the main thread frees"},
                       {"least", 16, 8, 1ULL << 30, "smallest block (bytes)"},
                       {"most", 300000, 8, 1ULL << 30, "largest block (bytes, >= least)"},
                       {"seed", 1, 0, UINT64_MAX, "random seed"}});
  const std::size_t threads = arguments["threads"], blocks = arguments["blocks"];
  const std::size_t kept = arguments["kept"];
  const std::size_t least = arguments["least"], most = arguments["most"];
  if (least > most) {
    fmt::print(stderr, "thread_churn_bench: need least <= most\n");
    return 2;
  }
  if (kept > blocks) {
    fmt::print(stderr, "thread_churn_bench: need kept <= blocks\n");
    return 2;
  }

  std::atomic<std::uint64_t> allocated{0}, freed{0};
  Random main_random(arguments["seed"]);
  std::uint64_t identities = 0;
  for (std::uint64_t wave = 0; wave < arguments["waves"]; ++wave) {
    std::vector<Block> handed(threads);
    for (Block& block : handed) {
      const std::size_t size = log_uniform(main_random, least, most);
      const std::uint64_t identity = identities++;
      block = {allocate_tagged(size, identity), size, identity};
    }
    allocated += threads;
    std::vector<std::vector<Block>> returned(threads);
    std::vector<std::thread> wave_threads;
    wave_threads.reserve(threads);
    for (std::size_t t = 0; t < threads; ++t) {
      wave_threads.emplace_back([&, t] {
        check_and_free(handed[t].pointer, handed[t].size, handed[t].identity);
        Random random(arguments["seed"] * 1000003 + wave * 1024 + t);
        returned[t].reserve(kept);
        for (std::size_t b = 0; b < blocks; ++b) {
          const std::size_t size = log_uniform(random, least, most);
          const std::uint64_t identity = ((wave * 1024 + t + 1) << 24) | b;
          void* pointer = allocate_tagged(size, identity);
          if (b < kept) returned[t].push_back({pointer, size, identity});
          else check_and_free(pointer, size, identity);
        }
        allocated += blocks;
        freed += 1 + blocks - kept;
      });
    }
    for (auto& thread : wave_threads) thread.join();
    for (const auto& blocks_of_thread : returned) {
      for (const Block& block : blocks_of_thread) {
        check_and_free(block.pointer, block.size, block.identity);
      }
      freed += blocks_of_thread.size();
    }
  }
  if (freed != allocated) fail("allocated {} blocks, freed {}", allocated.load(), freed.load());
  fmt::print("thread-churn {}: {} threads, {} blocks, all checked\n", arguments.describe(),
             arguments["waves"] * threads, allocated.load());
  return 0;
}
