// SampleTable (sample_table.h).
#include "profile/sample_table.h"

namespace pagemalloc {

bool SampleTable::grow() {
  MappedTable<LiveSample> bigger;
  if (!bigger.map(slots_.size() == 0 ? 1024 : slots_.size() * 2)) return false;
  slots_.swap(bigger);
  for (std::size_t i = 0; i < bigger.size(); ++i)
    if (bigger[i].address != 0) place(bigger[i]);
  bigger.unmap();
  return true;
}

void SampleTable::place(const LiveSample& sample) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = home_of(sample.address, mask);
  while (slots_[i].address != 0) i = (i + 1) & mask;
  slots_[i] = sample;
}

bool SampleTable::add(const LiveSample& sample, LiveSample& replaced, bool& found) {
  found = remove(sample.address, replaced);
  if ((used_ + 1) * 2 > slots_.size() && !grow()) return false;
  place(sample);
  ++used_;
  return true;
}

bool SampleTable::contains(std::uintptr_t address) const {
  if (used_ == 0) return false;
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = home_of(address, mask); slots_[i].address != 0; i = (i + 1) & mask)
    if (slots_[i].address == address) return true;
  return false;
}

bool SampleTable::remove(std::uintptr_t address, LiveSample& out) {
  if (used_ == 0) return false;
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = home_of(address, mask);
  while (slots_[i].address != address) {
    if (slots_[i].address == 0) return false;
    i = (i + 1) & mask;
  }
  out = slots_[i];
  --used_;
  // Backward shift: each later entry of the run moves into the hole if its home lies at or
  // before the hole (cyclically), so that every entry stays reachable from its home.
  std::size_t hole = i;
  for (std::size_t j = (i + 1) & mask; slots_[j].address != 0; j = (j + 1) & mask) {
    const std::size_t home = home_of(slots_[j].address, mask);
    const bool reachable = ((j - home) & mask) >= ((j - hole) & mask);
    if (reachable) {
      slots_[hole] = slots_[j];
      hole = j;
    }
  }
  slots_[hole] = LiveSample{};
  return true;
}

}  // namespace pagemalloc
