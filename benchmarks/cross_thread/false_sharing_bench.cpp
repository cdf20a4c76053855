// false_sharing_bench: threads that each write one small block of their own over and over:
// whether the allocator gives two threads blocks that share a cache line.
//
//   false_sharing_bench [threads=2] [handoff=1] [blocks=100] [size=8] [writes=1000000]
//
// Each of `threads` threads allocates `blocks` blocks of `size` bytes one after another, and
// writes every byte of each `writes / threads` times (each write read back) before it checks
// the block's last values and frees it. With handoff=1 the main thread first allocates one
// block per thread, tagged, and each thread's first act is to check and free the one it was
// handed: an allocator that reuses a freed block in the thread that freed it then gives every
// thread a block from the same few cache lines (passive false sharing). With handoff=0
// nothing is handed over, and only blocks given out side by side to different threads can
// share a line (active false sharing).
//
// Modelled on cache-scratch (handoff=1) and cache-thrash (handoff=0) of Hoard's benchmarks
// (Emery D. Berger, Kathryn S. McKinley, Robert D. Blumofe and Paul R. Wilson, "Hoard: A
// Scalable Memory Allocator for Multithreaded Applications", ASPLOS 2000,
// https://doi.org/10.1145/356989.357000), which mimalloc-bench runs as cache-scratch and
// cache-thrash (Daan Leijen et al., https://github.com/daanx/mimalloc-bench).
#include "workload_support.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

using namespace pagemalloc::cross_thread;

namespace {

// Writes every byte of `block` `writes` times and reads each write back into a volatile local
// (Hoard's loop: a store to the block and one to the stack per byte); checks that the last
// values stayed.
void write_over_and_over(char* block, std::size_t size, std::uint64_t writes) {
  volatile char* bytes = block;
  for (std::uint64_t w = 0; w < writes; ++w) {
    for (std::size_t k = 0; k < size; ++k) {
      bytes[k] = static_cast<char>(k + w);
      volatile char read_back = bytes[k];
      read_back = static_cast<char>(read_back + 1);
    }
  }
  for (std::size_t k = 0; k < size; ++k) {
    if (bytes[k] != static_cast<char>(k + writes - 1)) fail("a block lost its last write");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Arguments arguments(argc, argv,
                      "Threads writing small blocks of their own: false sharing between them.",
                      {{"threads", 2, 1, 256, "threads"},
                       {"handoff", 1, 0, 1, "1: each thread first frees a block main allocated"},
                       {"blocks", 100, 1, 100'000'000, "blocks each thread allocates in turn"},
                       {"size", 8, least_block, 4096, "bytes per block"},
                       {"writes", 1'000'000, 1, 1ULL << 40,
                        "writes of each byte of a block, shared among the threads"}});
  const std::size_t threads = arguments["threads"], size = arguments["size"];
  const std::uint64_t writes = arguments["writes"] / threads;
  if (writes == 0) {
    fmt::print(stderr, "false_sharing_bench: need writes >= threads\n");
    return 2;
  }

  std::vector<Block> handed(threads);
  if (arguments["handoff"] == 1) {
    for (std::size_t t = 0; t < threads; ++t) handed[t] = {allocate_tagged(size, t), size, t};
  }
  std::atomic<std::uint64_t> freed{0};
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::uint64_t released = 0;
      if (handed[t].pointer != nullptr) {
        check_and_free(handed[t].pointer, handed[t].size, handed[t].identity);
        ++released;
      }
      for (std::uint64_t b = 0; b < arguments["blocks"]; ++b) {
        auto* block = static_cast<char*>(std::malloc(size));
        if (block == nullptr) fail("malloc({}) returned null", size);
        write_over_and_over(block, size, writes);
        std::free(block);
        ++released;
      }
      freed += released;
    });
  }
  for (auto& worker : workers) worker.join();
  const std::uint64_t expected = threads * (arguments["blocks"] + arguments["handoff"]);
  if (freed != expected) fail("freed {} blocks, expected {}", freed.load(), expected);
  fmt::print("false sharing {}: {} blocks written {} times each, all checked\n",
             arguments.describe(), freed.load(), writes);
  return 0;
}
