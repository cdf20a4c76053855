// The heap's operations: allocation by placement, classification of pointers, reallocation
// in place (runs and huge extents) before moving, and moving by remapping before copying.
// Every operation on an existing block goes to the arena (or huge manager) that holds it.
// Its definitions, in four parts: allocation, frees, reallocation, upkeep.
#pragma once

#include "heap/heap_alloc_impl.h"
#include "heap/heap_free_impl.h"
#include "heap/heap_realloc_impl.h"
#include "heap/heap_upkeep_impl.h"
