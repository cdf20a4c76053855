#!/usr/bin/env bash
# Drop-in test: the code that everyday calls run lies at the start of the library's text.
#
#   bash tests/dropin/hot_text.sh path/to/libpagemalloc.so
#
# The kernel maps a file's pages around each one a process touches (fault-around, a 64 KiB
# window, or a whole large folio), so every process has resident all of the library's text
# that lies near any code it runs. The functions that every process runs are marked
# [[gnu::hot]] and lie together, with the entry points, at the start of the text
# (allocator/CMakeLists.txt): a small program then maps some 60 KiB of it instead of all of it.
#
# A C program under LD_PRELOAD takes away the access to all of the library's executable mapping
# but its first 72 KiB before its first allocation (it reads /proc/self/maps by system calls:
# stdio would allocate), then makes the calls every process makes: small blocks in numbers
# (caches refilled and flushed), realloc from small through large to huge blocks, calloc of a
# large block twice, aligned blocks, malloc_usable_size, a thread that allocates, frees a block
# of the main thread's and exits, and a fork whose child allocates. Code run beyond the first
# 72 KiB faults: the program names its offset in the file and the test the function there.
# (72 KiB: the hot code and the entry points, with the medium classes' paths, end some 5 KiB
# past the text's first 64 KiB, and so inside the file's second 64 KiB window either way,
# since the text starts some 13 KiB into the file.)
# ctest runs it for the default design only (tests/CMakeLists.txt).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
make_work_directory

cat >"$work/hot_text.c" <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kWindow = 72 * 1024 };
static uintptr_t text_start, text_end, text_offset;

static void write_text(const char* s) { (void)!write(2, s, strlen(s)); }
static void write_hex(uintptr_t v) {
  char digits[19] = "0x";
  int n = 2;
  for (int shift = 60; shift >= 0; shift -= 4)
    if ((v >> shift) != 0 || shift == 0 || n > 2) digits[n++] = "0123456789abcdef"[(v >> shift) & 15];
  digits[n] = 0;
  write_text(digits);
}

static void on_fault(int sig, siginfo_t* info, void* context) {
  (void)sig, (void)context;
  const uintptr_t at = (uintptr_t)info->si_addr;
  if (at >= text_start + kWindow && at < text_end) {
    write_text("offset ");
    write_hex(at - text_start + text_offset);
    write_text("\n");
    _exit(3);
  }
  write_text("fault outside the library's text\n");
  _exit(4);
}

/* The executable mapping whose path ends with `name`, from /proc/self/maps, read by system
   calls into a buffer on the stack. */
static int find_text(const char* name) {
  char maps[1 << 16];
  int fd = open("/proc/self/maps", O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = 0, got;
  while (n < (ssize_t)sizeof maps - 1 && (got = read(fd, maps + n, sizeof maps - 1 - n)) > 0)
    n += got;
  close(fd);
  maps[n] = 0;
  for (char* line = maps; *line != 0;) {
    char* end = strchr(line, '\n');
    if (end != NULL) *end = 0;
    const size_t length = strlen(line), name_length = strlen(name);
    char* perms = strchr(line, ' ');
    if (perms != NULL && perms[3] == 'x' && length > name_length &&
        strcmp(line + length - name_length, name) == 0 && line[length - name_length - 1] == '/') {
      char* rest;
      text_start = strtoull(line, &rest, 16);
      text_end = strtoull(rest + 1, &rest, 16);
      text_offset = strtoull(perms + 6, NULL, 16);
      return 1;
    }
    if (end == NULL) break;
    line = end + 1;
  }
  return 0;
}

static void* stranger;  /* a block of the main thread's, freed by the other thread */

static void* other_thread(void* unused) {
  (void)unused;
  void* blocks[1000];
  for (int i = 0; i < 1000; ++i) blocks[i] = malloc(16 + i % 200);
  for (int i = 0; i < 1000; ++i) free(blocks[i]);
  free(stranger);
  return NULL;
}

int main(void) {
  const char* library = getenv("LIBRARY");
  if (library == NULL || !find_text(library)) { write_text("no executable mapping\n"); return 1; }
  if (text_end - text_start <= kWindow) { write_text("text within the window\n"); return 0; }
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &action, NULL);
  if (mprotect((void*)(text_start + kWindow), text_end - text_start - kWindow, PROT_NONE) != 0) {
    write_text("mprotect failed\n");
    return 1;
  }

  static void* blocks[20000];
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 20000; ++i) blocks[i] = malloc(8 + (i * 37) % 2000);
    for (int i = 0; i < 20000; i += 2) free(blocks[i]);
    for (int i = 1; i < 20000; i += 2) free(blocks[i]);
  }
  char* grown = malloc(16);
  for (size_t size = 32; size <= ((size_t)16 << 20); size *= 2) {
    grown = realloc(grown, size);
    grown[size - 1] = 1;
  }
  grown = realloc(grown, 100);
  free(grown);
  for (int i = 0; i < 2; ++i) {
    char* zeroed = calloc(1, 256 * 1024);
    char* small = calloc(10, 10);
    zeroed[4096] = small[5] = 1;
    free(small);
    free(zeroed);
  }
  void* aligned = NULL;
  if (posix_memalign(&aligned, 64, 1000) != 0) return 1;
  void* page = aligned_alloc(4096, 8192);
  if (malloc_usable_size(aligned) < 1000) return 1;
  free(aligned);
  free(page);

  stranger = malloc(48);
  pthread_t thread;
  if (pthread_create(&thread, NULL, other_thread, NULL) != 0) return 1;
  pthread_join(thread, NULL);

  pid_t child = fork();
  if (child == 0) {
    void* p = malloc(100);
    free(p);
    _exit(0);
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || status != 0) return 1;

  mprotect((void*)(text_start + kWindow), text_end - text_start - kWindow, PROT_READ | PROT_EXEC);
  write_text("ok\n");
  return 0;
}
C
cc -O2 -pthread -o "$work/hot_text" "$work/hot_text.c"

name=$(basename -- "$(readlink -f -- "$lib")")
status=0
LD_PRELOAD="$lib" LIBRARY="$name" "$work/hot_text" 2>"$work/stderr" || status=$?
if [ "$status" -eq 3 ]; then
  offset=$(sed -n 's/^offset //p' "$work/stderr")
  # The function whose code holds that offset (nm lists virtual addresses; in this library
  # they equal file offsets, its segments being mapped at their offsets).
  symbol=""
  while read -r address _ name; do
    if (( 16#$address <= offset )); then symbol=$name; else break; fi
  done < <(nm -n -C -- "$lib" | grep -E '^[0-9a-f]+ [tTwW] ')
  echo "FAIL: everyday calls under LD_PRELOAD=$lib ran code at offset $offset of it, beyond" \
    "the first 72 KiB of its text: ${symbol:-an unnamed function} (mark it [[gnu::hot]])" >&2
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "FAIL: the test program exited with status $status under LD_PRELOAD=$lib:" >&2
  cat "$work/stderr" >&2
  exit 1
fi
echo "ok: everyday calls ran only code in the first 72 KiB of $name's text"
