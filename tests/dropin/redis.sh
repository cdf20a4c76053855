#!/usr/bin/env bash
# Drop-in test: redis-server on the preloaded allocator.
#
#   bash tests/dropin/redis.sh path/to/libpagemalloc.so
#
# Starts Debian's redis-server on 127.0.0.1 (a free port, no persistence) without and with
# LD_PRELOAD=$1. Each time it loads a generated workload through redis-cli --pipe (20,000
# records as strings, hashes, lists, sets and sorted sets, with appends and deletes), records
# DBSIZE, DEBUG DIGEST (a hash of the whole data set) and a few reads, runs a short
# redis-benchmark into another database, checks the server still answers, and shuts it down;
# every step must succeed, the recorded outputs must be identical and the preloaded server
# must bind malloc to the library.
#
# Debian's redis-server links jemalloc and calls mallctl, nallocx and malloc_stats_print, which
# the drop-in does not export: under the preload those reach redis's own (otherwise idle)
# jemalloc. They only read statistics, start jemalloc's background thread and compare size
# classes, so the data set is not affected; this test does not check them.
# libpagemalloc_je.so exports them too: tests/dropin/jemalloc_names/redis.sh checks that
# redis-server then runs wholly on pagemalloc.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
for tool in redis-server redis-cli redis-benchmark awk cmp; do
  command -v "$tool" >/dev/null ||
    { echo "FAIL: $tool not found (bash tools/install-deps.sh)" >&2; exit 1; }
done
python=/usr/bin/python3   # only to find a free port
work=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# The workload in Redis's wire protocol, from a fixed seed.
awk 'function command(n, a,   i, s) {
       s = "*" n "\r\n"
       for (i = 1; i <= n; i++) s = s "$" length(a[i]) "\r\n" a[i] "\r\n"
       printf "%s", s
     }
     BEGIN {
       srand(20240521)
       for (i = 0; i < 20000; i++) {
         text = ""
         n = 1 + int(rand() * 40)
         for (j = 0; j < n; j++) text = text sprintf("%c", 97 + int(rand() * 26))
         group = int(rand() * 50); score = int(rand() * 100000)
         split("SET text:" i " " text, a, " "); command(3, a)
         split("HSET record:" i " name n" i " group " group " score " score, a, " "); command(8, a)
         split("RPUSH group:" group " " i, a, " "); command(3, a)
         split("SADD tags:" (i % 97) " " text, a, " "); command(3, a)
         split("ZADD scores:" group " " score " m" i, a, " "); command(4, a)
         if (i % 3 == 0) { split("APPEND text:" int(i / 2) " " text, a, " "); command(3, a) }
         if (i % 5 == 4) { split("DEL text:" int(rand() * i) " record:" int(i / 2), a, " "); command(3, a) }
         if (i % 7 == 6) { split("LPOP group:" group, a, " "); command(2, a) }
       }
     }' >"$work/workload.resp"

# Runs the server under the given environment assignments; what the clients saw goes to
# file $1.
run() {
  local out=$1; shift
  local port cli attempt
  port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  cli=(redis-cli -h 127.0.0.1 -p "$port")
  env "$@" redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --enable-debug-command local --dir "$work" --logfile "$work/server.log" &
  server_pid=$!
  for attempt in $(seq 100); do
    [ "$("${cli[@]}" PING 2>/dev/null)" = PONG ] && break
    kill -0 "$server_pid" 2>/dev/null ||
      { echo "FAIL: redis-server exited at start-up (env: ${*:-none})" >&2; tail "$work/server.log" >&2; exit 1; }
    sleep 0.1
  done
  {
    "${cli[@]}" --pipe <"$work/workload.resp" | grep '^errors:'
    "${cli[@]}" DBSIZE
    "${cli[@]}" DEBUG DIGEST
    "${cli[@]}" INFO keyspace | tr -d '\r' | grep '^db0:'
    "${cli[@]}" HGETALL record:19999
    "${cli[@]}" ZRANGE scores:7 0 4 WITHSCORES
    "${cli[@]}" LRANGE group:7 0 9
    "${cli[@]}" SCARD tags:5
  } >"$out" || { echo "FAIL: a redis-cli step failed (env: ${*:-none})" >&2; tail "$work/server.log" >&2; exit 1; }
  redis-benchmark -h 127.0.0.1 -p "$port" -q -n 20000 -P 16 -r 10000 -d 64 --dbnum 1 \
    -t set,get,lpush,lpop,sadd,hset,zadd >/dev/null ||
    { echo "FAIL: redis-benchmark failed (env: ${*:-none})" >&2; tail "$work/server.log" >&2; exit 1; }
  [ "$("${cli[@]}" PING)" = PONG ] ||
    { echo "FAIL: redis-server stopped answering (env: ${*:-none})" >&2; tail "$work/server.log" >&2; exit 1; }
  "${cli[@]}" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  local status=0
  wait "$server_pid" || status=$?
  server_pid=
  [ "$status" -eq 0 ] ||
    { echo "FAIL: redis-server exited with status $status (env: ${*:-none})" >&2; tail "$work/server.log" >&2; exit 1; }
}
run "$work/plain.out"
run "$work/preload.out" LD_PRELOAD="$lib"
if ! cmp -s "$work/plain.out" "$work/preload.out"; then
  echo "FAIL: the data set differs under LD_PRELOAD=$lib" >&2
  diff "$work/plain.out" "$work/preload.out" | head -n 20 >&2
  exit 1
fi

# The loader only warns when a preload fails: check that malloc really binds to the library
# (and never to libc) in the server.
run "$work/bindings.out" LD_PRELOAD="$lib" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$work/ld"
expect_malloc_bound_to "$lib" "$work"/ld.*
# redis-server also loads jemalloc: no standard entry point may reach it.
for symbol in malloc free calloc realloc posix_memalign aligned_alloc memalign valloc \
              malloc_usable_size _Znwm _Znam _ZdlPv _ZdaPv _ZdlPvm; do
  if cat "$work"/ld.* | grep -F "symbol \`$symbol'" | grep -qF '/libjemalloc.so'; then
    echo "FAIL: $symbol binds to libjemalloc under LD_PRELOAD=$lib:" >&2
    cat "$work"/ld.* | grep -F "symbol \`$symbol'" | grep -F '/libjemalloc.so' | head -n 5 >&2
    exit 1
  fi
done
name=$(basename -- "$lib")
echo "ok: redis-server data set identical ($(sed -n 2p "$work/plain.out") keys," \
  "digest $(sed -n 3p "$work/plain.out" | cut -c1-12)), malloc bound to $name"
