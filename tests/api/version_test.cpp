// The version: PAGEMALLOC_VERSION_* in pagemalloc.h and pm_version() against the project's
// version (project(VERSION) in CMakeLists.txt, passed in by tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <string_view>

#include "pagemalloc/pagemalloc.h"

namespace {

TEST(Version, HeaderMacrosEqualTheProjectVersion) {
  EXPECT_EQ(PAGEMALLOC_VERSION_MAJOR, PROJECT_VERSION_MAJOR_VALUE);
  EXPECT_EQ(PAGEMALLOC_VERSION_MINOR, PROJECT_VERSION_MINOR_VALUE);
  EXPECT_EQ(PAGEMALLOC_VERSION_PATCH, PROJECT_VERSION_PATCH_VALUE);
  EXPECT_EQ(std::string_view(PAGEMALLOC_VERSION_STRING), PROJECT_VERSION_TEXT);
}

TEST(Version, LibraryReportsTheHeadersVersion) {
  ASSERT_NE(pm_version(), nullptr);
  EXPECT_EQ(std::string_view(pm_version()), PAGEMALLOC_VERSION_STRING);
}

}  // namespace
