//! The reader of what Claude Code publishes besides its transcripts
//! (shared/docs/transcript-formats.md, Part F.1 and F.2): the session registry
//! (`<config dir>/sessions/<pid>.json`) and background jobs
//! (`<config dir>/jobs/<id>/state.json`), next to each Claude root named `projects`.
//!
//! One thread lists those directories every [`EVERY`] (they hold a file per live
//! process, so a listing costs little), reads a file whole when its size, mtime or inode
//! changed, and sends the core a [`Hint::Signal`] when what a file says changed. It
//! never touches reduce state: the core applies the signal (the one owner). A file that
//! does not parse (half-written, replaced mid-read) is retried on its next change; a
//! registry file whose pid is dead or is another process (`procStart`) is stale: ignored
//! and counted. No registry directory (older versions, another machine): nothing is
//! sent and everything works from the transcript alone.

use crate::process::same_process;
// The index of live entries is in `crate::process`, below `focus`, which asks it.
pub use crate::process::{Index, Live, index};
use crate::provider::claude::{jobs, registry};
use crate::provider::signal::{MAX_SIGNAL_FILE, Signal, SignalKind};
use crate::shutdown::Shutdown;
use crate::watch::{Hint, HintTx, Root};
use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often the directories are listed.
pub const EVERY: Duration = Duration::from_millis(200);
/// How often a live registry file's process is looked at again while the file stays
/// the same (a SIGKILLed process leaves its file behind).
const RECHECK: Duration = Duration::from_secs(2);

/// Where a Claude config directory keeps what it publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dirs {
    pub sessions: PathBuf,
    pub jobs: PathBuf,
}

