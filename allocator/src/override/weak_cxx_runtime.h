// The C++ runtime as the drop-in's operator new reaches it: through weak references, so that
// libpagemalloc.so does not load libstdc++ (about 1.2 MiB resident with the libm and libgcc_s
// it brings) into a C program, which never calls operator new.
//
// A C++ program has libstdc++ loaded before the drop-in's references are bound, so they
// resolve to it: new_or_throw's bad_alloc and new_nothrow's catch are the program's own
// runtime's (one copy of the exception machinery, whose counts std::uncaught_exceptions
// reads). In a process that loads libstdc++ only later, by dlopen, the references stay null:
// operator new finds the throw and the new-handler by name when it needs them, but a
// new-handler that throws out of a nothrow new ends the process (with no personality
// routine the catch is not seen). With no C++ runtime at all, an operator new out of memory
// reports it and aborts (nothing could catch a throw).
//
// Included by override.cpp only (the drop-ins); the static library links libstdc++ anyway.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <initializer_list>
#include <new>
#include <string_view>

#include "support/diagnostics.h"

// The references themselves: weak, so that the drop-in links without libstdc++ (by the C
// driver, allocator/CMakeLists.txt; -z defs accepts an undefined weak reference). The personality
// routine and the catch functions serve new_nothrow's try/catch (the compiler's own reference to
// the personality routine is made weak by the directive), get_new_handler operator new's failure
// path, terminate (below) the noexcept operators. The throw is found by name (throw_bad_alloc):
// runtime_errors.cpp gives the library's own code a std::__throw_bad_alloc that aborts, which must
// not be taken for the program's.
extern "C" {
[[gnu::weak]] int __gxx_personality_v0(...);
[[gnu::weak]] void* __cxa_begin_catch(void*) noexcept;
[[gnu::weak]] void __cxa_end_catch();
}
asm(".weak __gxx_personality_v0");
namespace std {
[[gnu::weak]] new_handler get_new_handler() noexcept;
}  // namespace std
// std::terminate(), which the noexcept operators' landing pads call when the compiler cannot
// see that the heap's functions throw nothing (in the ThreadSanitizer build): never reached,
// since the library is built without exceptions and throws none.
asm(".weak _ZSt9terminatev");

namespace pagemalloc {

// The function of this (mangled) name in the process's C++ runtime, or nullptr: in the
// global scope, else in a runtime already loaded (dlopen'ed libraries keep theirs local).
template <class Function>
Function* find_in_process(const char* name) {
  void* found = dlsym(RTLD_DEFAULT, name);
  for (const char* runtime : {"libstdc++.so.6", "libc++.so.1"}) {
    if (found != nullptr) break;
    if (void* loaded = dlopen(runtime, RTLD_LAZY | RTLD_NOLOAD)) {
      found = dlsym(loaded, name);
      dlclose(loaded);
    }
  }
  return reinterpret_cast<Function*>(found);
}

// std::get_new_handler(); nullptr (no handler) in a process with no C++ runtime.
inline std::new_handler current_new_handler() {
  if (&std::get_new_handler != nullptr) return std::get_new_handler();
  auto* get = find_in_process<std::new_handler() noexcept>("_ZSt15get_new_handlerv");
  return get != nullptr ? get() : nullptr;
}

// throw std::bad_alloc() through the program's runtime (only the runtime's own definition is
// visible to dlsym: the library's copy in runtime_errors.cpp is not exported).
[[noreturn]] inline void throw_bad_alloc() {
  if (auto* thrower = find_in_process<void()>("_ZSt17__throw_bad_allocv")) {
    thrower();
    __builtin_unreachable();
  }
  static constexpr char kMessage[] =
      "pagemalloc: operator new: out of memory, and no C++ runtime in the process to throw "
      "std::bad_alloc\n";
  write_fully(STDERR_FILENO, std::string_view(kMessage, sizeof kMessage - 1));
  std::abort();
}

}  // namespace pagemalloc
