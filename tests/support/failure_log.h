// A thread-safe record of failures seen by worker threads: they count every failure and keep
// the first message, and the main thread reports them once the workers are joined (googletest's
// assertions are meant for the main thread).
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <utility>

namespace pagemalloc::test {

class FailureLog {
 public:
  void record(std::string message) {
    if (count_.fetch_add(1) == 0) {
      std::lock_guard lock(mutex_);
      first_ = std::move(message);
    }
  }
  int count() const { return count_.load(); }
  std::string first() {
    std::lock_guard lock(mutex_);
    return first_;
  }

 private:
  std::atomic<int> count_{0};
  std::mutex mutex_;
  std::string first_;
};

}  // namespace pagemalloc::test
