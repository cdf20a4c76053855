// Parsing of PAGEMALLOC_CONF without allocating: it runs on the first call to malloc, which
// may come from the dynamic loader before main.
#include "support/options.h"

#include <charconv>
#include <cstdlib>

#include "chunks/address_map.h"
#include "support/format.h"

#include "support/diagnostics.h"

namespace pagemalloc {
namespace {

bool parse_bool(std::string_view v, bool& out) {
  if (v == "true" || v == "1") return out = true, true;
  if (v == "false" || v == "0") return out = false, true;
  return false;
}

bool parse_long(std::string_view v, long& out) {
  auto [end, error] = std::from_chars(v.data(), v.data() + v.size(), out);
  return error == std::errc{} && end == v.data() + v.size();
}

constexpr std::string_view kKeys =
    "the keys are decay_ms, checks, stats_print, stats_file, deterministic, narenas, ncpus, "
    "thp, thp_budget, background_thread, populate, prof, prof_active, prof_sample, lg_prof_sample, "
    "prof_prefix, prof_final, prof_interval, prof_interval_ms, prof_leak";

// "PAGEMALLOC_CONF: <what> '<entry>' ignored (<valid>)", one line on stderr.
void warn_entry(std::string_view what, std::string_view entry, std::string_view valid) {
  char buffer[512];
  auto r = fmt::format_to_n(buffer, sizeof(buffer), "PAGEMALLOC_CONF: {} '{}' ignored ({})", what,
                            entry, valid);
  warn(std::string_view(buffer, std::min(r.size, sizeof(buffer))));
}

void apply_entry(std::string_view entry) {
  auto colon = entry.find(':');
  if (colon == std::string_view::npos)
    return warn_entry("entry without ':' in", entry, "entries are key:value, separated by ','");
  std::string_view key = entry.substr(0, colon), value = entry.substr(colon + 1);
  Options& o = options();
  bool b = false;
  long n = 0;
  if (key == "decay_ms" || key == "dirty_decay_ms") {
    if (!parse_long(value, n) || n < -1)
      return warn_entry("bad value in", entry, "decay_ms takes -1 (never), 0 or milliseconds");
    o.decay_ms = n;
  } else if (key == "checks" || key == "deterministic" || key == "background_thread" ||
             key == "populate" || key == "prof" || key == "prof_active" || key == "prof_final" ||
             key == "prof_leak") {
    if (!parse_bool(value, b)) {
      char valid[64];
      auto r = fmt::format_to_n(valid, sizeof(valid), "{} takes true, false, 1 or 0", key);
      return warn_entry("bad value in", entry, std::string_view(valid, r.size));
    }
    if (key == "checks") set_checks(b);
    else if (key == "populate") o.populate = b;
    else if (key == "prof") o.prof = b;
    else if (key == "prof_active") o.prof_active = b;
    else if (key == "prof_final") o.prof_final = b;
    else if (key == "prof_leak") o.prof_leak = b;
    else (key == "deterministic" ? o.deterministic : o.background_thread) = b;
  } else if (key == "stats_print") {
    if (value == "json") {
      o.stats_print = true;
      o.stats_json = true;
    } else if (parse_bool(value, b)) {
      o.stats_print = b;
      o.stats_json = false;
    } else {
      return warn_entry("bad value in", entry, "stats_print takes true, false or json");
    }
  } else if (key == "stats_file") {
    if (value.empty() || value.size() >= kStatsFileCapacity)
      return warn_entry("bad value in", entry, "stats_file takes a path of 1 to 255 bytes");
    value.copy(o.stats_file, value.size());
    o.stats_file[value.size()] = '\0';
  } else if (key == "prof_sample") {
    if (!parse_long(value, n) || n < 1)
      return warn_entry("bad value in", entry, "prof_sample takes bytes, 1 or more");
    o.prof_sample = n;
  } else if (key == "lg_prof_sample") {
    if (!parse_long(value, n) || n < 0 || n > 62)
      return warn_entry("bad value in", entry, "lg_prof_sample takes 0 to 62");
    o.prof_sample = 1L << n;
  } else if (key == "prof_interval") {
    if (!parse_long(value, n) || n < 0)
      return warn_entry("bad value in", entry, "prof_interval takes bytes, or 0 for none");
    o.prof_interval = n;
  } else if (key == "prof_interval_ms") {
    if (!parse_long(value, n) || n < 0)
      return warn_entry("bad value in", entry,
                        "prof_interval_ms takes milliseconds, or 0 for none");
    o.prof_interval_ms = n;
  } else if (key == "prof_prefix") {
    if (value.empty() || value.size() >= kProfPrefixCapacity)
      return warn_entry("bad value in", entry, "prof_prefix takes a path of 1 to 255 bytes");
    value.copy(o.prof_prefix, value.size());
    o.prof_prefix[value.size()] = '\0';
  } else if (key == "thp") {
    if (value == "auto") o.thp = HugePages::Auto;
    else if (value == "always") o.thp = HugePages::Always;
    else if (value == "never") o.thp = HugePages::Never;
    else if (value == "default") o.thp = HugePages::Default;
    else return warn_entry("bad value in", entry, "thp takes auto, always, never or default");
  } else if (key == "thp_budget") {
    if (!parse_long(value, n) || n < 0)
      return warn_entry("bad value in", entry,
                        "thp_budget takes 0 (no limit) or N (1/N of the run time)");
    o.thp_budget = n;
  } else if (key == "narenas") {
    if (!parse_long(value, n) || n < 1)
      return warn_entry("bad value in", entry, "narenas takes 1 to 256");
    if (n > kMaxNarenas) {
      char buffer[256];
      auto r = fmt::format_to_n(buffer, sizeof(buffer),
                                "PAGEMALLOC_CONF: '{}' is above the limit; using narenas:{}", entry,
                                kMaxNarenas);
      warn(std::string_view(buffer, std::min(r.size, sizeof(buffer))));
      n = kMaxNarenas;
    }
    o.narenas = n;
  } else if (key == "ncpus") {
    if (!parse_long(value, n) || n < 1 || n > kMaxNcpus)
      return warn_entry("bad value in", entry, "ncpus takes 1 to 4096");
    o.ncpus = n;
  } else {
    warn_entry("unknown key in", entry, kKeys);
  }
}

}  // namespace

void set_checks(bool on) {
  options().checks.store(on);
  g_ownership_changes.fetch_add(1, std::memory_order_acq_rel);
}

void apply_conf(std::string_view conf) {
  while (!conf.empty()) {
    auto comma = conf.find(',');
    std::string_view entry = conf.substr(0, comma);
    if (!entry.empty()) apply_entry(entry);
    if (comma == std::string_view::npos) break;
    conf.remove_prefix(comma + 1);
  }
}

}  // namespace pagemalloc
