// Helpers of the fork scenario tests (stress_fork_scenarios_test.cpp, fork_signal_test.cpp,
// several_configs_test.cpp): a child waited for with a time limit, a scenario run in such a
// child, an allocation that takes an arena's lock, a fork whose child allocates, and a timer
// whose signal handler forks.
#pragma once

#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace fork_scenarios {

constexpr int kForks = 100;
constexpr int kScenarioSeconds = 60;
// A block above the small sizes: allocating it takes the thread's arena's lock.
constexpr std::size_t kLockingSize = 64 * 1024;

// Waits up to `seconds` for the child to exit, polling every millisecond. Returns waitpid's
// result (the child, or -1), with its status in *status; 0 when the child had not exited by
// then, and was killed and reaped.
inline pid_t wait_in_time(pid_t pid, int seconds, int* status) {
  for (int ms = 0; ms < seconds * 1000; ++ms) {
    if (const pid_t waited = ::waitpid(pid, status, WNOHANG); waited != 0) return waited;
    ::usleep(1000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, status, 0);
  return 0;
}

// Runs scenario() in a child; the child's exit code is the scenario's result. A child that has
// not finished after kScenarioSeconds is killed, and the test fails (the parent keeps the time:
// under ThreadSanitizer a signal to a thread blocked in a system call waits until it returns).
// The child allocates first, so that the heap (and its fork handlers) is set up before the
// scenario's first fork.
template <class Scenario>
inline void run_in_child(Scenario scenario) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    pm_free(pm_malloc(kLockingSize));
    ::_exit(scenario());
  }
  int status = 0;
  const pid_t waited = wait_in_time(pid, kScenarioSeconds, &status);
  if (waited == 0) FAIL() << "the scenario hung: killed after " << kScenarioSeconds << " s";
  ASSERT_EQ(waited, pid);
  if (WIFSIGNALED(status)) FAIL() << "the scenario died of signal " << WTERMSIG(status);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the scenario's check number that failed";
}

inline bool churn_locking_block() {
  auto* p = static_cast<unsigned char*>(pm_malloc(kLockingSize));
  if (p == nullptr) return false;
  p[0] = 1;
  p[kLockingSize - 1] = 2;
  const bool ok = p[0] == 1 && p[kLockingSize - 1] == 2;
  pm_free(p);
  return ok;
}

// Nanoseconds on the monotonic clock.
inline long long now_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1'000'000'000LL + t.tv_nsec;
}

// Forks, has the child allocate and free, and waits for it; nonzero on a failed check. When
// fork_ns is given, it receives how long fork() took in the parent.
inline int fork_and_allocate_in_child(long long* fork_ns = nullptr) {
  const long long start = now_ns();
  const pid_t pid = ::fork();
  if (fork_ns != nullptr) *fork_ns = now_ns() - start;
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

// Signals from a timer whose handler forks (its child exits at once). kRepeated: the handler
// arms the next signal 500 microseconds after its own fork returned, so that the interrupted
// code always runs between two (a fixed period would starve it wherever a fork takes longer
// than the period: 4 ms on some virtual machines). kArmedOnce: a signal only per arm_once(),
// for a loop that times each signal to land inside its own forks.
class ForkingSignalHandler {
 public:
  enum class Mode { kRepeated, kArmedOnce };
  explicit ForkingSignalHandler(Mode mode = Mode::kRepeated) {
    ::signal(SIGCHLD, SIG_IGN);  // the handler's children are reaped by the kernel
    struct sigaction action {};
    action.sa_handler = &on_signal;
    action.sa_flags = SA_RESTART;
    ::sigaction(SIGUSR1, &action, nullptr);
    sigevent event{};
    event.sigev_notify = SIGEV_SIGNAL;
    event.sigev_signo = SIGUSR1;
    ok_ = ::timer_create(CLOCK_MONOTONIC, &event, &timer_) == 0;
    repeated_ = mode == Mode::kRepeated;
    if (repeated_) ok_ = ok_ && arm_once(kRepeatNs);
  }
  // One signal delay_ns from now (at least 1 ns), replacing any one still due.
  // Async-signal-safe (timer_settime is).
  static bool arm_once(long long delay_ns) {
    if (delay_ns < 1) delay_ns = 1;
    itimerspec once{{0, 0}, {time_t(delay_ns / 1'000'000'000), long(delay_ns % 1'000'000'000)}};
    return ::timer_settime(timer_, 0, &once, nullptr) == 0;
  }
  ~ForkingSignalHandler() {
    if (ok_) {
      repeated_ = false;
      ::timer_delete(timer_);
    }
  }
  [[nodiscard]] bool ok() const { return ok_; }
  static int forks() { return forks_; }

 private:
  static constexpr long long kRepeatNs = 500'000;
  static void on_signal(int) {
    const int saved_errno = errno;
    if (::fork() == 0) ::_exit(0);
    forks_ = forks_ + 1;
    if (repeated_) arm_once(kRepeatNs);
    errno = saved_errno;
  }

  static inline volatile sig_atomic_t forks_ = 0;
  static inline volatile sig_atomic_t repeated_ = 0;
  static inline timer_t timer_{};
  bool ok_ = false;
};

}  // namespace fork_scenarios
