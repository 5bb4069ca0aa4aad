//! The part of a file before its restart point: its newlines counted (for line numbers)
//! and searched for what makes the restart unsafe, the provider's hazards and a copy of
//! the restart turn's own record.
//!
//! The search is one pass for all patterns (aho-corasick's packed searcher, Teddy),
//! where it used to be one `memmem` pass per pattern: that was a third of `scan`'s CPU
//! on a generated tree. The searcher reports the leftmost pattern start; every pattern
//! starting there is then checked, and the search goes on from the next byte, so no
//! start of any pattern is passed over. Where the packed searcher is not available (a
//! CPU without SSSE3 or NEON), each pattern gets its own pass, as before.

use crate::model::ProviderKind;
use crate::provider::restart::{self, Hazard, around};
use crate::tail::scratch;
use aho_corasick::Span;
use aho_corasick::packed::{Config, MatchKind, Searcher};
use memchr::memmem::Finder;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

/// Chunk for the forward newline count over the skipped part.
const COUNT_CHUNK: usize = 256 * 1024;

/// Counts the newlines in `[0, mark)` and `[0, end)` and looks for what makes a restart
/// unsafe: the provider's hazards after the first line (from `head_end`), and a copy of
/// the restart turn's record before `mark` (its own start: a copy would make it no new
/// turn). `turn` is the needle of that record, `id` the turn's id in it; `context` a
/// hazard searched for after the provider's own. `held`, when given, is the file's
/// bytes `[mark, end)` as the backward read kept them: only `[0, mark)` is read again.
pub(super) fn scan_prefix<F: Read + Seek>(
    file: &mut F,
    (mark, end): (u64, u64),
    head_end: u64,
    (kind, path, context): (ProviderKind, &Path, Option<Hazard>),
    (turn, id): (&[u8], &[u8]),
    held: Option<&[u8]>,
) -> io::Result<Result<(u64, u64), &'static str>> {
    let own = restart::hazards(kind, path);
    let hazards: Vec<Hazard> = own.iter().copied().chain(context).collect();
    count_and_look(
        file,
        (mark, end),
        head_end,
        &Look::new(&hazards, turn, id),
        held,
    )
}

/// [`scan_prefix`] with what it looks for made.
fn count_and_look<F: Read + Seek>(
    file: &mut F,
    (mark, end): (u64, u64),
    head_end: u64,
    look: &Look,
    held: Option<&[u8]>,
) -> io::Result<Result<(u64, u64), &'static str>> {
    // Every whole pattern must fit in one window for its hit to be confirmed.
    let overlap = look.longest().saturating_sub(1);
    scratch::with(scratch::Use::Count, overlap + COUNT_CHUNK, |win| {
        let read = scan_prefix_in(file, (mark, end), head_end, (look, overlap), win, held)?;
        let (before, all) = match read {
            Ok(counts) => counts,
            Err(why) => return Ok(Err(why)),
        };
        let Some(held) = held.filter(|h| !h.is_empty()) else {
            return Ok(Ok((before, all)));
        };
        // The part after `mark` (where a jump skips a run of lines; on a generated tree
        // of 10,000 sessions that run was 859 MB of the 1,637, each read twice): its
        // newlines counted and the hazards searched in memory, as the file's part was.
        let kept = usize::try_from(mark.min(overlap as u64)).unwrap_or(overlap);
        let Some(why) = look_across(look, (win, kept, overlap), held, (mark, head_end)) else {
            let more = memchr::memchr_iter(b'\n', held).count() as u64;
            return Ok(Ok((before, all + more)));
        };
        Ok(Err(why))
    })
}

/// The hazards in `held` (the file's bytes from `mark`), and in the patterns that cross
/// into it from the last `kept` bytes before `mark`, which lie at the start of `win`
/// (`overlap`: a pattern's length, less one, at most).
fn look_across(
    look: &Look,
    (win, kept, overlap): (&mut [u8], usize, usize),
    held: &[u8],
    (mark, head_end): (u64, u64),
) -> Option<&'static str> {
    // Across the seam: the bytes before `mark` and as many after as a pattern that
    // starts before it can reach (a pattern is at most `overlap + 1` bytes long).
    let reach = held.len().min(overlap + 1).min(win.len() - kept);
    win[kept..kept + reach].copy_from_slice(&held[..reach]);
    let seam_start = mark - kept as u64;
    let from = usize::try_from(head_end.saturating_sub(seam_start))
        .unwrap_or(usize::MAX)
        .min(kept + reach);
    look.first_in(&win[..kept + reach], from, kept).or_else(|| {
        // Past `mark`: every hazard counts (`head_end` is at most `mark`), and no
        // copy of the turn's record can end by its start.
        let from = usize::try_from(head_end.saturating_sub(mark)).unwrap_or(usize::MAX);
        look.first_in(held, from.min(held.len()), 0)
    })
}

