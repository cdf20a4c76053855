// When to sample an allocation: every byte a thread allocates has the same chance, 1 / mean, of
// being the one that starts a sample, so the bytes between two samples follow an exponential
// distribution of that mean and an allocation of s bytes is sampled with probability
// 1 - exp(-s / mean), whatever the sizes before it: the correction jeprof applies to a heap_v2
// profile (a Poisson process over the bytes, as jemalloc, gperftools and Go sample; a fixed
// interval would favour large blocks, Go's issue 26618). The distance to the next sample is
// drawn anew after each sample: the process forgets. No allocation and no libm (the drop-in links
// none): the logarithm and the exponential are computed here.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace pagemalloc {

// -ln(u) for u in (0, 1]: u = m * 2^e with m in [1, 2), ln m = 2 atanh((m - 1) / (m + 1)),
// whose series converges fast there (|t| <= 1/3: seven terms give some 1e-8).
inline double negative_log(double u) {
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(u);
  const int exponent = int((bits >> 52) & 0x7ff) - 1023;
  const double m =
      std::bit_cast<double>((bits & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1023} << 52));
  const double t = (m - 1) / (m + 1), t2 = t * t;
  double series = 0, power = t;
  for (int k = 1; k <= 15; k += 2, power *= t2) series += power / k;
  constexpr double kLn2 = 0.6931471805599453;
  return -(exponent * kLn2 + 2 * series);
}

// exp(-x) for x >= 0: x = k ln 2 + r with r in [0, ln 2), exp(-x) = 2^-k exp(-r), whose series
// converges fast there (eighteen terms give some 1e-16).
inline double negative_exp(double x) {
  constexpr double kLn2 = 0.6931471805599453;
  if (!(x < 700)) return 0;  // (below the smallest normal double; NaN too)
  const int k = int(x / kLn2);
  const double r = x - k * kLn2;
  double term = 1, sum = 1;
  for (int n = 1; n <= 18; ++n) sum += (term *= -r / n);
  return sum * std::bit_cast<double>(std::uint64_t(1023 - k) << 52);
}

// The bytes a sample of `bytes` stands for: an allocation of that size is sampled with
// probability p = 1 - exp(-bytes / mean), so bytes / p is the unbiased estimate (jeprof scales
// a profile's counts so). About mean for small blocks, bytes for large ones.
inline double sample_weight(std::size_t bytes, std::uint64_t mean) {
  const double r = double(bytes) / double(mean == 0 ? 1 : mean);
  if (r == 0) return 0;
  // 1 - exp(-r), without the cancellation of the difference when r is small.
  double p;
  if (r < 0.5) {
    double term = r;
    p = r;
    for (int n = 2; n <= 16; ++n) p += (term *= -r / n);
  } else {
    p = 1 - negative_exp(r);
  }
  return double(bytes) / p;
}

// A thread's distance to its next sampled byte.
class SampleCountdown {
 public:
  // Whether an allocation of `bytes` holds the next sampled byte (then the next distance is
  // drawn). mean: the average bytes between samples (prof_sample), at least 1.
  bool take(std::size_t bytes, std::uint64_t mean) {
    if (bytes < left_) [[likely]] {
      left_ -= bytes;
      return false;
    }
    return take_slow(bytes, mean);
  }
  // take's common case alone: false, and the bytes counted, when an allocation of `bytes`
  // cannot be sampled; true when take must decide (then nothing is counted yet).
  bool must_decide(std::size_t bytes) {
    if (bytes < left_) [[likely]] {
      left_ -= bytes;
      return false;
    }
    return true;
  }
  // A distance in bytes to a sampled byte, drawn anew (the thread cache's per-class
  // countdowns take theirs from here).
  std::uint64_t draw_distance(std::uint64_t mean) { return draw(mean); }
  // Starts over (a new mean, or after fork): the next take draws a distance.
  void reset() { left_ = 0; }
  [[nodiscard]] std::uint64_t left() const { return left_; }

 private:
  // left_ == 0: the thread's first allocation (or one after reset), which draws a distance
  // first; else a sample.
  [[gnu::noinline]] bool take_slow(std::size_t bytes, std::uint64_t mean) {
    if (left_ == 0) {
      left_ = draw(mean);
      return take(bytes, mean);
    }
    left_ = draw(mean);
    return true;
  }
  std::uint64_t draw(std::uint64_t mean) {
    if (mean == 0) mean = 1;
    // xorshift64* (Sebastiano Vigna, "An experimental exploration of Marsaglia's xorshift
    // generators, scrambled", 2016), seeded from the countdown's own address the first time.
    if (state_ == 0) state_ = reinterpret_cast<std::uintptr_t>(this) * 0x9e3779b97f4a7c15u | 1;
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    const std::uint64_t random = state_ * 0x2545f4914f6cdd1du;
    // u in (0, 1]: the top 53 bits plus one, over 2^53.
    const double u = double((random >> 11) + 1) * (1.0 / 9007199254740992.0);
    const double distance = negative_log(u) * double(mean);
    return distance < 1 ? 1 : std::uint64_t(distance);
  }

  std::uint64_t left_ = 0;
  std::uint64_t state_ = 0;
};

}  // namespace pagemalloc
