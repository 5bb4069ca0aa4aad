//! Durable state end to end: the real binary, restarted, killed and fed
//! corrupt state, on a temporary tree with its own `--state-dir`.
//!
//! Waits have deadlines; nothing asserts how fast anything happened.

use crate::common::stream;

use crate::common::{Claude, DEADLINE, Daemon, anomalies, append, count, is, ts_ago};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use stream::{Rng, Stream, Tally, tally, wait_all_completed};

#[test]
fn clean_restarts_under_a_stream_lose_and_repeat_nothing() {
    let mut d = Daemon::tree().start(&[]);
    let stream = Stream::start(d.claude(), d.codex());
    let mut rng = Rng::seeded();
    let cycles = 50;
    for _ in 0..cycles {
        std::thread::sleep(Duration::from_millis(20 + rng.below(60)));
        d.terminate();
        // Turns keep coming while baton is down.
        std::thread::sleep(Duration::from_millis(rng.below(30)));
        d.restart(&[]);
    }
    let turns = stream.finish();
    wait_all_completed(&d, &turns);
    let events = d.stop();
    let t = tally(&events, &turns);
    eprintln!("clean restarts: {cycles} cycles, {t:?}");
    assert!(t.turns > 100, "the stream wrote too little: {t:?}");
    assert_eq!((t.lost, t.duplicates, t.replays), (0, 0, 0), "{t:?}");
}

/// SIGKILL at random moments for `cycles` cycles; returns the tally and the kills.
fn kill_cycles(cycles: usize) -> Tally {
    let mut d = Daemon::tree().start(&[]);
    let stream = Stream::start(d.claude(), d.codex());
    let mut rng = Rng::seeded();
    for i in 0..cycles {
        std::thread::sleep(Duration::from_millis(rng.below(80)));
        d.kill();
        std::thread::sleep(Duration::from_millis(rng.below(20)));
        d.restart(&[]);
        if cycles >= 100 && i % 100 == 99 {
            eprintln!("{} kills", i + 1);
        }
    }
    let turns = stream.finish();
    wait_all_completed(&d, &turns);
    let events = d.stop();
    let t = tally(&events, &turns);
    eprintln!("kills: {cycles} cycles, {t:?}");
    assert!(t.turns > 100, "the stream wrote too little: {t:?}");
    assert_eq!(t.lost, 0, "{t:?}");
    assert_eq!(t.plain_duplicates, 0, "a duplicate must say replay: {t:?}");
    assert!(
        t.duplicates <= cycles,
        "at most one duplicate per kill: {t:?}"
    );
    t
}

#[test]
fn sigkill_at_random_moments_loses_nothing_and_only_replays() {
    kill_cycles(50);
}