/// One hazard: its key, where the key sits in each of its needles, and its reason.
struct HazardSearch {
    key: Finder<'static>,
    needles: Vec<(&'static [u8], usize)>,
    why: &'static str,
}

impl HazardSearch {
    fn new(h: &Hazard) -> Self {
        let needles = h
            .needles
            .iter()
            .filter_map(|n| memchr::memmem::find(n, h.key).map(|at| (*n, at)))
            .collect();
        Self {
            key: Finder::new(h.key),
            needles,
            why: h.why,
        }
    }

    fn longest(&self) -> usize {
        self.needles
            .iter()
            .map(|(n, _)| n.len())
            .chain(std::iter::once(self.key.needle().len()))
            .max()
            .unwrap_or(0)
    }

    /// Whether the key's hit at `hit` counts: a whole needle stands around it, at or
    /// after `from`.
    fn confirms(&self, hay: &[u8], hit: usize, from: usize) -> bool {
        if hit < from {
            return false;
        }
        if self.needles.is_empty() {
            return true;
        }
        self.needles
            .iter()
            .any(|(n, at)| around(hay, hit, (n, *at)).is_some_and(|start| start >= from))
    }

    /// Whether a whole pattern lies in `hay[from..]`, by a pass of its own.
    fn found(&self, hay: &[u8], from: usize) -> bool {
        self.key
            .find_iter(&hay[from..])
            .any(|hit| self.confirms(hay, from + hit, from))
    }
}

/// How many bytes of the turn's needle the packed search looks for: as many as the
/// hazards' keys have (see [`Hazard`]).
const TURN_KEY: usize = 3;

/// The restart turn's needle, and the part of it the packed search looks for: the first
/// bytes of the turn's id, which are rare, where the needle's start (`"uuid":"`) is in
/// every record.
struct TurnSearch {
    needle: Finder<'static>,
    /// Where the key starts in the needle, and how long it is.
    key: (usize, usize),
}

impl TurnSearch {
    fn new(needle: &[u8], id: &[u8]) -> Self {
        let key = id
            .get(..TURN_KEY)
            .and_then(|k| memchr::memmem::find(needle, k))
            .map_or((0, needle.len()), |at| (at, TURN_KEY));
        Self {
            needle: Finder::new(needle).into_owned(),
            key,
        }
    }

    fn key(&self) -> &[u8] {
        &self.needle.needle()[self.key.0..self.key.0 + self.key.1]
    }

    /// Whether the key's hit at `hit` is the whole needle's, ending by `mark`.
    fn confirms(&self, hay: &[u8], hit: usize, mark: usize) -> bool {
        let needle = self.needle.needle();
        around(hay, hit, (needle, self.key.0)).is_some_and(|start| start + needle.len() <= mark)
    }
}

/// What one pass looks for: the hazards, in the order their reasons are preferred, then
/// the restart turn's needle.
struct Look {
    hazards: Vec<HazardSearch>,
    turn: Option<TurnSearch>,
    /// All keys at once: the hazards' (pattern `i` is hazard `i`'s), then the turn's.
    packed: Option<Searcher>,
}

impl Look {
    fn new(hazards: &[Hazard], turn: &[u8], id: &[u8]) -> Self {
        let hazards: Vec<HazardSearch> = hazards.iter().map(HazardSearch::new).collect();
        let turn = (!turn.is_empty()).then(|| TurnSearch::new(turn, id));
        let mut builder = Config::new().match_kind(MatchKind::LeftmostFirst).builder();
        for h in &hazards {
            builder.add(h.key.needle());
        }
        if let Some(t) = &turn {
            builder.add(t.key());
        }
        let packed = (builder.len() > 0).then(|| builder.build()).flatten();
        Self {
            hazards,
            turn,
            packed,
        }
    }

    fn longest(&self) -> usize {
        self.hazards
            .iter()
            .map(HazardSearch::longest)
            .chain(self.turn.iter().map(|t| t.needle.needle().len()))
            .max()
            .unwrap_or(1)
    }

    /// The reason of the first hazard (in their order) whose whole pattern lies in
    /// `hay[from..]`, else `turn_seen_before` if the turn's needle lies whole in
    /// `hay[..mark]`.
    fn first_in(&self, hay: &[u8], from: usize, mark: usize) -> Option<&'static str> {
        let rank = match &self.packed {
            Some(packed) => self.first_packed(packed, hay, from, mark),
            None => self.first_each(hay, from, mark),
        }?;
        Some(self.hazards.get(rank).map_or("turn_seen_before", |h| h.why))
    }

