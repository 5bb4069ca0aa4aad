//! The daemon's [`Spill`]: parked sessions' saved form kept in a scratch file instead of
//! memory (most of what an idle session costs; see `reduce/park.rs`).
//!
//! The file is created in the state directory and unlinked at once: nothing is left to
//! clean up after a crash, and no other run reads it (a restart restores sessions from
//! the checkpoints, never from here). What is put is appended, through a small buffer
//! so a history read of thousands of files costs few writes. Once a file has grown past
//! [`ROLL_AT`] the next put starts a new one; an old file, and its disk space, go when
//! the last region in it is let go; at most [`MAX_FILES`] are open. If a write fails (a
//! full disk), what it held stays in memory, readable as before, and later puts are
//! refused, so they stay in memory too: nothing is lost.

use crate::reduce::{Shared, Spill, SpillAt, Spilled};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Bytes buffered before they are written.
const FLUSH_AT: usize = 64 * 1024;
/// Size past which a new file is started, so space let go is given back in time.
pub const ROLL_AT: u64 = 32 * 1024 * 1024;
/// Scratch files open at once, at most. A file lives while any region in it does, and one
/// long-idle session can hold one, so without a cap months of re-parking could pile up
/// disk space nobody sees (the files are unlinked). At the cap, parked sessions stay in
/// memory until an old file is let go.
pub const MAX_FILES: usize = 8;
const PREFIX: &str = "parked-";
const SUFFIX: &str = ".spill";

/// The scratch file parked sessions go to.
#[derive(Debug)]
pub struct SpillFile {
    dir: PathBuf,
    current: Mutex<Current>,
    /// [`ROLL_AT`], smaller in tests.
    roll_at: u64,
    /// A write failed: nothing more is taken.
    failed: AtomicBool,
    /// At [`MAX_FILES`] since the last put taken: logged once each time it is reached.
    capped: AtomicBool,
    /// Test only: every read back fails, as on a failing disk.
    unreadable: bool,
}

/// The file being appended to.
#[derive(Debug)]
struct Current {
    region: Arc<Region>,
    /// The handle of the [`SpillAt`]s put in `region` (it holds `region` too).
    handle: Shared,
    /// Files started so far, for unique names.
    started: u64,
    /// The files before `region`, while anything still reads from them.
    older: Vec<Weak<Region>>,
}

impl Current {
    fn new(region: Region, started: u64) -> Current {
        let region = Arc::new(region);
        Current {
            handle: Shared::new(region.clone()),
            region,
            started,
            older: Vec::new(),
        }
    }

    /// Puts go to `region` from now on.
    fn roll_to(&mut self, region: Region) {
        let region = Arc::new(region);
        self.handle = Shared::new(region.clone());
        let old = std::mem::replace(&mut self.region, region);
        self.older.push(Arc::downgrade(&old));
        self.started += 1;
    }
}

/// One scratch file and what is not written to it yet.
#[derive(Debug)]
struct Region {
    file: File,
    tail: Mutex<Tail>,
    /// Test only: every read back fails, as on a failing disk.
    unreadable: AtomicBool,
}

#[derive(Debug, Default)]
struct Tail {
    /// Bytes written to the file.
    written: u64,
    /// Bytes after those, not written yet (all of them once a write failed).
    buffer: Vec<u8>,
    failed: bool,
}

