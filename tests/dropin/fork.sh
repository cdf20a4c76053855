#!/usr/bin/env bash
# Drop-in test: a multithreaded Python program that forks, on the preloaded allocator.
#
#   bash tests/dropin/fork.sh path/to/libpagemalloc.so
#
# Two threads run SQLite queries on in-memory databases (SQLite releases Python's global lock
# while a query runs) that allocate and free blocks of 20 KiB to 370 KiB all along, while the
# main thread forks 40 times. Each child builds and checks some fifty thousand Python objects
# (PYTHONMALLOC=malloc: every one goes through malloc) and exits; an alarm kills a child that
# deadlocks on a lock the parent's threads held at the fork. With decay_ms:0 freed pages go
# back to the OS at once, so the threads hold the allocator's locks across system calls and
# many forks land while one is held: without fork handlers, some child of nearly every run
# deadlocks. The program must print the same bytes without and with LD_PRELOAD=$1, and malloc
# must bind to the library.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
python=/usr/bin/python3   # Debian's interpreter; python3 on PATH may be a pyenv shim
[ -x "$python" ] || { echo "FAIL: $python not found (apt-get install python3)" >&2; exit 1; }
make_work_directory

cat >"$work/fork.py" <<'PY'
import os, signal, sqlite3, sys, threading

FORKS = 40
stop = threading.Event()

def query_loop(seed):
    db = sqlite3.connect(":memory:")
    while not stop.is_set():
        db.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000) "
            "SELECT sum(length(zeroblob(20000 + (i * ?) % 40 * 9000) || x'01')) FROM n",
            (7 + seed,)).fetchone()
    db.close()

def child_work():
    signal.alarm(20)
    table = {f"key{i}": [i] * (i % 7) for i in range(20000)}
    words = sorted(str(i * 7919 % 100003) for i in range(20000))
    ok = len(table) == 20000 and all(len(v) == int(k[3:]) % 7 for k, v in table.items())
    ok = ok and len(words) == 20000 and words == sorted(words)
    os._exit(0 if ok else 3)

threads = [threading.Thread(target=query_loop, args=(s,)) for s in range(2)]
for t in threads:
    t.start()
failures = 0
for round in range(FORKS):
    pid = os.fork()
    if pid == 0:
        child_work()
    _, status = os.waitpid(pid, 0)
    if status != 0:
        failures += 1
        if os.WIFSIGNALED(status):
            print(f"fork {round}: child killed by signal {os.WTERMSIG(status)}", file=sys.stderr)
        else:
            print(f"fork {round}: child exited with {os.WEXITSTATUS(status)}", file=sys.stderr)
stop.set()
for t in threads:
    t.join()
print(f"{FORKS - failures} of {FORKS} children succeeded")
sys.exit(1 if failures else 0)
PY

export PYTHONMALLOC=malloc PAGEMALLOC_CONF=decay_ms:0

# Runs the program under the given environment assignments; stdout goes to file $1.
run() {
  local out=$1; shift
  env "$@" "$python" "$work/fork.py" >"$out" ||
    { echo "FAIL: python exited with status $? (env: ${*:-none})" >&2; exit 1; }
}
expect_same_output_with_preload "$lib" "$work"
name=$(basename -- "$lib")
echo "ok: $(cat "$work/preload.out") under LD_PRELOAD, malloc bound to $name"