    /// [`Look::first_in`] by one pass of the packed searcher; the rank of the reason
    /// found (a hazard's index, or the number of hazards for the turn).
    fn first_packed(
        &self,
        packed: &Searcher,
        hay: &[u8],
        from: usize,
        mark: usize,
    ) -> Option<usize> {
        let mut best: Option<usize> = None;
        let mut pos = 0;
        while pos < hay.len() {
            let Some(hit) = packed.find_in(hay, Span::from(pos..hay.len())) else {
                break;
            };
            let at = hit.start();
            let rest = &hay[at..];
            for (i, h) in self.hazards.iter().enumerate() {
                if best.is_some_and(|b| b <= i) {
                    break;
                }
                if rest.starts_with(h.key.needle()) && h.confirms(hay, at, from) {
                    best = Some(i);
                }
            }
            if best == Some(0) {
                return best;
            }
            if best.is_none()
                && let Some(t) = &self.turn
                && rest.starts_with(t.key())
                && t.confirms(hay, at, mark)
            {
                best = Some(self.hazards.len());
            }
            pos = at + 1;
        }
        best
    }

    /// [`Look::first_packed`] by one pass per pattern.
    fn first_each(&self, hay: &[u8], from: usize, mark: usize) -> Option<usize> {
        if let Some(i) = self.hazards.iter().position(|h| h.found(hay, from)) {
            return Some(i);
        }
        let t = self.turn.as_ref()?;
        t.needle.find(&hay[..mark]).map(|_| self.hazards.len())
    }
}

