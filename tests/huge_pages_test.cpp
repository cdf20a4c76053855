// The thp option: every chunk an arena maps after its first gets the advice the option names
// (MADV_HUGEPAGE for "always", the default; MADV_NOHUGEPAGE for "never"; none for "default"),
// as the kernel shows it in the mapping's VmFlags (/proc/self/smaps: "hg", "nh"). And
// PAGEMALLOC_CONF's parsing of it: a bad value or an unknown key gets one warning and changes
// nothing.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "config.h"
#include "pagemalloc/pagemalloc.h"

namespace {

// The VmFlags of the mapping that holds p, as words separated by spaces ("" if none holds it).
std::string vm_flags_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream header(line);
    if (header >> std::hex >> start >> dash >> end && dash == '-') {
      inside = start <= address && address < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line.substr(8) + " ";
    }
  }
  return "";
}

bool has_flag(const std::string& flags, const char* flag) {
  return flags.find(std::string(" ") + flag + " ") != std::string::npos;
}

long thp_mode() {
  long mode = -1;
  EXPECT_EQ(pm_ctl("thp", &mode, nullptr), 0);
  return mode;
}

// The VmFlags of an explicit arena's first two chunks, mapped while the option is `mode`: two
// blocks of 1.5 MiB cannot share a 2 MiB chunk.
struct ChunkFlags {
  std::string first, second;
};
ChunkFlags flags_of_new_chunks(long mode) {
  const long before = thp_mode();
  EXPECT_EQ(pm_ctl("thp", nullptr, &mode), 0);
  const unsigned arena = pm_arena_create();
  EXPECT_NE(arena, 0u);
  constexpr std::size_t kBlock = std::size_t{3} << 19;
  void* a = pm_mallocx(kBlock, PM_ARENA(arena));
  void* b = pm_mallocx(kBlock, PM_ARENA(arena));
  EXPECT_NE(a, nullptr);
  EXPECT_NE(b, nullptr);
  ChunkFlags flags{vm_flags_of(a), vm_flags_of(b)};
  EXPECT_EQ(pm_arena_destroy(arena), 0);
  EXPECT_EQ(pm_ctl("thp", nullptr, &before), 0);
  return flags;
}

TEST(HugePages, AlwaysIsTheDefault) { EXPECT_EQ(thp_mode(), 1); }

TEST(HugePages, AnArenasFirstChunkHasNoAdviceAndTheNextHaveTheirModes) {
  const ChunkFlags always = flags_of_new_chunks(1);
  EXPECT_TRUE(has_flag(always.second, "hg")) << "VmFlags:" << always.second;
  EXPECT_FALSE(has_flag(always.second, "nh")) << "VmFlags:" << always.second;
  const ChunkFlags never = flags_of_new_chunks(2);
  EXPECT_TRUE(has_flag(never.second, "nh")) << "VmFlags:" << never.second;
  EXPECT_FALSE(has_flag(never.second, "hg")) << "VmFlags:" << never.second;
  const ChunkFlags system = flags_of_new_chunks(0);
  EXPECT_FALSE(has_flag(system.second, "hg")) << "VmFlags:" << system.second;
  EXPECT_FALSE(has_flag(system.second, "nh")) << "VmFlags:" << system.second;
  for (const ChunkFlags* f : {&always, &never, &system}) {
    EXPECT_FALSE(has_flag(f->first, "hg")) << "first chunk's VmFlags:" << f->first;
    EXPECT_FALSE(has_flag(f->first, "nh")) << "first chunk's VmFlags:" << f->first;
  }
}

TEST(HugePages, CtlRefusesAnUnknownMode) {
  const long before = thp_mode();
  const long bad = 3;
  EXPECT_EQ(pm_ctl("thp", nullptr, &bad), EINVAL);
  EXPECT_EQ(thp_mode(), before);
}

// PAGEMALLOC_CONF's entries as the first call would apply them; stderr is captured.
class ConfTest : public ::testing::Test {
 protected:
  void TearDown() override { pagemalloc::options().thp = saved_; }
  static std::string apply(const char* conf) {
    ::testing::internal::CaptureStderr();
    pagemalloc::apply_conf(conf);
    return ::testing::internal::GetCapturedStderr();
  }
  // out holds `warning` and no other PAGEMALLOC_CONF line.
  static void expect_one_warning(const std::string& out, const std::string& warning) {
    EXPECT_NE(out.find(warning), std::string::npos) << out;
    EXPECT_EQ(out.find("PAGEMALLOC_CONF", out.find("PAGEMALLOC_CONF") + 1), std::string::npos)
        << "more than one warning: " << out;
  }
  pagemalloc::HugePages saved_ = pagemalloc::options().thp.load();
};

TEST_F(ConfTest, ThpTakesItsThreeValues) {
  using pagemalloc::HugePages;
  EXPECT_EQ(apply("thp:never"), "");
  EXPECT_EQ(pagemalloc::options().thp.load(), HugePages::Never);
  EXPECT_EQ(apply("thp:default"), "");
  EXPECT_EQ(pagemalloc::options().thp.load(), HugePages::Default);
  EXPECT_EQ(apply("thp:always"), "");
  EXPECT_EQ(pagemalloc::options().thp.load(), HugePages::Always);
}

TEST_F(ConfTest, ABadValueWarnsOnceAndChangesNothing) {
  pagemalloc::options().thp = pagemalloc::HugePages::Never;
  expect_one_warning(apply("thp:sometimes"),
                     "PAGEMALLOC_CONF: bad value in 'thp:sometimes' ignored");
  EXPECT_EQ(pagemalloc::options().thp.load(), pagemalloc::HugePages::Never);
}

TEST_F(ConfTest, AnUnknownKeyWarnsOnceAndTheOtherEntriesStillApply) {
  pagemalloc::options().thp = pagemalloc::HugePages::Always;
  expect_one_warning(apply("no_such_key:1,thp:never"),
                     "PAGEMALLOC_CONF: unknown key in 'no_such_key:1' ignored");
  EXPECT_EQ(pagemalloc::options().thp.load(), pagemalloc::HugePages::Never);
}

}  // namespace
