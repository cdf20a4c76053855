// pipeline_bench: producers hand blocks of 8 B-300 KB through bounded queues to consumers,
// which check and free them: every block is freed by a thread other than the one that made it.
//
//   pipeline_bench [pairs=8] [items=120000] [queue=256] [seed=1]
//
// `pairs` producer threads and as many consumer threads; consumer c owns one bounded queue
// (mutex and condition variables, `queue` blocks at most). Producer p makes `items` blocks and
// pushes block i to queue (p + i) mod pairs, so every consumer frees every producer's blocks.
// Sizes are skewed towards small ones, as in a message-passing server: 60% of 8-128 B, 25% of
// 129 B-4 KiB, 10% of 4-64 KiB, 5% of 64-300 KiB (uniform within each band; 13 KB on
// average). A block is touched on every page when made and checked on every page before it is
// freed; at the end the consumers' count and byte total must equal the producers'. Memory in flight
// is bounded by the queues (pairs x queue blocks); the program prints the most bytes it ever had
// in flight (made, not yet freed), so that peak RSS can be set against it: how far the producers
// run ahead, and with them the memory in flight, depends on the allocator's speed.
//
// Modelled on the producer-consumer workloads of the allocator literature: xmalloc-test (Chuck
// Lever and David Boreham, "malloc() Performance in a Multithreaded Linux Environment", USENIX
// 2000 FREENIX track,
// https://www.usenix.org/legacy/events/usenix2000/freenix/full_papers/lever/lever.pdf)
// hands blocks from allocating to freeing threads; this program adds a size range that spans
// small blocks, page runs and (for some allocators) mmap'ed blocks, and many threads per core.
#include "workload_support.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

using namespace pagemalloc::cross_thread;

namespace {

std::size_t skewed_size(Random& random) {
  double band = random.unit();
  if (band < 0.60) return random.between(8, 128);
  if (band < 0.85) return random.between(129, 4096);
  if (band < 0.95) return random.between(4097, 64 * 1024);
  return random.between(64 * 1024 + 1, 300 * 1024);
}

struct Totals {
  std::atomic<std::uint64_t> blocks{0};
  std::atomic<std::uint64_t> bytes{0};
};

// Bytes made and not yet freed, and the most there ever were: what any allocator must hold at
// least, which depends on how far the producers run ahead of the consumers.
class InFlight {
 public:
  void made(std::size_t size) {
    const auto bytes = static_cast<std::int64_t>(size);
    const std::int64_t now = bytes_.fetch_add(bytes) + bytes;
    std::int64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
  void freed(std::size_t size) { bytes_.fetch_sub(static_cast<std::int64_t>(size)); }
  std::int64_t peak() const { return peak_.load(); }

 private:
  std::atomic<std::int64_t> bytes_{0};
  std::atomic<std::int64_t> peak_{0};
};

}  // namespace

int main(int argc, char** argv) {
  Arguments arguments(argc, argv,
                      "Producers hand blocks of 8 B-300 KB to consumers, which check and free "
                      "them.",
                      {{"pairs", 8, 1, 256, "producer threads and consumer threads (each)"},
                       {"items", 120000, 1, 100'000'000, "blocks each producer makes"},
                       {"queue", 256, 1, 1'000'000, "capacity of each consumer's queue"},
                       {"seed", 1, 0, UINT64_MAX, "random seed"}});
  const std::size_t pairs = arguments["pairs"];
  const std::uint64_t items = arguments["items"];

  std::vector<std::unique_ptr<BoundedQueue<Block>>> queues;
  for (std::size_t c = 0; c < pairs; ++c) {
    queues.push_back(std::make_unique<BoundedQueue<Block>>(arguments["queue"]));
  }
  Totals made, freed;
  InFlight in_flight;
  std::vector<std::thread> consumers, producers;
  for (std::size_t c = 0; c < pairs; ++c) {
    consumers.emplace_back([&, c] {
      std::vector<Block> batch;
      std::uint64_t blocks = 0, bytes = 0;
      while (queues[c]->take_all(batch)) {
        for (const Block& block : batch) {
          check_and_free(block.pointer, block.size, block.identity);
          in_flight.freed(block.size);
          ++blocks;
          bytes += block.size;
        }
      }
      freed.blocks += blocks;
      freed.bytes += bytes;
    });
  }
  for (std::size_t p = 0; p < pairs; ++p) {
    producers.emplace_back([&, p] {
      Random random(arguments["seed"] * 1000003 + p);
      std::uint64_t bytes = 0;
      for (std::uint64_t i = 0; i < items; ++i) {
        std::size_t size = skewed_size(random);
        std::uint64_t identity = (static_cast<std::uint64_t>(p) << 40) | i;
        void* pointer = allocate_tagged(size, identity);
        in_flight.made(size);
        queues[(p + i) % pairs]->push({pointer, size, identity});
        bytes += size;
      }
      made.blocks += items;
      made.bytes += bytes;
    });
  }
  for (auto& producer : producers) producer.join();
  for (auto& queue : queues) queue->close();
  for (auto& consumer : consumers) consumer.join();

  if (made.blocks != pairs * items || freed.blocks != made.blocks || freed.bytes != made.bytes) {
    fail("made {} blocks ({} bytes), freed {} ({} bytes), expected {} blocks", made.blocks.load(),
         made.bytes.load(), freed.blocks.load(), freed.bytes.load(), pairs * items);
  }
  fmt::print("pipeline {}: {} blocks, {} bytes handed over and freed, all checked\n",
             arguments.describe(), freed.blocks.load(), freed.bytes.load());
  fmt::print("peak in flight: {} KiB\n", in_flight.peak() / 1024);
  return 0;
}
