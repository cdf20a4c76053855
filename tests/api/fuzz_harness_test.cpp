// The fuzz harness's own checks (tests/fuzz/): each check of the shadow heap fails when its
// property is broken by hand, so that a replay that passes means something; and the byte
// sources decode as the harness expects.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz/api_driver.h"

namespace {

using pagemalloc::fuzz::Request;
using pagemalloc::fuzz::ShadowHeap;

bool mentions(const std::string& text, const char* what) {
  return text.find(what) != std::string::npos;
}

TEST(ShadowHeap, AcceptsWhatTheAllocatorDoes) {
  ShadowHeap model;
  void* p = pm_malloc(100);
  model.adopt(p, Request{100}, "pm_malloc");
  void* q = pm_mallocx(200 * 1024, PM_ALIGN(64 * 1024) | PM_ZERO);
  model.adopt(q, Request{200 * 1024, 64 * 1024, true}, "pm_mallocx");
  void* r = pm_realloc(p, 5000);
  model.resized(static_cast<std::byte*>(p), r, Request{5000}, 5000, "pm_realloc");
  model.check_stats();
  model.release(static_cast<std::byte*>(r), "pm_free");
  pm_free(r);
  model.release(static_cast<std::byte*>(q), "pm_free");
  pm_free(q);
  model.check_stats();
  EXPECT_TRUE(model.ok()) << model.failure();
}

TEST(ShadowHeap, CatchesAnOverwrittenBlock) {
  ShadowHeap model;
  auto* p = static_cast<std::byte*>(pm_malloc(100));
  model.adopt(p, Request{100}, "pm_malloc");
  p[50] ^= std::byte{1};
  model.verify(p, "check");
  EXPECT_TRUE(mentions(model.failure(), "overwritten at offset 50")) << model.failure();
  pm_free(p);
}

TEST(ShadowHeap, CatchesContentsLostByAReallocation) {
  ShadowHeap model;
  auto* p = static_cast<std::byte*>(pm_malloc(100));
  model.adopt(p, Request{100}, "pm_malloc");
  p[10] ^= std::byte{1};
  void* q = pm_realloc(p, 3000);
  model.resized(p, q, Request{3000}, 3000, "pm_realloc");
  EXPECT_TRUE(mentions(model.failure(), "lost its contents at offset 10")) << model.failure();
  pm_free(q);
}

TEST(ShadowHeap, CatchesMemoryThatShouldReadZero) {
  ShadowHeap model;
  auto* p = static_cast<std::byte*>(pm_malloc(100));
  std::memset(p, 0xAB, 100);
  model.adopt(p, Request{100, 1, true}, "pm_calloc");
  EXPECT_TRUE(mentions(model.failure(), "is not zero at offset 0")) << model.failure();
  pm_free(p);
}

TEST(ShadowHeap, CatchesOverlappingBlocks) {
  ShadowHeap model;
  void* p = pm_malloc(100);
  model.adopt(p, Request{100}, "pm_malloc");
  model.adopt(p, Request{100}, "pm_malloc");  // as if handed out twice
  EXPECT_TRUE(mentions(model.failure(), "overlaps the live block")) << model.failure();
  pm_free(p);
}

TEST(ShadowHeap, CatchesABlockInAnotherArena) {
  const unsigned arena = pm_arena_create();
  ASSERT_NE(arena, 0u);
  {
    ShadowHeap model;
    void* p = pm_mallocx(100, PM_ARENA(arena));
    model.adopt(p, Request{100}, "pm_mallocx");  // asked for no arena: an automatic one
    EXPECT_TRUE(mentions(model.failure(), "is held by arena")) << model.failure();
  }
  ASSERT_EQ(pm_arena_destroy(arena), 0);
}

TEST(ShadowHeap, CatchesStatisticsThatDisagree) {
  ShadowHeap model;
  void* p = pm_malloc(100);  // a block the model never hears of
  model.check_stats();
  EXPECT_TRUE(mentions(model.failure(), "bytes allocated")) << model.failure();
  pm_free(p);
}

TEST(ByteSources, ASpanRunsOutAndAStreamRepeats) {
  const std::uint8_t bytes[] = {7, 9};
  pagemalloc::fuzz::SpanSource span(bytes);
  EXPECT_EQ(span.byte(), 7);
  EXPECT_FALSE(span.exhausted());
  EXPECT_EQ(span.byte(), 9);
  EXPECT_TRUE(span.exhausted());
  EXPECT_EQ(span.byte(), 0) << "past the end: zeros";

  pagemalloc::fuzz::RandomSource a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 64; ++i) {
    const std::uint8_t x = a.byte();
    EXPECT_EQ(x, b.byte());
    differs |= x != c.byte();
  }
  EXPECT_TRUE(differs);
}

TEST(FuzzSession, AnEmptyInputIsAnEmptySession) {
  pagemalloc::fuzz::SpanSource nothing({});
  const auto result = pagemalloc::fuzz::run_session(nothing, 100, 10);
  EXPECT_EQ(result.operations, 0u);
  EXPECT_TRUE(result.failure.empty()) << result.failure;
}

}  // namespace
