//! Tail-first reads: a session's state depends only on its last turns, at the end of its
//! file, so `scan` finds where the second-last turn starts by reading backwards, counts
//! the newlines before it (for line numbers), and parses from there only.
//!
//! Why the second-last turn and not the last: a turn start keeps the message the session
//! showed before it (the previous turn's answer), and only a read of the previous turn
//! tells what that was. Everything else a fresh projector and reducer session rebuild
//! from a turn start alone. What they cannot rebuild is named by the provider
//! ([`restart::hazards`]); a file that has any of it before the restart point, or no two
//! turns with ids of their own, is read whole, and the reason is counted.

use crate::model::ProviderKind;
use crate::provider::restart::{self, Restart};
use memchr::memmem::Finder;
use std::borrow::Cow;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

/// Chunk for the backward search (turns are usually near the end).
const BACK_CHUNK: usize = 64 * 1024;
/// Chunk for the forward newline count over the skipped part.
const COUNT_CHUNK: usize = 256 * 1024;
/// Longer lines are never taken as restart points (a prompt is short; skipping one only
/// moves the restart point back a turn).
const PROBE_MAX: usize = 256 * 1024;
/// The first line (a header) is shown to the restarted projector if it is at most this
/// long.
const HEAD_MAX: usize = 1024 * 1024;

/// Where to start reading a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// From `offset` (a line start), whose line is `line_no`, after showing the projector
    /// `head` (the file's first line, when it lies before `offset`).
    Tail {
        offset: u64,
        line_no: u64,
        head: Option<Vec<u8>>,
    },
    /// From the first byte, for this reason.
    Full(&'static str),
}

/// Decides where to read `file` (a transcript of `kind` at `path`) from.
pub fn plan<F: Read + Seek>(file: &mut F, kind: ProviderKind, path: &Path) -> io::Result<Plan> {
    if !restart::supported(kind) {
        return Ok(Plan::Full("provider"));
    }
    let len = file.seek(SeekFrom::End(0))?;
    let starts = match last_turn_starts(file, len, kind, path)? {
        Ok(s) => s,
        Err(reason) => return Ok(Plan::Full(reason)),
    };
    let [(_, last), (offset, turn)] = starts;
    if last == turn {
        return Ok(Plan::Full("repeated_turn"));
    }
    if offset == 0 {
        return Ok(Plan::Full("few_turns"));
    }
    let Some(head) = read_head(file, offset)? else {
        return Ok(Plan::Full("long_head"));
    };
    let head_end = head.len() as u64 + 1;
    let needle = restart::turn_needle(kind, &turn);
    match scan_prefix(file, offset, head_end, kind, path, &needle)? {
        Ok(newlines) => Ok(Plan::Tail {
            offset,
            line_no: newlines + 1,
            head: Some(head),
        }),
        Err(reason) => Ok(Plan::Full(reason)),
    }
}

/// The line starts and turn ids of the last two turn starts, last first, found by
/// reading backwards from the end (an unfinished last line is not a line yet).
fn last_turn_starts<F: Read + Seek>(
    file: &mut F,
    len: u64,
    kind: ProviderKind,
    path: &Path,
) -> io::Result<Result<[(u64, String); 2], &'static str>> {
    let mut buf = vec![0u8; BACK_CHUNK];
    let mut found: Vec<(u64, String)> = Vec::with_capacity(2);
    let mut pos = len;
    // The newline that ends the line being collected; `None` while still in the
    // unfinished tail.
    let mut line_end: Option<u64> = None;
    // That line's bytes from `pos` to `line_end`, unless it grew past PROBE_MAX.
    let mut carry: Vec<u8> = Vec::new();
    let mut carry_big = false;
    let probe = |line: &[u8], start: u64, found: &mut Vec<(u64, String)>| {
        match restart::classify(kind, path, line) {
            Restart::At(turn) => found.push((start, turn)),
            Restart::Unsafe(reason) => return Err(reason),
            Restart::No => {}
        }
        Ok(())
    };
    while pos > 0 {
        let lo = pos.saturating_sub(BACK_CHUNK as u64);
        let n = usize::try_from(pos - lo).unwrap_or(BACK_CHUNK);
        file.seek(SeekFrom::Start(lo))?;
        file.read_exact(&mut buf[..n])?;
        let chunk = &buf[..n];
        let mut j = n;
        while let Some(nl) = memchr::memrchr(b'\n', &chunk[..j]) {
            if line_end.is_some() && !carry_big && j - nl - 1 + carry.len() <= PROBE_MAX {
                let line: Cow<'_, [u8]> = if carry.is_empty() {
                    Cow::Borrowed(&chunk[nl + 1..j])
                } else {
                    let mut l = chunk[nl + 1..j].to_vec();
                    l.extend_from_slice(&carry);
                    Cow::Owned(l)
                };
                if let Err(reason) = probe(&line, lo + nl as u64 + 1, &mut found) {
                    return Ok(Err(reason));
                }
                if found.len() == 2 {
                    return Ok(Ok(two(found)));
                }
            }
            line_end = Some(lo + nl as u64);
            carry.clear();
            carry_big = false;
            j = nl;
        }
        if line_end.is_some() && !carry_big {
            if j + carry.len() > PROBE_MAX {
                carry_big = true;
                carry = Vec::new();
            } else {
                let mut c = chunk[..j].to_vec();
                c.extend_from_slice(&carry);
                carry = c;
            }
        }
        pos = lo;
    }
    if line_end.is_some()
        && !carry_big
        && let Err(reason) = probe(&carry, 0, &mut found)
    {
        return Ok(Err(reason));
    }
    if found.len() == 2 {
        Ok(Ok(two(found)))
    } else {
        Ok(Err("few_turns"))
    }
}

