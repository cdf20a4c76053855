// fmt as the library uses it: without std::locale (no digit grouping is ever asked for) and
// without constructing its exception objects (format strings are checked at compile time; a
// bad one at run time aborts). Every file of the library that formats includes fmt through
// this header, so that the drop-in needs nothing of libstdc++ for it.
#pragma once

#include <cstdlib>

#define FMT_STATIC_THOUSANDS_SEPARATOR 0
#define FMT_THROW(x) ::std::abort()
#include <fmt/format.h>
