// A thread's medium bins: a LIFO of freed medium blocks per medium class (medium_classes.h),
// popped and pushed with no lock, as gperftools' thread caches keep blocks of up to 256 KiB.
// A block in a bin is still a run allocated to the run manager; its first page entry says
// ThreadCached (pagemap/page_map.h), so that a second free of it is reported.
//
// Bounds: a bin holds at most `limit` blocks, and its limit starts at 0 and grows by one for a
// push that finds the bin full if a pop found it empty since its limit last grew, as
// gperftools' lists grow on a miss (a thread that frees more blocks of a length than it
// allocates, as one that frees what others made, keeps one and hands the rest to the arena's
// stash, where the allocating threads find them), while the limits of every thread's bins stay
// within kAllBytes (a process's bins hold at most 32 MiB, gperftools' default for all its thread
// caches together) and a thread's within kThreadBytes, the same: one thread may claim the whole
// bound while no other does. With 8 MiB a thread, 100 live blocks of 64-256 KiB replaced at random
// missed the bins on 30 % of the requests and took 5 times gperftools' time; with the whole
// bound, 0.75 % and 1.3 times, and a peak RSS of a quarter of gperftools' (docs/measurements.md,
// entry 45). Each grown limit is claimed from the bound and given back when the bin is trimmed
// or its thread exits. A push that finds the bin full and cannot grow it sends the bin's older
// half to the arena in one batch. A bin seen with no push or pop between two looks of the
// thread's decay ticks (thread_cache.h) is emptied and its limit given back, so a program that
// stops using a length keeps none of its blocks, and a thread that stops using its bins leaves
// the bound to the others. Pushes that find no room while the bounds are taken look the same
// way every kStarvedLook of them (starved_look), so that a thread that moves to other lengths
// hands its old bins' room to the new ones within some tens of pushes.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace pagemalloc {

template <class MediumClasses>
class MediumBins {
 public:
  static constexpr unsigned kClasses = MediumClasses::kCount;
  static constexpr unsigned kSlots = 16;  // blocks per bin at most
  // Pushes refused for want of room between two looks at idle bins (starved_look, below).
  static constexpr unsigned kStarvedLook = 2 * kSlots;
  static constexpr std::size_t kAllBytes = std::size_t{32} << 20;
  static constexpr std::size_t kThreadBytes = kAllBytes;

  // The limits claimed by every thread's bins (of this class table's design).
  static std::atomic<std::size_t>& claimed_by_all() {
    static constinit std::atomic<std::size_t> claimed{0};
    return claimed;
  }

  // Every kTickUses pushes and pops of a bin, the one that makes it sets `tick`: the thread
  // cache's decay ticks (thread_cache.h) come from its bins' own counts, with no count of
  // their own to read and write on every free.
  static constexpr std::uint32_t kTickUses = 512;

  // A cached block of the class, or nullptr.
  void* pop(unsigned c, bool& tick) {
    Word& bin = words_[c];
    const std::uint64_t word = bin.load();
    const unsigned count = Word::count_of(word);
    if (count == 0) {
      bin.store(word | Word::kMissed);  // the bin may grow at its next push_full
      return nullptr;
    }
    const std::uint64_t popped = word - 1 + Word::kOneUse;
    bin.store(popped);
    tick = popped < Word::kOneTick;  // (the ticks' field wrapped to 0: a shift, not a flag kept)
    void* block = slots_[c][count - 1];
    if (block == nullptr) __builtin_unreachable();  // (a bin holds blocks: no test for the caller)
    return block;
  }

  // Pushes block (of class c) if the bin has room below its limit; false if it has none.
  bool try_push(unsigned c, void* block, bool& tick) {
    Word& bin = words_[c];
    const std::uint64_t word = bin.load();
    const unsigned count = Word::count_of(word);
    if (count == Word::limit_of(word)) return false;
    slots_[c][count] = block;
    std::uint64_t pushed;
    tick = __builtin_add_overflow(word, Word::kOneUse + 1, &pushed);
    bin.store(pushed);
    return true;
  }
  // The same, for a caller that leaves the ticks to others (the tests).
  void* pop(unsigned c) {
    bool tick = false;
    return pop(c, tick);
  }
  bool try_push(unsigned c, void* block) {
    bool tick = false;
    return try_push(c, block, tick);
  }
  template <class GiveBack>
  bool push_full(unsigned c, void* block, GiveBack give_back) {
    bool tick = false;
    return push_full(c, block, give_back, tick);
  }

