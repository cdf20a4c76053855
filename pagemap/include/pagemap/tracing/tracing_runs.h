// TracingRuns<Inner>: a run manager that forwards every call to `Inner` and records it, so
// that the run-manager calls of a real program can be replayed through every variant
// (benchmarks/trace_replay.cpp) with everything else of the allocator taken away.
//
// Built into the library with -DPAGEMALLOC_TRACE_RUNS=ON (allocator/src/build_config.h.in wraps the
// selected variant). At run time the environment variable PAGEMALLOC_TRACE names the file;
// "%p" in it becomes the process id, so that a program that starts others (a compiler driver,
// a shell) leaves one trace per process. Unset: nothing is recorded. For example:
//
//   PAGEMALLOC_TRACE=/tmp/py.%p.trace LD_PRELOAD=.../libpagemalloc.so python3 script.py
//
// The file is a sequence of 32-byte TraceRecords in the machine's byte order. The first is the
// file's header (op Header, instance 0, run_base kTraceMagic, argument kTraceVersion, result
// the process id). Each run manager (`instance`, from 1, in the order of their first calls)
// introduces itself before its first call with a Header record of its own instance: run_pages
// its variant's first run page (the chunk header's length), argument the variant's name (up to
// 8 characters, zero-padded). Every other record is one call. The file is created
// exclusively: if it exists already, this process records nothing and says so once on stderr.
//
// This code runs inside malloc, so it allocates nothing and uses no stdio: the file is opened
// with open(2) at the first call, records collect in a static buffer that write(2) empties when
// it is full and at exit (the destructor of a static, registered when the library is loaded;
// calls after it are written one by one). The allocator calls a run manager with its arena's
// lock held, so calls to one instance are serialized, but several arenas share the buffer: a
// spin lock (std::atomic_flag) guards it. After a fork without exec, the child records
// nothing: its records would extend the parent's trace with another process's calls.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "pagemap/counters.h"
#include "pagemap/pages.h"
#include "pagemap/run_manager.h"

namespace pagemalloc {

enum class TraceOp : std::uint8_t {
  Header = 0,
  Alloc = 1,
  Free = 2,
  GrowInPlace = 3,
  ShrinkInPlace = 4,
  TrimHead = 5,
  Purge = 6,
  AdvanceClock = 7,
  PurgeOldest = 8,
};
inline constexpr std::uint8_t kTraceOpCount = 9;

inline constexpr std::uint64_t kTraceMagic = 0x31'45'43'41'52'54'4d'50;  // "PMTRACE1", LE
inline constexpr std::uint64_t kTraceVersion = 2;

// One call. Which fields mean what, by op:
//
//   op             run_base, run_pages            argument       result
//   Header         0, the first run page          variant name   -       (instance != 0)
//   Alloc          the run returned (0: failed)   n (pages)      1 if the run reads as zero
//   Free           the run freed                  -              -
//   GrowInPlace    the run before the call        n (pages)      1 grown, 0 left unchanged
//   ShrinkInPlace  the run before the call        n (pages)      -
//   TrimHead       the run before the call        n (pages)      -
//   Purge          -                              min age (ms)   pages purged
//   AdvanceClock   -                              now (ms)       -
//   PurgeOldest    -                              n (pages)      pages purged
//
// A run is named by the address of its first page (chunk base + first page * page size).
struct TraceRecord {
  TraceOp op;
  std::uint8_t reserved;
  std::uint16_t instance;  // the run manager called, from 1
  std::uint32_t run_pages;
  std::uint64_t run_base;
  std::uint64_t argument;
  std::uint64_t result;
};
static_assert(sizeof(TraceRecord) == 32);

// The process's trace file and its buffer.
class TraceLog {
 public:
  constexpr TraceLog() = default;
  TraceLog(const TraceLog&) = delete;
  TraceLog& operator=(const TraceLog&) = delete;

  // At exit: writes what is buffered; later records are written as they come.
  ~TraceLog() {
    lock();
    write_buffer();
    write_through_ = true;
    unlock();
  }

  std::uint16_t new_instance() { return ++instances_; }

