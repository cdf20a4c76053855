// The libFuzzer target: each input is a session of the fuzz harness (api_driver.h) on a
// clean heap, its bytes decoded into pm_ calls checked against the shadow heap. A failed
// check prints the step, the check and the last operations, then aborts (libFuzzer saves the
// input as crash-*). Built and run by tools/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
//
// At exit it prints the operations run, which tools/fuzz.sh adds up:
//   pagemalloc_fuzz: 123456 operations in 789 inputs
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "api_driver.h"

namespace {

// An input decodes to at most this many operations (a byte or more each).
constexpr std::uint64_t kMaxStepsPerInput = 1 << 16;
// The heap's invariants and statistics are checked this often within an input, and at its end.
constexpr std::uint64_t kCheckEvery = 64;

std::uint64_t g_operations = 0;
std::uint64_t g_inputs = 0;

void print_totals() {
  fmt::print(stderr, "pagemalloc_fuzz: {} operations in {} inputs\n", g_operations, g_inputs);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::atexit(print_totals);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  pagemalloc::fuzz::SpanSource source(std::span<const std::uint8_t>(data, size));
  const auto result = pagemalloc::fuzz::run_session(source, kMaxStepsPerInput, kCheckEvery);
  g_operations += result.operations;
  g_inputs += 1;
  if (!result.failure.empty()) {
    fmt::print(stderr, "pagemalloc_fuzz: check failed at {}\n", result.failure);
    print_totals();
    std::abort();
  }
  return 0;
}
