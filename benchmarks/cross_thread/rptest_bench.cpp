// rptest_bench: threads allocate and free random-sized blocks in a working set and hand a share
// of fresh blocks to another thread, which frees them (random cross-thread alloc/free).
//
//   rptest_bench [threads=4] [loops=2000] [slots=1000] [ops=100] [cross=2] [least=8]
//                [most=16000] [seed=1]
//
// Each thread keeps `slots` blocks. Each of its `loops` iterations frees the blocks other
// threads handed to it, then frees `ops` blocks at scattered slots and allocates `ops` new ones
// at scattered slots (freeing what a slot held); every `cross`-th iteration it also allocates
// `ops` blocks and posts them to the next thread's mailbox (when 64 such hand-offs already
// wait there, it frees what waits in its own mailbox and yields until there is room). Sizes are
// drawn in [least, most] with a probability falling linearly with size. Every block is tagged
// on every page and checked before it is freed. A thread done with its loops keeps freeing what
// arrives until every thread is done; at the end (threads joined, mailboxes drained by the main
// thread) the number of blocks freed must equal the number allocated.
//
// Modelled on rpmalloc's benchmark ("rptest"; Mattias Jansson, rpmalloc-benchmark,
// https://github.com/mjansson/rpmalloc-benchmark, described in rpmalloc's BENCHMARKS.md,
// https://github.com/mjansson/rpmalloc/blob/develop/BENCHMARKS.md): `benchmark <threads> 0 1
// <cross rate> <loops> <blocks> <ops> <min> <max>`, as mimalloc-bench runs it with
// "16 0 1 2 500 1000 100 8 16000" (Daan Leijen et al., https://github.com/daanx/mimalloc-bench).
#include "workload_support.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <thread>

using namespace pagemalloc::cross_thread;

namespace {

// Density falling linearly from `least` to zero at `most`.
std::size_t linear_falloff_size(Random& random, std::size_t least, std::size_t most) {
  double u = random.unit();
  return least + static_cast<std::size_t>((most - least) * (1.0 - std::sqrt(u)));
}

// Hand-offs a mailbox may hold: a sender whose receiver has not run for that long waits
// (post_when_room), so that the memory in flight stays bounded however the threads are
// scheduled.
constexpr std::size_t mailbox_hand_offs = 64;

}  // namespace

int main(int argc, char** argv) {
  Arguments arguments(
      argc, argv,
      "rpmalloc-style random alloc/free with a share of blocks freed by another thread.",
      {{"threads", 4, 2, 256, "threads"},
       {"loops", 2000, 1, 100'000'000, "iterations of each thread"},
       {"slots", 1000, 1, 10'000'000, "blocks each thread keeps"},
       {"ops", 100, 1, 10'000'000, "blocks freed and allocated per iteration (<= slots)"},
       {"cross", 2, 1, 1'000'000, "every cross-th iteration hands ops blocks to the next thread"},
       {"least", 8, 8, 1ULL << 30, "smallest block (bytes)"},
       {"most", 16000, 8, 1ULL << 30, "largest block (bytes, >= least)"},
       {"seed", 1, 0, UINT64_MAX, "random seed"}});
  const std::size_t threads = arguments["threads"], slots = arguments["slots"];
  const std::size_t ops = arguments["ops"], least = arguments["least"], most = arguments["most"];
  if (ops > slots || least > most) {
    fmt::print(stderr, "rptest_bench: need ops <= slots and least <= most\n");
    return 2;
  }

  std::vector<std::unique_ptr<Mailbox<Block>>> mailboxes;
  for (std::size_t t = 0; t < threads; ++t) mailboxes.push_back(std::make_unique<Mailbox<Block>>());
  std::atomic<std::uint64_t> allocated{0}, freed{0};
  std::atomic<std::size_t> finished{0};
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      Random random(arguments["seed"] * 1000003 + t);
      std::vector<Block> held(slots), received, outgoing;
      std::uint64_t made = 0, released = 0;
      auto make = [&] {
        std::size_t size = linear_falloff_size(random, least, most);
        std::uint64_t identity = (static_cast<std::uint64_t>(t) << 40) | made++;
        return Block{allocate_tagged(size, identity), size, identity};
      };
      auto release = [&](Block& block) {
        if (block.pointer == nullptr) return;
        check_and_free(block.pointer, block.size, block.identity);
        block.pointer = nullptr;
        ++released;
      };
      for (std::size_t s = 0; s < slots; ++s) held[s] = make();
      for (std::uint64_t loop = 0; loop < arguments["loops"]; ++loop) {
        mailboxes[t]->take_all(received);
        for (Block& block : received) release(block);
        for (std::size_t i = 0; i < ops; ++i) release(held[random.next() % slots]);
        for (std::size_t i = 0; i < ops; ++i) {
          Block& slot = held[random.next() % slots];
          release(slot);
          slot = make();
        }
        if (loop % arguments["cross"] == 0) {
          for (std::size_t i = 0; i < ops; ++i) outgoing.push_back(make());
          post_when_room(*mailboxes[(t + 1) % threads], *mailboxes[t], outgoing,
                         mailbox_hand_offs * ops, release);
        }
      }
      for (Block& block : held) release(block);
      drain_until_all_finished(*mailboxes[t], finished, threads, release);
      allocated += made;
      freed += released;
    });
  }
  for (auto& worker : workers) worker.join();
  const std::uint64_t drained = free_what_is_left(mailboxes);
  if (freed + drained != allocated) {
    fail("allocated {} blocks, freed {} by the threads and {} at the end", allocated.load(),
         freed.load(), drained);
  }
  fmt::print("rptest {}: {} blocks allocated and freed, all checked\n", arguments.describe(),
             allocated.load());
  return 0;
}
