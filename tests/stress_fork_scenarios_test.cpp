// Fork scenarios that hang an allocator whose fork handlers take their locks in the wrong
// order or cannot be re-entered (modelled on glibc's own tests tst-malloc-fork-deadlock and
// tst-mallocfork2, in the GNU C Library's malloc/ directory, https://sourceware.org/glibc/):
//
//   StdioFlushWhileForking   threads write to stdio streams and call fflush(NULL), whose
//                            writes allocate, while the main thread forks 100 times: the
//                            forking thread must not hold the heap's locks while it waits for
//                            the stdio list's lock that a flushing thread holds
//   SignalHandlerForksWhileForking
//                            a single-threaded process forks 100 times while a timer's signal
//                            handler forks too, often inside the first fork's handlers
//   SignalHandlerForksWhileAllocating
//                            a single-threaded process allocates and frees while the handler
//                            forks (tst-mallocfork2): the handler's fork must not wait for a
//                            lock the interrupted allocation holds
//
// Each scenario runs in a child of the test process under an alarm, so that a hang ends as
// SIGALRM and fails the test instead of stalling the suite. The streams are fopencookie
// streams whose write function allocates with pm_malloc (blocks above the small sizes, which
// take an arena's lock), so the scenario reaches pagemalloc's locks both in the Release tree
// and under ThreadSanitizer, where the C library's own allocations do not.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kForks = 100;
constexpr unsigned kScenarioAlarmSeconds = 60;
// A block above the small sizes: allocating it takes the thread's arena's lock.
constexpr std::size_t kLockingSize = 64 * 1024;

// Runs scenario() in a child under an alarm; the child's exit code is the scenario's result.
// The child allocates first, so that the heap (and its fork handlers) is set up before the
// scenario's first fork.
template <class Scenario>
void run_in_child(Scenario scenario) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(kScenarioAlarmSeconds);
    pm_free(pm_malloc(kLockingSize));
    ::_exit(scenario());
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  if (WIFSIGNALED(status)) {
    FAIL() << "the scenario died of signal " << WTERMSIG(status)
           << (WTERMSIG(status) == SIGALRM ? " (the alarm: it hung)" : "");
  }
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the scenario's check number that failed";
}

bool churn_locking_block() {
  auto* p = static_cast<unsigned char*>(pm_malloc(kLockingSize));
  if (p == nullptr) return false;
  p[0] = 1;
  p[kLockingSize - 1] = 2;
  const bool ok = p[0] == 1 && p[kLockingSize - 1] == 2;
  pm_free(p);
  return ok;
}

// A stdio stream whose writes allocate and free through pagemalloc.
ssize_t allocating_write(void* failures, const char* data, size_t size) {
  auto* copy = static_cast<char*>(pm_malloc(size + kLockingSize));
  if (copy == nullptr) {
    static_cast<std::atomic<int>*>(failures)->fetch_add(1);
    return -1;
  }
  std::memcpy(copy, data, size);
  pm_free(copy);
  return ssize_t(size);
}

FILE* open_allocating_stream(std::atomic<int>& failures) {
  cookie_io_functions_t io{};
  io.write = &allocating_write;
  return ::fopencookie(&failures, "w", io);
}

// Forks, has the child allocate and free, and waits for it; nonzero on a failed check.
int fork_and_allocate_in_child() {
  const pid_t pid = ::fork();
  if (pid < 0) return 1;
  if (pid == 0) ::_exit(churn_locking_block() && churn_locking_block() ? 0 : 1);
  int status = 0;
  // A SIGCHLD left at SIG_IGN reaps the child itself: then waitpid fails with ECHILD once the
  // child has exited, and there is no status to read.
  pid_t waited = 0;
  do waited = ::waitpid(pid, &status, 0);
  while (waited < 0 && errno == EINTR);
  if (waited != pid) return errno == ECHILD ? 0 : 2;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 3;
}

TEST(ForkScenarios, StdioFlushWhileForking) {
  run_in_child([] {
    std::atomic<bool> stop{false};
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&] {
        FILE* stream = open_allocating_stream(failures);
        if (stream == nullptr) failures.fetch_add(1);
        for (unsigned i = 0; stream != nullptr && !stop.load(std::memory_order_relaxed); ++i) {
          std::fprintf(stream, "line %u\n", i);
          std::fflush(nullptr);  // holds the stdio list's lock while the stream allocates
        }
        if (stream != nullptr) std::fclose(stream);
      });
    }
    threads.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed))
        if (!churn_locking_block()) failures.fetch_add(1);
    });
    int result = 0;
    for (int i = 0; i < kForks && result == 0; ++i) result = fork_and_allocate_in_child();
    stop.store(true);
    for (std::thread& t : threads) t.join();
    return result != 0 ? 10 + result : failures.load() != 0 ? 20 : 0;
  });
}

// Signals from a timer every 500 microseconds (a fork takes a few hundred: many land inside one); the handler forks, and its child exits at once.
class ForkingSignalHandler {
 public:
  ForkingSignalHandler() {
    ::signal(SIGCHLD, SIG_IGN);  // the handler's children are reaped by the kernel
    struct sigaction action{};
    action.sa_handler = &on_signal;
    action.sa_flags = SA_RESTART;
    ::sigaction(SIGUSR1, &action, nullptr);
    sigevent event{};
    event.sigev_notify = SIGEV_SIGNAL;
    event.sigev_signo = SIGUSR1;
    ok_ = ::timer_create(CLOCK_MONOTONIC, &event, &timer_) == 0;
    itimerspec period{{0, 500'000}, {0, 500'000}};
    ok_ = ok_ && ::timer_settime(timer_, 0, &period, nullptr) == 0;
  }
  ~ForkingSignalHandler() {
    if (ok_) ::timer_delete(timer_);
  }
  [[nodiscard]] bool ok() const { return ok_; }
  static int forks() { return forks_; }

 private:
  static void on_signal(int) {
    const int saved_errno = errno;
    if (::fork() == 0) ::_exit(0);
    forks_ = forks_ + 1;
    errno = saved_errno;
  }

  static inline volatile sig_atomic_t forks_ = 0;
  timer_t timer_{};
  bool ok_ = false;
};

TEST(ForkScenarios, SignalHandlerForksWhileForking) {
  run_in_child([] {
    ForkingSignalHandler handler;
    if (!handler.ok()) return 1;
    for (int i = 0; i < kForks; ++i)
      if (const int failed = fork_and_allocate_in_child()) return 10 + failed;
    return ForkingSignalHandler::forks() > 0 ? 0 : 2;
  });
}

TEST(ForkScenarios, SignalHandlerForksWhileAllocating) {
  run_in_child([] {
    ForkingSignalHandler handler;
    if (!handler.ok()) return 1;
    for (long i = 0; ForkingSignalHandler::forks() < kForks; ++i) {
      void* small = pm_malloc(std::size_t(16 + i % 512));
      if (small == nullptr || !churn_locking_block()) return 3;
      pm_free(small);
    }
    return 0;
  });
}

}  // namespace