/// Bytes put: where they are, in which file. Sixteen bytes, so that with the `Arc`'s
/// counts a handle is a 32-byte allocation (there is one per cold file and one per
/// parked file: 200,000 at 100,000 files); a region is never much past [`ROLL_AT`], so
/// its offsets fit 32 bits, and a put that would not is refused (it stays in memory).
#[derive(Debug)]
struct Put {
    region: Arc<Region>,
    at: u32,
    len: u32,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding it leaves plain bytes, still consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SpillFile {
    /// A spill in `dir` (the state directory, which the caller holds the lock of: any
    /// scratch file there is a crashed run's, and is removed).
    pub fn new(dir: &Path) -> io::Result<SpillFile> {
        remove_stale(dir);
        let region = Region::create(dir, 0, false)?;
        Ok(SpillFile {
            dir: dir.to_path_buf(),
            current: Mutex::new(Current::new(region, 1)),
            roll_at: ROLL_AT,
            failed: AtomicBool::new(false),
            capped: AtomicBool::new(false),
            unreadable: false,
        })
    }

    /// Test only: with `yes`, nothing put can be read back (a failing disk).
    #[must_use]
    pub fn unreadable(mut self, yes: bool) -> SpillFile {
        self.unreadable = yes;
        lock(&self.current)
            .region
            .unreadable
            .store(yes, Ordering::Relaxed);
        self
    }

    fn region(&self) -> Option<(Arc<Region>, Shared)> {
        let mut current = lock(&self.current);
        if lock(&current.region.tail).end() >= self.roll_at {
            current.older.retain(|w| w.strong_count() > 0);
            if current.older.len() + 1 >= MAX_FILES {
                if !self.capped.swap(true, Ordering::Relaxed) {
                    tracing::info!(dir = %self.dir.display(), files = MAX_FILES,
                        "Spill files at their cap; newly parked sessions stay in memory until an old file is let go.");
                }
                return None;
            }
            self.capped.store(false, Ordering::Relaxed);
            match Region::create(&self.dir, current.started, self.unreadable) {
                Ok(r) => current.roll_to(r),
                Err(e) => {
                    tracing::warn!(dir = %self.dir.display(), error = %e,
                        "Cannot start a new spill file; parked sessions stay in memory.");
                    self.failed.store(true, Ordering::Relaxed);
                    return None;
                }
            }
        }
        Some((current.region.clone(), current.handle.clone()))
    }

    /// Appends `bytes` to the current file: the file, its handle, and where they lie in
    /// it.
    fn take(&self, bytes: &[u8]) -> Option<(Arc<Region>, Shared, u32, u32)> {
        if self.failed.load(Ordering::Relaxed) {
            return None;
        }
        let (region, handle) = self.region()?;
        let (at, len) = {
            let mut tail = lock(&region.tail);
            let (Ok(at), Ok(len)) = (u32::try_from(tail.end()), u32::try_from(bytes.len())) else {
                return None;
            };
            tail.buffer.extend_from_slice(bytes);
            if tail.buffer.len() >= FLUSH_AT
                && let Err(e) = region.flush(&mut tail)
            {
                tracing::warn!(dir = %self.dir.display(), error = %e,
                    "Cannot write the spill file; parked sessions stay in memory.");
                self.failed.store(true, Ordering::Relaxed);
            }
            (at, len)
        };
        Some((region, handle, at, len))
    }
}

impl Spill for SpillFile {
    fn put(&self, bytes: &[u8]) -> Option<Arc<dyn Spilled>> {
        let (region, _, at, len) = self.take(bytes)?;
        Some(Arc::new(Put { region, at, len }))
    }

    /// The file itself is the handle: a kept text costs no allocation of its own.
    fn put_at(&self, bytes: &[u8]) -> Option<SpillAt> {
        let (_, file, at, len) = self.take(bytes)?;
        Some(SpillAt { file, at, len })
    }
}

// See `Put`: a handle's allocation is 32 bytes with the `Arc`'s two counts.
const _: () = assert!(size_of::<Put>() <= 16);

impl Spilled for Put {
    fn read(&self) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len as usize);
        self.read_into(&mut out).then_some(out)
    }

    fn read_into(&self, out: &mut Vec<u8>) -> bool {
        self.read_range_into(0, self.len as usize, out)
    }

    fn read_range_into(&self, from: usize, len: usize, out: &mut Vec<u8>) -> bool {
        if from
            .checked_add(len)
            .is_none_or(|end| end > self.len as usize)
        {
            return false;
        }
        self.region
            .read_range_into(self.at as usize + from, len, out)
    }
}

/// A whole scratch file, as the handle of the [`SpillAt`]s in it: read by range, from
/// its first byte.
impl Spilled for Region {
    /// Never read whole: what is in it is read by the ranges put.
    fn read(&self) -> Option<Vec<u8>> {
        None
    }

    fn read_into(&self, _out: &mut Vec<u8>) -> bool {
        false
    }

