#!/usr/bin/env bash
# Drop-in test: Debian's redis-server, which links jemalloc, wholly on libpagemalloc_je.so.
#
#   bash tests/dropin/jemalloc_names/redis.sh path/to/libpagemalloc_je.so
#
# First tests/dropin/redis.sh with this library (the data set identical without and with the
# preload, malloc bound to the library). Then a server under the preload is loaded with
# 100,000 keys (DEBUG POPULATE) and:
#   - INFO memory's allocator_allocated (redis reads it with mallctl("stats.allocated") in its
#     cron) must become pagemalloc's: at least redis's own count of its memory (used_memory)
#     and no more than 1.5 times it, where redis's idle jemalloc reports a few kilobytes;
#   - MEMORY MALLOC-STATS (malloc_stats_print) must print pagemalloc's statistics;
#   - with LD_DEBUG=bindings, no symbol of redis-server or of any library but jemalloc itself
#     may bind to libjemalloc: nothing reaches it.
set -euo pipefail
here=$(dirname "$(realpath "${BASH_SOURCE[0]}")")
source "$here/../binding.bash"

take_library_argument "$@"
bash "$here/../redis.sh" "$lib"

for tool in redis-server redis-cli; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (bash tools/install-deps.sh)" >&2; exit 1; }
done
work=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$work/server.log" ] && tail -n 5 "$work/server.log" >&2; exit 1; }

port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cli=(redis-cli -h 127.0.0.1 -p "$port")
LD_PRELOAD=$lib LD_DEBUG=bindings LD_DEBUG_OUTPUT=$work/ld redis-server --port "$port" \
  --bind 127.0.0.1 --save '' --appendonly no --enable-debug-command local --dir "$work" \
  --logfile "$work/server.log" &
server_pid=$!
for attempt in $(seq 100); do
  [ "$("${cli[@]}" PING 2>/dev/null)" = PONG ] && break
  kill -0 "$server_pid" 2>/dev/null || fail "redis-server exited at start-up"
  sleep 0.1
done
[ "$("${cli[@]}" DEBUG POPULATE 100000 key 100)" = OK ] || fail "DEBUG POPULATE"
# redis refreshes the allocator_* fields from mallctl in its cron (every 100 ms by default):
# give it up to 5 s to catch up with the keys just loaded.
field() { sed -n "s/^$1://p" "$work/info"; }
for attempt in $(seq 50); do
  "${cli[@]}" INFO memory | tr -d '\r' >"$work/info"
  [ "$(field allocator_allocated)" -ge "$(field used_memory)" ] 2>/dev/null && break
  sleep 0.1
done
"${cli[@]}" MEMORY MALLOC-STATS | tr -d '\r' >"$work/malloc-stats"
"${cli[@]}" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
wait "$server_pid" || fail "redis-server exited with an error"
server_pid=

used=$(field used_memory)
allocated=$(field allocator_allocated)
[ -n "$used" ] && [ -n "$allocated" ] || fail "INFO memory lacks used_memory or allocator_allocated"
[ "$used" -gt 10000000 ] || fail "used_memory $used: the keys were not loaded"
if [ "$allocated" -lt "$used" ] || [ "$allocated" -gt $((used * 3 / 2)) ]; then
  fail "allocator_allocated $allocated is not pagemalloc's count (used_memory $used)"
fi
grep -q '^pagemalloc statistics' "$work/malloc-stats" ||
  fail "MEMORY MALLOC-STATS is not pagemalloc's: $(head -n 2 "$work/malloc-stats")"

# Nothing may bind to jemalloc, except jemalloc's references to itself.
to_jemalloc=$(cat "$work"/ld.* | grep -E 'binding file .* to [^ ]*/libjemalloc\.so[^ ]* \[' |
              grep -vE 'binding file [^ ]*/libjemalloc\.so[^ ]* \[' || true)
if [ -n "$to_jemalloc" ]; then
  echo "FAIL: $(wc -l <<<"$to_jemalloc") bindings to libjemalloc under LD_PRELOAD=$lib, e.g.:" >&2
  head -n 5 <<<"$to_jemalloc" >&2
  exit 1
fi
for symbol in mallctl malloc_stats_print nallocx malloc malloc_usable_size; do
  cat "$work"/ld.* | grep -F "symbol \`$symbol'" | grep -qF "/$(basename "$lib") [" ||
    fail "$symbol does not bind to $(basename "$lib")"
done
echo "ok: redis-server on $(basename "$lib"): allocator_allocated $allocated for used_memory" \
  "$used, MEMORY MALLOC-STATS from pagemalloc, nothing bound to jemalloc"
