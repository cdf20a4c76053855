// Every part's definitions (allocator.h), for a program that instantiates Allocator<Config>
// for a Config of its own: with this header, its heap's functions are instantiated where the
// program calls them. The library's .cpp files instantiate them for BuildConfig alone.
#pragma once

#include "arena_impl.h"
#include "automatic_arenas_impl.h"
#include "bump_heap_impl.h"
#include "bump_space_impl.h"
#include "decay_impl.h"
#include "explicit_arenas_impl.h"
#include "fork_impl.h"
#include "heap_impl.h"
#include "heap_invariants_impl.h"
#include "huge_impl.h"
#include "thread_cache_impl.h"
