// The unwinding behind capture_backtrace (backtrace.h).
#include "profile/backtrace.h"

#include <dlfcn.h>
#include <link.h>
#include <unwind.h>

#include <atomic>

namespace pagemalloc {
namespace {

// The executable range of the object this code lies in, found once; empty when that object is
// the program itself (the allocator linked in: the program's frames must stay).
struct CodeRange {
  std::uintptr_t begin = 0, end = 0;
};

struct RangeSearch {
  std::uintptr_t base;
  CodeRange found;
};

int find_segments(dl_phdr_info* info, std::size_t, void* context) {
  auto* search = static_cast<RangeSearch*>(context);
  if (info->dlpi_addr != search->base || info->dlpi_name == nullptr || info->dlpi_name[0] == 0)
    return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& h = info->dlpi_phdr[i];
    if (h.p_type != PT_LOAD || (h.p_flags & PF_X) == 0) continue;
    const std::uintptr_t begin = info->dlpi_addr + h.p_vaddr;
    if (search->found.begin == 0 || begin < search->found.begin) search->found.begin = begin;
    if (begin + h.p_memsz > search->found.end) search->found.end = begin + h.p_memsz;
  }
  return 1;
}

CodeRange own_code() {
  static constinit std::atomic<bool> known{false};
  static constinit CodeRange range{};
  if (!known.load(std::memory_order_acquire)) {
    Dl_info info{};
    RangeSearch search{0, {}};
    if (dladdr(reinterpret_cast<void*>(&capture_backtrace), &info) != 0)
      search.base = reinterpret_cast<std::uintptr_t>(info.dli_fbase);
    // dli_fbase is the load address of the object's first segment; dlpi_addr its bias, the
    // same for a shared object linked at 0.
    if (search.base != 0) dl_iterate_phdr(find_segments, &search);
    range = search.found;  // (two threads that race here store the same range)
    known.store(true, std::memory_order_release);
  }
  return range;
}

struct Walk {
  std::uintptr_t* pcs;
  unsigned max, count;
  CodeRange own;
  bool past_own;  // the first frame outside the allocator's code was seen
};

_Unwind_Reason_Code on_frame(_Unwind_Context* context, void* argument) {
  auto* walk = static_cast<Walk*>(argument);
  const std::uintptr_t pc = _Unwind_GetIP(context);
  if (pc == 0) return _URC_END_OF_STACK;
  if (!walk->past_own) {
    if (pc >= walk->own.begin && pc < walk->own.end) return _URC_NO_REASON;
    walk->past_own = true;
  }
  walk->pcs[walk->count++] = pc;
  return walk->count == walk->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

}  // namespace

unsigned capture_backtrace(std::uintptr_t* pcs, unsigned max) {
  Walk walk{pcs, max, 0, own_code(), false};
  if (walk.own.begin == walk.own.end) walk.past_own = true;
  if (max != 0) _Unwind_Backtrace(on_frame, &walk);
  return walk.count;
}

}  // namespace pagemalloc