  // Leaves errno as it was: the program sees malloc, not the trace's system calls.
  void append(const TraceRecord& record) {
    const int saved_errno = errno;
    lock();
    if (state_ == State::Unopened) open_file();
    if (state_ == State::Open) {
      buffer_[buffered_++] = record;
      if (buffered_ == kBufferRecords || write_through_) write_buffer();
    }
    unlock();
    errno = saved_errno;
  }

 private:
  enum class State : std::uint8_t { Unopened, Open, Off };
  static constexpr std::size_t kBufferRecords = 4096;  // 128 KiB
  static constexpr std::size_t kPathBytes = 4096;

  void lock() {
    while (lock_.test_and_set(std::memory_order_acquire)) {
      while (lock_.test(std::memory_order_relaxed)) {
      }
    }
  }
  void unlock() { lock_.clear(std::memory_order_release); }

  // Requires: the lock held.
  void open_file() {
    state_ = State::Off;
    const char* pattern = std::getenv("PAGEMALLOC_TRACE");
    if (pattern == nullptr || *pattern == '\0') return;
    pid_ = ::getpid();
    char path[kPathBytes];
    if (!expand_path(pattern, pid_, path)) {
      complain("pagemalloc: PAGEMALLOC_TRACE is too long; not tracing\n", "");
      return;
    }
    fd_ = ::open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      complain(errno == EEXIST ? "pagemalloc: the trace file exists, not tracing: "
                               : "pagemalloc: cannot create the trace file, not tracing: ",
               path);
      return;
    }
    state_ = State::Open;
    buffer_[buffered_++] = TraceRecord{
        TraceOp::Header, 0, 0, 0, kTraceMagic, kTraceVersion, static_cast<std::uint64_t>(pid_)};
  }

  // Requires: the lock held.
  void write_buffer() {
    if (state_ != State::Open) return;
    if (::getpid() != pid_) {  // a forked child: the parent writes these records
      ::close(fd_);
      state_ = State::Off;
      buffered_ = 0;
      return;
    }
    const auto* bytes = reinterpret_cast<const char*>(buffer_);
    std::size_t left = buffered_ * sizeof(TraceRecord);
    while (left > 0) {
      const ssize_t written = ::write(fd_, bytes, left);
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) {
        complain("pagemalloc: writing the trace failed; it ends here\n", "");
        ::close(fd_);
        state_ = State::Off;
        break;
      }
      bytes += written;
      left -= static_cast<std::size_t>(written);
    }
    buffered_ = 0;
  }

  // `pattern` with every "%p" replaced by the process id, into `out`; false if too long.
  static bool expand_path(const char* pattern, pid_t pid, char (&out)[kPathBytes]) {
    char digits[24];
    std::size_t ndigits = 0;
    for (auto value = static_cast<std::uint64_t>(pid); ndigits == 0 || value != 0; value /= 10)
      digits[ndigits++] = static_cast<char>('0' + value % 10);
    std::size_t length = 0;
    for (const char* c = pattern; *c != '\0'; ++c) {
      if (c[0] == '%' && c[1] == 'p') {
        for (std::size_t i = ndigits; i-- > 0;) {
          if (length + 1 >= kPathBytes) return false;
          out[length++] = digits[i];
        }
        ++c;
      } else {
        if (length + 1 >= kPathBytes) return false;
        out[length++] = *c;
      }
    }
    out[length] = '\0';
    return true;
  }

  static void complain(std::string_view what, std::string_view path) {
    [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, what.data(), what.size());
    if (!path.empty()) {
      ignored = ::write(STDERR_FILENO, path.data(), path.size());
      ignored = ::write(STDERR_FILENO, "\n", 1);
    }
  }

  std::atomic_flag lock_;  // clear: C++20 value-initializes atomic_flag
  State state_ = State::Unopened;
  bool write_through_ = false;  // after the exit-time write
  int fd_ = -1;
  pid_t pid_ = 0;  // the process that opened the file
  std::atomic<std::uint16_t> instances_ = 0;
  std::size_t buffered_ = 0;
  TraceRecord buffer_[kBufferRecords] = {};
};

