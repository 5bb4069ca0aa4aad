//! The emission journal: `pending` lines written before events are delivered, a `done`
//! line after each one. Journals are numbered; the writer moves on to the next number
//! when one grows large, and a full journal is deleted once both state generations on
//! disk cover everything delivered while it was written (see `state::Persist`).
//!
//! Lines are written, not fsync'ed: a crash of baton (SIGKILL included) cannot lose
//! what reached the kernel, and an fsync per event would sit between every turn's end
//! and its alert. A power loss can lose the last lines; see docs/reliability.md
//! ("Emission protocol and `replay`").
//!
//! A torn last line (a crash mid-write) fails to parse and is ignored: a `pending` line
//! is only torn if its write never finished, and then nothing was delivered.

use crate::model::Event;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Line {
    Pending(Box<Event>),
    Done(String),
}

pub fn name(generation: u64) -> String {
    format!("journal-{generation}.jsonl")
}

/// Every journal in `dir`, by generation.
pub fn list(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    super::numbered(dir, "journal-", ".jsonl")
}

/// What the journals say.
#[derive(Debug, Default)]
pub struct Replay {
    /// Pending but never done: to be delivered again, in order, flagged `replay`.
    pub undone: Vec<Event>,
    /// Every id journaled (pending or done): already decided.
    pub ids: HashSet<String>,
    /// Every event journaled as pending, for the ledger.
    pub decided: Vec<super::Decision>,
}

pub fn read(paths: &[PathBuf]) -> Replay {
    let mut pending: Vec<Event> = Vec::new();
    let mut done = HashSet::new();
    for p in paths {
        let Ok(text) = fs::read_to_string(p) else {
            continue;
        };
        for line in text.lines() {
            match serde_json::from_str::<Line>(line) {
                Ok(Line::Pending(ev)) => pending.push(*ev),
                Ok(Line::Done(id)) => {
                    done.insert(id);
                }
                Err(_) => {}
            }
        }
    }
    let mut ids: HashSet<String> = done.clone();
    let mut undone = Vec::new();
    let decided = pending.iter().map(super::Decision::of).collect();
    for mut ev in pending {
        if done.contains(&ev.id) || !ids.insert(ev.id.clone()) {
            continue;
        }
        ev.replay = true;
        undone.push(ev);
    }
    Replay {
        undone,
        ids,
        decided,
    }
}

pub struct Journal {
    file: File,
    pub number: u64,
    /// Bytes written by this process.
    pub written: u64,
}

impl Journal {
    /// Opens (creating) journal `number` for appending.
    pub fn open(dir: &Path, number: u64) -> io::Result<Journal> {
        let file = super::open_append(&dir.join(name(number)))?;
        Ok(Journal {
            file,
            number,
            written: 0,
        })
    }

    /// Records events as pending, each given as its stream line ([`Event::to_json`],
    /// its newline or not): the journal's line wraps it, `{"pending":LINE}`, so an
    /// event is serialized once for the stream and the journal, and never copied.
    pub fn pending<'a>(&mut self, lines: impl IntoIterator<Item = &'a str>) -> io::Result<()> {
        let mut buf = Vec::new();
        for line in lines {
            buf.extend_from_slice(b"{\"pending\":");
            buf.extend_from_slice(line.trim_end_matches('\n').as_bytes());
            buf.extend_from_slice(b"}\n");
        }
        self.file.write_all(&buf)?;
        self.written += buf.len() as u64;
        Ok(())
    }

    /// Records that an event was delivered.
    pub fn done(&mut self, id: &str) -> io::Result<()> {
        let mut buf = serde_json::to_vec(&Line::Done(id.to_owned())).map_err(io::Error::other)?;
        buf.push(b'\n');
        self.file.write_all(&buf)?;
        self.written += buf.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EventKind, ProviderKind};

    fn ev(id: &str) -> Event {
        let mut e = Event::lifecycle(EventKind::TurnCompleted, "t".to_owned(), id.to_owned());
        e.provider = Some(ProviderKind::Claude);
        e.initiator = Some("human");
        e
    }

    #[test]
    fn undone_events_replay_once_and_a_torn_line_is_ignored() {
        let tmp = tempfile::tempdir().unwrap();
        let mut j = Journal::open(tmp.path(), 1).unwrap();
        j.pending([ev("a").to_json().as_str(), &(ev("b").to_json() + "\n")])
            .unwrap();
        j.done("a").unwrap();
        let mut j2 = Journal::open(tmp.path(), 2).unwrap();
        j2.pending([ev("c").to_json().as_str(), &ev("b").to_json()])
            .unwrap();
        let path = tmp.path().join(name(2));
        let mut text = fs::read(&path).unwrap();
        text.extend_from_slice(b"{\"pending\":{\"v\":1,\"ev");
        fs::write(&path, text).unwrap();
        let paths: Vec<PathBuf> = list(tmp.path()).unwrap().into_iter().map(|x| x.1).collect();
        let r = read(&paths);
        let ids: Vec<&str> = r.undone.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["b", "c"]);
        assert!(r.undone.iter().all(|e| e.replay));
        assert_eq!(r.undone[0].initiator, Some("human"));
        // The stream's line, wrapped, reads back as the event itself.
        let mut c = ev("c");
        c.replay = true;
        assert_eq!(r.undone[1], c);
        assert_eq!(r.ids.len(), 3);
    }
}
