// oversubscribed_bench: many more threads than cores doing small malloc/free, with a share of
// the blocks freed by another thread: what a lock costs when its holder is preempted.
//
//   oversubscribed_bench [threads=16] [cpus=2] [ops=1500000] [slots=256] [handoff=8] [least=8]
//                        [most=512] [seed=1]
//
// The process first restricts itself to `cpus` of the CPUs it may run on (sched_setaffinity;
// all of them if it has fewer), then starts `threads` threads. Each performs `ops` operations
// on its own array of `slots` small blocks of [least, most] bytes: free the block at a random
// slot (after checking its tag) and allocate a new one there. Every `handoff`-th new block is
// instead sent to the next thread (collected and posted 32 at a time to its mailbox), which
// frees it when it next looks at its mailbox (every 64 operations). A sender whose receiver
// has not run for a while (4096 blocks waiting) frees what waits in its own mailbox and yields
// until there is room, so that the memory in flight stays bounded however the threads are
// scheduled; a thread done with its
// operations keeps freeing what arrives until every thread is done. At the end (threads
// joined, mailboxes drained by the main thread) the number of blocks freed must equal the
// number allocated.
//
// Modelled on the oversubscribed runs of mimalloc-bench (Daan Leijen et al.,
// https://github.com/daanx/mimalloc-bench), which run its thread tests with more threads than
// cores, and on rpmalloc's cross-thread hand-off (Mattias Jansson,
// https://github.com/mjansson/rpmalloc-benchmark).
#include "workload_support.h"

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

using namespace pagemalloc::cross_thread;

namespace {

// Restricts the process to the first `wanted` CPUs of its affinity mask; returns how many it
// now runs on.
int restrict_to_cpus(std::size_t wanted) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) fail("sched_getaffinity failed");
  cpu_set_t chosen;
  CPU_ZERO(&chosen);
  std::size_t count = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && count < wanted; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) {
      CPU_SET(cpu, &chosen);
      ++count;
    }
  }
  if (sched_setaffinity(0, sizeof chosen, &chosen) != 0) fail("sched_setaffinity failed");
  return static_cast<int>(count);
}

constexpr std::size_t post_every = 32;
constexpr std::uint64_t look_every = 64;
constexpr std::size_t mailbox_limit = 4096;

}  // namespace

int main(int argc, char** argv) {
  Arguments arguments(
      argc, argv, "Many threads on few cores: small malloc/free with some cross-thread frees.",
      {{"threads", 16, 2, 1024, "threads"},
       {"cpus", 2, 1, 1024, "CPUs the process restricts itself to"},
       {"ops", 1500000, 1, 1'000'000'000, "replacements by each thread"},
       {"slots", 256, 1, 10'000'000, "blocks each thread keeps"},
       {"handoff", 8, 1, 1'000'000, "every handoff-th new block goes to the next thread"},
       {"least", 8, 8, 1ULL << 30, "smallest block (bytes)"},
       {"most", 512, 8, 1ULL << 30, "largest block (bytes, >= least)"},
       {"seed", 1, 0, UINT64_MAX, "random seed"}});
  const std::size_t threads = arguments["threads"], slots = arguments["slots"];
  const std::size_t least = arguments["least"], most = arguments["most"];
  if (least > most) {
    fmt::print(stderr, "oversubscribed_bench: need least <= most\n");
    return 2;
  }
  const int cpus = restrict_to_cpus(arguments["cpus"]);

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
        std::size_t size = random.between(least, most);
        std::uint64_t identity = (static_cast<std::uint64_t>(t) << 40) | made++;
        return Block{allocate_tagged(size, identity), size, identity};
      };
      auto release = [&](const Block& block) {
        check_and_free(block.pointer, block.size, block.identity);
        ++released;
      };
      for (Block& block : held) block = make();
      for (std::uint64_t i = 1; i <= arguments["ops"]; ++i) {
        Block& slot = held[random.next() % slots];
        release(slot);
        slot = make();
        if (i % arguments["handoff"] == 0) {
          outgoing.push_back(make());
          if (outgoing.size() == post_every) {
            post_when_room(*mailboxes[(t + 1) % threads], *mailboxes[t], outgoing, mailbox_limit,
                           release);
          }
        }
        if (i % look_every == 0) {
          mailboxes[t]->take_all(received);
          for (const Block& block : received) release(block);
        }
      }
      mailboxes[(t + 1) % threads]->post(outgoing);
      for (const Block& block : held) release(block);
      drain_until_all_finished(*mailboxes[t], finished, threads, release);
      allocated += made;
      freed += released;
    });
  }
  for (auto& worker : workers) worker.join();
  freed += free_what_is_left(mailboxes);
  if (freed != allocated) fail("allocated {} blocks, freed {}", allocated.load(), freed.load());
  fmt::print("oversubscribed {} (on {} CPUs): {} blocks allocated and freed, all checked\n",
             arguments.describe(), cpus, allocated.load());
  return 0;
}
