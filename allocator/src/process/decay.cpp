// The decay's ticks for the build's Config (decay_impl.h), and the background thread's period.
#include "process/decay_impl.h"

#include <algorithm>

namespace pagemalloc {

std::uint64_t background_period_ms(long decay_ms) {
  if (decay_ms < 0) return 1000;
  return std::clamp<std::uint64_t>(std::uint64_t(decay_ms) / 8, 10, 1000);
}

template class Allocator<BuildConfig>::Decay;

}  // namespace pagemalloc
