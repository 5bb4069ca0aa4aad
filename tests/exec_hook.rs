//! The exec hook runs the configured program with the event JSON on stdin and nothing
//! from the transcript in argv or the environment; shell metacharacters in a message run
//! nothing; a program past its timeout is killed; concurrency and the queue are bounded.

use crate::common;

use baton::model::{Event, EventKind};
use baton::sink::Sink;
use baton::sink::exec::{ExecConfig, ExecSink};
use std::path::Path;
use std::time::{Duration, Instant};

const GRACE: Duration = Duration::from_secs(30);

fn event(kind: EventKind, n: u32, message: &str) -> Event {
    common::sample_event(kind, n, message)
}

fn sh(script: &str, args: &[&Path]) -> Vec<String> {
    let mut v = vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()];
    v.extend(args.iter().map(|p| p.display().to_string()));
    v
}

#[test]
fn shell_metacharacters_in_the_message_run_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let marker = |n: &str| d.join(n);
    let message = format!(
        "done $(touch {}) `touch {}` ; touch {} && rm -rf {} | touch {} $HOME \"'",
        marker("pwned1").display(),
        marker("pwned2").display(),
        marker("pwned3").display(),
        d.join("victim").display(),
        marker("pwned4").display(),
    );
    std::fs::create_dir(d.join("victim")).expect("victim dir");
    // The hook itself is a shell script that records its stdin, argv and environment:
    // if baton put the message anywhere but stdin, or ran it through a shell, it shows.
    let out = d.join("stdin.json");
    let script = r#"cat > "$0"; echo "$#" > "$0.argv"; env > "$0.env""#;
    let mut sink = ExecSink::new(ExecConfig::new(sh(script, &[&out]))).expect("sink");
    let ev = event(EventKind::TurnCompleted, 1, &message);
    sink.deliver(&ev);
    let (stats, done) = sink.close(GRACE);
    assert!(done, "hook did not finish");
    assert_eq!(stats.ok, 1, "{stats:?}");

    let got = std::fs::read_to_string(&out).expect("hook got stdin");
    assert_eq!(
        got,
        format!("{}\n", ev.to_json()),
        "stdin is the event line"
    );
    let parsed: serde_json::Value = serde_json::from_str(got.trim_end()).expect("JSON");
    assert_eq!(parsed["message"], message.as_str());

    for n in ["pwned1", "pwned2", "pwned3", "pwned4"] {
        assert!(!marker(n).exists(), "{n} was created: something ran");
    }
    assert!(d.join("victim").exists(), "rm ran");
    let argv = std::fs::read_to_string(d.join("stdin.json.argv")).expect("argv");
    assert_eq!(argv, "0\n", "no arguments beyond the configured ones");
    let env = std::fs::read_to_string(d.join("stdin.json.env")).expect("env");
    assert!(
        !env.contains("touch"),
        "message leaked into the environment"
    );
    assert!(env.lines().any(|l| l == "BATON_EVENT=turn_completed"));
    assert!(env.lines().any(|l| l == "BATON_PROJECT=web"), "{env}");
}

#[test]
fn the_hook_is_told_the_project_even_when_the_transcript_does_not_say() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("env");
    let script = r#"printf '%s\n' "$BATON_PROJECT" >> "$0""#;
    let mut sink = ExecSink::new(ExecConfig::new(sh(script, &[&out]))).expect("sink");
    let mut ev = event(EventKind::TurnCompleted, 1, "done");
    ev.project = Some("my-web\u{1b}[2J-app".to_owned());
    sink.deliver(&ev);
    // No `cwd` in the records: the whole project folder name, never its last word.
    let mut ev = event(EventKind::TurnCompleted, 2, "done");
    ev.project = None;
    ev.path = Some("/home/me/.claude/projects/-home-me-src-my-web-app/s.jsonl".to_owned());
    sink.deliver(&ev);
    let (stats, done) = sink.close(GRACE);
    assert!(done && stats.ok == 2, "{stats:?}");
    let got = std::fs::read_to_string(&out).expect("hook ran");
    // Hooks run concurrently: in either order.
    let mut lines: Vec<&str> = got.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["home-me-src-my-web-app", "my-web-app"]);
}

