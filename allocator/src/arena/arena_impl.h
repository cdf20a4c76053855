// Arena: slabs and large runs over the selected run manager. Its definitions, in three parts:
// small blocks and slabs, large runs, and upkeep (decay, purge, reset, statistics, checks).
#pragma once

#include "arena/arena_large_impl.h"
#include "arena/arena_small_impl.h"
#include "arena/arena_upkeep_impl.h"
