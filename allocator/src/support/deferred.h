// Deferred<T>: storage for a T that is constructed later, in place, and never destroyed. Its
// bytes are all zero until construct(), so that a static object holding one can lie in .bss.
#pragma once

#include <new>

namespace pagemalloc {

template <class T>
union Deferred {
  constexpr Deferred() : unused() {}
  ~Deferred() {}
  template <class... Arguments>
  void construct(Arguments&&... arguments) {
    new (&value) T(static_cast<Arguments&&>(arguments)...);
  }
  char unused;
  T value;
};

}  // namespace pagemalloc
