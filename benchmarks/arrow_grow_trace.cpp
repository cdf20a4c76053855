// Which grows of the Arrow builder's doubling buffer move, and which happen in place: one line
// per grow, for one allocator's aligned reallocation.
//
//   arrow_grow_trace ALLOCATOR [--reps N] [--prewarm MIB]
//
// ALLOCATOR is one of
//   jemalloc     mallocx / rallocx / dallocx, MALLOCX_ALIGN(64): run with
//                LD_PRELOAD=libjemalloc.so.2 (preloaded_peers.h); MALLOC_CONF applies
//   mimalloc     mi_malloc_aligned / mi_realloc_aligned / mi_free, 64: LD_PRELOAD=libmimalloc.so.2
//   pagemalloc   pm_mallocx / pm_rallocx / pm_dallocx, PM_ALIGN(64), the static library of the
//                build (its run manager is the build's)
//
// The buffer grows as arrow_builder_bench's does ([Korn 2018]): 2 MiB at first, doubled 8 times
// to 512 MiB, each new half written before the next grow. --reps builds it N times (default 3:
// the first build cold, the others warm); --prewarm allocates a block of MIB MiB and frees it
// before the first build, so that the allocator starts with that much address space it already
// holds. Each build prints its grows ("in place" or "moved", old and new address), its moves
// and its GB/s (512 MiB over the build's wall time, writes included; a rough figure beside the
// benchmark's, which this program does not replace).
#include <fmt/format.h>
#include <pagemalloc/pagemalloc.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "preloaded_peers.h"

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kFirstBytes = 2 * kMiB;
constexpr std::size_t kFinalBytes = 512 * kMiB;
constexpr std::size_t kAlignment = 64;

// One allocator's aligned allocate / reallocate / free.
struct AlignedApi {
  void* (*allocate)(std::size_t size);
  void* (*reallocate)(void* ptr, std::size_t size);
  void (*release)(void* ptr);
};

constexpr int kJemallocAlign = pagemalloc::bench::JemallocApi::align(kAlignment);

constexpr AlignedApi kJemalloc{
    [](std::size_t n) { return pagemalloc::bench::jemalloc().mallocx(n, kJemallocAlign); },
    [](void* p, std::size_t n) {
      return pagemalloc::bench::jemalloc().rallocx(p, n, kJemallocAlign);
    },
    [](void* p) { pagemalloc::bench::jemalloc().dallocx(p, kJemallocAlign); }};

constexpr AlignedApi kMimalloc{
    [](std::size_t n) { return pagemalloc::bench::mimalloc().malloc_aligned(n, kAlignment); },
    [](void* p, std::size_t n) {
      return pagemalloc::bench::mimalloc().realloc_aligned(p, n, kAlignment);
    },
    [](void* p) { pagemalloc::bench::mimalloc().free(p); }};

constexpr AlignedApi kPagemalloc{
    [](std::size_t n) { return pm_mallocx(n, PM_ALIGN(kAlignment)); },
    [](void* p, std::size_t n) { return pm_rallocx(p, n, PM_ALIGN(kAlignment)); },
    [](void* p) { pm_dallocx(p, PM_ALIGN(kAlignment)); }};

// The API named on the command line, if this process has it.
std::optional<AlignedApi> api_named(std::string_view name) {
  if (name == "jemalloc" && pagemalloc::bench::jemalloc().complete()) return kJemalloc;
  if (name == "mimalloc" && pagemalloc::bench::mimalloc().complete()) return kMimalloc;
  if (name == "pagemalloc") return kPagemalloc;
  return std::nullopt;
}

// Builds the buffer once, printing every grow; returns false if an allocation failed.
bool build_once(const AlignedApi& api, int rep) {
  const auto start = std::chrono::steady_clock::now();
  std::size_t capacity = kFirstBytes;
  auto* data = static_cast<std::byte*>(api.allocate(capacity));
  if (data == nullptr) return false;
  std::memset(data, 1, capacity);
  int moves = 0;
  for (; capacity < kFinalBytes; capacity *= 2) {
    auto* grown = static_cast<std::byte*>(api.reallocate(data, 2 * capacity));
    if (grown == nullptr) {
      api.release(data);
      return false;
    }
    const bool moved = grown != data;
    moves += moved ? 1 : 0;
    fmt::print("  {:>3} -> {:>3} MiB  {:<8}  {} -> {}\n", capacity / kMiB, 2 * capacity / kMiB,
               moved ? "moved" : "in place", fmt::ptr(data), fmt::ptr(grown));
    data = grown;
    std::memset(data + capacity, 1, capacity);  // the appends that fill the new half
  }
  api.release(data);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  fmt::print("build {}: {} moves of 8, {:.2f} GB/s\n", rep, moves,
             static_cast<double>(kFinalBytes) / took.count() / 1e9);
  return true;
}

int usage() {
  fmt::print(stderr,
             "usage: arrow_grow_trace jemalloc|mimalloc|pagemalloc [--reps N] "
             "[--prewarm MIB]\n(jemalloc and mimalloc must be preloaded)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::optional<AlignedApi> api = api_named(argv[1]);
  if (!api) return usage();
  int reps = 3;
  std::size_t prewarm_mib = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (flag == "--reps") reps = std::atoi(argv[i + 1]);
    else if (flag == "--prewarm") prewarm_mib = std::strtoull(argv[i + 1], nullptr, 10);
    else return usage();
  }
  if (prewarm_mib != 0) {
    void* block = api->allocate(prewarm_mib * kMiB);
    if (block == nullptr) return 1;
    std::memset(block, 0, 4096);
    api->release(block);
    fmt::print("prewarmed: {} MiB allocated and freed at {}\n", prewarm_mib, fmt::ptr(block));
  }
  for (int rep = 1; rep <= reps; ++rep) {
    if (!build_once(*api, rep)) {
      fmt::print(stderr, "build {}: an allocation failed\n", rep);
      return 1;
    }
  }
  return 0;
}
