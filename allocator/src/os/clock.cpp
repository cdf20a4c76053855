// The decay's clock: clock_gettime as the kernel's vDSO exports it, found once in the vDSO's
// symbol table. glibc's clock_gettime only calls that function, and lies in pages of libc's
// text that nothing else a small program runs touches: through the kernel's fault-around,
// calling it made some 30-40 KiB of libc resident in every process. Without a vDSO (valgrind,
// some sandboxes), or one without the symbol or a DT_HASH table, it is libc's.
#include "os/clock.h"

#include <elf.h>
#include <link.h>
#include <sys/auxv.h>

namespace pagemalloc {
namespace {

bool same_name(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// The address of the function `name` in the vDSO, or nullptr (the kernel's own parser,
// tools/testing/selftests/vDSO/parse_vdso.c, reads it the same way).
void* find_in_vdso(const char* name) {
  const unsigned long base = getauxval(AT_SYSINFO_EHDR);
  if (base == 0) return nullptr;
  const auto* header = reinterpret_cast<const ElfW(Ehdr)*>(base);
  if (header->e_ident[EI_MAG0] != ELFMAG0 || header->e_ident[EI_MAG1] != ELFMAG1 ||
      header->e_ident[EI_MAG2] != ELFMAG2 || header->e_ident[EI_MAG3] != ELFMAG3)
    return nullptr;
  const auto* segments = reinterpret_cast<const ElfW(Phdr)*>(base + header->e_phoff);
  const ElfW(Dyn)* dynamic = nullptr;
  ElfW(Addr) bias = 0;
  bool loaded = false;
  for (unsigned i = 0; i < header->e_phnum; ++i) {
    if (segments[i].p_type == PT_LOAD && !loaded) {
      bias = base + segments[i].p_offset - segments[i].p_vaddr;
      loaded = true;
    } else if (segments[i].p_type == PT_DYNAMIC) {
      dynamic = reinterpret_cast<const ElfW(Dyn)*>(base + segments[i].p_offset);
    }
  }
  if (!loaded || dynamic == nullptr) return nullptr;
  const ElfW(Sym)* symbols = nullptr;
  const char* names = nullptr;
  const ElfW(Word)* hash = nullptr;
  for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_SYMTAB) symbols = reinterpret_cast<const ElfW(Sym)*>(bias + d->d_un.d_ptr);
    else if (d->d_tag == DT_STRTAB) names = reinterpret_cast<const char*>(bias + d->d_un.d_ptr);
    else if (d->d_tag == DT_HASH) hash = reinterpret_cast<const ElfW(Word)*>(bias + d->d_un.d_ptr);
  }
  if (symbols == nullptr || names == nullptr || hash == nullptr) return nullptr;
  const ElfW(Word) count = hash[1];  // the hash table's chains: one per symbol
  for (ElfW(Word) i = 0; i < count; ++i) {
    const ElfW(Sym)& s = symbols[i];
    if ((s.st_info & 0xf) == STT_FUNC && s.st_shndx != SHN_UNDEF && s.st_value != 0 &&
        same_name(names + s.st_name, name))
      return reinterpret_cast<void*>(bias + s.st_value);
  }
  return nullptr;
}

}  // namespace

ClockFunction find_clock() {
  if (void* f = find_in_vdso("__vdso_clock_gettime")) return reinterpret_cast<ClockFunction>(f);
  return &::clock_gettime;
}

}  // namespace pagemalloc
