// operator new's failure paths on the preloaded drop-in, which reaches the C++ runtime only
// through weak references (allocator/src/weak_cxx_runtime.h): each case prints one line, and
// tests/dropin/cxx_runtime.sh compares them with the expected ones (the same lines as with
// glibc's operator new).
//
//   operator_new_failures
//
// Requests too large to be served (2^62 bytes) make every form fail:
//   - new throws std::bad_alloc, which a catch clause of the program catches, and
//     std::uncaught_exceptions() is 0 again after it (one runtime counted the throw and the
//     catch);
//   - new calls the installed new-handler before throwing; a handler that frees a reserve
//     lets a later request succeed;
//   - nothrow new returns nullptr, with no handler and with a handler that throws bad_alloc;
//   - aligned new and its nothrow form, the same.
#include <cstdio>
#include <exception>
#include <new>

namespace {

constexpr std::size_t kTooLarge = std::size_t{1} << 62;
int handler_calls = 0;

void throwing_handler() {
  ++handler_calls;
  throw std::bad_alloc();
}

void giving_up_handler() {
  ++handler_calls;
  std::set_new_handler(nullptr);
}

template <class Request>
const char* outcome(Request request) {
  try {
    void* p = request();
    return p == nullptr ? "nullptr" : "a block";  // (the one block served is left to the exit)
  } catch (const std::bad_alloc&) {
    return "std::bad_alloc";
  } catch (...) {
    return "another exception";
  }
}

}  // namespace

int main() {
  std::printf("new: %s\n", outcome([] { return ::operator new(kTooLarge); }));
  std::printf("uncaught exceptions after the catch: %d\n", std::uncaught_exceptions());
  std::printf("new[]: %s\n", outcome([] { return ::operator new[](kTooLarge); }));
  std::printf("aligned new: %s\n",
              outcome([] { return ::operator new (kTooLarge, std::align_val_t{64}); }));
  std::printf("nothrow new: %s\n", outcome([] { return ::operator new(kTooLarge, std::nothrow); }));
  std::printf("aligned nothrow new: %s\n", outcome([] {
                return ::operator new (kTooLarge, std::align_val_t{64}, std::nothrow);
              }));

  std::set_new_handler(giving_up_handler);
  const char* gave_up = outcome([] { return ::operator new(kTooLarge); });
  std::printf("new with a handler that gives up: %s, handler calls %d\n", gave_up, handler_calls);
  handler_calls = 0;
  std::set_new_handler(throwing_handler);
  const char* threw = outcome([] { return ::operator new(kTooLarge, std::nothrow); });
  std::printf("nothrow new with a handler that throws: %s, handler calls %d\n", threw,
              handler_calls);
  std::set_new_handler(nullptr);
  std::printf("uncaught exceptions at the end: %d\n", std::uncaught_exceptions());
  std::printf("new of 100 bytes: %s\n", outcome([] { return ::operator new(100); }));
  return 0;
}