// The one trace log of the process (constant-initialized: usable before any constructor ran).
inline constinit TraceLog g_trace_log;

template <RunManager Inner>
class TracingRuns {
 public:
  static constexpr auto kName = Inner::kName;
  using Traced = Inner;

  template <class P>
  constexpr explicit TracingRuns(P& pal) : inner_(pal) {}

  AllocatedRun alloc(PageCount n) {
    const AllocatedRun result = inner_.alloc(n);
    record(TraceOp::Alloc, result.run, n.value(), result.zeroed ? 1 : 0);
    return result;
  }

  void free(Run run) {
    inner_.free(run);
    record(TraceOp::Free, run, 0, 0);
  }

  bool grow_in_place(Run run, PageCount n) {
    const bool grown = inner_.grow_in_place(run, n);
    record(TraceOp::GrowInPlace, run, n.value(), grown ? 1 : 0);
    return grown;
  }

  void shrink_in_place(Run run, PageCount n) {
    inner_.shrink_in_place(run, n);
    record(TraceOp::ShrinkInPlace, run, n.value(), 0);
  }

  void trim_head(Run run, PageCount n) {
    inner_.trim_head(run, n);
    record(TraceOp::TrimHead, run, n.value(), 0);
  }

  constexpr void set_dirty_runs_first(bool on) { inner_.set_dirty_runs_first(on); }

  void advance_clock(std::uint64_t now_ms) {
    inner_.advance_clock(now_ms);
    record(TraceOp::AdvanceClock, Run{}, now_ms, 0);
  }

  PageCount purge(std::uint64_t min_age_ms) {
    const PageCount purged = inner_.purge(min_age_ms);
    record(TraceOp::Purge, Run{}, min_age_ms, purged.value());
    return purged;
  }

  PageCount purge_oldest(PageCount at_least) {
    const PageCount purged = inner_.purge_oldest(at_least);
    record(TraceOp::PurgeOldest, Run{}, at_least.value(), purged.value());
    return purged;
  }

  // A wrapped run manager's search for an allocated run's length, not recorded (a lookup).
  PageCount pages_of(const void* base) requires requires(Inner& inner) { inner.pages_of(base); }
  { return inner_.pages_of(base); }

  [[nodiscard]] PageCount free_pages() const { return inner_.free_pages(); }
  [[nodiscard]] PageCount dirty_pages() const { return inner_.dirty_pages(); }
  [[nodiscard]] std::size_t chunks() const { return inner_.chunks(); }
  [[nodiscard]] std::size_t record_bytes() const { return inner_.record_bytes(); }
  [[nodiscard]] const char* check_invariants() const { return inner_.check_invariants(); }
  [[nodiscard]] const RunCounterValues& counters() const { return inner_.counters(); }

 private:
  void record(TraceOp op, Run run, std::uint64_t argument, std::uint64_t result) {
    if (instance_ == 0) introduce();
    g_trace_log.append(TraceRecord{
        op, 0, instance_, static_cast<std::uint32_t>(run.pages.value()),
        run ? static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(run.base())) : 0,
        argument, result});
  }

  // The instance's Header record: which variant, and where its runs start in a chunk.
  void introduce() {
    instance_ = g_trace_log.new_instance();
    const std::string_view name = Inner::kName;
    std::uint64_t packed_name = 0;
    for (std::size_t i = 0; i < name.size() && i < sizeof packed_name; ++i)
      packed_name |= std::uint64_t(static_cast<unsigned char>(name[i])) << (8 * i);
    std::uint32_t first_run_page = 0;
    if constexpr (requires { Inner::Layout::kFirstRunPage; })
      first_run_page = static_cast<std::uint32_t>(Inner::Layout::kFirstRunPage.value());
    g_trace_log.append(
        TraceRecord{TraceOp::Header, 0, instance_, first_run_page, 0, packed_name, 0});
  }

  Inner inner_;
  std::uint16_t instance_ = 0;  // set at the first call; calls to one instance are serialized
};

}  // namespace pagemalloc
