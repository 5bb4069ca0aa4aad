//! Durable state through disk trouble, end to end: the state directory made unwritable
//! (`chmod 500`) or full (a small tmpfs) under a stream of turns, with a SIGKILL in the
//! middle; a corrupt current generation; every state file but the lock deleted.
//!
//! What is checked is what a consumer sees: no turn lost, and no event delivered twice
//! unless the second copy says `replay: true`.
//!
//! The tmpfs tests mount (they need root, or a user namespace that may mount); where
//! that is not permitted they print why and pass without running. The chmod test runs
//! the daemon without the capabilities that let root ignore file modes.

use crate::common::stream;
use crate::common::tmpfs;

use crate::common::{Claude, DEADLINE, Daemon, anomalies, append, count, is};
use serde_json::Value;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use stream::{Rng, Stream, Tally, tally, wait_all_completed};
use tmpfs::{Filler, Tmpfs};

fn is_root() -> bool {
    fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
}

fn readies(d: &Daemon) -> usize {
    d.events()
        .iter()
        .filter(|e| e["event"] == "daemon_ready")
        .count()
}

/// Bytes of the regular files in `dir` (not `skip`).
fn dir_bytes(dir: &Path, skip: &str) -> u64 {
    fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name() != skip)
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Mounts a 4 MiB tmpfs as the tree's state directory, or prints why the test is skipped.
fn small_state_fs(d: &Daemon, test: &str) -> Option<Tmpfs> {
    match Tmpfs::mount(&d.state_dir(), "4m") {
        Ok(t) => Some(t),
        Err(why) => {
            eprintln!("SKIPPED {test}: cannot mount a small tmpfs for the state directory: {why}");
            None
        }
    }
}

/// The tally of a run, checked: nothing lost, no duplicate without `replay: true`.
fn check_exactly_once(what: &str, events: &[Value], turns: &[String]) -> Tally {
    let t = tally(events, turns);
    eprintln!("{what}: {t:?}");
    assert!(t.turns > 50, "{what}: the stream wrote too little: {t:?}");
    assert_eq!(t.lost, 0, "{what}: lost turns: {t:?}");
    assert_eq!(
        t.plain_duplicates, 0,
        "{what}: a re-delivered event must say replay: {t:?}"
    );
    t
}

/// The daemon run without the capabilities that let root write where file modes say
/// it may not (so that `chmod 500` binds it as it binds any user).
struct Unprivileged {
    child: Option<Child>,
}

