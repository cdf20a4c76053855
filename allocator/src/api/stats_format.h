// The statistics as text or as one JSON object, formatted into the caller's buffer without
// allocating (stats_print.cpp): pm_stats_print writes them to a file descriptor, the jemalloc
// names' malloc_stats_print hands them to a callback.
#pragma once

#include <cstddef>

namespace pagemalloc {

// Large enough for either form.
inline constexpr std::size_t kStatsTextCapacity = 2048;

// Writes the statistics to buffer (not zero-terminated); returns the bytes written, at most
// capacity.
std::size_t format_stats(char* buffer, std::size_t capacity, bool json);

}  // namespace pagemalloc
