// An array whose elements may begin life as the zero bytes of fresh memory, unwritten.
//
// An arena lives in memory that reads zero (the library's .bss, or a fresh anonymous mapping),
// and most of its tables stay empty in a small program: constructing them would write their
// zeros and make every page of them resident. A ZeroStartArray built with `unwritten` leaves
// its bytes alone, and its elements are the objects those zero bytes represent; built the
// ordinary way (in memory of unknown contents) it constructs each element. T must be one whose
// constructed state is all-zero bytes (zero_bytes_construct<T>() checks it, in the suite) and
// that needs no destructor.
#pragma once

#include <array>
#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>

namespace pagemalloc {

// Makes the compiler take the bytes at p as touched by code it cannot see: stores before the
// call are kept, and the bytes after it are the memory's, even where a constructor has just
// begun an object (GCC otherwise takes a new object's bytes as undefined until written: its
// lifetime dead-store elimination).
inline void compiler_sees_bytes(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

struct ZeroStartUnwritten {};
inline constexpr ZeroStartUnwritten kUnwritten{};

template <class T, std::size_t N>
class ZeroStartArray {
  static_assert(std::is_trivially_destructible_v<T>);

 public:
  ZeroStartArray() {
    for (std::size_t i = 0; i < N; ++i) ::new (static_cast<void*>(bytes_ + i * sizeof(T))) T();
  }
  // Requires: the array's memory reads zero.
  explicit ZeroStartArray(ZeroStartUnwritten) { compiler_sees_bytes(bytes_); }
  ZeroStartArray(const ZeroStartArray&) = delete;
  ZeroStartArray& operator=(const ZeroStartArray&) = delete;

  [[nodiscard]] T& operator[](std::size_t i) { return begin()[i]; }
  [[nodiscard]] const T& operator[](std::size_t i) const { return begin()[i]; }
  [[nodiscard]] T* begin() { return std::launder(reinterpret_cast<T*>(bytes_)); }
  [[nodiscard]] const T* begin() const { return std::launder(reinterpret_cast<const T*>(bytes_)); }
  [[nodiscard]] T* end() { return begin() + N; }
  [[nodiscard]] const T* end() const { return begin() + N; }

 private:
  alignas(T) std::byte bytes_[sizeof(T) * N];
};

// Whether a T constructed over bytes of another value is all zero bytes but for its padding:
// what ZeroStartArray's unwritten elements require of T.
template <class T>
bool zero_bytes_construct() {
  alignas(T) std::byte bytes[sizeof(T)];
  std::memset(bytes, 0xa5, sizeof bytes);
  compiler_sees_bytes(bytes);  // the constructor is given the 0xa5s
  T* object = ::new (static_cast<void*>(bytes)) T();
  __builtin_clear_padding(object);
  std::array<std::byte, sizeof(T)> zero{};
  return std::memcmp(bytes, zero.data(), sizeof bytes) == 0;
}

}  // namespace pagemalloc