#[test]
fn only_matching_events_run_the_hook() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("log");
    let mut sink = ExecSink::new(ExecConfig::new(sh(r#"cat >> "$0""#, &[&log]))).expect("sink");
    sink.deliver(&event(EventKind::TurnStarted, 1, "working"));
    sink.deliver(&event(EventKind::Anomaly, 2, "odd"));
    let mut sub = event(EventKind::TurnCompleted, 3, "subagent done");
    sub.agent = Some("a1".to_owned());
    sink.deliver(&sub);
    sink.deliver(&event(EventKind::NeedsInput, 4, "which one?"));
    let (stats, done) = sink.close(GRACE);
    assert!(done);
    assert_eq!(stats.ok, 1, "{stats:?}");
    let text = std::fs::read_to_string(&log).expect("log");
    assert_eq!(text.lines().count(), 1);
    assert!(text.contains("which one?"));
}

#[test]
fn a_program_past_its_timeout_is_killed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pidfile = dir.path().join("pid");
    // `exec` makes the sleeping process the hook itself, so its pid is the one killed.
    let mut cfg = ExecConfig::new(sh(r#"echo $$ > "$0"; exec sleep 60"#, &[&pidfile]));
    cfg.timeout = Duration::from_millis(500);
    let mut sink = ExecSink::new(cfg).expect("sink");
    sink.deliver(&event(EventKind::TurnCompleted, 1, "hi"));
    let (stats, done) = sink.close(GRACE);
    assert!(done, "worker still waiting on the sleeping hook");
    assert_eq!(stats.timed_out, 1, "{stats:?}");
    let pid = std::fs::read_to_string(&pidfile).expect("pid written");
    let proc_dir = Path::new("/proc").join(pid.trim());
    assert!(
        !proc_dir.exists(),
        "hook process {} still exists",
        pid.trim()
    );
}

#[test]
fn a_missing_program_is_counted_not_fatal() {
    let mut sink =
        ExecSink::new(ExecConfig::new(vec!["/nonexistent/baton-hook".to_owned()])).expect("sink");
    sink.deliver(&event(EventKind::TurnCompleted, 1, "hi"));
    let (stats, done) = sink.close(GRACE);
    assert!(done);
    assert_eq!(stats.failed, 1, "{stats:?}");
    assert!(ExecSink::new(ExecConfig::new(Vec::new())).is_err());
}

#[test]
fn concurrency_is_limited() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = dir.path().join("running");
    std::fs::create_dir(&running).expect("dir");
    let peaks = dir.path().join("peaks");
    // Each run marks itself running, records how many are, lingers, and unmarks itself.
    let script = r#"touch "$0/$$"; ls "$0" | wc -l >> "$1"; sleep 0.3; rm "$0/$$""#;
    let mut cfg = ExecConfig::new(sh(script, &[&running, &peaks]));
    cfg.max_concurrent = 2;
    let mut sink = ExecSink::new(cfg).expect("sink");
    for n in 0..6 {
        sink.deliver(&event(EventKind::TurnCompleted, n, "hi"));
    }
    let (stats, done) = sink.close(GRACE);
    assert!(done);
    assert_eq!(stats.ok, 6, "{stats:?}");
    let text = std::fs::read_to_string(&peaks).expect("peaks");
    let counts: Vec<u32> = text.lines().map(|l| l.trim().parse().expect("n")).collect();
    assert_eq!(counts.len(), 6);
    assert!(
        counts.iter().all(|&c| c <= 2),
        "more than 2 at once: {counts:?}"
    );
}

#[test]
fn a_full_queue_drops_instead_of_blocking() {
    let dir = tempfile::tempdir().expect("tempdir");
    let release = dir.path().join("release");
    let log = dir.path().join("log");
    // Every run waits until the test releases it: the one worker stays busy.
    let script = r#"while [ ! -e "$0" ]; do sleep 0.05; done; cat >> "$1""#;
    let mut cfg = ExecConfig::new(sh(script, &[&release, &log]));
    cfg.max_concurrent = 1;
    cfg.queue = 2;
    cfg.timeout = Duration::from_secs(60);
    let mut sink = ExecSink::new(cfg).expect("sink");
    for n in 0..10 {
        sink.deliver(&event(EventKind::TurnCompleted, n, "hi"));
    }
    // At most one running plus two queued were kept.
    let dropped = sink.stats().dropped;
    assert!(dropped >= 7, "dropped {dropped}");
    std::fs::write(&release, b"").expect("release");
    let deadline = Instant::now() + GRACE;
    let (stats, done) = sink.close(deadline - Instant::now());
    assert!(done);
    assert_eq!(stats.ok + stats.dropped, 10, "{stats:?}");
    let ran = std::fs::read_to_string(&log).expect("log").lines().count() as u64;
    assert_eq!(ran, stats.ok);
}

/// `needs_input_grace`: a wait answered inside the grace (a rule approving a tool in
/// 0.2 s) asked nobody and runs no hook; an unanswered one runs it once the grace ends.
#[test]
fn a_question_answered_inside_its_grace_runs_no_hook() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("log");
    let mut sink = ExecSink::new(ExecConfig::new(sh(r#"cat >> "$0""#, &[&log]))).expect("sink");
    let t0 = Instant::now();
    let mut asked = event(EventKind::NeedsInput, 1, "Allow `rm -rf build`?");
    asked.turn = Some("i-2".to_owned());
    sink.deliver_at(&asked, t0);
    let mut approved = event(EventKind::NeedsInputResolved, 2, "");
    approved.turn = Some("i-2".to_owned());
    sink.deliver_at(&approved, t0 + Duration::from_millis(200));
    assert_eq!(sink.tick_at(t0 + Duration::from_secs(5)), None);
    // The next question nobody answers: it runs the hook when its grace is over.
    let mut second = event(EventKind::NeedsInput, 3, "Which database?");
    second.turn = Some("i-3".to_owned());
    sink.deliver_at(&second, t0 + Duration::from_secs(10));
    let next = sink.tick_at(t0 + Duration::from_secs(11));
    assert_eq!(next, Some(t0 + Duration::from_millis(11_500)));
    assert_eq!(sink.tick_at(t0 + Duration::from_millis(11_500)), None);
    let (stats, done) = sink.close(GRACE);
    assert!(done);
    assert_eq!(stats.ok, 1, "{stats:?}");
    let text = std::fs::read_to_string(&log).expect("log");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("Which database?"), "{text}");
    assert!(!text.contains("rm -rf"), "{text}");
}

/// A hook that starts a child in the background, then sleeps for a minute as itself
/// (`exec`); its pid and the child's are written to `$0` and `$1`.
const BACKGROUNDS_A_CHILD: &str = r#"echo $$ > "$0"; sleep 60 & echo $! > "$1"; exec sleep 60"#;

/// Waits up to `GRACE` for every process in `pids` to be gone; returns those left.
fn left(pids: &[u32]) -> Vec<u32> {
    let deadline = Instant::now() + GRACE;
    loop {
        let alive: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|p| common::process_alive(*p))
            .collect();
        if alive.is_empty() || Instant::now() > deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_timed_out_hook_takes_its_background_children_with_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (leader, child) = (dir.path().join("leader"), dir.path().join("child"));
    let mut cfg = ExecConfig::new(sh(BACKGROUNDS_A_CHILD, &[&leader, &child]));
    cfg.timeout = Duration::from_millis(500);
    let mut sink = ExecSink::new(cfg).expect("sink");
    sink.deliver(&event(EventKind::TurnCompleted, 1, "hi"));
    let pids = [common::read_pid(&leader), common::read_pid(&child)];
    // The hook runs in a process group of its own, which its child shares.
    assert_eq!(common::process_group(pids[0]), Some(pids[0]));
    assert_eq!(common::process_group(pids[1]), Some(pids[0]));
    let (stats, done) = sink.close(GRACE);
    assert!(done);
    assert_eq!(stats.timed_out, 1, "{stats:?}");
    assert_eq!(left(&pids), Vec::<u32>::new(), "processes of the hook left");
}

#[test]
fn closing_the_sink_ends_a_running_hook_and_its_children_after_the_grace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (leader, child) = (dir.path().join("leader"), dir.path().join("child"));
    let mut cfg = ExecConfig::new(sh(BACKGROUNDS_A_CHILD, &[&leader, &child]));
    cfg.timeout = Duration::from_secs(3600);
    let mut sink = ExecSink::new(cfg).expect("sink");
    sink.deliver(&event(EventKind::TurnCompleted, 1, "hi"));
    let pids = [common::read_pid(&leader), common::read_pid(&child)];
    let start = Instant::now();
    let (_, done) = sink.close(Duration::from_millis(300));
    let took = start.elapsed();
    assert!(done, "the worker was still waiting on the hook");
    assert!(took < Duration::from_secs(5), "close took {took:?}");
    assert_eq!(left(&pids), Vec::<u32>::new(), "processes of the hook left");
}
