#!/usr/bin/env bash
# Drop-in test: the sqlite3 shell on the preloaded allocator, with an in-memory database.
#
#   bash tests/dropin/sqlite.sh path/to/libpagemalloc.so
#
# Fills a :memory: database with 60,000 generated rows (a recursive CTE and a fixed
# arithmetic sequence: the same rows on every run), builds indexes, groups, joins, ranks with a
# window function, updates and deletes, without and with LD_PRELOAD=$1; both runs must succeed
# and print the same bytes, and the preloaded run must bind malloc to the library.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/binding.bash"

take_library_argument "$@"
sqlite=$(command -v sqlite3 || true)
[ -n "$sqlite" ] || { echo "FAIL: sqlite3 not found (bash tools/install-deps.sh)" >&2; exit 1; }
make_work_directory

cat >"$work/queries.sql" <<'SQL'
CREATE TABLE items(id INTEGER PRIMARY KEY, grp INTEGER, score INTEGER, name TEXT);
WITH RECURSIVE sequence(i, x) AS (
  SELECT 0, 20240521
  UNION ALL
  SELECT i + 1, (x * 1103515245 + 12345) % 2147483648 FROM sequence WHERE i < 59999)
INSERT INTO items SELECT i, x % 97, x % 100003, printf('item-%d-%s', i, hex(x % 65536)) FROM sequence;
CREATE TABLE tags(item_id INTEGER, tag TEXT);
INSERT INTO tags SELECT id, 'tag' || (score % 13) FROM items;
INSERT INTO tags SELECT id, 'tag' || (score % 7) FROM items WHERE id % 3 = 0;
CREATE INDEX items_by_group ON items(grp, score);
CREATE INDEX tags_by_tag ON tags(tag, item_id);
SELECT 'groups', count(*), sum(n), max(total) FROM (SELECT grp, count(*) AS n, sum(score) AS total FROM items GROUP BY grp);
SELECT 'top', grp, count(*), sum(score) FROM items GROUP BY grp ORDER BY count(*) DESC, grp LIMIT 5;
SELECT 'tag', t.tag, count(*), sum(i.score) % 1000003 FROM tags t JOIN items i ON i.id = t.item_id
  GROUP BY t.tag ORDER BY count(*) DESC, t.tag LIMIT 5;
SELECT 'best', grp, name, score FROM (
  SELECT grp, name, score, rank() OVER (PARTITION BY grp ORDER BY score DESC, id) AS position FROM items)
  WHERE position = 1 ORDER BY score DESC, grp LIMIT 5;
UPDATE items SET name = upper(name) || '/' || name WHERE score % 5 = 0;
DELETE FROM items WHERE score % 11 = 0;
SELECT 'after', count(*), sum(length(name)), (SELECT count(*) FROM tags WHERE item_id IN (SELECT id FROM items)) FROM items;
SELECT 'names', length(group_concat(name, ',')) FROM (SELECT name FROM items ORDER BY name);
SQL

# Runs the queries under the given environment assignments; stdout goes to file $1.
run() {
  local out=$1; shift
  env "$@" "$sqlite" -batch -bail :memory: <"$work/queries.sql" >"$out" ||
    { echo "FAIL: sqlite3 exited with status $? (env: ${*:-none})" >&2; exit 1; }
}
expect_same_output_with_preload "$lib" "$work"
name=$(basename -- "$lib")
echo "ok: sqlite3 output identical ($(wc -l <"$work/plain.out") lines," \
  "$(head -n 1 "$work/plain.out")), malloc bound to $name"
