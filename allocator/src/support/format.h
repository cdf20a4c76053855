// fmt as the library uses it: without std::locale (no digit grouping is ever asked for),
// without constructing its exception objects (format strings are checked at compile time; a
// bad one at run time aborts), and without the writers of floating-point and 128-bit numbers,
// which the library never formats (they were half of fmt's code in the drop-in, one copy of
// their local clones per file that formats). Every file of the library that formats includes fmt
// through this header, so that the drop-in needs nothing of libstdc++ for it.
#pragma once

#include <cstdlib>

#define FMT_STATIC_THOUSANDS_SEPARATOR 0
#define FMT_THROW(x) ::std::abort()
#define FMT_USE_FLOAT 0
#define FMT_USE_DOUBLE 0
#define FMT_USE_LONG_DOUBLE 0
#define FMT_USE_INT128 0
#include <fmt/format.h>
