// What the cross-thread benchmark programs share: their NAME=VALUE arguments, a seeded random
// generator, blocks that carry a tag the freeing thread checks, a bounded hand-off queue, and
// failing loudly.
//
// Each program is a plain executable calling malloc/free (no pm_* calls), so that the study
// (tools/study/cross_thread.py) can put any allocator under it with LD_PRELOAD. A program takes
// its scale from arguments such as `threads=8 items=100000 seed=1` (every one optional, with
// its default and bounds shown by `--help`), does a fixed amount of work, checks every block
// it frees and its totals, prints one summary line and exits 0; it exits 1 when a check fails
// and 2 on a bad argument (unknown name, not a number, out of bounds), saying which.
#ifndef PAGEMALLOC_BENCHMARKS_CROSS_THREAD_WORKLOAD_SUPPORT_H
#define PAGEMALLOC_BENCHMARKS_CROSS_THREAD_WORKLOAD_SUPPORT_H

#include <fmt/core.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace pagemalloc::cross_thread {

// A failed check: the program's result would be wrong, so it stops with status 1.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  fmt::print(stderr, "check failed: {}\n", fmt::format(format, std::forward<Args>(args)...));
  std::fflush(stderr);
  std::_Exit(1);
}

// One NAME=VALUE argument of a program: its default and the values it accepts.
struct Parameter {
  std::string_view name;
  std::uint64_t value;
  std::uint64_t least;
  std::uint64_t most;
  std::string_view meaning;
};

class Arguments {
 public:
  // Reads argv against the parameters (defaults first); exits 2 with a message on a bad
  // argument, 0 after printing the usage for --help.
  Arguments(int argc, char** argv, std::string_view summary, std::initializer_list<Parameter> known)
      : parameters_(known) {
    for (int i = 1; i < argc; ++i) {
      std::string_view text = argv[i];
      if (text == "--help" || text == "-h") {
        usage(argv[0], summary, stdout);
        std::exit(0);
      }
      auto equals = text.find('=');
      if (equals == std::string_view::npos) {
        refuse(argv[0], summary, fmt::format("expected NAME=VALUE, got '{}'", text));
      }
      set(argv[0], summary, text.substr(0, equals), text.substr(equals + 1));
    }
  }

  std::uint64_t operator[](std::string_view name) const {
    for (const auto& parameter : parameters_) {
      if (parameter.name == name) return parameter.value;
    }
    fail("no parameter named {}", name);
  }

  // "name=value ..." of every parameter: the summary line says what was run.
  std::string describe() const {
    std::string out;
    for (const auto& parameter : parameters_) {
      out += fmt::format("{}{}={}", out.empty() ? "" : " ", parameter.name, parameter.value);
    }
    return out;
  }

 private:
  void set(const char* program, std::string_view summary, std::string_view name,
           std::string_view text) {
    for (auto& parameter : parameters_) {
      if (parameter.name != name) continue;
      std::uint64_t value = 0;
      auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (error != std::errc{} || end != text.data() + text.size() || text.empty()) {
        refuse(program, summary, fmt::format("{}: '{}' is not a whole number", name, text));
      }
      if (value < parameter.least || value > parameter.most) {
        refuse(program, summary,
               fmt::format("{}={} is out of bounds [{}, {}]", name, value, parameter.least,
                           parameter.most));
      }
      parameter.value = value;
      return;
    }
    refuse(program, summary, fmt::format("unknown parameter '{}'", name));
  }

  [[noreturn]] void refuse(const char* program, std::string_view summary,
                           const std::string& reason) const {
    fmt::print(stderr, "{}: {}\n", program, reason);
    usage(program, summary, stderr);
    std::exit(2);
  }

  void usage(const char* program, std::string_view summary, std::FILE* out) const {
    fmt::print(out, "usage: {} [NAME=VALUE]...\n{}\n", program, summary);
    for (const auto& parameter : parameters_) {
      fmt::print(out, "  {:<10} {} (default {}, {}..{})\n", parameter.name, parameter.meaning,
                 parameter.value, parameter.least, parameter.most);
    }
  }

  std::vector<Parameter> parameters_;
};

// splitmix64: a small, fast, seedable generator; every thread owns one.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ULL + 1) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [least, most].
  std::uint64_t between(std::uint64_t least, std::uint64_t most) {
    return least + next() % (most - least + 1);
  }
  // Uniform in [0, 1).
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  std::uint64_t state_;
};

// The tag a block of `size` bytes carries: written by the allocating thread at its start, at
// the start of every further 4 KiB page (so every page of the block is touched, as a program
// that uses its memory would) and, from 16 bytes on, in its last 8 bytes; checked by the
// freeing thread.
inline std::uint64_t tag_of(std::uint64_t identity, std::size_t size) {
  return (identity * 0xD6E8FEB86659FD93ULL) ^ (size << 1) ^ 0x5bd1e995ULL;
}

inline constexpr std::size_t page_stride = 4096;
inline constexpr std::size_t least_block = 8;

// Where the trailing copy of the tag goes: the last 8 bytes, or nowhere (= size) in a block
// under 16 bytes, whose only copy is at its start. The page copies stop before it.
inline std::size_t trailer_offset(std::size_t size) {
  return size >= 2 * sizeof(std::uint64_t) ? size - sizeof(std::uint64_t) : size;
}

inline void* allocate_tagged(std::size_t size, std::uint64_t identity) {
  if (size < least_block) fail("block of {} bytes is below the {}-byte minimum", size, least_block);
  auto* block = static_cast<unsigned char*>(std::malloc(size));
  if (block == nullptr) fail("malloc({}) returned NULL", size);
  const std::uint64_t tag = tag_of(identity, size);
  const std::size_t trailer = trailer_offset(size);
  for (std::size_t offset = 0; offset + sizeof tag <= trailer; offset += page_stride) {
    std::memcpy(block + offset, &tag, sizeof tag);
  }
  if (trailer < size) std::memcpy(block + trailer, &tag, sizeof tag);
  return block;
}

