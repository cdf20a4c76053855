// shbench_bench: the SmartHeap benchmarks' pattern: threads allocate batches of blocks of
// stepping sizes and free them partly oldest-first, partly newest-first; with cross=1 (the
// sh8bench way) half of every batch is freed by another thread.
//
//   shbench_bench [threads=4] [rounds=20000] [batch=500] [cross=0] [least=8] [most=1000]
//                 [seed=1]
//
// Each of `threads` threads runs `rounds` rounds. A round allocates `batch` blocks whose sizes
// step through [least, most] (size k is least + (k x 97 + offset) mod the range's width, the
// offset drawn per round from the seed), frees the first half oldest-first and the second half
// newest-first. With cross=1 the second half is posted instead to the next thread's mailbox,
// and the thread frees, newest-first, what the previous thread posted to it (every round; a
// thread done with its rounds keeps freeing what arrives until every thread is done; when 64
// half-batches already wait in the next thread's mailbox, the sender frees what waits in its
// own and yields until there is room, so that memory in flight stays bounded). Every
// block is tagged on every page and checked before it is freed; at the end the number of
// blocks freed must equal the number allocated.
//
// Modelled on sh6bench and sh8bench (MicroQuill, part of SmartHeap, http://www.microquill.com/;
// as mimalloc-bench runs them: Daan Leijen et al., https://github.com/daanx/mimalloc-bench,
// whose README describes sh6bench as freeing some objects in LIFO order and others in reverse
// order, and sh8bench as the multi-threaded stress test with non-thread-local frees).
#include "workload_support.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

using namespace pagemalloc::cross_thread;

namespace {

// Half-batches a mailbox may hold: a sender whose receiver has not run for that long waits
// (post_when_room), so that the memory in flight stays bounded however the threads are
// scheduled.
constexpr std::size_t mailbox_batches = 64;

}  // namespace

int main(int argc, char** argv) {
  Arguments arguments(
      argc, argv, "SmartHeap-style batches freed FIFO and LIFO; cross=1: half by another thread.",
      {{"threads", 4, 1, 256, "threads"},
       {"rounds", 20000, 1, 100'000'000, "rounds of each thread"},
       {"batch", 500, 2, 10'000'000, "blocks allocated per round"},
       {"cross", 0, 0, 1, "1: the second half of each batch is freed by the next thread"},
       {"least", 8, 8, 1ULL << 30, "smallest block (bytes)"},
       {"most", 1000, 8, 1ULL << 30, "largest block (bytes, >= least)"},
       {"seed", 1, 0, UINT64_MAX, "random seed"}});
  const std::size_t threads = arguments["threads"], batch = arguments["batch"];
  const std::size_t least = arguments["least"], most = arguments["most"];
  const bool cross = arguments["cross"] == 1;
  if (least > most) {
    fmt::print(stderr, "shbench_bench: need least <= most\n");
    return 2;
  }

  std::vector<std::unique_ptr<Mailbox<Block>>> mailboxes;
  for (std::size_t t = 0; t < threads; ++t) mailboxes.push_back(std::make_unique<Mailbox<Block>>());
  std::atomic<std::uint64_t> allocated{0}, freed{0}, crossed{0};
  std::atomic<std::size_t> finished{0};
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      Random random(arguments["seed"] * 1000003 + t);
      std::vector<Block> blocks(batch), outgoing, received;
      std::uint64_t made = 0, released = 0, handed_over = 0;
      auto release = [&](const Block& block) {
        check_and_free(block.pointer, block.size, block.identity);
        ++released;
      };
      const std::size_t width = most - least + 1, half = batch / 2;
      for (std::uint64_t round = 0; round < arguments["rounds"]; ++round) {
        std::uint64_t offset = random.next();
        for (std::size_t k = 0; k < batch; ++k) {
          std::size_t size = least + (k * 97 + offset) % width;
          std::uint64_t identity = (static_cast<std::uint64_t>(t) << 40) | made++;
          blocks[k] = {allocate_tagged(size, identity), size, identity};
        }
        for (std::size_t k = 0; k < half; ++k) release(blocks[k]);
        if (cross) {
          outgoing.assign(blocks.begin() + half, blocks.end());
          post_when_room(*mailboxes[(t + 1) % threads], *mailboxes[t], outgoing,
                         mailbox_batches * (batch - half), release);
          handed_over += batch - half;
          mailboxes[t]->take_all(received);
          for (std::size_t k = received.size(); k-- > 0;) release(received[k]);
        } else {
          for (std::size_t k = batch; k-- > half;) release(blocks[k]);
        }
      }
      drain_until_all_finished(*mailboxes[t], finished, threads, release);
      allocated += made;
      freed += released;
      crossed += handed_over;
    });
  }
  for (auto& worker : workers) worker.join();
  freed += free_what_is_left(mailboxes);
  if (freed != allocated) fail("allocated {} blocks, freed {}", allocated.load(), freed.load());
  fmt::print("shbench {}: {} blocks allocated and freed ({} by another thread), all checked\n",
             arguments.describe(), allocated.load(), crossed.load());
  return 0;
}