  // A push that try_push refused: grows the bin's limit if both bounds allow and a pop found
  // the bin empty since its limit last grew (a bin that serves its thread's requests, or is
  // only pushed to, as a thread's that frees what others allocate, stays as it is); else hands
  // the bin's older half to give_back(void* const* blocks, unsigned n) and pushes; or, if the
  // bin may hold nothing, returns false (the caller frees the block itself).
  template <class GiveBack>
  bool push_full(unsigned c, void* block, GiveBack give_back, bool& tick) {
    Word& bin = words_[c];
    void** slots = slots_[c].data();
    std::uint64_t used;
    tick = __builtin_add_overflow(bin.load(), Word::kOneUse, &used);
    bin.store(used);
    unsigned count = bin.load_count();
    if (!grow(c)) {
      if (count == 0 && !(starved_look(give_back) && grow(c))) return false;
      const unsigned n = (count + 1) / 2;
      give_back(slots, n);
      for (unsigned i = n; i < count; ++i) slots[i - n] = slots[i];
      count -= n;
    }
    slots[count] = block;
    bin.store_count(count + 1);
    return true;
  }

  // Empties every bin that saw no push or pop since the last look (this or starved_look) and
  // gives its limit back; give_back as push's.
  template <class GiveBack>
  void trim_idle(GiveBack give_back) {
    for (unsigned c = 0; c < kClasses; ++c) {
      const std::uint32_t uses = Word::uses_of(words_[c].load());
      if (uses == uses_seen_[c] && words_[c].limit() != 0) empty(c, give_back);
      uses_seen_[c] = uses;
    }
  }

  // Empties every bin and gives every limit back (thread exit, pm_purge, a failed growth).
  template <class GiveBack>
  void empty_all(GiveBack give_back) {
    for (unsigned c = 0; c < kClasses; ++c)
      if (words_[c].limit() != 0) empty(c, give_back);
  }

  // Bytes of blocks held, and whether any is (read by their owner, or with it stopped).
  [[nodiscard]] std::size_t bytes_held() const {
    std::size_t bytes = 0;
    for (unsigned c = 0; c < kClasses; ++c)
      bytes += std::size_t{words_[c].load_count()} * MediumClasses::bytes(c);
    return bytes;
  }
  [[nodiscard]] bool holds_any() const { return held_limits_ != 0; }
  [[nodiscard]] unsigned count(unsigned c) const { return words_[c].load_count(); }
  [[nodiscard]] unsigned limit(unsigned c) const { return words_[c].limit(); }
  [[nodiscard]] bool holds(unsigned c, const void* block) const {
    for (unsigned i = 0; i < words_[c].load_count(); ++i)
      if (slots_[c][i] == block) return true;
    return false;
  }

  // nullptr, or what is wrong: a count above its limit, a limit above kSlots, limits whose
  // bytes are not those this thread claimed.
  [[nodiscard]] const char* check() const {
    std::size_t limits = 0;
    for (unsigned c = 0; c < kClasses; ++c) {
      if (words_[c].load_count() > words_[c].limit())
        return "a medium bin holds more than its limit";
      if (words_[c].limit() > kSlots) return "a medium bin's limit is above its slots";
      limits += std::size_t{words_[c].limit()} * MediumClasses::bytes(c);
    }
    if (limits != held_limits_) return "a thread's medium limits are not the bytes it claimed";
    if (limits > kThreadBytes) return "a thread's medium limits pass its bound";
    return nullptr;
  }

  // fork(): in the child, the caches of the threads that did not survive are dropped; their
  // claims are dropped with them.
  void forget_claim() {
    claimed_by_all().fetch_sub(held_limits_, std::memory_order_relaxed);
    held_limits_ = 0;
    for (Word& bin : words_) bin.store(0);
  }

