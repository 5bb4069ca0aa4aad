//! Reading the daemon's answer to `status`: line by line, lent from the reader's buffer,
//! and a frame's rows (`{"frame":BYTES,…}` then BYTES bytes) handed on as they arrive.

use crate::error::Error;
use crate::live::follow::socket_err;
use std::io::{self, BufRead};

/// What the answer's reader hands on: a line (without its line end), or a piece of a
/// frame, whole rows to pass on as they came.
pub(super) enum Piece<'a> {
    Line(&'a [u8]),
    Rows(&'a [u8]),
}

/// What to do after a line.
pub(super) enum Step<T> {
    /// Read on.
    Next,
    /// The answer is read: its result.
    Done(T),
    /// The next this many bytes are a frame: handed on as [`Piece::Rows`], unread.
    Frame(u64),
}

/// Hands each line of `reader` to `each` until `each` says it is done. A line is lent
/// from the reader's buffer where it lies whole in it: a long answer is neither copied
/// a line at a time nor checked for UTF-8 apart from its parse. A frame's bytes are
/// handed on in the pieces they arrive in. The stream ending first is an error (the
/// daemon hung up mid-answer).
pub(super) fn each_line<R: BufRead, T>(
    reader: &mut R,
    mut each: impl FnMut(Piece<'_>) -> Result<Step<T>, Error>,
) -> Result<T, Error> {
    let trim = |l: &[u8]| -> usize { l.len() - usize::from(l.ends_with(b"\r")) };
    let hung_up = || socket_err(io::Error::other("the daemon hung up mid-answer"));
    // A line split between two reads of the buffer.
    let mut carry = Vec::new();
    // Bytes of the open frame still to come.
    let mut frame: u64 = 0;
    loop {
        let buf = reader.fill_buf().map_err(socket_err)?;
        if buf.is_empty() {
            // A last line without its line end still counts, as `read_line` had it.
            if frame == 0
                && !carry.is_empty()
                && let Step::Done(t) = each(Piece::Line(&carry[..trim(&carry)]))?
            {
                return Ok(t);
            }
            return Err(hung_up());
        }
        let n = buf.len();
        let mut at = 0;
        loop {
            if frame > 0 {
                let take = usize::try_from(frame).unwrap_or(usize::MAX).min(n - at);
                each(Piece::Rows(&buf[at..at + take]))?;
                frame -= take as u64;
                at += take;
                if frame > 0 {
                    break;
                }
                continue;
            }
            let Some(nl) = memchr::memchr(b'\n', &buf[at..]) else {
                break;
            };
            let line = &buf[at..at + nl];
            let step = if carry.is_empty() {
                each(Piece::Line(&line[..trim(line)]))?
            } else {
                carry.extend_from_slice(line);
                let step = each(Piece::Line(&carry[..trim(&carry)]))?;
                carry.clear();
                step
            };
            match step {
                Step::Next => {}
                Step::Done(t) => return Ok(t),
                Step::Frame(len) => frame = len,
            }
            at += nl + 1;
        }
        carry.extend_from_slice(&buf[at..]);
        reader.consume(n);
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::Value;
    use std::io::BufReader;

    pub(in crate::client) const ROWS: &str = concat!(
        "{\"provider\":\"claude\",\"session\":\"s1\",\"agent\":null,\"project\":\"web\",\"state\":\"completed\"}\n",
        "{\"provider\":\"codex\",\"session\":\"s2\",\"agent\":null,\"project\":\"api\",\"state\":\"working\"}\n",
        "{\"provider\":\"codex\",\"session\":\"s3\",\"agent\":null,\"project\":\"a \\\"q\\\" \\n b\",\"state\":\"failed\"}\n",
    );
    pub(in crate::client) const END: &str = "{\"end\":true,\"sessions\":3}\n";

    /// The answer in frames: the first row alone, then the other two.
    pub(in crate::client) fn framed() -> String {
        let (one, two) = ROWS.split_at(ROWS.find('\n').unwrap() + 1);
        format!(
            "{{\"frame\":{},\"rows\":1}}\n{one}{{\"frame\":{},\"rows\":2}}\n{two}{END}",
            one.len(),
            two.len()
        )
    }

    #[test]
    fn a_frame_is_handed_on_whole_however_the_reads_split_it() {
        let answer = framed();
        for cap in [1, 2, 3, 7, 64, 4096] {
            let mut reader = BufReader::with_capacity(cap, answer.as_bytes());
            let (mut lines, mut rows) = (Vec::new(), Vec::new());
            let end = each_line(&mut reader, |piece| match piece {
                Piece::Rows(r) => {
                    rows.extend_from_slice(r);
                    Ok(Step::Next)
                }
                Piece::Line(l) => {
                    let v: Value = serde_json::from_slice(l).unwrap();
                    lines.push(v.clone());
                    Ok(match v["frame"].as_u64() {
                        Some(n) => Step::Frame(n),
                        None if v["end"] == true => Step::Done(v),
                        None => Step::Next,
                    })
                }
            })
            .unwrap();
            assert_eq!(String::from_utf8(rows).unwrap(), ROWS, "capacity {cap}");
            assert_eq!(lines.len(), 3, "two heads and the end, capacity {cap}");
            assert_eq!(end["sessions"], 3);
        }
        // Cut short inside a frame: an error, not a short answer.
        let cut = &answer[..answer.len() - END.len() - 10];
        let mut reader = BufReader::with_capacity(16, cut.as_bytes());
        let got = each_line(&mut reader, |piece| match piece {
            Piece::Rows(_) => Ok(Step::Next),
            Piece::Line(l) => {
                let v: Value = serde_json::from_slice(l).unwrap();
                Ok(v["frame"].as_u64().map_or(Step::Next, Step::Frame))
            }
        });
        assert!(
            matches!(&got, Err::<(), _>(Error::Output(e)) if e.to_string().contains("hung up")),
            "{got:?}"
        );
    }
}
