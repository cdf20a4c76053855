// The fault injector: decides which calls to the OS layer fail, and counts what it saw. The
// fault-injecting OS layer (pal_fault_injecting.h) asks it before every call that may fail.
//
//   PalCall         a call that may fail: reserve, commit, grow, and move (the pages of a huge
//                   block moved to a new address by mremap, LinuxPal only)
//   fail_randomly   each call of the chosen kinds fails with probability p, decided by a hash
//                   of (seed, the call's number since arming): the same seed fails the same
//                   steps of the same call sequence
//   fail_nth        the n-th call of the chosen kinds (1-based, counted from now) fails, and
//                   no other
//   stop            no more failures; the counting goes on
//
// Counters, since the process started: calls and injected failures per kind, and the bytes
// of address space the layer holds (reserved + grown - released - moved away), so that a test
// can tell that a failed call leaked nothing. Thread-safe: every field is atomic, and the
// decision for a call depends only on its number.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace pagemalloc {

enum class PalCall : std::uint8_t { Reserve, Commit, Grow, Move };
inline constexpr std::size_t kPalCallKinds = 4;

// A set of PalCall kinds.
class PalCalls {
 public:
  constexpr PalCalls(std::initializer_list<PalCall> calls) {
    for (PalCall c : calls) bits_ = std::uint8_t(bits_ | bit(c));
  }
  static constexpr PalCalls all() {
    return {PalCall::Reserve, PalCall::Commit, PalCall::Grow, PalCall::Move};
  }
  [[nodiscard]] constexpr bool contains(PalCall c) const { return (bits_ & bit(c)) != 0; }
  [[nodiscard]] constexpr std::uint8_t bits() const { return bits_; }

 private:
  static constexpr std::uint8_t bit(PalCall c) { return std::uint8_t(1u << unsigned(c)); }
  std::uint8_t bits_ = 0;
};
static_assert(PalCalls::all().bits() == 0xf);
static_assert(!PalCalls{PalCall::Grow}.contains(PalCall::Commit));

class FaultInjector {
 public:
  constexpr FaultInjector() = default;
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  // Requires: 0 <= probability <= 1.
  void fail_randomly(std::uint64_t seed, double probability, PalCalls calls = PalCalls::all()) {
    stop();
    seed_.store(seed, std::memory_order_relaxed);
    threshold_.store(probability >= 1.0 ? kAlways : std::uint64_t(probability * 0x1p64),
                     std::memory_order_relaxed);
    arm(Mode::Random, calls);
  }

  // Requires: n >= 1.
  void fail_nth(std::uint64_t n, PalCalls calls = PalCalls::all()) {
    stop();
    nth_.store(n, std::memory_order_relaxed);
    arm(Mode::Nth, calls);
  }

  void stop() { mode_.store(Mode::Off, std::memory_order_release); }

  // Counts a call of this kind; true when it must fail.
  bool should_fail(PalCall call) {
    calls_[unsigned(call)].fetch_add(1, std::memory_order_relaxed);
    const Mode mode = mode_.load(std::memory_order_acquire);
    if (mode == Mode::Off || (targets_.load(std::memory_order_relaxed) & bit(call)) == 0)
      return false;
    const std::uint64_t number = armed_calls_.fetch_add(1, std::memory_order_relaxed) + 1;
    const bool fail = mode == Mode::Nth ? number == nth_.load(std::memory_order_relaxed)
                                        : decide(seed_.load(std::memory_order_relaxed), number);
    if (fail) failures_[unsigned(call)].fetch_add(1, std::memory_order_relaxed);
    return fail;
  }

  // The address-space ledger, kept by the OS layer.
  void add_held(std::size_t bytes) { held_.fetch_add(bytes, std::memory_order_relaxed); }
  void remove_held(std::size_t bytes) { held_.fetch_sub(bytes, std::memory_order_relaxed); }

  [[nodiscard]] std::uint64_t calls(PalCall c) const {
    return calls_[unsigned(c)].load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t failures(PalCall c) const {
    return failures_[unsigned(c)].load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t calls() const { return sum(calls_); }
  [[nodiscard]] std::uint64_t failures() const { return sum(failures_); }
  // Calls of the armed kinds since the last fail_randomly or fail_nth.
  [[nodiscard]] std::uint64_t armed_calls() const {
    return armed_calls_.load(std::memory_order_relaxed);
  }
  // Bytes of address space reserved through the layer and not yet given back.
  [[nodiscard]] std::size_t held_bytes() const { return held_.load(std::memory_order_relaxed); }

 private:
  enum class Mode : std::uint8_t { Off, Random, Nth };
  using Counters = std::array<std::atomic<std::uint64_t>, kPalCallKinds>;
  static constexpr std::uint64_t kAlways = ~std::uint64_t{0};

  static constexpr std::uint8_t bit(PalCall c) { return std::uint8_t(1u << unsigned(c)); }
  static std::uint64_t sum(const Counters& counters) {
    std::uint64_t total = 0;
    for (const auto& c : counters) total += c.load(std::memory_order_relaxed);
    return total;
  }

  // splitmix64's finalizer over the seed and the call's number: uniform 64-bit values.
  static constexpr std::uint64_t mix(std::uint64_t seed, std::uint64_t number) {
    std::uint64_t z = seed + number * 0x9e3779b97f4a7c15;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
    return z ^ (z >> 31);
  }
  bool decide(std::uint64_t seed, std::uint64_t number) const {
    const std::uint64_t threshold = threshold_.load(std::memory_order_relaxed);
    return threshold == kAlways || mix(seed, number) < threshold;
  }

  void arm(Mode mode, PalCalls calls) {
    targets_.store(calls.bits(), std::memory_order_relaxed);
    armed_calls_.store(0, std::memory_order_relaxed);
    mode_.store(mode, std::memory_order_release);
  }

  std::atomic<Mode> mode_{Mode::Off};
  std::atomic<std::uint8_t> targets_{0};       // PalCalls::bits() of the armed kinds
  std::atomic<std::uint64_t> seed_{0};         // Random
  std::atomic<std::uint64_t> threshold_{0};    // Random: fail when mix() < this (kAlways: all)
  std::atomic<std::uint64_t> nth_{0};          // Nth
  std::atomic<std::uint64_t> armed_calls_{0};  // calls of the armed kinds since arming
  Counters calls_{};
  Counters failures_{};
  std::atomic<std::size_t> held_{0};  // bytes
};

// The process's one injector: the one FaultInjectingPal consults by default (the OS layer of
// tests/api/fault_injection_test.cpp's Config).
inline constinit FaultInjector g_fault_injector;

}  // namespace pagemalloc
