// write_leak_report (leak_report.h).
#include "profile/leak_report.h"

#include <dlfcn.h>

#include "profile/profile_output.h"
#include "profile/sampling.h"

namespace pagemalloc {
namespace {

// A stack's live samples scaled to the blocks and bytes they stand for.
struct Estimate {
  double bytes = 0, blocks = 0;
};
Estimate estimate_of(const StackRecord& s, std::uint64_t mean) {
  if (s.live_count == 0) return {};
  const double per_block = sample_weight(std::size_t(s.live_bytes / s.live_count), mean);
  const double scale = per_block / (double(s.live_bytes) / double(s.live_count));
  return Estimate{double(s.live_bytes) * scale, double(s.live_count) * scale};
}

// (fmt formats no floating-point numbers in the library: support/format.h)
std::uint64_t rounded(double x) { return std::uint64_t(x + 0.5); }

// Orders stacks by the live bytes they stand for, then by address (a total order, so that each
// is listed once).
bool before(const StackRecord& a, const StackRecord& b, std::uint64_t mean) {
  const double x = estimate_of(a, mean).bytes, y = estimate_of(b, mean).bytes;
  return x != y ? x > y : &a < &b;
}

void print_frame(ProfileOutput& out, std::uintptr_t pc) {
  Dl_info info{};
  // A return address: the call is the byte before it.
  if (::dladdr(reinterpret_cast<void*>(pc - 1), &info) == 0) {
    out.print("    @ {:#x}\n", pc);
    return;
  }
  const char* object = info.dli_fname != nullptr ? info.dli_fname : "?";
  if (info.dli_sname != nullptr && info.dli_saddr != nullptr)
    out.print("    @ {:#x} {}+{:#x} ({})\n", pc, info.dli_sname,
              pc - reinterpret_cast<std::uintptr_t>(info.dli_saddr), object);
  else
    out.print("    @ {:#x} ({}+{:#x})\n", pc, object,
              pc - reinterpret_cast<std::uintptr_t>(info.dli_fbase));
}

}  // namespace

bool write_leak_report(int fd, std::uint64_t sample_mean, const StackTable& stacks) {
  std::uint64_t samples = 0, contexts = 0;
  Estimate all;
  stacks.for_each([&](const StackRecord& s) {
    if (s.live_count == 0) return;
    const Estimate e = estimate_of(s, sample_mean);
    all.bytes += e.bytes;
    all.blocks += e.blocks;
    samples += s.live_count;
    ++contexts;
  });
  ProfileOutput out(fd);
  out.print(
      "pagemalloc: prof_leak: about {} bytes in {} blocks live at exit, from {} call "
      "stacks ({} samples; prof_sample {})\n",
      rounded(all.bytes), rounded(all.blocks), contexts, samples, sample_mean);
  // The largest first: each pass finds the largest stack after the last one listed.
  const StackRecord* last = nullptr;
  for (unsigned listed = 0; listed < kMaxListedLeaks && listed < contexts; ++listed) {
    const StackRecord* next = nullptr;
    stacks.for_each([&](const StackRecord& s) {
      if (s.live_count == 0 || (last != nullptr && !before(*last, s, sample_mean))) return;
      if (next == nullptr || before(s, *next, sample_mean)) next = &s;
    });
    if (next == nullptr) break;
    const Estimate e = estimate_of(*next, sample_mean);
    out.print("Leak of about {} bytes in about {} blocks allocated from:\n", rounded(e.bytes),
              rounded(e.blocks));
    if (next->depth == 0) out.print("    (no frames: the profiler's stacks were full)\n");
    for (std::uint32_t i = 0; i < next->depth; ++i) print_frame(out, next->pcs[i]);
    last = next;
  }
  if (contexts > kMaxListedLeaks)
    out.print(
        "pagemalloc: prof_leak: {} smaller call stacks not listed (prof_final's profile "
        "has them all)\n",
        contexts - kMaxListedLeaks);
  return out.finish();
}

}  // namespace pagemalloc
