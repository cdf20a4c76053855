// Every part's definitions (allocator.h), for a program that instantiates Allocator<Config>
// for a Config of its own: with this header, its heap's functions are instantiated where the
// program calls them. The library's .cpp files instantiate them for BuildConfig alone.
#pragma once

#include "arena/arena_impl.h"
#include "explicit/bump_heap_impl.h"
#include "explicit/bump_space_impl.h"
#include "explicit/explicit_arenas_impl.h"
#include "heap/heap_impl.h"
#include "heap/heap_invariants_impl.h"
#include "huge/huge_impl.h"
#include "process/decay_impl.h"
#include "process/fork_impl.h"
#include "threads/automatic_arenas_impl.h"
#include "threads/thread_cache_impl.h"