    fn read_range_into(&self, from: usize, len: usize, out: &mut Vec<u8>) -> bool {
        if self.unreadable.load(Ordering::Relaxed) {
            tracing::error!("Cannot read the spill file back: a test said so.");
            return false;
        }
        let at = from as u64;
        {
            let tail = lock(&self.tail);
            if at.saturating_add(len as u64) > tail.end() {
                return false;
            }
            if at >= tail.written {
                // Not written yet: from the buffer.
                let Ok(i) = usize::try_from(at - tail.written) else {
                    return false;
                };
                return match tail.buffer.get(i..i + len) {
                    Some(b) => {
                        out.extend_from_slice(b);
                        true
                    }
                    None => false,
                };
            }
        }
        // Read straight into `out`: no buffer of its own per read.
        let start = out.len();
        out.resize(start + len, 0);
        match self.file.read_exact_at(&mut out[start..], at) {
            Ok(()) => true,
            Err(e) => {
                out.truncate(start);
                tracing::error!(error = %e, "Cannot read the spill file back.");
                false
            }
        }
    }
}

impl Tail {
    fn end(&self) -> u64 {
        self.written + self.buffer.len() as u64
    }
}

impl Region {
    fn create(dir: &Path, n: u64, unreadable: bool) -> io::Result<Region> {
        let path = dir.join(format!("{PREFIX}{}-{n}{SUFFIX}", std::process::id()));
        // `create_new`: never opens what is there already (a link planted in its place).
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        std::fs::remove_file(&path)?;
        Ok(Region {
            file,
            tail: Mutex::new(Tail::default()),
            unreadable: AtomicBool::new(unreadable),
        })
    }

    /// Writes the buffer out; if that fails the buffer is kept for good (the caller logs).
    fn flush(&self, tail: &mut Tail) -> io::Result<()> {
        if tail.failed {
            return Err(io::Error::other("an earlier write failed"));
        }
        match self.file.write_all_at(&tail.buffer, tail.written) {
            Ok(()) => {
                tail.written += tail.buffer.len() as u64;
                tail.buffer.clear();
                // One large put must not keep a large buffer for good.
                tail.buffer.shrink_to(FLUSH_AT);
                Ok(())
            }
            Err(e) => {
                tail.failed = true;
                tail.buffer.shrink_to_fit();
                Err(e)
            }
        }
    }
}

