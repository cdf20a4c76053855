// An OS layer that fails on purpose: it wraps another Pal (a decorator) and, before every
// reserve, commit, grow and move, asks a fault injector (fault_injector.h) whether this call
// must fail. A refused reserve returns nullptr with errno = ENOMEM, as mmap's failure does; a
// refused commit, grow or move returns false. Every other call goes straight through.
//
// The injector is a template parameter: the allocator's library built for failure tests uses
// the process's one (g_fault_injector), a unit test may use its own. The layer also keeps the
// injector's ledger of the address space it holds, so that a test can check that every
// reservation made around a failure was given back.
#pragma once

#include <cerrno>
#include <concepts>
#include <cstddef>
#include <utility>

#include "pagemap/pal.h"
#include "pagemap/testing/fault_injector.h"

namespace pagemalloc {

template <Pal Inner, FaultInjector& injector = g_fault_injector>
class FaultInjectingPal {
 public:
  constexpr FaultInjectingPal() = default;
  // Constructs the wrapped layer from these arguments (a FakePal's capacity, say).
  template <class... Args>
  constexpr explicit FaultInjectingPal(std::in_place_t, Args&&... args)
      : inner_(std::forward<Args>(args)...) {}

  void* reserve(std::size_t bytes, std::size_t align) {
    if (injector.should_fail(PalCall::Reserve)) {
      errno = ENOMEM;
      return nullptr;
    }
    void* p = inner_.reserve(bytes, align);
    if (p != nullptr) injector.add_held(bytes);
    return p;
  }

  void release(void* p, std::size_t bytes) {
    injector.remove_held(bytes);
    inner_.release(p, bytes);
  }

  bool commit(void* p, std::size_t bytes) {
    return !injector.should_fail(PalCall::Commit) && inner_.commit(p, bytes);
  }

  void decommit(void* p, std::size_t bytes) { inner_.decommit(p, bytes); }

  bool grow(void* p, std::size_t old_bytes, std::size_t new_bytes) {
    if (injector.should_fail(PalCall::Grow) || !inner_.grow(p, old_bytes, new_bytes)) return false;
    injector.add_held(new_bytes - old_bytes);
    return true;
  }

  // Only when the wrapped layer can move pages (LinuxPal::move): `to`, a reservation of
  // new_bytes, takes the pages of [p, p + old_bytes), which stop being held.
  bool move(void* p, std::size_t old_bytes, void* to, std::size_t new_bytes) requires
      requires(Inner& inner, void* q, std::size_t n) {
    { inner.move(q, n, q, n) } -> std::same_as<bool>;
  }
  {
    if (injector.should_fail(PalCall::Move) || !inner_.move(p, old_bytes, to, new_bytes))
      return false;
    injector.remove_held(old_bytes);
    return true;
  }

  Inner& inner() { return inner_; }

 private:
  Inner inner_;
};

}  // namespace pagemalloc
