//! Line framing for the JSON Lines providers: records a writer glued onto one line
//! (`{…}{…}`, a lost newline) are found and split before any projector sees them, so
//! neither record is lost to the other. Knows JSON syntax, no field names.

/// Splits a line that holds several JSON records written back to back (`{…}{…}`: a
/// writer lost a newline) into the records' bytes, in order. `None` for an ordinary line,
/// including one whose strings merely contain `}{`. If a later part does not parse, it
/// is returned as it is, for the projector to repair or report.
///
/// Framing belongs here, before any projector: every JSON provider gets it, and each
/// record is projected on its own, so neither is lost to the other.
pub fn split_glued(line: &[u8]) -> Option<Vec<&[u8]>> {
    // Built once: `memmem::find` builds a searcher at each call, which costs more than
    // the search on a short line, and every line of every file passes here.
    static GLUE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"}{"));
    GLUE.find(line)?;
    let (mut parts, bad) = leading_records(line);
    // Only after a first good record: a line that is bad from the start is left whole to
    // the projector's repair.
    if let Some(at) = bad
        && !parts.is_empty()
    {
        parts.push(line[at..].trim_ascii());
    }
    (parts.len() > 1).then_some(parts)
}

/// `bytes` as one or more whole JSON values to its end, or `None`.
fn whole_records(bytes: &[u8]) -> Option<Vec<&[u8]>> {
    let (parts, bad) = leading_records(bytes);
    (bad.is_none() && !parts.is_empty()).then_some(parts)
}

/// The whole JSON values `bytes` starts with, in order, and where the first one that
/// does not parse begins (`None` when all of `bytes` was read).
fn leading_records(bytes: &[u8]) -> (Vec<&[u8]>, Option<usize>) {
    let mut values =
        serde_json::Deserializer::from_slice(bytes).into_iter::<serde::de::IgnoredAny>();
    let mut parts = Vec::new();
    let mut start = 0;
    loop {
        match values.next() {
            Some(Ok(_)) => {
                let end = values.byte_offset();
                parts.push(bytes[start..end].trim_ascii());
                start = end;
            }
            Some(Err(_)) => return (parts, Some(start)),
            None => return (parts, None),
        }
    }
}

/// An oversized line taken apart by [`glued_around`].
#[derive(Debug, Default)]
pub struct Around<'a> {
    /// Whole records before the oversized one.
    pub before: Vec<&'a [u8]>,
    /// The oversized record's kept ends.
    pub head: &'a [u8],
    pub tail: &'a [u8],
    /// Whole records after it.
    pub after: Vec<&'a [u8]>,
}

/// Whole records glued to an oversized one on its line, found in the two ends the
/// reader kept of it (`head`, `tail`, of a line `len` bytes long): those that end in
/// the head before it, and those that fill the tail after it. Records seen in both
/// windows (a line not much longer than they are) are left alone, so nothing is read
/// twice.
pub fn glued_around<'a>(head: &'a [u8], tail: &'a [u8], len: u64) -> Around<'a> {
    let tail_at = len.saturating_sub(tail.len() as u64);
    let head_len = head.len() as u64;
    let mut before = Vec::new();
    let mut head_rest = head;
    if memchr::memmem::find(head, b"}{").is_some() {
        let mut values =
            serde_json::Deserializer::from_slice(head).into_iter::<serde::de::IgnoredAny>();
        let mut start = 0;
        while let Some(Ok(_)) = values.next() {
            let end = values.byte_offset();
            if end as u64 > tail_at || end as u64 >= len {
                break;
            }
            before.push(head[start..end].trim_ascii());
            start = end;
        }
        head_rest = head[start..].trim_ascii_start();
    }
    // Junctions are tried from the end back: the earliest one from which the rest of
    // the tail parses as whole records gives them all. Bounded: a tail full of `}{`
    // inside one string costs a few scans of 64 KiB at most.
    let mut after = Vec::new();
    let mut tail_rest = tail;
    let mut upto = tail.len();
    for _ in 0..16 {
        let Some(i) = memchr::memmem::rfind(&tail[..upto], b"}{").map(|i| i + 1) else {
            break;
        };
        upto = i;
        if tail_at + (i as u64) < head_len {
            break;
        }
        if let Some(parts) = whole_records(&tail[i..]) {
            after = parts;
            tail_rest = &tail[..i];
        }
    }
    Around {
        before,
        head: head_rest,
        tail: tail_rest,
        after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record() -> impl Strategy<Value = String> {
        // Strings that hold braces, `}{` and escapes, as tool output does.
        ("[a-z]{1,6}", "[ -~]{0,12}", any::<u32>()).prop_map(|(k, v, n)| {
            serde_json::json!({ "type": k, "text": format!("{v}}}{{{v}"), "n": n }).to_string()
        })
    }

    proptest! {
        #[test]
        fn glued_records_split_back_into_themselves(
            recs in proptest::collection::vec(record(), 1..5),
            gap in "[ \t]{0,2}",
        ) {
            let line = recs.join(&gap);
            let got = split_glued(line.as_bytes());
            if recs.len() == 1 {
                prop_assert_eq!(got, None);
            } else {
                let want: Vec<&[u8]> = recs.iter().map(|r| r.as_bytes()).collect();
                prop_assert_eq!(got, Some(want));
            }
        }

        #[test]
        fn records_around_an_oversized_one_are_found_in_its_ends(
            before in proptest::collection::vec(record(), 0..3),
            after in proptest::collection::vec(record(), 0..3),
            big in 300usize..600,
        ) {
            let huge = serde_json::json!({ "type": "big", "text": "}{".repeat(big) }).to_string();
            let line = format!("{}{huge}{}", before.concat(), after.concat());
            let keep = 200;
            let (head, tail) = (&line.as_bytes()[..keep], &line.as_bytes()[line.len() - keep..]);
            let a = glued_around(head, tail, line.len() as u64);
            // Whatever is found is exactly a run of the glued records, never the big one.
            let first: Vec<&[u8]> = before.iter().map(|r| r.as_bytes()).take(a.before.len()).collect();
            prop_assert_eq!(&a.before, &first);
            let skip = after.len() - a.after.len();
            let last: Vec<&[u8]> = after.iter().skip(skip).map(|r| r.as_bytes()).collect();
            prop_assert_eq!(&a.after, &last);
            // Records that fit in the kept ends are all found.
            if before.concat().len() < keep && huge.len() > 2 * keep {
                prop_assert_eq!(a.before.len(), before.len());
            }
            if after.concat().len() < keep && huge.len() > 2 * keep {
                prop_assert_eq!(a.after.len(), after.len());
            }
        }
    }
}