/// The registry and job directories beside every Claude root named `projects`.
pub fn dirs_of(roots: &[Root]) -> Vec<Dirs> {
    let mut out: Vec<Dirs> = Vec::new();
    for r in roots {
        if r.provider != Some(crate::model::ProviderKind::Claude)
            || r.path.file_name().is_none_or(|n| n != "projects")
        {
            continue;
        }
        let Some(base) = r.path.parent() else {
            continue;
        };
        let d = Dirs {
            sessions: base.join("sessions"),
            jobs: base.join("jobs"),
        };
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// Counters for the logs.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub read: u64,
    pub unreadable: u64,
    pub stale: u64,
    pub sent: u64,
}

#[derive(Debug)]
struct Known {
    stamp: (u64, i64, i64, u64),
    /// The signal last sent for this file.
    sent: Option<SignalKind>,
    /// For a registry file: its process, and when it was last looked at.
    process: Option<(u32, Option<String>)>,
    checked: Instant,
    alive: bool,
    session: Option<String>,
}

pub struct Reader {
    dirs: Vec<Dirs>,
    hints: HintTx,
    known: HashMap<PathBuf, Known>,
    index: Index,
    pub counts: Counts,
}

impl Reader {
    pub fn new(dirs: Vec<Dirs>, hints: HintTx, index: Index) -> Self {
        Reader {
            dirs,
            hints,
            known: HashMap::new(),
            index,
            counts: Counts::default(),
        }
    }

    /// Starts the reader's thread, if there is anything to read; it stops at `stop`.
    pub fn spawn(self, stop: Shutdown) -> Option<std::thread::JoinHandle<()>> {
        if self.dirs.is_empty() {
            return None;
        }
        let mut me = self;
        std::thread::Builder::new()
            .name("baton-registry".to_owned())
            .spawn(move || {
                while !stop.is_stopped() {
                    if !me.pass(Instant::now()) {
                        break;
                    }
                    if stop.wait_timeout(EVERY) {
                        break;
                    }
                }
                let c = me.counts;
                tracing::info!(
                    read = c.read,
                    unreadable = c.unreadable,
                    stale = c.stale,
                    signals = c.sent,
                    "Registry reader stopped."
                );
            })
            .map_err(|e| tracing::warn!(error = %e, "Cannot start the registry reader; waits and ends come from the transcripts alone."))
            .ok()
    }

    /// One look at every directory; false once the core has gone.
    pub fn pass(&mut self, now: Instant) -> bool {
        let mut present: Vec<PathBuf> = Vec::new();
        let mut out: Vec<Signal> = Vec::new();
        for d in self.dirs.clone() {
            if let Ok(list) = fs::read_dir(&d.sessions) {
                for e in list.flatten() {
                    let name = e.file_name();
                    if !name.to_str().is_some_and(registry::is_entry_name) {
                        continue;
                    }
                    let path = e.path();
                    self.registry_file(&path, now, &mut out);
                    present.push(path);
                }
            }
            if let Ok(list) = fs::read_dir(&d.jobs) {
                for e in list.flatten() {
                    let name = e.file_name();
                    let Some(id) = name.to_str().filter(|n| jobs::is_job_id(n)) else {
                        continue;
                    };
                    let path = e.path().join("state.json");
                    self.job_file(id, &path, &mut out);
                    present.push(path);
                }
            }
        }
        if present.len() != self.known.len() {
            let keep: std::collections::HashSet<&PathBuf> = present.iter().collect();
            let gone: Vec<PathBuf> = self
                .known
                .keys()
                .filter(|p| !keep.contains(p))
                .cloned()
                .collect();
            for p in gone {
                if let Some(k) = self.known.remove(&p) {
                    self.unindex(&k);
                }
            }
        }
        for s in out {
            self.counts.sent += 1;
            if !self.hints.send(Hint::Signal(Box::new(s))) {
                return false;
            }
        }
        true
    }

    fn unindex(&self, k: &Known) {
        if let (Some(s), Ok(mut ix)) = (&k.session, self.index.lock()) {
            ix.remove(s);
        }
    }

    fn registry_file(&mut self, path: &Path, now: Instant, out: &mut Vec<Signal>) {
        let Some(stamp) = stamp(path) else { return };
        if let Some(k) = self.known.get_mut(path)
            && k.stamp == stamp
        {
            // Unchanged: only whether its process still lives.
            if k.alive && now.duration_since(k.checked) >= RECHECK {
                k.checked = now;
                if let Some((pid, started)) = &k.process
                    && !same_process(*pid, started.as_deref())
                {
                    k.alive = false;
                    k.sent = None;
                    self.counts.stale += 1;
                    let k = self.known.get(path);
                    if let Some(k) = k {
                        self.unindex(k);
                    }
                }
            }
            return;
        }
        let Some(bytes) = read_small(path) else {
            return;
        };
        self.counts.read += 1;
        let prev = self.known.remove(path);
        let sent_before = prev.as_ref().and_then(|k| k.sent.clone());
        let entry = match registry::parse(&bytes) {
            Ok(e) => e,
            Err(e) => {
                self.counts.unreadable += 1;
                tracing::debug!(path = %path.display(), error = %e, "Registry file not readable (yet); retried on its next change.");
                // Keep what was last sent (a half-written file says nothing new), and
                // this version's stamp, so it is read again only once it changes.
                let k = prev.unwrap_or(Known {
                    stamp,
                    sent: None,
                    process: None,
                    checked: now,
                    alive: false,
                    session: None,
                });
                self.known.insert(path.to_path_buf(), Known { stamp, ..k });
                return;
            }
        };
        let alive = same_process(entry.pid, entry.proc_start.as_deref());
        let mut k = Known {
            stamp,
            sent: None,
            process: Some((entry.pid, entry.proc_start.clone())),
            checked: now,
            alive,
            session: Some(entry.session.clone()),
        };
        if !alive {
            self.counts.stale += 1;
            tracing::debug!(path = %path.display(), pid = entry.pid, "Registry file of a process that is gone (or another one): ignored.");
            self.unindex(&k);
            self.known.insert(path.to_path_buf(), k);
            return;
        }
        if let Ok(mut ix) = self.index.lock() {
            ix.insert(
                entry.session.clone(),
                Live {
                    pid: entry.pid,
                    started: entry.proc_start.clone(),
                    tmux: entry.tmux.clone(),
                },
            );
        }
        k.sent = sent_before;
        if let Some(sig) = entry.signal()
            && k.sent.as_ref() != Some(&sig.kind)
        {
            k.sent = Some(sig.kind.clone());
            out.push(sig);
        }
        self.known.insert(path.to_path_buf(), k);
    }

    fn job_file(&mut self, id: &str, path: &Path, out: &mut Vec<Signal>) {
        let Some(stamp) = stamp(path) else { return };
        if self.known.get(path).is_some_and(|k| k.stamp == stamp) {
            return;
        }
        let Some(bytes) = read_small(path) else {
            return;
        };
        self.counts.read += 1;
        let sent = self.known.get(path).and_then(|k| k.sent.clone());
        let mut k = Known {
            stamp,
            sent,
            process: None,
            checked: Instant::now(),
            alive: true,
            session: None,
        };
        match jobs::parse(id, &bytes) {
            Some(job) => {
                if let Some(sig) = job.signal
                    && k.sent.as_ref() != Some(&sig.kind)
                {
                    k.sent = Some(sig.kind.clone());
                    out.push(sig);
                }
            }
            None => {
                self.counts.unreadable += 1;
                tracing::debug!(path = %path.display(), "Job state not readable (yet); retried on its next change.");
            }
        }
        self.known.insert(path.to_path_buf(), k);
    }
}

/// What tells one version of a file from the next.
fn stamp(path: &Path) -> Option<(u64, i64, i64, u64)> {
    let m = fs::metadata(path).ok()?;
    m.is_file()
        .then(|| (m.len(), m.mtime(), m.mtime_nsec(), m.ino()))
}

/// The file's bytes, if it is a plain file no larger than a registry file can be.
fn read_small(path: &Path) -> Option<Vec<u8>> {
    let f = fs::File::open(path).ok()?;
    let mut buf = Vec::new();
    f.take(MAX_SIGNAL_FILE + 1).read_to_end(&mut buf).ok()?;
    Some(buf)
}
