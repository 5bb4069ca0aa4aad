//! The v1 event stream: one JSON object per line.
//!
//! [`JsonlSink`] writes lines to any writer (`baton replay`). The daemon writes through
//! [`LineOut`]: to stdout ([`Lines`]), or to a file ([`EventFile`]), where every append
//! lands as a whole line or is undone (the file is cut back to where the line began), so
//! a full disk never leaves a torn line for the next one to be glued onto. A torn last
//! line found when the file is opened (a crash mid-write, or an older baton) is cut off
//! before anything is appended, and reported ([`LineOut::take_repaired`]).

use crate::model::Event;
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

pub struct JsonlSink<W: Write> {
    out: W,
}

impl<W: Write> JsonlSink<W> {
    pub fn new(out: W) -> Self {
        JsonlSink { out }
    }

    /// Writes one event line.
    pub fn write(&mut self, ev: &Event) -> io::Result<()> {
        let mut line = ev.to_json();
        line.push('\n');
        self.out.write_all(line.as_bytes())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Where the daemon's event lines go.
pub trait LineOut: Send {
    /// Appends one line (newline included): all of it, or (where that can be undone)
    /// none of it.
    fn append(&mut self, line: &[u8]) -> io::Result<()>;

    fn flush(&mut self) -> io::Result<()>;

    /// Bytes of a torn last line cut off when the file was opened (once).
    fn take_repaired(&mut self) -> Option<u64> {
        None
    }

    /// What to call it in messages ("the event file /x", "stdout").
    fn name(&self) -> String;

    /// Whether appending a line of `len` bytes now would not wait for a reader: a
    /// regular file, or a pipe or socket with room for it. Then the daemon's core may
    /// write it itself rather than wake the event writer's thread. False when unsure.
    fn ready(&self, _len: usize) -> bool {
        false
    }

    /// Whether `e` means no one can ever read it again (stdout's reader exited), so
    /// there is nothing to wait for.
    fn gone(&self, _e: &io::Error) -> bool {
        false
    }
}

/// Whether a write of `len` bytes to `fd` would not wait now: always for a regular
/// file; for a pipe or socket, if it has room (at most `PIPE_BUF` bytes, which one
/// free buffer of a pipe always takes whole); never for anything else (a terminal may
/// be held with ^S).
pub fn writable_now(fd: std::os::fd::BorrowedFd<'_>, len: usize) -> bool {
    match Takes::of(fd) {
        Takes::Always => true,
        Takes::IfRoom => has_room(fd, len),
        Takes::Never => false,
    }
}

/// How a descriptor takes a line without waiting ([`writable_now`]), by its file type,
/// which an open descriptor keeps: stdout's is looked at once, not for every event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takes {
    Always,
    IfRoom,
    Never,
}

impl Takes {
    fn of(fd: std::os::fd::BorrowedFd<'_>) -> Takes {
        use rustix::fs::FileType;
        match rustix::fs::fstat(fd).map(|st| FileType::from_raw_mode(st.st_mode)) {
            Ok(FileType::RegularFile) => Takes::Always,
            Ok(FileType::Fifo | FileType::Socket) => Takes::IfRoom,
            _ => Takes::Never,
        }
    }
}

/// Whether a pipe or socket takes `len` bytes whole now.
fn has_room(fd: std::os::fd::BorrowedFd<'_>, len: usize) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec};
    const PIPE_BUF: usize = 4096;
    if len > PIPE_BUF {
        return false;
    }
    let mut p = [PollFd::new(&fd, PollFlags::OUT)];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(rustix::event::poll(&mut p, Some(&zero)), Ok(1)) && p[0].revents() == PollFlags::OUT
}

/// A stream that cannot be undone (stdout, a pipe).
pub struct Lines<W: Write + Send> {
    out: W,
    name: &'static str,
    /// Whether a line of so many bytes can be written now ([`LineOut::ready`]).
    ready: Option<fn(usize) -> bool>,
}

impl<W: Write + Send> Lines<W> {
    pub fn new(out: W, name: &'static str) -> Self {
        Lines {
            out,
            name,
            ready: None,
        }
    }
}

impl Lines<io::BufWriter<io::Stdout>> {
    /// Stdout, buffered: each line goes out whole at its flush.
    pub fn stdout() -> Self {
        use std::os::fd::AsFd;
        Lines {
            out: io::BufWriter::new(io::stdout()),
            name: "stdout",
            ready: match Takes::of(io::stdout().as_fd()) {
                Takes::Always => Some(|_| true),
                Takes::IfRoom => Some(|len| has_room(io::stdout().as_fd(), len)),
                Takes::Never => None,
            },
        }
    }
}

impl<W: Write + Send> LineOut for Lines<W> {
    fn append(&mut self, line: &[u8]) -> io::Result<()> {
        self.out.write_all(line)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn name(&self) -> String {
        self.name.to_owned()
    }

    fn ready(&self, len: usize) -> bool {
        self.ready.is_some_and(|ready| ready(len))
    }

    fn gone(&self, e: &io::Error) -> bool {
        e.kind() == io::ErrorKind::BrokenPipe
    }
}

/// A torn last line longer than this is not cut (no event line is near it, so the file
/// is likely not ours to cut): it is ended with a newline instead.
const MAX_TORN: u64 = 64 * 1024;

/// The `--events` file. Opening it may fail for reasons that pass (no permission yet, no
/// space to create it, a read-only mount): then each append tries again, and fails with
/// the reason until it works.
pub struct EventFile {
    path: PathBuf,
    file: Option<File>,
    /// A regular file, whose length can be cut back; not a device or a pipe.
    regular: bool,
    /// Where a failed append began, when cutting it off failed too: cut before the next.
    torn_at: Option<u64>,
    repaired: Option<u64>,
}

impl EventFile {
    /// Opens `path` for appending, creating it, after cutting a torn last line. A path
    /// that cannot be a file (its directory is missing, it is a directory) is an error;
    /// any other failure leaves it to be opened at the first append.
    pub fn open(path: &Path) -> io::Result<EventFile> {
        let mut f = EventFile {
            path: path.to_path_buf(),
            file: None,
            regular: true,
            torn_at: None,
            repaired: None,
        };
        match f.file() {
            Ok(_) => Ok(f),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound
                        | io::ErrorKind::IsADirectory
                        | io::ErrorKind::NotADirectory
                ) =>
            {
                Err(e)
            }
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "The event file cannot be opened yet.");
                Ok(f)
            }
        }
    }

    /// The open file, opened (and repaired) first if need be.
    fn file(&mut self) -> io::Result<&mut File> {
        if self.file.is_none() {
            let (mut file, regular) = open_file(&self.path)?;
            if regular {
                self.repaired = repair(&mut file, &self.path)?;
            }
            self.regular = regular;
            self.file = Some(file);
        }
        self.file
            .as_mut()
            .ok_or_else(|| io::Error::other("the event file is not open"))
    }
}

