// pm_stats_print is not a cancellation point, as glibc's malloc_stats is not (its test
// tst-malloc-stats-cancellation): a thread that has asked for its own cancellation (deferred,
// the default type) and then prints the statistics gets the whole text written and the call
// back, with its cancellation state as before; the request acts at the thread's next
// cancellation point, pthread_testcancel. A thread that had disabled cancellation itself finds
// it still disabled after the call. tests/dropin/reports_under_cancellation.sh checks the
// drop-in's malloc_stats and malloc_info the same way.
#include <gtest/gtest.h>

#include <pagemalloc/pagemalloc.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace {

// What the printing thread did, read by the test once it has joined the thread.
struct Outcome {
  int fd = -1;
  int json = 0;
  bool disable_first = false;  // the thread disables cancellation itself before printing
  bool returned = false;
  int state_after = -1;
  bool past_testcancel = false;
};

void* print_with_cancellation_pending(void* argument) {
  auto* outcome = static_cast<Outcome*>(argument);
  int ignored;
  if (outcome->disable_first) pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &ignored);
  pthread_cancel(pthread_self());
  pm_stats_print(outcome->fd, outcome->json);
  outcome->returned = true;
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &outcome->state_after);
  pthread_testcancel();
  outcome->past_testcancel = true;
  return nullptr;
}

// Runs the printing thread on `outcome` and returns what it joined with.
void* run_printing_thread(Outcome& outcome) {
  pthread_t thread;
  EXPECT_EQ(pthread_create(&thread, nullptr, print_with_cancellation_pending, &outcome), 0);
  void* joined = nullptr;
  EXPECT_EQ(pthread_join(thread, &joined), 0);
  return joined;
}

// Everything written to the temporary file behind fd.
std::string file_text(int fd) {
  std::string text;
  char buffer[4096];
  ssize_t n;
  for (off_t at = 0; (n = pread(fd, buffer, sizeof(buffer), at)) > 0; at += n) {
    text.append(buffer, std::size_t(n));
  }
  return text;
}

class StatsPrintUnderCancellation : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = std::tmpfile();
    ASSERT_NE(file_, nullptr);
    outcome_.fd = fileno(file_);
  }
  void TearDown() override {
    if (file_ != nullptr) std::fclose(file_);
  }

  std::FILE* file_ = nullptr;
  Outcome outcome_;
};

TEST_F(StatsPrintUnderCancellation, TextIsWrittenAndTheThreadCancelledAfter) {
  void* joined = run_printing_thread(outcome_);
  EXPECT_TRUE(outcome_.returned) << "cancelled in pm_stats_print";
  EXPECT_EQ(outcome_.state_after, PTHREAD_CANCEL_ENABLE);
  EXPECT_FALSE(outcome_.past_testcancel);
  EXPECT_EQ(joined, PTHREAD_CANCELED);
  const std::string text = file_text(outcome_.fd);
  EXPECT_EQ(text.rfind("pagemalloc statistics (run manager: ", 0), 0u) << text;
  EXPECT_NE(text.find(" ns of faults charged to it\n"), std::string::npos) << text;
}

TEST_F(StatsPrintUnderCancellation, JsonIsWrittenAndTheThreadCancelledAfter) {
  outcome_.json = 1;
  void* joined = run_printing_thread(outcome_);
  EXPECT_TRUE(outcome_.returned) << "cancelled in pm_stats_print";
  EXPECT_EQ(joined, PTHREAD_CANCELED);
  const std::string text = file_text(outcome_.fd);
  EXPECT_EQ(text.rfind("{\"runs\": ", 0), 0u) << text;
  EXPECT_EQ(text.substr(text.size() >= 2 ? text.size() - 2 : 0), "}\n") << text;
}

TEST_F(StatsPrintUnderCancellation, CancellationDisabledBeforeStaysDisabled) {
  outcome_.disable_first = true;
  void* joined = run_printing_thread(outcome_);
  EXPECT_TRUE(outcome_.returned);
  EXPECT_EQ(outcome_.state_after, PTHREAD_CANCEL_DISABLE);
  EXPECT_EQ(joined, PTHREAD_CANCELED);  // enabled again by the thread itself, after the call
  EXPECT_NE(file_text(outcome_.fd).find("pagemalloc statistics"), std::string::npos);
}

}  // namespace