fn two(mut found: Vec<(u64, String)>) -> [(u64, String); 2] {
    let second = found.pop().unwrap_or_default();
    let first = found.pop().unwrap_or_default();
    [first, second]
}

/// The first line (without its newline), if it ends within HEAD_MAX bytes; `limit` (a
/// later line start) bounds the read.
fn read_head<F: Read + Seek>(file: &mut F, limit: u64) -> io::Result<Option<Vec<u8>>> {
    let want = usize::try_from(limit).unwrap_or(HEAD_MAX).min(HEAD_MAX);
    let mut head = vec![0u8; want];
    file.seek(SeekFrom::Start(0))?;
    file.read_exact(&mut head)?;
    Ok(memchr::memchr(b'\n', &head).map(|nl| {
        head.truncate(nl);
        head
    }))
}

/// Counts the newlines in `[0, end)` and looks for what makes a restart unsafe: the
/// provider's hazards after the first line (from `head_end`), and the restart turn's
/// id anywhere (a copy of the turn start before it would make it no new turn).
fn scan_prefix<F: Read + Seek>(
    file: &mut F,
    end: u64,
    head_end: u64,
    kind: ProviderKind,
    path: &Path,
    turn: &[u8],
) -> io::Result<Result<u64, &'static str>> {
    let hazards: Vec<(Finder<'_>, &'static str)> = restart::hazards(kind, path)
        .iter()
        .map(|(n, why)| (Finder::new(n), *why))
        .collect();
    let turn_finder = (!turn.is_empty()).then(|| Finder::new(turn));
    let overlap = hazards
        .iter()
        .map(|(f, _)| f.needle().len())
        .chain(std::iter::once(turn.len()))
        .max()
        .unwrap_or(1)
        .saturating_sub(1);
    file.seek(SeekFrom::Start(0))?;
    // The window: the last `overlap` bytes of the previous chunk, then the new chunk, so
    // a pattern cut by a chunk boundary is still found.
    let mut win = vec![0u8; overlap + COUNT_CHUNK];
    let mut kept = 0usize;
    let mut at = 0u64;
    let mut newlines = 0u64;
    while at < end {
        let want = usize::try_from(end - at)
            .unwrap_or(COUNT_CHUNK)
            .min(COUNT_CHUNK);
        let got = file.read(&mut win[kept..kept + want])?;
        if got == 0 {
            // The file shrank under us: the caller's full read sees what is there.
            return Ok(Err("changed"));
        }
        let fresh = &win[kept..kept + got];
        newlines += memchr::memchr_iter(b'\n', fresh).count() as u64;
        let hay = &win[..kept + got];
        let hay_start = at - kept as u64;
        let from = usize::try_from(head_end.saturating_sub(hay_start))
            .unwrap_or(usize::MAX)
            .min(hay.len());
        for (f, why) in &hazards {
            if f.find(&hay[from..]).is_some() {
                return Ok(Err(why));
            }
        }
        if turn_finder.as_ref().is_some_and(|f| f.find(hay).is_some()) {
            return Ok(Err("turn_seen_before"));
        }
        at += got as u64;
        let keep = overlap.min(kept + got);
        win.copy_within(kept + got - keep..kept + got, 0);
        kept = keep;
    }
    Ok(Ok(newlines))
}