/// The long run: `BATON_KILL_CYCLES=1000 cargo test --release --test integration state::kill_soak -- --ignored`
/// (see tests/soak/kill_soak.sh).
#[test]
#[ignore = "soak test; run tests/soak/kill_soak.sh"]
fn kill_soak() {
    let cycles = std::env::var("BATON_KILL_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    kill_cycles(cycles);
}

/// A tree with one Claude session whose two turns were alerted, stopped cleanly.
fn alerted_then_stopped() -> (Daemon, Claude, PathBuf, String, Vec<String>) {
    let mut d = Daemon::tree().start(&[]);
    let c = Claude::new();
    let path = c.path_in(&d.claude());
    let (a, ta) = c.turn("one", "answer one");
    let (b, tb) = c.turn("two", "answer two");
    append(&path, a.as_bytes());
    d.wait_for("A", is("turn_completed", ta.clone()));
    append(&path, b.as_bytes());
    d.wait_for("B", is("turn_completed", tb.clone()));
    d.terminate();
    (d, c, path, a + &b, vec![ta, tb])
}

/// Restarts, writes one more turn, waits for it and stops; returns the events.
fn restart_and_probe(mut d: Daemon, c: &Claude, path: &Path) -> (Vec<Value>, String) {
    d.restart(&[]);
    let (bytes, probe) = c.turn("probe", "probe answer");
    append(path, bytes.as_bytes());
    d.wait_for("probe", is("turn_completed", probe.clone()));
    (d.stop(), probe)
}

#[test]
fn corrupt_current_generation_falls_back_to_the_previous_one() {
    let mut rng = Rng::seeded();
    for how in ["truncated", "empty", "garbage"] {
        let (d, c, path, _, old) = alerted_then_stopped();
        let cur = d.state_dir().join("state.json");
        assert!(d.state_dir().join("state.json.prev").exists());
        let bytes = fs::read(&cur).expect("state.json");
        let bad: Vec<u8> = match how {
            "truncated" => bytes[..rng.below(bytes.len() as u64) as usize].to_vec(),
            "empty" => Vec::new(),
            _ => b"\x00\xffnot state at all\n{\"files\":[]}".to_vec(),
        };
        fs::write(&cur, bad).expect("corrupt");
        // A turn while down: the previous generation's checkpoint still finds it.
        let (bytes, down) = c.turn("while down", "down answer");
        append(&path, bytes.as_bytes());
        let (events, probe) = restart_and_probe(d, &c, &path);
        for t in &old {
            assert_eq!(
                count(&events, "turn_completed", t),
                1,
                "{how}: {t} re-alerted"
            );
        }
        assert_eq!(count(&events, "turn_completed", &down), 1, "{how}");
        assert_eq!(count(&events, "turn_completed", &probe), 1, "{how}");
        assert_eq!(anomalies(&events, "state_lost"), 0, "{how}");
    }
}

#[test]
fn no_usable_generation_is_a_silent_baseline_with_state_lost() {
    let mut rng = Rng::seeded();
    for how in ["truncated", "empty", "garbage", "both missing"] {
        let (d, c, path, _, old) = alerted_then_stopped();
        let cur = d.state_dir().join("state.json");
        let prev = d.state_dir().join("state.json.prev");
        let bytes = fs::read(&cur).expect("state.json");
        match how {
            "truncated" => {
                let cut = rng.below(bytes.len() as u64) as usize;
                fs::write(&cur, &bytes[..cut]).expect("truncate");
                fs::write(&prev, &bytes[..cut / 2]).expect("truncate");
            }
            "empty" => {
                fs::write(&cur, b"").expect("empty");
                fs::remove_file(&prev).expect("rm prev");
            }
            "garbage" => {
                fs::write(&cur, b"garbage").expect("garbage");
                fs::write(&prev, b"baton-state 1 00000000 2\n{}").expect("garbage");
            }
            _ => {
                fs::remove_file(&cur).expect("rm");
                fs::remove_file(&prev).expect("rm prev");
            }
        }
        let (events, probe) = restart_and_probe(d, &c, &path);
        for t in &old {
            assert_eq!(
                count(&events, "turn_completed", t),
                1,
                "{how}: {t} re-alerted"
            );
        }
        assert_eq!(count(&events, "turn_completed", &probe), 1, "{how}");
        assert_eq!(anomalies(&events, "state_lost"), 1, "{how}");
    }
}

#[test]
fn a_second_instance_on_the_same_state_dir_exits_with_code_5() {
    let mut d = Daemon::tree().start(&[]);
    let other = d
        .command(&[])
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("second baton");
    assert_eq!(other.status.code(), Some(5), "{other:?}");
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(err.contains("already running"), "{err}");
    // The first one is unharmed.
    let c = Claude::new();
    let (bytes, turn) = c.turn("still there?", "yes");
    append(&c.path_in(&d.claude()), bytes.as_bytes());
    d.wait_for("turn", is("turn_completed", turn.clone()));
    let events = d.stop();
    assert_eq!(count(&events, "turn_completed", &turn), 1);
}

#[test]
fn a_symlinked_state_file_is_refused() {
    let (d, _, _, _, _) = alerted_then_stopped();
    let cur = d.state_dir().join("state.json");
    let elsewhere = d.dir.path().join("elsewhere.json");
    fs::rename(&cur, &elsewhere).expect("move");
    std::os::unix::fs::symlink(&elsewhere, &cur).expect("symlink");
    let out = d
        .command(&[])
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("baton");
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"));
}

#[test]
fn completions_while_down_inside_and_outside_the_catch_up_window() {
    let (mut d, c, path, _, old) = alerted_then_stopped();
    // Inside the window: reported once. Outside (record time 30 min ago): absorbed.
    let (p, inside) = c.prompt_at("inside", &ts_ago(Duration::from_secs(60)));
    let a = c.answer_at("inside answer", &ts_ago(Duration::from_secs(50)));
    let (p2, outside) = c.prompt_at("outside", &ts_ago(Duration::from_secs(1900)));
    let a2 = c.answer_at("outside answer", &ts_ago(Duration::from_secs(1800)));
    // A new file while down, with one turn inside the window.
    let n = Claude::new();
    let (nb, fresh) = n.turn("new file", "new answer");
    append(&path, (p + &a).as_bytes());
    let other = Claude::new();
    let opath = other.path_in(&d.claude());
    append(&opath, (p2 + &a2).as_bytes());
    append(&n.path_in(&d.claude()), nb.as_bytes());
    d.restart(&[]);
    d.wait_for("inside", is("turn_completed", inside.clone()));
    d.wait_for("new file", is("turn_completed", fresh.clone()));
    // The state is still right: the session goes on.
    let (bytes, next) = other.turn("after", "after answer");
    append(&opath, bytes.as_bytes());
    d.wait_for("next", is("turn_completed", next.clone()));
    d.terminate();
    // And a second restart repeats none of it.
    d.restart(&[]);
    let events = d.stop();
    for t in old.iter().chain([&inside, &fresh, &next]) {
        assert_eq!(count(&events, "turn_completed", t), 1, "turn {t}");
    }
    assert_eq!(count(&events, "turn_completed", &outside), 0);
    assert_eq!(count(&events, "turn_started", &outside), 0);
}

#[test]
fn rewrites_while_down_re_alert_nothing_and_alert_new_turns() {
    for how in ["same in place", "same new inode", "shorter", "longer"] {
        let (mut d, c, path, content, old) = alerted_then_stopped();
        let (extra, new_turn) = c.turn("added", "added answer");
        match how {
            "same in place" => fs::write(&path, &content).expect("rewrite"),
            "same new inode" => {
                let tmp = path.with_extension("tmp");
                fs::write(&tmp, &content).expect("write");
                fs::rename(&tmp, &path).expect("rename");
            }
            "shorter" => {
                // Only the first turn (its two lines) is left.
                let cut: usize = content.lines().take(2).map(|l| l.len() + 1).sum();
                fs::write(&path, &content[..cut]).expect("rewrite");
            }
            _ => {
                let summary =
                    "{\"type\":\"summary\",\"summary\":\"compacted\",\"leafUuid\":\"x\"}\n";
                fs::write(&path, format!("{summary}{content}{extra}")).expect("rewrite");
            }
        }
        d.restart(&[]);
        if how == "longer" {
            d.wait_for("new turn", is("turn_completed", new_turn.clone()));
        }
        let (bytes, probe) = c.turn("probe", "probe answer");
        append(&path, bytes.as_bytes());
        d.wait_for("probe", is("turn_completed", probe.clone()));
        let events = d.stop();
        for t in &old {
            assert_eq!(count(&events, "turn_completed", t), 1, "{how}: {t}");
            assert_eq!(count(&events, "turn_started", t), 1, "{how}: {t}");
        }
        assert_eq!(count(&events, "turn_completed", &probe), 1, "{how}");
        let want_new = usize::from(how == "longer");
        assert_eq!(
            count(&events, "turn_completed", &new_turn),
            want_new,
            "{how}"
        );
    }
}

#[test]
fn a_pending_event_never_marked_done_is_replayed_once() {
    let (mut d, _, _, _, old) = alerted_then_stopped();
    // What a SIGKILL between delivery and the `done` record leaves: the event pending
    // in a journal, never marked done.
    let events = d.events();
    let delivered = events
        .iter()
        .find(|e| e["event"] == "turn_completed" && e["turn"] == old[1].as_str())
        .expect("B")
        .clone();
    let done = serde_json::json!({ "done": delivered["id"] }).to_string();
    let mut pending_seen = false;
    for entry in fs::read_dir(d.state_dir()).expect("state dir").flatten() {
        let p = entry.path();
        if !p.to_string_lossy().contains("journal-") {
            continue;
        }
        let text = fs::read_to_string(&p).expect("journal");
        pending_seen |= text.lines().any(|l| {
            serde_json::from_str::<Value>(l).is_ok_and(|v| v["pending"]["id"] == delivered["id"])
        });
        let kept: String = text
            .lines()
            .filter(|l| *l != done)
            .map(|l| format!("{l}\n"))
            .collect();
        fs::write(&p, kept).expect("rewrite journal");
    }
    assert!(pending_seen, "B was journaled as pending");
    d.restart(&[]);
    d.wait_for("replay", |e| {
        e["id"] == delivered["id"] && e["replay"] == true
    });
    d.terminate();
    d.restart(&[]);
    let events = d.stop();
    let copies: Vec<&Value> = events
        .iter()
        .filter(|e| e["id"] == delivered["id"])
        .collect();
    assert_eq!(copies.len(), 2, "{copies:?}");
    assert_eq!(copies[1]["replay"], true);
    assert_eq!(copies[1]["turn"], delivered["turn"]);
}

#[test]
fn unwritable_state_keeps_delivering_raises_one_anomaly_and_recovers() {
    let mut d = Daemon::tree().start(&[]);
    // A directory where the temporary state file goes: every save fails (even as root).
    let blocker = d.state_dir().join("state.json.tmp");
    fs::create_dir(&blocker).expect("blocker");
    let c = Claude::new();
    let path = c.path_in(&d.claude());
    let mut turns = Vec::new();
    for i in 0..3 {
        let (bytes, t) = c.turn(&format!("p{i}"), &format!("a{i}"));
        append(&path, bytes.as_bytes());
        d.wait_for("turn", is("turn_completed", t.clone()));
        turns.push(t);
        std::thread::sleep(Duration::from_millis(300));
    }
    d.wait_for("state_unwritable", |e| e["reason"] == "state_unwritable");
    fs::remove_dir(&blocker).expect("unblock");
    // The blocked merges left no base yet (the log kept what changed).
    let gen_before = fs::read(d.state_dir().join("state.json")).unwrap_or_default();
    let (bytes, t) = c.turn("after", "after");
    append(&path, bytes.as_bytes());
    d.wait_for("turn", is("turn_completed", t.clone()));
    turns.push(t);
    // Saved again: the state file changes.
    let start = Instant::now();
    while fs::read(d.state_dir().join("state.json")).unwrap_or_default() == gen_before {
        if start.elapsed() > DEADLINE {
            d.fail("the state was never saved again");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    d.terminate();
    d.restart(&[]);
    let events = d.stop();
    assert_eq!(anomalies(&events, "state_unwritable"), 1);
    for t in &turns {
        assert_eq!(count(&events, "turn_completed", t), 1, "turn {t}");
    }
}

/// Overwrites the start of `path` in place, same length, leaving the last 64 bytes
/// before `keep_from` (the checkpoint's marker) as they are: a re-read from the first
/// byte would now find a malformed first line where the prompt was.
fn clobber_head(path: &Path, upto: usize) {
    let mut bytes = fs::read(path).expect("read");
    for b in &mut bytes[..upto] {
        *b = b'x';
    }
    let f = fs::OpenOptions::new().write(true).open(path).expect("open");
    std::os::unix::fs::FileExt::write_all_at(&f, &bytes[..upto], 0).expect("write");
}

/// Like [`clobber_head`] followed by an append, in a single write.
fn clobber_head_and_append(path: &Path, upto: usize, more: &[u8]) {
    let mut bytes = fs::read(path).expect("read");
    for b in &mut bytes[..upto] {
        *b = b'x';
    }
    bytes.extend_from_slice(more);
    let f = fs::OpenOptions::new().write(true).open(path).expect("open");
    std::os::unix::fs::FileExt::write_all_at(&f, &bytes, 0).expect("write");
}

/// A restart goes on from each file's checkpoint with the reading context saved there:
/// the open turn keeps its id although the prompt's bytes are no longer readable, and
/// nothing before the checkpoint is read again.
#[test]
fn a_restart_continues_from_the_checkpoint_without_re_reading() {
    let mut d = Daemon::tree().start(&[]);
    let c = Claude::new();
    let path = c.path_in(&d.claude());
    let (done, t0) = c.turn("zero", "answer zero");
    let (open, t1) = c.prompt("one");
    append(&path, done.as_bytes());
    d.wait_for("turn zero", is("turn_completed", t0.clone()));
    append(&path, open.as_bytes());
    d.wait_for("turn one started", is("turn_started", t1.clone()));
    d.terminate();
    // Everything but the last line's marker bytes.
    let size = fs::metadata(&path).expect("stat").len() as usize;
    clobber_head(&path, size - 64);
    d.restart(&[]);
    append(&path, c.answer("answer one").as_bytes());
    d.wait_for("turn one completed", is("turn_completed", t1.clone()));
    let (events, log) = d.stop_with_log();
    assert_eq!(count(&events, "turn_completed", &t0), 1, "turn zero once");
    assert_eq!(count(&events, "turn_completed", &t1), 1, "turn one once");
    assert_eq!(anomalies(&events, "malformed_line"), 0);
    restarted_reading_nothing(&log);
}

/// The log's second start went on from its one file's checkpoint, reading nothing again.
fn restarted_reading_nothing(log: &str) {
    let went_live: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("History read; going live."))
        .collect();
    assert_eq!(went_live.len(), 2, "{log}");
    let second = went_live[1];
    assert!(
        second.contains("resumed=1") && second.contains("reread=0") && second.contains("bytes=0 "),
        "{second}"
    );
}

/// A file whose projector went cold (more files than may stay warm) wakes up from its
/// saved context: its open turn keeps its id although a re-read would not find it.
#[test]
fn a_cold_file_wakes_up_from_its_saved_context() {
    let mut d = Daemon::tree().start(&["--debug-max-warm", "1", "--debug-sweep-interval", "200ms"]);
    let (a, b) = (Claude::new(), Claude::new());
    let (pa, pb) = (a.path_in(&d.claude()), b.path_in(&d.claude()));
    let (open, ta) = a.prompt("a");
    append(&pa, open.as_bytes());
    d.wait_for("a started", is("turn_started", ta.clone()));
    // B is newer: after the next sweep A is the one that goes cold.
    std::thread::sleep(Duration::from_millis(20));
    let (open_b, tb) = b.prompt("b");
    append(&pb, open_b.as_bytes());
    d.wait_for("b started", is("turn_started", tb.clone()));
    // Several sweeps.
    std::thread::sleep(Duration::from_millis(1000));
    // One write makes the head unreadable and appends the answer: the daemon sees an
    // append. Two writes would let a poll in between see a same-size rewrite, which is
    // rightly read again from the start.
    let size = fs::metadata(&pa).expect("stat").len() as usize;
    clobber_head_and_append(&pa, size - 64, a.answer("answer a").as_bytes());
    d.wait_for("a completed", is("turn_completed", ta.clone()));
    append(&pb, b.answer("answer b").as_bytes());
    d.wait_for("b completed", is("turn_completed", tb.clone()));
    let events = d.stop();
    assert_eq!(count(&events, "turn_completed", &ta), 1);
    assert_eq!(anomalies(&events, "malformed_line"), 0);
}

/// A first run killed before it saved any checkpoint (here: its state log cannot be
/// created) still knows where history ended when it starts again: the turn that ended
/// while it was down is alerted, the one it had alerted is not repeated, and history from
/// before the first start stays silent.
#[test]
fn a_first_run_killed_before_its_first_save_still_bounds_history() {
    let d = Daemon::tree();
    let c = Claude::new();
    let path = c.path_in(&d.claude());
    let (p0, old) = c.prompt_at("old", &ts_ago(Duration::from_secs(120)));
    let a0 = c.answer_at("old answer", &ts_ago(Duration::from_secs(110)));
    append(&path, (p0 + &a0).as_bytes());
    // A directory where the first state log goes: no checkpoint is ever saved.
    let blocker = d.state_dir().join("state-log-1.jsonl");
    fs::create_dir_all(&blocker).expect("blocker");
    let mut d = d.start(&[]);
    let (b1, t1) = c.turn("live", "live answer");
    append(&path, b1.as_bytes());
    d.wait_for("t1", is("turn_completed", t1.clone()));
    d.kill();
    fs::remove_dir(&blocker).expect("unblock");
    let (b2, t2) = c.turn("while down", "down answer");
    append(&path, b2.as_bytes());
    d.restart(&[]);
    d.wait_for("t2", is("turn_completed", t2.clone()));
    let (events, log) = d.stop_with_log();
    let lost: Vec<&Value> = events
        .iter()
        .filter(|e| e["reason"] == "state_lost")
        .collect();
    assert!(lost.is_empty(), "{lost:?}\n{log}");
    assert_eq!(
        count(&events, "turn_completed", &old),
        0,
        "history stays silent"
    );
    assert_eq!(count(&events, "turn_completed", &t1), 1, "t1 once");
    assert_eq!(count(&events, "turn_completed", &t2), 1, "t2 once");
    assert_eq!(anomalies(&events, "state_lost"), 0);
}

/// Whether a state log holds `path`'s checkpoint at `offset`.
fn logged_at(state_dir: &Path, path: &Path, offset: u64) -> bool {
    let Ok(dir) = fs::read_dir(state_dir) else {
        return false;
    };
    dir.flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("state-log-"))
        .filter_map(|e| fs::read_to_string(e.path()).ok())
        .flat_map(|text| text.lines().map(str::to_owned).collect::<Vec<_>>())
        .filter_map(|line| serde_json::from_str::<Value>(line.get(9..)?).ok())
        .any(|v| {
            v["file"]["path"] == path.to_string_lossy().as_ref()
                && v["file"]["offset"].as_u64() == Some(offset)
        })
}

/// A change is saved a moment after it is read (a burst of appends makes one save)
/// with nothing else happening: killed once it is, the next run goes on from the
/// file's end and reads nothing again.
#[test]
fn a_change_is_saved_without_more_activity_after_it() {
    let mut d = Daemon::tree().start(&[]);
    let c = Claude::new();
    let path = c.path_in(&d.claude());
    let mut turns = Vec::new();
    for i in 0..5 {
        let (bytes, t) = c.turn(&format!("prompt {i}"), &format!("answer {i}"));
        append(&path, bytes.as_bytes());
        turns.push(t);
    }
    let last = turns.last().cloned().unwrap_or_default();
    d.wait_for("the last turn", is("turn_completed", last));
    let size = fs::metadata(&path).expect("stat").len();
    let deadline = Instant::now() + crate::common::DEADLINE;
    while !logged_at(&d.state_dir(), &path, size) {
        assert!(Instant::now() < deadline, "never saved at {size}");
        std::thread::sleep(Duration::from_millis(20));
    }
    d.kill();
    d.restart(&[]);
    let (events, log) = d.stop_with_log();
    for t in &turns {
        assert_eq!(count(&events, "turn_completed", t), 1, "{t} once");
    }
    restarted_reading_nothing(&log);
}
