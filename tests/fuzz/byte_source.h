// Where the fuzz harness's choices come from: a stream of bytes.
//
//   SpanSource     the bytes libFuzzer hands in; past their end it reads zeros, so an input
//                  of any length decodes to whole operations (the last may read past the end)
//   RandomSource   an endless stream from a seeded generator (SplitMix64), for the replay in
//                  the test suite: the same seed gives the same operations on every run
//   Choices        the few shapes the harness draws from either: a byte, an integer below n,
//                  a one-in-n chance, and so on
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

namespace pagemalloc::fuzz {

template <class S>
concept ByteSource = requires(S s) {
  { s.byte() } -> std::same_as<std::uint8_t>;
  { s.exhausted() } -> std::same_as<bool>;
};

class SpanSource {
 public:
  explicit SpanSource(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  std::uint8_t byte() { return at_ < bytes_.size() ? bytes_[at_++] : 0; }
  [[nodiscard]] bool exhausted() const { return at_ >= bytes_.size(); }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t at_ = 0;
};

class RandomSource {
 public:
  explicit RandomSource(std::uint64_t seed) : state_(seed) {}
  std::uint8_t byte() {
    if (left_ == 0) {
      word_ = next();
      left_ = 8;
    }
    --left_;
    const auto b = std::uint8_t(word_);
    word_ >>= 8;
    return b;
  }
  [[nodiscard]] bool exhausted() const { return false; }

 private:
  // SplitMix64 (Steele, Lea and Flood, 2014): every seed gives a full-period stream.
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  std::uint64_t state_;
  std::uint64_t word_ = 0;
  unsigned left_ = 0;  // bytes of word_ not yet handed out
};

template <ByteSource S>
class Choices {
 public:
  explicit Choices(S& source) : source_(source) {}

  std::uint8_t byte() { return source_.byte(); }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | byte();
    return v;
  }
  // 0 .. n-1 (0 when n is 0). Requires: n < 2^32.
  std::size_t below(std::size_t n) {
    if (n <= 1) return 0;
    if (n <= 256) return byte() % n;
    if (n <= 65536) return (std::size_t(byte()) << 8 | byte()) % n;
    return u32() % n;
  }
  bool one_in(unsigned n) { return below(n) == 0; }
  [[nodiscard]] bool exhausted() const { return source_.exhausted(); }

 private:
  S& source_;
};

}  // namespace pagemalloc::fuzz