fn scan_prefix_in<F: Read + Seek>(
    file: &mut F,
    (mark, end): (u64, u64),
    head_end: u64,
    (look, overlap): (&Look, usize),
    win: &mut [u8],
    held: Option<&[u8]>,
) -> io::Result<Result<(u64, u64), &'static str>> {
    // With the part after `mark` held, the file is read to `mark` only; the window then
    // ends with the last `overlap` bytes before `mark` (see [`scan_prefix`]).
    let end = if held.is_some() { mark.min(end) } else { end };
    file.seek(SeekFrom::Start(0))?;
    // The window: the last `overlap` bytes of the previous chunk, then the new chunk, so
    // a pattern cut by a chunk boundary is still found.
    let mut kept = 0usize;
    let mut at = 0u64;
    let mut newlines = 0u64;
    let mut before_mark = 0u64;
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
        // Each byte counted once: the part before `mark`, then the rest.
        let upto = usize::try_from(mark.saturating_sub(at))
            .unwrap_or(usize::MAX)
            .min(got);
        let first = memchr::memchr_iter(b'\n', &fresh[..upto]).count() as u64;
        if upto > 0 {
            before_mark = newlines + first;
        }
        newlines += first + memchr::memchr_iter(b'\n', &fresh[upto..]).count() as u64;
        let hay = &win[..kept + got];
        let hay_start = at - kept as u64;
        let from = usize::try_from(head_end.saturating_sub(hay_start))
            .unwrap_or(usize::MAX)
            .min(hay.len());
        // The turn's copy counts only before its own start (`mark`).
        let mark_in = usize::try_from(mark.saturating_sub(hay_start))
            .unwrap_or(usize::MAX)
            .min(hay.len());
        if let Some(why) = look.first_in(hay, from, mark_in) {
            return Ok(Err(why));
        }
        at += got as u64;
        let keep = overlap.min(kept + got);
        win.copy_within(kept + got - keep..kept + got, 0);
        kept = keep;
    }
    if mark >= end {
        before_mark = newlines;
    }
    Ok(Ok((before_mark, newlines)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HAZARDS: [Hazard; 3] = [
        Hazard {
            key: b":tr",
            needles: &[b"\"isSidechain\":true"],
            why: "sidechain",
        },
        Hazard {
            key: b"kgr",
            needles: &[b"in background with ID", b"moved to the background"],
            why: "background",
        },
        Hazard::plain(b"agent launched", "agent"),
    ];
    const TURN: &[u8] = b"\"uuid\":\"u-7\"";
    const ID: &[u8] = b"u-7";

    /// Pieces that make hits, near misses and overlaps of the patterns above.
    fn piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(b"\"isSidechain\":true".to_vec()),
            Just(b"\"isSidechain\":false".to_vec()),
            Just(b"background".to_vec()),
            Just(b"in background with ID".to_vec()),
            Just(b"moved to the background".to_vec()),
            Just(b"moved to the backgroun".to_vec()),
            Just(b"agent launched".to_vec()),
            Just(b"agent launche".to_vec()),
            Just(TURN.to_vec()),
            Just(b"\"uuid\":\"u-".to_vec()),
            // Keys without their needles.
            Just(b"u-7\"".to_vec()),
            Just(b":true".to_vec()),
            Just(b"kgr".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..40),
        ]
    }

    proptest! {
        /// One pass finds what a pass per pattern finds, with the same reason, for any
        /// window and any bounds.
        #[test]
        fn one_pass_agrees_with_a_pass_per_pattern(
            pieces in proptest::collection::vec(piece(), 0..40),
            from in 0usize..2000,
            mark in 0usize..2000,
        ) {
            let hay = pieces.concat();
            let (from, mark) = (from.min(hay.len()), mark.min(hay.len()));
            let look = Look::new(&HAZARDS, TURN, ID);
            let packed = look.packed.as_ref().expect("a packed searcher on this CPU");
            prop_assert_eq!(
                look.first_packed(packed, &hay, from, mark),
                look.first_each(&hay, from, mark)
            );
        }
    }

    /// What a prefix scan says: its counts, or why the read goes whole.
    type Said = Result<(u64, u64), &'static str>;

    /// The counts and the hazards of `[0, end)` by a read of the file, and by a read to
    /// `mark` with the rest held, as after a backward read that kept it.
    fn both_ways(hay: &[u8], (mark, end, head_end): (usize, usize, usize)) -> (Said, Said) {
        let look = Look::new(&HAZARDS, TURN, ID);
        let marks = (mark as u64, end as u64);
        let mut file = std::io::Cursor::new(hay);
        let read = count_and_look(&mut file, marks, head_end as u64, &look, None).unwrap();
        let held = Some(&hay[mark..end]);
        let mut file = std::io::Cursor::new(hay);
        let kept = count_and_look(&mut file, marks, head_end as u64, &look, held).unwrap();
        (read, kept)
    }

    proptest! {
        /// The part after `mark` read from memory counts the same newlines and finds a
        /// hazard where the file's read does (which one, when there are several, may
        /// differ: the first found is reported).
        #[test]
        fn the_part_held_is_looked_at_as_the_file_read_is(
            pieces in proptest::collection::vec(piece(), 0..40),
            newlines in proptest::collection::vec(0usize..2000, 0..8),
            cuts in (0usize..2000, 0usize..2000, 0usize..2000),
        ) {
            let mut hay = pieces.concat();
            for at in newlines {
                let at = at.min(hay.len());
                hay.insert(at, b'\n');
            }
            let mut cuts = [cuts.0, cuts.1, cuts.2].map(|c| c.min(hay.len()));
            cuts.sort_unstable();
            let [head_end, mark, end] = cuts;
            let (read, kept) = both_ways(&hay, (mark, end, head_end));
            match (read, kept) {
                (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
                (Err(_), Err(_)) => {}
                (a, b) => prop_assert!(false, "read {:?}, held {:?}", a, b),
            }
        }
    }

    #[test]
    fn a_pattern_across_the_start_of_the_held_part_is_found() {
        let hay = b"{\"a\":1}\n{\"isSidechain\":true}\n{\"b\":2}\n";
        let start = 10;
        // `mark` at every byte of the sidechain marker and around it.
        for mark in start - 2..start + 20 {
            let (read, kept) = both_ways(hay, (mark, hay.len(), 1));
            assert_eq!(read, Err("sidechain"), "mark {mark}");
            assert_eq!(kept, Err("sidechain"), "mark {mark}");
        }
        // Held, a copy of the turn's record counts only when it ends by `mark`.
        let hay = b"{}\n{\"uuid\":\"u-7\"}\n{}\n";
        for mark in 3..hay.len() {
            let (read, kept) = both_ways(hay, (mark, hay.len(), 1));
            assert_eq!(read.is_err(), 4 + TURN.len() <= mark, "mark {mark}");
            assert_eq!(kept, read, "mark {mark}");
        }
    }

    #[test]
    fn the_first_hazard_in_order_wins_and_bounds_hold() {
        let look = Look::new(&HAZARDS, TURN, ID);
        let hay = b"x agent launched y \"uuid\":\"u-7\" \"isSidechain\":true z";
        assert_eq!(look.first_in(hay, 0, hay.len()), Some("sidechain"));
        // The sidechain marker before `from` does not count; the turn's copy does only
        // before `mark`.
        let hay = b"\"isSidechain\":true \"uuid\":\"u-7\" background";
        assert_eq!(look.first_in(hay, 1, hay.len()), Some("turn_seen_before"));
        assert_eq!(look.first_in(hay, 1, 30), None);
        // A key's hit counts only with a whole needle around it.
        let hay = b"css: background: red; moved to the background.";
        assert_eq!(look.first_in(hay, 0, 0), Some("background"));
        assert_eq!(look.first_in(hay, 30, 0), None);
    }
}