/// Opens for appending: a regular file (or a new one) also for reading, to find a torn
/// last line; a device or a pipe as it is.
fn open_file(path: &Path) -> io::Result<(File, bool)> {
    if let Ok(m) = std::fs::metadata(path)
        && !m.is_file()
        && !m.is_dir()
    {
        return Ok((OpenOptions::new().append(true).open(path)?, false));
    }
    match OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
    {
        Ok(f) => Ok((f, true)),
        // Writable but not readable: appended to all the same, unrepaired.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            let f = OpenOptions::new().append(true).create(true).open(path)?;
            Ok((f, true))
        }
        Err(e) => Err(e),
    }
}

/// Cuts a torn last line off (a write that never finished); returns its length.
fn repair(file: &mut File, path: &Path) -> io::Result<Option<u64>> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(None);
    }
    let mut last = [0u8];
    if file.read_exact_at(&mut last, len - 1).is_err() {
        // Not readable (opened for appending only): nothing to learn.
        return Ok(None);
    }
    if last[0] == b'\n' {
        return Ok(None);
    }
    let start = len.saturating_sub(MAX_TORN);
    let mut tail = vec![0u8; usize::try_from(len - start).unwrap_or(0)];
    file.read_exact_at(&mut tail, start)?;
    match memchr::memrchr(b'\n', &tail) {
        Some(p) => {
            let cut = start + p as u64 + 1;
            file.set_len(cut)?;
            Ok(Some(len - cut))
        }
        None if start == 0 => {
            file.set_len(0)?;
            Ok(Some(len))
        }
        None => {
            tracing::warn!(path = %path.display(), "The event file ends in more than 64 KiB without a line end; ending it with one rather than cutting it.");
            file.write_all(b"\n")?;
            Ok(Some(0))
        }
    }
}

impl LineOut for EventFile {
    fn ready(&self, len: usize) -> bool {
        use std::os::fd::AsFd;
        // `regular` is the open file's: a regular file always takes a line.
        self.torn_at.is_none()
            && self
                .file
                .as_ref()
                .is_some_and(|f| self.regular || writable_now(f.as_fd(), len))
    }

