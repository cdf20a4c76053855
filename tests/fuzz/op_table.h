// The fuzz harness's vocabulary: its operations, how often each is drawn (one byte picks one),
// the sizes on the edges between block kinds, and the bounds that keep a session's memory
// small. api_driver.h performs the operations.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "design/size_classes.h"
#include "pagemap/page_map.h"
#include "pagemap/pages.h"

namespace pagemalloc::fuzz {

inline constexpr std::size_t kMaxLiveBlocks = 2000;
inline constexpr std::size_t kMaxLiveBytes = std::size_t{48} << 20;
inline constexpr std::size_t kMaxExplicitArenas = 6;

enum class Op : std::uint8_t {
  Malloc,
  Calloc,
  Realloc,
  Free,
  PosixMemalign,
  AlignedAlloc,
  Mallocx,
  Rallocx,
  Xallocx,
  Sallocx,
  Dallocx,
  Sdallocx,
  Nallocx,
  ArenaCreate,
  ArenaReset,
  ArenaDestroy,
  Stats,
  Purge,
  CheckHeap,
  SetDecay,
  SetChecks,
  OtherThread,
  BadInput,
};

struct OpWeight {
  Op op;
  unsigned weight;  // out of 256: one byte picks the operation
  const char* name;
};

inline constexpr OpWeight kOpWeights[] = {
    {Op::Malloc, 33, "malloc"},
    {Op::Calloc, 12, "calloc"},
    {Op::Realloc, 22, "realloc"},
    {Op::Free, 30, "free"},
    {Op::PosixMemalign, 6, "posix_memalign"},
    {Op::AlignedAlloc, 6, "aligned_alloc"},
    {Op::Mallocx, 36, "mallocx"},
    {Op::Rallocx, 26, "rallocx"},
    {Op::Xallocx, 14, "xallocx"},
    {Op::Sallocx, 10, "sallocx"},
    {Op::Dallocx, 16, "dallocx"},
    {Op::Sdallocx, 16, "sdallocx"},
    {Op::Nallocx, 6, "nallocx"},
    {Op::ArenaCreate, 3, "arena_create"},
    {Op::ArenaReset, 3, "arena_reset"},
    {Op::ArenaDestroy, 2, "arena_destroy"},
    {Op::Stats, 4, "stats"},
    {Op::Purge, 1, "purge"},
    {Op::CheckHeap, 3, "check_heap"},
    {Op::SetDecay, 1, "set_decay"},
    {Op::SetChecks, 2, "set_checks"},
    {Op::OtherThread, 1, "other_thread"},
    {Op::BadInput, 3, "bad_input"},
};

inline constexpr auto kOpOfByte = [] {
  std::array<Op, 256> table{};
  unsigned next = 0;
  for (const OpWeight& w : kOpWeights)
    for (unsigned i = 0; i < w.weight && next < table.size(); ++i) table[next++] = w.op;
  return table;
}();
static_assert([] {
  unsigned total = 0;
  for (const OpWeight& w : kOpWeights) total += w.weight;
  return total == 256;
}());

constexpr const char* op_name(Op op) {
  for (const OpWeight& w : kOpWeights)
    if (w.op == op) return w.name;
  return "?";
}

// Sizes on either side of every boundary between kinds, and 0 (which once made blocks of zero
// pages on the page-run and huge paths: tests/api/size_zero_test.cpp).
inline constexpr std::size_t kEdgeSizes[] = {
    0,
    1,
    8,
    9,
    128,
    129,
    1024,
    1025,
    kMaxSmallSize - 1,
    kMaxSmallSize,
    kMaxSmallSize + 1,
    kPageSize,
    kPageSize + 1,
    kMaxRunPages.bytes() - 1,
    kMaxRunPages.bytes(),
    kMaxRunPages.bytes() + 1,
    kChunkSize - 1,
    kChunkSize,
    kChunkSize + 1,
    2 * kChunkSize,
};

}  // namespace pagemalloc::fuzz