 private:
  // A bin's count, limit and uses in one word, so that a pop or a push reads and writes it
  // once (a separate count of uses, read and written on every pop and push, cost 1.3 ns a
  // pair of 128 KiB free and malloc: docs/measurements.md). The word is written by the owner
  // only and read by the statistics (bytes_held) from any thread: a relaxed atomic, as a small
  // bin's fill (thread_cache.h). The words lie together, apart from the slots, so that a bin's
  // word is one indexed load from the cache (no multiply by a bin's size).
  struct Word {
    static constexpr std::uint64_t kOneLimit = std::uint64_t{1} << 8;
    // One use: one more in the uses (bits 32-54) and in the ticks' field (55-63), whose
    // wrap, every kTickUses uses, is the add's carry: the tick costs no test of its own.
    static constexpr std::uint64_t kOneTick = std::uint64_t{1} << 55;
    static_assert(kOneTick * kTickUses == 0, "the ticks' field wraps every kTickUses uses");
    static constexpr std::uint64_t kOneUse = (std::uint64_t{1} << 32) + kOneTick;
    static constexpr std::uint64_t kMissed = std::uint64_t{1} << 16;
    static constexpr std::uint64_t kUsesOnly = ~((std::uint64_t{1} << 32) - 1);
    static unsigned count_of(std::uint64_t word) { return unsigned(word & 0xff); }
    static unsigned limit_of(std::uint64_t word) { return unsigned(word >> 8 & 0xff); }
    static std::uint32_t uses_of(std::uint64_t word) { return std::uint32_t(word >> 32); }
    static_assert(kSlots < 256, "a count and a limit are bytes");

    // count: bits 0-7; limit: 8-15 (bytes, so that a push compares them in one instruction); a
    // pop found the bin empty since the limit last grew: 16; pushes and pops: 32-63 (uses_of,
    // which changes at every use, as the two fields count together).
    std::atomic<std::uint64_t> word{0};
    [[nodiscard]] std::uint64_t load() const { return word.load(std::memory_order_relaxed); }
    void store(std::uint64_t w) { word.store(w, std::memory_order_relaxed); }
    [[nodiscard]] unsigned load_count() const { return count_of(load()); }
    [[nodiscard]] unsigned limit() const { return limit_of(load()); }
    void store_count(unsigned n) { store((load() & ~std::uint64_t{0xff}) | n); }
  };

  // A push to a bin of limit 0 that the bounds would not grow (its thread's other bins hold
  // them): every kStarvedLook of these, a look as trim_idle's, so that the bins of the lengths
  // a thread stopped using give their room to the lengths it uses now within 2 × kStarvedLook
  // pushes, not the decay ticks' two looks (up to a second; a program that moves from blocks
  // of 64-256 KiB to blocks of 256 KiB-1 MiB, docs/measurements.md). True if it looked. A
  // thread whose lengths hold more than the bounds at once looks every kStarvedLook starved
  // pushes, and a bin that none of them used since the look before gives its room away.
  template <class GiveBack>
  bool starved_look(GiveBack& give_back) {
    if (++starved_ < kStarvedLook) return false;
    starved_ = 0;
    trim_idle(give_back);
    return true;
  }

  // Raises class c's limit by one within both bounds.
  bool grow(unsigned c) {
    Word& bin = words_[c];
    const std::size_t bytes = MediumClasses::bytes(c);
    if (bin.limit() == kSlots || held_limits_ + bytes > kThreadBytes) return false;
    if (bin.limit() != 0 && (bin.load() & Word::kMissed) == 0) return false;
    if (claimed_by_all().fetch_add(bytes, std::memory_order_relaxed) + bytes > kAllBytes) {
      claimed_by_all().fetch_sub(bytes, std::memory_order_relaxed);
      return false;
    }
    held_limits_ += bytes;
    bin.store((bin.load() + Word::kOneLimit) & ~Word::kMissed);
    return true;
  }

  template <class GiveBack>
  void empty(unsigned c, GiveBack& give_back) {
    Word& bin = words_[c];
    if (bin.load_count() != 0) give_back(slots_[c].data(), bin.load_count());
    const std::size_t bytes = std::size_t{bin.limit()} * MediumClasses::bytes(c);
    claimed_by_all().fetch_sub(bytes, std::memory_order_relaxed);
    held_limits_ -= bytes;
    bin.store(bin.load() & Word::kUsesOnly);  // count and limit 0
  }

  static constexpr unsigned kBins = kClasses == 0 ? 1 : kClasses;
  std::array<Word, kBins> words_{};
  std::array<std::array<void*, kSlots>, kBins> slots_{};
  std::array<std::uint32_t, kBins> uses_seen_{};  // each bin's uses at trim_idle's last look
  std::size_t held_limits_ = 0;                   // sum over bins of limit * class bytes, claimed
  unsigned starved_ = 0;                          // starved pushes since starved_look's last look
};

}  // namespace pagemalloc
