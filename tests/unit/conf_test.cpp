// PAGEMALLOC_CONF parsing (allocator/src/config.cpp): stats_print's three values, stats_file,
// narenas above the limit, background_thread, and warnings that name what is valid. End to end, in
// a program on the drop-in: tests/dropin/conf.sh.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "support/options.h"
#include "threads/automatic_arenas.h"

namespace {

static_assert(pagemalloc::kMaxNarenas == pagemalloc::AutomaticArenas::kMaxAutomaticArenas,
              "narenas' limit in config.h is the number of automatic arenas there can be");

class ConfParsing : public ::testing::Test {
 protected:
  void TearDown() override {
    auto& o = pagemalloc::options();
    o.stats_print = false;
    o.stats_json = false;
    o.stats_file[0] = '\0';
    o.narenas = saved_narenas_;
    o.ncpus = saved_ncpus_;
    o.background_thread = false;
  }
  static std::string apply(const char* conf) {
    ::testing::internal::CaptureStderr();
    pagemalloc::apply_conf(conf);
    return ::testing::internal::GetCapturedStderr();
  }
  long saved_narenas_ = pagemalloc::options().narenas.load();
  long saved_ncpus_ = pagemalloc::options().ncpus.load();
};

TEST_F(ConfParsing, StatsPrintTakesTrueFalseAndJson) {
  auto& o = pagemalloc::options();
  EXPECT_EQ(apply("stats_print:json"), "");
  EXPECT_TRUE(o.stats_print.load());
  EXPECT_TRUE(o.stats_json.load());
  EXPECT_EQ(apply("stats_print:true"), "");
  EXPECT_TRUE(o.stats_print.load());
  EXPECT_FALSE(o.stats_json.load());
  EXPECT_EQ(apply("stats_print:false"), "");
  EXPECT_FALSE(o.stats_print.load());
}

TEST_F(ConfParsing, ABadStatsPrintNamesTheValuesAndChangesNothing) {
  auto& o = pagemalloc::options();
  o.stats_print = true;
  const std::string out = apply("stats_print:yes");
  EXPECT_NE(out.find("PAGEMALLOC_CONF: bad value in 'stats_print:yes' ignored (stats_print "
                     "takes true, false or json)"),
            std::string::npos)
      << out;
  EXPECT_TRUE(o.stats_print.load());
  EXPECT_FALSE(o.stats_json.load());
}

TEST_F(ConfParsing, StatsFileKeepsThePathAndRefusesOneTooLong) {
  auto& o = pagemalloc::options();
  EXPECT_EQ(apply("stats_file:/tmp/heap.%p.json,stats_print:json"), "");
  EXPECT_STREQ(o.stats_file, "/tmp/heap.%p.json");
  const std::string long_path(pagemalloc::kStatsFileCapacity, 'x');
  const std::string out = apply(("stats_file:" + long_path).c_str());
  EXPECT_NE(out.find("(stats_file takes a path of 1 to 255 bytes)"), std::string::npos) << out;
  EXPECT_STREQ(o.stats_file, "/tmp/heap.%p.json");
  EXPECT_NE(apply("stats_file:").find("bad value in 'stats_file:'"), std::string::npos);
  EXPECT_STREQ(o.stats_file, "/tmp/heap.%p.json");
}

TEST_F(ConfParsing, NarenasAboveTheLimitIsWarnedAboutAndLowered) {
  auto& o = pagemalloc::options();
  const std::string out = apply("narenas:5000");
  EXPECT_NE(out.find("PAGEMALLOC_CONF: 'narenas:5000' is above the limit; using narenas:256"),
            std::string::npos)
      << out;
  EXPECT_EQ(o.narenas.load(), pagemalloc::kMaxNarenas);
  EXPECT_EQ(apply("narenas:256"), "");
  EXPECT_EQ(o.narenas.load(), 256);
  EXPECT_NE(apply("narenas:0").find("(narenas takes 1 to 256)"), std::string::npos);
  EXPECT_EQ(o.narenas.load(), 256);
}

TEST_F(ConfParsing, NcpusTakesOneTo4096AndRefusesTheRest) {
  auto& o = pagemalloc::options();
  EXPECT_EQ(apply("ncpus:64"), "");
  EXPECT_EQ(o.ncpus.load(), 64);
  for (const char* bad : {"ncpus:0", "ncpus:4097", "ncpus:-3", "ncpus:many", "ncpus:"}) {
    EXPECT_NE(apply(bad).find("(ncpus takes 1 to 4096)"), std::string::npos) << bad;
    EXPECT_EQ(o.ncpus.load(), 64) << bad << " changed the option";
  }
}

TEST_F(ConfParsing, BackgroundThreadTakesABoolean) {
  auto& o = pagemalloc::options();
  EXPECT_EQ(apply("background_thread:true"), "");
  EXPECT_TRUE(o.background_thread.load());
  EXPECT_NE(apply("background_thread:sometimes")
                .find("bad value in 'background_thread:sometimes' ignored (background_thread "
                      "takes true, false, 1 or 0)"),
            std::string::npos);
  EXPECT_TRUE(o.background_thread.load());
  EXPECT_EQ(apply("background_thread:0"), "");
  EXPECT_FALSE(o.background_thread.load());
}

TEST_F(ConfParsing, AnUnknownKeyNamesTheKeys) {
  const std::string out = apply("stat_print:true");
  EXPECT_NE(out.find("unknown key in 'stat_print:true' ignored (the keys are decay_ms, checks, "
                     "stats_print, stats_file, deterministic, narenas, ncpus, thp, thp_budget, "
                     "background_thread, populate, prof, prof_active, prof_sample, "
                     "lg_prof_sample, prof_prefix, prof_final, prof_interval, prof_interval_ms, "
                     "prof_leak)"),
            std::string::npos)
      << out;
}

// The heap profiler's options: each good value taken, each bad one warned about with what is
// valid and the option left as it was. (prof itself is not switched on here: the heap of this
// test program would start sampling.)
TEST_F(ConfParsing, TheProfilersOptionsTakeTheirValuesAndNameWhatIsValid) {
  auto& o = pagemalloc::options();
  const long sample = o.prof_sample.load();
  EXPECT_EQ(apply("prof_sample:4096,prof_active:false,prof_final:true,prof_prefix:/tmp/x"), "");
  EXPECT_EQ(o.prof_sample.load(), 4096);
  EXPECT_FALSE(o.prof_active.load());
  EXPECT_TRUE(o.prof_final.load());
  EXPECT_STREQ(o.prof_prefix, "/tmp/x");
  EXPECT_EQ(apply("lg_prof_sample:12"), "");
  EXPECT_EQ(o.prof_sample.load(), 4096);
  EXPECT_EQ(apply("prof_interval:1048576,prof_leak:true,prof_interval_ms:100"), "");
  EXPECT_EQ(o.prof_interval_ms.load(), 100);
  EXPECT_EQ(o.prof_interval.load(), 1048576);
  EXPECT_TRUE(o.prof_leak.load());
  const struct {
    const char* entry;
    const char* valid;
  } bad[] = {
      {"prof:maybe", "prof takes true, false, 1 or 0"},
      {"prof_active:on", "prof_active takes true, false, 1 or 0"},
      {"prof_sample:0", "prof_sample takes bytes, 1 or more"},
      {"prof_sample:12k", "prof_sample takes bytes, 1 or more"},
      {"lg_prof_sample:63", "lg_prof_sample takes 0 to 62"},
      {"prof_prefix:", "prof_prefix takes a path of 1 to 255 bytes"},
      {"prof_interval:-1", "prof_interval takes bytes, or 0 for none"},
      {"prof_interval:1G", "prof_interval takes bytes, or 0 for none"},
      {"prof_leak:2", "prof_leak takes true, false, 1 or 0"},
      {"prof_interval_ms:-3", "prof_interval_ms takes milliseconds, or 0 for none"},
  };
  for (const auto& b : bad) {
    const std::string out = apply(b.entry);
    EXPECT_NE(out.find(std::string("bad value in '") + b.entry + "' ignored (" + b.valid + ")"),
              std::string::npos)
        << out;
  }
  EXPECT_EQ(o.prof_sample.load(), 4096);
  EXPECT_FALSE(o.prof.load());
  EXPECT_STREQ(o.prof_prefix, "/tmp/x");
  EXPECT_EQ(o.prof_interval.load(), 1048576);
  EXPECT_TRUE(o.prof_leak.load());
  o.prof_interval = 0;
  o.prof_interval_ms = 0;
  o.prof_leak = false;
  o.prof_sample = sample;
  o.prof_active = true;
  o.prof_final = false;
  std::strcpy(o.prof_prefix, "pagemalloc");
}

TEST_F(ConfParsing, AnEntryWithoutAColonSaysHowEntriesLook) {
  const std::string out = apply("checks");
  EXPECT_NE(out.find("entry without ':' in 'checks' ignored (entries are key:value, separated "
                     "by ',')"),
            std::string::npos)
      << out;
}

}  // namespace
