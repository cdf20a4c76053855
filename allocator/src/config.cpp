// Parsing of PAGEMALLOC_CONF without allocating: it runs on the first call to malloc, which
// may come from the dynamic loader before main.
#include "config.h"

#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "diagnostics.h"

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

void warn_entry(std::string_view what, std::string_view entry) {
  char buffer[256];
  auto r = fmt::format_to_n(buffer, sizeof(buffer), "PAGEMALLOC_CONF: {} '{}' ignored", what, entry);
  warn(std::string_view(buffer, std::min(r.size, sizeof(buffer))));
}

void apply_entry(std::string_view entry) {
  auto colon = entry.find(':');
  if (colon == std::string_view::npos) return warn_entry("entry without ':' in", entry);
  std::string_view key = entry.substr(0, colon), value = entry.substr(colon + 1);
  Options& o = options();
  bool b = false;
  long n = 0;
  if (key == "decay_ms" || key == "dirty_decay_ms") {
    if (!parse_long(value, n) || n < -1) return warn_entry("bad value in", entry);
    o.decay_ms = n;
  } else if (key == "checks" || key == "stats_print" || key == "deterministic") {
    if (!parse_bool(value, b)) return warn_entry("bad value in", entry);
    (key == "checks" ? o.checks : key == "stats_print" ? o.stats_print : o.deterministic) = b;
  } else if (key == "thp") {
    if (value == "always") o.thp = HugePages::Always;
    else if (value == "never") o.thp = HugePages::Never;
    else if (value == "default") o.thp = HugePages::Default;
    else return warn_entry("bad value in", entry);
  } else if (key == "narenas") {
    if (!parse_long(value, n) || n < 1 || n > 1024) return warn_entry("bad value in", entry);
    o.narenas = n;
  } else {
    warn_entry("unknown key in", entry);
  }
}

}  // namespace

void apply_conf(std::string_view conf) {
  while (!conf.empty()) {
    auto comma = conf.find(',');
    std::string_view entry = conf.substr(0, comma);
    if (!entry.empty()) apply_entry(entry);
    if (comma == std::string_view::npos) break;
    conf.remove_prefix(comma + 1);
  }
}

void load_conf_from_environment_once() {
  if (g_conf_loaded.exchange(true)) return;
  if (const char* conf = std::getenv("PAGEMALLOC_CONF")) apply_conf(conf);
}

}  // namespace pagemalloc