impl Unprivileged {
    fn spawn(d: &Daemon) -> Unprivileged {
        let cmd = d.command(&[]);
        let mut w = if is_root() {
            let drop = "-dac_override,-dac_read_search,-fowner";
            let mut w = Command::new("setpriv");
            w.arg(format!("--inh-caps={drop}"))
                .arg(format!("--bounding-set={drop}"))
                .arg(cmd.get_program());
            w
        } else {
            Command::new(cmd.get_program())
        };
        w.args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => w.env(k, v),
                None => w.env_remove(k),
            };
        }
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&d.log)
            .expect("log");
        let child = w
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start baton");
        Unprivileged { child: Some(child) }
    }

    /// Spawns and waits for the next `daemon_ready`.
    fn start(d: &mut Daemon) -> Unprivileged {
        let before = readies(d);
        let u = Unprivileged::spawn(d);
        d.wait_count("daemon_ready", before + 1, |e| e["event"] == "daemon_ready");
        u
    }

    fn kill(mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn terminate(mut self, d: &Daemon) {
        let mut c = self.child.take().expect("running");
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status();
        let start = Instant::now();
        loop {
            if let Some(s) = c.try_wait().expect("wait") {
                if !s.success() {
                    d.fail(&format!("baton exited with {s}"));
                }
                return;
            }
            if start.elapsed() > DEADLINE {
                let _ = c.kill();
                d.fail("baton did not stop on SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Unprivileged {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn chmod(dir: &Path, mode: u32) {
    fs::set_permissions(dir, fs::Permissions::from_mode(mode)).expect("chmod");
}

/// The largest journal in the state directory.
fn largest_journal(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("journal-"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// `chmod 500` on the state directory under a stream of turns, long enough that the
/// emission journal fills up (1 MiB) and would move on to a new file; SIGKILL; modes
/// restored; restart. Every turn comes out, and nothing comes out twice unless flagged.
#[test]
fn unwritable_state_dir_then_sigkill_repeats_nothing_plainly() {
    if is_root() && Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!(
            "SKIPPED: running as root and setpriv is missing, so chmod cannot bind the daemon"
        );
        return;
    }
    let mut d = Daemon::tree();
    let baton = Unprivileged::start(&mut d);
    let stream = Stream::start(d.claude(), d.codex());
    std::thread::sleep(Duration::from_millis(1500));
    let state = d.state_dir();
    chmod(&state, 0o500);
    // Until a journal reaches the size where the next one would be opened (which the
    // directory no longer allows).
    let start = Instant::now();
    while largest_journal(&state) < 1 << 20 {
        if start.elapsed() > DEADLINE * 3 {
            chmod(&state, 0o700);
            d.fail("the journal never filled up under the stream");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(2000));
    baton.kill();
    chmod(&state, 0o700);
    let baton = Unprivileged::start(&mut d);
    let turns = stream.finish();
    wait_all_completed(&d, &turns);
    baton.terminate(&d);
    let events = d.events();
    eprintln!(
        "state_unwritable anomalies: {}",
        anomalies(&events, "state_unwritable")
    );
    check_exactly_once("chmod 500 + SIGKILL", &events, &turns);
}

/// The state directory on a 4 MiB tmpfs, filled to the last page under a stream of
/// turns; SIGKILL while it is full; space freed; restart. Every turn comes out, and
/// nothing comes out twice unless flagged `replay`.
#[test]
fn full_state_fs_then_sigkill_repeats_nothing_plainly() {
    full_then_killed("full_state_fs_then_sigkill_repeats_nothing_plainly", 0);
}

/// The same with a ledger near its cap from the start (a base near 1 MiB).
#[test]
fn full_state_fs_with_a_full_ledger_then_sigkill_repeats_nothing_plainly() {
    full_then_killed(
        "full_state_fs_with_a_full_ledger_then_sigkill_repeats_nothing_plainly",
        64,
    );
}

fn full_then_killed(test: &str, history_sessions: usize) {
    let mut d = Daemon::tree();
    let Some(_fs) = small_state_fs(&d, test) else {
        return;
    };
    recent_history(&d, history_sessions);
    d.spawn(&[]);
    d.wait_for("daemon_ready", |e| e["event"] == "daemon_ready");
    let stream = Stream::start(d.claude(), d.codex());
    std::thread::sleep(Duration::from_millis(1500));
    let filler = Filler::start(d.state_dir().join("filler"));
    d.wait_for("state_unwritable", |e| e["reason"] == "state_unwritable");
    std::thread::sleep(Duration::from_millis(3000));
    d.kill();
    filler.free();
    d.restart(&[]);
    let turns = stream.finish();
    wait_all_completed(&d, &turns);
    let events = d.stop();
    check_exactly_once(test, &events, &turns);
}

/// The state directory on a 4 MiB tmpfs, full for a while under a stream of turns, then
/// freed while baton runs: the state is saved again, baton's own files do not fill the
/// freed space, and a clean restart repeats nothing at all.
#[test]
fn full_state_fs_freed_while_running_saves_again_and_stays_bounded() {
    full_then_freed(
        "full_state_fs_freed_while_running_saves_again_and_stays_bounded",
        0,
    );
}

/// The same with a ledger near its cap (16,384 ids) from the start: a base near 1 MiB,
/// so a few copies of it (current, previous, the one being written) and a log are most
/// of the 4 MiB.
#[test]
fn full_state_fs_with_a_full_ledger_freed_while_running_saves_again_and_stays_bounded() {
    full_then_freed(
        "full_state_fs_with_a_full_ledger_freed_while_running_saves_again_and_stays_bounded",
        64,
    );
}

/// Recent history in `sessions` Claude files of 128 turns each: a first run reads it
/// silently, and its ids go to the ledger (2 per turn).
fn recent_history(d: &Daemon, sessions: usize) {
    for _ in 0..sessions {
        let c = Claude::new();
        let mut text = String::new();
        for i in 0..128 {
            let (bytes, _) = c.turn(&format!("old {i}"), &format!("old answer {i}"));
            text.push_str(&bytes);
        }
        fs::write(c.path_in(&d.claude()), text).expect("history");
    }
}

fn full_then_freed(test: &str, history_sessions: usize) {
    let mut d = Daemon::tree();
    let Some(_fs) = small_state_fs(&d, test) else {
        return;
    };
    recent_history(&d, history_sessions);
    d.spawn(&[]);
    d.wait_for("daemon_ready", |e| e["event"] == "daemon_ready");
    let stream = Stream::start(d.claude(), d.codex());
    std::thread::sleep(Duration::from_millis(1500));
    let filler = Filler::start(d.state_dir().join("filler"));
    d.wait_for("state_unwritable", |e| e["reason"] == "state_unwritable");
    std::thread::sleep(Duration::from_millis(4000));
    let saved_again = || {
        fs::read_to_string(&d.log)
            .unwrap_or_default()
            .matches("State saved again.")
            .count()
    };
    let before = saved_again();
    filler.free();
    let start = Instant::now();
    while saved_again() == before {
        if start.elapsed() > DEADLINE {
            d.fail("the state was never saved again after space was freed");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Under the stream for a while longer: what baton keeps stays well below the 4 MiB.
    let mut most = 0;
    for _ in 0..60 {
        most = most.max(dir_bytes(&d.state_dir(), "filler"));
        std::thread::sleep(Duration::from_millis(50));
    }
    let turns = stream.finish();
    wait_all_completed(&d, &turns);
    d.terminate();
    let after_stop = dir_bytes(&d.state_dir(), "filler");
    d.restart(&[]);
    let events = d.stop();
    eprintln!("state dir: at most {most} bytes while running, {after_stop} after the stop");
    assert!(most < 3 << 20, "the state dir grew to {most} bytes");
    let t = check_exactly_once(test, &events, &turns);
    assert_eq!(
        (t.duplicates, t.replays),
        (0, 0),
        "a clean restart after recovery repeats nothing: {t:?}"
    );
}

/// Validates a base generation's header against its body, as loading does (length only:
/// enough to tell a truncated file from a whole one).
fn base_is_whole(path: &Path) -> bool {
    let Ok(bytes) = fs::read(path) else {
        return false;
    };
    let Some(nl) = bytes.iter().position(|&b| b == b'\n') else {
        return false;
    };
    let head = String::from_utf8_lossy(&bytes[..nl]).into_owned();
    let len = head.split(' ').nth(3).and_then(|l| l.parse::<usize>().ok());
    head.starts_with("baton-state ") && len == Some(bytes.len() - nl - 1)
}

/// Truncates `state.json` (there is a good previous generation), starts, runs a stream:
/// the base is whole again soon (merges resume), the state directory stays bounded, and
/// neither that start nor the next one reports `state_unwritable`.
fn corrupt_base_is_repaired(d: &mut Daemon) {
    let mut rng = Rng::seeded();
    d.spawn(&[]);
    d.wait_for("daemon_ready", |e| e["event"] == "daemon_ready");
    let c = Claude::new();
    let path = c.path_in(&d.claude());
    let (bytes, before) = c.turn("before", "before answer");
    append(&path, bytes.as_bytes());
    d.wait_for("before", is("turn_completed", before.clone()));
    d.terminate();
    let cur = d.state_dir().join("state.json");
    assert!(d.state_dir().join("state.json.prev").exists());
    let whole = fs::read(&cur).expect("state.json");
    let cut = 1 + rng.below(whole.len() as u64 - 1) as usize;
    fs::write(&cur, &whole[..cut]).expect("truncate");
    d.restart(&[]);
    let stream = Stream::start(d.claude(), d.codex());
    let start = Instant::now();
    while !base_is_whole(&cur) {
        if start.elapsed() > DEADLINE {
            d.fail("the current generation was never written again after the fallback");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut most = 0;
    for _ in 0..80 {
        most = most.max(dir_bytes(&d.state_dir(), ""));
        std::thread::sleep(Duration::from_millis(50));
    }
    let turns = stream.finish();
    wait_all_completed(d, &turns);
    d.terminate();
    d.restart(&[]);
    let (bytes, probe) = c.turn("probe", "probe answer");
    append(&path, bytes.as_bytes());
    d.wait_for("probe", is("turn_completed", probe.clone()));
    d.terminate();
    let events = d.events();
    let log = fs::read_to_string(&d.log).unwrap_or_default();
    eprintln!(
        "state dir at most {most} bytes; cut at {cut} of {}",
        whole.len()
    );
    assert_eq!(anomalies(&events, "state_unwritable"), 0, "{log}");
    assert_eq!(anomalies(&events, "state_lost"), 0);
    assert_eq!(
        log.matches("The current state generation is unusable")
            .count(),
        1,
        "only the start right after the damage falls back"
    );
    assert!(most < 3 << 20, "the state dir grew to {most} bytes");
    assert_eq!(count(&events, "turn_completed", &before), 1);
    assert_eq!(count(&events, "turn_completed", &probe), 1);
    check_exactly_once("corrupt base", &events, &turns);
}

#[test]
fn a_corrupt_base_is_repaired_and_merging_resumes() {
    let mut d = Daemon::tree();
    corrupt_base_is_repaired(&mut d);
}

#[test]
fn a_corrupt_base_on_a_small_fs_is_repaired_and_merging_resumes() {
    let mut d = Daemon::tree();
    let Some(_fs) = small_state_fs(
        &d,
        "a_corrupt_base_on_a_small_fs_is_repaired_and_merging_resumes",
    ) else {
        return;
    };
    corrupt_base_is_repaired(&mut d);
}

/// Every state file deleted but the lock: the state was there and is gone, which must
/// be said (`state_lost`), not taken for a first run. History stays silent either way.
#[test]
fn every_state_file_but_the_lock_deleted_is_state_lost() {
    let mut d = Daemon::tree().start(&[]);
    let c = Claude::new();
    let path = c.path_in(&d.claude());
    let (bytes, old) = c.turn("old", "old answer");
    append(&path, bytes.as_bytes());
    d.wait_for("old", is("turn_completed", old.clone()));
    d.terminate();
    let mut kept = Vec::new();
    for e in fs::read_dir(d.state_dir()).expect("state dir").flatten() {
        if e.file_name() == "lock" {
            kept.push(e.file_name());
        } else {
            fs::remove_file(e.path()).expect("rm");
        }
    }
    assert_eq!(kept.len(), 1, "the lock file is there");
    d.restart(&[]);
    let (bytes, probe) = c.turn("probe", "probe answer");
    append(&path, bytes.as_bytes());
    d.wait_for("probe", is("turn_completed", probe.clone()));
    let events = d.stop();
    assert_eq!(anomalies(&events, "state_lost"), 1);
    assert_eq!(
        count(&events, "turn_completed", &old),
        1,
        "history stays silent"
    );
    assert_eq!(count(&events, "turn_completed", &probe), 1);
}
