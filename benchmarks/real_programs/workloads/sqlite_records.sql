-- SQLite workload of the real-program comparison: an in-memory database.
--
--   sqlite3 :memory: < sqlite_records.sql   (after replacing {records_tsv} and {tags_tsv}
--                                            with the paths of the generated inputs, as
--                                            real_programs.py does)
--
-- Imports the records and their tags (.import inserts row by row), derives a wider table,
-- builds indexes, groups, joins, ranks with a window function, updates and deletes, and
-- prints the results: the same bytes under every allocator.
.mode tabs
CREATE TABLE records(id INTEGER PRIMARY KEY, name TEXT, grp TEXT, score INTEGER, tags TEXT, body TEXT);
CREATE TABLE tags(record_id INTEGER, tag TEXT);
.import {records_tsv} records
.import {tags_tsv} tags
CREATE TABLE words AS
  WITH RECURSIVE split(id, word, rest) AS (
    SELECT id, '', body || ' ' FROM records WHERE id % 4 = 0
    UNION ALL
    SELECT id, substr(rest, 1, instr(rest, ' ') - 1), substr(rest, instr(rest, ' ') + 1)
    FROM split WHERE rest <> '')
  SELECT id, word FROM split WHERE word <> '';
CREATE INDEX records_by_group ON records(grp, score);
CREATE INDEX tags_by_tag ON tags(tag, record_id);
CREATE INDEX words_by_word ON words(word);
.mode list
.separator " "
SELECT 'rows', (SELECT count(*) FROM records), (SELECT count(*) FROM tags), (SELECT count(*) FROM words);
SELECT 'group', grp, count(*), sum(score), max(length(body)) FROM records GROUP BY grp ORDER BY count(*) DESC, grp LIMIT 15;
SELECT 'tag', t.tag, count(*), sum(r.score) % 1000003, min(r.name)
  FROM tags t JOIN records r ON r.id = t.record_id
  GROUP BY t.tag ORDER BY count(*) DESC, t.tag LIMIT 15;
SELECT 'word', word, count(*), count(DISTINCT id) FROM words GROUP BY word ORDER BY count(*) DESC, word LIMIT 10;
SELECT 'best', grp, name, score FROM (
  SELECT grp, name, score, rank() OVER (PARTITION BY grp ORDER BY score DESC, id) AS position FROM records)
  WHERE position = 1 ORDER BY score DESC, grp LIMIT 10;
UPDATE records SET body = upper(body) || ' ' || name, tags = tags || ',' || grp WHERE score % 7 = 0;
DELETE FROM records WHERE score % 11 = 0;
DELETE FROM tags WHERE record_id NOT IN (SELECT id FROM records);
SELECT 'after', count(*), sum(length(body)), sum(length(tags)), (SELECT count(*) FROM tags) FROM records;
SELECT 'pairs', count(*) FROM tags a JOIN tags b ON a.record_id = b.record_id AND a.tag < b.tag;
SELECT 'digest', sum(length(group_concat)) FROM (
  SELECT group_concat(name, '|') AS group_concat FROM (SELECT grp, name FROM records ORDER BY grp, id) GROUP BY grp);
