// The fuzz harness (tests/fuzz/) replayed from seeded byte streams instead of libFuzzer's
// inputs, so that every build of the test suite runs it, in every run-manager variant and
// under the sanitizers, without clang.
//
// Each test runs sessions (each on a clean heap, ending with every block freed and every
// explicit arena destroyed, as one fuzz input) until it has run kOperationsPerTest
// operations; the four together run just over one million. Session lengths are drawn from
// the seed too: most are short, as fuzz inputs are (a few to a few thousand operations), some
// long enough (up to 65,536) to reach the bounds on live blocks and bytes.
//
// The operations follow from the seed: PAGEMALLOC_TEST_SEED when set (each test adds its
// number), else a fixed one. Addresses need not repeat from run to run (the decay's purges
// follow the clock). A failure prints the seed, the session, the step, the check that failed
// and the last operations.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>

#include "fuzz/api_driver.h"

namespace {

using pagemalloc::fuzz::RandomSource;
using pagemalloc::fuzz::run_session;

constexpr std::uint64_t kOperationsPerTest = 262'144;  // four tests: 1,048,576
constexpr std::uint64_t kCheckEvery = 256;
constexpr std::uint64_t kDefaultSeed = 0x5eed'f022;

std::uint64_t base_seed() {
  if (const char* text = std::getenv("PAGEMALLOC_TEST_SEED"))
    return std::strtoull(text, nullptr, 0);
  return kDefaultSeed;
}

// A session's length: 2^k to 2^(k+1) - 1 operations, k uniform in 0..15.
std::uint64_t session_length(RandomSource& lengths) {
  const unsigned k = lengths.byte() % 16;
  const std::uint64_t extra = (std::uint64_t(lengths.byte()) << 8 | lengths.byte()) % (1u << k);
  return (std::uint64_t{1} << k) + extra;
}

void replay(unsigned test_number) {
  const std::uint64_t seed = base_seed() + test_number;
  RandomSource lengths(seed);
  std::uint64_t operations = 0, sessions = 0;
  while (operations < kOperationsPerTest) {
    RandomSource source(seed * 0x9E3779B97F4A7C15ull + sessions);
    const std::uint64_t length = std::min(session_length(lengths), kOperationsPerTest - operations);
    const auto result = run_session(source, length, kCheckEvery);
    operations += result.operations;
    ASSERT_TRUE(result.failure.empty())
        << fmt::format("seed {:#x} (PAGEMALLOC_TEST_SEED={:#x} replays it), session {}, {}", seed,
                       base_seed(), sessions, result.failure);
    ASSERT_GE(result.operations, length) << "a seeded stream never runs out";
    ++sessions;
  }
  fmt::print("fuzz replay: {} operations in {} sessions, seed {:#x}\n", operations, sessions, seed);
}

TEST(FuzzReplay, Seed0) { replay(0); }
TEST(FuzzReplay, Seed1) { replay(1); }
TEST(FuzzReplay, Seed2) { replay(2); }
TEST(FuzzReplay, Seed3) { replay(3); }

}  // namespace
