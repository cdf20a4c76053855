// What thp:auto may spend on faulting in fresh huge pages: at most a share of the time the
// process has run since it first advised one.
//
// A huge page's first touch zeroes 2 MiB in one fault. On the 2-core VMs the study runs on,
// that took 0.25-0.45 ms when the memory had been freed a moment before, less than the 512
// faults of small pages for the same 2 MiB (0.7-2.3 ms), and 4.7-5.7 ms when it had lain free
// for a few seconds, which the host takes back and must back anew (docs/measurements.md). A
// python run of 2,000,000 dictionary entries spent 358 ms beyond small pages' cost on 106 huge
// pages, and lua, perl and python spent 0.26-0.33 s of system time against 0.09-0.11 s with
// most of their chunks on small pages (the peers: 0.07-0.09 s), more than the TLB misses saved
// them. So each chunk that thp:auto advises MADV_HUGEPAGE has its first touch timed, and what
// it took beyond kSmallPagesNs (what small pages would have cost) is charged here. A chunk is
// advised only while the charge is within the allowance:
//
//   kGrantNs + (time since the first advised chunk) / share
//
// (share: the thp_budget option, config.h; 0 lifts the limit). Where huge pages fault in
// quickly nothing is charged and every chunk the rules of arena_chunks.h pick gets one; where
// they are slow, a short program gets a few and a long one one more every so often, and the
// rest of its chunks get small pages.
#pragma once

#include <atomic>
#include <cstdint>

namespace pagemalloc {

class HugePageBudget {
 public:
  // What the faults of small pages for a chunk of 2 MiB cost, about: only a huge page's
  // fault time beyond it is charged.
  static constexpr std::uint64_t kSmallPagesNs = 1'000'000;
  // The allowance before any time has passed: one slow huge page's worth.
  static constexpr std::uint64_t kGrantNs = 5'000'000;

  // Whether a chunk mapped at now_ns may be advised MADV_HUGEPAGE, with the given share
  // (0: always). The first call that asks with a share starts the budget's clock.
  bool allows(std::uint64_t now_ns, long share) {
    if (share <= 0) return true;
    std::uint64_t start = start_ns_.load(std::memory_order_relaxed);
    // The first to start the clock sets it; a thread that loses the race reads the winner's.
    if (start == 0 && start_ns_.compare_exchange_strong(start, now_ns, std::memory_order_relaxed))
      start = now_ns;
    const std::uint64_t elapsed = now_ns > start ? now_ns - start : 0;
    const std::uint64_t allowance = kGrantNs + elapsed / std::uint64_t(share);
    return charged_ns_.load(std::memory_order_relaxed) <= allowance;
  }

  // An advised chunk's first touch took fault_ns.
  void charge(std::uint64_t fault_ns) {
    touched_.fetch_add(1, std::memory_order_relaxed);
    if (fault_ns > kSmallPagesNs)
      charged_ns_.fetch_add(fault_ns - kSmallPagesNs, std::memory_order_relaxed);
  }

  // A chunk that the rules would have advised and the budget did not.
  void count_refusal() { refused_.fetch_add(1, std::memory_order_relaxed); }

  struct Totals {
    std::uint64_t charged_ns = 0;  // fault time beyond kSmallPagesNs, summed
    std::uint64_t touched = 0;     // advised chunks whose first touch was timed
    std::uint64_t refused = 0;     // chunks given small pages by the budget
  };
  [[nodiscard]] Totals totals() const {
    return {charged_ns_.load(std::memory_order_relaxed), touched_.load(std::memory_order_relaxed),
            refused_.load(std::memory_order_relaxed)};
  }

 private:
  std::atomic<std::uint64_t> start_ns_{0};
  std::atomic<std::uint64_t> charged_ns_{0};
  std::atomic<std::uint64_t> touched_{0};
  std::atomic<std::uint64_t> refused_{0};
};

// The process's: every heap's arenas share the machine's memory and its cost.
inline constinit HugePageBudget g_huge_page_budget;

}  // namespace pagemalloc
