// The heap-wide invariant check, for tests and the fuzz harness (not part of the pm_ API):
// every arena's run manager and page maps, every huge manager, every explicit arena, each
// under its lock (heap_invariants_impl.h says what is checked).
#pragma once

namespace pagemalloc {

// nullptr, or a sentence naming the first broken invariant found. Allocates nothing; safe
// while other threads use the heap.
const char* check_heap_invariants();

}  // namespace pagemalloc