/// Removes scratch files a crashed run left between creating and unlinking them.
fn remove_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(PREFIX) && name.ends_with(SUFFIX) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_files(dir: &Path) -> usize {
        std::fs::read_dir(dir).unwrap().count()
    }

    #[test]
    fn what_is_put_reads_back_before_and_after_it_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let spill = SpillFile::new(dir.path()).unwrap();
        assert_eq!(count_files(dir.path()), 0, "the scratch file is unlinked");
        let puts: Vec<(Vec<u8>, Arc<dyn Spilled>)> = (0..3000u32)
            .map(|i| {
                let bytes = format!(
                    "[{{\"n\":{i},\"pad\":\"{}\"}}]",
                    "x".repeat(i as usize % 97)
                )
                .into_bytes();
                let put = spill.put(&bytes).unwrap();
                (bytes, put)
            })
            .collect();
        let written = lock(&lock(&spill.current).region.tail).written;
        assert!(
            written > 0,
            "more than a buffer was put, so some was written"
        );
        for (bytes, put) in &puts {
            assert_eq!(put.read().as_deref(), Some(&bytes[..]));
        }
        // Many reads into one buffer (a `status` answer): each appended, in order, from
        // the file and from the buffer not written yet alike.
        let mut all = b"head".to_vec();
        let mut want = all.clone();
        for (bytes, put) in &puts {
            assert!(put.read_into(&mut all));
            want.extend_from_slice(bytes);
        }
        assert_eq!(all, want);
        // A part of what was put, and nothing past its end (the next put's bytes).
        for (bytes, put) in puts.iter().step_by(7) {
            let mut part = Vec::new();
            let (from, len) = (bytes.len() / 3, bytes.len() / 2);
            assert!(put.read_range_into(from, len, &mut part));
            assert_eq!(part, bytes[from..from + len]);
            assert!(!put.read_range_into(from, bytes.len(), &mut part));
            assert_eq!(part, bytes[from..from + len], "left as it was");
        }
        let gone = SpillFile::new(dir.path()).unwrap().unreadable(true);
        let put = gone.put(b"lost").unwrap();
        assert!(!put.read_into(&mut all), "unreadable");
        assert_eq!(all, want, "left as it was");
    }

    #[test]
    fn texts_put_at_share_their_file_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let spill = SpillFile::new(dir.path()).unwrap();
        let puts: Vec<(Vec<u8>, SpillAt)> = (0..2000u32)
            .map(|i| {
                let bytes = format!("{{\"n\":{i},\"pad\":\"{}\"}}", "y".repeat(i as usize % 89))
                    .into_bytes();
                let at = spill.put_at(&bytes).unwrap();
                (bytes, at)
            })
            .collect();
        assert!(
            lock(&lock(&spill.current).region.tail).written > 0,
            "some written"
        );
        for (bytes, at) in &puts {
            assert!(
                Shared::ptr_eq(&at.file, &puts[0].1.file),
                "one handle for all"
            );
            assert_eq!(at.len as usize, bytes.len());
            let mut out = b"x".to_vec();
            assert!(
                at.file
                    .read_range_into(at.at as usize, at.len as usize, &mut out)
            );
            assert_eq!(
                out[1..],
                bytes[..],
                "read back, from the file or the buffer"
            );
        }
        // Nothing past what was put, whether written or not.
        let (_, last) = puts.last().unwrap();
        let mut out = Vec::new();
        assert!(
            !last
                .file
                .read_range_into(last.at as usize, last.len as usize + 1, &mut out)
        );
        assert!(out.is_empty(), "left as it was");
        assert_eq!(last.file.read(), None, "the file is read by range only");
        // Unreadable, as on a failing disk: refused, `out` as it was.
        let gone = SpillFile::new(dir.path()).unwrap().unreadable(true);
        let at = gone.put_at(b"lost").unwrap();
        assert!(
            !at.file
                .read_range_into(at.at as usize, at.len as usize, &mut out)
        );
        assert!(out.is_empty());
    }

    #[test]
    fn a_full_file_starts_another_and_old_regions_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let spill = SpillFile::new(dir.path()).unwrap();
        let big = vec![b'a'; 1024 * 1024];
        let first = spill.put(b"first").unwrap();
        let mut last = None;
        for _ in 0..40 {
            last = spill.put(&big);
        }
        let after = spill.put(b"after the roll").unwrap();
        assert_eq!(lock(&spill.current).started, 2, "one new file");
        assert_eq!(first.read().as_deref(), Some(&b"first"[..]));
        assert_eq!(last.unwrap().read().map(|b| b.len()), Some(big.len()));
        assert_eq!(after.read().as_deref(), Some(&b"after the roll"[..]));
    }

    #[test]
    fn at_the_cap_puts_are_refused_until_an_old_file_is_let_go() {
        let dir = tempfile::tempdir().unwrap();
        let mut spill = SpillFile::new(dir.path()).unwrap();
        spill.roll_at = 4 * FLUSH_AT as u64;
        let big = vec![b'c'; spill.roll_at as usize];
        // Each put fills a file; the next one starts another. Keep every handle.
        let mut held: Vec<Arc<dyn Spilled>> = (0..MAX_FILES)
            .map(|_| spill.put(&big).expect("under the cap"))
            .collect();
        assert!(spill.put(b"one more").is_none(), "the cap is reached");
        assert_eq!(held[0].read().map(|b| b.len()), Some(big.len()));
        held.remove(0); // the oldest file goes with its only region
        let after = spill.put(b"one more").expect("room again");
        assert_eq!(after.read().as_deref(), Some(&b"one more"[..]));
        assert_eq!(lock(&spill.current).started as usize, MAX_FILES + 1);
    }

    #[test]
    fn a_failed_write_keeps_the_bytes_and_refuses_more() {
        let dir = tempfile::tempdir().unwrap();
        let spill = SpillFile::new(dir.path()).unwrap();
        // A file opened read-only stands in for a full disk: every write fails.
        let ro = OpenOptions::new().read(true).open(dir.path()).unwrap();
        *lock(&spill.current) = Current::new(
            Region {
                file: ro,
                tail: Mutex::new(Tail::default()),
                unreadable: AtomicBool::new(false),
            },
            1,
        );
        let big = vec![b'z'; FLUSH_AT + 10];
        let put = spill.put(&big).expect("taken: the write fails only after");
        assert_eq!(put.read(), Some(big), "kept in memory, readable");
        assert!(spill.put(b"more").is_none(), "refused: stays in memory");
    }

    #[test]
    fn a_crashed_runs_scratch_file_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("parked-1234-0.spill"), b"old").unwrap();
        std::fs::write(dir.path().join("state.json"), b"kept").unwrap();
        let _spill = SpillFile::new(dir.path()).unwrap();
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["state.json".to_string()]);
    }
}