    fn append(&mut self, line: &[u8]) -> io::Result<()> {
        let torn_at = self.torn_at.take();
        let regular = self.regular;
        let path = self.path.clone();
        let file = self.file()?;
        if !regular {
            return file.write_all(line);
        }
        if let Some(at) = torn_at
            && let Err(e) = cut_back(file, at)
        {
            self.torn_at = Some(at);
            return Err(e);
        }
        let start = file.metadata()?.len();
        let Err(e) = file.write_all(line) else {
            return Ok(());
        };
        // A short write or ENOSPC: back to the last whole line.
        let cut = cut_back(file, start);
        // Someone deleted or replaced the file to make room: the open one is no longer
        // theirs to see, and keeps its blocks. The next try opens the path again.
        let moved = match (file.metadata(), std::fs::metadata(&path)) {
            (Ok(open), Ok(named)) => (open.dev(), open.ino()) != (named.dev(), named.ino()),
            (Ok(_), Err(_)) => true,
            (Err(_), _) => false,
        };
        if moved {
            tracing::debug!(path = %path.display(), "The event file was replaced or removed; opening it again at the next try.");
            self.file = None;
        } else if let Err(c) = cut {
            tracing::debug!(path = %path.display(), error = %c, "Cannot cut a failed write back yet.");
            self.torn_at = Some(start);
        }
        Err(e)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn take_repaired(&mut self) -> Option<u64> {
        self.repaired.take()
    }

    fn name(&self) -> String {
        format!("the event file {}", self.path.display())
    }
}

/// Cuts `file` back to `len` if it grew past it.
fn cut_back(file: &File, len: u64) -> io::Result<()> {
    if file.metadata()?.len() > len {
        file.set_len(len)?;
    }
    Ok(())
}

/// The event stream as `status` shows it while it cannot be written.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Blocked {
    /// Always `"blocked"`.
    pub state: &'static str,
    /// Since when (RFC 3339).
    pub since: String,
    /// What cannot be written ("the event file /x").
    pub target: String,
    /// Why, as the system said it.
    pub error: String,
    /// Events waiting to be written, in order.
    pub waiting: usize,
}

/// Whether the event stream is being written; set by the writer, read by `status`.
#[derive(Debug, Default)]
pub struct StreamHealth(Mutex<Option<Blocked>>);

impl StreamHealth {
    pub fn set(&self, b: Option<Blocked>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = b;
    }

    pub fn get(&self) -> Option<Blocked> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::fs;
    use std::os::fd::AsFd;

    /// A regular file always takes a line; a pipe while it has room for it whole; a
    /// character device (a terminal, say) is never written without waiting.
    #[test]
    fn a_line_is_written_at_once_only_where_it_cannot_wait() {
        let tmp = tempfile::tempdir().unwrap();
        let file = fs::File::create(tmp.path().join("e.jsonl")).unwrap();
        assert_eq!(Takes::of(file.as_fd()), Takes::Always);
        assert!(writable_now(file.as_fd(), 1 << 20));
        let null = fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .unwrap();
        assert_eq!(Takes::of(null.as_fd()), Takes::Never);
        assert!(!writable_now(null.as_fd(), 10));
        let (reader, mut writer) = io::pipe().unwrap();
        assert_eq!(Takes::of(writer.as_fd()), Takes::IfRoom);
        assert!(writable_now(writer.as_fd(), 100));
        assert!(
            !writable_now(writer.as_fd(), 4097),
            "more than one pipe buffer"
        );
        // The pipe filled (whatever its size): nothing more goes without waiting.
        rustix::io::ioctl_fionbio(&writer, true).unwrap();
        while writer.write(&[b'x'; 512]).is_ok() {}
        assert!(!writable_now(writer.as_fd(), 1));
        drop(reader);
    }

    #[test]
    fn a_torn_last_line_is_cut_and_whole_lines_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("e.jsonl");
        std::fs::write(&p, b"{\"a\":1}\n{\"b\":").unwrap();
        let mut f = EventFile::open(&p).unwrap();
        assert_eq!(f.take_repaired(), Some(5));
        assert_eq!(f.take_repaired(), None);
        f.append(b"{\"c\":3}\n").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"{\"a\":1}\n{\"c\":3}\n");
        // Whole from the start: nothing to repair.
        let mut f = EventFile::open(&p).unwrap();
        assert_eq!(f.take_repaired(), None);
        // No line end at all: the whole file was one torn line.
        std::fs::write(&p, b"{\"b\":").unwrap();
        let mut f = EventFile::open(&p).unwrap();
        assert_eq!(f.take_repaired(), Some(5));
        assert_eq!(std::fs::read(&p).unwrap(), b"");
    }

    /// A file deleted to make room while writes fail: the next append makes it again.
    #[test]
    fn a_file_removed_while_failing_is_opened_again() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("e.jsonl");
        let mut f = EventFile::open(&p).unwrap();
        f.append(b"{\"a\":1}\n").unwrap();
        std::fs::remove_file(&p).unwrap();
        // Stands in for a write that failed (ENOSPC) after the removal.
        f.file = Some(OpenOptions::new().read(true).open(tmp.path()).unwrap());
        assert!(f.append(b"{\"b\":2}\n").is_err());
        f.append(b"{\"c\":3}\n").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"{\"c\":3}\n");
    }

    #[test]
    fn a_missing_directory_is_an_error_at_open_and_dev_full_fails_at_the_append() {
        let tmp = tempfile::tempdir().unwrap();
        let e = EventFile::open(&tmp.path().join("no/such/dir/e.jsonl"))
            .err()
            .unwrap();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(EventFile::open(tmp.path()).is_err(), "a directory");
        let mut full = EventFile::open(Path::new("/dev/full")).unwrap();
        let e = full.append(b"{}\n").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(28), "{e}");
    }
}
