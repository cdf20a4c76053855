// fast_path_calls: N allocations and frees through the allocator's fast path, each through a
// wrapper function of its own, so that valgrind's callgrind can count the instructions spent
// inside malloc, free, operator new and sized operator delete (tools/study/instructions.py).
//
//   fast_path_calls MODE N
//
// MODE is one of
//   pair16     N times: p = malloc(16); free(p)
//   mixed      N times: malloc/free of a size cycling through 8 classes from 16 to 1024 bytes
//   batch      N/64 times: 64 mallocs of 48 bytes, then their 64 frees (newest first)
//   sized      N times: p = operator new(32); operator delete(p, 32) (the C++14 sized delete)
//   aligned    N times: p = aligned_alloc(A, 100); free(p), A cycling through 64, 256 and 4096
//   lone16     pair16 without the blocks kept alive (below)
// and N a whole number from 1 to 10^9. Every mode but lone16 first allocates 64 blocks of each
// size it uses and keeps them to the end, as a program holds other objects: otherwise the page
// or slab of the measured block goes empty at every free, which some allocators treat on a
// slow path (lone16 shows that case). Before the measured loop the same operations run 4096
// times, so that the thread's caches are filled. The script runs two N and divides the
// difference of a wrapper's inclusive instructions by the difference of the N, which cancels
// start-up and warm-up. The wrappers are built without sibling calls and PLT stubs
// (-fno-optimize-sibling-calls -fno-plt, see CMakeLists.txt), so each is a call of its own
// whose body is one indirect call into the allocator.
//
// Exit status 0 (after printing a checksum of the pointers' low bits, which keeps the calls
// from being optimized away), 2 on a bad argument.
#include <fmt/core.h>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <iterator>
#include <new>
#include <string_view>

extern "C" {

// The measured calls: callgrind_annotate lists each wrapper by name (noipa: never inlined,
// never cloned under another name).
__attribute__((noipa)) void* measured_malloc(std::size_t size) { return std::malloc(size); }
__attribute__((noipa)) void measured_free(void* pointer) { std::free(pointer); }
__attribute__((noipa)) void* measured_aligned_alloc(std::size_t align, std::size_t size) {
  return std::aligned_alloc(align, size);
}
__attribute__((noipa)) void* measured_new(std::size_t size) { return ::operator new(size); }
__attribute__((noipa)) void measured_sized_delete(void* pointer, std::size_t size) {
  ::operator delete(pointer, size);
}
}

namespace {

constexpr std::size_t mixed_sizes[] = {16, 32, 48, 64, 128, 256, 512, 1024};
constexpr std::size_t aligned_alignments[] = {64, 256, 4096};
constexpr std::size_t batch_size = 64;
constexpr std::uint64_t warm_up = 4096;

std::uintptr_t checksum = 0;

void pair16(std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i) {
    void* p = measured_malloc(16);
    checksum += reinterpret_cast<std::uintptr_t>(p) & 0xff;
    measured_free(p);
  }
}

void mixed(std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i) {
    void* p = measured_malloc(mixed_sizes[i % std::size(mixed_sizes)]);
    checksum += reinterpret_cast<std::uintptr_t>(p) & 0xff;
    measured_free(p);
  }
}

void batch(std::uint64_t n) {
  void* blocks[batch_size];
  for (std::uint64_t round = 0; round < n / batch_size; ++round) {
    for (auto& block : blocks) {
      block = measured_malloc(48);
      checksum += reinterpret_cast<std::uintptr_t>(block) & 0xff;
    }
    for (std::size_t i = batch_size; i-- > 0;) measured_free(blocks[i]);
  }
}

void sized(std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i) {
    void* p = measured_new(32);
    checksum += reinterpret_cast<std::uintptr_t>(p) & 0xff;
    measured_sized_delete(p, 32);
  }
}

void aligned(std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i) {
    void* p = measured_aligned_alloc(aligned_alignments[i % std::size(aligned_alignments)], 100);
    checksum += reinterpret_cast<std::uintptr_t>(p) & 0xfff;
    measured_free(p);
  }
}

// Blocks of `size` bytes that stay allocated until the process ends.
void keep_alive(std::size_t size) {
  static void* kept[1024];
  static std::size_t count = 0;
  for (std::size_t i = 0; i < batch_size && count < std::size(kept); ++i) {
    kept[count++] = measured_malloc(size);
  }
}

struct Mode {
  std::string_view name;
  void (*run)(std::uint64_t);
  std::initializer_list<std::size_t> kept_sizes;
};
const Mode modes[] = {{"pair16", pair16, {16}},
                      {"mixed", mixed, {16, 32, 48, 64, 128, 256, 512, 1024}},
                      {"batch", batch, {48}},
                      {"sized", sized, {32}},
                      {"aligned", aligned, {128, 256, 4096}},
                      {"lone16", pair16, {}}};

int usage(const char* program) {
  fmt::print(stderr, "usage: {} pair16|mixed|batch|sized|aligned|lone16 N (1 <= N <= 1000000000)\n",
             program);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return usage(argv[0]);
  std::string_view mode_name = argv[1], count_text = argv[2];
  std::uint64_t n = 0;
  auto [end, error] = std::from_chars(count_text.data(), count_text.data() + count_text.size(), n);
  if (error != std::errc{} || end != count_text.data() + count_text.size() || n < 1 ||
      n > 1'000'000'000) {
    fmt::print(stderr, "{}: N must be a whole number from 1 to 10^9, got '{}'\n", argv[0],
               count_text);
    return usage(argv[0]);
  }
  for (const Mode& mode : modes) {
    if (mode.name == mode_name) {
      for (std::size_t size : mode.kept_sizes) keep_alive(size);
      mode.run(warm_up);
      mode.run(n);
      fmt::print("{} {}: checksum {}\n", mode.name, n, checksum);
      return 0;
    }
  }
  fmt::print(stderr, "{}: unknown mode '{}'\n", argv[0], mode_name);
  return usage(argv[0]);
}
