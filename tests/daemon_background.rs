//! The running daemon: a page held for background tasks goes out when `hold_background`
//! runs out (the sink task wakes for it), while the event stream had the completion at
//! once; and a working Codex session whose writer exits ends as interrupted within
//! `liveness_after` plus a sweep.

#![allow(clippy::unwrap_used)]

use crate::common::*;
use serde_json::{Value, json};
use std::fs;
use std::time::{Duration, Instant};

fn hook_runs(path: &std::path::Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_held_page_goes_out_when_the_hold_runs_out() {
    let d = Daemon::tree();
    let pages = d.dir.path().join("pages.jsonl");
    let conf = d.config_home().join("baton");
    fs::create_dir_all(&conf).unwrap();
    fs::write(
        conf.join("config.toml"),
        format!(
            "on_event = [\"sh\", \"-c\", \"cat >> \\\"$0\\\"\", {:?}]\n[desktop]\nenabled = false\n",
            pages.display().to_string()
        ),
    )
    .unwrap();
    let mut d = d.start(&["--hold-background", "3s"]);
    let c = Claude::new();
    let dir = d.claude().join("-home-u-proj");
    fs::create_dir_all(&dir).unwrap();
    let (prompt, turn) = c.prompt("start the server");
    let started = json!({"type":"user","uuid":uuid(),"sessionId":c.session,"timestamp":ts_now(),
        "message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1",
            "content":"Command running in background with ID: b0dev00. Output is being written to: /tmp/x/b0dev00.output"}]},
        "toolUseResult":{"stdout":"","backgroundTaskId":"b0dev00"}});
    let bytes = format!("{prompt}{started}\n{}", c.answer("The server is up."));
    append(&c.path_in(&dir), bytes.as_bytes());
    let ev = d.wait_for("the completion", is("turn_completed", turn.clone()));
    let streamed = Instant::now();
    assert_eq!(ev["background_tasks"], 1);
    // `status` says what is still running (its view may trail the stream a little).
    let mut text = String::new();
    for _ in 0..50 {
        let status = d.baton().arg("status").output().unwrap();
        text = String::from_utf8_lossy(&status.stdout).into_owned();
        if text
            .lines()
            .any(|l| l.starts_with("completed ") && l.contains("+1 background task running"))
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("completed ") && l.contains("+1 background task running")),
        "{text}"
    );
    // Held: the hook has not run yet.
    std::thread::sleep(Duration::from_millis(1000));
    assert!(hook_runs(&pages).is_empty(), "paged while held");
    let deadline = Instant::now() + Duration::from_secs(30);
    while hook_runs(&pages).is_empty() {
        assert!(Instant::now() < deadline, "the held page never went out");
        std::thread::sleep(Duration::from_millis(100));
    }
    let waited = streamed.elapsed();
    let runs = hook_runs(&pages);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["turn"], turn.as_str());
    assert_eq!(runs[0]["background_tasks"], 1);
    assert!(
        waited >= Duration::from_millis(1500),
        "paged after {waited:?}, before the hold ran out"
    );
    let events = d.stop();
    assert_eq!(count(&events, "turn_completed", &turn), 1);
}

#[test]
fn a_working_session_whose_writer_exits_is_interrupted() {
    let mut d =
        Daemon::tree().start(&["--liveness-after", "1s", "--debug-sweep-interval", "500ms"]);
    let x = Codex::new();
    let (path, turn) = x.working_in(&d.codex());
    let writer = writer_of(&path);
    d.wait_for("the turn start", is("turn_started", turn.clone()));
    // Several sweeps past liveness_after with the writer alive: still working.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(
        count(&d.events(), "turn_interrupted", &turn),
        0,
        "interrupted while its writer lived"
    );
    writer.exit();
    let gone = Instant::now();
    let ev = d.wait_for("the interruption", is("turn_interrupted", turn.clone()));
    assert_eq!(ev["reason"], "writer_gone");
    // liveness_after (already past) plus one sweep, with slack for a loaded machine.
    assert!(
        gone.elapsed() < Duration::from_secs(20),
        "{:?}",
        gone.elapsed()
    );
    let status = d.baton().args(["status", "--json"]).output().unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains(&x.session) && l.contains("\"state\":\"interrupted\"")),
        "{text}"
    );
    d.stop();
}
