//! OpenCode's rows: the query the row source runs. Tables and columns as OpenCode
//! 1.2.0 → 1.15.13 create them (`packages/core/src/database/migration/`): `message(id,
//! session_id, time_created, time_updated, data)`, `part(id, message_id, session_id,
//! time_created, time_updated, data)` and `session(id, parent_id, directory, …)`. Every
//! change OpenCode makes is an upsert that sets `time_updated`, so "what changed since"
//! is `time_updated >= ?`; columns a newer OpenCode adds are never named, so they change
//! nothing here.

use crate::provider::descriptor::RowSchema;

pub struct OpenCodeRows;

/// First the keys of the changed rows, sorted and cut to the page (no row's `data` is
/// touched for that), then each picked row as one JSON object: which table, its ids, its
/// session's parent and directory, its times and its `data` as text (left out, with its
/// length, past `?4` bytes). A message row also carries the start of its last text
/// part (through `part_message_id_id_idx`): a database shows each row's last version
/// only, so a read that starts late sees a finished answer's parts in any order, and
/// the answer's text must come with the message that ends the turn; for the same
/// reason a part row carries its message's `role`. `json_valid` first:
/// one damaged row must not fail the whole statement. The key is `m<id>` or `p<id>`, so at one `time_updated` a
/// message comes before the parts written with it.
const CHANGED_SINCE: &str = "
WITH picked AS (
  SELECT updated, key, tbl, rid FROM (
    SELECT time_updated AS updated, 'm' || id AS key, 0 AS tbl, rowid AS rid
      FROM message WHERE time_updated >= ?1
    UNION ALL
    SELECT time_updated, 'p' || id, 1, rowid
      FROM part WHERE time_updated >= ?1
  )
  WHERE updated > ?1 OR key > ?2
  ORDER BY updated, key
  LIMIT ?3
)
SELECT picked.updated, picked.key, CASE picked.tbl
  WHEN 0 THEN (
    SELECT json_object(
      'row', 'message', 'id', m.id, 'session', m.session_id,
      'parent', s.parent_id, 'dir', s.directory,
      'updated', m.time_updated,
      'text', (
        SELECT substr(json_extract(p.data, '$.text'), 1, 4096) FROM part p
        WHERE p.message_id = m.id AND json_valid(p.data)
          AND json_extract(p.data, '$.type') = 'text'
          AND coalesce(json_extract(p.data, '$.synthetic'), 0) = 0
          AND length(json_extract(p.data, '$.text')) > 0
        ORDER BY p.id DESC LIMIT 1),
      'size', length(CAST(m.data AS BLOB)),
      'data', CASE WHEN length(CAST(m.data AS BLOB)) <= ?4 THEN m.data END)
    FROM message m LEFT JOIN session s ON s.id = m.session_id
    WHERE m.rowid = picked.rid)
  ELSE (
    SELECT json_object(
      'row', 'part', 'id', p.id, 'message', p.message_id, 'session', p.session_id,
      'role', (
        SELECT json_extract(m.data, '$.role') FROM message m
        WHERE m.id = p.message_id AND json_valid(m.data)),
      'parent', s.parent_id, 'dir', s.directory,
      'updated', p.time_updated,
      'size', length(CAST(p.data AS BLOB)),
      'data', CASE WHEN length(CAST(p.data AS BLOB)) <= ?4 THEN p.data END)
    FROM part p LEFT JOIN session s ON s.id = p.session_id
    WHERE p.rowid = picked.rid)
  END
FROM picked
ORDER BY picked.updated, picked.key
";

impl RowSchema for OpenCodeRows {
    fn changed_since(&self) -> &'static str {
        CHANGED_SINCE
    }
}
