// xmalloc_bench: pairs of threads in which one thread only allocates and the other only frees
// (blocks handed over in batches through a bounded queue).
//
//   xmalloc_bench [pairs=4] [batches=16000] [batch=256] [queue=8] [least=8] [most=512] [seed=1]
//
// Each of `pairs` producers allocates `batches` batches of `batch` blocks of [least, most]
// bytes (uniform), tags them and pushes each batch to its own consumer's bounded queue (at most
// `queue` batches waiting, so a consumer that lags stops its producer instead of letting
// memory grow); the consumer checks and frees every block. At the end the number of blocks
// freed must equal the number allocated. Every free is remote: the freeing thread never
// allocated a block.
//
// Modelled on xmalloc-test (Chuck Lever and David Boreham, "malloc() Performance in a
// Multithreaded Linux Environment", USENIX 2000 FREENIX track,
// https://www.usenix.org/legacy/events/usenix2000/freenix/full_papers/lever/lever.pdf), as
// mimalloc-bench runs it ("xmalloc-test -w N -t 5 -s 64"; Daan Leijen et al.,
// https://github.com/daanx/mimalloc-bench): threads that malloc and threads that free. The
// original runs for a fixed time and reports a rate; this one runs fixed work.
#include "workload_support.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

using namespace pagemalloc::cross_thread;

int main(int argc, char** argv) {
  Arguments arguments(argc, argv, "One thread allocates, another frees: producer/consumer pairs.",
                      {{"pairs", 4, 1, 256, "producer/consumer pairs"},
                       {"batches", 16000, 1, 100'000'000, "batches each producer makes"},
                       {"batch", 256, 1, 1'000'000, "blocks in a batch"},
                       {"queue", 8, 1, 1'000'000, "batches waiting at most in a pair's queue"},
                       {"least", 8, 8, 1ULL << 30, "smallest block (bytes)"},
                       {"most", 512, 8, 1ULL << 30, "largest block (bytes, >= least)"},
                       {"seed", 1, 0, UINT64_MAX, "random seed"}});
  const std::size_t pairs = arguments["pairs"], batch = arguments["batch"];
  const std::size_t least = arguments["least"], most = arguments["most"];
  if (least > most) {
    fmt::print(stderr, "xmalloc_bench: need least <= most\n");
    return 2;
  }

  std::vector<std::unique_ptr<BoundedQueue<std::vector<Block>>>> queues;
  for (std::size_t p = 0; p < pairs; ++p) {
    queues.push_back(std::make_unique<BoundedQueue<std::vector<Block>>>(arguments["queue"]));
  }
  std::atomic<std::uint64_t> allocated{0}, freed{0};
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < pairs; ++p) {
    threads.emplace_back([&, p] {
      std::vector<std::vector<Block>> taken;
      std::uint64_t released = 0;
      while (queues[p]->take_all(taken)) {
        for (const auto& blocks : taken) {
          for (const Block& block : blocks) {
            check_and_free(block.pointer, block.size, block.identity);
          }
          released += blocks.size();
        }
      }
      freed += released;
    });
    threads.emplace_back([&, p] {
      Random random(arguments["seed"] * 1000003 + p);
      std::uint64_t made = 0;
      for (std::uint64_t b = 0; b < arguments["batches"]; ++b) {
        std::vector<Block> blocks(batch);
        for (Block& block : blocks) {
          std::size_t size = random.between(least, most);
          std::uint64_t identity = (static_cast<std::uint64_t>(p) << 40) | made++;
          block = {allocate_tagged(size, identity), size, identity};
        }
        queues[p]->push(std::move(blocks));
      }
      allocated += made;
      queues[p]->close();
    });
  }
  for (auto& thread : threads) thread.join();
  if (allocated != pairs * arguments["batches"] * batch || freed != allocated) {
    fail("allocated {} blocks, freed {}, expected {}", allocated.load(), freed.load(),
         pairs * arguments["batches"] * batch);
  }
  fmt::print("xmalloc {}: {} blocks allocated by producers, freed by consumers, all checked\n",
             arguments.describe(), allocated.load());
  return 0;
}