// Checks the tag of a block allocated by allocate_tagged(size, identity), then frees it.
inline void check_and_free(void* pointer, std::size_t size, std::uint64_t identity) {
  auto* block = static_cast<unsigned char*>(pointer);
  const std::uint64_t tag = tag_of(identity, size);
  const std::size_t trailer = trailer_offset(size);
  std::uint64_t seen = 0;
  for (std::size_t offset = 0; offset + sizeof tag <= trailer; offset += page_stride) {
    std::memcpy(&seen, block + offset, sizeof seen);
    if (seen != tag) fail("block {} ({} bytes) corrupted at offset {}", identity, size, offset);
  }
  if (trailer < size) {
    std::memcpy(&seen, block + trailer, sizeof seen);
    if (seen != tag) fail("block {} ({} bytes) corrupted in its last 8 bytes", identity, size);
  }
  std::free(pointer);
}

// A block as it travels between threads.
struct Block {
  void* pointer = nullptr;
  std::size_t size = 0;
  std::uint64_t identity = 0;
};

// A bounded first-in-first-out hand-off between threads (mutex and condition variables, as a
// plain program would write it): push waits while `capacity` items are queued, take_all waits
// for at least one item or for close(). It wakes a waiting side only when the other could be
// waiting (queue was empty, or full), so that the queue's own futex calls stay few.
template <typename Item>
class BoundedQueue {
 public:
  explicit BoundedQueue(std::size_t capacity) : capacity_(capacity) {}

  void push(Item item) {
    std::unique_lock lock(mutex_);
    not_full_.wait(lock, [&] { return items_.size() < capacity_; });
    items_.push_back(std::move(item));
    if (items_.size() == 1) not_empty_.notify_one();  // a waiting consumer saw it empty
  }

  // Moves every queued item into `out` (emptied first); false once closed and drained.
  bool take_all(std::vector<Item>& out) {
    out.clear();
    std::unique_lock lock(mutex_);
    not_empty_.wait(lock, [&] { return !items_.empty() || closed_; });
    if (items_.empty()) return false;
    bool was_full = items_.size() >= capacity_;  // only then can producers be waiting
    out.assign(std::make_move_iterator(items_.begin()), std::make_move_iterator(items_.end()));
    items_.clear();
    if (was_full) not_full_.notify_all();
    return true;
  }

  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    not_empty_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<Item> items_;
  std::size_t capacity_;
  bool closed_ = false;
};

// A mailbox without a bound: any thread drops items in, its owner takes them all at once
// without waiting (rptest's and the oversubscribed program's hand-off).
template <typename Item>
class Mailbox {
 public:
  void post(std::vector<Item>& items) {
    std::lock_guard lock(mutex_);
    items_.insert(items_.end(), items.begin(), items.end());
    items.clear();
  }
  // Posts only while the mailbox holds at most `limit` items with these added; false (and the
  // items left with the caller) otherwise.
  bool post_within(std::vector<Item>& items, std::size_t limit) {
    std::lock_guard lock(mutex_);
    if (items_.size() + items.size() > limit) return false;
    items_.insert(items_.end(), items.begin(), items.end());
    items.clear();
    return true;
  }
  void take_all(std::vector<Item>& out) {
    out.clear();
    std::lock_guard lock(mutex_);
    out.swap(items_);
  }

 private:
  std::mutex mutex_;
  std::vector<Item> items_;
};

// Posts `items` to `to` once it holds at most `limit` items with them (limit >= items.size());
// while it is too full, frees what waits in the sender's own mailbox (`release` for each item)
// and yields. So every item is handed over, a receiver that has not run for a while slows its
// senders down instead of letting memory grow, and a ring of threads waiting for each other
// cannot stall: each one empties its own mailbox while it waits.
template <typename Item, typename Release>
void post_when_room(Mailbox<Item>& to, Mailbox<Item>& own, std::vector<Item>& items,
                    std::size_t limit, Release release) {
  std::vector<Item> received;
  while (!to.post_within(items, limit)) {
    own.take_all(received);
    for (auto& item : received) release(item);
    std::this_thread::yield();
  }
}

// The end of a thread that other threads post to: it counts itself finished, then keeps
// freeing what arrives (`release` for each item, every millisecond) until every thread has
// finished, and once more after that. Blocks posted by a thread that is still working are so
// freed soon, not kept until the process ends: the memory in flight stays bounded.
template <typename Item, typename Release>
void drain_until_all_finished(Mailbox<Item>& mailbox, std::atomic<std::size_t>& finished,
                              std::size_t threads, Release release) {
  std::vector<Item> received;
  finished.fetch_add(1);
  for (;;) {
    bool last = finished.load() == threads;
    mailbox.take_all(received);
    for (auto& item : received) release(item);
    if (last) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// After every worker has joined: checks and frees the blocks still waiting in the mailboxes;
// returns how many there were.
inline std::uint64_t free_what_is_left(std::vector<std::unique_ptr<Mailbox<Block>>>& mailboxes) {
  std::vector<Block> left;
  std::uint64_t count = 0;
  for (auto& mailbox : mailboxes) {
    mailbox->take_all(left);
    for (const Block& block : left) check_and_free(block.pointer, block.size, block.identity);
    count += left.size();
  }
  return count;
}

}  // namespace pagemalloc::cross_thread

#endif  // PAGEMALLOC_BENCHMARKS_CROSS_THREAD_WORKLOAD_SUPPORT_H
